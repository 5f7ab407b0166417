//! The `ReduceOp` family: reductions over axes, arg-reductions, the softmax family, cumulative sums, top-k.

crate::op_family! {
    /// Reductions over axes, arg-reductions, the softmax family, cumulative sums, top-k.
    pub enum ReduceOp {
        /// See the ONNX operator of the same name.
        ReduceSum,
    }
}
