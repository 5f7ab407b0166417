//! Layout ops: shapes that move (reshape, transpose, squeeze...), shapes read from constant
//! inputs (reshape's target, slice bounds, expand, tile, pad), and shape queries.

use super::dims::{add_int, div_int, mul, product};
use super::reshape::{concat, distinct_axes, reshape, split, squeeze, unsqueeze};
use super::{axis, tensor_type, try_broadcast, typed, In, Outs};
use smelt_ir::op::LayoutOp;
use smelt_ir::{ensure, err, DType, Dim, Result, Tensor};

/// The highest rank a shape operand's length may give an output (a declared length of
/// 2^40 is no rank to allocate; beyond this the rank stays unknown).
const MAX_RANK: u64 = 1024;

/// Output types of a layout op; an error when the node's constant operands do not fit its
/// input (a Reshape to `-5`, a permutation of the wrong rank...).
pub(super) fn infer(op: &LayoutOp, x: &In) -> Result<Option<Outs>> {
    use LayoutOp::*;
    let dt = x.dtype(0);
    let one = |s: Option<Vec<Dim>>| Ok(Some(vec![typed(dt, s)]));
    match op {
        Identity => Ok(Some(vec![x.ty(0)])),
        Reshape { shape, allowzero } => {
            let Some(target) = shape.clone().or_else(|| x.ints(1)) else {
                // The rank is the length of the shape input.
                return one(match x.shape(1).as_deref() {
                    Some([Dim::Known(n)]) if *n <= MAX_RANK => {
                        Some(vec![Dim::Unknown; *n as usize])
                    }
                    _ => None,
                });
            };
            one(reshape(x.shape(0).as_deref(), &target, *allowzero)?)
        }
        Flatten { axis: a } => one(match x.shape(0) {
            Some(s) => {
                let r = s.len() as i64;
                let a = if *a < 0 { *a + r } else { *a };
                ensure!(
                    (0..=r).contains(&a),
                    InvalidModel,
                    "axis {a} is out of range for rank {r}"
                );
                let a = a as usize;
                Some(vec![product(&s[..a]), product(&s[a..])])
            }
            None => None,
        }),
        Squeeze { axes } => {
            let axes = axes.clone().or_else(|| x.ints(1));
            one(match x.shape(0) {
                Some(s) => squeeze(&s, axes.as_deref(), x.has(1))?,
                None => None,
            })
        }
        Unsqueeze { axes } => {
            let axes = axes.clone().or_else(|| x.ints(1));
            one(match (x.shape(0), axes) {
                (Some(s), Some(a)) => Some(unsqueeze(&s, &a)?),
                _ => None,
            })
        }
        Transpose { perm } => one(match x.shape(0) {
            Some(s) => {
                let perm: Vec<i64> = perm
                    .clone()
                    .unwrap_or_else(|| (0..s.len() as i64).rev().collect());
                let mut seen = vec![false; s.len()];
                let ok = perm.len() == s.len()
                    && perm.iter().all(|&p| {
                        usize::try_from(p)
                            .ok()
                            .filter(|&p| p < s.len())
                            .is_some_and(|p| !std::mem::replace(&mut seen[p], true))
                    });
                ensure!(
                    ok,
                    InvalidModel,
                    "perm {perm:?} is not a permutation of the input's {} axes",
                    s.len()
                );
                Some(perm.iter().map(|&p| s[p as usize].clone()).collect())
            }
            None => None,
        }),
        Concat { axis: a } => one(concat(x, *a)?),
        Split {
            axis: a,
            split: parts,
            num_outputs,
        } => Ok(Some(split(x, *a, parts.clone(), *num_outputs)?)),
        Slice { starts, ends, axes } => one(slice(x, starts, ends, axes)?),
        Gather { axis: a } => one(match (x.shape(0), x.shape(1)) {
            (Some(d), i) => {
                let a = checked_axis(*a, d.len())?;
                i.map(|i| {
                    let mut o = d[..a].to_vec();
                    o.extend(i);
                    o.extend_from_slice(&d[a + 1..]);
                    o
                })
            }
            _ => None,
        }),
        GatherElements { .. } => one(x.shape(1)),
        ScatterElements { .. } | ScatterND { .. } | Trilu { .. } => one(x.shape(0)),
        EyeLike { dtype, .. } => Ok(Some(vec![typed(dtype.or(dt), x.shape(0))])),
        Expand => one(match (x.shape(0), x.ints(1)) {
            (Some(s), Some(t)) => Some(try_broadcast(&[s, sizes(&t, "shape")?])?),
            _ => None,
        }),
        Tile { legacy_axis: false } => one(match (x.shape(0), x.ints(1)) {
            (Some(s), Some(r)) => {
                ensure!(
                    r.len() == s.len(),
                    InvalidModel,
                    "{} repeats for an input of rank {}",
                    r.len(),
                    s.len()
                );
                let r = sizes(&r, "repeats")?;
                Some(s.iter().zip(&r).map(|(d, k)| mul(d, k)).collect())
            }
            _ => None,
        }),
        Pad { pads, .. } => {
            let pads = pads.clone().or_else(|| x.ints(1));
            // The axes are asked for even when the pads are unknown, so both are recorded.
            if x.has(3) {
                let _ = x.ints(3);
            }
            one(match (x.shape(0), pads) {
                (Some(s), Some(p)) => pad(x, &s, &p)?,
                _ => None,
            })
        }
        Shape { start, end } => {
            let n = x.shape(0).map(|s| {
                let (a, b) = shape_range(s.len(), *start, *end);
                b.saturating_sub(a)
            });
            Ok(Some(vec![typed(
                Some(DType::I64),
                n.map(|n| vec![Dim::Known(n as u64)]),
            )]))
        }
        Size => Ok(Some(vec![Some(tensor_type(DType::I64, vec![]))])),
        ConstantOfShape { value } => {
            let dtype = value.as_ref().map_or(DType::F32, |v| v.dtype());
            let s = match x.ints(0) {
                Some(v) => Some(sizes(&v, "shape")?),
                // The rank is the length of the shape input.
                None => match x.shape(0).as_deref() {
                    Some([Dim::Known(n)]) if *n <= MAX_RANK => {
                        Some(vec![Dim::Unknown; *n as usize])
                    }
                    _ => None,
                },
            };
            Ok(Some(vec![typed(Some(dtype), s)]))
        }
        Range => {
            let n = range_len(x)?;
            Ok(Some(vec![typed(
                dt,
                Some(vec![n.map_or(Dim::Unknown, Dim::Known)]),
            )]))
        }
        DepthToSpace { blocksize, .. } | SpaceToDepth { blocksize, .. } => {
            let b = *blocksize;
            let up = matches!(op, DepthToSpace { .. });
            let Some(s) = x.shape(0) else {
                return one(None);
            };
            ensure!(
                s.len() == 4 && b > 0,
                InvalidModel,
                "needs a 4-D input and a positive blocksize, got rank {} and blocksize {b}",
                s.len()
            );
            let area = b
                .checked_mul(b)
                .ok_or_else(|| smelt_ir::err!(InvalidModel, "blocksize {b} squared overflows"))?;
            let divides = |d: &Dim, k: i64| !matches!(d, Dim::Known(n) if n % k as u64 != 0);
            let bb = Dim::Known(area as u64);
            let bd = Dim::Known(b as u64);
            if up {
                ensure!(
                    divides(&s[1], area),
                    InvalidModel,
                    "{} channels do not split into blocks of {b}x{b}",
                    s[1]
                );
                one(Some(vec![
                    s[0].clone(),
                    div_int(&s[1], area, false),
                    mul(&s[2], &bd),
                    mul(&s[3], &bd),
                ]))
            } else {
                ensure!(
                    divides(&s[2], b) && divides(&s[3], b),
                    InvalidModel,
                    "height {} and width {} must be multiples of blocksize {b}",
                    s[2],
                    s[3]
                );
                one(Some(vec![
                    s[0].clone(),
                    mul(&s[1], &bb),
                    div_int(&s[2], b, false),
                    div_int(&s[3], b, false),
                ]))
            }
        }
        NonZero => Ok(Some(vec![typed(
            Some(DType::I64),
            x.shape(0)
                .map(|s| vec![Dim::Known(s.len() as u64), Dim::Unknown]),
        )])),
        _ => super::indexing::infer(op, x),
    }
}

/// An axis in [-r, r-1] as an index; an error otherwise.
pub(super) fn checked_axis(a: i64, r: usize) -> Result<usize> {
    axis(a, r).ok_or_else(|| err!(InvalidModel, "axis {a} is out of range for rank {r}"))
}

/// Non-negative sizes (a shape or repeats input) as dims; an error names a negative one.
pub(super) fn sizes(v: &[i64], what: &str) -> Result<Vec<Dim>> {
    v.iter()
        .map(|&d| {
            u64::try_from(d)
                .map(Dim::Known)
                .map_err(|_| err!(InvalidModel, "invalid size {d} in {what} {v:?}"))
        })
        .collect()
}

/// Pad's output: each padded axis grows by its two pads (negative pads crop).
fn pad(x: &In, s: &[Dim], p: &[i64]) -> Result<Option<Vec<Dim>>> {
    let axes: Vec<usize> = if x.has(3) {
        let Some(a) = x.ints(3) else { return Ok(None) };
        a.iter()
            .map(|&a| checked_axis(a, s.len()))
            .collect::<Result<_>>()?
    } else {
        (0..s.len()).collect()
    };
    let n = axes.len();
    ensure!(
        p.len() == 2 * n,
        InvalidModel,
        "{} pads for {n} axes (expected {})",
        p.len(),
        2 * n
    );
    let mut o = s.to_vec();
    for (k, &a) in axes.iter().enumerate() {
        let grow = p[k].saturating_add(p[n + k]);
        if let Dim::Known(d) = s[a] {
            ensure!(
                i64::try_from(d)
                    .ok()
                    .and_then(|d| d.checked_add(grow))
                    .is_some_and(|v| v >= 0),
                InvalidModel,
                "pads {} and {} crop more than the {d} elements of axis {a}, or overflow it",
                p[k],
                p[n + k]
            );
        }
        o[a] = add_int(&s[a], grow);
    }
    Ok(Some(o))
}

/// The dims `start..end` Shape reports for a rank-`r` input (both clamped).
pub(crate) fn shape_range(r: usize, start: i64, end: Option<i64>) -> (usize, usize) {
    let clamp = |v: i64| {
        let v = if v < 0 { v + r as i64 } else { v };
        v.clamp(0, r as i64) as usize
    };
    (clamp(start), clamp(end.unwrap_or(r as i64)))
}

fn slice(
    x: &In,
    starts: &Option<Vec<i64>>,
    ends: &Option<Vec<i64>>,
    axes: &Option<Vec<i64>>,
) -> Result<Option<Vec<Dim>>> {
    let Some(s) = x.shape(0) else { return Ok(None) };
    let consts = if starts.is_some() {
        (|| Some((starts.clone()?, ends.clone()?, axes.clone(), None)))()
    } else {
        // Every operand is asked for, so all the non-constant ones are recorded (a plan in
        // segments compiles its tail with each of them as a constant).
        // An optional operand: Some(None) when absent, None when not a constant.
        let opt = |i: usize| {
            if x.has(i) {
                x.ints(i).map(Some)
            } else {
                Some(None)
            }
        };
        let (st, en, ax, steps) = (x.ints(1), x.ints(2), opt(3), opt(4));
        (|| Some((st?, en?, ax?, steps?)))()
    };
    let Some((st, en, ax, steps)) = consts else {
        return Ok(None);
    };
    let ax: Vec<i64> = ax.unwrap_or_else(|| (0..st.len() as i64).collect());
    ensure!(
        en.len() == st.len() && ax.len() == st.len(),
        InvalidModel,
        "{} starts, {} ends and {} axes",
        st.len(),
        en.len(),
        ax.len()
    );
    if let Some(steps) = &steps {
        ensure!(
            steps.len() == st.len(),
            InvalidModel,
            "{} steps for {} starts",
            steps.len(),
            st.len()
        );
        ensure!(
            !steps.contains(&0),
            InvalidModel,
            "a step of 0 in {steps:?}"
        );
    }
    let at = distinct_axes(&ax, s.len())?;
    let mut out = s.clone();
    for (k, &a) in at.iter().enumerate() {
        let step = steps.as_ref().map_or(1, |v| v[k]);
        out[a] = slice_dim(&s[a], st[k], en[k], step);
    }
    Ok(Some(out))
}

/// The length of one sliced axis (the step is not 0).
fn slice_dim(d: &Dim, start: i64, end: i64, step: i64) -> Dim {
    let Dim::Known(n) = d else {
        // The whole axis, or everything from a start: known without the size.
        return if step == 1 && end >= i32::MAX as i64 && start == 0 {
            d.clone()
        } else {
            Dim::Unknown
        };
    };
    let n = *n as i64;
    if n == 0 {
        return Dim::Known(0);
    }
    let fix = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    let (s, e) = (fix(start), fix(end));
    // In i128: a step of i64::MIN, or one near i64::MAX, must not overflow the count.
    let (n, s, e, step) = (n as i128, s as i128, e as i128, step as i128);
    let len = if step > 0 {
        let (s, e) = (s.clamp(0, n), e.clamp(0, n));
        (e - s + step - 1).div_euclid(step)
    } else {
        let (s, e) = (s.clamp(0, n - 1), e.clamp(-1, n - 1));
        (s - e - step - 1).div_euclid(-step)
    };
    Dim::Known(len.max(0) as u64)
}

/// Range's length from constant inputs; a zero delta is an error.
fn range_len(x: &In) -> Result<Option<u64>> {
    let (Some(s), Some(l), Some(d)) = (x.constant(0), x.constant(1), x.constant(2)) else {
        return Ok(None);
    };
    if let Ok(v) = d.to_f64() {
        ensure!(v.first() != Some(&0.0), InvalidModel, "Range's delta is 0");
    }
    Ok(range_len_of(s, l, d))
}

fn range_len_of(s: &Tensor, l: &Tensor, d: &Tensor) -> Option<u64> {
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
