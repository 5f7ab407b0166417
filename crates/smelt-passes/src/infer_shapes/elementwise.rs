//! Elementwise ops: unary ops keep their input's type, multi-input ops broadcast,
//! comparisons and logic give bool, casts change the element type.

use super::{try_broadcast, typed, In, Outs};
use smelt_ir::op::ElementwiseOp;
use smelt_ir::{DType, Result};

/// Output types of an elementwise op; an error when known input shapes do not broadcast.
pub(super) fn infer(op: &ElementwiseOp, x: &In) -> Result<Option<Outs>> {
    use ElementwiseOp::*;
    let unary = |dtype: Option<DType>| Ok(Some(vec![typed(dtype, x.shape(0))]));
    let bcast = |dtype: Option<DType>| {
        let shapes: Option<Vec<_>> = (0..x.len())
            .filter(|&i| x.has(i))
            .map(|i| x.shape(i))
            .collect();
        let shape = match shapes {
            Some(s) if !s.is_empty() => Some(try_broadcast(&s)?),
            _ => None,
        };
        Ok(Some(vec![typed(dtype, shape)]))
    };
    match op {
        Abs
        | Neg
        | Exp
        | Log
        | Sqrt
        | Reciprocal
        | Floor
        | Ceil
        | Round
        | Sign
        | Erf
        | Sin
        | Cos
        | Tan
        | Asin
        | Acos
        | Atan
        | Sinh
        | Cosh
        | Asinh
        | Acosh
        | Atanh
        | Relu
        | LeakyRelu { .. }
        | PRelu
        | Elu { .. }
        | Selu { .. }
        | Celu { .. }
        | Sigmoid
        | HardSigmoid { .. }
        | HardSwish
        | Tanh
        | Softplus
        | Softsign
        | Mish
        | Swish { .. }
        | ThresholdedRelu { .. }
        | Gelu { .. }
        | Shrink { .. }
        | BitwiseNot
        | Not
        | Clip { .. } => unary(x.dtype(0)),
        IsNaN | IsInf { .. } => unary(Some(DType::Bool)),
        Cast { to, .. } | BitCast { to } => unary(Some(*to)),
        CastLike { .. } => unary(x.dtype(1)),
        Add
        | Sub
        | Mul
        | Div
        | Pow
        | Mod { .. }
        | BitShift { .. }
        | BitwiseAnd
        | BitwiseOr
        | BitwiseXor
        | Sum
        | Mean
        | Max
        | Min => bcast(x.dtype(0)),
        Equal | Less | LessOrEqual | Greater | GreaterOrEqual | And | Or | Xor => {
            bcast(Some(DType::Bool))
        }
        Where => bcast(x.dtype(1).or(x.dtype(2))),
        LegacyBroadcast { op, .. } => {
            let bool_out = matches!(
                **op,
                Equal | Less | LessOrEqual | Greater | GreaterOrEqual | And | Or | Xor
            );
            unary(if bool_out {
                Some(DType::Bool)
            } else {
                x.dtype(0)
            })
        }
    }
}
