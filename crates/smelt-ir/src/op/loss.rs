//! The `LossOp` family: training losses: negative log-likelihood, softmax cross-entropy.

crate::op_family! {
    /// Training losses: negative log-likelihood, softmax cross-entropy.
    pub enum LossOp {
        /// See the ONNX operator of the same name.
        NegativeLogLikelihoodLoss,
    }
}
