//! The `ElementwiseOp` family: elementwise math, activations, comparisons, logic and casts; multi-input ops broadcast numpy-style.

crate::op_family! {
    /// Elementwise math, activations, comparisons, logic and casts; multi-input ops broadcast numpy-style.
    pub enum ElementwiseOp {
        /// See the ONNX operator of the same name.
        Add,
        /// See the ONNX operator of the same name.
        Relu,
    }
}
