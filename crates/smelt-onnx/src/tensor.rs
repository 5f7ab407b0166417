//! Decoding ONNX tensors, sequences, optionals, maps and types into smelt values.

use crate::proto::{
    optional_proto, sequence_proto, type_proto, MapProto, OptionalProto, SequenceProto,
    TensorProto, TypeProto,
};
use half::{bf16, f16};
use smelt_ir::{
    bail, ensure, err, DType, Data, Dim, ErrorKind, Map, Optional, Result, Sequence, Tensor, Value,
    ValueType,
};
use std::path::Path;

/// Decodes a tensor; `base_dir` is the model's folder, for external data (None forbids it).
pub fn decode_tensor(t: &TensorProto, base_dir: Option<&Path>) -> Result<Tensor> {
    let what = || {
        if t.name.is_empty() {
            "tensor".to_string()
        } else {
            format!("tensor '{}'", t.name)
        }
    };
    decode_inner(t, base_dir).map_err(|e| e.context(what()))
}

fn decode_inner(t: &TensorProto, base_dir: Option<&Path>) -> Result<Tensor> {
    let dtype = DType::from_onnx_code(t.data_type)
        .ok_or_else(|| err!(Unsupported, "unknown data type code {}", t.data_type))?;
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        ensure!(d >= 0, InvalidModel, "negative dimension {d}");
        shape.push(d as usize);
    }
    // No data can fill dims whose product overflows: the file is malformed.
    let n = smelt_ir::numel(&shape)
        .map_err(|_| err!(InvalidModel, "dims {shape:?} have too many elements"))?;
    let external;
    let raw: Option<&[u8]> = if t.data_location == 1 {
        let Some(dir) = base_dir else {
            bail!(Unsupported, "external data is not allowed here")
        };
        external = crate::external::read(t, dir)?;
        Some(&external)
    } else if !t.raw_data.is_empty() || (n == 0 && dtype != DType::Str) {
        Some(&t.raw_data)
    } else {
        None
    };
    let data = match raw {
        Some(b) => from_raw(dtype, b, n)?,
        None => from_fields(t, dtype, n)?,
    };
    Tensor::new(dtype, shape, data)
}

fn chunks<const N: usize>(
    b: &[u8],
    n: usize,
    dtype: DType,
) -> Result<impl Iterator<Item = [u8; N]> + '_> {
    ensure!(
        n.checked_mul(N) == Some(b.len()),
        InvalidModel,
        "{dtype} data has {} bytes, shape needs {n} elements of {N}",
        b.len()
    );
    Ok(b.chunks_exact(N).map(|c| {
        let mut a = [0u8; N];
        a.copy_from_slice(c);
        a
    }))
}

fn from_raw(dtype: DType, b: &[u8], n: usize) -> Result<Data> {
    use DType::*;
    Ok(match dtype {
        F32 => Data::F32(chunks::<4>(b, n, dtype)?.map(f32::from_le_bytes).collect()),
        F64 => Data::F64(chunks::<8>(b, n, dtype)?.map(f64::from_le_bytes).collect()),
        F16 => Data::F16(
            chunks::<2>(b, n, dtype)?
                .map(|c| f16::from_bits(u16::from_le_bytes(c)))
                .collect(),
        ),
        BF16 => Data::BF16(
            chunks::<2>(b, n, dtype)?
                .map(|c| bf16::from_bits(u16::from_le_bytes(c)))
                .collect(),
        ),
        I8 => Data::I8(chunks::<1>(b, n, dtype)?.map(|c| c[0] as i8).collect()),
        U8 | F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F8E8M0 => {
            Data::U8(chunks::<1>(b, n, dtype)?.map(|c| c[0]).collect())
        }
        Bool => Data::Bool(chunks::<1>(b, n, dtype)?.map(|c| c[0] != 0).collect()),
        I16 => Data::I16(chunks::<2>(b, n, dtype)?.map(i16::from_le_bytes).collect()),
        U16 => Data::U16(chunks::<2>(b, n, dtype)?.map(u16::from_le_bytes).collect()),
        I32 => Data::I32(chunks::<4>(b, n, dtype)?.map(i32::from_le_bytes).collect()),
        U32 => Data::U32(chunks::<4>(b, n, dtype)?.map(u32::from_le_bytes).collect()),
        I64 => Data::I64(chunks::<8>(b, n, dtype)?.map(i64::from_le_bytes).collect()),
        U64 => Data::U64(chunks::<8>(b, n, dtype)?.map(u64::from_le_bytes).collect()),
        C64 => Data::C64(
            chunks::<8>(b, n, dtype)?
                .map(|c| {
                    [
                        f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                        f32::from_le_bytes([c[4], c[5], c[6], c[7]]),
                    ]
                })
                .collect(),
        ),
        C128 => Data::C128(
            chunks::<16>(b, n, dtype)?
                .map(|c| {
                    let (a, z) = c.split_at(8);
                    [
                        f64::from_le_bytes(a.try_into().unwrap_or([0; 8])),
                        f64::from_le_bytes(z.try_into().unwrap_or([0; 8])),
                    ]
                })
                .collect(),
        ),
        U4 | I4 | F4E2M1 | U2 | I2 => unpack_sub_byte(dtype, b, n)?,
        Str => bail!(InvalidModel, "string tensors cannot use raw_data"),
    })
}

/// Unpacks 4- and 2-bit elements (lowest bits first) into one byte each, sign-extending signed types.
fn unpack_sub_byte(dtype: DType, b: &[u8], n: usize) -> Result<Data> {
    let bits = dtype.bits();
    let per = 8 / bits;
    ensure!(
        b.len() == n.div_ceil(per),
        InvalidModel,
        "{dtype} data has {} bytes, shape needs {}",
        b.len(),
        n.div_ceil(per)
    );
    let mask = (1u8 << bits) - 1;
    let codes: Vec<u8> = (0..n)
        .map(|i| (b[i / per] >> ((i % per) * bits)) & mask)
        .collect();
    Ok(if dtype.is_signed_int() {
        let shift = 8 - bits as u32;
        Data::I8(
            codes
                .into_iter()
                .map(|c| ((c << shift) as i8) >> shift)
                .collect(),
        )
    } else {
        Data::U8(codes.into())
    })
}

fn expect_len<T>(v: Vec<T>, n: usize, dtype: DType) -> Result<smelt_ir::Buf<T>> {
    ensure!(
        v.len() == n,
        InvalidModel,
        "{dtype} tensor has {} values, shape needs {n}",
        v.len()
    );
    Ok(v.into())
}

fn from_fields(t: &TensorProto, dtype: DType, n: usize) -> Result<Data> {
    use DType::*;
    let i32s = &t.int32_data;
    Ok(match dtype {
        F32 => Data::F32(expect_len(t.float_data.clone(), n, dtype)?),
        F64 => Data::F64(expect_len(t.double_data.clone(), n, dtype)?),
        I64 => Data::I64(expect_len(t.int64_data.clone(), n, dtype)?),
        I32 => Data::I32(expect_len(i32s.clone(), n, dtype)?),
        I16 => Data::I16(expect_len(
            i32s.iter().map(|&x| x as i16).collect(),
            n,
            dtype,
        )?),
        I8 => Data::I8(expect_len(
            i32s.iter().map(|&x| x as i8).collect(),
            n,
            dtype,
        )?),
        U16 => Data::U16(expect_len(
            i32s.iter().map(|&x| x as u16).collect(),
            n,
            dtype,
        )?),
        U8 | F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F8E8M0 => Data::U8(expect_len(
            i32s.iter().map(|&x| x as u8).collect(),
            n,
            dtype,
        )?),
        Bool => Data::Bool(expect_len(
            i32s.iter().map(|&x| x != 0).collect(),
            n,
            dtype,
        )?),
        F16 => Data::F16(expect_len(
            i32s.iter().map(|&x| f16::from_bits(x as u16)).collect(),
            n,
            dtype,
        )?),
        BF16 => Data::BF16(expect_len(
            i32s.iter().map(|&x| bf16::from_bits(x as u16)).collect(),
            n,
            dtype,
        )?),
        U32 => Data::U32(expect_len(
            t.uint64_data.iter().map(|&x| x as u32).collect(),
            n,
            dtype,
        )?),
        U64 => Data::U64(expect_len(t.uint64_data.clone(), n, dtype)?),
        C64 => {
            ensure!(
                n.checked_mul(2) == Some(t.float_data.len()),
                InvalidModel,
                "complex64 tensor has {} floats, needs two per element of {n}",
                t.float_data.len()
            );
            Data::C64(t.float_data.chunks_exact(2).map(|c| [c[0], c[1]]).collect())
        }
        C128 => {
            ensure!(
                n.checked_mul(2) == Some(t.double_data.len()),
                InvalidModel,
                "complex128 tensor has {} doubles, needs two per element of {n}",
                t.double_data.len()
            );
            Data::C128(
                t.double_data
                    .chunks_exact(2)
                    .map(|c| [c[0], c[1]])
                    .collect(),
            )
        }
        Str => Data::Str(expect_len(
            t.string_data
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect(),
            n,
            dtype,
        )?),
        U4 | I4 | F4E2M1 | U2 | I2 => {
            let bytes: Vec<u8> = i32s.iter().map(|&x| x as u8).collect();
            unpack_sub_byte(dtype, &bytes, n)?
        }
    })
}

/// Decodes a `TypeProto` into a value type (None when it says nothing usable).
pub fn decode_type(t: &TypeProto) -> Option<ValueType> {
    match t.value.as_ref()? {
        type_proto::Value::TensorType(tt) => Some(ValueType::Tensor {
            dtype: DType::from_onnx_code(tt.elem_type)?,
            shape: tt
                .shape
                .as_ref()
                .map(|s| s.dim.iter().map(decode_dim).collect()),
        }),
        type_proto::Value::SparseTensorType(tt) => Some(ValueType::Tensor {
            dtype: DType::from_onnx_code(tt.elem_type)?,
            shape: tt
                .shape
                .as_ref()
                .map(|s| s.dim.iter().map(decode_dim).collect()),
        }),
        type_proto::Value::SequenceType(s) => Some(ValueType::Sequence(Box::new(decode_type(
            s.elem_type.as_ref()?,
        )?))),
        type_proto::Value::OptionalType(o) => Some(ValueType::Optional(Box::new(decode_type(
            o.elem_type.as_ref()?,
        )?))),
        type_proto::Value::MapType(m) => Some(ValueType::Map(
            DType::from_onnx_code(m.key_type)?,
            Box::new(decode_type(m.value_type.as_ref()?)?),
        )),
    }
}

fn decode_dim(d: &crate::proto::tensor_shape_proto::Dimension) -> Dim {
    use crate::proto::tensor_shape_proto::dimension::Value as V;
    match &d.value {
        Some(V::DimValue(v)) if *v >= 0 => Dim::Known(*v as u64),
        Some(V::DimParam(p)) if !p.is_empty() => Dim::parse(p),
        _ => Dim::Unknown,
    }
}

/// Decodes a sequence value.
pub fn decode_sequence(s: &SequenceProto) -> Result<Sequence> {
    let items: Vec<Value> = match s.elem_type {
        sequence_proto::data_type::TENSOR => s
            .tensor_values
            .iter()
            .map(|t| decode_tensor(t, None).map(Value::Tensor))
            .collect::<Result<_>>()?,
        sequence_proto::data_type::SEQUENCE => s
            .sequence_values
            .iter()
            .map(|q| decode_sequence(q).map(Value::Sequence))
            .collect::<Result<_>>()?,
        sequence_proto::data_type::OPTIONAL => s
            .optional_values
            .iter()
            .map(|o| decode_optional(o).map(Value::Optional))
            .collect::<Result<_>>()?,
        sequence_proto::data_type::MAP => s
            .map_values
            .iter()
            .map(|m| decode_map(m, None).map(Value::Map))
            .collect::<Result<_>>()?,
        sequence_proto::data_type::UNDEFINED => Vec::new(),
        other => bail!(
            Unsupported,
            "sequence elements of kind {other} are not supported"
        ),
    };
    let elem = items.first().and_then(|v| v.value_type());
    Ok(Sequence { elem, items })
}

/// Decodes an optional value.
pub fn decode_optional(o: &OptionalProto) -> Result<Optional> {
    let value = match o.elem_type {
        optional_proto::data_type::TENSOR => o
            .tensor_value
            .as_ref()
            .map(|t| decode_tensor(t, None).map(Value::Tensor)),
        optional_proto::data_type::SEQUENCE => o
            .sequence_value
            .as_ref()
            .map(|s| decode_sequence(s).map(Value::Sequence)),
        optional_proto::data_type::OPTIONAL => o
            .optional_value
            .as_ref()
            .map(|s| decode_optional(s).map(Value::Optional)),
        optional_proto::data_type::MAP => o
            .map_value
            .as_ref()
            .map(|m| decode_map(m, None).map(Value::Map)),
        optional_proto::data_type::UNDEFINED => None,
        other => bail!(
            Unsupported,
            "optional contents of kind {other} are not supported"
        ),
    };
    let value = value.transpose()?.map(Box::new);
    let elem = value.as_ref().and_then(|v| v.value_type());
    Ok(Optional { elem, value })
}

/// Decodes a map value: integer or string keys, values a sequence of scalars (stacked into
/// one 1-D tensor). `values` gives their element type when the map is empty.
pub fn decode_map(m: &MapProto, values: Option<DType>) -> Result<Map> {
    let key_type = DType::from_onnx_code(m.key_type)
        .ok_or_else(|| err!(InvalidModel, "map key type {} is unknown", m.key_type))?;
    let keys = if key_type == DType::Str {
        let s = m
            .string_keys
            .iter()
            .map(|b| {
                String::from_utf8(b.clone())
                    .map_err(|_| err!(InvalidModel, "a map key is not UTF-8"))
            })
            .collect::<Result<Vec<_>>>()?;
        Tensor::from_strings(vec![s.len()], s)?
    } else {
        ensure!(
            key_type.is_int(),
            Unsupported,
            "map keys of type {key_type} are not supported"
        );
        Tensor::from_i64(key_type, vec![m.keys.len()], &m.keys)?
    };
    let items = match &m.values {
        Some(seq) => decode_sequence(seq)?.items,
        None => Vec::new(),
    };
    let parts: Vec<Tensor> = items
        .into_iter()
        .map(|v| {
            let t = v.into_tensor()?;
            ensure!(
                t.len() == 1,
                Unsupported,
                "map values of shape {:?} are not supported (only scalars)",
                t.shape()
            );
            t.reshape(vec![1])
        })
        .collect::<Result<_>>()?;
    let values = match parts.first() {
        None => Tensor::zeros(values.unwrap_or(DType::F32), vec![0])?,
        Some(first) => {
            let dt = first.dtype();
            ensure!(
                parts.iter().all(|p| p.dtype() == dt),
                InvalidModel,
                "map values of different element types"
            );
            let data: Vec<&Data> = parts.iter().map(|p| p.data()).collect();
            Tensor::new(dt, vec![parts.len()], Data::concat(&data)?)?
        }
    };
    ensure!(
        keys.len() == values.len(),
        InvalidModel,
        "a map has {} keys but {} values",
        keys.len(),
        values.len()
    );
    Map::new(keys, values).map_err(|e| e.with_kind(ErrorKind::InvalidModel))
}

/// The element type of a map type's values.
fn map_value_dtype(t: &ValueType) -> Option<DType> {
    match t {
        ValueType::Map(_, v) => match &**v {
            ValueType::Tensor { dtype, .. } => Some(*dtype),
            _ => None,
        },
        _ => None,
    }
}

/// Decodes a serialized value file (`input_0.pb`) as the kind the model expects there.
/// The file is a caller's input, not part of the model: what would be a malformed model
/// tensor is an invalid input here.
pub fn decode_value_file(bytes: &[u8], expected: Option<&ValueType>) -> Result<Value> {
    decode_value(bytes, expected).map_err(|e| match e.kind() {
        ErrorKind::InvalidModel => e.with_kind(ErrorKind::InvalidInput),
        _ => e,
    })
}

fn decode_value(bytes: &[u8], expected: Option<&ValueType>) -> Result<Value> {
    use prost::Message;
    match expected {
        Some(t @ ValueType::Map(..)) => {
            let m =
                MapProto::decode(bytes).map_err(|e| err!(InvalidInput, "not a MapProto: {e}"))?;
            Ok(Value::Map(decode_map(&m, map_value_dtype(t))?))
        }
        Some(ValueType::Sequence(elem)) => {
            let s = SequenceProto::decode(bytes)
                .map_err(|e| err!(InvalidInput, "not a SequenceProto: {e}"))?;
            let mut q = decode_sequence(&s)?;
            q.elem = Some((**elem).clone());
            Ok(Value::Sequence(q))
        }
        Some(ValueType::Optional(elem)) => {
            let o = OptionalProto::decode(bytes)
                .map_err(|e| err!(InvalidInput, "not an OptionalProto: {e}"))?;
            let mut q = decode_optional(&o)?;
            q.elem = Some((**elem).clone());
            Ok(Value::Optional(q))
        }
        _ => {
            let t = TensorProto::decode(bytes)
                .map_err(|e| err!(InvalidInput, "not a TensorProto: {e}"))?;
            Ok(Value::Tensor(decode_tensor(&t, None)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::tensor_proto::data_type;

    fn proto(dt: i32, dims: &[i64]) -> TensorProto {
        TensorProto {
            data_type: dt,
            dims: dims.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn maps_decode_with_their_key_type_and_reject_duplicates() {
        let scalar = |v: f64| TensorProto {
            data_type: data_type::DOUBLE,
            double_data: vec![v],
            ..Default::default()
        };
        let mut m = MapProto {
            key_type: data_type::STRING,
            string_keys: vec![b"a".to_vec(), b"b".to_vec()],
            values: Some(SequenceProto {
                elem_type: sequence_proto::data_type::TENSOR,
                tensor_values: vec![scalar(1.5), scalar(-2.0)],
                ..Default::default()
            }),
            ..Default::default()
        };
        let d = decode_map(&m, None).unwrap();
        assert_eq!(d.keys().dtype(), DType::Str);
        assert_eq!(d.values().dtype(), DType::F64);
        assert_eq!(d.values().to_f64().unwrap(), vec![1.5, -2.0]);
        m.string_keys[1] = b"a".to_vec();
        assert_eq!(
            decode_map(&m, None).unwrap_err().kind(),
            smelt_ir::ErrorKind::InvalidModel
        );
        let empty = MapProto {
            key_type: data_type::INT64,
            ..Default::default()
        };
        let d = decode_map(&empty, Some(DType::F32)).unwrap();
        assert!(d.is_empty());
        assert_eq!(d.values().dtype(), DType::F32);
    }

    #[test]
    fn raw_and_typed_fields_decode_alike() {
        let mut raw = proto(data_type::FLOAT, &[2]);
        raw.raw_data = [1.5f32, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let mut typed = proto(data_type::FLOAT, &[2]);
        typed.float_data = vec![1.5, -2.0];
        assert_eq!(
            decode_tensor(&raw, None).unwrap(),
            decode_tensor(&typed, None).unwrap()
        );
    }

    #[test]
    fn four_bit_values_unpack_low_nibble_first_and_sign_extend() {
        let mut t = proto(data_type::INT4, &[3]);
        t.raw_data = vec![0xF7, 0x08];
        let d = decode_tensor(&t, None).unwrap();
        assert_eq!(d.to_i64().unwrap(), vec![7, -1, -8]);
        let mut u = proto(data_type::UINT4, &[2]);
        u.raw_data = vec![0xF7];
        assert_eq!(
            decode_tensor(&u, None).unwrap().to_i64().unwrap(),
            vec![7, 15]
        );
    }

    #[test]
    fn size_mismatches_and_bad_types_are_errors() {
        let mut t = proto(data_type::FLOAT, &[3]);
        t.raw_data = vec![0; 8];
        assert!(decode_tensor(&t, None)
            .unwrap_err()
            .to_string()
            .contains("bytes"));
        let mut n = proto(data_type::FLOAT, &[-1]);
        n.float_data = vec![1.0];
        assert!(decode_tensor(&n, None).is_err());
        assert!(decode_tensor(&proto(99, &[1]), None).is_err());
        let mut e = proto(data_type::FLOAT, &[1]);
        e.data_location = 1;
        assert!(decode_tensor(&e, None)
            .unwrap_err()
            .to_string()
            .contains("external"));
    }
}
