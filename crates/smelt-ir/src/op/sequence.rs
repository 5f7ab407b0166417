//! The `SequenceOp` family: sequence and optional values.

use crate::{DType, Graph, ValueType};

crate::op_family! {
    /// Ops that build, read and change sequences and optionals.
    pub enum SequenceOp {
        /// An empty sequence of tensors.
        SequenceEmpty {
            /// Element type of the (future) tensors.
            dtype: DType,
        },
        /// A sequence of the input tensors, in order.
        SequenceConstruct,
        /// Inserts a tensor at a position (default: at the end). Inputs: (seq, tensor, position?).
        SequenceInsert,
        /// The element at a position (negative counts from the end). Inputs: (seq, position).
        SequenceAt,
        /// Removes the element at a position (default: the last). Inputs: (seq, position?).
        SequenceErase,
        /// The number of elements, as an i64 scalar.
        SequenceLength,
        /// Splits a tensor along an axis into a sequence. Inputs: (tensor, split?): none for pieces of 1,
        /// a scalar for equal pieces (the last may be smaller), a 1-D tensor for the piece lengths.
        SplitToSequence {
            /// The axis (negative counts from the end).
            axis: i64,
            /// Without `split`: keep the split axis (size 1) in each piece.
            keepdims: bool,
        },
        /// Concatenates (or stacks) the tensors of a sequence along an axis.
        ConcatFromSequence {
            /// The axis (negative counts from the end; with `new_axis`, of the output).
            axis: i64,
            /// Stack along a new axis instead of concatenating.
            new_axis: bool,
        },
        /// Applies `body` to each element (and matching elements of extra sequences; extra tensors are
        /// passed whole); each body output is collected into an output sequence.
        SequenceMap {
            /// The body.
            body: Box<Graph>,
        },
        /// Wraps the input into an optional, or makes an empty optional of `elem` when there is no input.
        Optional {
            /// The content type (from the `type` attribute), for an empty optional.
            elem: Option<ValueType>,
        },
        /// True when the input is present and is not an empty optional.
        OptionalHasElement,
        /// The content of an optional (an error when empty); a tensor or sequence passes through.
        OptionalGetElement,
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

    /// The subgraphs the op carries, for passes that rewrite them.
    pub fn subgraphs_mut(&mut self) -> Vec<&mut Graph> {
        match self {
            SequenceOp::SequenceMap { body } => vec![body],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    #[test]
    fn attributes_round_trip() {
        let elem = ValueType::Sequence(Box::new(ValueType::Tensor {
            dtype: DType::F32,
            shape: None,
        }));
        let ops = [
            SequenceOp::SequenceEmpty { dtype: DType::I64 },
            SequenceOp::SequenceAt,
            SequenceOp::ConcatFromSequence {
                axis: -1,
                new_axis: true,
            },
            SequenceOp::Optional { elem: Some(elem) },
            SequenceOp::Optional { elem: None },
        ];
        for op in ops {
            assert!(op.subgraphs().is_empty());
            let op = Op::Sequence(op);
            let back = Op::from_parts(op.family(), op.name(), op.attrs_json()).unwrap();
            assert_eq!(back, op);
        }
        let body = SequenceOp::SequenceMap {
            body: Box::new(Graph::default()),
        };
        assert_eq!(body.subgraphs().len(), 1);
    }
}
