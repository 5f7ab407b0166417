//! Reductions (axes from the attribute or a constant input), arg-reductions, the softmax
//! family, cumulative ops and top-k.

use super::{axis, typed, In, Outs};
use smelt_ir::op::ReduceOp;
use smelt_ir::{DType, Dim};

/// Output types of a reduce-family op.
pub(super) fn infer(op: &ReduceOp, x: &In) -> Option<Outs> {
    use ReduceOp::*;
    let dt = x.dtype(0);
    if let Some(r) = op.reduction() {
        let axes = r.axes.clone().or_else(|| x.ints(1));
        let s = x.shape(0).and_then(|s| {
            // An axes input that is not a constant leaves the output unknown.
            let axes = match axes {
                Some(a) => a,
                None if x.has(1) => return None,
                None => Vec::new(),
            };
            if axes.is_empty() && r.noop_with_empty_axes {
                return Some(s);
            }
            let picked: Vec<usize> = if axes.is_empty() {
                (0..s.len()).collect()
            } else {
                axes.iter()
                    .map(|&a| axis(a, s.len()))
                    .collect::<Option<_>>()?
            };
            Some(reduced(&s, &picked, r.keepdims))
        });
        return Some(vec![typed(dt, s)]);
    }
    match op {
        ArgMax {
            axis: a, keepdims, ..
        }
        | ArgMin {
            axis: a, keepdims, ..
        } => {
            let s = x
                .shape(0)
                .and_then(|s| Some(reduced(&s, &[axis(*a, s.len())?], *keepdims)));
            Some(vec![typed(Some(DType::I64), s)])
        }
        Softmax { .. } | LogSoftmax { .. } | Hardmax { .. } | CumSum { .. } | CumProd { .. } => {
            Some(vec![typed(dt, x.shape(0))])
        }
        TopK { k, axis: a, .. } => {
            let k = k.or_else(|| x.ints(1).and_then(|v| v.first().copied()));
            let s = x.shape(0).and_then(|s| {
                let a = axis(*a, s.len())?;
                let mut o = s;
                o[a] = k
                    .and_then(|k| u64::try_from(k).ok())
                    .map_or(Dim::Unknown, Dim::Known);
                Some(o)
            });
            Some(vec![typed(dt, s.clone()), typed(Some(DType::I64), s)])
        }
        _ => None,
    }
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
