//! The `QuantOp` family: quantization, dequantization and integer arithmetic ops.

crate::op_family! {
    /// Quantization, dequantization and integer arithmetic ops.
    pub enum QuantOp {
        /// See the ONNX operator of the same name.
        DynamicQuantizeLinear,
    }
}
