//! Loading a model from a path or bytes, and what onnxruntime reports about it: metadata and
//! each input's and output's type and shape as the file declares them (onnxruntime prints
//! dim_params as written, so they come from the file, not from smelt's parsed dims).

use crate::errors::{raise, InvalidProtobuf};
use pyo3::prelude::*;
use smelt_ir::{ErrorKind, Model};
use smelt_onnx::proto::{tensor_shape_proto::dimension, type_proto, ModelProto, TypeProto};
use std::path::{Path, PathBuf};

/// A model's metadata, as onnxruntime's `ModelMetadata` has it.
#[derive(Clone, Default)]
pub struct Meta {
    pub producer_name: String,
    pub graph_name: String,
    pub graph_description: String,
    pub domain: String,
    pub description: String,
    pub version: i64,
    pub custom: Vec<(String, String)>,
}

/// One dimension as onnxruntime reports it: a size, a name, or nothing known.
#[derive(Clone)]
pub enum DimInfo {
    Size(i64),
    Name(String),
    Unknown,
}

/// A declared input or output: its name, onnxruntime's type string, its dims.
#[derive(Clone)]
pub struct ArgInfo {
    pub name: String,
    pub ty: String,
    pub shape: Vec<DimInfo>,
}

/// A model decoded and imported, with what the file declares.
pub struct Loaded {
    pub model: Model,
    pub meta: Meta,
    pub inputs: Vec<ArgInfo>,
    pub outputs: Vec<ArgInfo>,
}

/// onnxruntime's name of an ONNX element type code (`tensor(float)` holds `float`).
fn elem_name(code: i32) -> String {
    const NAMES: [&str; 27] = [
        "undefined",
        "float",
        "uint8",
        "int8",
        "uint16",
        "int16",
        "int32",
        "int64",
        "string",
        "bool",
        "float16",
        "double",
        "uint32",
        "uint64",
        "complex64",
        "complex128",
        "bfloat16",
        "float8e4m3fn",
        "float8e4m3fnuz",
        "float8e5m2",
        "float8e5m2fnuz",
        "uint4",
        "int4",
        "float4e2m1",
        "float8e8m0",
        "uint2",
        "int2",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or_else(|| format!("unknown({code})"), |s| s.to_string())
}

/// onnxruntime's type string: `tensor(float)`, `seq(tensor(int64))`,
/// `map(int64,tensor(float))`, `optional(tensor(float))`.
fn type_string(t: Option<&TypeProto>) -> String {
    let inner = |b: &Option<Box<TypeProto>>| type_string(b.as_deref());
    match t.and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(x)) => format!("tensor({})", elem_name(x.elem_type)),
        Some(type_proto::Value::SparseTensorType(x)) => {
            format!("sparse_tensor({})", elem_name(x.elem_type))
        }
        Some(type_proto::Value::SequenceType(s)) => format!("seq({})", inner(&s.elem_type)),
        Some(type_proto::Value::MapType(m)) => {
            format!("map({},{})", elem_name(m.key_type), inner(&m.value_type))
        }
        Some(type_proto::Value::OptionalType(o)) => format!("optional({})", inner(&o.elem_type)),
        None => "undefined".into(),
    }
}

fn shape_of(t: Option<&TypeProto>) -> Vec<DimInfo> {
    let Some(type_proto::Value::TensorType(x)) = t.and_then(|t| t.value.as_ref()) else {
        return Vec::new();
    };
    let Some(s) = &x.shape else {
        return Vec::new();
    };
    s.dim
        .iter()
        .map(|d| match &d.value {
            Some(dimension::Value::DimValue(n)) => DimInfo::Size(*n),
            Some(dimension::Value::DimParam(p)) if !p.is_empty() => DimInfo::Name(p.clone()),
            _ => DimInfo::Unknown,
        })
        .collect()
}

/// The path `src` names when it is a compiled artifact (told by its magic), not ONNX.
pub fn artifact_path(src: &Bound<'_, PyAny>) -> Option<PathBuf> {
    if src.cast::<pyo3::types::PyBytes>().is_ok() {
        return None;
    }
    let path: PathBuf = src.extract().ok()?;
    smelt_runtime::artifact::is_artifact(&path).then_some(path)
}

/// A session input's or output's name, ONNX type string and dims, as the ONNX path lists them.
pub fn arg_of(io: &smelt_runtime::IoInfo) -> ArgInfo {
    use smelt_ir::{Dim, ValueType};
    let (ty, shape) = match &io.ty {
        Some(ValueType::Tensor { dtype, shape }) => (
            format!("tensor({})", elem_name(dtype.onnx_code())),
            shape
                .iter()
                .flatten()
                .map(|d| match d {
                    Dim::Known(n) => DimInfo::Size(i64::try_from(*n).unwrap_or(i64::MAX)),
                    Dim::Sym(e) => DimInfo::Name(e.to_string()),
                    Dim::Unknown => DimInfo::Unknown,
                })
                .collect(),
        ),
        _ => ("undefined".into(), Vec::new()),
    };
    ArgInfo {
        name: io.name.clone(),
        ty,
        shape,
    }
}

/// Reads the model file or takes the bytes, decodes and imports it.
pub fn load(src: &Bound<'_, PyAny>) -> PyResult<Loaded> {
    let (bytes, base): (Vec<u8>, Option<PathBuf>) = if let Ok(b) =
        src.cast::<pyo3::types::PyBytes>()
    {
        (b.as_bytes().to_vec(), None)
    } else {
        let path: PathBuf = src.extract().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err(
                "path_or_bytes must be a path (str or os.PathLike) or bytes",
            )
        })?;
        let bytes = std::fs::read(&path).map_err(|e| {
            crate::errors::to_py(
                smelt_ir::err!(Io, "cannot read model: {e}").context(format!("{}", path.display())),
            )
        })?;
        let dir = path.parent().map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".").to_path_buf()
            } else {
                p.to_path_buf()
            }
        });
        (bytes, dir)
    };
    let proto = <ModelProto as prost::Message>::decode(bytes.as_slice()).map_err(|e| {
        raise(
            InvalidProtobuf::new_err,
            "INVALID_PROTOBUF",
            ErrorKind::InvalidModel,
            &format!("not a valid ONNX model (protobuf decode failed: {e})"),
        )
    })?;
    drop(bytes);
    let imported = crate::errors::no_panic("importing the model", || {
        smelt_onnx::import_model(&proto, base, false)
    })
    .map_err(crate::errors::to_py)?;
    let g = proto.graph.as_ref();
    let args = |v: Option<&Vec<smelt_onnx::proto::ValueInfoProto>>| -> Vec<ArgInfo> {
        v.into_iter()
            .flatten()
            .map(|vi| ArgInfo {
                name: vi.name.clone(),
                ty: type_string(vi.r#type.as_ref()),
                shape: shape_of(vi.r#type.as_ref()),
            })
            .collect()
    };
    let meta = Meta {
        producer_name: proto.producer_name.clone(),
        graph_name: g.map(|g| g.name.clone()).unwrap_or_default(),
        graph_description: g.map(|g| g.doc_string.clone()).unwrap_or_default(),
        domain: proto.domain.clone(),
        description: proto.doc_string.clone(),
        // onnxruntime reports INT64_MAX for a model without a version; the decoder cannot
        // tell an absent version from 0.
        version: if proto.model_version == 0 {
            i64::MAX
        } else {
            proto.model_version
        },
        custom: proto
            .metadata_props
            .iter()
            .map(|p| (p.key.clone(), p.value.clone()))
            .collect(),
    };
    Ok(Loaded {
        model: imported.model,
        meta,
        inputs: args(g.map(|g| &g.input)),
        outputs: args(g.map(|g| &g.output)),
    })
}
