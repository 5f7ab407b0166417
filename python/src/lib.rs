//! `smelt._smelt`, the native module of the `smelt` Python package: the session that
//! `smelt.InferenceSession` wraps, smelt's exception classes, the explanation and the
//! benchmark. The onnxruntime-shaped API around it is Python (python/smelt).

mod bench;
mod convert;
mod errors;
mod model;
mod session;

use pyo3::prelude::*;

/// The CPU instruction set smelt's kernels use on this machine.
#[pyfunction]
fn cpu_isa() -> String {
    smelt_kernels::Isa::detect().name().to_string()
}

/// Threads a run uses by default: the CPUs available to this process.
#[pyfunction]
fn default_threads() -> usize {
    smelt_kernels::pool::available_threads()
}

#[pymodule]
fn _smelt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<session::PySession>()?;
    m.add_function(wrap_pyfunction!(bench::bench, m)?)?;
    m.add_function(wrap_pyfunction!(cpu_isa, m)?)?;
    m.add_function(wrap_pyfunction!(default_threads, m)?)?;
    errors::register(m)?;
    Ok(())
}
