//! A served model: its session, signature as the protocol shows it, the checks a request
//! meets before it is queued, its batcher, warm-up and readiness.

use crate::batch::Policy;
use crate::batcher::{Batcher, Executor, Reply};
use crate::config::ModelConfig;
use crate::datatype;
use crate::error::{Result, ServeError};
use crate::metrics::{Labels, Metrics};
use smelt_ir::{DType, Dim, Tensor, Value, ValueType};
use smelt_runtime::{RunOptions, Session};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An input or output as the protocol's metadata shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSpec {
    /// Its name.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its full shape (the batch dim included); -1 marks a variable dim.
    pub shape: Vec<i64>,
}

/// A model being served.
pub struct ServedModel {
    /// The name clients use.
    pub name: String,
    /// The version served.
    pub version: String,
    /// Its configuration (batching, instances, queue, warm-up).
    pub config: ModelConfig,
    /// Inputs, in the model's order.
    pub inputs: Vec<TensorSpec>,
    /// Outputs, in the model's order.
    pub outputs: Vec<TensorSpec>,
    /// The inputs a request may leave out (they have defaults), by position.
    defaults: Vec<Option<Tensor>>,
    session: Arc<Session>,
    batcher: Batcher,
    ready: AtomicBool,
    labels: Labels,
}

/// Runs batches on a session (a model instance shares it with the others: the session is
/// safe to run from many threads, and each run takes its share of the one pool).
struct SessionExecutor {
    session: Arc<Session>,
    inputs: Vec<String>,
    metrics: Arc<Metrics>,
    labels: Labels,
    /// Whether dim 0 is the batch (for the batch-size metric).
    batching: bool,
}

impl Executor for SessionExecutor {
    fn run(&self, inputs: Vec<Tensor>, deadline: Option<Instant>) -> Result<Vec<Tensor>> {
        let batch = match self.batching {
            true => inputs
                .first()
                .and_then(|t| t.shape().first().copied())
                .unwrap_or(1),
            false => 1,
        };
        let feed: HashMap<String, Value> = self
            .inputs
            .iter()
            .cloned()
            .zip(inputs.into_iter().map(Value::Tensor))
            .collect();
        let options = RunOptions {
            deadline,
            ..Default::default()
        };
        let outs = self.session.run_with(feed, &options)?;
        self.metrics.execution(&self.labels, batch);
        outs.into_iter()
            .map(|(name, v)| match v {
                Value::Tensor(t) => Ok(t),
                _ => Err(ServeError::new(
                    crate::error::Status::Unsupported,
                    format!("output '{name}' is not a tensor; the protocol carries tensors only"),
                )),
            })
            .collect()
    }

    fn idle(&self) {
        self.session.release_idle_arenas();
    }

    fn is_warm(&self, shapes: &[&[usize]]) -> bool {
        let mut given = smelt_runtime::InputShapes::new();
        for (name, dims) in self.inputs.iter().zip(shapes) {
            given.set(name, dims.to_vec());
        }
        self.session.is_compiled_for(&given)
    }
}

/// A dim as the protocol shows it.
fn dim(d: &Dim) -> i64 {
    match d {
        Dim::Known(n) => i64::try_from(*n).unwrap_or(-1),
        _ => -1,
    }
}

fn spec(name: String, ty: Option<&ValueType>) -> Result<TensorSpec> {
    match ty {
        Some(ValueType::Tensor { dtype, shape }) => {
            if datatype::name(*dtype).is_none() {
                return Err(ServeError::internal(format!(
                    "'{name}' is a {dtype} tensor, which the protocol has no datatype for"
                )));
            }
            Ok(TensorSpec {
                shape: shape
                    .as_ref()
                    .map(|s| s.iter().map(dim).collect())
                    .unwrap_or_default(),
                dtype: *dtype,
                name,
            })
        }
        _ => Err(ServeError::internal(format!(
            "'{name}' is not a tensor of known type; the protocol carries typed tensors only"
        ))),
    }
}

impl ServedModel {
    /// Wraps a loaded session: resolves the signature against the config (which wins where
    /// it is more specific), then starts the batcher. Not ready until [`Self::warm_up`].
    pub fn new(
        session: Session,
        config: ModelConfig,
        version: String,
        metrics: Arc<Metrics>,
    ) -> Result<ServedModel> {
        let session = Arc::new(session);
        let graph = &session.model().graph;
        let mut inputs = Vec::new();
        let mut defaults = Vec::new();
        for (io, gi) in session.inputs().into_iter().zip(&graph.inputs) {
            inputs.push(spec(io.name, io.ty.as_ref())?);
            defaults.push(gi.default.clone());
        }
        let mut outputs: Vec<TensorSpec> = session
            .outputs()
            .into_iter()
            .map(|io| spec(io.name, io.ty.as_ref()))
            .collect::<Result<_>>()?;
        let batching = config.max_batch_size > 0;
        for (specs, declared, what) in [
            (&mut inputs, &config.inputs, "input"),
            (&mut outputs, &config.outputs, "output"),
        ] {
            for c in declared {
                let s = specs.iter_mut().find(|s| s.name == c.name).ok_or_else(|| {
                    ServeError::internal(format!(
                        "the config's {what} '{}' is not in the model",
                        c.name
                    ))
                })?;
                apply_config(s, c, batching, what)?;
            }
        }
        if batching {
            for s in inputs.iter_mut().chain(outputs.iter_mut()) {
                match s.shape.first_mut() {
                    Some(d) => *d = -1,
                    None => {
                        return Err(ServeError::internal(format!(
                            "max_batch_size is set, but '{}' has no batch dim",
                            s.name
                        )))
                    }
                }
            }
        }
        let labels = Labels {
            model: config.name.clone(),
            version: version.clone(),
        };
        metrics.register_model(&labels);
        let exec = SessionExecutor {
            session: session.clone(),
            inputs: inputs.iter().map(|s| s.name.clone()).collect(),
            metrics,
            labels: labels.clone(),
            batching,
        };
        let policy = Policy {
            max_batch_size: config.max_batch_size,
            preferred: config
                .dynamic_batching
                .as_ref()
                .map(|b| b.preferred_batch_size.clone())
                .unwrap_or_default(),
            max_queue_delay: config
                .dynamic_batching
                .as_ref()
                .map_or(Duration::ZERO, |b| b.max_queue_delay),
        };
        let policy = match &config.dynamic_batching {
            Some(_) => policy,
            // Batches of one request: the model batches only what a client sends.
            None => Policy {
                max_batch_size: 0,
                ..policy
            },
        };
        let batcher = Batcher::start(
            Arc::new(exec),
            policy,
            config.max_queue_size,
            config.instance_count,
            Duration::from_secs(2),
        )?;
        Ok(ServedModel {
            name: config.name.clone(),
            version,
            config,
            inputs,
            outputs,
            defaults,
            session,
            batcher,
            ready: AtomicBool::new(false),
            labels,
        })
    }

    /// The metric labels of this model.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// Whether the model has been warmed up and takes requests.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The session (for tests and tools).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// An input as a request names it (protocol datatype and dims): its position, type and
    /// shape, checked against the model before any data is decoded.
    pub fn check_wire_input(
        &self,
        name: &str,
        datatype: &str,
        dims: &[i64],
    ) -> Result<(usize, DType, Vec<usize>)> {
        let dtype = datatype::parse(datatype).ok_or_else(|| {
            ServeError::invalid(format!("input '{name}': unknown datatype '{datatype}'"))
        })?;
        let shape = dims
            .iter()
            .map(|&d| {
                usize::try_from(d).map_err(|_| {
                    ServeError::invalid(format!("input '{name}': dim {d} in shape {dims:?}"))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        let pos = self.check_input(name, dtype, &shape)?;
        Ok((pos, dtype, shape))
    }

    /// The position of output `name` (a request may ask for a subset of the outputs).
    pub fn output_position(&self, name: &str) -> Result<usize> {
        self.outputs
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| {
                ServeError::invalid(format!(
                    "unexpected output '{name}' for model '{}'",
                    self.name
                ))
            })
    }

    /// The position of input `name`, after checking its datatype and shape against the
    /// model (before any data is decoded).
    pub fn check_input(&self, name: &str, dtype: DType, shape: &[usize]) -> Result<usize> {
        let (pos, s) = self
            .inputs
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.inputs.iter().map(|s| s.name.as_str()).collect();
                ServeError::invalid(format!(
                    "unexpected input '{name}' for model '{}' (its inputs: {})",
                    self.name,
                    names.join(", ")
                ))
            })?;
        if dtype != s.dtype {
            return Err(ServeError::invalid(format!(
                "input '{name}' has datatype {}, model '{}' expects {}",
                datatype::name(dtype).unwrap_or("?"),
                self.name,
                datatype::name(s.dtype).unwrap_or("?")
            )));
        }
        let fits = !s.shape.is_empty() || shape.is_empty();
        let fits = fits
            && (s.shape.is_empty() && shape.is_empty()
                || s.shape.len() == shape.len()
                    && s.shape
                        .iter()
                        .zip(shape)
                        .all(|(&w, &g)| w < 0 || w as u64 == g as u64));
        if !fits {
            return Err(ServeError::invalid(format!(
                "input '{name}' has shape {shape:?}, model '{}' expects {:?}",
                self.name, s.shape
            )));
        }
        if self.config.max_batch_size > 0 {
            let b = shape.first().copied().unwrap_or(0);
            if b == 0 || b > self.config.max_batch_size {
                return Err(ServeError::invalid(format!(
                    "input '{name}' has batch size {b}, model '{}' takes 1 to {}",
                    self.name, self.config.max_batch_size
                )));
            }
        }
        Ok(pos)
    }

    /// Puts checked inputs (position, tensor) in the model's order, with defaults for
    /// those left out; every required input must be there, with one batch size.
    pub fn assemble(&self, given: Vec<(usize, Tensor)>) -> Result<Vec<Tensor>> {
        let mut slots: Vec<Option<Tensor>> = vec![None; self.inputs.len()];
        for (pos, t) in given {
            if slots[pos].replace(t).is_some() {
                return Err(ServeError::invalid(format!(
                    "input '{}' is given twice",
                    self.inputs[pos].name
                )));
            }
        }
        let out: Vec<Tensor> = slots
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                t.or_else(|| self.defaults[i].clone()).ok_or_else(|| {
                    ServeError::invalid(format!(
                        "missing input '{}' for model '{}'",
                        self.inputs[i].name, self.name
                    ))
                })
            })
            .collect::<Result<_>>()?;
        if self.config.max_batch_size > 0 {
            let dims: Vec<usize> = out
                .iter()
                .map(|t| t.shape().first().copied().unwrap_or(0))
                .collect();
            if dims.windows(2).any(|w| w[0] != w[1]) {
                return Err(ServeError::invalid(format!(
                    "the inputs of model '{}' disagree on the batch size (dim 0: {dims:?})",
                    self.name
                )));
            }
        }
        Ok(out)
    }

    /// Queues checked inputs and waits for the reply (an error at once when the model is
    /// not ready or its queue is full).
    pub async fn infer(&self, inputs: Vec<Tensor>, timeout: Option<Duration>) -> Result<Reply> {
        if !self.is_ready() {
            return Err(ServeError::unavailable(format!(
                "model '{}' is not ready",
                self.name
            )));
        }
        let timeout = timeout.or(self.config.default_timeout);
        let deadline = timeout.map(|t| Instant::now() + t);
        let rx = self.batcher.submit(inputs, deadline)?;
        rx.await
            .map_err(|_| ServeError::internal("the model's worker stopped before answering"))?
    }

    /// Runs the warm-up requests the config declares, or one request at batch 1 when every
    /// dim past the batch dim is known (and each batch size up to the maximum when the model
    /// batches, so that no batch compiles a plan under load); then the model is ready.
    pub fn warm_up(&self) -> Result<()> {
        let mut shapes: Vec<Vec<Vec<usize>>> = Vec::new();
        let batch_dim = self.config.max_batch_size > 0;
        let sizes: Vec<usize> = if batch_dim {
            (1..=self.config.max_batch_size.min(32)).collect()
        } else {
            vec![1]
        };
        let with_batch = |b: usize, dims: &[usize]| {
            if batch_dim {
                std::iter::once(b).chain(dims.iter().copied()).collect()
            } else {
                dims.to_vec()
            }
        };
        if self.config.warmup.is_empty() {
            let fixed: Option<Vec<Vec<usize>>> = self
                .inputs
                .iter()
                .map(|s| {
                    let rest = if batch_dim {
                        s.shape.get(1..)?
                    } else {
                        &s.shape[..]
                    };
                    rest.iter().map(|&d| usize::try_from(d).ok()).collect()
                })
                .collect();
            if let Some(dims) = fixed {
                for &b in &sizes {
                    shapes.push(dims.iter().map(|d| with_batch(b, d)).collect());
                }
            }
        }
        for w in &self.config.warmup {
            let dims: Vec<Vec<usize>> = self
                .inputs
                .iter()
                .map(|s| {
                    w.inputs
                        .iter()
                        .find(|(n, _)| *n == s.name)
                        .map(|(_, d)| d.clone())
                        .ok_or_else(|| {
                            ServeError::internal(format!(
                                "model_warmup gives no dims for input '{}'",
                                s.name
                            ))
                        })
                })
                .collect::<Result<_>>()?;
            let batches = if batch_dim && w.batch_size == 1 {
                sizes.clone()
            } else {
                vec![w.batch_size]
            };
            for b in batches {
                shapes.push(dims.iter().map(|d| with_batch(b, d)).collect());
            }
        }
        for shape in shapes {
            let feed: HashMap<String, Value> = self
                .inputs
                .iter()
                .zip(shape)
                .map(|(s, d)| Ok((s.name.clone(), Value::Tensor(Tensor::zeros(s.dtype, d)?))))
                .collect::<Result<_, smelt_ir::Error>>()?;
            self.session.run(feed).map_err(|e| {
                ServeError::internal(format!("warming up model '{}': {e}", self.name))
            })?;
        }
        self.session.release_idle_arenas();
        self.ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Stops taking requests and finishes those queued.
    pub fn drain(&self) {
        self.ready.store(false, Ordering::Release);
        self.batcher.drain();
    }
}

/// Narrows a spec by a config entry (dims without the batch dim when batching).
fn apply_config(
    s: &mut TensorSpec,
    c: &crate::config::TensorConfig,
    batching: bool,
    what: &str,
) -> Result<()> {
    if let Some(d) = c.dtype {
        if d != s.dtype {
            return Err(ServeError::internal(format!(
                "the config's {what} '{}' is {}, the model's is {}",
                c.name,
                datatype::name(d).unwrap_or("?"),
                datatype::name(s.dtype).unwrap_or("?")
            )));
        }
    }
    if c.dims.is_empty() && s.shape.is_empty() {
        return Ok(());
    }
    let full: Vec<i64> = if batching {
        std::iter::once(-1).chain(c.dims.iter().copied()).collect()
    } else {
        c.dims.clone()
    };
    if !s.shape.is_empty() && full.len() != s.shape.len() {
        return Err(ServeError::internal(format!(
            "the config's {what} '{}' has dims {:?} (batch dim {}), the model's shape is {:?}",
            c.name,
            c.dims,
            if batching { "left out" } else { "included" },
            s.shape
        )));
    }
    let merged = full
        .iter()
        .enumerate()
        .map(|(i, &d)| match s.shape.get(i).copied().unwrap_or(-1) {
            -1 => Ok(d),
            m if d == -1 || d == m => Ok(m),
            m => Err(ServeError::internal(format!(
                "the config's {what} '{}' has dim {d} where the model has {m}",
                c.name
            ))),
        })
        .collect::<Result<_>>()?;
    s.shape = merged;
    Ok(())
}
