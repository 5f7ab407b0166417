//! Reference kernels of the sequence op family.

use super::{Ctx, Inputs};
use smelt_ir::op::SequenceOp;
use smelt_ir::{bail, Result, Value};

/// Runs one op of the family.
pub fn run(op: &SequenceOp, _x: &Inputs, _cx: &Ctx) -> Result<Vec<Value>> {
    bail!("{} is not implemented in the reference executor", op.name())
}
