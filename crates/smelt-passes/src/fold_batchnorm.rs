//! Folds an inference-mode BatchNormalization into the op before it. With per-channel
//! `f = scale / sqrt(var + eps)` and `s = beta - mean * f`, the output channel `c` of the
//! producer is scaled by `f[c]` and shifted by `s[c]`:
//! - `Conv`: weights `[M, C/group, k...]` scaled per output channel, bias `b * f + s`;
//! - `ConvTranspose`: weights `[C, M/group, k...]` scaled per output channel, same bias;
//! - `Gemm` (output `[M, N]`, BN channel axis = N): the columns of `op(B)` scaled, C becomes
//!   `beta * C * f + s` with `beta = 1`;
//! - `MatMul` of a 2-D input by a constant 2-D weight: becomes a `Gemm` with bias `s`.
//!
//! Needs constant weights, biases and statistics, and a producer output that only the
//! BatchNormalization reads.

use crate::{Pass, PassContext};
use smelt_ir::op::{ElementwiseOp, NnOp};
use smelt_ir::{Constant, Graph, Op, Result, Tensor, ValueId, ValueType};

/// The BatchNormalization-into-Conv/ConvTranspose/Gemm/MatMul folding pass.
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

/// A constant input that may be absent: None when present but not constant.
fn optional_constant(g: &Graph, id: Option<ValueId>) -> Option<Option<&Tensor>> {
    match id {
        Some(_) => constant(g, id).map(Some),
        None => Some(None),
    }
}

/// The rewritten producer: its op, weight, bias and the value its first input stays.
struct Folded {
    op: Op,
    x: Option<ValueId>,
    weight: Tensor,
    bias: Tensor,
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
    let Some(mut j) = sole_producer(g, v, i) else {
        return Ok(false);
    };
    // A convolution's output plus a constant per output channel (a bias kept apart), then
    // the BatchNormalization: the constant joins the shift and the Add goes too.
    let mut added: Option<(usize, Vec<f64>)> = None;
    if let Some((k, c)) = conv_plus_channel_constant(g, j) {
        added = Some((j, c));
        j = k;
    }
    let Some(channels) = channels(g, j) else {
        return Ok(false);
    };
    if stats
        .iter()
        .any(|t| t.len() != channels || !t.dtype().is_float())
    {
        return Ok(false);
    }
    let [scale, beta, mean, var] = [0, 1, 2, 3].map(|k| stats[k].to_f64());
    let (scale, beta, mean, var) = (scale?, beta?, mean?, var?);
    let factor: Vec<f64> = (0..channels)
        .map(|c| scale[c] / (var[c] + epsilon as f64).sqrt())
        .collect();
    let mut shift: Vec<f64> = (0..channels)
        .map(|c| beta[c] - mean[c] * factor[c])
        .collect();
    if let Some((_, add)) = &added {
        if add.len() != 1 && add.len() != channels {
            return Ok(false);
        }
        for (c, s) in shift.iter_mut().enumerate() {
            *s += add[if add.len() == 1 { 0 } else { c }] * factor[c];
        }
    }
    let folded = match &g.nodes[j].op {
        Op::Nn(NnOp::Conv { .. }) => fold_conv(g, j, &factor, &shift, false)?,
        Op::Nn(NnOp::ConvTranspose { .. }) => fold_conv(g, j, &factor, &shift, true)?,
        Op::Nn(NnOp::Gemm { .. }) | Op::Nn(NnOp::MatMul) => fold_gemm(g, j, &factor, &shift)?,
        _ => None,
    };
    let Some(f) = folded else { return Ok(false) };
    let w_in = g.nodes[j].inputs.get(1).copied().flatten().unwrap_or(v);
    let w_id = g.add_value(format!("{}_bn_folded", g.name_of(w_in)), None);
    let b_id = g.add_value(format!("{}_bn_bias", g.nodes[i].name), None);
    g.constants.push(Constant {
        id: w_id,
        tensor: f.weight,
    });
    g.constants.push(Constant {
        id: b_id,
        tensor: f.bias,
    });
    let node = &mut g.nodes[j];
    node.op = f.op;
    node.inputs = vec![f.x, Some(w_id), Some(b_id)];
    node.outputs = vec![Some(y)];
    g.nodes.remove(i);
    if let Some((a, _)) = added {
        g.nodes.remove(a);
    }
    Ok(true)
}

/// The node before `before` producing `v`, when it has one output, `v` is no graph output,
/// no subgraph captures it, and exactly one input anywhere reads it.
fn sole_producer(g: &Graph, v: ValueId, before: usize) -> Option<usize> {
    let j = g.nodes[..before]
        .iter()
        .position(|n| n.outputs.first() == Some(&Some(v)))?;
    if g.nodes[j].outputs.len() != 1 || g.outputs.contains(&v) || captured_by_subgraph(g, v) {
        return None;
    }
    let uses = g
        .nodes
        .iter()
        .flat_map(|n| n.inputs.iter())
        .filter(|&&id| id == Some(v))
        .count();
    (uses == 1).then_some(j)
}

/// Node `j` as `Conv(..) + c` or `ConvTranspose(..) + c`, with `c` a float constant that is
/// one value or one per channel along axis 1 (shape `[M, 1, ..]` or `[1, M, 1, ..]` against
/// the output's rank): the convolution's node and `c`'s values.
fn conv_plus_channel_constant(g: &Graph, j: usize) -> Option<(usize, Vec<f64>)> {
    let n = &g.nodes[j];
    if !matches!(n.op, Op::Elementwise(ElementwiseOp::Add)) || n.inputs.len() != 2 {
        return None;
    }
    for (a, b) in [(0, 1), (1, 0)] {
        let (Some(x), Some(cid)) = (n.inputs[a], n.inputs[b]) else {
            continue;
        };
        let Some(c) = constant(g, Some(cid)).filter(|t| is_plain_float(t)) else {
            continue;
        };
        let Some(k) = sole_producer(g, x, j) else {
            continue;
        };
        if !matches!(
            g.nodes[k].op,
            Op::Nn(NnOp::Conv { .. }) | Op::Nn(NnOp::ConvTranspose { .. })
        ) {
            continue;
        }
        // A convolution's output has its weights' rank: [N, M, spatial..].
        let Some(out_rank) =
            constant(g, g.nodes[k].inputs.get(1).copied().flatten()).map(|w| w.rank())
        else {
            continue;
        };
        let sh = c.shape();
        let ones_after = |from: usize| sh[from..].iter().all(|&d| d == 1);
        let per_channel = (c.len() == 1 && sh.len() <= out_rank)
            || (sh.len() + 1 == out_rank && ones_after(1))
            || (sh.len() == out_rank && sh.len() >= 2 && sh[0] == 1 && ones_after(2));
        if per_channel {
            return Some((k, c.to_f64().ok()?));
        }
    }
    None
}

/// The number of output channels of producer `j` along the BatchNormalization's axis 1,
/// when its weight is a constant of the expected layout.
fn channels(g: &Graph, j: usize) -> Option<usize> {
    let n = &g.nodes[j];
    let w = constant(g, n.inputs.get(1).copied().flatten())?;
    let s = w.shape();
    match &n.op {
        Op::Nn(NnOp::Conv { .. }) if s.len() >= 3 => Some(s[0]),
        Op::Nn(NnOp::ConvTranspose { group, .. }) if s.len() >= 3 && *group >= 1 => {
            s[1].checked_mul(usize::try_from(*group).ok()?)
        }
        Op::Nn(NnOp::Gemm { trans_b, .. }) if s.len() == 2 => Some(s[usize::from(!trans_b)]),
        Op::Nn(NnOp::MatMul) if s.len() == 2 && rank(g, (*n.inputs.first()?)?) == Some(2) => {
            Some(s[1])
        }
        _ => None,
    }
}

/// The rank of a value from its type, when known.
fn rank(g: &Graph, v: ValueId) -> Option<usize> {
    match &g.value(v).ty {
        Some(ValueType::Tensor { shape: Some(s), .. }) => Some(s.len()),
        _ => None,
    }
}

/// Conv (`[M, C/group, k...]`) or ConvTranspose (`[C, M/group, k...]`) weights scaled per
/// output channel, the bias `b * f + s`.
fn fold_conv(
    g: &Graph,
    j: usize,
    factor: &[f64],
    shift: &[f64],
    transposed: bool,
) -> Result<Option<Folded>> {
    let n = &g.nodes[j];
    let m = factor.len();
    let (Some(w), Some(bias)) = (
        constant(g, n.inputs.get(1).copied().flatten()),
        optional_constant(g, n.inputs.get(2).copied().flatten()),
    ) else {
        return Ok(None);
    };
    if !is_plain_float(w) || bias.is_some_and(|t| t.len() != m) || n.inputs.len() > 3 {
        return Ok(None);
    }
    let s = w.shape();
    let spatial: usize = s[2..].iter().product();
    let channel_of: Box<dyn Fn(usize) -> usize> = if transposed {
        let Op::Nn(NnOp::ConvTranspose { group, .. }) = &n.op else {
            return Ok(None);
        };
        let groups = usize::try_from(*group).unwrap_or(0);
        if groups == 0 || s[0] % groups != 0 {
            return Ok(None);
        }
        let (per_group_in, per_group_out) = (s[0] / groups, s[1]);
        Box::new(move |k| {
            let (ci, co) = (k / (per_group_out * spatial), (k / spatial) % per_group_out);
            (ci / per_group_in) * per_group_out + co
        })
    } else {
        let per = (w.len() / m.max(1)).max(1);
        Box::new(move |k| k / per)
    };
    let weight = match w.as_f32() {
        // f32 weights of a Conv (channel-major), scaled a channel at a time without the
        // f64 copies (the same f64 products, rounded once, as below).
        Some(wv) if !transposed => {
            let per = (wv.len() / m.max(1)).max(1);
            let mut out = smelt_ir::limits::try_vec(wv.len(), 0f32, &|| "folded weights".into())?;
            for ((o, x), f) in out.chunks_mut(per).zip(wv.chunks(per)).zip(factor) {
                for (o, &x) in o.iter_mut().zip(x) {
                    *o = (x as f64 * f) as f32;
                }
            }
            Tensor::from_f32(s.to_vec(), out)?
        }
        _ => {
            let wv = w.to_f64()?;
            let new_w: Vec<f64> = (0..wv.len())
                .map(|k| wv[k] * factor[channel_of(k)])
                .collect();
            Tensor::from_f64(w.dtype(), s.to_vec(), &new_w)?
        }
    };
    let old_b = match bias {
        Some(t) => t.to_f64()?,
        None => vec![0.0; m],
    };
    let new_b: Vec<f64> = (0..m).map(|c| old_b[c] * factor[c] + shift[c]).collect();
    Ok(Some(Folded {
        op: n.op.clone(),
        x: n.inputs[0],
        weight,
        bias: Tensor::from_f64(w.dtype(), vec![m], &new_b)?,
    }))
}

/// Gemm (or a 2-D MatMul, which becomes a Gemm): the columns of `op(B)` scaled, the bias
/// `beta * C * f + s` (with `beta` then 1).
fn fold_gemm(g: &Graph, j: usize, factor: &[f64], shift: &[f64]) -> Result<Option<Folded>> {
    let n = &g.nodes[j];
    let (alpha, beta, trans_a, trans_b, c) = match n.op {
        Op::Nn(NnOp::Gemm {
            alpha,
            beta,
            trans_a,
            trans_b,
        }) => (
            alpha,
            beta,
            trans_a,
            trans_b,
            n.inputs.get(2).copied().flatten(),
        ),
        _ if n.inputs.len() == 2 => (1.0, 1.0, false, false, None),
        _ => return Ok(None),
    };
    let (Some(w), Some(c)) = (
        constant(g, n.inputs.get(1).copied().flatten()),
        optional_constant(g, c),
    ) else {
        return Ok(None);
    };
    let cols = factor.len();
    if !is_plain_float(w) || n.inputs.len() > 3 {
        return Ok(None);
    }
    // C broadcasts to [M, N]: its rows (1 or M) and columns (1 or N).
    let (c_rows, c_cols) = match c.map(|t| t.shape()) {
        None | Some([]) => (1, 1),
        Some(&[k]) => (1, k),
        Some(&[r, k]) => (r, k),
        _ => return Ok(None),
    };
    if c_cols != 1 && c_cols != cols {
        return Ok(None);
    }
    let wv = w.to_f64()?;
    let new_w: Vec<f64> = (0..wv.len())
        .map(|k| {
            let col = if trans_b { k / w.shape()[1] } else { k % cols };
            wv[k] * factor[col]
        })
        .collect();
    let old_c = match c {
        Some(t) => t.to_f64()?,
        None => vec![0.0],
    };
    let mut new_c = Vec::with_capacity(c_rows * cols);
    for r in 0..c_rows {
        for k in 0..cols {
            let cv = old_c[r * c_cols + if c_cols == 1 { 0 } else { k }];
            new_c.push(beta as f64 * cv * factor[k] + shift[k]);
        }
    }
    let c_shape = if c_rows == 1 {
        vec![cols]
    } else {
        vec![c_rows, cols]
    };
    Ok(Some(Folded {
        op: Op::Nn(NnOp::Gemm {
            alpha,
            beta: 1.0,
            trans_a,
            trans_b,
        }),
        x: n.inputs[0],
        weight: Tensor::from_f64(w.dtype(), w.shape().to_vec(), &new_w)?,
        bias: Tensor::from_f64(w.dtype(), c_shape, &new_c)?,
    }))
}

/// f16, bf16, f32 or f64 (the float types folding computes in exactly enough).
fn is_plain_float(t: &Tensor) -> bool {
    use smelt_ir::DType::*;
    matches!(t.dtype(), F16 | BF16 | F32 | F64)
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

    /// BatchNorm statistics for two channels: f = [1, 4], s = [-0.5, 1] (eps 1).
    const STATS: &str = r#"  const %2 "scale" = {"dtype":"F32","shape":[2],"data":{"F32":[2.0,4.0]}}
  const %3 "beta" = {"dtype":"F32","shape":[2],"data":{"F32":[0.5,1.0]}}
  const %4 "mean" = {"dtype":"F32","shape":[2],"data":{"F32":[1.0,0.0]}}
  const %5 "var" = {"dtype":"F32","shape":[2],"data":{"F32":[3.0,0.0]}}"#;
    const BN: &str = r#"nn.BatchNormalization {"epsilon":1.0,"momentum":0.9,"spatial":true,"training_mode":false} (%6, %2, %3, %4, %5) # "bn""#;

    fn with_stats(head: &str, body: &str) -> String {
        format!("graph \"g\" {{\n{head}\n{STATS}\n{body}\n}}")
    }

    #[test]
    fn batchnorm_folds_through_a_channel_add_after_a_conv_transpose() {
        // (ConvT(x) + c) * f + s = ConvT(x) * f + (c * f + s): c = [1, 2] joins the shift
        // [-0.5, 1] as [0.5, 9], and the Add goes with the BatchNormalization.
        let head = r#"  input %0 "x": f32[1,2,2,2]
  const %1 "w" = {"dtype":"F32","shape":[2,2,1,1],"data":{"F32":[1.0,2.0,3.0,4.0]}}
  const %11 "c" = {"dtype":"F32","shape":[2,1,1],"data":{"F32":[1.0,2.0]}}"#;
        let attrs = r#"{"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[],"output_padding":[],"output_shape":[],"pads":[],"strides":[]}"#;
        let bn = BN.replace("(%6,", "(%10,");
        golden(
            &FoldBatchNorm,
            &no_eval(),
            &with_stats(
                head,
                &format!(
                    r#"  %6 "c" = nn.ConvTranspose {attrs} (%0, %1) # "deconv"
  %10 "a" = elementwise.Add (%6, %11) # "add"
  %7 "y" = {bn}
  output %7"#
                ),
            ),
            &with_stats(
                head,
                &format!(
                    r#"  const %12 "w_bn_folded" = {{"dtype":"F32","shape":[2,2,1,1],"data":{{"F32":[1.0,8.0,3.0,16.0]}}}}
  const %13 "bn_bn_bias" = {{"dtype":"F32","shape":[2],"data":{{"F32":[0.5,9.0]}}}}
  %7 "y" = nn.ConvTranspose {attrs} (%0, %12, %13) # "deconv"
  output %7"#
                ),
            ),
        );
    }

    #[test]
    fn batchnorm_folds_into_gemm_with_trans_b_alpha_beta() {
        // op(B) = B^T: row n of B is column n. C' = 0.5 * C * f + s = [0, -1].
        let head = r#"  input %0 "x": f32[3,2]
  const %1 "w" = {"dtype":"F32","shape":[2,2],"data":{"F32":[1.0,2.0,3.0,4.0]}}
  const %9 "c" = {"dtype":"F32","shape":[2],"data":{"F32":[1.0,-1.0]}}"#;
        golden(
            &FoldBatchNorm,
            &no_eval(),
            &with_stats(
                head,
                &format!(
                    r#"  %6 "g" = nn.Gemm {{"alpha":2.0,"beta":0.5,"trans_a":false,"trans_b":true}} (%0, %1, %9) # "gemm"
  %7 "y" = {BN}
  output %7"#
                ),
            ),
            &with_stats(
                head,
                r#"  const %10 "w_bn_folded" = {"dtype":"F32","shape":[2,2],"data":{"F32":[1.0,2.0,12.0,16.0]}}
  const %11 "bn_bn_bias" = {"dtype":"F32","shape":[2],"data":{"F32":[0.0,-1.0]}}
  %7 "y" = nn.Gemm {"alpha":2.0,"beta":1.0,"trans_a":false,"trans_b":true} (%0, %10, %11) # "gemm"
  output %7"#,
            ),
        );
    }

    #[test]
    fn batchnorm_folds_into_2d_matmul_as_gemm() {
        let head = r#"  input %0 "x": f32[3,2]
  const %1 "w" = {"dtype":"F32","shape":[2,2],"data":{"F32":[1.0,2.0,3.0,4.0]}}"#;
        golden(
            &FoldBatchNorm,
            &no_eval(),
            &with_stats(
                head,
                &format!(
                    r#"  %6 "m" = nn.MatMul (%0, %1) # "matmul"
  %7 "y" = {BN}
  output %7"#
                ),
            ),
            &with_stats(
                head,
                r#"  const %8 "w_bn_folded" = {"dtype":"F32","shape":[2,2],"data":{"F32":[1.0,8.0,3.0,16.0]}}
  const %9 "bn_bn_bias" = {"dtype":"F32","shape":[2],"data":{"F32":[-0.5,1.0]}}
  %7 "y" = nn.Gemm {"alpha":1.0,"beta":1.0,"trans_a":false,"trans_b":false} (%0, %8, %9) # "matmul"
  output %7"#,
            ),
        );
    }

    #[test]
    fn batchnorm_stays_after_batched_matmul() {
        let text = with_stats(
            r#"  input %0 "x": f32[4,3,2]
  const %1 "w" = {"dtype":"F32","shape":[2,2],"data":{"F32":[1.0,2.0,3.0,4.0]}}"#,
            &format!(
                r#"  %6 "m" = nn.MatMul (%0, %1) # "matmul"
  %7 "y" = {BN}
  output %7"#
            ),
        );
        golden(&FoldBatchNorm, &no_eval(), &text, &text);
    }

    #[test]
    fn batchnorm_folds_into_conv_transpose_output_channels() {
        // W is [C_in = 2, C_out = 2, 1, 1]: element (ci, co) scales by f[co].
        let head = r#"  input %0 "x": f32[1,2,2,2]
  const %1 "w" = {"dtype":"F32","shape":[2,2,1,1],"data":{"F32":[1.0,2.0,3.0,4.0]}}"#;
        let attrs = r#"{"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[],"output_padding":[],"output_shape":[],"pads":[],"strides":[]}"#;
        golden(
            &FoldBatchNorm,
            &no_eval(),
            &with_stats(
                head,
                &format!(
                    r#"  %6 "c" = nn.ConvTranspose {attrs} (%0, %1) # "deconv"
  %7 "y" = {BN}
  output %7"#
                ),
            ),
            &with_stats(
                head,
                &format!(
                    r#"  const %8 "w_bn_folded" = {{"dtype":"F32","shape":[2,2,1,1],"data":{{"F32":[1.0,8.0,3.0,16.0]}}}}
  const %9 "bn_bn_bias" = {{"dtype":"F32","shape":[2],"data":{{"F32":[-0.5,1.0]}}}}
  %7 "y" = nn.ConvTranspose {attrs} (%0, %8, %9) # "deconv"
  output %7"#
                ),
            ),
        );
    }
}
