//! Import of the ai.onnx.ml ops around maps and feature vectors (ZipMap, DictVectorizer,
//! CastMap, OneHotEncoder, FeatureVectorizer) and of the support vector machines.

use super::super::NodeCtx;
use smelt_ir::op::misc::{CastMapTo, SvmClassifierSpec, SvmKernel, SvmSpec};
use smelt_ir::op::MiscOp;
use smelt_ir::{bail, ensure, Result, Tensor};
use std::collections::HashSet;

/// Labels, categories or a vocabulary given as strings or as integers (`<what>_strings`,
/// `<what>_int64s` or an explicit pair of names), as a 1-D tensor; None when neither.
fn keys(n: &NodeCtx, strings: &str, ints: &str) -> Result<Option<Tensor>> {
    let s = n.opt_strings(strings)?.filter(|v| !v.is_empty());
    let i = n.opt_ints(ints)?.filter(|v| !v.is_empty());
    Ok(match (s, i) {
        (Some(_), Some(_)) => bail!(
            InvalidModel,
            "{} has both '{strings}' and '{ints}'",
            n.op_type()
        ),
        (Some(v), None) => Some(Tensor::from_strings(vec![v.len()], v)?),
        (None, Some(v)) => Some(Tensor::from_i64_vec(vec![v.len()], v)?),
        (None, None) => None,
    })
}

/// Ensures 1-D keys have no duplicate.
fn distinct(t: &Tensor, what: &str) -> Result<()> {
    let n = match t.data() {
        smelt_ir::Data::Str(v) => v.iter().collect::<HashSet<_>>().len(),
        _ => t.to_i64()?.into_iter().collect::<HashSet<_>>().len(),
    };
    ensure!(n == t.len(), InvalidModel, "{what} repeat a value");
    Ok(())
}

/// Translates a node of one of this file's ops; None for any other op.
pub(super) fn import(n: &mut NodeCtx) -> Result<Option<MiscOp>> {
    let op = match n.op_type() {
        "ZipMap" => {
            let Some(labels) = keys(n, "classlabels_strings", "classlabels_int64s")? else {
                bail!(
                    InvalidModel,
                    "ZipMap needs classlabels_strings or classlabels_int64s"
                )
            };
            distinct(&labels, "ZipMap's class labels")?;
            MiscOp::ZipMap { labels }
        }
        "DictVectorizer" => {
            let Some(vocabulary) = keys(n, "string_vocabulary", "int64_vocabulary")? else {
                bail!(InvalidModel, "DictVectorizer needs a vocabulary")
            };
            MiscOp::DictVectorizer { vocabulary }
        }
        "CastMap" => MiscOp::CastMap {
            to: match n.s("cast_to", "TO_FLOAT")?.as_str() {
                "TO_FLOAT" => CastMapTo::Float,
                "TO_INT64" => CastMapTo::Int64,
                "TO_STRING" => CastMapTo::String,
                t => bail!(InvalidModel, "CastMap: unknown cast_to '{t}'"),
            },
            dense: match n.s("map_form", "DENSE")?.as_str() {
                "DENSE" => true,
                "SPARSE" => false,
                f => bail!(InvalidModel, "CastMap: unknown map_form '{f}'"),
            },
            max_map: usize::try_from(n.i("max_map", 1)?)
                .map_err(|_| smelt_ir::err!(InvalidModel, "CastMap: negative max_map"))?,
        },
        "OneHotEncoder" => {
            let Some(categories) = keys(n, "cats_strings", "cats_int64s")? else {
                bail!(
                    InvalidModel,
                    "OneHotEncoder needs cats_strings or cats_int64s"
                )
            };
            MiscOp::OneHotEncoder {
                categories,
                zeros: n.i("zeros", 1)? != 0,
            }
        }
        "FeatureVectorizer" => {
            let widths = n
                .opt_ints("inputdimensions")?
                .unwrap_or_default()
                .into_iter()
                .map(|w| {
                    usize::try_from(w).map_err(|_| {
                        smelt_ir::err!(InvalidModel, "FeatureVectorizer: input width {w}")
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            ensure!(
                widths.len() == n.n_inputs(),
                InvalidModel,
                "FeatureVectorizer: {} inputdimensions for {} inputs",
                widths.len(),
                n.n_inputs()
            );
            MiscOp::FeatureVectorizer { widths }
        }
        "SVMClassifier" => svm_classifier(n)?,
        "SVMRegressor" => {
            let vectors = n.i("n_supports", 0)?;
            let svm = svm(n, vectors, 1)?;
            MiscOp::SVMRegressor {
                svm: Box::new(svm),
                one_class: n.i("one_class", 0)? != 0,
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(op))
}

/// The geometry shared by SVMClassifier and SVMRegressor, checked: `vectors` support
/// vectors (0: the liblinear form, whose coefficients are `outputs` rows of features).
fn svm(n: &NodeCtx, vectors: i64, outputs: usize) -> Result<SvmSpec> {
    let op = n.op_type();
    let vectors = usize::try_from(vectors)
        .map_err(|_| smelt_ir::err!(InvalidModel, "{op}: {vectors} support vectors"))?;
    let params = n.opt_floats("kernel_params")?.unwrap_or_default();
    ensure!(
        params.is_empty() || params.len() >= 3,
        InvalidModel,
        "{op}: kernel_params must be [gamma, coef0, degree]"
    );
    let p = |i: usize| params.get(i).copied().unwrap_or(0.0);
    let support_vectors = n.opt_floats("support_vectors")?.unwrap_or_default();
    let coefficients = n.opt_floats("coefficients")?.unwrap_or_default();
    let rho = n.opt_floats("rho")?.unwrap_or_default();
    ensure!(
        !coefficients.is_empty(),
        InvalidModel,
        "{op}: no coefficients"
    );
    ensure!(!rho.is_empty(), InvalidModel, "{op}: no rho");
    let kernel = if vectors == 0 {
        SvmKernel::Linear
    } else {
        match n.s("kernel_type", "LINEAR")?.as_str() {
            "LINEAR" => SvmKernel::Linear,
            "POLY" => SvmKernel::Poly,
            "RBF" => SvmKernel::Rbf,
            "SIGMOID" => SvmKernel::Sigmoid,
            k => bail!(InvalidModel, "{op}: unknown kernel_type '{k}'"),
        }
    };
    let features = if vectors > 0 {
        ensure!(
            support_vectors.len() % vectors == 0 && !support_vectors.is_empty(),
            InvalidModel,
            "{op}: {} support vector values do not split into {vectors} vectors",
            support_vectors.len()
        );
        support_vectors.len() / vectors
    } else {
        ensure!(
            coefficients.len() % outputs == 0,
            InvalidModel,
            "{op}: {} coefficients do not split into {outputs} rows",
            coefficients.len()
        );
        coefficients.len() / outputs
    };
    Ok(SvmSpec {
        kernel,
        gamma: p(0),
        coef0: p(1),
        degree: p(2),
        support_vectors,
        vectors,
        features,
        coefficients,
        rho,
    })
}

fn svm_classifier(n: &NodeCtx) -> Result<MiscOp> {
    let Some(labels) = keys(n, "classlabels_strings", "classlabels_ints")? else {
        bail!(InvalidModel, "SVMClassifier needs class labels")
    };
    let classes = labels.len();
    let per_class = n
        .opt_ints("vectors_per_class")?
        .unwrap_or_default()
        .into_iter()
        .map(|v| {
            usize::try_from(v)
                .map_err(|_| smelt_ir::err!(InvalidModel, "SVMClassifier: {v} vectors for a class"))
        })
        .collect::<Result<Vec<_>>>()?;
    let vectors: usize = per_class.iter().sum();
    let svm = svm(n, vectors as i64, classes)?;
    let pairs = classes * classes.saturating_sub(1) / 2;
    let prob_a = n.opt_floats("prob_a")?.unwrap_or_default();
    let prob_b = n.opt_floats("prob_b")?.unwrap_or_default();
    ensure!(
        prob_a.len() == prob_b.len(),
        InvalidModel,
        "SVMClassifier: {} prob_a but {} prob_b",
        prob_a.len(),
        prob_b.len()
    );
    if vectors > 0 {
        ensure!(
            per_class.len() == classes,
            InvalidModel,
            "SVMClassifier: vectors_per_class has {} entries for {classes} classes",
            per_class.len()
        );
        ensure!(
            svm.coefficients.len() >= (classes - 1) * vectors,
            InvalidModel,
            "SVMClassifier: {} coefficients, expected {} ({classes} classes - 1, {vectors} vectors)",
            svm.coefficients.len(),
            (classes - 1) * vectors
        );
        ensure!(
            svm.rho.len() >= pairs,
            InvalidModel,
            "SVMClassifier: {} rho for {pairs} class pairs",
            svm.rho.len()
        );
        ensure!(
            prob_a.is_empty() || prob_a.len() >= pairs,
            InvalidModel,
            "SVMClassifier: {} prob_a for {pairs} class pairs",
            prob_a.len()
        );
    }
    ensure!(classes >= 1, InvalidModel, "SVMClassifier: no classes");
    let post_transform = match n.s("post_transform", "NONE")?.as_str() {
        "NONE" => 0,
        "SOFTMAX" => 1,
        "LOGISTIC" => 2,
        "SOFTMAX_ZERO" => 3,
        "PROBIT" => 4,
        p => bail!(InvalidModel, "SVMClassifier: unknown post_transform '{p}'"),
    };
    Ok(MiscOp::SVMClassifier(Box::new(SvmClassifierSpec {
        svm,
        vectors_per_class: if vectors > 0 { per_class } else { Vec::new() },
        prob_a,
        prob_b,
        post_transform,
        labels,
    })))
}
