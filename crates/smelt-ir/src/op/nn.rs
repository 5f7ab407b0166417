//! The `NnOp` family: neural-network anchor ops: matrix products, convolution, pooling, normalization.

crate::op_family! {
    /// Neural-network anchor ops: matrix products, convolution, pooling, normalization.
    pub enum NnOp {
        /// See the ONNX operator of the same name.
        MatMul,
    }
}
