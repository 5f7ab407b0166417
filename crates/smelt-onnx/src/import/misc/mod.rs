//! Import of the misc op family: vision (Resize, NMS, RoiAlign, GridSample), signal (DFT,
//! STFT, windows), strings, random ops, and the `ai.onnx.ml` / `ai.onnx.preview.training` ops.

mod ml;
mod ml_maps;

use super::NodeCtx;
use smelt_ir::op::misc::{
    AspectPolicy, CaseChange, CoordMode, GridPadding, InterpMode, NearestMode, PixelFormat,
    TfIdfMode,
};
use smelt_ir::op::MiscOp;
use smelt_ir::{bail, err, DType, Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    let op = match n.domain {
        "" => import_onnx(n)?,
        "ai.onnx.ml" => match ml::import_ml(n)? {
            Some(op) => Some(op),
            None => ml_maps::import(n)?,
        },
        "ai.onnx.preview.training" => ml::import_training(n)?,
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
                    m => bail!(
                        InvalidModel,
                        "RoiAlign: unknown coordinate_transformation_mode '{m}'"
                    ),
                },
            };
            let max_mode = match n.s("mode", "avg")?.as_str() {
                "avg" => false,
                "max" => true,
                m => bail!(InvalidModel, "RoiAlign: unknown mode '{m}'"),
            };
            let (output_height, output_width) = (n.i("output_height", 1)?, n.i("output_width", 1)?);
            if output_height < 1 || output_width < 1 {
                bail!(
                    InvalidModel,
                    "RoiAlign: output size must be positive, got {output_height}x{output_width}"
                );
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
                m => bail!(InvalidModel, "GridSample: unknown mode '{m}'"),
            };
            let padding = match n.s("padding_mode", "zeros")?.as_str() {
                "zeros" => GridPadding::Zeros,
                "border" => GridPadding::Border,
                "reflection" => GridPadding::Reflection,
                m => bail!(InvalidModel, "GridSample: unknown padding_mode '{m}'"),
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
                m => bail!(InvalidModel, "ImageDecoder: unknown pixel_format '{m}'"),
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
                m => bail!(
                    InvalidModel,
                    "StringNormalizer: unknown case_change_action '{m}'"
                ),
            },
            is_case_sensitive: n.flag("is_case_sensitive", false)?,
            stopwords: n.opt_strings("stopwords")?.unwrap_or_default(),
        },
        "StringConcat" => MiscOp::StringConcat,
        "Det" => MiscOp::Det,
        "StringSplit" => MiscOp::StringSplit {
            delimiter: n.opt_s("delimiter")?.filter(|d| !d.is_empty()),
            maxsplit: n.opt_i("maxsplit")?,
        },
        "RegexFullMatch" => MiscOp::RegexFullMatch {
            pattern: n
                .opt_s("pattern")?
                .ok_or_else(|| err!(InvalidModel, "RegexFullMatch needs a pattern"))?,
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
                .ok_or_else(|| err!(InvalidModel, "RandomUniform needs a shape"))?,
        },
        "RandomNormal" => MiscOp::RandomNormal {
            dtype: n.opt_dtype("dtype")?.unwrap_or(DType::F32),
            mean: n.f("mean", 0.0)?,
            scale: n.f("scale", 1.0)?,
            seed: seed(n)?,
            shape: n
                .opt_ints("shape")?
                .ok_or_else(|| err!(InvalidModel, "RandomNormal needs a shape"))?,
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
                bail!(
                    InvalidModel,
                    "Multinomial: dtype must be int32 or int64, got {dtype}"
                );
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
        m => bail!(InvalidModel, "Resize: unknown mode '{m}'"),
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
        m => bail!(
            InvalidModel,
            "Resize: unknown coordinate_transformation_mode '{m}'"
        ),
    };
    let nearest = match n.s("nearest_mode", "round_prefer_floor")?.as_str() {
        "round_prefer_floor" => NearestMode::RoundPreferFloor,
        "round_prefer_ceil" => NearestMode::RoundPreferCeil,
        "floor" => NearestMode::Floor,
        "ceil" => NearestMode::Ceil,
        m => bail!(InvalidModel, "Resize: unknown nearest_mode '{m}'"),
    };
    let keep_aspect_ratio_policy = match n.s("keep_aspect_ratio_policy", "stretch")?.as_str() {
        "stretch" => AspectPolicy::Stretch,
        "not_larger" => AspectPolicy::NotLarger,
        "not_smaller" => AspectPolicy::NotSmaller,
        m => bail!(
            InvalidModel,
            "Resize: unknown keep_aspect_ratio_policy '{m}'"
        ),
    };
    let antialias = n.flag("antialias", false)?;
    if antialias && mode == InterpMode::Nearest {
        bail!(
            InvalidModel,
            "Resize: antialias is not defined for nearest mode"
        );
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
        m => bail!(InvalidModel, "Upsample: unknown mode '{m}'"),
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
                .ok_or_else(|| err!(InvalidModel, "Upsample-7 needs the scales attribute"))?;
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
        m => bail!(InvalidModel, "TfIdfVectorizer: unknown mode '{m}'"),
    };
    let min_gram_length = n.i("min_gram_length", 1)?;
    let max_gram_length = n.i("max_gram_length", 1)?;
    if min_gram_length < 1 || max_gram_length < min_gram_length {
        bail!(
            InvalidModel,
            "TfIdfVectorizer: bad gram lengths {min_gram_length}..{max_gram_length}"
        );
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
