//! The `LayoutOp` family: shape and data movement: reshape, transpose, slice, gather, scatter, pad, concat, expand.

crate::op_family! {
    /// Shape and data movement: reshape, transpose, slice, gather, scatter, pad, concat, expand.
    pub enum LayoutOp {
        /// See the ONNX operator of the same name.
        Identity,
    }
}
