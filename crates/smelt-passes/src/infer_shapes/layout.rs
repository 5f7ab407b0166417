//! Layout ops: shapes that move (reshape, transpose, squeeze...), shapes read from constant
//! inputs (reshape's target, slice bounds, expand, tile, pad), and shape queries.

use super::dims::{add, add_int, div_int, mul, product, quotient};
use super::{axis, broadcast, tensor_type, typed, In, Outs};
use smelt_ir::op::LayoutOp;
use smelt_ir::{DType, Dim};

/// Output types of a layout op.
pub(super) fn infer(op: &LayoutOp, x: &In) -> Option<Outs> {
    use LayoutOp::*;
    let dt = x.dtype(0);
    let one = |s: Option<Vec<Dim>>| Some(vec![typed(dt, s)]);
    match op {
        Identity => Some(vec![x.ty(0)]),
        Reshape { shape, allowzero } => {
            let target = shape.clone().or_else(|| x.ints(1));
            one(x
                .shape(0)
                .zip(target)
                .and_then(|(s, t)| reshape(&s, &t, *allowzero)))
        }
        Flatten { axis: a } => one(x.shape(0).and_then(|s| {
            let a = if *a < 0 { *a + s.len() as i64 } else { *a };
            let a = usize::try_from(a).ok().filter(|&a| a <= s.len())?;
            Some(vec![product(&s[..a]), product(&s[a..])])
        })),
        Squeeze { axes } => {
            let axes = axes.clone().or_else(|| x.ints(1));
            one(x
                .shape(0)
                .and_then(|s| squeeze(&s, axes.as_deref(), x.has(1))))
        }
        Unsqueeze { axes } => {
            let axes = axes.clone().or_else(|| x.ints(1));
            one(x.shape(0).zip(axes).and_then(|(s, a)| unsqueeze(&s, &a)))
        }
        Transpose { perm } => one(x.shape(0).and_then(|s| {
            let perm: Vec<i64> = perm
                .clone()
                .unwrap_or_else(|| (0..s.len() as i64).rev().collect());
            if perm.len() != s.len() {
                return None;
            }
            perm.iter()
                .map(|&p| usize::try_from(p).ok().and_then(|p| s.get(p).cloned()))
                .collect()
        })),
        Concat { axis: a } => one(concat(x, *a)),
        Split {
            axis: a,
            split,
            num_outputs,
        } => Some(self::split(x, *a, split.clone(), *num_outputs)),
        Slice { starts, ends, axes } => one(slice(x, starts, ends, axes)),
        Gather { axis: a } => one(x.shape(0).zip(x.shape(1)).and_then(|(d, i)| {
            let a = axis(*a, d.len())?;
            let mut o = d[..a].to_vec();
            o.extend(i);
            o.extend_from_slice(&d[a + 1..]);
            Some(o)
        })),
        GatherElements { .. } => one(x.shape(1)),
        ScatterElements { .. } | ScatterND { .. } | Trilu { .. } => one(x.shape(0)),
        EyeLike { dtype, .. } => Some(vec![typed(dtype.or(dt), x.shape(0))]),
        Expand => one(x.shape(0).zip(x.ints(1)).and_then(|(s, t)| {
            let t: Option<Vec<Dim>> = t
                .iter()
                .map(|&d| u64::try_from(d).ok().map(Dim::Known))
                .collect();
            broadcast(&[s, t?])
        })),
        Tile { legacy_axis: false } => one(x.shape(0).zip(x.ints(1)).and_then(|(s, r)| {
            if r.len() != s.len() {
                return None;
            }
            s.iter()
                .zip(&r)
                .map(|(d, &k)| u64::try_from(k).ok().map(|k| mul(d, &Dim::Known(k))))
                .collect()
        })),
        Pad { pads, .. } => {
            let pads = pads.clone().or_else(|| x.ints(1));
            one(x.shape(0).zip(pads).and_then(|(s, p)| {
                let axes: Vec<usize> = if x.has(3) {
                    x.ints(3)?
                        .iter()
                        .map(|&a| axis(a, s.len()))
                        .collect::<Option<_>>()?
                } else {
                    (0..s.len()).collect()
                };
                let n = axes.len();
                if p.len() != 2 * n {
                    return None;
                }
                let mut o = s.clone();
                for (k, &a) in axes.iter().enumerate() {
                    o[a] = add_int(&s[a], p[k] + p[n + k]);
                }
                Some(o)
            }))
        }
        Shape { start, end } => {
            let n = x.shape(0).map(|s| {
                let (a, b) = shape_range(s.len(), *start, *end);
                b.saturating_sub(a)
            });
            Some(vec![typed(
                Some(DType::I64),
                n.map(|n| vec![Dim::Known(n as u64)]),
            )])
        }
        Size => Some(vec![Some(tensor_type(DType::I64, vec![]))]),
        ConstantOfShape { value } => {
            let dtype = value.as_ref().map_or(DType::F32, |v| v.dtype());
            let s = x.ints(0).and_then(|v| {
                v.iter()
                    .map(|&d| u64::try_from(d).ok().map(Dim::Known))
                    .collect::<Option<Vec<_>>>()
            });
            let s = s.or_else(|| {
                // The rank is the length of the shape input.
                match x.shape(0)?.as_slice() {
                    [Dim::Known(n)] => Some(vec![Dim::Unknown; *n as usize]),
                    _ => None,
                }
            });
            Some(vec![typed(Some(dtype), s)])
        }
        Range => {
            let n = range_len(x);
            Some(vec![typed(
                dt,
                Some(vec![n.map_or(Dim::Unknown, Dim::Known)]),
            )])
        }
        DepthToSpace { blocksize, .. } | SpaceToDepth { blocksize, .. } => {
            let b = *blocksize;
            let up = matches!(op, DepthToSpace { .. });
            one(x.shape(0).filter(|s| s.len() == 4 && b > 0).map(|s| {
                let bb = Dim::Known((b * b) as u64);
                let bd = Dim::Known(b as u64);
                if up {
                    vec![
                        s[0].clone(),
                        div_int(&s[1], b * b, false),
                        mul(&s[2], &bd),
                        mul(&s[3], &bd),
                    ]
                } else {
                    vec![
                        s[0].clone(),
                        mul(&s[1], &bb),
                        div_int(&s[2], b, false),
                        div_int(&s[3], b, false),
                    ]
                }
            }))
        }
        NonZero => Some(vec![typed(
            Some(DType::I64),
            x.shape(0)
                .map(|s| vec![Dim::Known(s.len() as u64), Dim::Unknown]),
        )]),
        _ => None,
    }
}

/// The dims `start..end` Shape reports for a rank-`r` input (both clamped).
pub(crate) fn shape_range(r: usize, start: i64, end: Option<i64>) -> (usize, usize) {
    let clamp = |v: i64| {
        let v = if v < 0 { v + r as i64 } else { v };
        v.clamp(0, r as i64) as usize
    };
    (clamp(start), clamp(end.unwrap_or(r as i64)))
}

/// Reshape's output: 0 copies the input dim (unless `allowzero`), -1 takes the rest.
fn reshape(s: &[Dim], target: &[i64], allowzero: bool) -> Option<Vec<Dim>> {
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, &t) in target.iter().enumerate() {
        out.push(match t {
            -1 if infer_at.is_none() => {
                infer_at = Some(i);
                Dim::Known(1)
            }
            0 if !allowzero => s.get(i)?.clone(),
            t if t >= 0 => Dim::Known(t as u64),
            _ => return None,
        });
    }
    if let Some(i) = infer_at {
        let others: Vec<Dim> = out
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, d)| d.clone())
            .collect();
        out[i] = quotient(s, &others);
    }
    Some(out)
}

fn squeeze(s: &[Dim], axes: Option<&[i64]>, axes_input: bool) -> Option<Vec<Dim>> {
    let drop: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&a| axis(a, s.len())).collect::<Option<_>>()?,
        // An axes input that is not a constant: nothing is known.
        None if axes_input => return None,
        None => {
            if s.iter().any(|d| !matches!(d, Dim::Known(_))) {
                return None;
            }
            (0..s.len()).filter(|&i| s[i] == Dim::Known(1)).collect()
        }
    };
    Some(
        s.iter()
            .enumerate()
            .filter(|(i, _)| !drop.contains(i))
            .map(|(_, d)| d.clone())
            .collect(),
    )
}

fn unsqueeze(s: &[Dim], axes: &[i64]) -> Option<Vec<Dim>> {
    let r = s.len() + axes.len();
    let mut at: Vec<usize> = axes.iter().map(|&a| axis(a, r)).collect::<Option<_>>()?;
    at.sort_unstable();
    at.dedup();
    if at.len() != axes.len() {
        return None;
    }
    let mut rest = s.iter();
    (0..r)
        .map(|i| {
            if at.contains(&i) {
                Some(Dim::Known(1))
            } else {
                rest.next().cloned()
            }
        })
        .collect()
}

fn concat(x: &In, a: i64) -> Option<Vec<Dim>> {
    let shapes: Vec<Vec<Dim>> = (0..x.len())
        .filter(|&i| x.has(i))
        .map(|i| x.shape(i))
        .collect::<Option<_>>()?;
    let first = shapes.first()?;
    let a = axis(a, first.len())?;
    let mut out = first.clone();
    for s in &shapes[1..] {
        if s.len() != out.len() {
            return None;
        }
        for (i, d) in s.iter().enumerate() {
            if i == a {
                out[a] = add(&out[a], d);
            } else if !matches!(out[i], Dim::Known(_)) && d != &Dim::Unknown {
                out[i] = d.clone();
            }
        }
    }
    Some(out)
}

fn split(x: &In, a: i64, attr: Option<Vec<i64>>, num_outputs: Option<i64>) -> Outs {
    let dt = x.dtype(0);
    let n = x.n_outputs();
    let shapes = (|| {
        let s = x.shape(0)?;
        let a = axis(a, s.len())?;
        let sizes: Vec<Dim> = match attr.or_else(|| if x.has(1) { x.ints(1) } else { None }) {
            Some(v) => v
                .iter()
                .map(|&d| u64::try_from(d).ok().map(Dim::Known))
                .collect::<Option<_>>()?,
            None if x.has(1) => return None,
            None => {
                let parts = num_outputs.unwrap_or(n as i64);
                if parts <= 0 {
                    return None;
                }
                let chunk = div_int(&s[a], parts, true);
                let mut v = vec![chunk.clone(); parts as usize];
                if let (Dim::Known(total), Dim::Known(c)) = (&s[a], &chunk) {
                    let last = total.checked_sub(c * (parts as u64 - 1))?;
                    v[parts as usize - 1] = Dim::Known(last);
                } else if parts > 1 {
                    return None;
                }
                v
            }
        };
        Some(
            sizes
                .into_iter()
                .map(|d| {
                    let mut o = s.clone();
                    o[a] = d;
                    o
                })
                .collect::<Vec<_>>(),
        )
    })();
    match shapes {
        Some(v) => v.into_iter().map(|s| typed(dt, Some(s))).collect(),
        None => vec![typed(dt, None); n],
    }
}

fn slice(
    x: &In,
    starts: &Option<Vec<i64>>,
    ends: &Option<Vec<i64>>,
    axes: &Option<Vec<i64>>,
) -> Option<Vec<Dim>> {
    let s = x.shape(0)?;
    let (st, en, ax, steps) = if starts.is_some() {
        (starts.clone()?, ends.clone()?, axes.clone(), None)
    } else {
        let ax = if x.has(3) { Some(x.ints(3)?) } else { None };
        let steps = if x.has(4) { Some(x.ints(4)?) } else { None };
        (x.ints(1)?, x.ints(2)?, ax, steps)
    };
    let ax: Vec<i64> = ax.unwrap_or_else(|| (0..st.len() as i64).collect());
    if en.len() != st.len() || ax.len() != st.len() {
        return None;
    }
    let mut out = s.clone();
    for k in 0..st.len() {
        let a = axis(ax[k], s.len())?;
        let step = steps.as_ref().map_or(Some(1), |v| v.get(k).copied())?;
        out[a] = slice_dim(&s[a], st[k], en[k], step)?;
    }
    Some(out)
}

/// The length of one sliced axis.
fn slice_dim(d: &Dim, start: i64, end: i64, step: i64) -> Option<Dim> {
    if step == 0 {
        return None;
    }
    let Dim::Known(n) = d else {
        // The whole axis, or everything from a start: known without the size.
        return Some(if step == 1 && end >= i32::MAX as i64 && start == 0 {
            d.clone()
        } else {
            Dim::Unknown
        });
    };
    let n = *n as i64;
    if n == 0 {
        return Some(Dim::Known(0));
    }
    let fix = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    let (s, e) = (fix(start), fix(end));
    let len = if step > 0 {
        let (s, e) = (s.clamp(0, n), e.clamp(0, n));
        (e - s + step - 1).div_euclid(step)
    } else {
        let (s, e) = (s.clamp(0, n - 1), e.clamp(-1, n - 1));
        (s - e + (-step) - 1).div_euclid(-step)
    };
    Some(Dim::Known(len.max(0) as u64))
}

/// Range's length from constant inputs.
fn range_len(x: &In) -> Option<u64> {
    let (s, l, d) = (x.constant(0)?, x.constant(1)?, x.constant(2)?);
    if s.dtype().is_int() {
        let (s, l, d) = (
            *s.to_i64().ok()?.first()? as i128,
            *l.to_i64().ok()?.first()? as i128,
            *d.to_i64().ok()?.first()? as i128,
        );
        if d == 0 {
            return None;
        }
        let span = l - s;
        let q = span / d;
        let n = if span % d != 0 && ((span > 0) == (d > 0)) {
            q + 1
        } else {
            q
        };
        Some(n.max(0) as u64)
    } else {
        let (s, l, d) = (
            *s.to_f64().ok()?.first()?,
            *l.to_f64().ok()?.first()?,
            *d.to_f64().ok()?.first()?,
        );
        let n = ((l - s) / d).ceil();
        (n.is_finite()).then_some(n.max(0.0) as u64)
    }
}
