//! Softmax, LogSoftmax and Hardmax.

use super::split_at_axis;
use smelt_ir::{bail, DType, Result, Tensor};

/// Which member of the family.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kind {
    Softmax,
    LogSoftmax,
    Hardmax,
}

/// Runs one op; with `coerce_2d` the dimensions from `axis` on form one flattened axis.
pub(super) fn run(kind: Kind, t: &Tensor, axis: i64, coerce_2d: bool) -> Result<Tensor> {
    let dtype = t.dtype();
    if !dtype.is_float() {
        bail!(Unsupported, "expected floating-point elements, got {dtype}");
    }
    let shape = t.shape();
    let r = shape.len() as i64;
    let (outer, dim, inner) = if coerce_2d {
        if axis < -r || axis > r {
            bail!(InvalidModel, "axis {axis} is out of range for rank {r}");
        }
        let a = if axis < 0 { axis + r } else { axis } as usize;
        (
            smelt_ir::dims_product(&shape[..a]),
            smelt_ir::dims_product(&shape[a..]),
            1,
        )
    } else {
        if r == 0 {
            bail!(InvalidModel, "the input must have at least one dimension");
        }
        split_at_axis(shape, super::norm_axis(axis, shape.len())?)
    };
    if kind == Kind::Softmax && matches!(dtype, DType::F16 | DType::BF16) {
        return half_softmax(t, outer, dim, inner);
    }
    let v = t.to_f64()?;
    let mut out = vec![0.0f64; v.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * dim + k) * inner + i;
            if dim == 0 {
                continue;
            }
            let mut max = f64::NEG_INFINITY;
            let mut arg = 0;
            for k in 0..dim {
                let x = v[at(k)];
                if x > max || (x.is_nan() && !max.is_nan()) {
                    max = x;
                    arg = k;
                }
            }
            match kind {
                Kind::Hardmax => out[at(arg)] = 1.0,
                Kind::Softmax | Kind::LogSoftmax => {
                    let m = if max.is_finite() { max } else { 0.0 };
                    let sum: f64 = (0..dim).map(|k| (v[at(k)] - m).exp()).sum();
                    for k in 0..dim {
                        let x = v[at(k)] - m;
                        out[at(k)] = if kind == Kind::Softmax {
                            x.exp() / sum
                        } else {
                            x - sum.ln()
                        };
                    }
                }
            }
        }
    }
    Tensor::from_f64(dtype, shape.to_vec(), &out)
}

/// Rounds an `f32` to the half type `dt` (F16 or BF16) and back.
fn round_half(dt: DType, x: f32) -> f32 {
    if dt == DType::F16 {
        half::f16::from_f32(x).to_f32()
    } else {
        half::bf16::from_f32(x).to_f32()
    }
}

/// numpy's pairwise float32 sum of half values (`HALF_pairwise_sum`): blocks of up to 128
/// summed with eight accumulators, larger runs split in two.
fn pairwise_sum(v: &[f32]) -> f32 {
    let n = v.len();
    if n < 8 {
        v.iter().fold(0.0f32, |s, &x| s + x)
    } else if n <= 128 {
        let mut r = [0.0f32; 8];
        r.copy_from_slice(&v[..8]);
        let mut i = 8;
        while i + 8 <= n {
            for (k, rk) in r.iter_mut().enumerate() {
                *rk += v[i + k];
            }
            i += 8;
        }
        let mut s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &x in &v[i..] {
            s += x;
        }
        s
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise_sum(&v[..n2]) + pairwise_sum(&v[n2..])
    }
}

/// Softmax in F16/BF16 step by step as the ONNX reference computes it with numpy: each
/// elementwise step (`x - max`, `exp`, the division) is done in float32 and rounded to the
/// half type. The sum is numpy's reduction: for float16 along the innermost axis a pairwise
/// float32 sum rounded once, otherwise (and always for ml_dtypes' bfloat16) a running sum
/// rounded to the half type after every addition.
fn half_softmax(t: &Tensor, outer: usize, dim: usize, inner: usize) -> Result<Tensor> {
    let dt = t.dtype();
    let v = t.to_f64()?;
    let mut out = vec![0.0f64; v.len()];
    let mut e = vec![0.0f32; dim];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * dim + k) * inner + i;
            if dim == 0 {
                continue;
            }
            let mut max = f32::NEG_INFINITY;
            for k in 0..dim {
                let x = v[at(k)] as f32;
                if x > max || (x.is_nan() && !max.is_nan()) {
                    max = x;
                }
            }
            let m = if max.is_finite() { max } else { 0.0 };
            for (k, ek) in e.iter_mut().enumerate() {
                let d = round_half(dt, v[at(k)] as f32 - m);
                *ek = round_half(dt, d.exp());
            }
            let sum = if dt == DType::F16 && inner == 1 {
                round_half(dt, pairwise_sum(&e))
            } else {
                e.iter().fold(0.0f32, |s, &x| round_half(dt, s + x))
            };
            for (k, &ek) in e.iter().enumerate() {
                out[at(k)] = round_half(dt, ek / sum) as f64;
            }
        }
    }
    Tensor::from_f64(dt, t.shape().to_vec(), &out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn softmax_of_zeros(dt: DType, n: usize) -> f64 {
        let t = Tensor::from_f64(dt, vec![1, n], &vec![0.0; n]).unwrap();
        run(Kind::Softmax, &t, -1, false).unwrap().to_f64().unwrap()[0]
    }

    #[test]
    fn bf16_sum_rounds_at_every_step() {
        // ml_dtypes' bfloat16 sum is a running bf16 sum: 256 + 1 rounds back to 256.
        assert_eq!(softmax_of_zeros(DType::BF16, 300), 1.0 / 256.0);
    }

    #[test]
    fn f16_sum_is_a_float32_sum_rounded_once() {
        let want = half::f16::from_f32(1.0 / 300.0).to_f64();
        assert_eq!(softmax_of_zeros(DType::F16, 300), want);
        assert_eq!(pairwise_sum(&[1.0; 300]), 300.0);
    }
}
