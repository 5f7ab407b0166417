//! Reference kernels of the misc op family, one file per op group.

mod codecs;
mod image;
mod jpeg;
mod linalg;
mod ml;
mod ml_maps;
mod png;
mod random;
mod regex;
mod resize;
mod signal;
mod svm;
mod text;
mod tiff;
mod vision;

use super::{Ctx, Inputs};
use smelt_ir::op::MiscOp;
use smelt_ir::{bail, ensure, numel, DType, Result, Tensor, Value};

/// Runs one op of the family.
pub fn run(op: &MiscOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    use MiscOp::*;
    match op {
        Resize { .. } => resize::resize(op, x),
        NonMaxSuppression { center_point_box } => vision::nms(x, *center_point_box),
        RoiAlign { .. } => vision::roi_align(op, x),
        GridSample {
            mode,
            padding,
            align_corners,
        } => vision::grid_sample(x, *mode, *padding, *align_corners),
        ImageDecoder { pixel_format } => image::decode(x, *pixel_format),
        AffineGrid { align_corners } => vision::affine_grid(x, *align_corners),
        Dft {
            onesided,
            inverse,
            axis,
        } => signal::dft(x, *onesided, *inverse, *axis),
        Stft { onesided } => signal::stft(x, *onesided),
        HannWindow { periodic, dtype } => signal::window(x, 0, *periodic, *dtype),
        HammingWindow { periodic, dtype } => signal::window(x, 1, *periodic, *dtype),
        BlackmanWindow { periodic, dtype } => signal::window(x, 2, *periodic, *dtype),
        MelWeightMatrix { dtype } => signal::mel_weight_matrix(x, *dtype),
        StringNormalizer {
            case_change,
            is_case_sensitive,
            stopwords,
        } => text::string_normalizer(x, *case_change, *is_case_sensitive, stopwords),
        StringConcat => text::string_concat(x),
        Det => linalg::det(x.tensor(0)?),
        StringSplit {
            delimiter,
            maxsplit,
        } => text::string_split(x, delimiter.as_deref(), *maxsplit),
        RegexFullMatch { pattern } => text::regex_full_match(x, pattern),
        TfIdfVectorizer { .. } => text::tfidf(op, x),
        Bernoulli { .. }
        | RandomUniform { .. }
        | RandomNormal { .. }
        | RandomUniformLike { .. }
        | RandomNormalLike { .. }
        | Multinomial { .. } => random::run(op, x),
        LabelEncoder {
            keys,
            values,
            default,
        } => ml::label_encoder(x, keys, values, default),
        ArrayFeatureExtractor => ml::array_feature_extractor(x),
        CategoryMapper {
            strings,
            ints,
            default_int,
            default_string,
        } => ml::category_mapper(x, strings, ints, *default_int, default_string),
        Binarizer { threshold } => ml::binarizer(x, *threshold),
        TreeEnsemble(spec) => ml::tree_ensemble(x, spec),
        TreeEnsembleRegressor(spec) => ml::tree_regressor(x, spec),
        TreeEnsembleClassifier { trees, labels } => ml::tree_classifier(x, trees, labels),
        Scaler { offset, scale } => ml::scaler(x, offset, scale),
        Normalizer { norm } => ml::normalizer(x, *norm),
        LinearRegressor {
            coefficients,
            intercepts,
            targets,
        } => ml::linear_regressor(x, coefficients, intercepts, *targets),
        LinearClassifier {
            coefficients,
            intercepts,
            labels,
            post_transform,
        } => ml::linear_classifier(x, coefficients, intercepts, labels, *post_transform),
        Imputer {
            imputed_floats,
            imputed_ints,
            replaced_float,
            replaced_int,
        } => ml::imputer(
            x,
            imputed_floats,
            imputed_ints,
            *replaced_float,
            *replaced_int,
        ),
        ZipMap { labels } => ml_maps::zip_map(x, labels),
        SVMClassifier(spec) => svm::svm_classifier(x, spec),
        SVMRegressor { svm, one_class } => svm::svm_regressor(x, svm, *one_class),
        OneHotEncoder { categories, zeros } => ml_maps::one_hot_encoder(x, categories, *zeros),
        DictVectorizer { vocabulary } => ml_maps::dict_vectorizer(x, vocabulary),
        FeatureVectorizer { widths } => ml_maps::feature_vectorizer(x, widths),
        CastMap { to, dense, max_map } => ml_maps::cast_map(x, *to, *dense, *max_map),
        Adagrad { .. } | Adam { .. } | Momentum { .. } => ml::optimizer(op, x, cx),
    }
}

/// Largest number of elements an op of this family will produce.
const MAX_ELEMS: usize = 1 << 31;

/// Element count of an output shape, refusing absurd sizes and any output over the run's
/// tensor and run limits (counted at the oracle's f64 working width) before allocation.
fn out_numel(shape: &[usize]) -> Result<usize> {
    let n = numel(shape)?;
    ensure!(
        n <= MAX_ELEMS,
        ResourceExhausted,
        "output of shape {shape:?} is too large ({n} elements)"
    );
    smelt_ir::limits::check_alloc((n as u64).saturating_mul(8), &|| {
        format!("an output of shape {shape:?}")
    })?;
    Ok(n)
}

/// A scalar (or one-element) integer input.
fn scalar_i64(x: &Inputs, i: usize, what: &str) -> Result<i64> {
    let v = x
        .tensor(i)?
        .to_i64()
        .map_err(|e| e.context(what.to_string()))?;
    match v.as_slice() {
        [a] => Ok(*a),
        _ => bail!(
            InvalidModel,
            "{what} must be a single integer, got {} elements",
            v.len()
        ),
    }
}

/// A scalar (or one-element) real input.
fn scalar_f64(x: &Inputs, i: usize, what: &str) -> Result<f64> {
    let v = x
        .tensor(i)?
        .to_f64()
        .map_err(|e| e.context(what.to_string()))?;
    match v.as_slice() {
        [a] => Ok(*a),
        _ => bail!(
            InvalidModel,
            "{what} must be a single number, got {} elements",
            v.len()
        ),
    }
}

/// Builds a tensor of `dtype` from f64 values, rounding to nearest (ties to even) for
/// integer types the way numpy's saturate cast does.
fn from_f64_rounded(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> Result<Tensor> {
    if dtype.is_int() {
        let r: Vec<f64> = v.into_iter().map(f64::round_ties_even).collect();
        Tensor::from_f64(dtype, shape, &r)
    } else {
        Tensor::from_f64(dtype, shape, &v)
    }
}
