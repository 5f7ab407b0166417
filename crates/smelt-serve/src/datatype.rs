//! The protocol's tensor datatypes (`FP32`, `INT64`, `BYTES`, ...) and smelt's element types.

use smelt_ir::DType;

/// The protocol's name of an element type, if the protocol has one.
pub fn name(d: DType) -> Option<&'static str> {
    use DType::*;
    Some(match d {
        Bool => "BOOL",
        U8 => "UINT8",
        U16 => "UINT16",
        U32 => "UINT32",
        U64 => "UINT64",
        I8 => "INT8",
        I16 => "INT16",
        I32 => "INT32",
        I64 => "INT64",
        F16 => "FP16",
        F32 => "FP32",
        F64 => "FP64",
        BF16 => "BF16",
        Str => "BYTES",
        _ => return None,
    })
}

/// The element type of a protocol datatype name.
pub fn parse(s: &str) -> Option<DType> {
    use DType::*;
    Some(match s {
        "BOOL" => Bool,
        "UINT8" => U8,
        "UINT16" => U16,
        "UINT32" => U32,
        "UINT64" => U64,
        "INT8" => I8,
        "INT16" => I16,
        "INT32" => I32,
        "INT64" => I64,
        "FP16" => F16,
        "FP32" => F32,
        "FP64" => F64,
        "BF16" => BF16,
        "BYTES" => Str,
        _ => return None,
    })
}

/// The element type of a config.pbtxt `data_type` (`TYPE_FP32`, `TYPE_STRING`, ...).
pub fn parse_config(s: &str) -> Option<DType> {
    match s {
        "TYPE_STRING" => Some(DType::Str),
        _ => parse(s.strip_prefix("TYPE_")?),
    }
}

/// The config.pbtxt / ModelConfig enum value of an element type (`TYPE_INVALID` is 0).
pub fn config_code(d: DType) -> i32 {
    use DType::*;
    match d {
        Bool => 1,
        U8 => 2,
        U16 => 3,
        U32 => 4,
        U64 => 5,
        I8 => 6,
        I16 => 7,
        I32 => 8,
        I64 => 9,
        F16 => 10,
        F32 => 11,
        F64 => 12,
        Str => 13,
        BF16 => 14,
        _ => 0,
    }
}

/// Bytes per element in the raw (binary) form; None for BYTES, whose elements vary.
pub fn element_bytes(d: DType) -> Option<usize> {
    match d {
        DType::Str => None,
        DType::Bool => Some(1),
        d => Some(d.bits() / 8),
    }
}

/// The error for an output whose type the protocol cannot carry (complex numbers).
pub fn no_datatype(dtype: DType) -> crate::error::ServeError {
    crate::error::ServeError::internal(format!("{dtype} outputs have no protocol datatype"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in smelt_ir::dtype::ALL_DTYPES {
            if let Some(n) = name(d) {
                assert_eq!(parse(n), Some(d));
                assert_ne!(config_code(d), 0);
            }
        }
        assert_eq!(parse_config("TYPE_FP32"), Some(DType::F32));
        assert_eq!(parse_config("TYPE_STRING"), Some(DType::Str));
        assert_eq!(element_bytes(DType::I64), Some(8));
        assert_eq!(parse("FP8"), None);
    }
}
