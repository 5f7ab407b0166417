//! Optimizer steps (ai.onnx.preview.training): inputs R, T, then the tensors, gradients and
//! accumulators; each output has the shape of the input it updates.

use super::{In, Outs};
use smelt_ir::op::MiscOp;
use smelt_ir::Result;

/// Output types of an optimizer step; None for other misc ops.
pub(super) fn infer(op: &MiscOp, x: &In) -> Option<Result<Option<Outs>>> {
    // Groups of outputs: (X..), then the accumulators (H.. or V.., H..).
    let groups = match op {
        MiscOp::Adagrad { .. } | MiscOp::Momentum { .. } => 2,
        MiscOp::Adam { .. } => 3,
        _ => return None,
    };
    let outs = x.n_outputs();
    if outs == 0 || !outs.is_multiple_of(groups) {
        return Some(Ok(None));
    }
    let n = outs / groups;
    // Output k of group g updates input 2 + k (the tensors) or 2 + (g + 1) * n + k.
    let types = (0..outs)
        .map(|o| {
            let (g, k) = (o / n, o % n);
            let input = if g == 0 { 2 + k } else { 2 + (g + 1) * n + k };
            x.ty(input)
        })
        .collect();
    Some(Ok(Some(types)))
}
