//! numpy arrays (and the lists and dicts onnxruntime also takes) to smelt values, and smelt
//! values back to numpy. An output tensor's storage moves into the numpy array that Python
//! gets (no copy). An input is copied once into smelt's own tensor storage while the GIL is
//! held: smelt's executor reads inputs as `Tensor`s, which own their elements.

use crate::errors::{invalid_argument, to_py};
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::prelude::*;
use numpy::{Complex32, Complex64, PyArrayDyn, PyUntypedArray};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList};
use smelt_ir::{DType, Data, Map, Optional, Sequence, Tensor, Value, ValueType};

static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    NUMPY
        .get_or_try_init(py, || py.import("numpy").map(Bound::unbind))
        .map(|m| m.bind(py))
}

/// Copies an array into a tensor: C-contiguous arrays with one memcpy, others element by
/// element in row-major order.
macro_rules! try_elem {
    ($arr:expr, $name:expr, $t:ty, $dtype:expr, $variant:ident) => {
        if let Ok(a) = $arr.cast::<PyArrayDyn<$t>>() {
            let ro = a.try_readonly().map_err(|e| {
                invalid_argument(&format!("input '{}': cannot read the array: {e}", $name))
            })?;
            // as_slice also takes Fortran-ordered arrays, in memory order: only C order
            // is row-major.
            let data: Vec<$t> = match ro.as_slice() {
                Ok(s) if a.is_c_contiguous() => s.to_vec(),
                _ => ro.as_array().iter().cloned().collect(),
            };
            return Tensor::new($dtype, ro.shape().to_vec(), Data::$variant(data.into()))
                .map_err(to_py);
        }
    };
}

/// numpy's name of an element type, for converting lists as the input declares.
fn numpy_name(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::F16 => "float16",
        DType::I8 => "int8",
        DType::I16 => "int16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::U8 => "uint8",
        DType::U16 => "uint16",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
        DType::Bool => "bool",
        DType::Str => "object",
        DType::C64 => "complex64",
        DType::C128 => "complex128",
        _ => return None,
    })
}

/// A tensor from a numpy array, or from anything `numpy.asarray` takes (converted to the
/// declared element type, as onnxruntime converts lists).
pub fn tensor_from_py(
    name: &str,
    obj: &Bound<'_, PyAny>,
    declared: Option<DType>,
) -> PyResult<Tensor> {
    let py = obj.py();
    let owned;
    let arr = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a,
        Err(_) => {
            owned = numpy(py)?
                .call_method1("asarray", (obj, declared.and_then(numpy_name)))
                .map_err(|e| invalid_argument(&format!("input '{name}': not an array ({e})")))?
                .cast_into::<PyUntypedArray>()
                .map_err(|_| invalid_argument(&format!("input '{name}': not an array")))?;
            &owned
        }
    };
    try_elem!(arr, name, f32, DType::F32, F32);
    try_elem!(arr, name, i64, DType::I64, I64);
    try_elem!(arr, name, f64, DType::F64, F64);
    try_elem!(arr, name, i32, DType::I32, I32);
    try_elem!(arr, name, bool, DType::Bool, Bool);
    try_elem!(arr, name, u8, DType::U8, U8);
    try_elem!(arr, name, i8, DType::I8, I8);
    try_elem!(arr, name, half::f16, DType::F16, F16);
    try_elem!(arr, name, i16, DType::I16, I16);
    try_elem!(arr, name, u16, DType::U16, U16);
    try_elem!(arr, name, u32, DType::U32, U32);
    try_elem!(arr, name, u64, DType::U64, U64);
    let descr = arr.dtype();
    let shape = arr.shape().to_vec();
    if let Ok(a) = arr.cast::<PyArrayDyn<Complex32>>() {
        let v: Vec<_> = a.to_owned_array().iter().map(|c| [c.re, c.im]).collect();
        return Tensor::new(DType::C64, shape, Data::C64(v.into())).map_err(to_py);
    }
    if let Ok(a) = arr.cast::<PyArrayDyn<Complex64>>() {
        let v: Vec<_> = a.to_owned_array().iter().map(|c| [c.re, c.im]).collect();
        return Tensor::new(DType::C128, shape, Data::C128(v.into())).map_err(to_py);
    }
    match descr.kind() {
        b'U' | b'O' | b'S' => {
            let items = arr.call_method0("ravel")?.call_method0("tolist")?;
            let v: Vec<String> = items
                .cast::<PyList>()
                .map_err(|_| invalid_argument(&format!("input '{name}': not a list")))?
                .iter()
                .map(|x| match x.extract::<String>() {
                    Ok(s) => Ok(s),
                    Err(_) => match x.extract::<Vec<u8>>() {
                        Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
                        Err(_) => Err(invalid_argument(&format!(
                            "input '{name}': an object array must hold strings"
                        ))),
                    },
                })
                .collect::<PyResult<_>>()?;
            Tensor::new(DType::Str, shape, Data::Str(v.into())).map_err(to_py)
        }
        _ if descr.str()?.to_cow()? == "bfloat16" => {
            // ml_dtypes' bfloat16: the same bits as half::bf16.
            let bits = arr.call_method1("view", ("uint16",))?;
            let t = tensor_from_py(name, &bits, None)?;
            let v: Vec<_> = match t.data() {
                Data::U16(v) => v.iter().map(|b| half::bf16::from_bits(*b)).collect(),
                _ => return Err(invalid_argument(&format!("input '{name}': bad bfloat16"))),
            };
            Tensor::new(DType::BF16, shape, Data::BF16(v.into())).map_err(to_py)
        }
        _ => Err(invalid_argument(&format!(
            "input '{name}': numpy dtype {} is not a tensor element type smelt takes",
            descr.str()?
        ))),
    }
}

/// A value for an input declared with a non-tensor type: a list for a sequence, a dict for
/// a map, None for an absent optional; otherwise a tensor.
pub fn value_from_py(
    name: &str,
    obj: &Bound<'_, PyAny>,
    ty: Option<&ValueType>,
) -> PyResult<Value> {
    match ty {
        Some(ValueType::Sequence(elem)) if obj.cast::<PyList>().is_ok() => {
            let items = obj
                .cast::<PyList>()?
                .iter()
                .map(|x| value_from_py(name, &x, Some(elem)))
                .collect::<PyResult<_>>()?;
            Ok(Value::Sequence(Sequence {
                elem: Some((**elem).clone()),
                items,
            }))
        }
        Some(ValueType::Map(key, val)) if obj.cast::<PyDict>().is_ok() => {
            let d = obj.cast::<PyDict>()?;
            let keys = cast_to(
                name,
                &tensor_from_py(name, &d.keys().into_any(), None)?,
                *key,
            )?;
            let vdtype = match &**val {
                ValueType::Tensor { dtype, .. } => *dtype,
                _ => DType::F32,
            };
            let values = cast_to(
                name,
                &tensor_from_py(name, &d.values().into_any(), None)?,
                vdtype,
            )?;
            Ok(Value::Map(Map::new(keys, values).map_err(to_py)?))
        }
        Some(ValueType::Optional(elem)) if obj.is_none() => Ok(Value::Optional(Optional {
            elem: Some((**elem).clone()),
            value: None,
        })),
        Some(ValueType::Optional(elem)) => value_from_py(name, obj, Some(elem)),
        Some(ValueType::Tensor { dtype, .. }) => {
            Ok(Value::Tensor(tensor_from_py(name, obj, Some(*dtype))?))
        }
        _ => Ok(Value::Tensor(tensor_from_py(name, obj, None)?)),
    }
}

/// A map's keys or values in the declared element type (Python ints come as int64, floats
/// as float64).
fn cast_to(name: &str, t: &Tensor, dtype: DType) -> PyResult<Tensor> {
    if t.dtype() == dtype || t.dtype() == DType::Str || dtype == DType::Str {
        return Ok(t.clone());
    }
    let v = t
        .to_f64()
        .map_err(|e| invalid_argument(&format!("input '{name}': {e}")))?;
    Tensor::from_f64(dtype, t.shape().to_vec(), &v).map_err(to_py)
}

fn array<T: numpy::Element>(py: Python<'_>, shape: &[usize], v: Vec<T>) -> PyResult<Py<PyAny>> {
    let a = ArrayD::from_shape_vec(IxDyn(shape), v)
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("output shape: {e}")))?;
    Ok(numpy::PyArray::from_owned_array(py, a).into_any().unbind())
}

/// A numpy array holding a tensor's elements (moved, not copied, for the numeric types).
pub fn tensor_to_py(py: Python<'_>, name: &str, t: Tensor) -> PyResult<Py<PyAny>> {
    let (dtype, shape) = (t.dtype(), t.shape().to_vec());
    match t.into_data() {
        Data::F32(v) => array(py, &shape, v.into_vec()),
        Data::F64(v) => array(py, &shape, v.into_vec()),
        Data::F16(v) => array(py, &shape, v.into_vec()),
        Data::I8(v) => array(py, &shape, v.into_vec()),
        Data::I16(v) => array(py, &shape, v.into_vec()),
        Data::I32(v) => array(py, &shape, v.into_vec()),
        Data::I64(v) => array(py, &shape, v.into_vec()),
        Data::U16(v) => array(py, &shape, v.into_vec()),
        Data::U32(v) => array(py, &shape, v.into_vec()),
        Data::U64(v) => array(py, &shape, v.into_vec()),
        Data::Bool(v) => array(py, &shape, v.into_vec()),
        Data::U8(v) if matches!(dtype, DType::U8 | DType::U4 | DType::U2) => {
            array(py, &shape, v.into_vec())
        }
        Data::C64(v) => array(
            py,
            &shape,
            v.iter().map(|&[re, im]| Complex32::new(re, im)).collect(),
        ),
        Data::C128(v) => array(
            py,
            &shape,
            v.iter().map(|&[re, im]| Complex64::new(re, im)).collect(),
        ),
        Data::BF16(v) => {
            // numpy has no bfloat16 of its own; ml_dtypes provides it when installed.
            if py.import("ml_dtypes").is_err() {
                return Err(crate::errors::to_py(smelt_ir::err!(
                    Unsupported,
                    "output '{name}' is bfloat16, which numpy holds only with ml_dtypes installed"
                )));
            }
            array(py, &shape, v.into_vec())
        }
        Data::Str(v) => {
            let list = PyList::new(py, v.iter())?;
            let a = numpy(py)?.call_method1("array", (list, "O"))?;
            Ok(a.call_method1("reshape", (shape,))?.unbind())
        }
        _ => Err(crate::errors::to_py(smelt_ir::err!(
            Unsupported,
            "output '{name}' is {dtype}, which numpy cannot hold"
        ))),
    }
}

/// A Python object for an output value: an array, a list (sequence), a dict (map), or None
/// (an absent optional).
pub fn value_to_py(py: Python<'_>, name: &str, v: Value) -> PyResult<Py<PyAny>> {
    match v {
        Value::Tensor(t) => tensor_to_py(py, name, t),
        Value::Sequence(s) => {
            let items = s
                .items
                .into_iter()
                .map(|x| value_to_py(py, name, x))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyList::new(py, items)?.into_any().unbind())
        }
        Value::Map(m) => {
            let keys = tensor_to_py(py, name, m.keys().clone())?;
            let values = tensor_to_py(py, name, m.values().clone())?;
            let (keys, values) = (
                keys.call_method0(py, "tolist")?,
                values.call_method0(py, "tolist")?,
            );
            let d = PyDict::new(py);
            for (k, v) in keys.bind(py).try_iter()?.zip(values.bind(py).try_iter()?) {
                d.set_item(k?, v?)?;
            }
            Ok(d.into_any().unbind())
        }
        Value::Optional(o) => match o.value {
            Some(v) => value_to_py(py, name, *v),
            None => Ok(py.None()),
        },
    }
}
