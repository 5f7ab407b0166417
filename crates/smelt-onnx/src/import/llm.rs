//! Import of the llm op family: SwiGLU, TensorScatter, LinearAttention, CausalConvWithState
//! (default domain) and FlexAttention (domain `ai.onnx.preview`).

use super::NodeCtx;
use smelt_ir::op::llm::{CacheWriteMode, ConvActivation, LinearAttentionRule};
use smelt_ir::op::LlmOp;
use smelt_ir::{bail, err, DType, Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    let op = if n.is_onnx() {
        match n.op_type() {
            "SwiGLU" => swiglu(n)?,
            "TensorScatter" => tensor_scatter(n)?,
            "LinearAttention" => linear_attention(n)?,
            "CausalConvWithState" => causal_conv(n)?,
            _ => return Ok(None),
        }
    } else if n.domain == "ai.onnx.preview" && n.op_type() == "FlexAttention" {
        flex_attention(n)?
    } else {
        return Ok(None);
    };
    Ok(Some(Op::Llm(op)))
}

fn need_inputs(n: &NodeCtx, k: usize) -> Result<()> {
    if n.n_inputs() < k {
        bail!(
            InvalidModel,
            "{} needs at least {k} inputs, got {}",
            n.op_type(),
            n.n_inputs()
        );
    }
    Ok(())
}

fn swiglu(n: &NodeCtx) -> Result<LlmOp> {
    need_inputs(n, 2)?;
    Ok(LlmOp::SwiGLU {
        alpha: n.f("alpha", 1.0)?,
    })
}

fn tensor_scatter(n: &NodeCtx) -> Result<LlmOp> {
    need_inputs(n, 2)?;
    let mode = match n.s("mode", "linear")?.as_str() {
        "linear" => CacheWriteMode::Linear,
        "circular" => CacheWriteMode::Circular,
        other => bail!(
            InvalidModel,
            "attribute 'mode' must be linear or circular, got '{other}'"
        ),
    };
    let axis = n.i("axis", -2)?;
    if axis == 0 {
        bail!(
            InvalidModel,
            "attribute 'axis' cannot be 0 (the batch axis)"
        );
    }
    Ok(LlmOp::TensorScatter { mode, axis })
}

fn linear_attention(n: &NodeCtx) -> Result<LlmOp> {
    need_inputs(n, 3)?;
    let q_num_heads = n
        .opt_i("q_num_heads")?
        .ok_or_else(|| err!(InvalidModel, "attribute 'q_num_heads' is required"))?;
    let kv_num_heads = n
        .opt_i("kv_num_heads")?
        .ok_or_else(|| err!(InvalidModel, "attribute 'kv_num_heads' is required"))?;
    if q_num_heads <= 0 || kv_num_heads <= 0 || q_num_heads % kv_num_heads != 0 {
        bail!(InvalidModel,
            "q_num_heads ({q_num_heads}) must be a positive multiple of kv_num_heads ({kv_num_heads})"
        );
    }
    let update_rule =
        match n.s("update_rule", "gated_delta")?.as_str() {
            "linear" => LinearAttentionRule::Linear,
            "gated" => LinearAttentionRule::Gated,
            "delta" => LinearAttentionRule::Delta,
            "gated_delta" => LinearAttentionRule::GatedDelta,
            other => bail!(InvalidModel,
            "attribute 'update_rule' must be linear, gated, delta or gated_delta, got '{other}'"
        ),
        };
    let scale = n.opt_f("scale")?.filter(|&s| s != 0.0);
    let chunk_size = n.i("chunk_size", 64)?;
    if chunk_size <= 0 {
        bail!(
            InvalidModel,
            "attribute 'chunk_size' must be positive, got {chunk_size}"
        );
    }
    Ok(LlmOp::LinearAttention {
        q_num_heads,
        kv_num_heads,
        scale,
        update_rule,
        chunk_size,
    })
}

fn causal_conv(n: &NodeCtx) -> Result<LlmOp> {
    need_inputs(n, 2)?;
    let activation = match n.s("activation", "none")?.as_str() {
        "none" => ConvActivation::None,
        "silu" | "swish" => ConvActivation::Silu,
        other => bail!(
            InvalidModel,
            "attribute 'activation' must be none, silu or swish, got '{other}'"
        ),
    };
    Ok(LlmOp::CausalConvWithState { activation })
}

fn flex_attention(n: &mut NodeCtx) -> Result<LlmOp> {
    need_inputs(n, 3)?;
    let scale = n.opt_f("scale")?;
    let softmax_precision = n.opt_dtype("softmax_precision")?;
    if let Some(d) = softmax_precision {
        if !matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64) {
            bail!(
                InvalidModel,
                "attribute 'softmax_precision' must be a float type, got {d}"
            );
        }
    }
    let score_mod = match n.attr("score_mod") {
        Some(_) => Some(Box::new(n.graph("score_mod")?)),
        None => None,
    };
    let prob_mod = match n.attr("prob_mod") {
        Some(_) => Some(Box::new(n.graph("prob_mod")?)),
        None => None,
    };
    for (name, g) in [("score_mod", &score_mod), ("prob_mod", &prob_mod)] {
        if let Some(g) = g {
            if g.inputs.len() != 1 || g.outputs.len() != 1 {
                bail!(
                    InvalidModel,
                    "subgraph '{name}' must have 1 input and 1 output, has {} and {}",
                    g.inputs.len(),
                    g.outputs.len()
                );
            }
        }
    }
    Ok(LlmOp::FlexAttention {
        scale,
        score_mod,
        prob_mod,
        softmax_precision,
    })
}
