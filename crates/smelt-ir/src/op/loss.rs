//! The `LossOp` family: training losses: negative log-likelihood, softmax cross-entropy.

use serde::{Deserialize, Serialize};

/// How a loss reduces its per-element values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LossReduction {
    /// No reduction: the loss has the target's shape.
    None,
    /// Sum of the weighted per-element losses (a scalar).
    Sum,
    /// Weighted mean: sum of the weighted losses over the sum of the weights used (a scalar).
    Mean,
}

crate::op_family! {
    /// Training losses: negative log-likelihood, softmax cross-entropy.
    pub enum LossOp {
        /// Loss of log-probabilities `input[N, C, d1..dk]` at class indices `target[N, d1..dk]`,
        /// optionally weighted per class (input 2).
        NegativeLogLikelihoodLoss {
            /// How the per-element losses are reduced.
            reduction: LossReduction,
            /// Target value that contributes nothing (neither loss nor weight), if any.
            ignore_index: Option<i64>,
        },
        /// Negative log-likelihood of the log-softmax over axis 1 of `scores[N, C, d1..dk]`;
        /// the optional second output is that log-softmax.
        SoftmaxCrossEntropyLoss {
            /// How the per-element losses are reduced.
            reduction: LossReduction,
            /// Target value that contributes nothing (neither loss nor weight), if any.
            ignore_index: Option<i64>,
        },
    }
}
