//! Folds an inference-mode BatchNormalization into the Conv before it: the conv's weights
//! are scaled per output channel by `scale / sqrt(var + eps)` and its bias becomes
//! `(bias - mean) * that + beta`. Needs constant weights and statistics, and a conv
//! output that only the BatchNormalization reads.

use crate::{Pass, PassContext};
use smelt_ir::op::NnOp;
use smelt_ir::{Constant, Graph, Op, Result, Tensor, ValueId};

/// The BatchNormalization-into-Conv folding pass.
pub struct FoldBatchNorm;

impl Pass for FoldBatchNorm {
    fn name(&self) -> &'static str {
        "fold-batchnorm"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        let mut changed = false;
        let mut i = 0;
        while i < g.nodes.len() {
            if try_fold(g, i)? {
                changed = true;
            } else {
                i += 1;
            }
        }
        Ok(changed)
    }
}

fn constant(g: &Graph, id: Option<ValueId>) -> Option<&Tensor> {
    let id = id?;
    g.constants.iter().find(|c| c.id == id).map(|c| &c.tensor)
}

/// Folds BatchNormalization node `i` into its producer; false when the pattern does not match.
fn try_fold(g: &mut Graph, i: usize) -> Result<bool> {
    let bn = &g.nodes[i];
    let Op::Nn(NnOp::BatchNormalization {
        epsilon,
        training_mode: false,
        spatial: true,
        ..
    }) = bn.op
    else {
        return Ok(false);
    };
    if bn.inputs.len() != 5 || bn.outputs.iter().skip(1).any(|o| o.is_some()) {
        return Ok(false);
    }
    let (Some(v), Some(y)) = (bn.inputs[0], bn.outputs.first().copied().flatten()) else {
        return Ok(false);
    };
    let stats: Option<Vec<&Tensor>> = bn.inputs[1..5].iter().map(|&id| constant(g, id)).collect();
    let Some(stats) = stats else { return Ok(false) };
    let Some(j) = g.nodes[..i]
        .iter()
        .position(|n| n.outputs.first() == Some(&Some(v)))
    else {
        return Ok(false);
    };
    let conv = &g.nodes[j];
    if !matches!(conv.op, Op::Nn(NnOp::Conv { .. }))
        || conv.outputs.len() != 1
        || g.outputs.contains(&v)
    {
        return Ok(false);
    }
    let uses = g
        .nodes
        .iter()
        .filter(|n| n.inputs.contains(&Some(v)))
        .count();
    if uses != 1 || captured_by_subgraph(g, v) {
        return Ok(false);
    }
    let Some(w) = constant(g, conv.inputs.get(1).copied().flatten()) else {
        return Ok(false);
    };
    let b = conv.inputs.get(2).copied().flatten();
    let bias = match b {
        Some(_) => match constant(g, b) {
            Some(t) => Some(t),
            None => return Ok(false),
        },
        None => None,
    };
    let m = match w.shape().first() {
        Some(&m) if w.dtype().is_float() && w.rank() >= 3 => m,
        _ => return Ok(false),
    };
    if stats.iter().any(|t| t.len() != m || !t.dtype().is_float())
        || bias.is_some_and(|t| t.len() != m)
    {
        return Ok(false);
    }
    let [scale, beta, mean, var] = [0, 1, 2, 3].map(|k| stats[k].to_f64());
    let (scale, beta, mean, var) = (scale?, beta?, mean?, var?);
    let factor: Vec<f64> = (0..m)
        .map(|c| scale[c] / (var[c] + epsilon as f64).sqrt())
        .collect();
    let per = w.len() / m.max(1);
    let wv = w.to_f64()?;
    let new_w: Vec<f64> = wv
        .iter()
        .enumerate()
        .map(|(k, &x)| x * factor[k / per.max(1)])
        .collect();
    let old_b = match bias {
        Some(t) => t.to_f64()?,
        None => vec![0.0; m],
    };
    let new_b: Vec<f64> = (0..m)
        .map(|c| (old_b[c] - mean[c]) * factor[c] + beta[c])
        .collect();
    let w_tensor = Tensor::from_f64(w.dtype(), w.shape().to_vec(), &new_w)?;
    let b_tensor = Tensor::from_f64(w.dtype(), vec![m], &new_b)?;
    let x = conv.inputs[0];
    let w_name = format!("{}_bn_folded", g.name_of(conv.inputs[1].unwrap_or(v)));
    let w_id = g.add_value(w_name, None);
    let b_id = g.add_value(format!("{}_bn_bias", g.nodes[i].name), None);
    g.constants.push(Constant {
        id: w_id,
        tensor: w_tensor,
    });
    g.constants.push(Constant {
        id: b_id,
        tensor: b_tensor,
    });
    let conv = &mut g.nodes[j];
    conv.inputs = vec![x, Some(w_id), Some(b_id)];
    conv.outputs = vec![Some(y)];
    g.nodes.remove(i);
    Ok(true)
}

/// True when a subgraph of some node captures `v`.
fn captured_by_subgraph(g: &Graph, v: ValueId) -> bool {
    g.nodes.iter().any(|n| {
        n.op.subgraphs()
            .iter()
            .any(|s| s.captures.iter().any(|c| c.outer == v))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::tests::{golden, no_eval};

    #[test]
    fn batchnorm_folds_into_conv() {
        // W = [[[[1]]], [[[2]]]] (2 output channels, 1x1 kernel), no conv bias.
        // Channel 0: s = 2/sqrt(3+1) = 1, bias = (0 - 1)*1 + 0.5 = -0.5.
        // Channel 1: s = 4/sqrt(0+4) ... var 0, eps 1 -> s = 4, W = 8, bias = (0 - 0)*4 + 1 = 1.
        golden(
            &FoldBatchNorm,
            &no_eval(),
            r#"graph "g" {
  input %0 "x": f32[1,1,2,2]
  const %1 "w" = {"dtype":"F32","shape":[2,1,1,1],"data":{"F32":[1.0,2.0]}}
  const %2 "scale" = {"dtype":"F32","shape":[2],"data":{"F32":[2.0,4.0]}}
  const %3 "beta" = {"dtype":"F32","shape":[2],"data":{"F32":[0.5,1.0]}}
  const %4 "mean" = {"dtype":"F32","shape":[2],"data":{"F32":[1.0,0.0]}}
  const %5 "var" = {"dtype":"F32","shape":[2],"data":{"F32":[3.0,0.0]}}
  %6 "c" = nn.Conv {"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[],"pads":[],"strides":[]} (%0, %1) # "conv"
  %7 "y" = nn.BatchNormalization {"epsilon":1.0,"momentum":0.9,"training_mode":false,"spatial":true} (%6, %2, %3, %4, %5) # "bn"
  output %7
}"#,
            r#"graph "g" {
  input %0 "x": f32[1,1,2,2]
  const %1 "w" = {"dtype":"F32","shape":[2,1,1,1],"data":{"F32":[1.0,2.0]}}
  const %2 "scale" = {"dtype":"F32","shape":[2],"data":{"F32":[2.0,4.0]}}
  const %3 "beta" = {"dtype":"F32","shape":[2],"data":{"F32":[0.5,1.0]}}
  const %4 "mean" = {"dtype":"F32","shape":[2],"data":{"F32":[1.0,0.0]}}
  const %5 "var" = {"dtype":"F32","shape":[2],"data":{"F32":[3.0,0.0]}}
  const %8 "w_bn_folded" = {"dtype":"F32","shape":[2,1,1,1],"data":{"F32":[1.0,8.0]}}
  const %9 "bn_bn_bias" = {"dtype":"F32","shape":[2],"data":{"F32":[-0.5,1.0]}}
  %7 "y" = nn.Conv {"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[],"pads":[],"strides":[]} (%0, %8, %9) # "conv"
  output %7
}"#,
        );
    }
}
