//! The `RecurrentOp` family: recurrent layers: RNN, GRU, LSTM.
//!
//! Inputs follow ONNX: X, W, R, B, sequence_lens, initial_h (and initial_c, P for LSTM);
//! outputs Y, Y_h (and Y_c for LSTM).

use serde::{Deserialize, Serialize};

crate::op_family! {
    /// Recurrent layers: RNN, GRU, LSTM.
    pub enum RecurrentOp {
        /// Simple RNN: `Ht = f(Xt*W^T + Ht-1*R^T + Wb + Rb)`.
        Rnn {
            /// Hidden size; None infers it from R.
            hidden_size: Option<i64>,
            /// Forward, reverse or both.
            direction: RnnDirection,
            /// Batch-major tensors (`layout = 1`): X is [batch, seq, input], Y is [batch, seq, dirs, hidden].
            batch_major: bool,
            /// One activation (f) per direction, forward direction first.
            activations: Vec<Activation>,
            /// Clip the pre-activation values to [-clip, clip].
            clip: Option<f32>,
        },
        /// GRU with gates z, r, h (ONNX weight order).
        Gru {
            /// Hidden size; None infers it from R.
            hidden_size: Option<i64>,
            /// Forward, reverse or both.
            direction: RnnDirection,
            /// Batch-major tensors (`layout = 1`).
            batch_major: bool,
            /// Two activations (f, g) per direction, forward direction first.
            activations: Vec<Activation>,
            /// Clip the pre-activation values to [-clip, clip].
            clip: Option<f32>,
            /// Apply the recurrent linear map of the hidden gate before multiplying by the reset gate.
            linear_before_reset: bool,
        },
        /// LSTM with gates i, o, f, c (ONNX weight order) and optional peepholes.
        Lstm {
            /// Hidden size; None infers it from R.
            hidden_size: Option<i64>,
            /// Forward, reverse or both.
            direction: RnnDirection,
            /// Batch-major tensors (`layout = 1`).
            batch_major: bool,
            /// Three activations (f, g, h) per direction, forward direction first.
            activations: Vec<Activation>,
            /// Clip the pre-activation values to [-clip, clip].
            clip: Option<f32>,
            /// Couple the input and forget gates (`ft = 1 - it`).
            input_forget: bool,
        },
    }
}

/// Direction of a recurrent layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RnnDirection {
    /// First to last time step.
    Forward,
    /// Last to first time step.
    Reverse,
    /// Both, forward first in the direction axis.
    Bidirectional,
}

impl RnnDirection {
    /// Number of directions (1 or 2).
    pub fn count(self) -> usize {
        if self == RnnDirection::Bidirectional {
            2
        } else {
            1
        }
    }
}

/// An activation function of a recurrent layer, with its parameters resolved.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Activation {
    /// max(0, x).
    Relu,
    /// tanh(x).
    Tanh,
    /// 1 / (1 + e^-x).
    Sigmoid,
    /// alpha * x + beta.
    Affine {
        /// Slope.
        alpha: f32,
        /// Offset.
        beta: f32,
    },
    /// x if x >= 0 else alpha * x.
    LeakyRelu {
        /// Negative slope.
        alpha: f32,
    },
    /// x if x > alpha else 0.
    ThresholdedRelu {
        /// Threshold.
        alpha: f32,
    },
    /// alpha * tanh(beta * x).
    ScaledTanh {
        /// Output scale.
        alpha: f32,
        /// Input scale.
        beta: f32,
    },
    /// min(max(alpha * x + beta, 0), 1).
    HardSigmoid {
        /// Slope.
        alpha: f32,
        /// Offset.
        beta: f32,
    },
    /// x if x >= 0 else alpha * (e^x - 1).
    Elu {
        /// Negative-side scale.
        alpha: f32,
    },
    /// x / (1 + |x|).
    Softsign,
    /// ln(1 + e^x).
    Softplus,
}

impl Activation {
    /// Applies the function to one value.
    pub fn apply(self, x: f64) -> f64 {
        match self {
            Activation::Relu => x.max(0.0),
            Activation::Tanh => x.tanh(),
            Activation::Sigmoid => {
                if x >= 0.0 {
                    1.0 / (1.0 + (-x).exp())
                } else {
                    let e = x.exp();
                    e / (1.0 + e)
                }
            }
            Activation::Affine { alpha, beta } => alpha as f64 * x + beta as f64,
            Activation::LeakyRelu { alpha } => {
                if x >= 0.0 {
                    x
                } else {
                    alpha as f64 * x
                }
            }
            Activation::ThresholdedRelu { alpha } => {
                if x > alpha as f64 {
                    x
                } else {
                    0.0
                }
            }
            Activation::ScaledTanh { alpha, beta } => alpha as f64 * (beta as f64 * x).tanh(),
            Activation::HardSigmoid { alpha, beta } => {
                (alpha as f64 * x + beta as f64).clamp(0.0, 1.0)
            }
            Activation::Elu { alpha } => {
                if x >= 0.0 {
                    x
                } else {
                    alpha as f64 * x.exp_m1()
                }
            }
            Activation::Softsign => x / (1.0 + x.abs()),
            Activation::Softplus => {
                if x > 0.0 {
                    x + (-x).exp().ln_1p()
                } else {
                    x.exp().ln_1p()
                }
            }
        }
    }
}
