//! Float8, float4 and e8m0 codes: decoding to f32 and encoding with round-to-nearest-even.

use crate::DType;

/// Layout of a small float format.
struct Format {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    /// Code of NaN (positive), if any.
    nan: Option<u8>,
    /// The format has IEEE-style infinities (all-ones exponent, zero mantissa).
    ieee_specials: bool,
    /// Negative zero code is NaN (the FNUZ formats).
    uz: bool,
}

fn format(d: DType) -> Option<Format> {
    Some(match d {
        DType::F8E4M3FN => Format {
            exp_bits: 4,
            man_bits: 3,
            bias: 7,
            nan: Some(0x7f),
            ieee_specials: false,
            uz: false,
        },
        DType::F8E4M3FNUZ => Format {
            exp_bits: 4,
            man_bits: 3,
            bias: 8,
            nan: Some(0x80),
            ieee_specials: false,
            uz: true,
        },
        DType::F8E5M2 => Format {
            exp_bits: 5,
            man_bits: 2,
            bias: 15,
            nan: Some(0x7e),
            ieee_specials: true,
            uz: false,
        },
        DType::F8E5M2FNUZ => Format {
            exp_bits: 5,
            man_bits: 2,
            bias: 16,
            nan: Some(0x80),
            ieee_specials: false,
            uz: true,
        },
        DType::F4E2M1 => Format {
            exp_bits: 2,
            man_bits: 1,
            bias: 1,
            nan: None,
            ieee_specials: false,
            uz: false,
        },
        _ => return None,
    })
}

/// Decodes one code of a float8/float4/e8m0 type to f32.
pub fn decode(d: DType, code: u8) -> f32 {
    if d == DType::F8E8M0 {
        return if code == 0xff {
            f32::NAN
        } else {
            2f32.powi(code as i32 - 127)
        };
    }
    let Some(f) = format(d) else { return f32::NAN };
    let total = 1 + f.exp_bits + f.man_bits;
    let code = code & ((1u16 << total) - 1) as u8;
    if f.uz && code == 0x80 {
        return f32::NAN;
    }
    let sign = (code >> (total - 1)) & 1;
    let e = ((code >> f.man_bits) & ((1 << f.exp_bits) - 1)) as i32;
    let m = (code & ((1 << f.man_bits) - 1)) as i32;
    let max_e = (1 << f.exp_bits) - 1;
    let mag = if f.ieee_specials && e == max_e {
        if m == 0 {
            f32::INFINITY
        } else {
            f32::NAN
        }
    } else if !f.uz
        && !f.ieee_specials
        && f.nan.is_some()
        && e == max_e
        && m == (1 << f.man_bits) - 1
    {
        f32::NAN
    } else if e == 0 {
        m as f32 * 2f32.powi(1 - f.bias - f.man_bits as i32)
    } else {
        (1.0 + m as f32 / (1 << f.man_bits) as f32) * 2f32.powi(e - f.bias)
    };
    if sign == 1 {
        -mag
    } else {
        mag
    }
}

/// Encodes an f32 into a float8/float4/e8m0 code, rounding to nearest even.
/// With `saturate`, values beyond the largest finite value clamp to it (infinities too);
/// otherwise they become NaN (or infinity where the format has one).
pub fn encode(d: DType, x: f32, saturate: bool) -> u8 {
    if d == DType::F8E8M0 {
        return encode_e8m0(x);
    }
    let Some(f) = format(d) else { return 0 };
    let total = 1 + f.exp_bits + f.man_bits;
    let sign_bit = 1u8 << (total - 1);
    let nan_code = f.nan.unwrap_or(0);
    if x.is_nan() {
        return f.nan.unwrap_or(0);
    }
    let neg = x.is_sign_negative();
    let a = x.abs();
    // Positive codes in increasing order of value: walk all codes without the sign bit.
    let n_pos = sign_bit as u16;
    let mut best: u8 = 0;
    let mut prev_val = 0f32;
    let mut max_code = 0u8;
    let mut max_val = 0f32;
    for c in 0..n_pos {
        let v = decode(d, c as u8);
        if v.is_finite() && v >= max_val {
            max_val = v;
            max_code = c as u8;
        }
    }
    if a > max_val {
        let step = max_val - decode(d, max_code - 1);
        let rounds_to_max = a.is_finite() && a < max_val + step / 2.0;
        let code = if saturate || rounds_to_max {
            max_code
        } else if f.ieee_specials {
            (((1u16 << f.exp_bits) - 1) << f.man_bits) as u8
        } else if f.nan.is_none() {
            max_code
        } else {
            return nan_code;
        };
        return if neg && !(f.uz && code == 0) {
            code | sign_bit
        } else {
            code
        };
    }
    for c in 0..=max_code {
        let v = decode(d, c);
        if v >= a {
            if c == 0 {
                best = 0;
            } else {
                let lo = prev_val;
                let dl = a - lo;
                let dh = v - a;
                best = if dl < dh || (dl == dh && (c - 1) % 2 == 0) {
                    c - 1
                } else {
                    c
                };
            }
            break;
        }
        prev_val = v;
    }
    if best == 0 && (f.uz || !neg) {
        return 0;
    }
    if neg {
        best | sign_bit
    } else {
        best
    }
}

fn encode_e8m0(x: f32) -> u8 {
    if x.is_nan() || x < 0.0 && x.is_infinite() {
        return 0xff;
    }
    let a = x.abs();
    if a == 0.0 {
        return 0;
    }
    if a.is_infinite() {
        return 0xfe;
    }
    // Round up to the next power of two (the spec's default round_mode "up").
    let e = a.log2().ceil() as i32;
    (e + 127).clamp(0, 254) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3fn_extremes() {
        assert_eq!(decode(DType::F8E4M3FN, 0x7e), 448.0);
        assert!(decode(DType::F8E4M3FN, 0x7f).is_nan());
        assert_eq!(encode(DType::F8E4M3FN, 448.0, true), 0x7e);
        assert_eq!(encode(DType::F8E4M3FN, 1e6, true), 0x7e);
        assert_eq!(encode(DType::F8E4M3FN, -1e6, true), 0xfe);
        assert_eq!(encode(DType::F8E4M3FN, 1.0, true), 0x38);
    }

    #[test]
    fn round_trip_all_codes() {
        for d in [
            DType::F8E4M3FN,
            DType::F8E4M3FNUZ,
            DType::F8E5M2,
            DType::F8E5M2FNUZ,
        ] {
            for c in 0..=255u8 {
                let v = decode(d, c);
                if v.is_finite() && !(v == 0.0 && c != 0) {
                    assert_eq!(encode(d, v, false), c, "{d} code {c:#x} value {v}");
                }
            }
        }
    }

    #[test]
    fn e5m2_has_infinity() {
        assert_eq!(decode(DType::F8E5M2, 0x7c), f32::INFINITY);
        assert_eq!(decode(DType::F8E5M2, 0x7b), 57344.0);
        assert_eq!(decode(DType::F4E2M1, 0x7), 6.0);
    }
}
