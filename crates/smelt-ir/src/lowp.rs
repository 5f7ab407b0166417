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

/// The decoded values of a float8/float4/e8m0 type's 256 codes, and its largest finite
/// positive code, computed once per type: a cast of millions of elements decoded each
/// code with `powi` and searched all codes to encode each value (seconds).
struct Table {
    vals: [f32; 256],
    max_code: u8,
    max_val: f32,
}

fn table(d: DType) -> Option<&'static Table> {
    use std::sync::OnceLock;
    static TABLES: [OnceLock<Table>; 6] = [const { OnceLock::new() }; 6];
    let i = match d {
        DType::F8E4M3FN => 0,
        DType::F8E4M3FNUZ => 1,
        DType::F8E5M2 => 2,
        DType::F8E5M2FNUZ => 3,
        DType::F4E2M1 => 4,
        DType::F8E8M0 => 5,
        _ => return None,
    };
    Some(TABLES[i].get_or_init(|| {
        let vals: [f32; 256] = std::array::from_fn(|c| decode_code(d, c as u8));
        let (mut max_code, mut max_val) = (0u8, 0f32);
        if let Some(f) = format(d) {
            // Positive codes (no sign bit), in increasing order of value.
            let n_pos = 1usize << (f.exp_bits + f.man_bits);
            for (c, &v) in vals[..n_pos].iter().enumerate() {
                if v.is_finite() && v >= max_val {
                    (max_code, max_val) = (c as u8, v);
                }
            }
        }
        Table {
            vals,
            max_code,
            max_val,
        }
    }))
}

/// Decodes one code of a float8/float4/e8m0 type to f32 (NaN for another type).
pub fn decode(d: DType, code: u8) -> f32 {
    table(d).map_or(f32::NAN, |t| t.vals[code as usize])
}

/// [`decode`] from the format's definition.
fn decode_code(d: DType, code: u8) -> f32 {
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
    let Some(t) = table(d) else { return 0 };
    let (max_code, max_val) = (t.max_code, t.max_val);
    if a > max_val {
        let step = max_val - t.vals[max_code as usize - 1];
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
    // The first positive code whose value reaches `a` (values increase with the code),
    // then the nearer of it and the one below, ties to the even code.
    let pos = &t.vals[..=max_code as usize];
    let c = pos.partition_point(|&v| v < a);
    let best = if c == 0 {
        0
    } else {
        let (lo, hi) = (pos[c - 1], pos[c]);
        let (dl, dh) = (a - lo, hi - a);
        if dl < dh || (dl == dh && (c - 1) % 2 == 0) {
            (c - 1) as u8
        } else {
            c as u8
        }
    };
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
