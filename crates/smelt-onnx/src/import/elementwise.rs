//! Import of the elementwise op family.

use super::NodeCtx;
use smelt_ir::op::ElementwiseOp as E;
use smelt_ir::{Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    if !n.is_onnx() {
        return Ok(None);
    }
    let op = match n.op_type() {
        "Add" => E::Add,
        "Relu" => E::Relu,
        _ => return Ok(None),
    };
    Ok(Some(Op::Elementwise(op)))
}
