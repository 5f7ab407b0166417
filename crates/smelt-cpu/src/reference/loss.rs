//! Reference kernels of the loss op family.

use super::{Ctx, Inputs};
use smelt_ir::op::LossOp;
use smelt_ir::{bail, Result, Value};

/// Runs one op of the family.
pub fn run(op: &LossOp, _x: &Inputs, _cx: &Ctx) -> Result<Vec<Value>> {
    bail!("{} is not implemented in the reference executor", op.name())
}
