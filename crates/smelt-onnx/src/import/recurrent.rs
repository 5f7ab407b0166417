//! Import of the recurrent op family: RNN, GRU, LSTM (every opset: `layout` from 14,
//! `linear_before_reset` from GRU-3; opset 1's `output_sequence` is implied by the outputs used).

use super::NodeCtx;
use smelt_ir::op::recurrent::{Activation, RnnDirection};
use smelt_ir::op::RecurrentOp;
use smelt_ir::{bail, Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    if !n.is_onnx() {
        return Ok(None);
    }
    let defaults: &[&str] = match n.op_type() {
        "RNN" => &["Tanh"],
        "GRU" => &["Sigmoid", "Tanh"],
        "LSTM" => &["Sigmoid", "Tanh", "Tanh"],
        _ => return Ok(None),
    };
    let direction = match n.s("direction", "forward")?.as_str() {
        "forward" => RnnDirection::Forward,
        "reverse" => RnnDirection::Reverse,
        "bidirectional" => RnnDirection::Bidirectional,
        other => bail!(
            InvalidModel,
            "direction must be forward, reverse or bidirectional, got '{other}'"
        ),
    };
    let hidden_size = n.opt_i("hidden_size")?;
    if let Some(h) = hidden_size {
        if h < 1 {
            bail!(InvalidModel, "hidden_size must be positive, got {h}");
        }
    }
    let batch_major = match n.i("layout", 0)? {
        0 => false,
        1 => true,
        l => bail!(InvalidModel, "layout must be 0 or 1, got {l}"),
    };
    let clip = n.opt_f("clip")?;
    if let Some(c) = clip {
        if c.is_nan() || c < 0.0 {
            bail!(
                InvalidModel,
                "clip must be a non-negative threshold, got {c}"
            );
        }
    }
    let activations = activations(n, defaults, direction.count())?;
    let op = match n.op_type() {
        "RNN" => RecurrentOp::Rnn {
            hidden_size,
            direction,
            batch_major,
            activations,
            clip,
        },
        "GRU" => RecurrentOp::Gru {
            hidden_size,
            direction,
            batch_major,
            activations,
            clip,
            linear_before_reset: n.flag("linear_before_reset", false)?,
        },
        _ => RecurrentOp::Lstm {
            hidden_size,
            direction,
            batch_major,
            activations,
            clip,
            input_forget: n.flag("input_forget", false)?,
        },
    };
    Ok(Some(Op::Recurrent(op)))
}

/// Resolves the `activations`, `activation_alpha` and `activation_beta` attributes into one
/// activation per function and direction. Alpha and beta values are consumed in order by the
/// functions that take them; missing ones take the ONNX operator defaults.
fn activations(n: &NodeCtx, defaults: &[&str], dirs: usize) -> Result<Vec<Activation>> {
    let per_dir = defaults.len();
    let names: Vec<String> = match n.opt_strings("activations")? {
        Some(v) if !v.is_empty() => v,
        _ => defaults.iter().map(|s| s.to_string()).collect(),
    };
    let names = if names.len() == per_dir * dirs {
        names
    } else if names.len() == per_dir {
        // One set given for a bidirectional layer: use it for both directions.
        names.iter().cycle().take(per_dir * dirs).cloned().collect()
    } else {
        bail!(
            InvalidModel,
            "{} expects {} activation functions ({} per direction), got {}",
            n.op_type(),
            per_dir * dirs,
            per_dir,
            names.len()
        );
    };
    let alphas = n.opt_floats("activation_alpha")?.unwrap_or_default();
    let betas = n.opt_floats("activation_beta")?.unwrap_or_default();
    let (mut ai, mut bi) = (0usize, 0usize);
    let next = |v: &[f32], i: &mut usize, default: f32| {
        let x = v.get(*i).copied().unwrap_or(default);
        *i += 1;
        x
    };
    let mut out = Vec::with_capacity(names.len());
    for name in &names {
        let a = match name.to_ascii_lowercase().as_str() {
            "relu" => Activation::Relu,
            "tanh" => Activation::Tanh,
            "sigmoid" => Activation::Sigmoid,
            "affine" => {
                let alpha = next(&alphas, &mut ai, 1.0);
                Activation::Affine {
                    alpha,
                    beta: next(&betas, &mut bi, 0.0),
                }
            }
            "leakyrelu" => Activation::LeakyRelu {
                alpha: next(&alphas, &mut ai, 0.01),
            },
            "thresholdedrelu" => Activation::ThresholdedRelu {
                alpha: next(&alphas, &mut ai, 1.0),
            },
            "scaledtanh" => {
                let alpha = next(&alphas, &mut ai, 1.0);
                Activation::ScaledTanh {
                    alpha,
                    beta: next(&betas, &mut bi, 1.0),
                }
            }
            "hardsigmoid" => {
                let alpha = next(&alphas, &mut ai, 0.2);
                Activation::HardSigmoid {
                    alpha,
                    beta: next(&betas, &mut bi, 0.5),
                }
            }
            "elu" => Activation::Elu {
                alpha: next(&alphas, &mut ai, 1.0),
            },
            "softsign" => Activation::Softsign,
            "softplus" => Activation::Softplus,
            other => bail!(InvalidModel, "unknown activation function '{other}'"),
        };
        out.push(a);
    }
    Ok(out)
}
