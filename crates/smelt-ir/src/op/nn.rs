//! The `NnOp` family: neural-network anchor ops: matrix products, convolution, pooling, normalization.
//!
//! Spatial attribute lists (`strides`, `dilations`, `pads`, `kernel_shape`) are stored as given;
//! an empty list means "the ONNX default" (ones, zeros, or inferred from the weights).

use super::AutoPad;
use crate::DType;
use serde::{Deserialize, Serialize};

/// How Dropout behaves, resolved from the opset's attributes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DropoutMode {
    /// Read `ratio` and `training_mode` from the inputs (opset 12+); inference when absent.
    FromInputs,
    /// Fixed by attributes (opset < 12): inference unless `training` is set (opset < 7 `is_test=0`).
    Fixed {
        /// Drop probability.
        ratio: f32,
        /// True when the legacy `is_test` attribute asked for training behaviour.
        training: bool,
        /// The mask output has the input's type (opsets 7-9) instead of bool.
        typed_mask: bool,
    },
}

crate::op_family! {
    /// Neural-network anchor ops: matrix products, convolution, pooling, normalization.
    pub enum NnOp {
        /// Numpy-style matrix product (1-D operands promoted, batch dimensions broadcast).
        MatMul,
        /// General matrix multiply: `alpha * op(A) * op(B) + beta * C`.
        Gemm {
            /// Scale of the product.
            alpha: f32,
            /// Scale of C.
            beta: f32,
            /// Use A transposed.
            trans_a: bool,
            /// Use B transposed.
            trans_b: bool,
        },
        /// N-D convolution (NCHW..., weights M x C/group x k...).
        Conv {
            /// Padding style.
            auto_pad: AutoPad,
            /// Dilation per spatial axis (empty: ones).
            dilations: Vec<i64>,
            /// Number of groups.
            group: i64,
            /// Kernel spatial shape (empty: from W).
            kernel_shape: Vec<i64>,
            /// Begin pads then end pads (empty: zeros).
            pads: Vec<i64>,
            /// Stride per spatial axis (empty: ones).
            strides: Vec<i64>,
        },
        /// A 2-D convolution in the blocked channel layout (NCHW16c), made by the
        /// `blocked-layout` pass: input `[N, C/16, H, W, 16]`, weights `M x C x kh x kw`,
        /// optional bias `[M]`, output `[N, M/16, OH, OW, 16]`; C and M multiples of 16,
        /// one group. Attributes as Conv's.
        ConvBlocked {
            /// Padding style.
            auto_pad: AutoPad,
            /// Dilation per spatial axis (empty: ones).
            dilations: Vec<i64>,
            /// Kernel spatial shape (empty: from W).
            kernel_shape: Vec<i64>,
            /// Begin pads then end pads (empty: zeros).
            pads: Vec<i64>,
            /// Stride per spatial axis (empty: ones).
            strides: Vec<i64>,
        },
        /// N-D transposed convolution (weights C x M/group x k...).
        ConvTranspose {
            /// Padding style.
            auto_pad: AutoPad,
            /// Dilation per spatial axis (empty: ones).
            dilations: Vec<i64>,
            /// Number of groups.
            group: i64,
            /// Kernel spatial shape (empty: from W).
            kernel_shape: Vec<i64>,
            /// Extra size added at the end of each output axis (empty: zeros).
            output_padding: Vec<i64>,
            /// Requested output spatial shape (empty: computed from pads).
            output_shape: Vec<i64>,
            /// Begin pads then end pads (empty: zeros or computed).
            pads: Vec<i64>,
            /// Stride per spatial axis (empty: ones).
            strides: Vec<i64>,
        },
        /// Deformable convolution (opset 19+).
        DeformConv {
            /// Dilation per spatial axis (empty: ones).
            dilations: Vec<i64>,
            /// Number of groups.
            group: i64,
            /// Kernel spatial shape (empty: from W).
            kernel_shape: Vec<i64>,
            /// Number of offset groups.
            offset_group: i64,
            /// Begin pads then end pads (empty: zeros).
            pads: Vec<i64>,
            /// Stride per spatial axis (empty: ones).
            strides: Vec<i64>,
        },
        /// Max pooling with an optional Indices output.
        MaxPool {
            /// Padding style.
            auto_pad: AutoPad,
            /// Use ceil instead of floor for the output size.
            ceil_mode: bool,
            /// Dilation per spatial axis (empty: ones).
            dilations: Vec<i64>,
            /// Window spatial shape.
            kernel_shape: Vec<i64>,
            /// Begin pads then end pads (empty: zeros).
            pads: Vec<i64>,
            /// Indices are column-major (1) or row-major (0).
            storage_order: i64,
            /// Stride per spatial axis (empty: ones).
            strides: Vec<i64>,
        },
        /// Average pooling.
        AveragePool {
            /// Padding style.
            auto_pad: AutoPad,
            /// Use ceil instead of floor for the output size.
            ceil_mode: bool,
            /// Count padded positions in the divisor.
            count_include_pad: bool,
            /// Dilation per spatial axis (empty: ones).
            dilations: Vec<i64>,
            /// Window spatial shape.
            kernel_shape: Vec<i64>,
            /// Begin pads then end pads (empty: zeros).
            pads: Vec<i64>,
            /// Stride per spatial axis (empty: ones).
            strides: Vec<i64>,
        },
        /// Lp pooling: `(sum |x|^p)^(1/p)` over each window.
        LpPool {
            /// Padding style.
            auto_pad: AutoPad,
            /// Use ceil instead of floor for the output size.
            ceil_mode: bool,
            /// Dilation per spatial axis (empty: ones).
            dilations: Vec<i64>,
            /// Window spatial shape.
            kernel_shape: Vec<i64>,
            /// The norm's order.
            p: f32,
            /// Begin pads then end pads (empty: zeros).
            pads: Vec<i64>,
            /// Stride per spatial axis (empty: ones).
            strides: Vec<i64>,
        },
        /// Mean over all spatial positions.
        GlobalAveragePool,
        /// Max over all spatial positions.
        GlobalMaxPool,
        /// Lp norm over all spatial positions.
        GlobalLpPool {
            /// The norm's order.
            p: f32,
        },
        /// Inverse of MaxPool: scatters values to the positions given by indices.
        MaxUnpool {
            /// Window spatial shape.
            kernel_shape: Vec<i64>,
            /// Begin pads then end pads (empty: zeros).
            pads: Vec<i64>,
            /// Stride per spatial axis (empty: ones).
            strides: Vec<i64>,
        },
        /// Max pooling over regions of interest.
        MaxRoiPool {
            /// Output height and width.
            pooled_shape: Vec<i64>,
            /// Scale from ROI coordinates to input coordinates.
            spatial_scale: f32,
        },
        /// Batch normalization (inference statistics, or batch statistics in training mode).
        BatchNormalization {
            /// Added to the variance.
            epsilon: f32,
            /// Running-average factor (training mode outputs).
            momentum: f32,
            /// Use batch statistics and produce running mean/var outputs.
            training_mode: bool,
            /// Per-channel statistics (false: per-activation, legacy opsets).
            spatial: bool,
        },
        /// Per-instance, per-channel normalization.
        InstanceNormalization {
            /// Added to the variance.
            epsilon: f32,
        },
        /// Normalization over the axes from `axis` to the end.
        LayerNormalization {
            /// First normalized axis (may be negative).
            axis: i64,
            /// Added to the variance.
            epsilon: f32,
            /// Type of the computation (and of the Mean/InvStdDev outputs).
            stash_type: DType,
        },
        /// Normalization over groups of channels.
        GroupNormalization {
            /// Added to the variance.
            epsilon: f32,
            /// Number of groups.
            num_groups: i64,
            /// Scale and bias are per group (opset 18) instead of per channel.
            per_group_affine: bool,
            /// Type of the computation.
            stash_type: DType,
        },
        /// Root-mean-square normalization over the axes from `axis` to the end.
        RmsNormalization {
            /// First normalized axis (may be negative).
            axis: i64,
            /// Added to the mean square.
            epsilon: f32,
            /// Type of the computation.
            stash_type: DType,
        },
        /// `(x - mean) / std` over the given axes.
        MeanVarianceNormalization {
            /// Axes to normalize over.
            axes: Vec<i64>,
        },
        /// Divides by the Lp norm along one axis (zero where the norm is zero).
        LpNormalization {
            /// The axis (may be negative).
            axis: i64,
            /// The norm's order (1 or 2).
            p: i64,
        },
        /// Local response normalization across channels.
        Lrn {
            /// Scale.
            alpha: f32,
            /// Exponent.
            beta: f32,
            /// Offset.
            bias: f32,
            /// Number of channels summed.
            size: i64,
        },
        /// Dropout (identity in inference).
        Dropout {
            /// Where ratio and training mode come from.
            mode: DropoutMode,
            /// Random seed, if given.
            seed: Option<i64>,
        },
        /// Einstein summation.
        Einsum {
            /// The equation, e.g. `bij,bjk->bik`.
            equation: String,
        },
        /// Scaled dot-product attention (opset 23+).
        Attention {
            /// Apply a causal (upper-left aligned... lower-right for past) mask.
            is_causal: bool,
            /// Number of key/value heads (3-D inputs).
            kv_num_heads: Option<i64>,
            /// Number of query heads (3-D inputs).
            q_num_heads: Option<i64>,
            /// Which intermediate the qk_matmul_output returns (0: QK, 1: +mask, 2: softcapped, 3: softmax).
            qk_matmul_output_mode: i64,
            /// Scale of QK (default 1/sqrt(head_size)).
            scale: Option<f32>,
            /// Softcap value (0: none).
            softcap: f32,
            /// Type of the softmax computation, if given.
            softmax_precision: Option<DType>,
            /// Sliding window to the left (-1: unlimited).
            left_window_size: i64,
            /// Sliding window to the right (-1: unlimited).
            right_window_size: i64,
        },
        /// Rotary position embedding (opset 23+).
        RotaryEmbedding {
            /// Rotate interleaved pairs instead of halves.
            interleaved: bool,
            /// Number of heads (3-D input).
            num_heads: Option<i64>,
            /// Number of rotated features (0: all).
            rotary_embedding_dim: i64,
        },
    }
}

/// Channels per block of the blocked layout [`NnOp::ConvBlocked`] reads and writes.
pub const CHANNEL_BLOCK: usize = 16;

impl NnOp {
    /// The plain (NCHW) convolution a [`NnOp::ConvBlocked`] computes; None for other ops.
    pub fn unblocked_conv(&self) -> Option<NnOp> {
        match self {
            NnOp::ConvBlocked {
                auto_pad,
                dilations,
                kernel_shape,
                pads,
                strides,
            } => Some(NnOp::Conv {
                auto_pad: auto_pad.clone(),
                dilations: dilations.clone(),
                group: 1,
                kernel_shape: kernel_shape.clone(),
                pads: pads.clone(),
                strides: strides.clone(),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    #[test]
    fn attrs_round_trip() {
        let ops = vec![
            NnOp::MatMul,
            NnOp::Conv {
                auto_pad: AutoPad::SameLower,
                dilations: vec![1, 2],
                group: 2,
                kernel_shape: vec![],
                pads: vec![],
                strides: vec![2, 2],
            },
            NnOp::ConvBlocked {
                auto_pad: AutoPad::NotSet,
                dilations: vec![],
                kernel_shape: vec![3, 3],
                pads: vec![1, 1, 1, 1],
                strides: vec![2, 2],
            },
            NnOp::LayerNormalization {
                axis: -1,
                epsilon: 1e-5,
                stash_type: DType::F32,
            },
            NnOp::Dropout {
                mode: DropoutMode::Fixed {
                    ratio: 0.2,
                    training: false,
                    typed_mask: true,
                },
                seed: Some(3),
            },
            NnOp::Attention {
                is_causal: true,
                kv_num_heads: None,
                q_num_heads: Some(4),
                qk_matmul_output_mode: 0,
                scale: Some(0.125),
                softcap: 0.0,
                softmax_precision: Some(DType::F32),
                left_window_size: -1,
                right_window_size: 2,
            },
        ];
        for o in ops {
            let op = Op::Nn(o);
            let back = Op::from_parts(op.family(), op.name(), op.attrs_json()).unwrap();
            assert_eq!(op, back);
        }
    }
}
