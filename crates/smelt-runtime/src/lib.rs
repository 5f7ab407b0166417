//! smelt's runtime: a [`Session`] loads a model, checks inputs against its signature and
//! runs it through a compiled [`Plan`].
//!
//! Plans are specialized to concrete input shapes and cached by them; a run at a new shape
//! compiles a new plan, and every compilation is logged with its reason ([`Recompile`]).
//! A plan runs fused kernel groups in one planned arena, or the reference executor when
//! the graph cannot be planned (data-dependent shapes, subgraphs, non-tensor values).

pub mod artifact;
#[cfg(feature = "compiler")]
mod bodies;
mod cache;
mod check;
#[cfg(feature = "compiler")]
pub mod compare;
#[cfg(feature = "compiler")]
mod compile;
pub mod explain;
pub mod npy;
mod plan;
pub mod profile;
#[cfg(feature = "compiler")]
pub mod quantize;
#[cfg(feature = "compiler")]
pub mod segment;
#[cfg(not(feature = "compiler"))]
#[path = "segment_none.rs"]
pub mod segment;
mod shapes;
pub mod tune;

pub use cache::{format_dims, Recompile, ShapeKey};
pub use check::check_inputs;
pub use plan::{Execution, Plan};
pub use profile::KernelEvent;
pub use shapes::InputShapes;

pub use smelt_ir::limits::{available_memory, Memory};
pub use smelt_ir::{CancelToken, Limits, RunControl};

use cache::PlanCache;
use smelt_ir::{Dim, Model, Result, Tensor, Value, ValueType};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Named outputs of a run, in graph order.
pub type Outputs = Vec<(String, Value)>;

/// A model ready to run; `run(&self)` may be called from many threads at once.
pub struct Session {
    model: Model,
    options: SessionOptions,
    cache: Mutex<PlanCache>,
    /// For a session of an artifact: the only input shapes it has a plan for (nothing is
    /// compiled at run time).
    fixed: Option<artifact::Fixed>,
}

/// How a session compiles its model.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// 0 runs the imported graph as is (the reference); 1 and up run the pass pipeline.
    pub opt_level: u8,
    /// Print the IR (to stderr) after this pass, or after every pass with `all`.
    pub dump_after: Option<String>,
    /// Stop the pipeline after this pass.
    pub stop_after: Option<String>,
    /// Input shapes to compile for at load (inputs with symbolic dims need one).
    pub input_shapes: InputShapes,
    /// How many shape-specialized plans to keep; the least recently used goes first.
    pub max_plans: usize,
    /// Threads one run may use (the caller's included), from the process's one pool that
    /// every session shares. Default: the CPUs available to the process (its affinity
    /// mask and cgroup quota respected).
    pub threads: usize,
    /// The instruction set of the CPU kernels (None: the best this CPU supports).
    pub isa: Option<smelt_kernels::Isa>,
    /// What the model and each run may use (largest tensor, bytes per run, nodes, nesting,
    /// a timeout per run). Default: from the memory this process may use, see
    /// [`Limits::default`].
    pub limits: Limits,
    /// Artifacts only: check the weights' checksum at load (reads every weight byte, so
    /// mapping is no longer lazy). The header and plan are always checked.
    pub verify_weights: bool,
    /// Run chains of convolutions in the blocked channel layout (the `blocked-layout`
    /// pass): None chooses, on where the CPU kernels' tiles span two blocks (AVX-512, where
    /// it was measured) unless bf16 puts the convolutions on AMX tiles.
    /// `SMELT_BLOCKED_LAYOUT=0` or `1` in the environment overrides it.
    pub blocked_layout: Option<bool>,
    /// Which nodes' weights are stored in a lower precision (the `precision` pass; default
    /// all f32).
    pub precision: smelt_ir::PrecisionPolicy,
}

/// Options of one run: a deadline or timeout (the sooner of them and the session's timeout
/// applies) and a token to cancel it from another thread.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Stop with DeadlineExceeded once the run has taken this long.
    pub timeout: Option<Duration>,
    /// Stop with DeadlineExceeded at this instant.
    pub deadline: Option<Instant>,
    /// Stop with Cancelled once this token is cancelled.
    pub cancel: Option<CancelToken>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            opt_level: 1,
            dump_after: None,
            stop_after: None,
            input_shapes: InputShapes::new(),
            max_plans: 16,
            threads: smelt_kernels::pool::available_threads(),
            isa: None,
            limits: Limits::default(),
            verify_weights: false,
            blocked_layout: None,
            precision: smelt_ir::PrecisionPolicy::default(),
        }
    }
}

/// One graph input or output as callers see it.
#[derive(Debug, Clone)]
pub struct IoInfo {
    /// Its name.
    pub name: String,
    /// Its declared type, when the model gives one.
    pub ty: Option<ValueType>,
    /// Whether a caller must supply it (inputs only).
    pub required: bool,
}

impl Session {
    /// Loads an ONNX model file and compiles it with the default options.
    pub fn load(path: &Path) -> Result<Session> {
        Session::load_with(path, &SessionOptions::default())
    }

    /// Loads an ONNX model file and compiles it with the given options, or loads a compiled
    /// artifact (told by its magic, whatever the file's extension; see [`artifact`]). An
    /// artifact's weights are mapped: the file must not be changed while the session lives.
    pub fn load_with(path: &Path, options: &SessionOptions) -> Result<Session> {
        if artifact::is_artifact(path) {
            let origin = path.display().to_string();
            return artifact::load::load_file(path, options)
                .and_then(|l| Session::from_loaded(l, options, &origin))
                .map_err(|e| e.context(origin.clone()));
        }
        #[cfg(feature = "compiler")]
        {
            let model = smelt_onnx::load_model_with(path, &options.limits)?;
            Session::from_model_with(model, options)
                .map_err(|e| e.context(path.display().to_string()))
        }
        #[cfg(not(feature = "compiler"))]
        smelt_ir::bail!(
            Unsupported,
            "{}: this build of smelt runs compiled artifacts (.smelt) only: it was built without the compiler (the `compiler` feature)",
            path.display()
        )
    }

    /// A session of an artifact's bytes (a mapped file, or bytes in aligned memory): the
    /// header, plan and signature are checked, the weights read in place, no pass runs.
    /// It runs at the shapes it was compiled for only. `origin` names it in the log.
    pub fn from_artifact(
        file: Arc<dyn smelt_ir::Backing>,
        options: &SessionOptions,
        origin: &str,
    ) -> Result<Session> {
        let l = artifact::load::load(file, options, options.verify_weights)?;
        Session::from_loaded(l, options, origin)
    }

    /// A session of a loaded artifact plan.
    fn from_loaded(
        l: artifact::load::Loaded,
        options: &SessionOptions,
        origin: &str,
    ) -> Result<Session> {
        let s = Session {
            model: Model {
                graph: l.graph,
                opsets: Vec::new(),
                ir_version: 0,
                producer: origin.to_string(),
            },
            options: options.clone(),
            cache: Mutex::new(PlanCache::default()),
            fixed: Some(l.fixed.clone()),
        };
        let reason = format!("loaded from the artifact {origin}");
        if let Ok(mut c) = s.cache.lock() {
            // Every plan stays (nothing compiles at run time); the largest batch is the
            // last inserted, so it is the one `last_plan` reports.
            let max = options.max_plans.max(l.plans.len());
            for (shapes, plan) in l.plans.into_iter().rev() {
                c.insert(shapes, plan, reason.clone(), max);
            }
        }
        options.input_shapes.check(&s.inputs())?;
        if !options.input_shapes.is_empty() {
            s.plan_for(&options.input_shapes)?;
        }
        Ok(s)
    }

    /// Compiles an already imported model with the default options.
    pub fn from_model(model: Model) -> Result<Session> {
        Session::from_model_with(model, &SessionOptions::default())
    }

    /// Prepares an imported model. The shapes in `options.input_shapes` are checked against
    /// the model's inputs (an error of kind InvalidInput names the input). When every input's
    /// shape is known (declared, or given), the plan for those shapes is compiled now;
    /// otherwise the first run compiles.
    pub fn from_model_with(model: Model, options: &SessionOptions) -> Result<Session> {
        let (nodes, depth) = model.graph.size_and_depth();
        options.limits.check_graph_size(nodes, depth)?;
        let s = Session {
            model,
            options: options.clone(),
            cache: Mutex::new(PlanCache::default()),
            fixed: None,
        };
        options.input_shapes.check(&s.inputs())?;
        if let Ok(key) = s.key_from_shapes(&options.input_shapes) {
            s.plan_for_key(key)?;
        }
        Ok(s)
    }

    /// What the artifact this session runs was compiled for (None for a model compiled
    /// at load).
    pub fn artifact(&self) -> Option<&artifact::Fixed> {
        self.fixed.as_ref()
    }

    /// The imported model (before any pass); for an artifact, just its signature.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The options the session compiles with.
    pub fn options(&self) -> &SessionOptions {
        &self.options
    }

    /// What each pass did in the most recent compilation (empty before the first).
    pub fn pass_reports(&self) -> Vec<smelt_ir::PassReport> {
        self.last_plan()
            .map(|p| p.pass_reports().to_vec())
            .unwrap_or_default()
    }

    /// The most recently compiled plan.
    pub fn last_plan(&self) -> Option<Arc<Plan>> {
        let c = self.cache.lock().ok()?;
        c.last.as_ref().and_then(|k| c.plans.get(k).cloned())
    }

    /// The most recent compilations (the last 256), in order, with their reasons.
    pub fn compilations(&self) -> Vec<Recompile> {
        self.cache
            .lock()
            .map(|c| c.log.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many plans have been compiled.
    pub fn compile_count(&self) -> usize {
        self.cache.lock().map(|c| c.compiled).unwrap_or(0)
    }

    /// Drops the arenas that no run holds now from every cached plan (see
    /// [`Plan::release_idle_arenas`]); returns the bytes given back.
    pub fn release_idle_arenas(&self) -> usize {
        let plans: Vec<Arc<Plan>> = match self.cache.lock() {
            Ok(c) => c.plans.values().cloned().collect(),
            Err(_) => return 0,
        };
        plans.iter().map(|p| p.release_idle_arenas()).sum()
    }

    /// The inputs, in order.
    pub fn inputs(&self) -> Vec<IoInfo> {
        let g = &self.model.graph;
        g.inputs
            .iter()
            .map(|i| IoInfo {
                name: g.name_of(i.id).to_string(),
                ty: g.value(i.id).ty.clone(),
                required: i.default.is_none(),
            })
            .collect()
    }

    /// The outputs, in order.
    pub fn outputs(&self) -> Vec<IoInfo> {
        let g = &self.model.graph;
        g.outputs
            .iter()
            .map(|&o| IoInfo {
                name: g.name_of(o).to_string(),
                ty: g.value(o).ty.clone(),
                required: false,
            })
            .collect()
    }

    /// The plan for the given input shapes (inputs not named use their declared or
    /// default shape), compiling it on a cache miss; the shapes are checked first.
    pub fn plan_for(&self, shapes: &InputShapes) -> Result<Arc<Plan>> {
        shapes.check(&self.inputs())?;
        let key = self.key_from_shapes(shapes)?;
        self.plan_for_key(key)
    }

    /// Whether a run at these input shapes finds its plan compiled, so that it would not
    /// compile first (an artifact never compiles; shapes it refuses count as compiled).
    pub fn is_compiled_for(&self, shapes: &InputShapes) -> bool {
        if self.fixed.is_some() {
            return true;
        }
        let Ok(key) = self.key_from_shapes(shapes) else {
            return true;
        };
        self.lock_cache().map_or(true, |c| c.contains(&key))
    }

    /// Runs the model on named inputs; returns (name, value) per output in graph order.
    pub fn run(&self, inputs: HashMap<String, Value>) -> Result<Vec<(String, Value)>> {
        self.run_inner(inputs, &RunOptions::default(), None)
    }

    /// Runs the model with a deadline or a cancel token: the run stops with an error of
    /// kind DeadlineExceeded or Cancelled at its next check (between nodes, loop
    /// iterations and kernel groups; a kernel already running finishes first).
    pub fn run_with(
        &self,
        inputs: HashMap<String, Value>,
        options: &RunOptions,
    ) -> Result<Outputs> {
        self.run_inner(inputs, options, None)
    }

    /// Runs the model and records one timing event per kernel.
    pub fn run_profiled(
        &self,
        inputs: HashMap<String, Value>,
    ) -> Result<(Outputs, Vec<KernelEvent>)> {
        let mut events = Vec::new();
        let out = self.run_inner(inputs, &RunOptions::default(), Some(&mut events))?;
        Ok((out, events))
    }

    /// The control of one run: the session's limits, the sooner of the two timeouts and
    /// the run's deadline, the run's cancel token.
    pub fn run_control(&self, options: &RunOptions) -> Arc<RunControl> {
        let mut limits = self.options.limits.clone();
        limits.timeout = match (limits.timeout, options.timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Arc::new(RunControl::new(
            limits,
            options.deadline,
            options.cancel.clone(),
        ))
    }

    /// Runs the model on borrowed tensors, `(input name, tensor)`: the caller keeps its
    /// inputs, and a plan on the kernels reads them in place. Returns what [`Session::run`]
    /// returns.
    pub fn run_ref(&self, inputs: &[(&str, &Tensor)]) -> Result<Outputs> {
        self.run_ref_inner(inputs, &RunOptions::default(), None)
    }

    /// [`Session::run_ref`] with a deadline or a cancel token, as [`Session::run_with`].
    pub fn run_ref_with(
        &self,
        inputs: &[(&str, &Tensor)],
        options: &RunOptions,
    ) -> Result<Outputs> {
        self.run_ref_inner(inputs, options, None)
    }

    /// [`Session::run_ref`], recording one timing event per kernel.
    pub fn run_ref_profiled(
        &self,
        inputs: &[(&str, &Tensor)],
    ) -> Result<(Outputs, Vec<KernelEvent>)> {
        let mut events = Vec::new();
        let out = self.run_ref_inner(inputs, &RunOptions::default(), Some(&mut events))?;
        Ok((out, events))
    }

    fn run_ref_inner(
        &self,
        inputs: &[(&str, &Tensor)],
        options: &RunOptions,
        profile: Option<&mut Vec<KernelEvent>>,
    ) -> Result<Outputs> {
        let control = self.run_control(options);
        control.check()?;
        check::check_tensor_inputs(&self.inputs(), inputs)?;
        let key = self.key_of(|name| {
            inputs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| Some(*t))
        });
        if let Some((bucket, n)) = self.bucket_of(&key) {
            let plan = self.plan_for_key(bucket.clone())?;
            let padded = inputs
                .iter()
                .map(|(name, t)| match bucket.get(name) {
                    Some(d) => Ok((*name, artifact::bucket::pad_batch(t, d[0])?)),
                    None => Ok((*name, (*t).clone())),
                })
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<(&str, &Tensor)> = padded.iter().map(|(n, t)| (*n, t)).collect();
            let outs = plan.run_borrowed(&refs, &control, profile)?;
            return self.cut_outputs(outs, n);
        }
        let plan = {
            let _entered = control.enter();
            self.plan_for_key(key)?
        };
        let outs = plan.run_borrowed(inputs, &control, profile)?;
        Ok(self.name_outputs(outs))
    }

    fn name_outputs(&self, outs: Vec<Value>) -> Outputs {
        self.outputs()
            .into_iter()
            .map(|o| o.name)
            .zip(outs)
            .collect()
    }

    fn run_inner(
        &self,
        inputs: HashMap<String, Value>,
        options: &RunOptions,
        profile: Option<&mut Vec<KernelEvent>>,
    ) -> Result<Vec<(String, Value)>> {
        let control = self.run_control(options);
        control.check()?;
        check_inputs(&self.inputs(), &inputs)?;
        let key = self.key_from_values(&inputs);
        if let Some((bucket, n)) = self.bucket_of(&key) {
            let plan = self.plan_for_key(bucket.clone())?;
            let mut padded = HashMap::with_capacity(inputs.len());
            for (name, v) in inputs {
                let v = match (bucket.get(&name), v) {
                    (Some(d), Value::Tensor(t)) => {
                        Value::Tensor(artifact::bucket::pad_batch(&t, d[0])?)
                    }
                    (_, v) => v,
                };
                padded.insert(name, v);
            }
            let outs = plan.run(padded, &control, profile)?;
            return self.cut_outputs(outs, n);
        }
        let plan = {
            let _entered = control.enter();
            self.plan_for_key(key)?
        };
        let outs = plan.run(inputs, &control, profile)?;
        Ok(self.name_outputs(outs))
    }

    /// For a bucketed artifact run at a batch it has no plan of its own for: the shapes of
    /// the bucket's plan, and the real batch.
    fn bucket_of(&self, key: &ShapeKey) -> Option<(ShapeKey, usize)> {
        let fixed = self.fixed.as_ref().filter(|f| !f.buckets.is_empty())?;
        let (bucket, n) = fixed.bucket_for(key)?;
        (bucket != *key).then_some((bucket, n))
    }

    /// A bucketed run's outputs cut back to its real batch, named.
    fn cut_outputs(&self, outs: Vec<Value>, n: usize) -> Result<Outputs> {
        let outs = outs
            .into_iter()
            .map(|v| artifact::bucket::cut_batch(v, n))
            .collect::<Result<Vec<_>>>()?;
        Ok(self.name_outputs(outs))
    }

    /// The plan for a key. A miss compiles outside the cache's lock, so runs at cached
    /// shapes go on meanwhile; a run at a key already being compiled waits for that
    /// compilation instead of starting another.
    fn plan_for_key(&self, key: ShapeKey) -> Result<Arc<Plan>> {
        let (pending, reason) = {
            let mut c = self.lock_cache()?;
            if let Some(p) = c.get(&key) {
                return Ok(p);
            }
            if let Some(fixed) = &self.fixed {
                // A bucketed artifact runs these shapes with a larger batch's plan.
                if let Some(p) = fixed.bucket_for(&key).and_then(|(b, _)| c.get(&b)) {
                    return Ok(p);
                }
                return Err(artifact_miss(&key, &fixed.shapes, &fixed.buckets));
            }
            if let Some(p) = c.compiling.get(&key) {
                let p = p.clone();
                drop(c);
                return p.wait();
            }
            let p = Arc::new(cache::Pending::default());
            c.compiling.insert(key.clone(), p.clone());
            (p, c.miss_reason(&key))
        };
        // Whatever happens below (an error or a panic), the waiters get an answer and the
        // key leaves the set of compilations under way.
        let mut guard = CompileGuard {
            session: self,
            key: &key,
            pending: &pending,
            result: None,
        };
        // Constant folding allocates within the session's limits (or the run's, when a
        // run compiles).
        let control = RunControl::current()
            .unwrap_or_else(|| Arc::new(RunControl::new(self.options.limits.clone(), None, None)));
        let _entered = control.enter();
        #[cfg(feature = "compiler")]
        let result = compile::compile(&self.model.graph, &key, &self.options).map(Arc::new);
        #[cfg(not(feature = "compiler"))]
        let result: Result<Arc<Plan>> = Err(smelt_ir::err!(
            Unsupported,
            "this build of smelt runs compiled artifacts only (built without the `compiler` feature): it cannot compile a model"
        ));
        if let Ok(plan) = &result {
            self.lock_cache()?
                .insert(key.clone(), plan.clone(), reason, self.options.max_plans);
        }
        guard.result = Some(result.clone());
        result
    }

    fn lock_cache(&self) -> Result<std::sync::MutexGuard<'_, PlanCache>> {
        self.cache
            .lock()
            .map_err(|_| smelt_ir::err!(Internal, "a compilation panicked in another thread"))
    }

    /// The cache key of a run (checked inputs): the shape of every tensor input (given or
    /// default), in graph order.
    fn key_from_values(&self, inputs: &HashMap<String, Value>) -> ShapeKey {
        self.key_of(|name| inputs.get(name).map(Value::as_tensor))
    }

    /// The cache key from a lookup of each input: None when not given, Some(None) when
    /// given but not a tensor.
    fn key_of<'a>(&'a self, get: impl Fn(&str) -> Option<Option<&'a Tensor>>) -> ShapeKey {
        let mut key = InputShapes::new();
        if self.options.opt_level == 0 {
            return key;
        }
        let g = &self.model.graph;
        for i in &g.inputs {
            let name = g.name_of(i.id);
            let t = match get(name) {
                Some(Some(t)) => t,
                Some(None) => continue,
                None => match &i.default {
                    Some(t) => t,
                    None => continue,
                },
            };
            key.set(name, t.shape().to_vec());
        }
        key
    }

    /// The cache key for given (checked) shapes; an error names an input whose shape is
    /// unknown.
    fn key_from_shapes(&self, given: &InputShapes) -> Result<ShapeKey> {
        let mut key = InputShapes::new();
        if self.options.opt_level == 0 {
            return Ok(key);
        }
        let g = &self.model.graph;
        for i in &g.inputs {
            let name = g.name_of(i.id);
            if let Some(d) = given.get(name) {
                key.set(name, d.to_vec());
                continue;
            }
            if let Some(t) = &i.default {
                key.set(name, t.shape().to_vec());
                continue;
            }
            match &g.value(i.id).ty {
                Some(ValueType::Tensor { shape: Some(s), .. }) => {
                    let dims: Option<Vec<usize>> = s
                        .iter()
                        .map(|d| match d {
                            Dim::Known(n) => usize::try_from(*n).ok(),
                            _ => None,
                        })
                        .collect();
                    let dims = dims.ok_or_else(|| {
                        smelt_ir::err!(
                            InvalidInput,
                            "no shape given for input '{name}' (it has symbolic dimensions)"
                        )
                    })?;
                    key.set(name, dims);
                }
                Some(ValueType::Tensor { shape: None, .. }) | None => {
                    smelt_ir::bail!(
                        InvalidInput,
                        "no shape given for input '{name}' (its shape is unknown)"
                    )
                }
                Some(_) => {}
            }
        }
        Ok(key)
    }
}

/// The error of a run of an artifact at shapes it was not compiled for.
fn artifact_miss(key: &ShapeKey, fixed: &ShapeKey, buckets: &[usize]) -> smelt_ir::Error {
    if !buckets.is_empty() {
        let list: Vec<String> = buckets.iter().map(|b| b.to_string()).collect();
        return smelt_ir::err!(
            InvalidInput,
            "inputs of shapes {key} fit none of the artifact's plans: it runs every input at {} with dim 0 (the batch) up to {} (buckets {})",
            fixed,
            buckets.last().copied().unwrap_or(0),
            list.join(", ")
        );
    }
    let differs = key
        .iter()
        .find(|(name, dims)| fixed.get(name) != Some(*dims));
    match differs {
        Some((name, dims)) => smelt_ir::err!(
            InvalidInput,
            "input '{name}' has shape {}; the artifact was compiled for {} (compile one for \
             these shapes, or load the source model)",
            format_dims(dims),
            fixed
                .get(name)
                .map(format_dims)
                .unwrap_or_else(|| "no such input".into())
        ),
        None => smelt_ir::err!(
            InvalidInput,
            "the artifact was compiled for other input shapes"
        ),
    }
}

/// Ends a compilation on every path: removes its key from the compilations under way and
/// hands the waiters its result (an Internal error when the compiler panicked).
struct CompileGuard<'a> {
    session: &'a Session,
    key: &'a ShapeKey,
    pending: &'a cache::Pending,
    result: Option<Result<Arc<Plan>>>,
}

impl Drop for CompileGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut c) = self.session.cache.lock() {
            c.compiling.remove(self.key);
        }
        let r = self.result.take().unwrap_or_else(|| {
            Err(smelt_ir::err!(
                Internal,
                "the compilation for {} panicked",
                self.key
                    .iter()
                    .map(|(n, d)| format!("{n}={}", format_dims(d)))
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
        });
        self.pending.finish(r);
    }
}
