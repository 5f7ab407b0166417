//! Element types: every ONNX tensor element type, with its ONNX code and name.

use serde::{Deserialize, Serialize};

/// A tensor element type. Sub-byte and float8 types are held one element per byte in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 8-bit unsigned integer.
    U8,
    /// 8-bit signed integer.
    I8,
    /// 16-bit unsigned integer.
    U16,
    /// 16-bit signed integer.
    I16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// UTF-8 string (bytes in ONNX; we keep valid UTF-8 or lossy).
    Str,
    /// Boolean.
    Bool,
    /// 16-bit IEEE float.
    F16,
    /// 64-bit IEEE float.
    F64,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit unsigned integer.
    U64,
    /// Complex with f32 parts.
    C64,
    /// Complex with f64 parts.
    C128,
    /// bfloat16.
    BF16,
    /// float8 e4m3, finite only (no infinities).
    F8E4M3FN,
    /// float8 e4m3, finite, no negative zero.
    F8E4M3FNUZ,
    /// float8 e5m2.
    F8E5M2,
    /// float8 e5m2, finite, no negative zero.
    F8E5M2FNUZ,
    /// 4-bit unsigned integer.
    U4,
    /// 4-bit signed integer.
    I4,
    /// float4 e2m1.
    F4E2M1,
    /// float8 e8m0 (power-of-two scale).
    F8E8M0,
    /// 2-bit unsigned integer.
    U2,
    /// 2-bit signed integer.
    I2,
}

/// All element types, in ONNX code order.
pub const ALL_DTYPES: [DType; 26] = [
    DType::F32,
    DType::U8,
    DType::I8,
    DType::U16,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::Str,
    DType::Bool,
    DType::F16,
    DType::F64,
    DType::U32,
    DType::U64,
    DType::C64,
    DType::C128,
    DType::BF16,
    DType::F8E4M3FN,
    DType::F8E4M3FNUZ,
    DType::F8E5M2,
    DType::F8E5M2FNUZ,
    DType::U4,
    DType::I4,
    DType::F4E2M1,
    DType::F8E8M0,
    DType::U2,
    DType::I2,
];

impl DType {
    /// The ONNX `TensorProto.DataType` code.
    pub fn onnx_code(self) -> i32 {
        ALL_DTYPES
            .iter()
            .position(|d| *d == self)
            .map(|i| i as i32 + 1)
            .unwrap_or(0)
    }

    /// The type for an ONNX `TensorProto.DataType` code, if known.
    pub fn from_onnx_code(code: i32) -> Option<DType> {
        if code < 1 {
            return None;
        }
        ALL_DTYPES.get(code as usize - 1).copied()
    }

    /// Short name used in the text IR and the command line (`f32`, `i64`, `f8e4m3fn`, ...).
    pub fn name(self) -> &'static str {
        use DType::*;
        match self {
            F32 => "f32",
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            I32 => "i32",
            I64 => "i64",
            Str => "str",
            Bool => "bool",
            F16 => "f16",
            F64 => "f64",
            U32 => "u32",
            U64 => "u64",
            C64 => "c64",
            C128 => "c128",
            BF16 => "bf16",
            F8E4M3FN => "f8e4m3fn",
            F8E4M3FNUZ => "f8e4m3fnuz",
            F8E5M2 => "f8e5m2",
            F8E5M2FNUZ => "f8e5m2fnuz",
            U4 => "u4",
            I4 => "i4",
            F4E2M1 => "f4e2m1",
            F8E8M0 => "f8e8m0",
            U2 => "u2",
            I2 => "i2",
        }
    }

    /// Parses a short name as printed by [`DType::name`].
    pub fn from_name(s: &str) -> Option<DType> {
        ALL_DTYPES.iter().copied().find(|d| d.name() == s)
    }

    /// Size of one element in bits as ONNX packs it (strings report 0).
    pub fn bits(self) -> usize {
        use DType::*;
        match self {
            Bool | U8 | I8 | F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F8E8M0 => 8,
            U16 | I16 | F16 | BF16 => 16,
            F32 | I32 | U32 => 32,
            F64 | I64 | U64 | C64 => 64,
            C128 => 128,
            U4 | I4 | F4E2M1 => 4,
            U2 | I2 => 2,
            Str => 0,
        }
    }

    /// Bytes one element takes in a [`crate::Tensor`] (sub-byte types take a whole byte;
    /// strings report 0: they never live in flat storage).
    pub fn storage_size(self) -> usize {
        match self {
            DType::Str => 0,
            d => d.bits().div_ceil(8),
        }
    }

    /// True for real floating-point types (f16, bf16, f32, f64 and the float8/float4 types).
    pub fn is_float(self) -> bool {
        use DType::*;
        matches!(
            self,
            F16 | BF16 | F32 | F64 | F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F4E2M1 | F8E8M0
        )
    }

    /// True for integer types, signed or unsigned, of any width.
    pub fn is_int(self) -> bool {
        use DType::*;
        matches!(
            self,
            U8 | I8 | U16 | I16 | I32 | I64 | U32 | U64 | U4 | I4 | U2 | I2
        )
    }

    /// True for signed integer types.
    pub fn is_signed_int(self) -> bool {
        use DType::*;
        matches!(self, I8 | I16 | I32 | I64 | I4 | I2)
    }

    /// True for the float8/float4 types stored as raw codes.
    pub fn is_low_precision_float(self) -> bool {
        use DType::*;
        matches!(
            self,
            F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F4E2M1 | F8E8M0
        )
    }

    /// True for complex types.
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }

    /// The inclusive value range of an integer type, as i128.
    pub fn int_range(self) -> Option<(i128, i128)> {
        use DType::*;
        Some(match self {
            U8 => (0, u8::MAX as i128),
            I8 => (i8::MIN as i128, i8::MAX as i128),
            U16 => (0, u16::MAX as i128),
            I16 => (i16::MIN as i128, i16::MAX as i128),
            I32 => (i32::MIN as i128, i32::MAX as i128),
            I64 => (i64::MIN as i128, i64::MAX as i128),
            U32 => (0, u32::MAX as i128),
            U64 => (0, u64::MAX as i128),
            U4 => (0, 15),
            I4 => (-8, 7),
            U2 => (0, 3),
            I2 => (-2, 1),
            Bool => (0, 1),
            _ => return None,
        })
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for d in ALL_DTYPES {
            assert_eq!(DType::from_onnx_code(d.onnx_code()), Some(d));
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        assert_eq!(DType::F32.onnx_code(), 1);
        assert_eq!(DType::BF16.onnx_code(), 16);
        assert_eq!(DType::I2.onnx_code(), 26);
        assert_eq!(DType::from_onnx_code(0), None);
        assert_eq!(DType::from_onnx_code(99), None);
    }
}
