//! Indexing and cropping ops: OneHot, GatherND, ReverseSequence, CenterCropPad, Col2Im.
//! Sizes given as inputs must be constants.

use super::dims::div_int;
use super::{axis, typed, In, Outs};
use smelt_ir::op::LayoutOp;
use smelt_ir::{ensure, Dim, Result};

/// Output types of an indexing op; None for other layout ops.
pub(super) fn infer(op: &LayoutOp, x: &In) -> Result<Option<Outs>> {
    use LayoutOp::*;
    let dt = x.dtype(0);
    let known = |v: i64| u64::try_from(v).ok().map(Dim::Known);
    Ok(Some(vec![match op {
        // indices [...] with `depth` classes inserted at `axis`, in the values' type.
        OneHot { axis: a } => {
            let depth = x
                .floats(1)
                .and_then(|v| v.first().copied())
                .filter(|d| d.is_finite() && *d >= 0.0)
                .map(|d| Dim::Known(d as u64));
            let s = x.shape(0).and_then(|s| {
                let at = axis(*a, s.len() + 1)?;
                let mut o = s;
                o.insert(at, depth.unwrap_or(Dim::Unknown));
                Some(o)
            });
            typed(x.dtype(2), s)
        }
        // data [b..., r...] and indices [b..., q..., k]: [b..., q..., r[k..]...].
        GatherND { batch_dims } => {
            let s = match (x.shape(0), x.shape(1)) {
                (Some(d), Some(i)) if !i.is_empty() => match i.last() {
                    Some(Dim::Known(k)) => {
                        let b = usize::try_from(*batch_dims).unwrap_or(usize::MAX);
                        let k = *k as usize;
                        ensure!(
                            b < i.len() && b.saturating_add(k) <= d.len(),
                            InvalidModel,
                            "batch_dims {batch_dims} and index depth {k} do not fit data of rank {} and indices of rank {}",
                            d.len(),
                            i.len()
                        );
                        let mut o = i[..i.len() - 1].to_vec();
                        o.extend_from_slice(&d[b + k..]);
                        Some(o)
                    }
                    _ => None,
                },
                _ => None,
            };
            typed(dt, s)
        }
        ReverseSequence { .. } => typed(dt, x.shape(0)),
        // The cropped or padded axes take the sizes of the shape input.
        CenterCropPad { axes } => {
            let s = match (x.shape(0), x.ints(1)) {
                (Some(s), Some(sizes)) => {
                    let r = s.len();
                    let axes: Option<Vec<usize>> = match axes {
                        Some(a) => a.iter().map(|&a| axis(a, r)).collect(),
                        None => Some((0..r).collect()),
                    };
                    match axes {
                        Some(axes) if axes.len() == sizes.len() => {
                            let mut o = s;
                            for (&a, &n) in axes.iter().zip(&sizes) {
                                o[a] = known(n).unwrap_or(Dim::Unknown);
                            }
                            Some(o)
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            typed(dt, s)
        }
        // [N, C * prod(block), L] to [N, C, image...].
        Col2Im { .. } => {
            let s = match (x.shape(0), x.ints(1), x.ints(2)) {
                (Some(s), Some(image), Some(block)) if s.len() == 3 => {
                    let prod = block
                        .iter()
                        .try_fold(1i64, |a, &b| a.checked_mul(b).filter(|_| b > 0));
                    match prod {
                        Some(p) if p > 0 => {
                            let mut o = vec![s[0].clone(), div_int(&s[1], p, false)];
                            o.extend(image.iter().map(|&d| known(d).unwrap_or(Dim::Unknown)));
                            Some(o)
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            typed(dt, s)
        }
        _ => return Ok(None),
    }]))
}
