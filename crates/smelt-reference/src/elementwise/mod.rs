//! Reference kernels of the elementwise op family.
//!
//! Floats compute through f64 and round to the output type, with f32 storage kept for the
//! common f32 cases; integers compute exactly through i128 and wrap to their width like C.

mod bcast;
mod binary;
mod cast;
mod unary;

use super::{one, Ctx, Inputs};
use smelt_ir::op::ElementwiseOp as E;
use smelt_ir::{bail, ensure, DType, Data, Result, Tensor, Value};

pub use cast::cast;
pub use unary::erf;

/// Runs one op of the family.
pub fn run(op: &E, x: &Inputs, _cx: &Ctx) -> Result<Vec<Value>> {
    match op {
        E::Add
        | E::Sub
        | E::Mul
        | E::Div
        | E::Pow
        | E::Mod { .. }
        | E::BitShift { .. }
        | E::BitwiseAnd
        | E::BitwiseOr
        | E::BitwiseXor
        | E::Equal
        | E::Less
        | E::LessOrEqual
        | E::Greater
        | E::GreaterOrEqual
        | E::And
        | E::Or
        | E::Xor
        | E::PRelu => one(binary::binary(op, x.tensor(0)?, x.tensor(1)?)?),
        E::LegacyBroadcast { op, axis } => {
            let (a, b) = (x.tensor(0)?, x.tensor(1)?);
            let ra = a.rank() as i64;
            let ax = if *axis < 0 { axis + ra } else { *axis };
            let rb = b.rank() as i64;
            ensure!(
                ax >= 0 && ax + rb <= ra,
                InvalidModel,
                "axis {axis} does not place a rank-{rb} operand inside rank {ra}"
            );
            let mut shape = b.shape().to_vec();
            shape.resize((ra - ax) as usize, 1);
            let b2 = b.clone().reshape(shape)?;
            one(binary::binary(op, a, &b2)?)
        }
        E::Sum | E::Mean | E::Max | E::Min => one(binary::variadic(op, x)?),
        E::Where => one(binary::where_(x.tensor(0)?, x.tensor(1)?, x.tensor(2)?)?),
        E::Clip { min, max } => one(unary::clip(x, *min, *max)?),
        E::Cast {
            to,
            saturate,
            round_mode,
        } => one(cast::cast(x.tensor(0)?, *to, *saturate, *round_mode)?),
        E::BitCast { to } => one(cast::bitcast(x.tensor(0)?, *to)?),
        E::CastLike {
            saturate,
            round_mode,
        } => one(cast::cast(
            x.tensor(0)?,
            x.tensor(1)?.dtype(),
            *saturate,
            *round_mode,
        )?),
        _ => one(unary::unary(op, x.tensor(0)?)?),
    }
}

/// The elements of an integer or bool tensor, exactly.
pub(crate) fn ints(t: &Tensor) -> Result<Vec<i128>> {
    Ok(match t.data() {
        Data::I8(v) => v.iter().map(|&x| x as i128).collect(),
        Data::I16(v) => v.iter().map(|&x| x as i128).collect(),
        Data::I32(v) => v.iter().map(|&x| x as i128).collect(),
        Data::I64(v) => v.iter().map(|&x| x as i128).collect(),
        Data::U8(v) if !t.dtype().is_low_precision_float() => {
            v.iter().map(|&x| x as i128).collect()
        }
        Data::U16(v) => v.iter().map(|&x| x as i128).collect(),
        Data::U32(v) => v.iter().map(|&x| x as i128).collect(),
        Data::U64(v) => v.iter().map(|&x| x as i128).collect(),
        Data::Bool(v) => v.iter().map(|&x| x as i128).collect(),
        _ => bail!(Unsupported, "expected integer elements, got {}", t.dtype()),
    })
}

/// Wraps an exact integer to the width of an integer type (two's complement), like a C cast.
pub(crate) fn wrap(dtype: DType, x: i128) -> i128 {
    use DType::*;
    match dtype {
        I8 => x as i8 as i128,
        I16 => x as i16 as i128,
        I32 => x as i32 as i128,
        I64 => x as i64 as i128,
        U8 => x as u8 as i128,
        U16 => x as u16 as i128,
        U32 => x as u32 as i128,
        U64 => x as u64 as i128,
        I4 => ((x as i8) << 4 >> 4) as i128,
        I2 => ((x as i8) << 6 >> 6) as i128,
        U4 => x & 0xf,
        U2 => x & 0x3,
        Bool => (x != 0) as i128,
        _ => x,
    }
}

/// An integer (or bool) tensor from exact values, each wrapped to the type's width.
pub(crate) fn from_ints(dtype: DType, shape: Vec<usize>, v: &[i128]) -> Result<Tensor> {
    use DType::*;
    let data = match dtype {
        I8 | I4 | I2 => Data::I8(v.iter().map(|&x| wrap(dtype, x) as i8).collect()),
        I16 => Data::I16(v.iter().map(|&x| x as i16).collect()),
        I32 => Data::I32(v.iter().map(|&x| x as i32).collect()),
        I64 => Data::I64(v.iter().map(|&x| x as i64).collect()),
        U8 | U4 | U2 => Data::U8(v.iter().map(|&x| wrap(dtype, x) as u8).collect()),
        U16 => Data::U16(v.iter().map(|&x| x as u16).collect()),
        U32 => Data::U32(v.iter().map(|&x| x as u32).collect()),
        U64 => Data::U64(v.iter().map(|&x| x as u64).collect()),
        Bool => Data::Bool(v.iter().map(|&x| x != 0).collect()),
        _ => bail!(Unsupported, "cannot build {dtype} elements from integers"),
    };
    Tensor::new(dtype, shape, data)
}

/// A float truncated toward zero into integer type `to`, as numpy does on x86-64 (the same
/// instruction sequences C compilers emit): in range it is exact (then wraps to the width);
/// out of range or NaN gives the "integer indefinite" pattern of the conversion used: the
/// most negative i32 or i64, through i32 for types narrower than 32 bits, and for u32/u64
/// a signed conversion of `x - 2^(w-1)` with the top bit flipped when `x >= 2^(w-1)`.
pub(crate) fn float_to_int(to: DType, x: f64) -> i128 {
    use DType::*;
    fn signed(t: f64, bits: u32) -> i128 {
        let lim = 2f64.powi(bits as i32 - 1);
        if (-lim..lim).contains(&t) {
            t as i128
        } else {
            -(1i128 << (bits - 1))
        }
    }
    fn unsigned(t: f64, bits: u32) -> i128 {
        let half = 2f64.powi(bits as i32 - 1);
        if t >= half {
            signed(t - half, bits) ^ (1i128 << (bits - 1))
        } else {
            signed(t, bits)
        }
    }
    let t = x.trunc();
    let v = match to {
        Bool => return (x != 0.0) as i128,
        I64 => signed(t, 64),
        U64 => unsigned(t, 64),
        U32 => unsigned(t, 32),
        _ => signed(t, 32),
    };
    wrap(to, v)
}

/// True for types computed as integers here (integers of any width and bool).
pub(crate) fn is_intlike(d: DType) -> bool {
    d.is_int() || d == DType::Bool
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_like_c() {
        assert_eq!(wrap(DType::I8, 200), -56);
        assert_eq!(wrap(DType::I4, -9), 7);
        assert_eq!(wrap(DType::U2, -3), 1);
        assert_eq!(wrap(DType::U64, -1), u64::MAX as i128);
        assert_eq!(float_to_int(DType::U8, -3.7), 253);
        assert_eq!(float_to_int(DType::I8, 1e30), 0);
        assert_eq!(float_to_int(DType::I32, f64::NAN), i32::MIN as i128);
        assert_eq!(float_to_int(DType::U32, f64::NAN), 1 << 31);
        assert_eq!(float_to_int(DType::U32, f64::INFINITY), 0);
        assert_eq!(float_to_int(DType::U32, 3e9), 3_000_000_000);
        assert_eq!(
            float_to_int(DType::U64, -3e9),
            (u64::MAX - 2_999_999_999) as i128
        );
        assert_eq!(float_to_int(DType::U64, 1e19), 10_000_000_000_000_000_000);
    }
}
