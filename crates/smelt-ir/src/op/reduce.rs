//! The `ReduceOp` family: reductions over axes, arg-reductions, the softmax family, cumulative sums, top-k.

use serde::{Deserialize, Serialize};

/// Attributes shared by the `Reduce*` ops.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reduction {
    /// Axes to reduce (negative counts from the end); None: read the optional `axes` input.
    pub axes: Option<Vec<i64>>,
    /// Keep reduced axes as size-1 dimensions.
    pub keepdims: bool,
    /// With no axes (empty or absent): true returns the input unchanged, false reduces every axis.
    pub noop_with_empty_axes: bool,
}

crate::op_family! {
    /// Reductions over axes, arg-reductions, the softmax family, cumulative sums, top-k.
    pub enum ReduceOp {
        /// Sum over axes (identity 0).
        ReduceSum(Reduction),
        /// Arithmetic mean over axes (NaN for an empty set).
        ReduceMean(Reduction),
        /// Maximum over axes (identity: the lowest value of the type).
        ReduceMax(Reduction),
        /// Minimum over axes (identity: the highest value of the type).
        ReduceMin(Reduction),
        /// Product over axes (identity 1).
        ReduceProd(Reduction),
        /// Sum of absolute values over axes.
        ReduceL1(Reduction),
        /// Square root of the sum of squares over axes.
        ReduceL2(Reduction),
        /// Natural log of the sum over axes.
        ReduceLogSum(Reduction),
        /// Natural log of the sum of exponentials over axes (computed stably).
        ReduceLogSumExp(Reduction),
        /// Sum of squares over axes.
        ReduceSumSquare(Reduction),
        /// Index (i64) of the largest element along an axis.
        ArgMax {
            /// The axis (negative counts from the end).
            axis: i64,
            /// Keep the reduced axis as a size-1 dimension.
            keepdims: bool,
            /// On ties, return the last index instead of the first.
            select_last_index: bool,
        },
        /// Index (i64) of the smallest element along an axis.
        ArgMin {
            /// The axis (negative counts from the end).
            axis: i64,
            /// Keep the reduced axis as a size-1 dimension.
            keepdims: bool,
            /// On ties, return the last index instead of the first.
            select_last_index: bool,
        },
        /// exp(x - max) / sum(exp(x - max)) along an axis.
        Softmax {
            /// The axis (negative counts from the end).
            axis: i64,
            /// Opset < 13 semantics: normalize over all dimensions from `axis` on, as one flattened axis.
            coerce_2d: bool,
        },
        /// log(softmax(x)) along an axis.
        LogSoftmax {
            /// The axis (negative counts from the end).
            axis: i64,
            /// Opset < 13 semantics: normalize over all dimensions from `axis` on, as one flattened axis.
            coerce_2d: bool,
        },
        /// 1 at the first maximum along an axis, 0 elsewhere.
        Hardmax {
            /// The axis (negative counts from the end).
            axis: i64,
            /// Opset < 13 semantics: take the maximum over all dimensions from `axis` on, flattened.
            coerce_2d: bool,
        },
        /// Cumulative sum along the axis given by the second input.
        CumSum {
            /// Leave out the current element (the first output is the identity).
            exclusive: bool,
            /// Accumulate from the end of the axis.
            reverse: bool,
        },
        /// Cumulative product along the axis given by the second input.
        CumProd {
            /// Leave out the current element (the first output is the identity).
            exclusive: bool,
            /// Accumulate from the end of the axis.
            reverse: bool,
        },
        /// The k largest (or smallest) elements along an axis and their i64 indices.
        TopK {
            /// k from the attribute (opset 1); None: read the `K` input.
            k: Option<i64>,
            /// The axis (negative counts from the end).
            axis: i64,
            /// True for the largest elements, false for the smallest.
            largest: bool,
            /// Return the elements in sorted order (they are always sorted here; ties go to the lower index).
            sorted: bool,
        },
    }
}

impl ReduceOp {
    /// The shared attributes when the op is one of the `Reduce*` ops.
    pub fn reduction(&self) -> Option<&Reduction> {
        use ReduceOp::*;
        match self {
            ReduceSum(r) | ReduceMean(r) | ReduceMax(r) | ReduceMin(r) | ReduceProd(r)
            | ReduceL1(r) | ReduceL2(r) | ReduceLogSum(r) | ReduceLogSumExp(r)
            | ReduceSumSquare(r) => Some(r),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    #[test]
    fn attributes_round_trip() {
        let r = Reduction {
            axes: Some(vec![-1, 0]),
            keepdims: false,
            noop_with_empty_axes: true,
        };
        let ops = [
            ReduceOp::ReduceLogSumExp(r.clone()),
            ReduceOp::ReduceSum(Reduction { axes: None, ..r }),
            ReduceOp::ArgMin {
                axis: -2,
                keepdims: true,
                select_last_index: true,
            },
            ReduceOp::Softmax {
                axis: 1,
                coerce_2d: true,
            },
            ReduceOp::CumProd {
                exclusive: true,
                reverse: false,
            },
            ReduceOp::TopK {
                k: None,
                axis: -1,
                largest: false,
                sorted: true,
            },
        ];
        for op in ops {
            let op = Op::Reduce(op);
            let back = Op::from_parts(op.family(), op.name(), op.attrs_json()).unwrap();
            assert_eq!(back, op);
        }
    }
}
