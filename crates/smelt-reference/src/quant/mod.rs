//! Reference kernels of the quant op family.
//!
//! Quantize/dequantize follow the ONNX reference implementation: the division `x / scale`
//! is done in the scale's precision (or the `precision` attribute), integers round half to
//! even, then add the zero point and saturate; float8 outputs ignore the zero point.

mod conv;
mod matmul;

use super::{one, Ctx, Inputs};
use half::{bf16, f16};
use smelt_ir::op::QuantOp;
use smelt_ir::{bail, ensure, lowp, numel, DType, Data, Result, Tensor, Value};

/// Runs one op of the family.
pub fn run(op: &QuantOp, x: &Inputs, _cx: &Ctx) -> Result<Vec<Value>> {
    match op {
        QuantOp::QuantizeLinear {
            axis,
            block_size,
            output_dtype,
            saturate,
            precision,
        } => one(quantize(
            x.tensor(0)?,
            x.tensor(1)?,
            x.opt_tensor(2)?,
            &QuantParams {
                axis: *axis,
                block_size: *block_size,
                output_dtype: *output_dtype,
                saturate: *saturate,
                precision: *precision,
            },
        )?),
        QuantOp::DequantizeLinear {
            axis,
            block_size,
            output_dtype,
        } => one(dequantize(
            x.tensor(0)?,
            x.tensor(1)?,
            x.opt_tensor(2)?,
            *axis,
            *block_size,
            *output_dtype,
        )?),
        QuantOp::DynamicQuantizeLinear => dynamic_quantize(x.tensor(0)?),
        QuantOp::MatMulInteger => one(matmul::matmul_integer(x)?),
        QuantOp::QLinearMatMul => one(matmul::qlinear_matmul(x)?),
        QuantOp::ConvInteger { conv } => one(conv::conv_integer(conv, x)?),
        QuantOp::QLinearConv { conv } => one(conv::qlinear_conv(conv, x)?),
    }
}

/// Attributes of QuantizeLinear.
pub struct QuantParams {
    /// Quantization axis.
    pub axis: i64,
    /// Block size (0: not blocked).
    pub block_size: i64,
    /// Requested output type.
    pub output_dtype: Option<DType>,
    /// Saturate float8 outputs.
    pub saturate: bool,
    /// Precision of the division.
    pub precision: Option<DType>,
}

/// Normalizes a possibly negative axis for a tensor of `rank` dimensions.
fn norm_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    ensure!(
        axis >= -r && axis < r,
        InvalidModel,
        "axis {axis} is out of range for rank {rank}"
    );
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}

/// For each element of a tensor of shape `x`, the index of its scale/zero point of shape `s`
/// (per-tensor, per-axis or blocked quantization).
fn param_map(x: &[usize], s: &[usize], axis: i64, block: i64) -> Result<Vec<usize>> {
    let n = numel(x)?;
    let sn: usize = smelt_ir::dims_product(s);
    if sn == 1 && (block == 0 || s.len() <= 1) {
        return Ok(vec![0; n]);
    }
    if block > 0 {
        ensure!(
            s.len() == x.len(),
            InvalidModel,
            "blocked quantization needs a scale of the input's rank: scale {s:?}, input {x:?}"
        );
        let ax = norm_axis(axis, x.len())?;
        let b = block as usize;
        for d in 0..x.len() {
            if d == ax {
                ensure!(
                    s[d] == x[d].div_ceil(b),
                    InvalidModel,
                    "blocked quantization: scale dim {} on axis {ax} should be ceil({}/{b})",
                    s[d],
                    x[d]
                );
            } else {
                ensure!(
                    s[d] == x[d],
                    InvalidModel,
                    "blocked quantization: scale shape {s:?} does not match input {x:?}"
                );
            }
        }
        let xs = smelt_ir::strides(x);
        let ss = smelt_ir::strides(s);
        return Ok((0..n)
            .map(|i| {
                let mut j = 0;
                for d in 0..x.len() {
                    let c = (i / xs[d]) % x[d];
                    j += if d == ax { c / b } else { c } * ss[d];
                }
                j
            })
            .collect());
    }
    ensure!(
        s.len() == 1, InvalidModel,
        "scale of shape {s:?} is neither per-tensor nor per-axis (1-D) for input {x:?}; set block_size for blocked quantization"
    );
    let ax = norm_axis(axis, x.len())?;
    ensure!(
        s[0] == x[ax],
        InvalidModel,
        "per-axis scale has {} elements but axis {ax} of input {x:?} has {}",
        s[0],
        x[ax]
    );
    let inner: usize = smelt_ir::dims_product(&x[ax + 1..]);
    Ok((0..n).map(|i| (i / inner) % x[ax]).collect())
}

/// Rounds an f64 to the nearest value of a float type (identity for f64 and non-float types).
fn round_to(d: DType, v: f64) -> f64 {
    match d {
        DType::F32 => v as f32 as f64,
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        _ => v,
    }
}

/// The float type numpy uses for arithmetic between two operand types.
fn promote(a: DType, b: DType) -> DType {
    use DType::*;
    match (a, b) {
        (F64, _) | (_, F64) => F64,
        (F16, F16) => F16,
        (BF16, BF16) => BF16,
        (I32, I32) => F64,
        _ => F32,
    }
}

/// The zero point's values (0 when absent), checked against the scale's shape.
fn zero_points(zp: Option<&Tensor>, scale: &Tensor) -> Result<Option<Vec<f64>>> {
    let Some(z) = zp else { return Ok(None) };
    ensure!(
        z.len() == scale.len(),
        InvalidModel,
        "zero point shape {:?} does not match scale shape {:?}",
        z.shape(),
        scale.shape()
    );
    Ok(Some(z.to_f64()?))
}

/// QuantizeLinear.
pub fn quantize(
    x: &Tensor,
    scale: &Tensor,
    zp: Option<&Tensor>,
    p: &QuantParams,
) -> Result<Tensor> {
    let out = match (p.output_dtype, zp) {
        (Some(d), Some(z)) => {
            ensure!(
                d == z.dtype(),
                InvalidModel,
                "output_dtype {d} differs from the zero point's type {}",
                z.dtype()
            );
            d
        }
        (Some(d), None) => d,
        (None, Some(z)) => z.dtype(),
        (None, None) => DType::U8,
    };
    ensure!(
        x.dtype().is_float() || x.dtype() == DType::I32,
        Unsupported,
        "QuantizeLinear input must be float or int32, got {}",
        x.dtype()
    );
    let map = param_map(x.shape(), scale.shape(), p.axis, p.block_size)?;
    let xs = x.to_f64()?;
    let ss = scale.to_f64()?;
    let zs = zero_points(zp, scale)?;
    let prec = p
        .precision
        .unwrap_or_else(|| promote(x.dtype(), scale.dtype()));
    let shape = x.shape().to_vec();
    let q = |i: usize| round_to(prec, round_to(prec, xs[i]) / round_to(prec, ss[map[i]]));
    if let Some((lo, hi)) = out.int_range() {
        let (lo, hi) = (lo as f64, hi as f64);
        let v: Vec<i64> = (0..xs.len())
            .map(|i| {
                let z = zs.as_ref().map_or(0.0, |z| z[map[i]]);
                let r = q(i).round_ties_even() + z;
                if r.is_nan() {
                    0
                } else {
                    r.clamp(lo, hi) as i64
                }
            })
            .collect();
        return Tensor::from_i64(out, shape, &v);
    }
    match out {
        DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ => {
            let v = (0..xs.len())
                .map(|i| lowp::encode(out, q(i) as f32, p.saturate))
                .collect();
            Tensor::new(out, shape, Data::U8(v))
        }
        DType::F4E2M1 => {
            let v = (0..xs.len())
                .map(|i| {
                    let z = zs.as_ref().map_or(0.0, |z| z[map[i]]);
                    let r = if z != 0.0 { q(i) + z } else { q(i) };
                    lowp::encode(out, r as f32, true)
                })
                .collect();
            Tensor::new(out, shape, Data::U8(v))
        }
        _ => bail!(Unsupported, "QuantizeLinear cannot produce {out}"),
    }
}

/// DequantizeLinear.
pub fn dequantize(
    x: &Tensor,
    scale: &Tensor,
    zp: Option<&Tensor>,
    axis: i64,
    block: i64,
    output_dtype: Option<DType>,
) -> Result<Tensor> {
    let xd = x.dtype();
    ensure!(
        xd.is_int() || xd.is_low_precision_float(),
        Unsupported,
        "DequantizeLinear input must be quantized, got {xd}"
    );
    let out = output_dtype.unwrap_or(match scale.dtype() {
        d @ (DType::F32 | DType::F16 | DType::BF16 | DType::F64) => d,
        _ => DType::F32,
    });
    let map = param_map(x.shape(), scale.shape(), axis, block)?;
    let xs = x.to_f64()?;
    let ss = scale.to_f64()?;
    // Float8/float4 zero points must be zero and are ignored (as in the ONNX reference).
    let zs = if xd.is_low_precision_float() {
        None
    } else {
        if let Some(z) = zp {
            ensure!(
                z.dtype() == xd,
                InvalidModel,
                "zero point type {} differs from the input type {xd}",
                z.dtype()
            );
        }
        zero_points(zp, scale)?
    };
    let v: Vec<f64> = (0..xs.len())
        .map(|i| {
            let z = zs.as_ref().map_or(0.0, |z| z[map[i]]);
            let dx = round_to(DType::F32, xs[i] - z);
            if out == DType::F64 {
                dx * ss[map[i]]
            } else {
                round_to(DType::F32, dx * ss[map[i]])
            }
        })
        .collect();
    Tensor::from_f64(out, x.shape().to_vec(), &v)
}

/// DynamicQuantizeLinear (u8): outputs y, y_scale, y_zero_point, computed in f32 as the
/// ONNX reference does.
fn dynamic_quantize(x: &Tensor) -> Result<Vec<Value>> {
    ensure!(
        x.dtype().is_float(),
        Unsupported,
        "DynamicQuantizeLinear input must be float, got {}",
        x.dtype()
    );
    let xs: Vec<f32> = x.to_f64()?.into_iter().map(|v| v as f32).collect();
    let (mut lo, mut hi) = (0f32, 0f32);
    for &v in &xs {
        if v < lo {
            lo = v;
        }
        if v > hi {
            hi = v;
        }
    }
    // An all-zero input gets scale 1 (as onnxruntime does) rather than a zero scale.
    let scale = if hi == lo {
        1.0f32
    } else {
        (hi - lo) / 255.0f32
    };
    let zp = (0.0f32 - lo / scale).clamp(0.0, 255.0).round_ties_even();
    let y: Vec<u8> = xs
        .iter()
        .map(|&v| ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0) as u8)
        .collect();
    let scale_t = Tensor::from_f64(x.dtype(), vec![], &[scale as f64])?;
    Ok(vec![
        Value::Tensor(Tensor::new(
            DType::U8,
            x.shape().to_vec(),
            Data::U8(y.into()),
        )?),
        Value::Tensor(scale_t),
        Value::Tensor(Tensor::new(
            DType::U8,
            vec![],
            Data::U8(vec![zp as u8].into()),
        )?),
    ])
}

/// Integer values of a quantized tensor as i32 (u8/i8/u16/i16/i32 and 4/2-bit types).
fn int_values(t: &Tensor, what: &str) -> Result<Vec<i32>> {
    match t.data() {
        Data::U8(v) if !t.dtype().is_low_precision_float() => {
            Ok(v.iter().map(|&x| x as i32).collect())
        }
        Data::I8(v) => Ok(v.iter().map(|&x| x as i32).collect()),
        Data::U16(v) => Ok(v.iter().map(|&x| x as i32).collect()),
        Data::I16(v) => Ok(v.iter().map(|&x| x as i32).collect()),
        Data::I32(v) => Ok(v.to_vec()),
        _ => bail!(
            Unsupported,
            "{what} must be an 8/16-bit integer tensor, got {}",
            t.dtype()
        ),
    }
}

/// Saturates rounded real values into an integer output type.
fn saturate_to(out: DType, shape: Vec<usize>, v: &[f64]) -> Result<Tensor> {
    let Some((lo, hi)) = out.int_range() else {
        bail!(
            Unsupported,
            "output zero point must be an integer type, got {out}"
        )
    };
    let (lo, hi) = (lo as f64, hi as f64);
    let q: Vec<i64> = v
        .iter()
        .map(|&r| {
            if r.is_nan() {
                0
            } else {
                r.round_ties_even().clamp(lo, hi) as i64
            }
        })
        .collect();
    Tensor::from_i64(out, shape, &q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(out: Option<DType>) -> QuantParams {
        QuantParams {
            axis: 1,
            block_size: 0,
            output_dtype: out,
            saturate: true,
            precision: None,
        }
    }

    #[test]
    fn quantize_rounds_half_even_and_saturates() {
        let x = Tensor::from_f32(vec![5], vec![0.5, 1.5, 2.5, 1000.0, -3.0]).unwrap();
        let s = Tensor::from_f32(vec![], vec![1.0]).unwrap();
        let y = quantize(&x, &s, None, &params(None)).unwrap();
        assert_eq!(y.to_i64().unwrap(), vec![0, 2, 2, 255, 0]);
        let y = quantize(&x, &s, None, &params(Some(DType::I4))).unwrap();
        assert_eq!(y.to_i64().unwrap(), vec![0, 2, 2, 7, -3]);
    }

    #[test]
    fn blocked_map() {
        let m = param_map(&[2, 5], &[2, 3], 1, 2).unwrap();
        assert_eq!(m, vec![0, 0, 1, 1, 2, 3, 3, 4, 4, 5]);
        assert!(param_map(&[2, 5], &[2, 2], 1, 2).is_err());
    }

    #[test]
    fn dequantize_per_axis() {
        let x = Tensor::from_i64(DType::U8, vec![2, 2], &[10, 20, 30, 40]).unwrap();
        let s = Tensor::from_f32(vec![2], vec![0.5, 2.0]).unwrap();
        let z = Tensor::from_i64(DType::U8, vec![2], &[10, 0]).unwrap();
        let y = dequantize(&x, &s, Some(&z), 0, 0, None).unwrap();
        assert_eq!(y.to_f64().unwrap(), vec![0.0, 5.0, 60.0, 80.0]);
    }

    #[test]
    fn dynamic_quantize_basic() {
        let x = Tensor::from_f32(vec![3], vec![0.0, 2.0, -3.0]).unwrap();
        let out = dynamic_quantize(&x).unwrap();
        let zp = out[2].tensor().unwrap().to_i64().unwrap();
        assert_eq!(zp, vec![153]);
    }
}
