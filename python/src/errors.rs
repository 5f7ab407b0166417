//! smelt's exception classes, named as onnxruntime names its own
//! (`onnxruntime.capi.onnxruntime_pybind11_state`), and the map from an error's kind to its
//! class. Every native entry point returns `PyResult`; panics are caught and raised as
//! `RuntimeException`, so none reaches Python as a bare `PanicException`.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use smelt_ir::{Error, ErrorKind};
use std::panic::{catch_unwind, AssertUnwindSafe};

create_exception!(
    smelt,
    SmeltError,
    PyException,
    "Base of smelt's errors; `.kind` names smelt's error kind."
);
create_exception!(
    smelt,
    Fail,
    SmeltError,
    "A failure with no more specific class (onnxruntime: FAIL)."
);
create_exception!(
    smelt,
    InvalidArgument,
    SmeltError,
    "An input, output name or option that does not fit the model (onnxruntime: INVALID_ARGUMENT)."
);
create_exception!(
    smelt,
    NoSuchFile,
    SmeltError,
    "A model file that cannot be read (onnxruntime: NO_SUCHFILE)."
);
create_exception!(
    smelt,
    InvalidProtobuf,
    SmeltError,
    "Bytes that are not an ONNX model (onnxruntime: INVALID_PROTOBUF)."
);
// onnxruntime raises Fail for every model it cannot load (the graph's errors included):
// smelt's finer classes for those derive from Fail, so `except Fail` catches them too.
create_exception!(
    smelt,
    InvalidGraph,
    Fail,
    "A malformed or inconsistent model (onnxruntime: INVALID_GRAPH)."
);
create_exception!(
    smelt,
    NotImplemented,
    Fail,
    "An op, type or feature smelt does not do (onnxruntime: NOT_IMPLEMENTED)."
);
create_exception!(
    smelt,
    RuntimeException,
    SmeltError,
    "A failure while running, a limit reached, or a bug in smelt (onnxruntime: RUNTIME_EXCEPTION)."
);

/// The onnxruntime status name printed in messages, per class.
fn class_of(kind: ErrorKind) -> (&'static str, fn(String) -> PyErr) {
    match kind {
        ErrorKind::InvalidInput => ("INVALID_ARGUMENT", InvalidArgument::new_err),
        ErrorKind::InvalidModel => ("INVALID_GRAPH", InvalidGraph::new_err),
        ErrorKind::Unsupported => ("NOT_IMPLEMENTED", NotImplemented::new_err),
        ErrorKind::Io => ("NO_SUCHFILE", NoSuchFile::new_err),
        ErrorKind::Cancelled | ErrorKind::DeadlineExceeded => ("FAIL", Fail::new_err),
        ErrorKind::ResourceExhausted | ErrorKind::Internal => {
            ("RUNTIME_EXCEPTION", RuntimeException::new_err)
        }
    }
}

/// The exception for a smelt error: its class by kind, `.kind` set to the kind's name.
pub fn to_py(e: Error) -> PyErr {
    let (status, make) = class_of(e.kind());
    raise(make, status, e.kind(), &e.to_string())
}

/// An exception of a given class (for errors the binding finds itself).
pub fn raise(make: fn(String) -> PyErr, status: &str, kind: ErrorKind, message: &str) -> PyErr {
    let err = make(format!("[smelt] {status} ({}): {message}", kind.name()));
    Python::attach(|py| {
        // Setting an attribute on a fresh exception instance cannot fail in practice; if it
        // did, the exception without `.kind` is still the right one to raise.
        let _ = err.value(py).setattr("kind", kind.name());
    });
    err
}

/// `InvalidArgument` for a caller's mistake the binding finds (an unknown output name, an
/// array numpy cannot describe to smelt).
pub fn invalid_argument(message: &str) -> PyErr {
    raise(
        InvalidArgument::new_err,
        "INVALID_ARGUMENT",
        ErrorKind::InvalidInput,
        message,
    )
}

/// Runs `f`, turning a panic into an internal error.
pub fn no_panic<T>(what: &str, f: impl FnOnce() -> smelt_ir::Result<T>) -> smelt_ir::Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(Error::new(
            ErrorKind::Internal,
            format!("{what} panicked (a bug in smelt): {msg}"),
        ))
    })
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("SmeltError", py.get_type::<SmeltError>())?;
    m.add("Fail", py.get_type::<Fail>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("NoSuchFile", py.get_type::<NoSuchFile>())?;
    m.add("InvalidProtobuf", py.get_type::<InvalidProtobuf>())?;
    m.add("InvalidGraph", py.get_type::<InvalidGraph>())?;
    m.add("NotImplemented", py.get_type::<NotImplemented>())?;
    m.add("RuntimeException", py.get_type::<RuntimeException>())?;
    Ok(())
}
