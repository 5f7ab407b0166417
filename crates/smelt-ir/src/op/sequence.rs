//! The `SequenceOp` family: sequence and optional values.

use crate::Graph;

crate::op_family! {
    /// Ops that build, read and change sequences and optionals.
    pub enum SequenceOp {
        /// A sequence of the input tensors.
        SequenceConstruct,
        /// Applies `body` to each element (and matching elements of extra sequences).
        SequenceMap { body: Box<Graph> },
    }
}

impl SequenceOp {
    /// The subgraphs the op carries.
    pub fn subgraphs(&self) -> Vec<&Graph> {
        match self {
            SequenceOp::SequenceMap { body } => vec![body],
            _ => Vec::new(),
        }
    }
}
