//! Subgraphs compiled: when a plan runs nodes on the reference executor (a Loop, a Scan, an
//! If whose condition is data, SequenceMap, FlexAttention), the executor offers each of
//! their subgraphs to [`BodyPlans`], which compiles it like any graph (passes, fusion,
//! memory plan) for the types and shapes of the values it gets, caches the plan by them,
//! and runs it; the op's own control (trip counts, conditions, slicing and stacking) stays
//! on the reference executor. A body whose inputs are not all tensors, whose names clash,
//! whose shapes keep changing (past [`MAX_SIGNATURES`] of them, as a Loop that grows a
//! carried value each trip), whose inputs and captures hold fewer than
//! [`MIN_COMPILED_ELEMENTS`] elements in all, or that cannot be planned whole is left to
//! the reference executor, as is any past the [`MAX_TREE_PLANS`] one top-level plan may
//! compile with its nested ones. Compiling happens outside the cache's lock (other runs
//! go on), after checking the run's deadline; a compile that fails for this run's
//! deadline, cancellation or memory is tried again by later runs.

use crate::compile;
use crate::plan::Plan;
use crate::SessionOptions;
use smelt_ir::{Constant, DType, Dim, Graph, GraphInput, Result, RunControl, Value, ValueType};
use smelt_reference::SubgraphRunner;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Shape signatures one subgraph is compiled for before the rest of its calls are
/// interpreted.
pub(crate) const MAX_SIGNATURES: usize = 8;

/// Subgraph plans one top-level plan may compile in all, nested subgraphs' included (each
/// compiled body has subgraph plans of its own, so a per-body bound alone would multiply
/// with the nesting depth: Loops nested four deep, each growing its carried value, kept
/// 585 plans). Past it, subgraphs not compiled yet are interpreted.
pub(crate) const MAX_TREE_PLANS: usize = 64;

thread_local! {
    /// The plan budget of the subgraph being compiled or run on this thread, which the
    /// subgraph plans made meanwhile (its own nested ones, its tails compiled at run time)
    /// share instead of starting their own.
    static TREE_BUDGET: std::cell::RefCell<Option<Arc<AtomicUsize>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `budget` as this thread's subgraph plan budget (the previous one back
/// after).
fn with_budget<R>(budget: &Arc<AtomicUsize>, f: impl FnOnce() -> R) -> R {
    let prev = TREE_BUDGET.with(|b| b.replace(Some(budget.clone())));
    let r = f();
    TREE_BUDGET.with(|b| *b.borrow_mut() = prev);
    r
}

/// Elements a subgraph's inputs and captures must hold for it to be compiled. Below it, a
/// plan's cost around its kernels outweighs them: ONNX's Loop node case (five trips over a
/// one-element sum, its Slice bounds the trip number) took 3.3 us a call interpreted and
/// 72 us compiled (a plan in segments per trip number), its Scan case (a two-element sum,
/// three trips) 9.3 us compiled. A body that does real work, say a matrix product with
/// captured weights, holds far more. `SMELT_COMPILE_SUBGRAPHS_MIN` overrides it (tests
/// set 0 to compile every subgraph).
pub(crate) const MIN_COMPILED_ELEMENTS: usize = 4096;

/// [`MIN_COMPILED_ELEMENTS`], or the environment's override.
fn min_compiled_elements() -> usize {
    static MIN: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MIN.get_or_init(|| {
        std::env::var("SMELT_COMPILE_SUBGRAPHS_MIN")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(MIN_COMPILED_ELEMENTS)
    })
}

/// The types and shapes of a subgraph's inputs then captures.
type Signature = Vec<(DType, Vec<usize>)>;

/// What is known of one subgraph.
#[derive(Default)]
struct Body {
    /// Its name, for `explain`.
    name: String,
    /// Its plans, by signature.
    plans: Vec<(Signature, Arc<Plan>)>,
    /// Why it is left to the reference executor, once it is.
    declined: Option<String>,
    /// Calls it ran compiled.
    calls: u64,
    /// The elements its inputs held when they were too few to compile it.
    small: Option<usize>,
}

/// The compiled subgraphs of one reference plan's graph, keyed by the subgraph's address:
/// the plan owns that graph and never changes it, so an address names one subgraph for
/// the plan's life.
pub(crate) struct BodyPlans {
    options: SessionOptions,
    bodies: Mutex<HashMap<usize, Body>>,
    /// Subgraph plans compiled so far by this plan's tree (see [`MAX_TREE_PLANS`]).
    budget: Arc<AtomicUsize>,
}

impl BodyPlans {
    /// Compiles with `options` (the plan's own).
    pub(crate) fn new(options: &SessionOptions) -> BodyPlans {
        BodyPlans {
            options: options.clone(),
            bodies: Mutex::new(HashMap::new()),
            // A subgraph's own plans share the budget of the plan that compiles or runs it.
            budget: TREE_BUDGET
                .with(|b| b.borrow().clone())
                .unwrap_or_else(|| Arc::new(AtomicUsize::new(0))),
        }
    }

    /// One line per subgraph offered so far: compiled for which shapes (and how each plan
    /// runs), or why it is interpreted.
    pub(crate) fn describe(&self) -> Vec<String> {
        let Ok(bodies) = self.bodies.lock() else {
            return Vec::new();
        };
        let mut lines: Vec<String> = bodies
            .values()
            .map(|b| match (&b.declined, b.small) {
                (Some(why), _) => {
                    format!("subgraph '{}': on the reference executor ({why})", b.name)
                }
                (None, Some(n)) if b.plans.is_empty() => format!(
                    "subgraph '{}': on the reference executor (its inputs hold {n} elements, \
                     under the {} that compiling it needs)",
                    b.name,
                    min_compiled_elements()
                ),
                _ => {
                    let how: Vec<String> = b
                        .plans
                        .iter()
                        .map(|(_, p)| p.describe().join("; "))
                        .collect();
                    format!(
                        "subgraph '{}': compiled for {} shape(s), {} call(s): {}",
                        b.name,
                        b.plans.len(),
                        b.calls,
                        how.join(" | ")
                    )
                }
            })
            .collect();
        lines.sort();
        lines
    }

    /// Records that `g` was interpreted for holding only `elements` elements (unless it
    /// was compiled for other shapes already).
    fn note_small(&self, g: &Graph, elements: usize) {
        let Ok(mut bodies) = self.bodies.lock() else {
            return;
        };
        let body = bodies
            .entry(g as *const Graph as usize)
            .or_insert_with(|| Body {
                name: g.name.clone(),
                ..Body::default()
            });
        if body.plans.is_empty() && body.declined.is_none() {
            body.small = Some(elements);
        }
    }

    /// The plan of `g` for `sig`, compiled now if it is new (outside the lock: other runs
    /// of the plan go on meanwhile); Err(reason) when this call is left to the reference
    /// executor.
    fn plan_for(
        &self,
        g: &Graph,
        sig: &Signature,
        captures: &[(Value, bool)],
    ) -> std::result::Result<Arc<Plan>, String> {
        let key = g as *const Graph as usize;
        {
            let mut bodies = self
                .bodies
                .lock()
                .map_err(|_| "a poisoned lock".to_string())?;
            let body = bodies.entry(key).or_insert_with(|| Body {
                name: g.name.clone(),
                ..Body::default()
            });
            if let Some(why) = &body.declined {
                return Err(why.clone());
            }
            if let Some((_, p)) = body.plans.iter().find(|(s, _)| s == sig) {
                body.calls += 1;
                return Ok(p.clone());
            }
            if body.plans.len() >= MAX_SIGNATURES {
                let why = format!("its inputs took more than {MAX_SIGNATURES} shapes");
                body.declined = Some(why.clone());
                self.budget.fetch_sub(body.plans.len(), Ordering::Relaxed);
                body.plans.clear();
                return Err(why);
            }
        }
        if self.budget.fetch_add(1, Ordering::Relaxed) >= MAX_TREE_PLANS {
            self.budget.fetch_sub(1, Ordering::Relaxed);
            return Err(format!(
                "the plan compiled {MAX_TREE_PLANS} subgraph plans already"
            ));
        }
        let compiled = with_budget(&self.budget, || {
            RunControl::current()
                .map_or(Ok(()), |c| c.check())
                .and_then(|()| compile_body(g, sig, captures, &self.options))
        });
        let mut bodies = self
            .bodies
            .lock()
            .map_err(|_| "a poisoned lock".to_string())?;
        let body = bodies.entry(key).or_default();
        match compiled {
            // Only a whole kernel plan pays: a body in segments (a Slice bounded by the trip
            // number, a data-dependent shape) compiles a tail per trip and ran 2.5x slower
            // than interpreted.
            Ok(p) if p.kernels().is_none() || p.segments().is_some() => {
                let why = "it cannot be planned whole".to_string();
                body.declined = Some(why.clone());
                // The plans given up, this one included, go back to the budget.
                self.budget
                    .fetch_sub(body.plans.len() + 1, Ordering::Relaxed);
                body.plans.clear();
                Err(why)
            }
            Ok(p) => {
                // Another run may have compiled the same signature meanwhile.
                if let Some((_, q)) = body.plans.iter().find(|(s, _)| s == sig) {
                    self.budget.fetch_sub(1, Ordering::Relaxed);
                    body.calls += 1;
                    return Ok(q.clone());
                }
                let p = Arc::new(p);
                body.plans.push((sig.clone(), p.clone()));
                body.calls += 1;
                Ok(p)
            }
            Err(e) => {
                self.budget.fetch_sub(1, Ordering::Relaxed);
                let why = format!("it did not compile: {e}");
                // This run's deadline, cancellation or memory say nothing of later runs.
                let transient = matches!(
                    e.kind(),
                    smelt_ir::ErrorKind::DeadlineExceeded
                        | smelt_ir::ErrorKind::Cancelled
                        | smelt_ir::ErrorKind::ResourceExhausted
                );
                if !transient {
                    body.declined = Some(why.clone());
                }
                Err(why)
            }
        }
    }
}

impl SubgraphRunner for BodyPlans {
    fn run(
        &self,
        g: &Graph,
        inputs: &[Value],
        captures: &[(Value, bool)],
    ) -> Option<Result<Vec<Value>>> {
        if inputs.len() != g.inputs.len() || captures.len() != g.captures.len() {
            return None;
        }
        // Every value a tensor, and enough elements, before anything is built: a small
        // body's every trip comes here.
        let all = || inputs.iter().chain(captures.iter().map(|(v, _)| v));
        let mut elements = 0usize;
        for v in all() {
            match v {
                Value::Tensor(t) => elements = elements.saturating_add(t.len()),
                _ => return None,
            }
        }
        if elements < min_compiled_elements() {
            self.note_small(g, elements);
            return None;
        }
        let sig: Signature = all()
            .filter_map(|v| v.tensor().ok())
            .map(|t| (t.dtype(), t.shape().to_vec()))
            .collect();
        let ids = g.inputs.iter().map(|i| i.id).chain(
            g.captures
                .iter()
                .zip(captures)
                .filter(|(_, (_, constant))| !constant)
                .map(|(c, _)| c.inner),
        );
        let names: Vec<String> = ids.map(|id| g.name_of(id).to_string()).collect();
        let distinct: HashSet<&str> = names.iter().map(String::as_str).collect();
        if distinct.len() != names.len() || names.iter().any(String::is_empty) {
            return None;
        }
        let plan = self.plan_for(g, &sig, captures).ok()?;
        // The captures that change between calls are inputs of the compiled body, after
        // its own; the constant ones are compiled in (weights get packed once).
        let varying = captures.iter().filter(|(_, c)| !c).map(|(v, _)| v);
        let by_name: HashMap<String, Value> = names
            .into_iter()
            .zip(inputs.iter().chain(varying).cloned())
            .collect();
        let control = RunControl::current().unwrap_or_default();
        // Tails the body's plan compiles as it runs share this tree's budget too.
        Some(with_budget(&self.budget, || {
            plan.run(by_name, &control, None)
                .map_err(|e| e.context(format!("subgraph '{}' (compiled)", g.name)))
        }))
    }
}

/// `g` as a graph of its own: its own inputs, then its captures that vary as inputs after
/// them (the constant ones as constants), every input typed by `sig`; then compiled as
/// any graph is.
fn compile_body(
    g: &Graph,
    sig: &Signature,
    captures: &[(Value, bool)],
    options: &SessionOptions,
) -> Result<Plan> {
    let t = Instant::now();
    let mut body = g.clone();
    let own = body.inputs.len();
    let inner: Vec<smelt_ir::ValueId> = body.captures.iter().map(|c| c.inner).collect();
    for (c, (v, constant)) in std::mem::take(&mut body.captures).into_iter().zip(captures) {
        if *constant {
            let tensor = v.tensor()?.clone();
            body.constants.push(Constant {
                id: c.inner,
                tensor,
            });
        } else {
            body.inputs.push(GraphInput {
                id: c.inner,
                default: None,
            });
        }
    }
    // The signature lists the own inputs, then every capture.
    let ids = body.inputs[..own].iter().map(|i| i.id).chain(inner);
    for (id, (dtype, dims)) in ids.zip(sig) {
        let v = body.values.get_mut(id.0 as usize).ok_or_else(|| {
            smelt_ir::err!(Internal, "subgraph '{}' names a value it lacks", g.name)
        })?;
        v.ty = Some(ValueType::Tensor {
            dtype: *dtype,
            shape: Some(dims.iter().map(|&d| Dim::Known(d as u64)).collect()),
        });
    }
    compile::optimize_and_lower(body, options, t, 0)
}
