//! Training losses: the loss per sample (`[N, d1...]`, the target's shape) or its sum or
//! mean (a scalar); SoftmaxCrossEntropyLoss's log-probabilities have the scores' shape.

use super::{tensor_type, typed, In, Outs};
use smelt_ir::op::loss::LossReduction;
use smelt_ir::op::LossOp;
use smelt_ir::Result;

/// Output types of a loss.
pub(super) fn infer(op: &LossOp, x: &In) -> Result<Option<Outs>> {
    use LossOp::*;
    let (NegativeLogLikelihoodLoss { reduction, .. } | SoftmaxCrossEntropyLoss { reduction, .. }) =
        op;
    let dt = x.dtype(0);
    let loss = match reduction {
        LossReduction::None => typed(dt, x.shape(1)),
        _ => dt.map(|d| tensor_type(d, vec![])),
    };
    let mut outs = vec![loss];
    if x.n_outputs() > 1 {
        outs.push(typed(dt, x.shape(0)));
    }
    Ok(Some(outs))
}
