//! Reference kernels of the misc op family.

use super::{Ctx, Inputs};
use smelt_ir::op::MiscOp;
use smelt_ir::{bail, Result, Value};

/// Runs one op of the family.
pub fn run(op: &MiscOp, _x: &Inputs, _cx: &Ctx) -> Result<Vec<Value>> {
    bail!("{} is not implemented in the reference executor", op.name())
}
