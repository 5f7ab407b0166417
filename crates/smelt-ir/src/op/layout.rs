//! The `LayoutOp` family: shape and data movement: reshape, transpose, slice, gather, scatter, pad, concat, expand.
//!
//! Where an ONNX attribute became an input in a later opset, the op keeps the attribute's
//! value as an `Option`; when it is `None` the kernel reads the input instead.

use crate::{DType, Tensor};
use serde::{Deserialize, Serialize};

/// How a scatter combines an update with the element already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScatterReduction {
    /// The update replaces the element (later updates win).
    None,
    /// Sum.
    Add,
    /// Product.
    Mul,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}

/// How Pad fills the new border.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PadMode {
    /// A constant value.
    Constant,
    /// Mirror without repeating the edge element.
    Reflect,
    /// Repeat the edge element.
    Edge,
    /// Wrap around (periodic).
    Wrap,
}

/// Element order of DepthToSpace / SpaceToDepth within the depth dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BlockMode {
    /// Depth-column-row.
    Dcr,
    /// Column-row-depth.
    Crd,
}

crate::op_family! {
    /// Shape and data movement: reshape, transpose, slice, gather, scatter, pad, concat, expand.
    pub enum LayoutOp {
        /// Passes its input (any value: tensor, sequence, optional) through unchanged.
        Identity,
        /// Reshapes to the `shape` input (0 copies a dim unless `allowzero`, -1 is inferred).
        Reshape {
            /// Opset-1 `shape` attribute; None reads input 1.
            shape: Option<Vec<i64>>,
            /// A 0 in the shape means an empty dim rather than "copy the input dim".
            allowzero: bool,
        },
        /// Flattens to 2-D: dims before `axis` and dims from `axis` on.
        Flatten {
            /// Split point, in [-r, r].
            axis: i64,
        },
        /// Removes dims of size 1.
        Squeeze {
            /// Axes from the attribute (opset < 13); None reads input 1, and all size-1 dims go when it is absent too.
            axes: Option<Vec<i64>>,
        },
        /// Inserts dims of size 1.
        Unsqueeze {
            /// Axes (of the output) from the attribute (opset < 13); None reads input 1.
            axes: Option<Vec<i64>>,
        },
        /// Permutes the dims.
        Transpose {
            /// The permutation; None reverses the dims.
            perm: Option<Vec<i64>>,
        },
        /// Joins the inputs along an axis.
        Concat {
            /// The axis, in [-r, r-1].
            axis: i64,
        },
        /// Splits along an axis into one tensor per output.
        Split {
            /// The axis, in [-r, r-1].
            axis: i64,
            /// Sizes from the attribute (opset < 13); None reads input 1 when present.
            split: Option<Vec<i64>>,
            /// Number of equal chunks (opset 18), the last one possibly smaller; None uses the output count.
            num_outputs: Option<i64>,
        },
        /// Strided slice along some axes.
        Slice {
            /// Opset-1 `starts` attribute; None reads inputs 1..=4 (starts, ends, axes, steps).
            starts: Option<Vec<i64>>,
            /// Opset-1 `ends` attribute.
            ends: Option<Vec<i64>>,
            /// Opset-1 `axes` attribute (None with `starts` set means all leading axes).
            axes: Option<Vec<i64>>,
        },
        /// Takes slices along an axis at the given indices.
        Gather {
            /// The axis, in [-r, r-1].
            axis: i64,
        },
        /// Takes elements along an axis, indices shaped like the output.
        GatherElements {
            /// The axis, in [-r, r-1].
            axis: i64,
        },
        /// Takes slices addressed by index tuples in the last dim of `indices`.
        GatherND {
            /// Number of leading batch dims shared by data and indices.
            batch_dims: i64,
        },
        /// Writes updates along an axis at the given indices (also the deprecated Scatter).
        ScatterElements {
            /// The axis, in [-r, r-1].
            axis: i64,
            /// How updates combine with existing elements.
            reduction: ScatterReduction,
        },
        /// Writes update slices addressed by index tuples.
        ScatterND {
            /// How updates combine with existing elements.
            reduction: ScatterReduction,
        },
        /// Broadcasts the input to the `shape` input (bidirectionally).
        Expand,
        /// Repeats the input along each axis.
        Tile {
            /// Opset-1 form: the inputs are (input, tiles, axis) rather than (input, repeats).
            legacy_axis: bool,
        },
        /// Pads (or, with negative pads, crops) each axis.
        Pad {
            /// Border fill mode.
            mode: PadMode,
            /// Pads from the attribute (opset < 11), all begins then all ends; None reads input 1.
            pads: Option<Vec<i64>>,
            /// Constant from the attribute (opset < 11); None reads input 2 (default 0).
            value: Option<f32>,
        },
        /// The input's shape (dims `start..end`) as an i64 vector.
        Shape {
            /// First dim (negative counts from the back; clamped).
            start: i64,
            /// End dim, exclusive (None is the rank; clamped).
            end: Option<i64>,
        },
        /// The input's element count as an i64 scalar.
        Size,
        /// A tensor of the shape given by input 0 filled with one value.
        ConstantOfShape {
            /// The one-element fill value (its type is the output type); None is f32 zero.
            value: Option<Tensor>,
        },
        /// `start, start + delta, ...` up to `limit`, exclusive.
        Range,
        /// One-hot encoding of the indices with `values` = [off, on].
        OneHot {
            /// Where the new depth axis goes, in [-r-1, r].
            axis: i64,
        },
        /// Keeps the upper or lower triangle of the last two dims (offset by input `k`), zeroing the rest.
        Trilu {
            /// Keep the upper triangle (else the lower).
            upper: bool,
        },
        /// A 2-D identity-like matrix shaped like the input.
        EyeLike {
            /// Output element type; None is the input's type.
            dtype: Option<DType>,
            /// Diagonal offset (positive: above the main diagonal).
            k: i64,
        },
        /// Moves depth into spatial blocks (NCHW).
        DepthToSpace {
            /// Block edge length.
            blocksize: i64,
            /// Depth order.
            mode: BlockMode,
        },
        /// Moves spatial blocks into depth (NCHW).
        SpaceToDepth {
            /// Block edge length.
            blocksize: i64,
            /// Depth order.
            mode: BlockMode,
        },
        /// Reverses the first `sequence_lens[b]` steps of each batch entry.
        ReverseSequence {
            /// Batch axis (0 or 1).
            batch_axis: i64,
            /// Time axis (0 or 1).
            time_axis: i64,
        },
        /// Keeps the slices along an axis whose condition is true.
        Compress {
            /// The axis; None flattens the input first.
            axis: Option<i64>,
        },
        /// Indices of the non-zero elements, as [rank, count] i64.
        NonZero,
        /// Unique elements or slices, with first indices, inverse indices and counts.
        Unique {
            /// Axis of the slices; None flattens the input.
            axis: Option<i64>,
            /// Sort ascending (else keep first-occurrence order).
            sorted: bool,
        },
        /// Center-crops or zero-pads some axes to the `shape` input.
        CenterCropPad {
            /// Axes that `shape` refers to; None is all axes.
            axes: Option<Vec<i64>>,
        },
        /// Sums column blocks back into an image (the inverse of im2col).
        Col2Im {
            /// Dilation per spatial axis (empty: all 1).
            dilations: Vec<i64>,
            /// Begin pads then end pads per spatial axis (empty: all 0).
            pads: Vec<i64>,
            /// Stride per spatial axis (empty: all 1).
            strides: Vec<i64>,
        },
    }
}
