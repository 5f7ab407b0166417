//! A compiled plan: the optimized graph specialized to one set of input shapes, and how it
//! runs (fused kernel groups in a planned arena, or the reference executor when the graph
//! cannot be planned, with the reason).

use crate::profile::KernelEvent;
use crate::segment::Segments;
use smelt_cpu::fused::{Arena, CpuPlan, KernelTiming};
use smelt_ir::kernel::KernelPlan;
use smelt_ir::PassReport;
use smelt_ir::{Graph, Result, RunControl, Tensor, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How a plan runs.
pub enum Execution {
    /// Kernel groups on the CPU.
    Kernels(Box<CpuPlan>),
    /// The reference executor on the optimized graph, and why.
    Reference {
        /// Why the graph was not lowered to kernels.
        reason: String,
    },
    /// A planned head and a tail planned at run time.
    Segments(Box<Segments>),
}

/// A compiled, shape-specialized plan. `run` takes `&self`: many threads may run one plan
/// at once, each with an arena from the plan's pool.
pub struct Plan {
    graph: Graph,
    /// The graph's constants as the reference executor wants them (reference plans only).
    consts: Option<smelt_reference::Constants>,
    /// The subgraphs of a reference plan's nodes, compiled as they are reached (none at
    /// `--opt-level 0`, where the oracle interprets them, or without the compiler).
    #[cfg(feature = "compiler")]
    bodies: Option<crate::bodies::BodyPlans>,
    execution: Execution,
    reports: Vec<PassReport>,
    arenas: Mutex<Vec<Arena>>,
    compile_seconds: f64,
}

impl Plan {
    /// Wraps a compiled graph.
    pub(crate) fn new(
        graph: Graph,
        execution: Execution,
        reports: Vec<PassReport>,
        compile_seconds: f64,
    ) -> Plan {
        let consts = match execution {
            Execution::Reference { .. } => Some(smelt_reference::Constants::of(&graph)),
            Execution::Kernels(_) | Execution::Segments(_) => None,
        };
        Plan {
            graph,
            consts,
            #[cfg(feature = "compiler")]
            bodies: None,
            execution,
            reports,
            arenas: Mutex::new(Vec::new()),
            compile_seconds,
        }
    }

    /// Compiles the subgraphs a reference plan's nodes run (Loop and Scan bodies, If
    /// branches...) with `options` as they are reached, rather than interpreting them.
    #[cfg(feature = "compiler")]
    pub(crate) fn with_compiled_subgraphs(mut self, options: &crate::SessionOptions) -> Plan {
        let has_subgraphs = self
            .graph
            .nodes
            .iter()
            .any(|n| !n.op.subgraphs().is_empty());
        if matches!(self.execution, Execution::Reference { .. }) && has_subgraphs {
            self.bodies = Some(crate::bodies::BodyPlans::new(options));
        }
        self
    }

    /// Makes one arena ready for a run (allocated, its pages mapped) when none is pooled,
    /// so the next run does not pay for it: a caller may do this on another thread while
    /// it prepares the run's inputs.
    pub fn prepare_arena(&self) {
        let Execution::Kernels(cpu) = &self.execution else {
            return;
        };
        if self.arenas.lock().map(|a| !a.is_empty()).unwrap_or(true) {
            return;
        }
        let arena = Arena::new(cpu.plan().memory.arena_bytes);
        if let Ok(mut pool) = self.arenas.lock() {
            pool.push(arena);
        }
    }

    /// The optimized graph. In a plan lowered to kernels the weights' contents live in the
    /// kernel plan, and the graph's constants are left empty.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// What each pass did.
    pub fn pass_reports(&self) -> &[PassReport] {
        &self.reports
    }

    /// The kernel plan, when the graph (or the head of its segments) was lowered to kernels.
    pub fn kernels(&self) -> Option<&KernelPlan> {
        match &self.execution {
            Execution::Kernels(p) => Some(p.plan()),
            Execution::Reference { .. } => None,
            Execution::Segments(s) => s.head()?.kernels(),
        }
    }

    /// Weight number `i` of a plan on the kernels: its storage is shared with the model
    /// constant it came from (or the mapped artifact), not copied per plan.
    pub fn weight(&self, i: usize) -> Option<&Tensor> {
        match &self.execution {
            Execution::Kernels(p) => p.weight(i),
            Execution::Reference { .. } | Execution::Segments(_) => None,
        }
    }

    /// The kernel each group runs, in group order (empty for a reference plan).
    pub fn kernel_names(&self) -> &[String] {
        match &self.execution {
            Execution::Kernels(p) => p.kernel_names(),
            Execution::Reference { .. } => &[],
            Execution::Segments(s) => s.head().map_or(&[], |h| h.kernel_names()),
        }
    }

    /// Threads one run may use and the kernels' instruction set (None for a reference plan).
    pub fn cpu_setup(&self) -> Option<(usize, smelt_kernels::Isa)> {
        match &self.execution {
            Execution::Kernels(p) => Some((p.threads(), p.isa())),
            Execution::Reference { .. } => None,
            Execution::Segments(s) => s.head()?.cpu_setup(),
        }
    }

    /// Why the plan runs on the reference executor, if it does (a plan in segments runs
    /// on kernels as far as it can: see [`Plan::segments`]).
    pub fn fallback_reason(&self) -> Option<&str> {
        match &self.execution {
            Execution::Reference { reason } => Some(reason),
            Execution::Kernels(_) | Execution::Segments(_) => None,
        }
    }

    /// How the plan runs, one line per part: its kernel groups and those of them on the
    /// reference kernels, or the reference executor and why; a plan in segments lists its
    /// head and every tail compiled so far, indented.
    pub fn describe(&self) -> Vec<String> {
        match &self.execution {
            Execution::Reference { reason } => {
                let head = format!("reference executor ({reason})");
                #[cfg(feature = "compiler")]
                if let Some(b) = &self.bodies {
                    return std::iter::once(head).chain(b.describe()).collect();
                }
                vec![head]
            }
            Execution::Segments(s) => s.describe(),
            Execution::Kernels(p) => {
                let plan = p.plan();
                let slow: Vec<String> = plan
                    .groups
                    .iter()
                    .zip(p.kernel_names())
                    .filter(|(_, k)| k.starts_with("reference"))
                    .map(|(g, _)| format!("{} ({})", g.nodes.join(", "), g.ops.join("+")))
                    .collect();
                let mut line = format!("{} kernel groups", plan.groups.len());
                if !slow.is_empty() {
                    line.push_str(&format!("; on the reference kernels: {}", slow.join("; ")));
                }
                vec![line]
            }
        }
    }

    /// The segments, when the graph runs as a head and a tail planned at run time.
    pub fn segments(&self) -> Option<&Segments> {
        match &self.execution {
            Execution::Segments(s) => Some(s),
            _ => None,
        }
    }

    /// Drops the pooled arenas that no run holds now (runs under way keep theirs and return
    /// them when done); returns how many bytes that gave back. A server calls it when a
    /// model goes idle, so a burst of concurrent runs leaves no arenas behind.
    pub fn release_idle_arenas(&self) -> usize {
        let idle = match self.arenas.lock() {
            Ok(mut pool) => std::mem::take(&mut *pool),
            Err(_) => return 0,
        };
        idle.iter().map(Arena::len).sum()
    }

    /// How many arenas are pooled (not held by a run) now.
    pub fn idle_arenas(&self) -> usize {
        self.arenas.lock().map(|a| a.len()).unwrap_or(0)
    }

    /// Seconds the compilation took.
    pub fn compile_seconds(&self) -> f64 {
        self.compile_seconds
    }

    /// Runs the plan on borrowed tensors by input name (absent optional inputs take the
    /// graph's defaults); the outputs come in graph order. Unlike a session's run it
    /// checks the inputs only as far as the kernels need (their types and shapes).
    pub fn run_ref(&self, inputs: &[(&str, &Tensor)]) -> Result<Vec<Value>> {
        self.run_borrowed(inputs, &Arc::new(RunControl::default()), None)
    }

    /// Runs the plan on checked inputs (graph defaults fill absent optional inputs) under
    /// a run control; with `profile`, records one event per kernel.
    pub(crate) fn run(
        &self,
        mut inputs: HashMap<String, Value>,
        control: &Arc<RunControl>,
        profile: Option<&mut Vec<KernelEvent>>,
    ) -> Result<Vec<Value>> {
        let _entered = control.enter();
        let cpu = match &self.execution {
            Execution::Kernels(p) => p,
            Execution::Segments(s) => return s.run(inputs, control, profile),
            Execution::Reference { .. } => {
                let consts = self.consts.as_ref().ok_or_else(|| {
                    smelt_ir::err!(Internal, "a reference plan without constants")
                })?;
                let t = std::time::Instant::now();
                #[cfg(feature = "compiler")]
                let runner = self
                    .bodies
                    .as_ref()
                    .map(|b| b as &dyn smelt_reference::SubgraphRunner);
                #[cfg(not(feature = "compiler"))]
                let runner = None;
                let out = smelt_reference::run_graph_with_runner(
                    &self.graph,
                    consts,
                    inputs,
                    control,
                    runner,
                )?;
                if let Some(events) = profile {
                    events.push(KernelEvent {
                        name: "reference executor".into(),
                        kind: "reference".into(),
                        nodes: self.graph.nodes.iter().map(|n| n.name.clone()).collect(),
                        ops: self
                            .graph
                            .nodes
                            .iter()
                            .map(|n| n.op.name().to_string())
                            .collect(),
                        start_ns: 0,
                        dur_ns: t.elapsed().as_nanos() as u64,
                        flops: 0,
                        bytes: 0,
                    });
                }
                return Ok(out);
            }
        };
        let g = &self.graph;
        let given: Vec<Option<Tensor>> = g
            .inputs
            .iter()
            .map(|i| {
                inputs
                    .remove(g.name_of(i.id))
                    .map(Value::into_tensor)
                    .transpose()
            })
            .collect::<Result<_>>()?;
        self.run_kernels(cpu, given.iter().map(Option::as_ref), control, profile)
    }

    /// Runs the plan on checked, borrowed tensors. A plan on the kernels reads them where
    /// they are; the reference executor takes owned values, so it gets copies.
    pub(crate) fn run_borrowed(
        &self,
        inputs: &[(&str, &Tensor)],
        control: &Arc<RunControl>,
        profile: Option<&mut Vec<KernelEvent>>,
    ) -> Result<Vec<Value>> {
        let Execution::Kernels(cpu) = &self.execution else {
            let owned = inputs
                .iter()
                .map(|(n, t)| (n.to_string(), Value::Tensor((*t).clone())))
                .collect();
            return self.run(owned, control, profile);
        };
        let _entered = control.enter();
        let g = &self.graph;
        let given = g.inputs.iter().map(|i| {
            let name = g.name_of(i.id);
            inputs.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
        });
        self.run_kernels(cpu, given, control, profile)
    }

    /// Runs the kernels on the caller's tensors (one per graph input, in order), the
    /// graph's defaults standing in for absent ones (borrowed, not copied).
    fn run_kernels<'a>(
        &'a self,
        cpu: &CpuPlan,
        given: impl Iterator<Item = Option<&'a Tensor>>,
        control: &Arc<RunControl>,
        profile: Option<&mut Vec<KernelEvent>>,
    ) -> Result<Vec<Value>> {
        let g = &self.graph;
        let refs: Vec<&Tensor> = g
            .inputs
            .iter()
            .zip(given)
            .map(|(i, t)| {
                t.or(i.default.as_ref()).ok_or_else(|| {
                    smelt_ir::err!(InvalidInput, "missing required input '{}'", g.name_of(i.id))
                })
            })
            .collect::<Result<_>>()?;
        let mut arena = self
            .arenas
            .lock()
            .ok()
            .and_then(|mut a| a.pop())
            .unwrap_or_else(|| Arena::new(cpu.plan().memory.arena_bytes));
        let mut timings: Vec<KernelTiming> = Vec::new();
        let result = cpu.run_controlled(
            &refs,
            &mut arena,
            profile.is_some().then_some(&mut timings),
            Some(control),
        );
        if let Ok(mut pool) = self.arenas.lock() {
            pool.push(arena);
        }
        let outs = result?;
        if let Some(events) = profile {
            let plan = cpu.plan();
            for t in timings {
                let grp = &plan.groups[t.group];
                let work = plan.work(grp);
                events.push(KernelEvent {
                    name: grp.nodes.first().cloned().unwrap_or_default(),
                    kind: grp.body.kind().into(),
                    nodes: grp.nodes.clone(),
                    ops: grp.ops.clone(),
                    start_ns: t.start_ns,
                    dur_ns: t.dur_ns,
                    flops: work.flops,
                    bytes: work.bytes,
                });
            }
        }
        Ok(outs.into_iter().map(Value::Tensor).collect())
    }
}
