//! Reductions (axes from the attribute or a constant input), arg-reductions, the softmax
//! family, cumulative ops and top-k.

use super::{axis, typed, In, Outs};
use smelt_ir::op::ReduceOp;
use smelt_ir::{ensure, err, DType, Dim, Result};

/// An axis in [-r, r-1] as an index; an error otherwise.
fn checked_axis(a: i64, r: usize) -> Result<usize> {
    axis(a, r).ok_or_else(|| err!(InvalidModel, "axis {a} is out of range for rank {r}"))
}

/// Output types of a reduce-family op; an error names an axis out of range.
pub(super) fn infer(op: &ReduceOp, x: &In) -> Result<Option<Outs>> {
    use ReduceOp::*;
    let dt = x.dtype(0);
    if let Some(r) = op.reduction() {
        let axes = r.axes.clone().or_else(|| x.ints(1));
        let s = match (x.shape(0), axes) {
            // An axes input that is not a constant leaves the output unknown.
            (Some(_), None) if x.has(1) => None,
            (Some(s), axes) => {
                let axes = axes.unwrap_or_default();
                if axes.is_empty() && r.noop_with_empty_axes {
                    Some(s)
                } else {
                    let picked: Vec<usize> = if axes.is_empty() {
                        (0..s.len()).collect()
                    } else {
                        axes.iter()
                            .map(|&a| checked_axis(a, s.len()))
                            .collect::<Result<_>>()?
                    };
                    Some(reduced(&s, &picked, r.keepdims))
                }
            }
            (None, _) => None,
        };
        return Ok(Some(vec![typed(dt, s)]));
    }
    Ok(match op {
        ArgMax {
            axis: a, keepdims, ..
        }
        | ArgMin {
            axis: a, keepdims, ..
        } => {
            let s = match x.shape(0) {
                Some(s) => Some(reduced(&s, &[checked_axis(*a, s.len())?], *keepdims)),
                None => None,
            };
            Some(vec![typed(Some(DType::I64), s)])
        }
        Softmax { .. } | LogSoftmax { .. } | Hardmax { .. } | CumSum { .. } | CumProd { .. } => {
            Some(vec![typed(dt, x.shape(0))])
        }
        TopK { k, axis: a, .. } => {
            let k = k.or_else(|| x.ints(1).and_then(|v| v.first().copied()));
            let s = match x.shape(0) {
                Some(mut o) => {
                    let a = checked_axis(*a, o.len())?;
                    if let Some(k) = k {
                        ensure!(k >= 0, InvalidModel, "k is {k}");
                        if let Dim::Known(n) = o[a] {
                            ensure!(
                                k as u64 <= n,
                                InvalidModel,
                                "k = {k} but axis {a} has {n} elements"
                            );
                        }
                    }
                    o[a] = k
                        .and_then(|k| u64::try_from(k).ok())
                        .map_or(Dim::Unknown, Dim::Known);
                    Some(o)
                }
                None => None,
            };
            Some(vec![typed(dt, s.clone()), typed(Some(DType::I64), s)])
        }
        _ => None,
    })
}

/// The shape after reducing `axes`: size 1 when kept, else dropped.
fn reduced(s: &[Dim], axes: &[usize], keepdims: bool) -> Vec<Dim> {
    s.iter()
        .enumerate()
        .filter_map(|(i, d)| match (axes.contains(&i), keepdims) {
            (false, _) => Some(d.clone()),
            (true, true) => Some(Dim::Known(1)),
            (true, false) => None,
        })
        .collect()
}
