//! The native session behind `smelt.InferenceSession`: loads and compiles a model, runs a
//! feed of numpy arrays with the GIL released, and records profiles.

use crate::convert::{tensor_from_py, value_from_py, value_to_py};
use crate::errors::{invalid_argument, no_panic, to_py};
use crate::model::{ArgInfo, DimInfo, Meta};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use smelt_ir::{Tensor, Value};
use smelt_runtime::profile::{chrome_trace, KernelEvent};
use smelt_runtime::{InputShapes, IoInfo, Session, SessionOptions};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// One profiled run: its start (µs since the session's creation) and its kernel events.
type ProfiledRun = (f64, Vec<KernelEvent>);

/// One compilation: the input shapes it was for and why it happened.
type Compilation = (Vec<(String, Vec<usize>)>, String);

/// A compiled model. `run` may be called from many Python threads at once.
#[pyclass(name = "Session", module = "smelt._smelt", frozen)]
pub struct PySession {
    inner: Session,
    meta: Meta,
    inputs: Vec<ArgInfo>,
    outputs: Vec<ArgInfo>,
    /// The session's inputs as smelt checks them (required-ness, declared value types).
    sig: Vec<IoInfo>,
    output_names: Vec<String>,
    /// Per-run kernel events with each run's start (µs since `created`), when profiling.
    profile: Option<Mutex<Vec<ProfiledRun>>>,
    created: Instant,
}

fn shape_py(py: Python<'_>, dims: &[DimInfo]) -> PyResult<Py<PyAny>> {
    let items: Vec<Py<PyAny>> = dims
        .iter()
        .map(|d| -> PyResult<Py<PyAny>> {
            Ok(match d {
                DimInfo::Size(n) => n.into_pyobject(py)?.into_any().unbind(),
                DimInfo::Name(s) => s.into_pyobject(py)?.into_any().unbind(),
                DimInfo::Unknown => py.None(),
            })
        })
        .collect::<PyResult<_>>()?;
    Ok(PyList::new(py, items)?.into_any().unbind())
}

/// The inputs whose every dim is a size or a name `free` fixes, with those sizes (only for
/// inputs with a named dim).
fn fixed_by(inputs: &[ArgInfo], free: &HashMap<String, usize>) -> Vec<(String, Vec<usize>)> {
    if free.is_empty() {
        return Vec::new();
    }
    inputs
        .iter()
        .filter(|a| a.shape.iter().any(|d| matches!(d, DimInfo::Name(_))))
        .filter_map(|a| {
            let dims = a.shape.iter().map(|d| match d {
                DimInfo::Size(n) => usize::try_from(*n).ok(),
                DimInfo::Name(s) => free.get(s).copied(),
                DimInfo::Unknown => None,
            });
            Some((a.name.clone(), dims.collect::<Option<Vec<usize>>>()?))
        })
        .collect()
}

fn quoted_list(names: &[&str]) -> String {
    let q: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    format!("[{}]", q.join(", "))
}

impl PySession {
    fn args_py(&self, py: Python<'_>, args: &[ArgInfo]) -> PyResult<Vec<Py<PyAny>>> {
        args.iter()
            .map(|a| {
                let t = (a.name.as_str(), a.ty.as_str(), shape_py(py, &a.shape)?);
                Ok(t.into_pyobject(py)?.into_any().unbind())
            })
            .collect()
    }

    /// Which outputs to return, by position; an unknown name is an invalid argument.
    fn pick(&self, names: Option<Vec<String>>) -> PyResult<Option<Vec<usize>>> {
        let Some(names) = names.filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        names
            .iter()
            .map(|n| {
                self.output_names
                    .iter()
                    .position(|o| o == n)
                    .ok_or_else(|| {
                        invalid_argument(&format!(
                            "the model has no output named '{n}' (outputs: {})",
                            self.output_names.join(", ")
                        ))
                    })
            })
            .collect::<PyResult<Vec<_>>>()
            .map(Some)
    }

    fn record(&self, start: Instant, events: Vec<KernelEvent>) {
        if let Some(p) = &self.profile {
            let at = start.duration_since(self.created).as_secs_f64() * 1e6;
            if let Ok(mut runs) = p.lock() {
                runs.push((at, events));
            }
        }
    }
}

/// `options` with `threads` (0: the default) and the concrete input `shapes`.
fn options_with(
    mut options: SessionOptions,
    threads: usize,
    shapes: HashMap<String, Vec<usize>>,
) -> PyResult<SessionOptions> {
    if threads > 0 {
        options.threads = threads;
    }
    let mut input_shapes = InputShapes::new();
    for (name, dims) in shapes {
        input_shapes.insert(&name, dims).map_err(to_py)?;
    }
    options.input_shapes = input_shapes;
    Ok(options)
}

impl PySession {
    /// A session of a compiled artifact (`smelt compile`): it runs at the shapes it was
    /// compiled for, its signature taken from the artifact (no ONNX metadata).
    fn from_artifact(
        py: Python<'_>,
        path: &std::path::Path,
        threads: usize,
        shapes: Option<HashMap<String, Vec<usize>>>,
        profile: bool,
    ) -> PyResult<Self> {
        let options = options_with(
            SessionOptions::default(),
            threads,
            shapes.unwrap_or_default(),
        )?;
        let inner = py
            .detach(|| {
                no_panic("loading the artifact", || {
                    Session::load_with(path, &options)
                })
            })
            .map_err(to_py)?;
        let sig = inner.inputs();
        let args = |v: &[IoInfo]| v.iter().map(crate::model::arg_of).collect::<Vec<_>>();
        let outputs = inner.outputs();
        Ok(PySession {
            meta: Meta {
                producer_name: "smelt".into(),
                description: format!("smelt artifact {}", path.display()),
                ..Meta::default()
            },
            inputs: args(&sig),
            outputs: args(&outputs),
            output_names: outputs.into_iter().map(|o| o.name).collect(),
            sig,
            inner,
            profile: profile.then(|| Mutex::new(Vec::new())),
            created: Instant::now(),
        })
    }
}

#[pymethods]
impl PySession {
    /// Loads `model` (a path or bytes) and compiles it. `shapes` maps input names to
    /// concrete shapes to compile for at load.
    #[new]
    /// `free_dims` fixes named dims: inputs whose dims it all fixes are compiled for them.
    /// `precision` is `fp32` (default), `bf16`, `fp16` or `int8`, as `smelt run --precision`.
    #[pyo3(signature = (model, opt_level=1, threads=0, shapes=None, free_dims=None, max_plans=16, profile=false, precision=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model: &Bound<'_, PyAny>,
        opt_level: u8,
        threads: usize,
        shapes: Option<HashMap<String, Vec<usize>>>,
        free_dims: Option<HashMap<String, usize>>,
        max_plans: usize,
        profile: bool,
        precision: Option<&str>,
    ) -> PyResult<Self> {
        let precision = match precision {
            None => smelt_ir::Precision::F32,
            Some(p) => smelt_ir::Precision::from_name(p).ok_or_else(|| {
                crate::errors::invalid_argument(&format!(
                    "smelt.precision '{p}': expected fp32, bf16, fp16 or int8"
                ))
            })?,
        };
        if let Some(path) = crate::model::artifact_path(model) {
            return PySession::from_artifact(py, &path, threads, shapes, profile);
        }
        let loaded = crate::model::load(model)?;
        let mut shapes = shapes.unwrap_or_default();
        for (name, dims) in fixed_by(&loaded.inputs, &free_dims.unwrap_or_default()) {
            shapes.entry(name).or_insert(dims);
        }
        let options = SessionOptions {
            opt_level,
            max_plans: max_plans.max(1),
            precision: smelt_ir::PrecisionPolicy::uniform(precision),
            ..Default::default()
        };
        let options = options_with(options, threads, shapes)?;
        let model = loaded.model;
        let inner = py
            .detach(|| {
                no_panic("compiling the model", || {
                    Session::from_model_with(model, &options)
                })
            })
            .map_err(to_py)?;
        let sig = inner.inputs();
        let output_names = inner.outputs().into_iter().map(|o| o.name).collect();
        Ok(PySession {
            inner,
            meta: loaded.meta,
            inputs: loaded.inputs,
            outputs: loaded.outputs,
            sig,
            output_names,
            profile: profile.then(|| Mutex::new(Vec::new())),
            created: Instant::now(),
        })
    }

    /// Inputs a caller may give, as (name, type, shape), in graph order; `all` includes
    /// inputs with a default (initializers listed as inputs).
    #[pyo3(signature = (all=false))]
    fn inputs(&self, py: Python<'_>, all: bool) -> PyResult<Vec<Py<PyAny>>> {
        let shown: Vec<ArgInfo> = self
            .inputs
            .iter()
            .filter(|a| all || self.sig.iter().any(|s| s.name == a.name && s.required))
            .cloned()
            .collect();
        self.args_py(py, &shown)
    }

    /// The outputs as (name, type, shape), in graph order.
    fn outputs(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        self.args_py(py, &self.outputs)
    }

    /// onnxruntime's ModelMetadata fields, as a dict.
    fn meta<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = &self.meta;
        let d = PyDict::new(py);
        d.set_item("producer_name", &m.producer_name)?;
        d.set_item("graph_name", &m.graph_name)?;
        d.set_item("graph_description", &m.graph_description)?;
        d.set_item("domain", &m.domain)?;
        d.set_item("description", &m.description)?;
        d.set_item("version", m.version)?;
        let custom = PyDict::new(py);
        for (k, v) in &m.custom {
            custom.set_item(k, v)?;
        }
        d.set_item("custom_metadata_map", custom)?;
        Ok(d)
    }

    /// Runs the model: `output_names` (None or empty: all), `feed` a dict of input name to
    /// array. Returns the outputs as a list, in the order asked for.
    #[pyo3(signature = (output_names, feed))]
    fn run(
        &self,
        py: Python<'_>,
        output_names: Option<Vec<String>>,
        feed: &Bound<'_, PyDict>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let picked = self.pick(output_names)?;
        let missing: Vec<&str> = self
            .sig
            .iter()
            .filter(|s| s.required && !feed.contains(&s.name).unwrap_or(false))
            .map(|s| s.name.as_str())
            .collect();
        if !missing.is_empty() {
            let given: Vec<String> = feed.keys().iter().map(|k| k.to_string()).collect();
            let given: Vec<&str> = given.iter().map(String::as_str).collect();
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "Required inputs ({}) are missing from input feed ({}).",
                quoted_list(&missing),
                quoted_list(&given)
            )));
        }
        let mut tensors: Vec<(String, Tensor)> = Vec::with_capacity(feed.len());
        let mut others: Vec<(String, Value)> = Vec::new();
        for (k, v) in feed.iter() {
            let name: String = k
                .extract()
                .map_err(|_| invalid_argument("input names must be strings"))?;
            let declared = self.sig.iter().find(|s| s.name == name);
            match declared.and_then(|s| s.ty.as_ref()) {
                Some(
                    ty @ (smelt_ir::ValueType::Sequence(_)
                    | smelt_ir::ValueType::Map(..)
                    | smelt_ir::ValueType::Optional(_)),
                ) => {
                    let value = value_from_py(&name, &v, Some(ty))?;
                    others.push((name, value));
                }
                declared_ty => {
                    let dtype = match declared_ty {
                        Some(smelt_ir::ValueType::Tensor { dtype, .. }) => Some(*dtype),
                        _ => None,
                    };
                    let t = tensor_from_py(&name, &v, dtype)?;
                    tensors.push((name, t));
                }
            }
        }
        let profiling = self.profile.is_some();
        let start = Instant::now();
        let result = py.detach(|| {
            no_panic("running the model", || {
                if others.is_empty() {
                    let refs: Vec<(&str, &Tensor)> =
                        tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
                    if profiling {
                        self.inner
                            .run_ref_profiled(&refs)
                            .map(|(o, e)| (o, Some(e)))
                    } else {
                        self.inner.run_ref(&refs).map(|o| (o, None))
                    }
                } else {
                    let all: HashMap<String, Value> = tensors
                        .drain(..)
                        .map(|(n, t)| (n, Value::Tensor(t)))
                        .chain(others.drain(..))
                        .collect();
                    if profiling {
                        self.inner.run_profiled(all).map(|(o, e)| (o, Some(e)))
                    } else {
                        self.inner.run(all).map(|o| (o, None))
                    }
                }
            })
        });
        let (outs, events) = result.map_err(to_py)?;
        if let Some(events) = events {
            self.record(start, events);
        }
        let mut outs: Vec<Option<(String, Value)>> = outs.into_iter().map(Some).collect();
        match picked {
            None => outs
                .into_iter()
                .flatten()
                .map(|(n, v)| value_to_py(py, &n, v))
                .collect(),
            Some(idx) => idx
                .iter()
                .map(|&i| {
                    // An output asked for twice is converted twice (the second from a copy).
                    let (n, v) = match outs[i].take() {
                        Some(x) => {
                            outs[i] = Some(x.clone());
                            x
                        }
                        None => return Err(invalid_argument("output missing")),
                    };
                    value_to_py(py, &n, v)
                })
                .collect(),
        }
    }

    /// Writes the profile so far as a Chrome trace to `path` and clears it; returns the
    /// number of runs written.
    fn end_profiling(&self, path: std::path::PathBuf) -> PyResult<usize> {
        let Some(p) = &self.profile else {
            return Ok(0);
        };
        let runs = std::mem::take(&mut *p.lock().map_err(|_| invalid_argument("profile lock"))?);
        std::fs::write(&path, chrome_trace(&runs))
            .map_err(|e| to_py(smelt_ir::err!(Io, "cannot write {}: {e}", path.display())))?;
        Ok(runs.len())
    }

    /// Every compilation so far, as (shapes, reason).
    fn compilations(&self) -> Vec<Compilation> {
        self.inner
            .compilations()
            .into_iter()
            .map(|c| {
                let shapes = c
                    .shapes
                    .iter()
                    .map(|(n, d)| (n.to_string(), d.to_vec()))
                    .collect();
                (shapes, c.reason)
            })
            .collect()
    }

    /// The explanation of the plan for `shapes` (None: the latest plan) as JSON text.
    #[pyo3(signature = (label, shapes=None))]
    fn explain(
        &self,
        py: Python<'_>,
        label: &str,
        shapes: Option<HashMap<String, Vec<usize>>>,
    ) -> PyResult<String> {
        let plan = match (shapes, self.inner.last_plan()) {
            (None, Some(p)) => p,
            (shapes, _) => {
                let mut s = InputShapes::new();
                for (name, dims) in shapes.unwrap_or_default() {
                    s.insert(&name, dims).map_err(to_py)?;
                }
                py.detach(|| no_panic("compiling the model", || self.inner.plan_for(&s)))
                    .map_err(to_py)?
            }
        };
        let report = smelt_runtime::explain::explain_json(label, &self.inner, &plan);
        Ok(report.to_string())
    }
}

impl PySession {
    /// The Rust session (for the benchmark).
    pub fn session(&self) -> &Session {
        &self.inner
    }
}
