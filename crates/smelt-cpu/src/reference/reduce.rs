//! Reference kernels of the reduce op family.

use super::{Ctx, Inputs};
use smelt_ir::op::ReduceOp;
use smelt_ir::{bail, Result, Value};

/// Runs one op of the family.
pub fn run(op: &ReduceOp, _x: &Inputs, _cx: &Ctx) -> Result<Vec<Value>> {
    bail!("{} is not implemented in the reference executor", op.name())
}
