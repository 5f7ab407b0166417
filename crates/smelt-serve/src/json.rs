//! Tensors in the protocol's JSON form: `data` row-major, flat or nested; numbers for
//! numeric types, booleans for BOOL, strings for BYTES.

use crate::datatype;
use crate::error::{Result, ServeError};
use crate::raw::count;
use half::{bf16, f16};
use serde_json::{Number, Value as Json};
use smelt_ir::{DType, Data, Tensor};

/// Decodes the JSON `data` of tensor `name` of a type and shape.
pub fn decode(name: &str, dtype: DType, shape: Vec<usize>, data: &Json) -> Result<Tensor> {
    let n = count(name, &shape)?;
    let mut flat = Vec::new();
    flatten(data, &mut flat, shape.len() + 1)
        .map_err(|e| ServeError::invalid(format!("input '{name}': {e}")))?;
    if flat.len() != n {
        return Err(ServeError::invalid(format!(
            "input '{name}': {} elements of data, but shape {shape:?} needs {n}",
            flat.len()
        )));
    }
    let bad = |i: usize| {
        ServeError::invalid(format!(
            "input '{name}': element {i} ({}) is not a {} value",
            flat[i],
            datatype::name(dtype).unwrap_or("?")
        ))
    };
    macro_rules! ints {
        ($v:ident, $t:ty) => {
            Data::$v(
                flat.iter()
                    .enumerate()
                    .map(|(i, x)| {
                        int(x)
                            .and_then(|v| <$t>::try_from(v).ok())
                            .ok_or_else(|| bad(i))
                    })
                    .collect::<Result<_>>()?,
            )
        };
    }
    macro_rules! floats {
        ($v:ident, $f:expr) => {
            Data::$v(
                flat.iter()
                    .enumerate()
                    .map(|(i, x)| x.as_f64().map($f).ok_or_else(|| bad(i)))
                    .collect::<Result<_>>()?,
            )
        };
    }
    let data = match dtype {
        DType::Bool => Data::Bool(
            flat.iter()
                .enumerate()
                .map(|(i, x)| x.as_bool().ok_or_else(|| bad(i)))
                .collect::<Result<_>>()?,
        ),
        DType::U8 => ints!(U8, u8),
        DType::I8 => ints!(I8, i8),
        DType::U16 => ints!(U16, u16),
        DType::I16 => ints!(I16, i16),
        DType::U32 => ints!(U32, u32),
        DType::I32 => ints!(I32, i32),
        DType::U64 => ints!(U64, u64),
        DType::I64 => ints!(I64, i64),
        DType::F32 => floats!(F32, |v| v as f32),
        DType::F64 => floats!(F64, |v| v),
        DType::F16 => floats!(F16, f16::from_f64),
        DType::BF16 => floats!(BF16, bf16::from_f64),
        DType::Str => Data::Str(
            flat.iter()
                .enumerate()
                .map(|(i, x)| x.as_str().map(str::to_string).ok_or_else(|| bad(i)))
                .collect::<Result<_>>()?,
        ),
        other => {
            return Err(ServeError::invalid(format!(
                "input '{name}': {other} has no protocol datatype"
            )))
        }
    };
    Tensor::new(dtype, shape, data)
        .map_err(|e| ServeError::from(e.context(format!("input '{name}'"))))
}

/// An integer JSON number as i128 (covers u64 and i64).
fn int(x: &Json) -> Option<i128> {
    let n = x.as_number()?;
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// Row-major leaves of nested arrays, at most `depth` levels deep.
fn flatten<'a>(
    v: &'a Json,
    out: &mut Vec<&'a Json>,
    depth: usize,
) -> std::result::Result<(), String> {
    match v {
        Json::Array(items) => {
            if depth == 0 {
                return Err("data is nested deeper than the shape".into());
            }
            for x in items {
                flatten(x, out, depth - 1)?;
            }
            Ok(())
        }
        other => {
            out.push(other);
            Ok(())
        }
    }
}

/// Encodes a tensor's elements as a flat JSON array (NaN and infinities become null:
/// JSON has no such numbers; the binary form keeps them).
pub fn encode(t: &Tensor) -> Result<Json> {
    fn num<T: Into<f64> + Copy>(v: &[T]) -> Vec<Json> {
        v.iter()
            .map(|&x| Number::from_f64(x.into()).map_or(Json::Null, Json::Number))
            .collect()
    }
    fn ints<T: Copy + Into<Number>>(v: &[T]) -> Vec<Json> {
        v.iter().map(|&x| Json::Number(x.into())).collect()
    }
    Ok(Json::Array(match t.data() {
        Data::Bool(v) => v.iter().map(|&b| Json::Bool(b)).collect(),
        Data::U8(v) => ints(v),
        Data::I8(v) => ints(v),
        Data::U16(v) => ints(v),
        Data::I16(v) => ints(v),
        Data::U32(v) => ints(v),
        Data::I32(v) => ints(v),
        Data::U64(v) => ints(v),
        Data::I64(v) => ints(v),
        Data::F32(v) => num(v),
        Data::F64(v) => num(v),
        Data::F16(v) => num(&v.iter().map(|x| x.to_f32()).collect::<Vec<_>>()),
        Data::BF16(v) => num(&v.iter().map(|x| x.to_f32()).collect::<Vec<_>>()),
        Data::Str(v) => v.iter().map(|s| Json::String(s.clone())).collect(),
        Data::C64(_) | Data::C128(_) => return Err(datatype::no_datatype(t.dtype())),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_and_flat_data_decode_alike() {
        let flat = decode("x", DType::F32, vec![2, 2], &json!([1, 2.5, 3, 4])).unwrap();
        let nested = decode("x", DType::F32, vec![2, 2], &json!([[1, 2.5], [3, 4]])).unwrap();
        assert_eq!(flat, nested);
        assert_eq!(encode(&flat).unwrap(), json!([1.0, 2.5, 3.0, 4.0]));
        let e = decode("x", DType::F32, vec![2, 3], &json!([1, 2])).unwrap_err();
        assert!(
            e.message.contains("input 'x'") && e.message.contains("needs 6"),
            "{e}"
        );
        let e = decode("ids", DType::I64, vec![1], &json!([1.5])).unwrap_err();
        assert!(e.message.contains("INT64"), "{e}");
        assert!(decode("b", DType::U8, vec![1], &json!([300])).is_err());
        assert!(decode("x", DType::F32, vec![1], &json!([[[1]]])).is_err());
        let s = decode("s", DType::Str, vec![1], &json!(["hi"])).unwrap();
        assert_eq!(encode(&s).unwrap(), json!(["hi"]));
    }
}
