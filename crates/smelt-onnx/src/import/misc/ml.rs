//! Import of the `ai.onnx.ml` ops (LabelEncoder, ArrayFeatureExtractor, Binarizer,
//! TreeEnsemble) and the `ai.onnx.preview.training` optimizers.

use super::super::NodeCtx;
use smelt_ir::op::misc::{NormKind, TreeEnsembleSpec, TreeNodeMode, TreeRegressorSpec};
use smelt_ir::op::MiscOp;
use smelt_ir::{bail, err, DType, Result, Tensor};
use std::collections::HashMap;

fn vec_tensor<T>(v: Vec<T>, f: impl Fn(Vec<usize>, Vec<T>) -> Result<Tensor>) -> Result<Tensor> {
    let len = v.len();
    f(vec![len], v)
}

pub(super) fn import_ml(n: &mut NodeCtx) -> Result<Option<MiscOp>> {
    let op = match n.op_type() {
        "ArrayFeatureExtractor" => MiscOp::ArrayFeatureExtractor,
        "CategoryMapper" => {
            let strings = n.opt_strings("cats_strings")?.unwrap_or_default();
            let ints = n.opt_ints("cats_int64s")?.unwrap_or_default();
            if strings.len() != ints.len() {
                bail!(
                    InvalidModel,
                    "CategoryMapper: {} strings but {} integers",
                    strings.len(),
                    ints.len()
                );
            }
            MiscOp::CategoryMapper {
                strings,
                ints,
                default_int: n.i("default_int64", -1)?,
                default_string: n.s("default_string", "_Unused")?,
            }
        }
        "Binarizer" => MiscOp::Binarizer {
            threshold: n.f("threshold", 0.0)?,
        },
        "LabelEncoder" => label_encoder(n)?,
        "TreeEnsemble" => tree_ensemble(n)?,
        "TreeEnsembleRegressor" => tree_regressor(n)?,
        "TreeEnsembleClassifier" => tree_classifier(n)?,
        "Scaler" => MiscOp::Scaler {
            offset: n.opt_floats("offset")?.unwrap_or_default(),
            scale: n.opt_floats("scale")?.unwrap_or_default(),
        },
        "Normalizer" => MiscOp::Normalizer {
            norm: match n.s("norm", "MAX")?.as_str() {
                "MAX" => NormKind::Max,
                "L1" => NormKind::L1,
                "L2" => NormKind::L2,
                m => bail!(InvalidModel, "Normalizer: unknown norm '{m}'"),
            },
        },
        "LinearRegressor" => {
            if n.s("post_transform", "NONE")? != "NONE" {
                bail!(
                    Unsupported,
                    "LinearRegressor: only post_transform NONE is supported"
                );
            }
            let targets = n.i("targets", 1)?;
            let coefficients = n.opt_floats("coefficients")?.unwrap_or_default();
            if targets < 1 || coefficients.len() % targets as usize != 0 {
                bail!(
                    InvalidModel,
                    "LinearRegressor: {} coefficients do not split into {targets} targets",
                    coefficients.len()
                );
            }
            MiscOp::LinearRegressor {
                coefficients,
                intercepts: n.opt_floats("intercepts")?.unwrap_or_default(),
                targets,
            }
        }
        "LinearClassifier" => {
            let labels = if let Some(v) = n.opt_strings("classlabels_strings")? {
                vec_tensor(v, Tensor::from_strings)?
            } else if let Some(v) = n.opt_ints("classlabels_ints")? {
                vec_tensor(v, Tensor::from_i64_vec)?
            } else {
                bail!(InvalidModel, "LinearClassifier needs class labels")
            };
            let coefficients = n
                .opt_floats("coefficients")?
                .ok_or_else(|| err!(InvalidModel, "LinearClassifier needs coefficients"))?;
            let intercepts = n.opt_floats("intercepts")?.unwrap_or_default();
            let classes = if intercepts.is_empty() {
                labels.len()
            } else {
                intercepts.len()
            };
            if classes == 0 || coefficients.len() % classes != 0 {
                bail!(
                    InvalidModel,
                    "LinearClassifier: {} coefficients do not split into {classes} classes",
                    coefficients.len()
                );
            }
            MiscOp::LinearClassifier {
                coefficients,
                intercepts,
                labels,
                post_transform: post_transform_code(&n.s("post_transform", "NONE")?)
                    .map_err(|e| e.context("LinearClassifier"))?,
            }
        }
        "Imputer" => MiscOp::Imputer {
            imputed_floats: n.opt_floats("imputed_value_floats")?.unwrap_or_default(),
            imputed_ints: n.opt_ints("imputed_value_int64s")?.unwrap_or_default(),
            replaced_float: Some(n.f("replaced_value_float", 0.0)?).filter(|v| !v.is_nan()),
            replaced_int: n.i("replaced_value_int64", 0)?,
        },
        _ => return Ok(None),
    };
    Ok(Some(op))
}

fn label_encoder(n: &NodeCtx) -> Result<MiscOp> {
    if n.opset < 2 {
        let strings = n.opt_strings("classes_strings")?.unwrap_or_default();
        let ints = (0..strings.len() as i64).collect();
        return Ok(MiscOp::CategoryMapper {
            strings,
            ints,
            default_int: n.i("default_int64", -1)?,
            default_string: n.s("default_string", "_Unused")?,
        });
    }
    let keys = if let Some(t) = n.opt_tensor("keys_tensor")? {
        t
    } else if let Some(v) = n.opt_strings("keys_strings")? {
        vec_tensor(v, Tensor::from_strings)?
    } else if let Some(v) = n.opt_ints("keys_int64s")? {
        vec_tensor(v, Tensor::from_i64_vec)?
    } else if let Some(v) = n.opt_floats("keys_floats")? {
        vec_tensor(v, Tensor::from_f32)?
    } else {
        bail!(InvalidModel, "LabelEncoder has no keys")
    };
    let values = if let Some(t) = n.opt_tensor("values_tensor")? {
        t
    } else if let Some(v) = n.opt_strings("values_strings")? {
        vec_tensor(v, Tensor::from_strings)?
    } else if let Some(v) = n.opt_ints("values_int64s")? {
        vec_tensor(v, Tensor::from_i64_vec)?
    } else if let Some(v) = n.opt_floats("values_floats")? {
        vec_tensor(v, Tensor::from_f32)?
    } else {
        bail!(InvalidModel, "LabelEncoder has no values")
    };
    if keys.rank() != 1 || values.rank() != 1 || keys.len() != values.len() {
        bail!(
            InvalidModel,
            "LabelEncoder: keys ({:?}) and values ({:?}) must be 1-D of one length",
            keys.shape(),
            values.shape()
        );
    }
    let vt = values.dtype();
    let default = match n.opt_tensor("default_tensor")? {
        Some(t) => {
            if t.len() != 1 || t.dtype() != vt {
                bail!(
                    InvalidModel,
                    "LabelEncoder: default_tensor must be one {vt} element"
                );
            }
            t.reshape(vec![])?
        }
        None if vt == DType::Str => {
            Tensor::from_strings(vec![], vec![n.s("default_string", "_Unused")?])?
        }
        None if vt.is_float() => {
            Tensor::from_f64(vt, vec![], &[n.f("default_float", -0.0)? as f64])?
        }
        None => Tensor::from_i64(vt, vec![], &[n.i("default_int64", -1)?])?,
    };
    Ok(MiscOp::LabelEncoder {
        keys,
        values,
        default,
    })
}

/// A float-list attribute given either as floats or as a tensor.
fn tensor_or_floats(n: &NodeCtx, name: &str) -> Result<Option<Vec<f64>>> {
    match n.attr(name) {
        None => Ok(None),
        Some(a) if a.t.is_some() => Ok(n.opt_tensor(name)?.map(|t| t.to_f64()).transpose()?),
        Some(_) => Ok(n
            .opt_floats(name)?
            .map(|v| v.into_iter().map(f64::from).collect())),
    }
}

fn tree_ensemble(n: &NodeCtx) -> Result<MiscOp> {
    let ints = |name: &str| -> Result<Vec<i64>> {
        n.opt_ints(name)?
            .ok_or_else(|| err!(InvalidModel, "TreeEnsemble needs '{name}'"))
    };
    let feature_ids = ints("nodes_featureids")?;
    let k = feature_ids.len();
    let modes_raw = match n.opt_tensor("nodes_modes")? {
        Some(t) => t.to_i64()?,
        None => bail!(InvalidModel, "TreeEnsemble needs 'nodes_modes'"),
    };
    let modes = modes_raw
        .iter()
        .map(|&m| {
            Ok(match m {
                0 => TreeNodeMode::Leq,
                1 => TreeNodeMode::Lt,
                2 => TreeNodeMode::Gte,
                3 => TreeNodeMode::Gt,
                4 => TreeNodeMode::Eq,
                5 => TreeNodeMode::Neq,
                6 => TreeNodeMode::Member,
                _ => bail!(InvalidModel, "TreeEnsemble: unknown node mode {m}"),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut splits = tensor_or_floats(n, "nodes_splits")?
        .ok_or_else(|| err!(InvalidModel, "TreeEnsemble needs 'nodes_splits'"))?;
    let true_ids = ints("nodes_truenodeids")?;
    let false_ids = ints("nodes_falsenodeids")?;
    let true_leafs: Vec<bool> = ints("nodes_trueleafs")?
        .into_iter()
        .map(|x| x != 0)
        .collect();
    let false_leafs: Vec<bool> = ints("nodes_falseleafs")?
        .into_iter()
        .map(|x| x != 0)
        .collect();
    let missing_tracks_true: Vec<bool> = n
        .opt_ints("nodes_missing_value_tracks_true")?
        .map(|v| v.into_iter().map(|x| x != 0).collect())
        .unwrap_or_else(|| vec![false; k]);
    let lens = [
        modes.len(),
        splits.len(),
        true_ids.len(),
        false_ids.len(),
        true_leafs.len(),
        false_leafs.len(),
        missing_tracks_true.len(),
    ];
    if lens.iter().any(|&l| l != k) {
        bail!(
            InvalidModel,
            "TreeEnsemble: node attributes have different lengths ({k} features, {lens:?})"
        );
    }
    let leaf_targets = ints("leaf_targetids")?;
    let leaf_weights = tensor_or_floats(n, "leaf_weights")?
        .ok_or_else(|| err!(InvalidModel, "TreeEnsemble needs 'leaf_weights'"))?;
    if leaf_targets.len() != leaf_weights.len() {
        bail!(
            InvalidModel,
            "TreeEnsemble: leaf_targetids and leaf_weights differ in length"
        );
    }
    let n_targets = n.i("n_targets", 1)?;
    if n_targets < 1 || leaf_targets.iter().any(|&t| t < 0 || t >= n_targets) {
        bail!(
            InvalidModel,
            "TreeEnsemble: leaf targets must lie in [0, n_targets={n_targets})"
        );
    }
    let aggregate = n.i("aggregate_function", 1)?;
    if !(0..=3).contains(&aggregate) {
        bail!(
            InvalidModel,
            "TreeEnsemble: unknown aggregate_function {aggregate}"
        );
    }
    let post_transform = n.i("post_transform", 0)?;
    if !(0..=4).contains(&post_transform) {
        bail!(
            InvalidModel,
            "TreeEnsemble: unknown post_transform {post_transform}"
        );
    }
    // Membership sets (NaN-separated in ONNX), one per Member node in node order; the
    // split of a Member node is unused and NaN there, so it becomes 0.
    let flat = tensor_or_floats(n, "membership_values")?.unwrap_or_default();
    let mut it = flat.into_iter();
    let mut membership = vec![Vec::new(); k];
    for (i, m) in modes.iter().enumerate() {
        if *m == TreeNodeMode::Member {
            membership[i] = it.by_ref().take_while(|v| !v.is_nan()).collect();
            splits[i] = 0.0;
        }
    }
    Ok(MiscOp::TreeEnsemble(Box::new(TreeEnsembleSpec {
        aggregate,
        post_transform,
        n_targets,
        feature_ids,
        modes,
        splits,
        true_ids,
        true_leafs,
        false_ids,
        false_leafs,
        missing_tracks_true,
        leaf_targets,
        leaf_weights,
        roots: ints("tree_roots")?,
        membership,
    })))
}

fn post_transform_code(s: &str) -> Result<i64> {
    Ok(match s {
        "NONE" => 0,
        "SOFTMAX" => 1,
        "LOGISTIC" => 2,
        "SOFTMAX_ZERO" => 3,
        "PROBIT" => bail!(Unsupported, "post_transform PROBIT is not supported"),
        m => bail!(InvalidModel, "unknown post_transform '{m}'"),
    })
}

/// The trees of TreeEnsembleRegressor (`p` = "target") or TreeEnsembleClassifier (`p` = "class").
fn tree_spec(n: &NodeCtx, p: &str, n_targets: i64) -> Result<TreeRegressorSpec> {
    let ints = |name: &str| -> Result<Vec<i64>> {
        n.opt_ints(name)?
            .ok_or_else(|| err!(InvalidModel, "{} needs '{name}'", n.op_type()))
    };
    let tree_ids = ints("nodes_treeids")?;
    let node_ids = ints("nodes_nodeids")?;
    let feature_ids = ints("nodes_featureids")?;
    let k = tree_ids.len();
    let mode_names = n
        .opt_strings("nodes_modes")?
        .ok_or_else(|| err!(InvalidModel, "{} needs 'nodes_modes'", n.op_type()))?;
    let modes = mode_names
        .iter()
        .map(|m| {
            Ok(match m.as_str() {
                "BRANCH_LEQ" => Some(TreeNodeMode::Leq),
                "BRANCH_LT" => Some(TreeNodeMode::Lt),
                "BRANCH_GTE" => Some(TreeNodeMode::Gte),
                "BRANCH_GT" => Some(TreeNodeMode::Gt),
                "BRANCH_EQ" => Some(TreeNodeMode::Eq),
                "BRANCH_NEQ" => Some(TreeNodeMode::Neq),
                "LEAF" => None,
                m => bail!(InvalidModel, "{}: unknown node mode '{m}'", n.op_type()),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let values = tensor_or_floats(n, "nodes_values")?
        .or(tensor_or_floats(n, "nodes_values_as_tensor")?)
        .unwrap_or_else(|| vec![0.0; k]);
    let trues = ints("nodes_truenodeids")?;
    let falses = ints("nodes_falsenodeids")?;
    let missing: Vec<bool> = n
        .opt_ints("nodes_missing_value_tracks_true")?
        .map(|v| v.into_iter().map(|x| x != 0).collect())
        .unwrap_or_else(|| vec![false; k]);
    let lens = [
        node_ids.len(),
        feature_ids.len(),
        modes.len(),
        values.len(),
        trues.len(),
        falses.len(),
        missing.len(),
    ];
    if lens.iter().any(|&l| l != k) {
        bail!(
            InvalidModel,
            "{}: node attributes differ in length ({k} trees ids, {lens:?})",
            n.op_type()
        );
    }
    let index: HashMap<(i64, i64), usize> =
        (0..k).map(|i| ((tree_ids[i], node_ids[i]), i)).collect();
    let resolve = |i: usize, id: i64| -> Result<usize> {
        if modes[i].is_none() {
            return Ok(i);
        }
        index.get(&(tree_ids[i], id)).copied().ok_or_else(|| {
            err!(
                InvalidModel,
                "{}: node ({}, {id}) does not exist",
                n.op_type(),
                tree_ids[i]
            )
        })
    };
    let true_next = (0..k)
        .map(|i| resolve(i, trues[i]))
        .collect::<Result<Vec<_>>>()?;
    let false_next = (0..k)
        .map(|i| resolve(i, falses[i]))
        .collect::<Result<Vec<_>>>()?;
    let t_tree = ints(&format!("{p}_treeids"))?;
    let t_node = ints(&format!("{p}_nodeids"))?;
    let t_ids = ints(&format!("{p}_ids"))?;
    let t_w = tensor_or_floats(n, &format!("{p}_weights"))?
        .or(tensor_or_floats(n, &format!("{p}_weights_as_tensor"))?)
        .ok_or_else(|| err!(InvalidModel, "{} needs '{p}_weights'", n.op_type()))?;
    if [t_node.len(), t_ids.len(), t_w.len()]
        .iter()
        .any(|&l| l != t_tree.len())
    {
        bail!(
            InvalidModel,
            "{}: {p} attributes differ in length",
            n.op_type()
        );
    }
    let mut leaf_targets = vec![Vec::new(); k];
    for j in 0..t_tree.len() {
        let i = *index.get(&(t_tree[j], t_node[j])).ok_or_else(|| {
            err!(
                InvalidModel,
                "{}: {p} node ({}, {}) does not exist",
                n.op_type(),
                t_tree[j],
                t_node[j]
            )
        })?;
        if t_ids[j] < 0 || t_ids[j] >= n_targets {
            bail!(
                InvalidModel,
                "{}: {p} id {} outside [0, {n_targets})",
                n.op_type(),
                t_ids[j]
            );
        }
        leaf_targets[i].push((t_ids[j], t_w[j]));
    }
    // Roots: nodes no other node of their tree points to, in order of first appearance.
    let mut is_child = vec![false; k];
    for i in 0..k {
        if modes[i].is_some() {
            is_child[true_next[i]] = true;
            is_child[false_next[i]] = true;
        }
    }
    let roots: Vec<usize> = (0..k).filter(|&i| !is_child[i]).collect();
    let aggregate = match n.s("aggregate_function", "SUM")?.as_str() {
        "AVERAGE" => 0,
        "SUM" => 1,
        "MIN" => 2,
        "MAX" => 3,
        m => bail!(
            InvalidModel,
            "{}: unknown aggregate_function '{m}'",
            n.op_type()
        ),
    };
    let base_values = tensor_or_floats(n, "base_values")?
        .or(tensor_or_floats(n, "base_values_as_tensor")?)
        .unwrap_or_default();
    let binary_one = p == "class" && n_targets == 2 && base_values.len() == 1;
    if !base_values.is_empty() && base_values.len() != n_targets as usize && !binary_one {
        bail!(
            InvalidModel,
            "{}: {} base values for {n_targets} targets",
            n.op_type(),
            base_values.len()
        );
    }
    Ok(TreeRegressorSpec {
        aggregate,
        post_transform: post_transform_code(&n.s("post_transform", "NONE")?)
            .map_err(|e| e.context(n.op_type().to_string()))?,
        n_targets,
        base_values,
        feature_ids,
        modes,
        values,
        true_next,
        false_next,
        missing_tracks_true: missing,
        leaf_targets,
        roots,
    })
}

fn tree_regressor(n: &NodeCtx) -> Result<MiscOp> {
    let n_targets = n.i("n_targets", 1)?;
    Ok(MiscOp::TreeEnsembleRegressor(Box::new(tree_spec(
        n, "target", n_targets,
    )?)))
}

fn tree_classifier(n: &NodeCtx) -> Result<MiscOp> {
    let labels = if let Some(v) = n.opt_strings("classlabels_strings")? {
        vec_tensor(v, Tensor::from_strings)?
    } else if let Some(v) = n.opt_ints("classlabels_int64s")? {
        vec_tensor(v, Tensor::from_i64_vec)?
    } else {
        bail!(InvalidModel, "TreeEnsembleClassifier needs class labels")
    };
    if labels.is_empty() {
        bail!(InvalidModel, "TreeEnsembleClassifier has no class labels");
    }
    let trees = tree_spec(n, "class", labels.len() as i64)?;
    Ok(MiscOp::TreeEnsembleClassifier {
        trees: Box::new(trees),
        labels,
    })
}

pub(super) fn import_training(n: &mut NodeCtx) -> Result<Option<MiscOp>> {
    let op = match n.op_type() {
        "Adagrad" => MiscOp::Adagrad {
            decay_factor: n.f("decay_factor", 0.0)?,
            epsilon: n.f("epsilon", 0.0)?,
            norm_coefficient: n.f("norm_coefficient", 0.0)?,
        },
        "Adam" => MiscOp::Adam {
            alpha: n.f("alpha", 0.9)?,
            beta: n.f("beta", 0.999)?,
            epsilon: n.f("epsilon", 0.0)?,
            norm_coefficient: n.f("norm_coefficient", 0.0)?,
            norm_coefficient_post: n.f("norm_coefficient_post", 0.0)?,
        },
        "Momentum" => MiscOp::Momentum {
            alpha: n
                .opt_f("alpha")?
                .ok_or_else(|| err!(InvalidModel, "Momentum needs alpha"))?,
            beta: n
                .opt_f("beta")?
                .ok_or_else(|| err!(InvalidModel, "Momentum needs beta"))?,
            nesterov: match n.s("mode", "standard")?.as_str() {
                "standard" => false,
                "nesterov" => true,
                m => bail!(InvalidModel, "Momentum: unknown mode '{m}'"),
            },
            norm_coefficient: n
                .opt_f("norm_coefficient")?
                .ok_or_else(|| err!(InvalidModel, "Momentum needs norm_coefficient"))?,
        },
        _ => return Ok(None),
    };
    Ok(Some(op))
}
