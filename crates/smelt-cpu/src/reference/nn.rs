//! Reference kernels of the nn op family.

use super::{one, Ctx, Inputs};
use smelt_ir::op::NnOp;
use smelt_ir::{bail, Result, Tensor, Value};

/// Runs one op of the family.
pub fn run(op: &NnOp, x: &Inputs, _cx: &Ctx) -> Result<Vec<Value>> {
    match op {
        NnOp::MatMul => matmul(x.tensor(0)?, x.tensor(1)?),
    }
}

fn matmul(a: &Tensor, b: &Tensor) -> Result<Vec<Value>> {
    if a.rank() != 2 || b.rank() != 2 || a.shape()[1] != b.shape()[0] {
        bail!(
            "MatMul of {:?} and {:?} is not supported yet",
            a.shape(),
            b.shape()
        );
    }
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    let (av, bv) = (a.to_f64()?, b.to_f64()?);
    let mut out = vec![0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let aip = av[i * k + p];
            for j in 0..n {
                out[i * n + j] += aip * bv[p * n + j];
            }
        }
    }
    one(Tensor::from_f64(a.dtype(), vec![m, n], &out)?)
}
