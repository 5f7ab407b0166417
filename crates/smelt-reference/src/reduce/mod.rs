//! Reference kernels of the reduce op family.
//!
//! Floats compute through f64; integer (and bool) reductions that can be exact are exact
//! (i128 accumulators, wrapped to the element type like a C cast).

mod cum;
mod reduction;
mod select;
mod softmax;

use super::{Ctx, Inputs};
use smelt_ir::op::ReduceOp;
use smelt_ir::{bail, DType, Data, Result, Tensor, Value};

/// Runs one op of the family.
pub fn run(op: &ReduceOp, x: &Inputs, _cx: &Ctx) -> Result<Vec<Value>> {
    use ReduceOp::*;
    let t = match op {
        ReduceSum(r) | ReduceMean(r) | ReduceMax(r) | ReduceMin(r) | ReduceProd(r)
        | ReduceL1(r) | ReduceL2(r) | ReduceLogSum(r) | ReduceLogSumExp(r) | ReduceSumSquare(r) => {
            reduction::run(op, r, x)?
        }
        ArgMax {
            axis,
            keepdims,
            select_last_index,
        } => select::arg(x.tensor(0)?, *axis, *keepdims, *select_last_index, true)?,
        ArgMin {
            axis,
            keepdims,
            select_last_index,
        } => select::arg(x.tensor(0)?, *axis, *keepdims, *select_last_index, false)?,
        Softmax { axis, coerce_2d } => {
            softmax::run(softmax::Kind::Softmax, x.tensor(0)?, *axis, *coerce_2d)?
        }
        LogSoftmax { axis, coerce_2d } => {
            softmax::run(softmax::Kind::LogSoftmax, x.tensor(0)?, *axis, *coerce_2d)?
        }
        Hardmax { axis, coerce_2d } => {
            softmax::run(softmax::Kind::Hardmax, x.tensor(0)?, *axis, *coerce_2d)?
        }
        CumSum { exclusive, reverse } => cum::run(x, *exclusive, *reverse, false)?,
        CumProd { exclusive, reverse } => cum::run(x, *exclusive, *reverse, true)?,
        TopK {
            k,
            axis,
            largest,
            sorted: _,
        } => {
            let k = match k {
                Some(k) => *k,
                None => {
                    let v = x
                        .opt_ints(1)?
                        .ok_or_else(|| smelt_ir::err!(InvalidModel, "TopK needs the K input"))?;
                    match v.as_slice() {
                        [k] => *k,
                        _ => bail!(
                            InvalidModel,
                            "TopK: K should hold one value, got {}",
                            v.len()
                        ),
                    }
                }
            };
            let (values, indices) = select::top_k(x.tensor(0)?, k, *axis, *largest)?;
            return Ok(vec![Value::Tensor(values), Value::Tensor(indices)]);
        }
    };
    Ok(vec![Value::Tensor(t)])
}

/// Resolves a possibly negative axis against `rank` (valid: -rank..rank).
pub(crate) fn norm_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        bail!(InvalidModel, "axis {axis} is out of range for rank {rank}");
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}

/// Elements as comparable keys: exact for every integer type, f64 for floats.
pub(crate) enum Keys {
    /// Floating-point elements.
    F(Vec<f64>),
    /// Integer or bool elements.
    I(Vec<i128>),
}

impl Keys {
    /// The keys of a tensor's elements.
    pub(crate) fn of(t: &Tensor) -> Result<Keys> {
        if t.dtype().is_float() {
            Ok(Keys::F(t.to_f64()?))
        } else {
            Ok(Keys::I(to_i128(t)?))
        }
    }
}

/// Integer (or bool) elements as i128, exact for every integer type.
pub(crate) fn to_i128(t: &Tensor) -> Result<Vec<i128>> {
    match t.data() {
        Data::U64(v) => Ok(v.iter().map(|&x| x as i128).collect()),
        _ if t.dtype().is_int() || t.dtype() == DType::Bool => {
            Ok(t.to_i64()?.into_iter().map(|x| x as i128).collect())
        }
        _ => bail!(Unsupported, "expected integer elements, got {}", t.dtype()),
    }
}

/// A tensor of an integer (or bool) type from i128 values, wrapping like a C cast.
pub(crate) fn from_i128(dtype: DType, shape: Vec<usize>, v: &[i128]) -> Result<Tensor> {
    match dtype {
        DType::U64 => Tensor::new(
            dtype,
            shape,
            Data::U64(v.iter().map(|&x| x as u64).collect()),
        ),
        _ => Tensor::from_i64(
            dtype,
            shape,
            &v.iter().map(|&x| x as i64).collect::<Vec<_>>(),
        ),
    }
}

/// Splits a shape at `axis` into (outer, dim, inner) element counts. An empty tensor's
/// outer count is 0 (nothing to walk), however large its other dims: their product may
/// not even fit a usize.
pub(crate) fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let product = |s: &[usize]| s.iter().fold(1usize, |a, &d| a.saturating_mul(d));
    let outer = if shape.contains(&0) {
        0
    } else {
        product(&shape[..axis])
    };
    (outer, shape[axis], product(&shape[axis + 1..]))
}

#[cfg(test)]
mod tests;
