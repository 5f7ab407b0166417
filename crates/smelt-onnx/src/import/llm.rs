//! Import of the llm op family.

use super::NodeCtx;
use smelt_ir::{Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    if !n.is_onnx() {
        return Ok(None);
    }
    let _ = n.opset;
    Ok(None)
}
