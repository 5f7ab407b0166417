//! The `LlmOp` family: language-model building blocks: SwiGLU, KV-cache scatter, linear and flex attention, causal convolution with state.

crate::op_family! {
    /// Language-model building blocks: SwiGLU, KV-cache scatter, linear and flex attention, causal convolution with state.
    pub enum LlmOp {
        /// See the ONNX operator of the same name.
        SwiGLU,
    }
}
