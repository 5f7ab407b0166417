//! Import of the loss op family: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
//! (both opset 12 onwards; later versions only widen the element types).

use super::NodeCtx;
use smelt_ir::op::loss::LossReduction;
use smelt_ir::op::LossOp;
use smelt_ir::{bail, Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    if !n.is_onnx() {
        return Ok(None);
    }
    let op = match n.op_type() {
        "NegativeLogLikelihoodLoss" => LossOp::NegativeLogLikelihoodLoss {
            reduction: reduction(n)?,
            ignore_index: n.opt_i("ignore_index")?,
        },
        "SoftmaxCrossEntropyLoss" => LossOp::SoftmaxCrossEntropyLoss {
            reduction: reduction(n)?,
            ignore_index: n.opt_i("ignore_index")?,
        },
        _ => return Ok(None),
    };
    if n.n_inputs() < 2 {
        bail!(
            InvalidModel,
            "{} needs at least 2 inputs, got {}",
            n.op_type(),
            n.n_inputs()
        );
    }
    Ok(Some(Op::Loss(op)))
}

fn reduction(n: &NodeCtx) -> Result<LossReduction> {
    Ok(match n.s("reduction", "mean")?.as_str() {
        "none" => LossReduction::None,
        "sum" => LossReduction::Sum,
        "mean" => LossReduction::Mean,
        other => bail!(
            InvalidModel,
            "attribute 'reduction' must be none, sum or mean, got '{other}'"
        ),
    })
}
