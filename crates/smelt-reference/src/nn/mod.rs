//! Reference kernels of the nn op family: matrix products, convolution, pooling, normalization,
//! attention. Heavy ops (MatMul, Gemm, Conv, ConvTranspose) have an f32 path with f32
//! accumulation over a packed GEMM; other float types compute in f64, integers exactly.

mod attention;
mod conv;
mod einsum;
pub mod gemm;
mod matmul;
mod misc;
mod norm;
mod pool;

use super::{Ctx, Inputs};
use smelt_ir::op::NnOp;
use smelt_ir::{bail, DType, Result, Tensor, Value};

/// Runs one op of the family.
pub fn run(op: &NnOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    match op {
        NnOp::MatMul => matmul::matmul(x.tensor(0)?, x.tensor(1)?),
        NnOp::Gemm { .. } => matmul::gemm(op, x),
        NnOp::Conv { .. } => conv::conv(op, x),
        NnOp::ConvBlocked { .. } => conv::conv_blocked(op, x),
        NnOp::ConvTranspose { .. } => conv::conv_transpose(op, x),
        NnOp::DeformConv { .. } => conv::deform_conv(op, x),
        NnOp::MaxPool { .. } | NnOp::AveragePool { .. } | NnOp::LpPool { .. } => {
            pool::pool(op, x, cx)
        }
        NnOp::GlobalAveragePool | NnOp::GlobalMaxPool | NnOp::GlobalLpPool { .. } => {
            pool::global_pool(op, x)
        }
        NnOp::MaxUnpool { .. } => pool::max_unpool(op, x),
        NnOp::MaxRoiPool { .. } => pool::max_roi_pool(op, x),
        NnOp::BatchNormalization { .. } => norm::batch_norm(op, x, cx),
        NnOp::InstanceNormalization { .. } => norm::instance_norm(op, x),
        NnOp::LayerNormalization { .. } => norm::layer_norm(op, x, cx),
        NnOp::GroupNormalization { .. } => norm::group_norm(op, x),
        NnOp::RmsNormalization { .. } => norm::rms_norm(op, x),
        NnOp::MeanVarianceNormalization { .. } => norm::mvn(op, x),
        NnOp::Lrn { .. } => norm::lrn(op, x),
        NnOp::LpNormalization { .. } => norm::lp_norm(op, x),
        NnOp::Dropout { .. } => misc::dropout(op, x, cx),
        NnOp::Einsum { equation } => einsum::einsum(equation, x),
        NnOp::Attention { .. } => attention::attention(op, x, cx),
        NnOp::RotaryEmbedding { .. } => attention::rotary(op, x),
    }
}

/// Checks that a tensor holds real numbers a float kernel can read.
fn check_float(t: &Tensor, what: &str) -> Result<()> {
    let d = t.dtype();
    if !(d.is_float() || d.is_int()) || d == DType::Bool {
        bail!(Unsupported, "{what}: unsupported element type {d}");
    }
    Ok(())
}

/// Converts a list attribute of spatial sizes to usize, `default` when empty.
/// The largest kernel size, stride, dilation or pad the reference kernels take.
const MAX_WINDOW: i64 = 1 << 31;

fn spatial(v: &[i64], n: usize, default: usize, what: &str) -> Result<Vec<usize>> {
    if v.is_empty() {
        return Ok(vec![default; n]);
    }
    if v.len() != n {
        bail!(InvalidModel, "{what} has {} values, expected {n}", v.len());
    }
    v.iter()
        .map(|&x| {
            // Beyond 2^31 no kernel, stride or dilation is real, and products of two stay
            // inside i64.
            if x < 0 || (default == 1 && x == 0) || x > MAX_WINDOW {
                Err(smelt_ir::err!(
                    InvalidModel,
                    "{what} has an invalid value {x}"
                ))
            } else {
                Ok(x as usize)
            }
        })
        .collect()
}

/// Resolves pads (begin, end per axis) for conv-like ops from auto_pad, or the explicit list.
#[allow(clippy::too_many_arguments)]
fn resolve_pads(
    auto_pad: &smelt_ir::op::AutoPad,
    pads: &[i64],
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
) -> Result<(Vec<i64>, Vec<i64>)> {
    use smelt_ir::op::AutoPad;
    let n = input.len();
    match auto_pad {
        AutoPad::NotSet => {
            if pads.is_empty() {
                return Ok((vec![0; n], vec![0; n]));
            }
            if pads.len() != 2 * n {
                bail!(
                    InvalidModel,
                    "pads has {} values, expected {}",
                    pads.len(),
                    2 * n
                );
            }
            if pads.iter().any(|&p| p < 0) {
                bail!(Unsupported, "negative pads {pads:?} are not supported");
            }
            if pads.iter().any(|&p| p > MAX_WINDOW) {
                bail!(InvalidModel, "pads {pads:?} are out of range");
            }
            Ok((pads[..n].to_vec(), pads[n..].to_vec()))
        }
        AutoPad::Valid => Ok((vec![0; n], vec![0; n])),
        AutoPad::SameUpper | AutoPad::SameLower => {
            let mut b = vec![0; n];
            let mut e = vec![0; n];
            for i in 0..n {
                let out = input[i].div_ceil(strides[i]) as i64;
                let eff = ((kernel[i] as i64 - 1) * dilations[i] as i64) + 1;
                let total = ((out - 1) * strides[i] as i64 + eff - input[i] as i64).max(0);
                let small = total / 2;
                if matches!(auto_pad, AutoPad::SameUpper) {
                    b[i] = small;
                    e[i] = total - small;
                } else {
                    b[i] = total - small;
                    e[i] = small;
                }
            }
            Ok((b, e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;
    use smelt_ir::op::AutoPad;

    fn run1(op: &NnOp, inputs: &[Tensor], n_outputs: usize) -> Vec<Tensor> {
        let vals: Vec<Value> = inputs.iter().cloned().map(Value::Tensor).collect();
        let x = Inputs::new(vals.iter().map(Some).collect());
        let env = Env::new();
        let cx = Ctx {
            n_outputs,
            outputs_used: vec![true; n_outputs],
            env: &env,
            consts: &env,
            control: crate::test_control(),
            depth: 0,
            runner: None,
        };
        run(op, &x, &cx)
            .unwrap()
            .into_iter()
            .map(|v| v.tensor().unwrap().clone())
            .collect()
    }

    #[test]
    fn maxpool_with_indices() {
        let op = NnOp::MaxPool {
            auto_pad: AutoPad::NotSet,
            ceil_mode: false,
            dilations: vec![],
            kernel_shape: vec![2, 2],
            pads: vec![],
            storage_order: 0,
            strides: vec![2, 2],
        };
        let x = Tensor::from_f32(vec![1, 1, 2, 4], vec![1., 5., 2., 0., 3., 4., 8., 7.]).unwrap();
        let r = run1(&op, &[x], 2);
        assert_eq!(r[0].as_f32().unwrap(), &[5., 8.]);
        assert_eq!(r[1].as_i64().unwrap(), &[1, 6]);
    }

    #[test]
    fn layer_norm_rows() {
        let op = NnOp::LayerNormalization {
            axis: -1,
            epsilon: 0.0,
            stash_type: DType::F32,
        };
        let x = Tensor::from_f32(vec![2, 2], vec![1., 3., 2., 6.]).unwrap();
        let s = Tensor::from_f32(vec![2], vec![1., 1.]).unwrap();
        let r = run1(&op, &[x, s], 1);
        assert_eq!(r[0].as_f32().unwrap(), &[-1., 1., -1., 1.]);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let op = NnOp::Gemm {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b: false,
        };
        let a = Tensor::from_f32(vec![2, 3], vec![0.; 6]).unwrap();
        let b = Tensor::from_f32(vec![2, 3], vec![0.; 6]).unwrap();
        let vals = [Value::Tensor(a), Value::Tensor(b)];
        let x = Inputs::new(vals.iter().map(Some).collect());
        let env = Env::new();
        let cx = Ctx {
            n_outputs: 1,
            outputs_used: vec![true],
            env: &env,
            consts: &env,
            control: crate::test_control(),
            depth: 0,
            runner: None,
        };
        assert!(run(&op, &x, &cx).is_err());
    }
}
