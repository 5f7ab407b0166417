//! Import of the nn op family: matrix products, convolution, pooling, normalization, attention.

use super::NodeCtx;
use smelt_ir::op::nn::DropoutMode;
use smelt_ir::op::{AutoPad, NnOp};
use smelt_ir::{bail, err, DType, Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    if !n.is_onnx() {
        return Ok(None);
    }
    let op = match n.op_type() {
        "MatMul" => NnOp::MatMul,
        // Gemm's legacy `broadcast` attribute (opset < 7) only constrains shapes.
        "Gemm" => NnOp::Gemm {
            alpha: n.f("alpha", 1.0)?,
            beta: n.f("beta", 1.0)?,
            trans_a: n.flag("transA", false)?,
            trans_b: n.flag("transB", false)?,
        },
        "Conv" => NnOp::Conv {
            auto_pad: auto_pad(n)?,
            dilations: ints(n, "dilations")?,
            group: group(n)?,
            kernel_shape: ints(n, "kernel_shape")?,
            pads: ints(n, "pads")?,
            strides: ints(n, "strides")?,
        },
        "ConvTranspose" => NnOp::ConvTranspose {
            auto_pad: auto_pad(n)?,
            dilations: ints(n, "dilations")?,
            group: group(n)?,
            kernel_shape: ints(n, "kernel_shape")?,
            output_padding: ints(n, "output_padding")?,
            output_shape: ints(n, "output_shape")?,
            pads: ints(n, "pads")?,
            strides: ints(n, "strides")?,
        },
        "DeformConv" => NnOp::DeformConv {
            dilations: ints(n, "dilations")?,
            group: group(n)?,
            kernel_shape: ints(n, "kernel_shape")?,
            offset_group: {
                let g = n.i("offset_group", 1)?;
                if g < 1 {
                    bail!(InvalidModel, "offset_group must be positive, got {g}");
                }
                g
            },
            pads: ints(n, "pads")?,
            strides: ints(n, "strides")?,
        },
        "MaxPool" => NnOp::MaxPool {
            auto_pad: auto_pad(n)?,
            ceil_mode: n.flag("ceil_mode", false)?,
            dilations: ints(n, "dilations")?,
            kernel_shape: kernel(n)?,
            pads: ints(n, "pads")?,
            storage_order: n.i("storage_order", 0)?,
            strides: ints(n, "strides")?,
        },
        "AveragePool" => NnOp::AveragePool {
            auto_pad: auto_pad(n)?,
            ceil_mode: n.flag("ceil_mode", false)?,
            count_include_pad: n.flag("count_include_pad", false)?,
            dilations: ints(n, "dilations")?,
            kernel_shape: kernel(n)?,
            pads: ints(n, "pads")?,
            strides: ints(n, "strides")?,
        },
        "LpPool" => NnOp::LpPool {
            auto_pad: auto_pad(n)?,
            ceil_mode: n.flag("ceil_mode", false)?,
            dilations: ints(n, "dilations")?,
            kernel_shape: kernel(n)?,
            p: p_attr(n)?,
            pads: ints(n, "pads")?,
            strides: ints(n, "strides")?,
        },
        "GlobalAveragePool" => NnOp::GlobalAveragePool,
        "GlobalMaxPool" => NnOp::GlobalMaxPool,
        "GlobalLpPool" => NnOp::GlobalLpPool { p: p_attr(n)? },
        "MaxUnpool" => NnOp::MaxUnpool {
            kernel_shape: kernel(n)?,
            pads: ints(n, "pads")?,
            strides: ints(n, "strides")?,
        },
        "MaxRoiPool" => {
            let pooled_shape = n
                .opt_ints("pooled_shape")?
                .ok_or_else(|| err!(InvalidModel, "MaxRoiPool needs 'pooled_shape'"))?;
            if pooled_shape.len() != 2 || pooled_shape.iter().any(|&d| d < 1) {
                bail!(
                    InvalidModel,
                    "pooled_shape must be two positive sizes, got {pooled_shape:?}"
                );
            }
            NnOp::MaxRoiPool {
                pooled_shape,
                spatial_scale: n.f("spatial_scale", 1.0)?,
            }
        }
        "BatchNormalization" => {
            // opset < 7 had is_test (0 = training); opset 14+ has training_mode.
            let training_mode = if n.opset >= 14 {
                n.flag("training_mode", false)?
            } else if n.opset < 7 {
                !n.flag("is_test", false)? && n.n_outputs() > 1
            } else {
                false
            };
            NnOp::BatchNormalization {
                epsilon: n.f("epsilon", 1e-5)?,
                momentum: n.f("momentum", 0.9)?,
                training_mode,
                spatial: if n.opset < 9 {
                    n.flag("spatial", true)?
                } else {
                    true
                },
            }
        }
        "InstanceNormalization" => NnOp::InstanceNormalization {
            epsilon: n.f("epsilon", 1e-5)?,
        },
        "LayerNormalization" => NnOp::LayerNormalization {
            axis: n.i("axis", -1)?,
            epsilon: n.f("epsilon", 1e-5)?,
            stash_type: stash(n)?,
        },
        "GroupNormalization" => {
            let num_groups = n
                .opt_i("num_groups")?
                .ok_or_else(|| err!(InvalidModel, "GroupNormalization needs 'num_groups'"))?;
            if num_groups < 1 {
                bail!(
                    InvalidModel,
                    "num_groups must be positive, got {num_groups}"
                );
            }
            NnOp::GroupNormalization {
                epsilon: n.f("epsilon", 1e-5)?,
                num_groups,
                per_group_affine: n.opset < 21,
                stash_type: stash(n)?,
            }
        }
        "RMSNormalization" => NnOp::RmsNormalization {
            axis: n.i("axis", -1)?,
            epsilon: n.f("epsilon", 1e-5)?,
            stash_type: stash(n)?,
        },
        "MeanVarianceNormalization" => {
            if n.opset < 9 {
                // opset 1 (experimental): across_channels / normalize_variance.
                let across = n.flag("across_channels", false)?;
                if !n.flag("normalize_variance", true)? {
                    bail!(
                        Unsupported,
                        "MeanVarianceNormalization with normalize_variance=0 is not supported"
                    );
                }
                NnOp::MeanVarianceNormalization {
                    axes: if across {
                        vec![0, 1, 2, 3]
                    } else {
                        vec![0, 2, 3]
                    },
                }
            } else {
                NnOp::MeanVarianceNormalization {
                    axes: n.opt_ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]),
                }
            }
        }
        "LpNormalization" => {
            let p = n.i("p", 2)?;
            if p != 1 && p != 2 {
                bail!(InvalidModel, "LpNormalization supports p = 1 or 2, got {p}");
            }
            NnOp::LpNormalization {
                axis: n.i("axis", -1)?,
                p,
            }
        }
        "LRN" => {
            let size = n
                .opt_i("size")?
                .ok_or_else(|| err!(InvalidModel, "LRN needs 'size'"))?;
            if size < 1 {
                bail!(InvalidModel, "LRN size must be positive, got {size}");
            }
            NnOp::Lrn {
                alpha: n.f("alpha", 1e-4)?,
                beta: n.f("beta", 0.75)?,
                bias: n.f("bias", 1.0)?,
                size,
            }
        }
        "Dropout" => {
            let mode = if n.opset >= 12 {
                DropoutMode::FromInputs
            } else {
                // Opsets < 7 default to `is_test=0` (training), but exported models that
                // carry it are inference graphs; like onnxruntime, run them as identity.
                let training = false;
                DropoutMode::Fixed {
                    ratio: n.f("ratio", 0.5)?,
                    training,
                    typed_mask: n.opset < 10,
                }
            };
            NnOp::Dropout {
                mode,
                seed: n.opt_i("seed")?,
            }
        }
        "Einsum" => {
            let equation = n
                .opt_s("equation")?
                .ok_or_else(|| err!(InvalidModel, "Einsum needs 'equation'"))?;
            NnOp::Einsum { equation }
        }
        "Attention" => {
            let mode = n.i("qk_matmul_output_mode", 0)?;
            if !(0..=3).contains(&mode) {
                bail!(
                    InvalidModel,
                    "qk_matmul_output_mode must be 0..3, got {mode}"
                );
            }
            let (left, right) = (n.i("left_window_size", -1)?, n.i("right_window_size", -1)?);
            if left < -1 || right < -1 {
                bail!(
                    InvalidModel,
                    "window sizes must be -1 or nonnegative, got {left} and {right}"
                );
            }
            NnOp::Attention {
                is_causal: n.flag("is_causal", false)?,
                kv_num_heads: n.opt_i("kv_num_heads")?,
                q_num_heads: n.opt_i("q_num_heads")?,
                qk_matmul_output_mode: mode,
                scale: n.opt_f("scale")?,
                softcap: n.f("softcap", 0.0)?,
                softmax_precision: n.opt_dtype("softmax_precision")?,
                left_window_size: left,
                right_window_size: right,
            }
        }
        "RotaryEmbedding" => NnOp::RotaryEmbedding {
            interleaved: n.flag("interleaved", false)?,
            num_heads: n.opt_i("num_heads")?,
            rotary_embedding_dim: n.i("rotary_embedding_dim", 0)?,
        },
        _ => return Ok(None),
    };
    Ok(Some(Op::Nn(op)))
}

fn auto_pad(n: &NodeCtx) -> Result<AutoPad> {
    Ok(match n.s("auto_pad", "NOTSET")?.as_str() {
        "NOTSET" | "" => AutoPad::NotSet,
        "SAME_UPPER" => AutoPad::SameUpper,
        "SAME_LOWER" => AutoPad::SameLower,
        "VALID" => AutoPad::Valid,
        other => bail!(InvalidModel, "unknown auto_pad '{other}'"),
    })
}

fn ints(n: &NodeCtx, name: &str) -> Result<Vec<i64>> {
    Ok(n.opt_ints(name)?.unwrap_or_default())
}

fn kernel(n: &NodeCtx) -> Result<Vec<i64>> {
    let k = n
        .opt_ints("kernel_shape")?
        .ok_or_else(|| err!(InvalidModel, "{} needs 'kernel_shape'", n.op_type()))?;
    if k.is_empty() || k.iter().any(|&d| d < 1) {
        bail!(
            InvalidModel,
            "kernel_shape must hold positive sizes, got {k:?}"
        );
    }
    Ok(k)
}

fn group(n: &NodeCtx) -> Result<i64> {
    let g = n.i("group", 1)?;
    if g < 1 {
        bail!(InvalidModel, "group must be positive, got {g}");
    }
    Ok(g)
}

fn p_attr(n: &NodeCtx) -> Result<f32> {
    // opset 1 had a float `p`, later an int.
    if let Ok(Some(p)) = n.opt_i("p") {
        return Ok(p as f32);
    }
    Ok(n.opt_f("p").ok().flatten().unwrap_or(2.0))
}

fn stash(n: &NodeCtx) -> Result<DType> {
    let code = n.i("stash_type", 1)?;
    DType::from_onnx_code(code as i32).ok_or_else(|| err!(Unsupported, "unknown stash_type {code}"))
}
