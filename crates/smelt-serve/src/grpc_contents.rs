//! gRPC tensors given as typed `InferTensorContents` (the alternative to raw bytes):
//! the field that matches the datatype, with exactly as many elements as the shape needs.

use crate::error::{Result, ServeError};
use crate::proto::InferTensorContents;
use crate::raw::count;
use smelt_ir::{DType, Data, Tensor};

/// Decodes typed contents of tensor `name`.
pub fn decode(
    name: &str,
    dtype: DType,
    shape: Vec<usize>,
    c: &InferTensorContents,
) -> Result<Tensor> {
    let n = count(name, &shape)?;
    let narrow = |what: &str| {
        ServeError::invalid(format!("input '{name}': a value out of range for {what}"))
    };
    let data = match dtype {
        DType::Bool => Data::Bool(c.bool_contents.clone().into()),
        DType::I8 => Data::I8(
            c.int_contents
                .iter()
                .map(|&x| i8::try_from(x).map_err(|_| narrow("INT8")))
                .collect::<Result<_>>()?,
        ),
        DType::I16 => Data::I16(
            c.int_contents
                .iter()
                .map(|&x| i16::try_from(x).map_err(|_| narrow("INT16")))
                .collect::<Result<_>>()?,
        ),
        DType::I32 => Data::I32(c.int_contents.clone().into()),
        DType::I64 => Data::I64(c.int64_contents.clone().into()),
        DType::U8 => Data::U8(
            c.uint_contents
                .iter()
                .map(|&x| u8::try_from(x).map_err(|_| narrow("UINT8")))
                .collect::<Result<_>>()?,
        ),
        DType::U16 => Data::U16(
            c.uint_contents
                .iter()
                .map(|&x| u16::try_from(x).map_err(|_| narrow("UINT16")))
                .collect::<Result<_>>()?,
        ),
        DType::U32 => Data::U32(c.uint_contents.clone().into()),
        DType::U64 => Data::U64(c.uint64_contents.clone().into()),
        DType::F32 => Data::F32(c.fp32_contents.clone().into()),
        DType::F64 => Data::F64(c.fp64_contents.clone().into()),
        DType::Str => Data::Str(
            c.bytes_contents
                .iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect(),
        ),
        other => {
            return Err(ServeError::invalid(format!(
                "input '{name}': {other} data must be sent in raw_input_contents"
            )))
        }
    };
    if data.len() != n {
        return Err(ServeError::invalid(format!(
            "input '{name}': {} elements in contents, but shape {shape:?} needs {n}",
            data.len()
        )));
    }
    Tensor::new(dtype, shape, data)
        .map_err(|e| ServeError::from(e.context(format!("input '{name}'"))))
}
