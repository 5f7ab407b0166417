//! The `QuantOp` family: quantization, dequantization and integer arithmetic ops.

use super::AutoPad;
use crate::DType;
use serde::{Deserialize, Serialize};

crate::op_family! {
    /// Quantization, dequantization and integer arithmetic ops.
    pub enum QuantOp {
        /// `y = saturate(round_half_even(x / scale) + zero_point)`; inputs x, scale, optional zero point.
        QuantizeLinear {
            /// Quantization axis for per-axis and blocked scales (may be negative).
            axis: i64,
            /// Block length along `axis` for blocked quantization; 0 when not blocked.
            block_size: i64,
            /// Output element type; None takes the zero point's type, or u8 without one.
            output_dtype: Option<DType>,
            /// Float8 outputs clamp out-of-range values to the largest finite value (else NaN/inf).
            saturate: bool,
            /// Type in which `x / scale` is computed; None uses the scale's type.
            precision: Option<DType>,
        },
        /// `y = (x - zero_point) * scale`; inputs x, scale, optional zero point.
        DequantizeLinear {
            /// Quantization axis for per-axis and blocked scales (may be negative).
            axis: i64,
            /// Block length along `axis` for blocked quantization; 0 when not blocked.
            block_size: i64,
            /// Output element type; None takes the scale's type.
            output_dtype: Option<DType>,
        },
        /// u8 quantization of a float tensor with a scale and zero point computed from its range;
        /// outputs y, y_scale, y_zero_point.
        DynamicQuantizeLinear,
        /// Integer matmul (numpy semantics) of (A - a_zero_point) and (B - b_zero_point) into i32.
        MatMulInteger,
        /// Integer convolution of (x - x_zero_point) and (w - w_zero_point) into i32.
        ConvInteger {
            /// Convolution geometry.
            conv: QConv,
        },
        /// Quantized matmul: inputs a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp.
        QLinearMatMul,
        /// Quantized convolution: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, optional i32 bias.
        QLinearConv {
            /// Convolution geometry.
            conv: QConv,
        },
    }
}

/// Geometry of an integer convolution (ConvInteger, QLinearConv).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QConv {
    /// How padding is chosen.
    pub auto_pad: AutoPad,
    /// Explicit kernel spatial shape; None infers it from the weights.
    pub kernel_shape: Option<Vec<i64>>,
    /// Pads `[x1_begin, x2_begin, ..., x1_end, x2_end, ...]`; None is all zeros.
    pub pads: Option<Vec<i64>>,
    /// Strides per spatial axis; None is all ones.
    pub strides: Option<Vec<i64>>,
    /// Dilations per spatial axis; None is all ones.
    pub dilations: Option<Vec<i64>>,
    /// Number of channel groups.
    pub group: i64,
}
