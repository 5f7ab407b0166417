//! Ops that keep the elements and move the shape: Reshape's target, Squeeze, Unsqueeze,
//! Concat and Split (an invalid target or axis is an error naming what is wrong).

use super::dims::{add, div_int, quotient};
use super::layout::{checked_axis, sizes};
use super::{typed, In, Outs};
use smelt_ir::{bail, ensure, err, Dim, Result};

/// Reshape's output: 0 copies the input dim (unless `allowzero`), -1 takes the rest. An
/// invalid target (a dim below -1, two -1s, a 0 past the input's rank, a size that does not
/// match the input's) is an error; None when the input's shape is unknown.
pub(super) fn reshape(
    s: Option<&[Dim]>,
    target: &[i64],
    allowzero: bool,
) -> Result<Option<Vec<Dim>>> {
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, &t) in target.iter().enumerate() {
        out.push(match t {
            -1 => {
                ensure!(
                    infer_at.is_none(),
                    InvalidModel,
                    "more than one -1 in shape {target:?}"
                );
                infer_at = Some(i);
                Dim::Known(1)
            }
            0 if !allowzero => match s {
                Some(s) => s.get(i).cloned().ok_or_else(|| {
                    err!(
                        InvalidModel,
                        "shape {target:?} copies dimension {i} (a 0), but the input has rank {}",
                        s.len()
                    )
                })?,
                None => Dim::Unknown,
            },
            t if t >= 0 => Dim::Known(t as u64),
            _ => bail!(InvalidModel, "invalid dimension {t} in shape {target:?}"),
        });
    }
    if allowzero && infer_at.is_some() && target.contains(&0) {
        bail!(
            InvalidModel,
            "shape {target:?} has both -1 and 0 with allowzero set"
        );
    }
    let Some(s) = s else { return Ok(None) };
    let known = |d: &[Dim]| -> Option<u64> {
        d.iter().try_fold(1u64, |acc, d| match d {
            Dim::Known(n) => acc.checked_mul(*n),
            _ => None,
        })
    };
    let what = || {
        format!(
            "cannot reshape {} into {target:?}",
            smelt_ir::dim::format_shape(s)
        )
    };
    match infer_at {
        Some(i) => {
            let others: Vec<Dim> = out
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, d)| d.clone())
                .collect();
            if let (Some(total), Some(part)) = (known(s), known(&others)) {
                ensure!(
                    part != 0 && total % part == 0,
                    InvalidModel,
                    "{}: {total} elements",
                    what()
                );
            }
            out[i] = quotient(s, &others);
        }
        None => {
            let all_known = out.iter().all(|d| matches!(d, Dim::Known(_)));
            if let (Some(a), true) = (known(s), all_known) {
                // A product that overflows is no count of elements the input has.
                let b = known(&out);
                ensure!(
                    b == Some(a),
                    InvalidModel,
                    "{}: {a} elements, not {}",
                    what(),
                    b.map_or("more than 2^64".to_string(), |b| b.to_string())
                );
            }
        }
    }
    Ok(Some(out))
}

pub(super) fn squeeze(
    s: &[Dim],
    axes: Option<&[i64]>,
    axes_input: bool,
) -> Result<Option<Vec<Dim>>> {
    let drop: Vec<usize> = match axes {
        Some(a) => {
            let drop = distinct_axes(a, s.len())?;
            for &i in &drop {
                ensure!(
                    !matches!(s[i], Dim::Known(n) if n != 1),
                    InvalidModel,
                    "cannot squeeze axis {i} of size {}",
                    s[i]
                );
            }
            drop
        }
        // An axes input that is not a constant: nothing is known.
        None if axes_input => return Ok(None),
        None => {
            if s.iter().any(|d| !matches!(d, Dim::Known(_))) {
                return Ok(None);
            }
            (0..s.len()).filter(|&i| s[i] == Dim::Known(1)).collect()
        }
    };
    Ok(Some(
        s.iter()
            .enumerate()
            .filter(|(i, _)| !drop.contains(i))
            .map(|(_, d)| d.clone())
            .collect(),
    ))
}

/// Axes in [-r, r-1] as distinct indices; an error names one out of range or repeated.
pub(super) fn distinct_axes(axes: &[i64], r: usize) -> Result<Vec<usize>> {
    let at: Vec<usize> = axes
        .iter()
        .map(|&a| checked_axis(a, r))
        .collect::<Result<_>>()?;
    let mut sorted = at.clone();
    sorted.sort_unstable();
    sorted.dedup();
    ensure!(
        sorted.len() == at.len(),
        InvalidModel,
        "axes {axes:?} repeat an axis"
    );
    Ok(at)
}

pub(super) fn unsqueeze(s: &[Dim], axes: &[i64]) -> Result<Vec<Dim>> {
    let r = s.len() + axes.len();
    let at = distinct_axes(axes, r)?;
    let mut rest = s.iter();
    Ok((0..r)
        .map(|i| {
            if at.contains(&i) {
                Dim::Known(1)
            } else {
                rest.next().cloned().unwrap_or(Dim::Unknown)
            }
        })
        .collect())
}

pub(super) fn concat(x: &In, a: i64) -> Result<Option<Vec<Dim>>> {
    let shapes: Option<Vec<Vec<Dim>>> = (0..x.len())
        .filter(|&i| x.has(i))
        .map(|i| x.shape(i))
        .collect();
    let Some(shapes) = shapes else {
        return Ok(None);
    };
    let Some(first) = shapes.first() else {
        bail!(InvalidModel, "Concat needs at least one input")
    };
    let a = checked_axis(a, first.len())?;
    let mut out = first.clone();
    for (k, s) in shapes.iter().enumerate().skip(1) {
        ensure!(
            s.len() == out.len(),
            InvalidModel,
            "input {k} has rank {} ({}), input 0 has rank {}",
            s.len(),
            smelt_ir::dim::format_shape(s),
            out.len()
        );
        for (i, d) in s.iter().enumerate() {
            if i == a {
                out[a] = add(&out[a], d);
            } else if let (Dim::Known(p), Dim::Known(q)) = (&out[i], d) {
                ensure!(
                    p == q,
                    InvalidModel,
                    "input {k} has size {q} in dimension {i}, other inputs {p}"
                );
            } else if !matches!(out[i], Dim::Known(_)) && d != &Dim::Unknown {
                out[i] = d.clone();
            }
        }
    }
    Ok(Some(out))
}

pub(super) fn split(
    x: &In,
    a: i64,
    attr: Option<Vec<i64>>,
    num_outputs: Option<i64>,
) -> Result<Outs> {
    let dt = x.dtype(0);
    let n = x.n_outputs();
    let unknown = || vec![typed(dt, None); n];
    let Some(s) = x.shape(0) else {
        return Ok(unknown());
    };
    let a = checked_axis(a, s.len())?;
    let sizes: Vec<Dim> = match attr.or_else(|| if x.has(1) { x.ints(1) } else { None }) {
        Some(v) => {
            let sizes = sizes(&v, "split")?;
            ensure!(
                v.len() == n,
                InvalidModel,
                "split {v:?} has {} parts for {n} outputs",
                v.len()
            );
            if let Dim::Known(total) = s[a] {
                let sum = v.iter().try_fold(0i64, |a, &b| a.checked_add(b));
                let sum = sum.ok_or_else(|| err!(InvalidModel, "split {v:?} overflows"))?;
                ensure!(
                    sum == total as i64,
                    InvalidModel,
                    "split {v:?} sums to {sum}, but axis {a} has {total} elements"
                );
            }
            sizes
        }
        None if x.has(1) => return Ok(unknown()),
        None => {
            let parts = num_outputs.unwrap_or(n as i64);
            ensure!(parts > 0, InvalidModel, "cannot split into {parts} parts");
            ensure!(
                parts as u64 == n as u64,
                InvalidModel,
                "split into {parts} parts, but the node has {n} outputs"
            );
            let chunk = div_int(&s[a], parts, true);
            let mut v = vec![chunk.clone(); parts as usize];
            if let (Dim::Known(total), Dim::Known(c)) = (&s[a], &chunk) {
                let used = c.checked_mul(parts as u64 - 1);
                let Some(last) = used.and_then(|u| total.checked_sub(u)) else {
                    bail!(
                        InvalidModel,
                        "axis {a} of {total} elements does not split into {parts} parts"
                    )
                };
                v[parts as usize - 1] = Dim::Known(last);
            } else if parts > 1 {
                return Ok(unknown());
            }
            v
        }
    };
    Ok(sizes
        .into_iter()
        .map(|d| {
            let mut o = s.clone();
            o[a] = d;
            typed(dt, Some(o))
        })
        .collect())
}
