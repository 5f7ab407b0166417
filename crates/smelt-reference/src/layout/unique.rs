//! Unique: unique elements (or slices along an axis), with first indices, inverse indices
//! and counts, sorted or in first-occurrence order.

use super::super::{Ctx, Inputs};
use super::norm_axis;
use smelt_ir::{bail, numel, DType, Data, Result, Tensor, Value};
use std::cmp::Ordering;

/// Elements in a form with a total order (numpy's: -0 == 0, NaNs equal and last).
enum Keys {
    Real(Vec<f64>),
    Int(Vec<i128>),
    Str(Vec<String>),
    Complex(Vec<[f64; 2]>),
}

fn canon(x: f64) -> f64 {
    if x == 0.0 {
        0.0
    } else if x.is_nan() {
        f64::NAN
    } else {
        x
    }
}

impl Keys {
    fn of(t: &Tensor) -> Result<Keys> {
        Ok(match t.data() {
            Data::Str(v) => Keys::Str(v.to_vec()),
            Data::C64(v) => Keys::Complex(
                v.iter()
                    .map(|c| [canon(c[0] as f64), canon(c[1] as f64)])
                    .collect(),
            ),
            Data::C128(v) => Keys::Complex(v.iter().map(|c| [canon(c[0]), canon(c[1])]).collect()),
            Data::U64(v) => Keys::Int(v.iter().map(|&x| x as i128).collect()),
            _ if t.dtype().is_int() || t.dtype() == DType::Bool => {
                Keys::Int(t.to_i64()?.into_iter().map(|x| x as i128).collect())
            }
            _ => Keys::Real(t.to_f64()?.into_iter().map(canon).collect()),
        })
    }

    fn cmp(&self, i: usize, j: usize) -> Ordering {
        match self {
            Keys::Real(v) => v[i].total_cmp(&v[j]),
            Keys::Int(v) => v[i].cmp(&v[j]),
            Keys::Str(v) => v[i].cmp(&v[j]),
            Keys::Complex(v) => v[i][0]
                .total_cmp(&v[j][0])
                .then(v[i][1].total_cmp(&v[j][1])),
        }
    }
}

pub(super) fn unique(x: &Inputs, cx: &Ctx, axis: Option<i64>, sorted: bool) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let keys = Keys::of(t)?;
    let (shape, a) = match axis {
        None => (vec![t.len()], 0),
        Some(ax) => {
            if t.rank() == 0 {
                bail!(InvalidModel, "Unique with an axis needs rank >= 1");
            }
            (t.shape().to_vec(), norm_axis(ax, t.rank())?)
        }
    };
    let dim = shape[a];
    let outer = numel(&shape[..a])?;
    let inner = numel(&shape[a + 1..])?;
    // Flat element positions of slice `s`, in row-major order of the other dims.
    let elems =
        |s: usize| (0..outer).flat_map(move |o| (0..inner).map(move |i| (o * dim + s) * inner + i));
    let cmp = |p: &usize, q: &usize| {
        for (i, j) in elems(*p).zip(elems(*q)) {
            match keys.cmp(i, j) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        Ordering::Equal
    };
    let mut order: Vec<usize> = (0..dim).collect();
    order.sort_by(cmp); // stable: the first of equal slices comes first
                        // Groups of equal slices: (first index, count); and each slice's group.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    let mut group_of = vec![0usize; dim];
    for (k, &s) in order.iter().enumerate() {
        if k > 0 && cmp(&order[k - 1], &s) == Ordering::Equal {
            if let Some(g) = groups.last_mut() {
                g.1 += 1;
            }
        } else {
            groups.push((s, 1));
        }
        group_of[s] = groups.len() - 1;
    }
    // Output position of each group.
    let mut pos: Vec<usize> = (0..groups.len()).collect();
    if !sorted {
        pos.sort_by_key(|&g| groups[g].0);
    }
    let mut rank_of = vec![0usize; groups.len()];
    for (p, &g) in pos.iter().enumerate() {
        rank_of[g] = p;
    }
    let firsts: Vec<usize> = pos.iter().map(|&g| groups[g].0).collect();
    let mut yshape = shape.clone();
    yshape[a] = firsts.len();
    let mut idx = Vec::with_capacity(super::check_size(&yshape)?);
    for o in 0..outer {
        for &s in &firsts {
            let base = (o * dim + s) * inner;
            idx.extend(base..base + inner);
        }
    }
    let y = t.take(yshape, &idx)?;
    let ints = |v: Vec<i64>| Tensor::from_i64_vec(vec![v.len()], v);
    let mut out = vec![Value::Tensor(y)];
    if cx.n_outputs > 1 {
        out.push(ints(firsts.iter().map(|&s| s as i64).collect())?.into());
    }
    if cx.n_outputs > 2 {
        out.push(ints(group_of.iter().map(|&g| rank_of[g] as i64).collect())?.into());
    }
    if cx.n_outputs > 3 {
        out.push(ints(pos.iter().map(|&g| groups[g].1 as i64).collect())?.into());
    }
    Ok(out)
}
