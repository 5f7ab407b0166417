//! Import of the misc op family: vision (Resize, NMS, RoiAlign, GridSample), signal (DFT,
//! STFT, windows), strings, random ops, and the `ai.onnx.ml` / `ai.onnx.preview.training` ops.

use super::NodeCtx;
use smelt_ir::op::misc::{
    AspectPolicy, CaseChange, CoordMode, GridPadding, InterpMode, NearestMode, PixelFormat,
    TfIdfMode, TreeEnsembleSpec, TreeNodeMode,
};
use smelt_ir::op::MiscOp;
use smelt_ir::{bail, err, DType, Op, Result, Tensor};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    let op = match n.domain {
        "" => import_onnx(n)?,
        "ai.onnx.ml" => import_ml(n)?,
        "ai.onnx.preview.training" => import_training(n)?,
        _ => None,
    };
    Ok(op.map(Op::Misc))
}

fn seed(n: &NodeCtx) -> Result<Option<f32>> {
    n.opt_f("seed")
}

fn import_onnx(n: &mut NodeCtx) -> Result<Option<MiscOp>> {
    let op = match n.op_type() {
        "Resize" => resize(n)?,
        "Upsample" => upsample(n)?,
        "NonMaxSuppression" => MiscOp::NonMaxSuppression {
            center_point_box: n.flag("center_point_box", false)?,
        },
        "RoiAlign" => {
            let half_pixel = match n.opset {
                ..=15 => false,
                _ => match n
                    .s("coordinate_transformation_mode", "half_pixel")?
                    .as_str()
                {
                    "half_pixel" => true,
                    "output_half_pixel" => false,
                    m => bail!("RoiAlign: unknown coordinate_transformation_mode '{m}'"),
                },
            };
            let max_mode = match n.s("mode", "avg")?.as_str() {
                "avg" => false,
                "max" => true,
                m => bail!("RoiAlign: unknown mode '{m}'"),
            };
            let (output_height, output_width) = (n.i("output_height", 1)?, n.i("output_width", 1)?);
            if output_height < 1 || output_width < 1 {
                bail!("RoiAlign: output size must be positive, got {output_height}x{output_width}");
            }
            MiscOp::RoiAlign {
                max_mode,
                half_pixel,
                output_height,
                output_width,
                sampling_ratio: n.i("sampling_ratio", 0)?.max(0),
                spatial_scale: n.f("spatial_scale", 1.0)?,
            }
        }
        "GridSample" => {
            let default = if n.opset >= 20 { "linear" } else { "bilinear" };
            let mode = match n.s("mode", default)?.as_str() {
                "bilinear" | "linear" => InterpMode::Linear,
                "nearest" => InterpMode::Nearest,
                "bicubic" | "cubic" => InterpMode::Cubic,
                m => bail!("GridSample: unknown mode '{m}'"),
            };
            let padding = match n.s("padding_mode", "zeros")?.as_str() {
                "zeros" => GridPadding::Zeros,
                "border" => GridPadding::Border,
                "reflection" => GridPadding::Reflection,
                m => bail!("GridSample: unknown padding_mode '{m}'"),
            };
            MiscOp::GridSample {
                mode,
                padding,
                align_corners: n.flag("align_corners", false)?,
            }
        }
        "ImageDecoder" => MiscOp::ImageDecoder {
            pixel_format: match n.s("pixel_format", "RGB")?.as_str() {
                "RGB" => PixelFormat::Rgb,
                "BGR" => PixelFormat::Bgr,
                "Grayscale" => PixelFormat::Grayscale,
                m => bail!("ImageDecoder: unknown pixel_format '{m}'"),
            },
        },
        "AffineGrid" => MiscOp::AffineGrid {
            align_corners: n.flag("align_corners", false)?,
        },
        "DFT" => MiscOp::Dft {
            onesided: n.flag("onesided", false)?,
            inverse: n.flag("inverse", false)?,
            axis: if n.opset < 20 {
                Some(n.i("axis", 1)?)
            } else {
                None
            },
        },
        "STFT" => MiscOp::Stft {
            onesided: n.flag("onesided", true)?,
        },
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => {
            let periodic = n.flag("periodic", true)?;
            let dtype = n.opt_dtype("output_datatype")?.unwrap_or(DType::F32);
            match n.op_type() {
                "HannWindow" => MiscOp::HannWindow { periodic, dtype },
                "HammingWindow" => MiscOp::HammingWindow { periodic, dtype },
                _ => MiscOp::BlackmanWindow { periodic, dtype },
            }
        }
        "MelWeightMatrix" => MiscOp::MelWeightMatrix {
            dtype: n.opt_dtype("output_datatype")?.unwrap_or(DType::F32),
        },
        "StringNormalizer" => MiscOp::StringNormalizer {
            case_change: match n.s("case_change_action", "NONE")?.as_str() {
                "NONE" => CaseChange::None,
                "LOWER" => CaseChange::Lower,
                "UPPER" => CaseChange::Upper,
                m => bail!("StringNormalizer: unknown case_change_action '{m}'"),
            },
            is_case_sensitive: n.flag("is_case_sensitive", false)?,
            stopwords: n.opt_strings("stopwords")?.unwrap_or_default(),
        },
        "StringConcat" => MiscOp::StringConcat,
        "StringSplit" => MiscOp::StringSplit {
            delimiter: n.opt_s("delimiter")?.filter(|d| !d.is_empty()),
            maxsplit: n.opt_i("maxsplit")?,
        },
        "RegexFullMatch" => MiscOp::RegexFullMatch {
            pattern: n
                .opt_s("pattern")?
                .ok_or_else(|| err!("RegexFullMatch needs a pattern"))?,
        },
        "TfIdfVectorizer" => tfidf(n)?,
        "Bernoulli" => MiscOp::Bernoulli {
            dtype: n.opt_dtype("dtype")?,
            seed: seed(n)?,
        },
        "RandomUniform" => MiscOp::RandomUniform {
            dtype: n.opt_dtype("dtype")?.unwrap_or(DType::F32),
            low: n.f("low", 0.0)?,
            high: n.f("high", 1.0)?,
            seed: seed(n)?,
            shape: n
                .opt_ints("shape")?
                .ok_or_else(|| err!("RandomUniform needs a shape"))?,
        },
        "RandomNormal" => MiscOp::RandomNormal {
            dtype: n.opt_dtype("dtype")?.unwrap_or(DType::F32),
            mean: n.f("mean", 0.0)?,
            scale: n.f("scale", 1.0)?,
            seed: seed(n)?,
            shape: n
                .opt_ints("shape")?
                .ok_or_else(|| err!("RandomNormal needs a shape"))?,
        },
        "RandomUniformLike" => MiscOp::RandomUniformLike {
            dtype: n.opt_dtype("dtype")?,
            low: n.f("low", 0.0)?,
            high: n.f("high", 1.0)?,
            seed: seed(n)?,
        },
        "RandomNormalLike" => MiscOp::RandomNormalLike {
            dtype: n.opt_dtype("dtype")?,
            mean: n.f("mean", 0.0)?,
            scale: n.f("scale", 1.0)?,
            seed: seed(n)?,
        },
        "Multinomial" => {
            let dtype = n.opt_dtype("dtype")?.unwrap_or(DType::I32);
            if !matches!(dtype, DType::I32 | DType::I64) {
                bail!("Multinomial: dtype must be int32 or int64, got {dtype}");
            }
            MiscOp::Multinomial {
                dtype,
                sample_size: n.i("sample_size", 1)?,
                seed: seed(n)?,
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(op))
}

fn resize(n: &NodeCtx) -> Result<MiscOp> {
    let mode = match n.s("mode", "nearest")?.to_ascii_lowercase().as_str() {
        "nearest" => InterpMode::Nearest,
        "linear" | "bilinear" => InterpMode::Linear,
        "cubic" => InterpMode::Cubic,
        m => bail!("Resize: unknown mode '{m}'"),
    };
    if n.opset < 11 {
        return Ok(upsample_like(mode, None, Some(1)));
    }
    let coord = match n
        .s("coordinate_transformation_mode", "half_pixel")?
        .as_str()
    {
        "half_pixel" => CoordMode::HalfPixel,
        "half_pixel_symmetric" => CoordMode::HalfPixelSymmetric,
        "pytorch_half_pixel" => CoordMode::PytorchHalfPixel,
        "align_corners" => CoordMode::AlignCorners,
        "asymmetric" => CoordMode::Asymmetric,
        "tf_crop_and_resize" => CoordMode::TfCropAndResize,
        "tf_half_pixel_for_nn" => CoordMode::TfHalfPixelForNn,
        m => bail!("Resize: unknown coordinate_transformation_mode '{m}'"),
    };
    let nearest = match n.s("nearest_mode", "round_prefer_floor")?.as_str() {
        "round_prefer_floor" => NearestMode::RoundPreferFloor,
        "round_prefer_ceil" => NearestMode::RoundPreferCeil,
        "floor" => NearestMode::Floor,
        "ceil" => NearestMode::Ceil,
        m => bail!("Resize: unknown nearest_mode '{m}'"),
    };
    let keep_aspect_ratio_policy = match n.s("keep_aspect_ratio_policy", "stretch")?.as_str() {
        "stretch" => AspectPolicy::Stretch,
        "not_larger" => AspectPolicy::NotLarger,
        "not_smaller" => AspectPolicy::NotSmaller,
        m => bail!("Resize: unknown keep_aspect_ratio_policy '{m}'"),
    };
    let antialias = n.flag("antialias", false)?;
    if antialias && mode == InterpMode::Nearest {
        bail!("Resize: antialias is not defined for nearest mode");
    }
    Ok(MiscOp::Resize {
        mode,
        coord,
        nearest,
        cubic_coeff_a: n.f("cubic_coeff_a", -0.75)?,
        exclude_outside: n.flag("exclude_outside", false)?,
        extrapolation_value: n.f("extrapolation_value", 0.0)?,
        antialias,
        axes: n.opt_ints("axes")?,
        keep_aspect_ratio_policy,
        scales: None,
        roi_input: Some(1),
        scales_input: Some(2),
        sizes_input: Some(3),
    })
}

/// Resize-10 and Upsample semantics: asymmetric coordinates, simple nearest rounding.
fn upsample_like(
    mode: InterpMode,
    scales: Option<Vec<f32>>,
    scales_input: Option<usize>,
) -> MiscOp {
    MiscOp::Resize {
        mode,
        coord: CoordMode::Asymmetric,
        nearest: NearestMode::Simple,
        cubic_coeff_a: -0.75,
        exclude_outside: false,
        extrapolation_value: 0.0,
        antialias: false,
        axes: None,
        keep_aspect_ratio_policy: AspectPolicy::Stretch,
        scales,
        roi_input: None,
        scales_input,
        sizes_input: None,
    }
}

fn upsample(n: &NodeCtx) -> Result<MiscOp> {
    let mode = match n.s("mode", "nearest")?.to_ascii_lowercase().as_str() {
        "nearest" => InterpMode::Nearest,
        "linear" | "bilinear" => InterpMode::Linear,
        m => bail!("Upsample: unknown mode '{m}'"),
    };
    Ok(match n.opset {
        ..=6 => {
            let h = n.f("height_scale", 1.0)?;
            let w = n.f("width_scale", 1.0)?;
            upsample_like(mode, Some(vec![1.0, 1.0, h, w]), None)
        }
        7..=8 => {
            let s = n
                .opt_floats("scales")?
                .ok_or_else(|| err!("Upsample-7 needs the scales attribute"))?;
            upsample_like(mode, Some(s), None)
        }
        _ => upsample_like(mode, None, Some(1)),
    })
}

fn tfidf(n: &NodeCtx) -> Result<MiscOp> {
    let mode = match n.s("mode", "TF")?.as_str() {
        "TF" => TfIdfMode::Tf,
        "IDF" => TfIdfMode::Idf,
        "TFIDF" => TfIdfMode::TfIdf,
        m => bail!("TfIdfVectorizer: unknown mode '{m}'"),
    };
    let min_gram_length = n.i("min_gram_length", 1)?;
    let max_gram_length = n.i("max_gram_length", 1)?;
    if min_gram_length < 1 || max_gram_length < min_gram_length {
        bail!("TfIdfVectorizer: bad gram lengths {min_gram_length}..{max_gram_length}");
    }
    Ok(MiscOp::TfIdfVectorizer {
        mode,
        min_gram_length,
        max_gram_length,
        max_skip_count: n.i("max_skip_count", 0)?.max(0),
        ngram_counts: n.opt_ints("ngram_counts")?.unwrap_or_default(),
        ngram_indexes: n.opt_ints("ngram_indexes")?.unwrap_or_default(),
        pool_ints: n.opt_ints("pool_int64s")?.unwrap_or_default(),
        pool_strings: n.opt_strings("pool_strings")?.unwrap_or_default(),
        weights: n.opt_floats("weights")?.unwrap_or_default(),
    })
}

fn vec_tensor<T>(v: Vec<T>, f: impl Fn(Vec<usize>, Vec<T>) -> Result<Tensor>) -> Result<Tensor> {
    let len = v.len();
    f(vec![len], v)
}

fn import_ml(n: &mut NodeCtx) -> Result<Option<MiscOp>> {
    let op = match n.op_type() {
        "ArrayFeatureExtractor" => MiscOp::ArrayFeatureExtractor,
        "Binarizer" => MiscOp::Binarizer {
            threshold: n.f("threshold", 0.0)?,
        },
        "LabelEncoder" => label_encoder(n)?,
        "TreeEnsemble" => tree_ensemble(n)?,
        _ => return Ok(None),
    };
    Ok(Some(op))
}

fn label_encoder(n: &NodeCtx) -> Result<MiscOp> {
    if n.opset < 2 {
        bail!("LabelEncoder-1 (classes_strings) is not supported; use opset 2 or later");
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
        bail!("LabelEncoder has no keys")
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
        bail!("LabelEncoder has no values")
    };
    if keys.rank() != 1 || values.rank() != 1 || keys.len() != values.len() {
        bail!(
            "LabelEncoder: keys ({:?}) and values ({:?}) must be 1-D of one length",
            keys.shape(),
            values.shape()
        );
    }
    let vt = values.dtype();
    let default = match n.opt_tensor("default_tensor")? {
        Some(t) => {
            if t.len() != 1 || t.dtype() != vt {
                bail!("LabelEncoder: default_tensor must be one {vt} element");
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

fn tensor_or_floats(n: &NodeCtx, name: &str) -> Result<Option<Vec<f64>>> {
    if let Some(t) = n.opt_tensor(name)? {
        return Ok(Some(t.to_f64()?));
    }
    Ok(n.opt_floats(name)?
        .map(|v| v.into_iter().map(f64::from).collect()))
}

fn tree_ensemble(n: &NodeCtx) -> Result<MiscOp> {
    let ints = |name: &str| -> Result<Vec<i64>> {
        n.opt_ints(name)?
            .ok_or_else(|| err!("TreeEnsemble needs '{name}'"))
    };
    let feature_ids = ints("nodes_featureids")?;
    let k = feature_ids.len();
    let modes_raw = match n.opt_tensor("nodes_modes")? {
        Some(t) => t.to_i64()?,
        None => bail!("TreeEnsemble needs 'nodes_modes'"),
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
                _ => bail!("TreeEnsemble: unknown node mode {m}"),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let splits = tensor_or_floats(n, "nodes_splits")?
        .ok_or_else(|| err!("TreeEnsemble needs 'nodes_splits'"))?;
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
        bail!("TreeEnsemble: node attributes have different lengths ({k} features, {lens:?})");
    }
    let leaf_targets = ints("leaf_targetids")?;
    let leaf_weights = tensor_or_floats(n, "leaf_weights")?
        .ok_or_else(|| err!("TreeEnsemble needs 'leaf_weights'"))?;
    if leaf_targets.len() != leaf_weights.len() {
        bail!("TreeEnsemble: leaf_targetids and leaf_weights differ in length");
    }
    let n_targets = n.i("n_targets", 1)?;
    if n_targets < 1 || leaf_targets.iter().any(|&t| t < 0 || t >= n_targets) {
        bail!("TreeEnsemble: leaf targets must lie in [0, n_targets={n_targets})");
    }
    let aggregate = n.i("aggregate_function", 1)?;
    if !(0..=3).contains(&aggregate) {
        bail!("TreeEnsemble: unknown aggregate_function {aggregate}");
    }
    let post_transform = n.i("post_transform", 0)?;
    if !(0..=4).contains(&post_transform) {
        bail!("TreeEnsemble: unknown post_transform {post_transform}");
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
        membership: tensor_or_floats(n, "membership_values")?.unwrap_or_default(),
    })))
}

fn import_training(n: &mut NodeCtx) -> Result<Option<MiscOp>> {
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
                .ok_or_else(|| err!("Momentum needs alpha"))?,
            beta: n
                .opt_f("beta")?
                .ok_or_else(|| err!("Momentum needs beta"))?,
            nesterov: match n.s("mode", "standard")?.as_str() {
                "standard" => false,
                "nesterov" => true,
                m => bail!("Momentum: unknown mode '{m}'"),
            },
            norm_coefficient: n
                .opt_f("norm_coefficient")?
                .ok_or_else(|| err!("Momentum needs norm_coefficient"))?,
        },
        _ => return Ok(None),
    };
    Ok(Some(op))
}
