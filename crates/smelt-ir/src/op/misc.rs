//! The `MiscOp` family: vision, signal, string, random and ML ops that fit no other family.

pub use super::ml::{CastMapTo, SvmClassifierSpec, SvmKernel, SvmSpec};
use crate::{DType, Tensor};
use serde::{Deserialize, Serialize};

/// Interpolation of Resize and GridSample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InterpMode {
    /// Nearest neighbour.
    Nearest,
    /// Linear (bilinear, trilinear...).
    Linear,
    /// Cubic convolution.
    Cubic,
}

/// How Resize maps an output coordinate to an input coordinate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CoordMode {
    /// `(x + 0.5) / scale - 0.5`.
    HalfPixel,
    /// Like half_pixel, centred on the rounded output size.
    HalfPixelSymmetric,
    /// Like half_pixel, but -0.5... maps to 0 when the output length is 1.
    PytorchHalfPixel,
    /// `x * (in - 1) / (out - 1)`.
    AlignCorners,
    /// `x / scale`.
    Asymmetric,
    /// Coordinates inside the region of interest given by `roi`.
    TfCropAndResize,
    /// `(x + 0.5) / scale` (Resize-11, nearest mode).
    TfHalfPixelForNn,
}

/// How Resize rounds a coordinate in nearest mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NearestMode {
    /// Round half down.
    RoundPreferFloor,
    /// Round half up.
    RoundPreferCeil,
    /// Floor.
    Floor,
    /// Ceil.
    Ceil,
    /// Floor when upsampling, ceil when downsampling (Resize-10 and Upsample).
    Simple,
}

/// How Resize with `sizes` keeps the aspect ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AspectPolicy {
    /// Use the sizes as given.
    Stretch,
    /// One scale for all axes, the smallest one.
    NotLarger,
    /// One scale for all axes, the largest one.
    NotSmaller,
}

/// Out-of-range handling of GridSample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GridPadding {
    /// Zeros outside.
    Zeros,
    /// Clamp to the border.
    Border,
    /// Reflect at the border.
    Reflection,
}

/// Channel layout of ImageDecoder's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PixelFormat {
    /// [H, W, 3] red, green, blue.
    Rgb,
    /// [H, W, 3] blue, green, red.
    Bgr,
    /// [H, W, 1] luma.
    Grayscale,
}

/// Case change of StringNormalizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CaseChange {
    /// Keep the case.
    None,
    /// Lower case.
    Lower,
    /// Upper case.
    Upper,
}

/// Weighting of TfIdfVectorizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TfIdfMode {
    /// Term frequency.
    Tf,
    /// Inverse document frequency weight when present.
    Idf,
    /// Term frequency times weight.
    TfIdf,
}

/// Split comparison of a TreeEnsemble node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TreeNodeMode {
    /// x <= split.
    Leq,
    /// x < split.
    Lt,
    /// x >= split.
    Gte,
    /// x > split.
    Gt,
    /// x == split.
    Eq,
    /// x != split.
    Neq,
    /// x is in the node's membership set.
    Member,
}

/// The trees of a TreeEnsemble (ai.onnx.ml opset 5), flattened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeEnsembleSpec {
    /// 0 average, 1 sum, 2 min, 3 max.
    pub aggregate: i64,
    /// 0 none, 1 softmax, 2 softmax_zero, 3 softmax-like logistic, 4 probit (only 0 supported at run time).
    pub post_transform: i64,
    /// Number of outputs per row.
    pub n_targets: i64,
    /// Feature index of each interior node.
    pub feature_ids: Vec<i64>,
    /// Comparison of each interior node.
    pub modes: Vec<TreeNodeMode>,
    /// Threshold of each interior node.
    pub splits: Vec<f64>,
    /// Next index when the comparison holds.
    pub true_ids: Vec<i64>,
    /// Whether `true_ids` names a leaf.
    pub true_leafs: Vec<bool>,
    /// Next index when the comparison fails.
    pub false_ids: Vec<i64>,
    /// Whether `false_ids` names a leaf.
    pub false_leafs: Vec<bool>,
    /// Take the true branch when the feature is NaN.
    pub missing_tracks_true: Vec<bool>,
    /// Target of each leaf.
    pub leaf_targets: Vec<i64>,
    /// Weight of each leaf.
    pub leaf_weights: Vec<f64>,
    /// Root node of each tree.
    pub roots: Vec<i64>,
    /// The set of each node (empty except for `Member` nodes).
    pub membership: Vec<Vec<f64>>,
}

/// The trees of a TreeEnsembleRegressor (ai.onnx.ml opsets 1 and 3), with node ids resolved
/// to indices into these vectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeRegressorSpec {
    /// 0 average, 1 sum, 2 min, 3 max.
    pub aggregate: i64,
    /// 0 none, 1 softmax, 2 logistic, 3 softmax_zero (4 probit is refused).
    pub post_transform: i64,
    /// Number of outputs per row.
    pub n_targets: i64,
    /// Added to each target after aggregation (empty means zeros).
    pub base_values: Vec<f64>,
    /// Feature index of each node.
    pub feature_ids: Vec<i64>,
    /// Comparison of each node; None for a leaf.
    pub modes: Vec<Option<TreeNodeMode>>,
    /// Threshold of each node.
    pub values: Vec<f64>,
    /// Node index taken when the comparison holds.
    pub true_next: Vec<usize>,
    /// Node index taken when it fails.
    pub false_next: Vec<usize>,
    /// Take the true branch when the feature is NaN.
    pub missing_tracks_true: Vec<bool>,
    /// (target, weight) pairs of each node (leaves only).
    pub leaf_targets: Vec<Vec<(i64, f64)>>,
    /// Root node of each tree.
    pub roots: Vec<usize>,
}

/// Row norm of the ai.onnx.ml Normalizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NormKind {
    /// Divide by the largest value.
    Max,
    /// Divide by the sum of absolute values.
    L1,
    /// Divide by the Euclidean norm.
    L2,
}

crate::op_family! {
    /// Vision, signal, string, random and ML ops that fit no other family.
    pub enum MiscOp {
        /// Resize (and the deprecated Upsample): interpolates the trailing axes to new sizes.
        Resize {
            /// Interpolation mode.
            mode: InterpMode,
            /// Output-to-input coordinate mapping.
            coord: CoordMode,
            /// Rounding of nearest mode.
            nearest: NearestMode,
            /// The `a` of cubic convolution.
            cubic_coeff_a: f32,
            /// Give zero weight to samples outside the input (then renormalize).
            exclude_outside: bool,
            /// Value of tf_crop_and_resize samples outside the input.
            extrapolation_value: f32,
            /// Widen the filter when downsampling (linear and cubic).
            antialias: bool,
            /// Axes that `scales`/`sizes`/`roi` refer to; None means all.
            axes: Option<Vec<i64>>,
            /// Aspect ratio handling for `sizes`.
            keep_aspect_ratio_policy: AspectPolicy,
            /// Scales given as an attribute (Upsample-1/7); else read from the inputs.
            scales: Option<Vec<f32>>,
            /// Input slot of `roi`, if the op version has one.
            roi_input: Option<usize>,
            /// Input slot of `scales`, if the op version has one.
            scales_input: Option<usize>,
            /// Input slot of `sizes`, if the op version has one.
            sizes_input: Option<usize>,
        },
        /// NonMaxSuppression: selects boxes per batch and class by score, dropping overlaps.
        NonMaxSuppression {
            /// Boxes are [x_center, y_center, width, height] instead of corners.
            center_point_box: bool,
        },
        /// RoiAlign: bilinear-sampled pooling over regions of interest.
        RoiAlign {
            /// Max pooling instead of average.
            max_mode: bool,
            /// Shift the roi by -0.5 pixel (coordinate_transformation_mode half_pixel).
            half_pixel: bool,
            /// Pooled output height.
            output_height: i64,
            /// Pooled output width.
            output_width: i64,
            /// Samples per bin and axis; 0 means adaptive.
            sampling_ratio: i64,
            /// Scale from roi coordinates to input pixels.
            spatial_scale: f32,
        },
        /// GridSample: samples the input at normalized grid locations.
        GridSample {
            /// Interpolation mode.
            mode: InterpMode,
            /// Out-of-range handling.
            padding: GridPadding,
            /// -1 and 1 are the centres of the corner pixels (else their outer edges).
            align_corners: bool,
        },
        /// AffineGrid: a sampling grid from affine matrices.
        AffineGrid {
            /// -1 and 1 are the centres of the corner pixels.
            align_corners: bool,
        },
        /// ImageDecoder: decodes an encoded image (BMP, PNM and PNG are supported) to u8 pixels.
        ImageDecoder {
            /// Output channel layout.
            pixel_format: PixelFormat,
        },
        /// DFT: discrete Fourier transform along one axis (complex as a trailing dim of 2).
        Dft {
            /// Keep only the non-redundant half of a real signal's spectrum (or invert one).
            onesided: bool,
            /// Inverse transform.
            inverse: bool,
            /// The axis (opset < 20 attribute); None reads input 2, default -2.
            axis: Option<i64>,
        },
        /// STFT: short-time Fourier transform.
        Stft {
            /// Keep only the non-redundant half of the spectrum.
            onesided: bool,
        },
        /// HannWindow.
        HannWindow {
            /// Periodic (length N+1 truncated) rather than symmetric.
            periodic: bool,
            /// Output element type.
            dtype: DType,
        },
        /// HammingWindow.
        HammingWindow {
            /// Periodic rather than symmetric.
            periodic: bool,
            /// Output element type.
            dtype: DType,
        },
        /// BlackmanWindow.
        BlackmanWindow {
            /// Periodic rather than symmetric.
            periodic: bool,
            /// Output element type.
            dtype: DType,
        },
        /// MelWeightMatrix: triangular mel filter bank.
        MelWeightMatrix {
            /// Output element type.
            dtype: DType,
        },
        /// StringNormalizer: case change and stopword removal.
        StringNormalizer {
            /// Case change.
            case_change: CaseChange,
            /// Stopwords match case-sensitively.
            is_case_sensitive: bool,
            /// Words to remove.
            stopwords: Vec<String>,
        },
        /// StringConcat: elementwise concatenation with broadcasting.
        StringConcat,
        /// Det: determinant of each square matrix in the last two axes.
        Det,
        /// StringSplit: splits strings, padding with empty strings.
        StringSplit {
            /// Delimiter; None splits on runs of whitespace.
            delimiter: Option<String>,
            /// Maximum number of splits; None means unlimited.
            maxsplit: Option<i64>,
        },
        /// RegexFullMatch: whether each string fully matches a pattern.
        RegexFullMatch {
            /// The pattern (RE2 syntax; a common subset is supported).
            pattern: String,
        },
        /// TfIdfVectorizer: n-gram counts over a vocabulary.
        TfIdfVectorizer {
            /// Weighting.
            mode: TfIdfMode,
            /// Smallest n-gram length.
            min_gram_length: i64,
            /// Largest n-gram length.
            max_gram_length: i64,
            /// Largest number of items skipped between n-gram items.
            max_skip_count: i64,
            /// Start offset in the pool of each n-gram length (1-grams first).
            ngram_counts: Vec<i64>,
            /// Output index of each n-gram of the pool.
            ngram_indexes: Vec<i64>,
            /// The pool as integers (when the input is integers).
            pool_ints: Vec<i64>,
            /// The pool as strings (when the input is strings).
            pool_strings: Vec<String>,
            /// Weight of each n-gram (IDF modes); empty means 1.
            weights: Vec<f32>,
        },
        /// Bernoulli: 0/1 draws with the input probabilities.
        Bernoulli {
            /// Output element type; None means the input's.
            dtype: Option<DType>,
            /// Seed of the generator.
            seed: Option<f32>,
        },
        /// RandomUniform: uniform draws of a given shape.
        RandomUniform {
            /// Output element type.
            dtype: DType,
            /// Lower bound.
            low: f32,
            /// Upper bound.
            high: f32,
            /// Seed of the generator.
            seed: Option<f32>,
            /// Output shape.
            shape: Vec<i64>,
        },
        /// RandomNormal: normal draws of a given shape.
        RandomNormal {
            /// Output element type.
            dtype: DType,
            /// Mean.
            mean: f32,
            /// Standard deviation.
            scale: f32,
            /// Seed of the generator.
            seed: Option<f32>,
            /// Output shape.
            shape: Vec<i64>,
        },
        /// RandomUniformLike: uniform draws shaped like the input.
        RandomUniformLike {
            /// Output element type; None means the input's.
            dtype: Option<DType>,
            /// Lower bound.
            low: f32,
            /// Upper bound.
            high: f32,
            /// Seed of the generator.
            seed: Option<f32>,
        },
        /// RandomNormalLike: normal draws shaped like the input.
        RandomNormalLike {
            /// Output element type; None means the input's.
            dtype: Option<DType>,
            /// Mean.
            mean: f32,
            /// Standard deviation.
            scale: f32,
            /// Seed of the generator.
            seed: Option<f32>,
        },
        /// Multinomial: class samples from unnormalized log-probabilities.
        Multinomial {
            /// Output element type (i32 or i64).
            dtype: DType,
            /// Samples per batch row.
            sample_size: i64,
            /// Seed of the generator.
            seed: Option<f32>,
        },
        /// ai.onnx.ml LabelEncoder: maps keys to values, a default for the rest.
        LabelEncoder {
            /// Keys (1-D).
            keys: Tensor,
            /// Values (1-D, same length).
            values: Tensor,
            /// Value of unknown keys (scalar or 1-element).
            default: Tensor,
        },
        /// ai.onnx.ml CategoryMapper (and LabelEncoder-1): strings to integers or back, by the
        /// input's type.
        CategoryMapper {
            /// The string categories.
            strings: Vec<String>,
            /// The integer of each string category.
            ints: Vec<i64>,
            /// Result for an unknown string.
            default_int: i64,
            /// Result for an unknown integer.
            default_string: String,
        },
        /// ai.onnx.ml ArrayFeatureExtractor: gathers along the last axis.
        ArrayFeatureExtractor,
        /// ai.onnx.ml Binarizer: 1 where x > threshold, else 0.
        Binarizer {
            /// The threshold.
            threshold: f32,
        },
        /// ai.onnx.ml TreeEnsemble (opset 5).
        TreeEnsemble(Box<TreeEnsembleSpec>),
        /// ai.onnx.ml TreeEnsembleRegressor (opsets 1 and 3).
        TreeEnsembleRegressor(Box<TreeRegressorSpec>),
        /// ai.onnx.ml TreeEnsembleClassifier (opsets 1 and 3): labels [N] and scores [N, classes],
        /// following onnxruntime's handling of the binary case.
        TreeEnsembleClassifier {
            /// The trees; leaf targets are class indices, aggregation is a sum.
            trees: Box<TreeRegressorSpec>,
            /// Class labels (i64 or strings).
            labels: Tensor,
        },
        /// ai.onnx.ml Scaler: `(x - offset) * scale` per feature, as f32.
        Scaler {
            /// Per-feature (or single) offset.
            offset: Vec<f32>,
            /// Per-feature (or single) scale.
            scale: Vec<f32>,
        },
        /// ai.onnx.ml Normalizer: each row divided by its norm, as f32.
        Normalizer {
            /// The norm.
            norm: NormKind,
        },
        /// ai.onnx.ml LinearRegressor: `X @ coefficients^T + intercepts`.
        LinearRegressor {
            /// [targets, features] row-major.
            coefficients: Vec<f32>,
            /// Per-target intercepts (empty means zeros).
            intercepts: Vec<f32>,
            /// Number of targets.
            targets: i64,
        },
        /// ai.onnx.ml LinearClassifier: labels [N] and scores [N, classes] of `X @ coefficients^T + intercepts`.
        LinearClassifier {
            /// [classes, features] row-major (one row for a binary model).
            coefficients: Vec<f32>,
            /// Per-class intercepts (empty means zeros).
            intercepts: Vec<f32>,
            /// Class labels (i64 or strings).
            labels: Tensor,
            /// 0 none, 1 softmax, 2 logistic, 3 softmax_zero.
            post_transform: i64,
        },
        /// ai.onnx.ml Imputer: replaces a sentinel value with per-feature values.
        Imputer {
            /// Replacement values for float inputs (per feature or single).
            imputed_floats: Vec<f32>,
            /// Replacement values for integer inputs (per feature or single).
            imputed_ints: Vec<i64>,
            /// Float sentinel; None stands for NaN (kept out of the attributes so they stay JSON).
            replaced_float: Option<f32>,
            /// Integer sentinel.
            replaced_int: i64,
        },
        /// ai.onnx.ml ZipMap: each row of `[N, C]` scores (or one `[C]` row) as a map from
        /// the C labels; a sequence of N maps.
        ZipMap {
            /// The keys (i64 or strings, distinct).
            labels: Tensor,
        },
        /// ai.onnx.ml SVMClassifier: labels [N] and scores of a support vector classifier,
        /// following onnxruntime (votes, Platt scaling with pairwise coupling, the binary case).
        SVMClassifier(Box<SvmClassifierSpec>),
        /// ai.onnx.ml SVMRegressor: `[N, 1]` values of a support vector regressor.
        SVMRegressor {
            /// The geometry.
            svm: Box<SvmSpec>,
            /// One-class SVM: the sign of the value (1 or -1).
            one_class: bool,
        },
        /// ai.onnx.ml OneHotEncoder: `[..., C]` floats, 1 at each value's category.
        OneHotEncoder {
            /// The categories (i64 or strings).
            categories: Tensor,
            /// An unknown value gives zeros; otherwise it is an error.
            zeros: bool,
        },
        /// ai.onnx.ml DictVectorizer: a map as `[1, V]` values in vocabulary order (0 where
        /// a word is not a key).
        DictVectorizer {
            /// The vocabulary (i64 or strings).
            vocabulary: Tensor,
        },
        /// ai.onnx.ml FeatureVectorizer: the inputs' rows side by side as f32, each input
        /// cut or zero-padded to its width.
        FeatureVectorizer {
            /// The width each input takes.
            widths: Vec<usize>,
        },
        /// ai.onnx.ml CastMap: a map from integers as `[1, K]` values in key order.
        CastMap {
            /// The element type of the result.
            to: CastMapTo,
            /// Dense: one column per entry; sparse: one per key 0..max_map, padded.
            dense: bool,
            /// The width of the sparse form.
            max_map: usize,
        },
        /// ai.onnx.preview.training Adagrad: one step for several tensors.
        Adagrad {
            /// Learning-rate decay.
            decay_factor: f32,
            /// Denominator guard.
            epsilon: f32,
            /// L2 regularization coefficient.
            norm_coefficient: f32,
        },
        /// ai.onnx.preview.training Adam: one step for several tensors.
        Adam {
            /// First-moment decay.
            alpha: f32,
            /// Second-moment decay.
            beta: f32,
            /// Denominator guard.
            epsilon: f32,
            /// L2 regularization coefficient.
            norm_coefficient: f32,
            /// Weight decay applied after the step.
            norm_coefficient_post: f32,
        },
        /// ai.onnx.preview.training Momentum: one step for several tensors.
        Momentum {
            /// Decay of the accumulated velocity.
            alpha: f32,
            /// Scale of the gradient.
            beta: f32,
            /// Nesterov momentum instead of standard.
            nesterov: bool,
            /// L2 regularization coefficient.
            norm_coefficient: f32,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    #[test]
    fn attributes_round_trip() {
        let ops = [
            MiscOp::Resize {
                mode: InterpMode::Cubic,
                coord: CoordMode::TfCropAndResize,
                nearest: NearestMode::Simple,
                cubic_coeff_a: -0.5,
                exclude_outside: true,
                extrapolation_value: 10.0,
                antialias: false,
                axes: Some(vec![2, 3]),
                keep_aspect_ratio_policy: AspectPolicy::NotSmaller,
                scales: None,
                roi_input: Some(1),
                scales_input: Some(2),
                sizes_input: Some(3),
            },
            MiscOp::StringConcat,
            MiscOp::StringSplit {
                delimiter: None,
                maxsplit: Some(2),
            },
            MiscOp::HannWindow {
                periodic: false,
                dtype: DType::F64,
            },
            MiscOp::LabelEncoder {
                keys: Tensor::from_strings(vec![2], vec!["a".into(), "b".into()]).unwrap(),
                values: Tensor::from_i64_vec(vec![2], vec![1, 2]).unwrap(),
                default: Tensor::scalar_i64(-1),
            },
            MiscOp::TreeEnsemble(Box::new(TreeEnsembleSpec {
                aggregate: 1,
                post_transform: 0,
                n_targets: 1,
                feature_ids: vec![0],
                modes: vec![TreeNodeMode::Member],
                splits: vec![0.0],
                true_ids: vec![0],
                true_leafs: vec![true],
                false_ids: vec![1],
                false_leafs: vec![true],
                missing_tracks_true: vec![false],
                leaf_targets: vec![0, 0],
                leaf_weights: vec![1.0, 2.0],
                roots: vec![0],
                membership: vec![vec![1.5, 3.0]],
            })),
            MiscOp::ZipMap {
                labels: Tensor::from_strings(vec![2], vec!["a".into(), "b".into()]).unwrap(),
            },
            MiscOp::SVMClassifier(Box::new(SvmClassifierSpec {
                svm: SvmSpec {
                    kernel: SvmKernel::Rbf,
                    gamma: 0.5,
                    coef0: 0.0,
                    degree: 3.0,
                    support_vectors: vec![1.0, 2.0],
                    vectors: 2,
                    features: 1,
                    coefficients: vec![0.5, -0.5],
                    rho: vec![0.1],
                },
                vectors_per_class: vec![1, 1],
                prob_a: vec![],
                prob_b: vec![],
                post_transform: 0,
                labels: Tensor::from_i64_vec(vec![2], vec![0, 1]).unwrap(),
            })),
            MiscOp::CastMap {
                to: CastMapTo::String,
                dense: false,
                max_map: 4,
            },
            MiscOp::FeatureVectorizer { widths: vec![2, 3] },
            MiscOp::Imputer {
                imputed_floats: vec![1.0],
                imputed_ints: vec![],
                replaced_float: None,
                replaced_int: 0,
            },
        ];
        for op in ops {
            let op = Op::Misc(op);
            let back = Op::from_parts(op.family(), op.name(), op.attrs_json()).unwrap();
            assert_eq!(back, op);
        }
    }
}
