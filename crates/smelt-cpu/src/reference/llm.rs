//! Reference kernels of the llm op family.

use super::{Ctx, Inputs};
use smelt_ir::op::LlmOp;
use smelt_ir::{bail, Result, Value};

/// Runs one op of the family.
pub fn run(op: &LlmOp, _x: &Inputs, _cx: &Ctx) -> Result<Vec<Value>> {
    bail!("{} is not implemented in the reference executor", op.name())
}
