//! Import of the nn op family.

use super::NodeCtx;
use smelt_ir::op::NnOp;
use smelt_ir::{Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    if !n.is_onnx() {
        return Ok(None);
    }
    let op = match n.op_type() {
        "MatMul" => NnOp::MatMul,
        _ => return Ok(None),
    };
    Ok(Some(Op::Nn(op)))
}
