//! The `ElementwiseOp` family: elementwise math, activations, comparisons, logic and casts; multi-input ops broadcast numpy-style.

use crate::DType;
use serde::{Deserialize, Serialize};

/// Which approximation `Gelu` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GeluApprox {
    /// The exact form `x * (1 + erf(x / sqrt 2)) / 2`.
    None,
    /// The tanh form `x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) / 2`.
    Tanh,
}

/// Direction of `BitShift`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShiftDirection {
    /// Shift towards the most significant bit.
    Left,
    /// Shift towards the least significant bit (arithmetic for signed types).
    Right,
}

/// Rounding of a cast to float8e8m0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum E8M0Rounding {
    /// Round away from zero to the next power of two.
    Up,
    /// Round towards zero to the previous power of two.
    Down,
    /// Round to the nearest power of two, ties up.
    Nearest,
}

crate::op_family! {
    /// Elementwise math, activations, comparisons, logic and casts; multi-input ops broadcast numpy-style.
    pub enum ElementwiseOp {
        /// |x| (identity for unsigned types).
        Abs,
        /// -x (wrapping for integers).
        Neg,
        /// e^x.
        Exp,
        /// Natural logarithm.
        Log,
        /// Square root.
        Sqrt,
        /// 1 / x.
        Reciprocal,
        /// Round towards negative infinity.
        Floor,
        /// Round towards positive infinity.
        Ceil,
        /// Round to nearest, ties to even.
        Round,
        /// -1, 0 or 1 by the sign of x (NaN stays NaN).
        Sign,
        /// The error function.
        Erf,
        /// Sine.
        Sin,
        /// Cosine.
        Cos,
        /// Tangent.
        Tan,
        /// Arcsine.
        Asin,
        /// Arccosine.
        Acos,
        /// Arctangent.
        Atan,
        /// Hyperbolic sine.
        Sinh,
        /// Hyperbolic cosine.
        Cosh,
        /// Inverse hyperbolic sine.
        Asinh,
        /// Inverse hyperbolic cosine.
        Acosh,
        /// Inverse hyperbolic tangent.
        Atanh,
        /// max(x, 0).
        Relu,
        /// x if x >= 0 else alpha * x.
        LeakyRelu {
            /// Slope for negative inputs.
            alpha: f32,
        },
        /// x if x >= 0 else slope * x; slope (input 1) broadcasts to x.
        PRelu,
        /// x if x >= 0 else alpha * (e^x - 1).
        Elu {
            /// Scale of the negative part.
            alpha: f32,
        },
        /// gamma * (x if x > 0 else alpha * (e^x - 1)).
        Selu {
            /// Scale of the negative part.
            alpha: f32,
            /// Overall scale.
            gamma: f32,
        },
        /// max(0, x) + min(0, alpha * (e^(x/alpha) - 1)).
        Celu {
            /// Scale and shape of the negative part.
            alpha: f32,
        },
        /// 1 / (1 + e^-x).
        Sigmoid,
        /// max(0, min(1, alpha * x + beta)).
        HardSigmoid {
            /// Slope.
            alpha: f32,
            /// Offset.
            beta: f32,
        },
        /// x * max(0, min(1, x / 6 + 1/2)).
        HardSwish,
        /// Hyperbolic tangent.
        Tanh,
        /// ln(1 + e^x).
        Softplus,
        /// x / (1 + |x|).
        Softsign,
        /// x * tanh(softplus(x)).
        Mish,
        /// x * sigmoid(alpha * x).
        Swish {
            /// Multiplier of x inside the sigmoid.
            alpha: f32,
        },
        /// x if x > alpha else 0.
        ThresholdedRelu {
            /// Threshold.
            alpha: f32,
        },
        /// Gaussian error linear unit.
        Gelu {
            /// Exact or tanh approximation.
            approximate: GeluApprox,
        },
        /// x + bias if x < -lambd, x - bias if x > lambd, else 0.
        Shrink {
            /// Shift applied outside the dead zone.
            bias: f32,
            /// Half-width of the dead zone.
            lambd: f32,
        },
        /// a + b (integers wrap).
        Add,
        /// a - b (integers wrap).
        Sub,
        /// a * b (integers wrap).
        Mul,
        /// a / b (integer division truncates toward zero; division by zero gives 0).
        Div,
        /// base ^ exponent; the output has the base's type.
        Pow,
        /// Remainder of a / b.
        Mod {
            /// True: C fmod (sign of the dividend); false: sign of the divisor (integers only in ONNX, numpy mod for floats).
            fmod: bool,
        },
        /// Bit shift of input 0 by input 1 bits (shifts beyond the width give 0, or -1 for negative values shifted right).
        BitShift {
            /// Left or right.
            direction: ShiftDirection,
        },
        /// Bitwise and of integers.
        BitwiseAnd,
        /// Bitwise or of integers.
        BitwiseOr,
        /// Bitwise exclusive or of integers.
        BitwiseXor,
        /// Bitwise complement of integers.
        BitwiseNot,
        /// a == b, as bool (strings too).
        Equal,
        /// a < b, as bool.
        Less,
        /// a <= b, as bool.
        LessOrEqual,
        /// a > b, as bool.
        Greater,
        /// a >= b, as bool.
        GreaterOrEqual,
        /// Logical and of bools.
        And,
        /// Logical or of bools.
        Or,
        /// Logical exclusive or of bools.
        Xor,
        /// Logical negation of bools.
        Not,
        /// True where x is NaN.
        IsNaN,
        /// True where x is an infinity of a selected sign.
        IsInf {
            /// Report +inf.
            detect_positive: bool,
            /// Report -inf.
            detect_negative: bool,
        },
        /// Sum of one or more inputs, broadcast.
        Sum,
        /// Mean of one or more inputs, broadcast.
        Mean,
        /// Elementwise maximum of one or more inputs, broadcast (NaN propagates).
        Max,
        /// Elementwise minimum of one or more inputs, broadcast (NaN propagates).
        Min,
        /// cond ? x : y with bool cond, broadcast over all three inputs; any element type.
        Where,
        /// min(max(x, lo), hi); bounds from the attributes (old opsets) or optional inputs 1 and 2.
        Clip {
            /// Lower bound from the attribute (opset < 11); None reads input 1 or means no bound.
            min: Option<f32>,
            /// Upper bound from the attribute (opset < 11); None reads input 2 or means no bound.
            max: Option<f32>,
        },
        /// Conversion to another element type.
        Cast {
            /// The target type.
            to: DType,
            /// Out-of-range values saturate when casting to float8 (else NaN/inf).
            saturate: bool,
            /// Rounding used when casting to float8e8m0.
            round_mode: E8M0Rounding,
        },
        /// Conversion to the element type of input 1.
        CastLike {
            /// Out-of-range values saturate when casting to float8 (else NaN/inf).
            saturate: bool,
            /// Rounding used when casting to float8e8m0.
            round_mode: E8M0Rounding,
        },
        /// Reinterprets each element's bits (little endian) as another type of the same width.
        BitCast {
            /// The target type.
            to: DType,
        },
        /// A binary op of the opsets before 7 whose input 1 aligns with input 0 starting at `axis`
        /// (input 1 gets trailing size-1 dimensions), then broadcasts numpy-style.
        LegacyBroadcast {
            /// The binary op applied after alignment.
            op: Box<ElementwiseOp>,
            /// The dimension of input 0 where input 1 starts.
            axis: i64,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    #[test]
    fn attrs_round_trip() {
        let ops = [
            ElementwiseOp::Add,
            ElementwiseOp::Gelu {
                approximate: GeluApprox::Tanh,
            },
            ElementwiseOp::Clip {
                min: Some(-1.0),
                max: None,
            },
            ElementwiseOp::Cast {
                to: DType::F8E4M3FN,
                saturate: false,
                round_mode: E8M0Rounding::Nearest,
            },
            ElementwiseOp::LegacyBroadcast {
                op: Box::new(ElementwiseOp::Mul),
                axis: 1,
            },
        ];
        for e in ops {
            let op = Op::Elementwise(e);
            let back = Op::from_parts(op.family(), op.name(), op.attrs_json()).unwrap();
            assert_eq!(back, op);
        }
    }
}
