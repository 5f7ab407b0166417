//! The `MiscOp` family: vision, signal, string, random and ML ops that fit no other family.

crate::op_family! {
    /// Vision, signal, string, random and ML ops that fit no other family.
    pub enum MiscOp {
        /// See the ONNX operator of the same name.
        NonMaxSuppression,
    }
}
