//! Cast between element types: floats (including f16/bf16, float8, float4, e8m0), integers of
//! every width, bool and strings (numbers printed and parsed as numpy does).

use super::{float_to_int, from_ints, ints, is_intlike};
use half::{bf16, f16};
use smelt_ir::op::elementwise::E8M0Rounding;
use smelt_ir::{bail, ensure, err, lowp, DType, Data, Result, Tensor};

/// Converts a tensor to `to`; `saturate` and `round_mode` apply to float8 and e8m0 targets.
pub fn cast(t: &Tensor, to: DType, saturate: bool, round_mode: E8M0Rounding) -> Result<Tensor> {
    let from = t.dtype();
    let shape = t.shape().to_vec();
    if from == to {
        return Ok(t.clone());
    }
    if from.is_complex() || to.is_complex() {
        bail!(Unsupported, "Cast from {from} to {to} is not supported");
    }
    if to == DType::Str {
        return Tensor::from_strings(shape, to_strings(t)?);
    }
    if let Data::Str(v) = t.data() {
        return from_strings(v, to, shape, saturate, round_mode);
    }
    if to == DType::Bool {
        return Tensor::from_bools(shape, t.to_bool()?);
    }
    if to.is_int() {
        let v: Vec<i128> = if is_intlike(from) {
            ints(t)?
        } else {
            t.to_f64()?
                .into_iter()
                .map(|x| float_to_int(to, x))
                .collect()
        };
        return from_ints(to, shape, &v);
    }
    // Float targets.
    if to.is_low_precision_float() {
        let v = f32_values(t)?;
        return Tensor::new(
            to,
            shape,
            Data::U8(
                v.into_iter()
                    .map(|x| encode(to, x, saturate, round_mode))
                    .collect(),
            ),
        );
    }
    if is_intlike(from) {
        let v = ints(t)?;
        let data = match to {
            DType::F32 => Data::F32(v.iter().map(|&x| x as f32).collect()),
            DType::F64 => Data::F64(v.iter().map(|&x| x as f64).collect()),
            DType::F16 => Data::F16(v.iter().map(|&x| f16::from_f32(x as f32)).collect()),
            DType::BF16 => Data::BF16(v.iter().map(|&x| bf16::from_f32(x as f32)).collect()),
            _ => bail!(Unsupported, "Cast from {from} to {to} is not supported"),
        };
        return Tensor::new(to, shape, data);
    }
    let data = match (t.data(), to) {
        (Data::F64(v), DType::F32) => Data::F32(v.iter().map(|&x| x as f32).collect()),
        (Data::F16(v), DType::F32) => Data::F32(v.iter().map(|x| x.to_f32()).collect()),
        (Data::BF16(v), DType::F32) => Data::F32(v.iter().map(|x| x.to_f32()).collect()),
        (Data::F32(v), DType::F16) => Data::F16(v.iter().map(|&x| f16::from_f32(x)).collect()),
        (Data::F32(v), DType::BF16) => Data::BF16(v.iter().map(|&x| bf16::from_f32(x)).collect()),
        _ => return Tensor::from_f64(to, shape, &t.to_f64()?),
    };
    Tensor::new(to, shape, data)
}

/// BitCast: the same bits read as another type of the same width.
pub fn bitcast(t: &Tensor, to: DType) -> Result<Tensor> {
    let from = t.dtype();
    ensure!(
        from != DType::Str && to != DType::Str && from.bits() == to.bits(),
        InvalidModel,
        "BitCast from {from} to {to}: both types must be non-string and of the same width"
    );
    if from == to {
        return Ok(t.clone());
    }
    // Every element as its raw bits, then rebuilt.
    let bits: Vec<u128> = match t.data() {
        Data::F32(v) => v.iter().map(|x| x.to_bits() as u128).collect(),
        Data::F64(v) => v.iter().map(|x| x.to_bits() as u128).collect(),
        Data::F16(v) => v.iter().map(|x| x.to_bits() as u128).collect(),
        Data::BF16(v) => v.iter().map(|x| x.to_bits() as u128).collect(),
        Data::I8(v) => v.iter().map(|&x| x as u8 as u128).collect(),
        Data::I16(v) => v.iter().map(|&x| x as u16 as u128).collect(),
        Data::I32(v) => v.iter().map(|&x| x as u32 as u128).collect(),
        Data::I64(v) => v.iter().map(|&x| x as u64 as u128).collect(),
        Data::U8(v) => v.iter().map(|&x| x as u128).collect(),
        Data::U16(v) => v.iter().map(|&x| x as u128).collect(),
        Data::U32(v) => v.iter().map(|&x| x as u128).collect(),
        Data::U64(v) => v.iter().map(|&x| x as u128).collect(),
        Data::Bool(v) => v.iter().map(|&x| x as u128).collect(),
        Data::C64(v) => v
            .iter()
            .map(|x| x[0].to_bits() as u128 | (x[1].to_bits() as u128) << 32)
            .collect(),
        Data::C128(v) => v
            .iter()
            .map(|x| x[0].to_bits() as u128 | (x[1].to_bits() as u128) << 64)
            .collect(),
        Data::Str(_) => bail!(Internal, "BitCast of strings"),
    };
    let mask = if to.bits() >= 128 {
        u128::MAX
    } else {
        (1u128 << to.bits()) - 1
    };
    let bits: Vec<u128> = bits.into_iter().map(|b| b & mask).collect();
    let shape = t.shape().to_vec();
    use DType::*;
    let data = match to {
        F32 => Data::F32(bits.iter().map(|&b| f32::from_bits(b as u32)).collect()),
        F64 => Data::F64(bits.iter().map(|&b| f64::from_bits(b as u64)).collect()),
        F16 => Data::F16(bits.iter().map(|&b| f16::from_bits(b as u16)).collect()),
        BF16 => Data::BF16(bits.iter().map(|&b| bf16::from_bits(b as u16)).collect()),
        C64 => Data::C64(
            bits.iter()
                .map(|&b| [f32::from_bits(b as u32), f32::from_bits((b >> 32) as u32)])
                .collect(),
        ),
        C128 => Data::C128(
            bits.iter()
                .map(|&b| [f64::from_bits(b as u64), f64::from_bits((b >> 64) as u64)])
                .collect(),
        ),
        Bool => Data::Bool(bits.iter().map(|&b| b != 0).collect()),
        _ if to.is_low_precision_float() => Data::U8(bits.iter().map(|&b| b as u8).collect()),
        _ => {
            return from_ints(
                to,
                shape,
                &bits.iter().map(|&b| b as i128).collect::<Vec<_>>(),
            )
        }
    };
    Tensor::new(to, shape, data)
}

/// The elements as f32 (the input of float8/float4/e8m0 encoding).
fn f32_values(t: &Tensor) -> Result<Vec<f32>> {
    Ok(match t.data() {
        Data::F32(v) => v.to_vec(),
        Data::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
        Data::BF16(v) => v.iter().map(|x| x.to_f32()).collect(),
        _ if is_intlike(t.dtype()) => ints(t)?.into_iter().map(|x| x as f32).collect(),
        _ => t.to_f64()?.into_iter().map(|x| x as f32).collect(),
    })
}

/// Encodes one value into a float8/float4/e8m0 code.
fn encode(to: DType, x: f32, saturate: bool, rm: E8M0Rounding) -> u8 {
    match to {
        DType::F8E8M0 => encode_e8m0(x, saturate, rm),
        // float4 has no NaN: like ml_dtypes, NaN becomes negative zero.
        DType::F4E2M1 if x.is_nan() => 0x8,
        DType::F4E2M1 => lowp::encode(to, x, true),
        _ => lowp::encode(to, x, saturate),
    }
}

/// e8m0 keeps the f32 exponent (sign dropped) and rounds the mantissa away as asked,
/// as the ONNX reference does.
fn encode_e8m0(x: f32, saturate: bool, rm: E8M0Rounding) -> u8 {
    let bits = x.to_bits();
    let exp = (bits >> 23) & 0xff;
    if exp == 0xff {
        return 0xff;
    }
    let up = match rm {
        E8M0Rounding::Down => false,
        E8M0Rounding::Up => bits & 0x7f_ffff != 0,
        E8M0Rounding::Nearest => {
            let g = bits & 0x40_0000 != 0;
            let r = bits & 0x20_0000 != 0;
            let s = bits & 0x1f_ffff != 0;
            g && (r || s || exp > 0)
        }
    };
    let up = up && !(saturate && exp == 0xfe);
    (exp + up as u32) as u8
}

fn to_strings(t: &Tensor) -> Result<Vec<String>> {
    Ok(match t.data() {
        Data::Bool(v) => v
            .iter()
            .map(|&b| if b { "True" } else { "False" }.to_string())
            .collect(),
        Data::F32(v) => v.iter().map(|&x| fmt_float(x, x as f64)).collect(),
        Data::F16(v) => v
            .iter()
            .map(|x| fmt_short(x.to_f64(), |y| f16::from_f64(y) == *x))
            .collect(),
        Data::BF16(v) => v
            .iter()
            .map(|x| fmt_short(x.to_f64(), |y| bf16::from_f64(y) == *x))
            .collect(),
        Data::F64(v) => v.iter().map(|&x| fmt_float(x, x)).collect(),
        _ if t.dtype().is_low_precision_float() => t
            .to_f64()?
            .into_iter()
            .map(|x| fmt_float(x as f32, x))
            .collect(),
        _ => ints(t)?.into_iter().map(|x| x.to_string()).collect(),
    })
}

/// Formats a value of a narrow float type with the fewest digits that read back as it.
fn fmt_short(v: f64, same: impl Fn(f64) -> bool) -> String {
    if v.is_finite() {
        for p in 0..17 {
            if let Ok(y) = format!("{v:.p$e}").parse::<f64>() {
                if same(y) {
                    return fmt_float(y, y);
                }
            }
        }
    }
    fmt_float(v, v)
}

/// Formats a float as numpy's `str()` does: shortest round-trip digits, positional between
/// 1e-4 and 1e16, scientific (`1e-05`, `1.5e+16`) outside.
fn fmt_float<T: std::fmt::Display + std::fmt::LowerExp>(x: T, v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let s = format!("{x:e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let s = format!("{x}");
    if s.contains('.') {
        s
    } else {
        s + ".0"
    }
}

fn parse_f64(s: &str) -> Result<f64> {
    let t = s.trim();
    let l = t.to_ascii_lowercase();
    match l.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => return Ok(f64::INFINITY),
        "-inf" | "-infinity" => return Ok(f64::NEG_INFINITY),
        "nan" | "+nan" | "-nan" => return Ok(f64::NAN),
        "true" => return Ok(1.0),
        "false" => return Ok(0.0),
        _ => {}
    }
    t.parse::<f64>()
        .map_err(|_| err!(InvalidInput, "Cast: cannot parse '{s}' as a number"))
}

fn from_strings(
    v: &[String],
    to: DType,
    shape: Vec<usize>,
    saturate: bool,
    rm: E8M0Rounding,
) -> Result<Tensor> {
    if to.is_int() || to == DType::Bool {
        let ints: Vec<i128> = v
            .iter()
            .map(|s| match s.trim().parse::<i128>() {
                Ok(i) => Ok(i),
                Err(_) => parse_f64(s).map(|f| {
                    if to == DType::Bool {
                        (f != 0.0) as i128
                    } else {
                        float_to_int(to, f)
                    }
                }),
            })
            .collect::<Result<_>>()?;
        return from_ints(to, shape, &ints);
    }
    let f: Vec<f64> = v.iter().map(|s| parse_f64(s)).collect::<Result<_>>()?;
    let t = Tensor::from_f64(DType::F64, shape, &f)?;
    cast(&t, to, saturate, rm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_like_strings() {
        assert_eq!(fmt_float(1.0f32, 1.0), "1.0");
        assert_eq!(fmt_float(0.1f32, 0.1f32 as f64), "0.1");
        assert_eq!(fmt_float(1e-5f32, 1e-5f32 as f64), "1e-05");
        assert_eq!(fmt_float(1.5e16f64, 1.5e16), "1.5e+16");
        let h = f16::from_f32(-0.1853);
        assert_eq!(fmt_short(h.to_f64(), |y| f16::from_f64(y) == h), "-0.1853");
        assert_eq!(parse_f64("-INF").unwrap(), f64::NEG_INFINITY);
    }

    #[test]
    fn e8m0_rounding() {
        assert_eq!(encode_e8m0(1.1, true, E8M0Rounding::Up), 128);
        assert_eq!(encode_e8m0(1.1, true, E8M0Rounding::Down), 127);
        assert_eq!(encode_e8m0(0.0, true, E8M0Rounding::Up), 0);
        assert_eq!(encode_e8m0(f32::INFINITY, true, E8M0Rounding::Up), 255);
    }

    #[test]
    fn float_to_small_ints_wrap() {
        let t = Tensor::from_f32(vec![3], vec![-9.0, 8.0, 2.7]).unwrap();
        let c = cast(&t, DType::I4, true, E8M0Rounding::Up).unwrap();
        assert_eq!(c.to_i64().unwrap(), vec![7, -8, 2]);
    }
}
