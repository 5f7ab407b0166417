//! Reference kernels of the elementwise op family.

use super::broadcast::{broadcast_shapes, index_map};
use super::{one, Ctx, Inputs};
use smelt_ir::op::ElementwiseOp;
use smelt_ir::{Result, Tensor, Value};

/// Runs one op of the family.
pub fn run(op: &ElementwiseOp, x: &Inputs, _cx: &Ctx) -> Result<Vec<Value>> {
    match op {
        ElementwiseOp::Add => binary_f64(x, |a, b| a + b),
        ElementwiseOp::Relu => unary_f64(x, |a| a.max(0.0)),
    }
}

fn unary_f64(x: &Inputs, f: impl Fn(f64) -> f64) -> Result<Vec<Value>> {
    let a = x.tensor(0)?;
    let v: Vec<f64> = a.to_f64()?.into_iter().map(f).collect();
    one(Tensor::from_f64(a.dtype(), a.shape().to_vec(), &v)?)
}

fn binary_f64(x: &Inputs, f: impl Fn(f64, f64) -> f64) -> Result<Vec<Value>> {
    let (a, b) = (x.tensor(0)?, x.tensor(1)?);
    let shape = broadcast_shapes(&[a.shape(), b.shape()])?;
    let (av, bv) = (a.to_f64()?, b.to_f64()?);
    let (ia, ib) = (index_map(a.shape(), &shape), index_map(b.shape(), &shape));
    let v: Vec<f64> = ia.iter().zip(&ib).map(|(&i, &j)| f(av[i], bv[j])).collect();
    one(Tensor::from_f64(a.dtype(), shape, &v)?)
}
