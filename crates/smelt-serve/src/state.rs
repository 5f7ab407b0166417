//! What both protocols share: the models by name, liveness and readiness, the metrics, and
//! one request's way through a model with its timings recorded.

use crate::error::{Result, ServeError};
use crate::metrics::{Metrics, Times};
use crate::model::ServedModel;
use smelt_ir::Tensor;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// The server's shared state.
pub struct State {
    models: RwLock<HashMap<String, Arc<ServedModel>>>,
    /// The metrics both protocols record into.
    pub metrics: Arc<Metrics>,
    /// The largest request body (HTTP) or message (gRPC) accepted, in bytes.
    pub max_body_bytes: usize,
    /// Set once every model is loaded and warmed up; cleared when shutting down.
    ready: AtomicBool,
}

/// What a request asked for, once its inputs are decoded.
pub struct Decoded<T> {
    /// Checked inputs: (position in the model's inputs, tensor).
    pub inputs: Vec<(usize, Tensor)>,
    /// The request's own timeout, if it set one.
    pub timeout: Option<Duration>,
    /// Whatever the protocol needs to encode the answer (requested outputs, flags).
    pub extra: T,
}

impl State {
    /// A state with no model yet.
    pub fn new(metrics: Arc<Metrics>, max_body_bytes: usize) -> State {
        State {
            models: RwLock::new(HashMap::new()),
            metrics,
            max_body_bytes,
            ready: AtomicBool::new(false),
        }
    }

    /// Adds a loaded model.
    pub fn add(&self, m: Arc<ServedModel>) {
        if let Ok(mut models) = self.models.write() {
            models.insert(m.name.clone(), m);
        }
    }

    /// Every model, by name.
    pub fn models(&self) -> Vec<Arc<ServedModel>> {
        let mut v: Vec<_> = self
            .models
            .read()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// The model of a name (and version, when given): 404 / NOT_FOUND otherwise.
    pub fn model(&self, name: &str, version: Option<&str>) -> Result<Arc<ServedModel>> {
        let version = version.filter(|v| !v.is_empty());
        let m = self
            .models
            .read()
            .ok()
            .and_then(|m| m.get(name).cloned())
            .ok_or_else(|| ServeError::no_model(name, version))?;
        match version {
            Some(v) if v != m.version => Err(ServeError::no_model(name, Some(v))),
            _ => Ok(m),
        }
    }

    /// Marks the server ready (or not).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Whether the server is ready: every model loaded and warmed up, not shutting down.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire) && self.models().iter().all(|m| m.is_ready())
    }

    /// Runs one request through a model: `decode` checks and decodes its inputs, the model
    /// runs them (queued and batched), `encode` writes the answer. Success and failure are
    /// counted, with the time of each stage.
    pub async fn infer<T, R>(
        &self,
        model: &ServedModel,
        started: Instant,
        decode: impl FnOnce(&ServedModel) -> Result<Decoded<T>>,
        encode: impl FnOnce(&ServedModel, Vec<Tensor>, T) -> Result<R>,
    ) -> Result<R> {
        let labels = model.labels();
        let result = async {
            let d = decode(model)?;
            let batch = if model.config.max_batch_size > 0 {
                d.inputs
                    .first()
                    .and_then(|(_, t)| t.shape().first().copied())
                    .unwrap_or(1)
            } else {
                1
            };
            let inputs = model.assemble(d.inputs)?;
            let decoded = Instant::now();
            let reply = model.infer(inputs, d.timeout).await?;
            let ran = Instant::now();
            let out = encode(model, reply.outputs, d.extra)?;
            let times = Times {
                request: started.elapsed(),
                queue: reply.queue,
                input: decoded.saturating_duration_since(started),
                infer: reply.compute,
                output: ran.elapsed(),
            };
            Ok((out, batch, times))
        }
        .await;
        match result {
            Ok((out, batch, times)) => {
                self.metrics.success(labels, batch, &times);
                Ok(out)
            }
            Err(e) => {
                self.metrics.failure(labels, started.elapsed());
                Err(e)
            }
        }
    }
}
