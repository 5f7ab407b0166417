//! Quantization ops: (de)quantize keep the shape and change the element type; the integer
//! matrix products and convolutions have their float twins' shapes.

use super::nn::{conv_shape, matmul, ConvAttrs};
use super::{tensor_type, typed, In, Outs};
use smelt_ir::op::QuantOp;
use smelt_ir::{DType, Result};

/// Output types of a quantization op.
pub(super) fn infer(op: &QuantOp, x: &In) -> Result<Option<Outs>> {
    use QuantOp::*;
    let product = |a: usize, b: usize| -> Result<_> {
        Ok(match (x.shape(a), x.shape(b)) {
            (Some(a), Some(b)) => Some(matmul(a, b)?),
            _ => None,
        })
    };
    Ok(match op {
        QuantizeLinear { output_dtype, .. } => {
            let dt = output_dtype
                .or_else(|| x.has(2).then(|| x.dtype(2)).flatten())
                .or((!x.has(2)).then_some(DType::U8));
            Some(vec![typed(dt, x.shape(0))])
        }
        DequantizeLinear { output_dtype, .. } => {
            Some(vec![typed(output_dtype.or(x.dtype(1)), x.shape(0))])
        }
        DynamicQuantizeLinear => Some(vec![
            typed(Some(DType::U8), x.shape(0)),
            Some(tensor_type(DType::F32, vec![])),
            Some(tensor_type(DType::U8, vec![])),
        ]),
        MatMulInteger => Some(vec![typed(Some(DType::I32), product(0, 1)?)]),
        QLinearMatMul => Some(vec![typed(x.dtype(7), product(0, 3)?)]),
        ConvInteger { conv } | QLinearConv { conv } => {
            let a = ConvAttrs {
                auto_pad: &conv.auto_pad,
                dilations: conv.dilations.as_deref().unwrap_or(&[]),
                group: conv.group,
                kernel_shape: conv.kernel_shape.as_deref().unwrap_or(&[]),
                pads: conv.pads.as_deref().unwrap_or(&[]),
                strides: conv.strides.as_deref().unwrap_or(&[]),
            };
            let (w, dt) = match op {
                ConvInteger { .. } => (1, Some(DType::I32)),
                _ => (3, x.dtype(7)),
            };
            Some(vec![typed(dt, conv_shape(x.shape(0), x.shape(w), &a)?)])
        }
    })
}
