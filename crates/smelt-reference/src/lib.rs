//! The reference executor: runs a graph node by node with straightforward kernels.
//!
//! One module per op family mirrors `smelt_ir::op`. Kernels see their inputs through
//! [`Inputs`] and the running graph through [`Ctx`] (for subgraphs and output counts).
//! Every run has a [`RunControl`]: the executor checks its deadline and cancel token before
//! each node (and loops before each iteration), counts the bytes the run holds against its
//! limits, and refuses subgraphs nested deeper than they allow.

pub mod broadcast;
pub mod control;
pub mod elementwise;
pub mod layout;
pub mod llm;
pub mod loss;
pub mod misc;
pub mod nn;
pub mod quant;
pub mod recurrent;
pub mod reduce;
pub mod sequence;

use smelt_ir::{
    bail, ensure, err, ErrorKind, Graph, Op, Result, RunControl, Tensor, Value, ValueId,
};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Values known while a graph runs, by id.
pub type Env = HashMap<ValueId, Value>;

/// The inputs of one node, some possibly omitted.
pub struct Inputs<'a> {
    vals: Vec<Option<&'a Value>>,
}

impl<'a> Inputs<'a> {
    /// Wraps resolved input values.
    pub fn new(vals: Vec<Option<&'a Value>>) -> Self {
        Inputs { vals }
    }

    /// Number of input slots (omitted ones count).
    pub fn len(&self) -> usize {
        self.vals.len()
    }

    /// True when the node has no inputs.
    pub fn is_empty(&self) -> bool {
        self.vals.is_empty()
    }

    /// Input `i` if present (any kind of value).
    pub fn value(&self, i: usize) -> Option<&'a Value> {
        self.vals.get(i).copied().flatten()
    }

    /// Input `i` as a tensor; an error when missing or not a tensor.
    pub fn tensor(&self, i: usize) -> Result<&'a Tensor> {
        let v = self
            .value(i)
            .ok_or_else(|| err!(InvalidModel, "input {i} is required"))?;
        v.tensor().map_err(|e| e.context(format!("input {i}")))
    }

    /// Input `i` as a tensor when present; an error when present but not a tensor.
    pub fn opt_tensor(&self, i: usize) -> Result<Option<&'a Tensor>> {
        match self.value(i) {
            None => Ok(None),
            Some(v) => Ok(Some(
                v.tensor().map_err(|e| e.context(format!("input {i}")))?,
            )),
        }
    }

    /// Input `i` (when present) as integers, e.g. axes or shape inputs.
    pub fn opt_ints(&self, i: usize) -> Result<Option<Vec<i64>>> {
        match self.opt_tensor(i)? {
            None => Ok(None),
            Some(t) => Ok(Some(
                t.to_i64().map_err(|e| e.context(format!("input {i}")))?,
            )),
        }
    }

    /// The present input values, in order (for variadic ops).
    pub fn present(&self) -> impl Iterator<Item = &'a Value> + '_ {
        self.vals.iter().flatten().copied()
    }
}

/// What a kernel may know about the node and graph it runs in.
pub struct Ctx<'a> {
    /// Number of output slots of the node.
    pub n_outputs: usize,
    /// Which output slots the graph uses.
    pub outputs_used: Vec<bool>,
    /// Values computed so far in the running graph (for subgraph captures).
    pub env: &'a Env,
    /// The running graph's constants.
    pub consts: &'a Env,
    /// The run's limits, deadline and cancel token.
    pub control: &'a RunControl,
    /// How deep the running graph nests (0: the main graph).
    pub depth: usize,
    /// What runs subgraphs in place of this executor, when the caller gave one.
    pub runner: Option<&'a dyn SubgraphRunner>,
}

/// Runs the subgraphs of a graph on the reference executor (If branches, Loop and Scan
/// bodies, SequenceMap's and FlexAttention's functions) some other way: the runtime gives
/// one that compiles each to a plan. The reference executor alone (`--opt-level 0`, the
/// oracle) has none and interprets them.
pub trait SubgraphRunner: Sync {
    /// Runs `g` on its positional `inputs` (every input given) and the values of its
    /// captures (in `g.captures` order, each with whether it is a constant of the graph
    /// that runs the node: the same value on every call), under the run control the thread
    /// entered; None leaves it to the reference executor.
    fn run(
        &self,
        g: &Graph,
        inputs: &[Value],
        captures: &[(Value, bool)],
    ) -> Option<Result<Vec<Value>>>;
}

impl Ctx<'_> {
    /// Runs a subgraph with positional inputs; its captures read from the current values.
    pub fn run_subgraph(&self, g: &Graph, inputs: Vec<Value>) -> Result<Vec<Value>> {
        // The node, not a caller, gives a subgraph its inputs: a mismatch is the model's.
        let n = inputs.len();
        ensure!(
            n <= g.inputs.len() && g.inputs[n..].iter().all(|i| i.default.is_some()),
            InvalidModel,
            "subgraph '{}' takes {} inputs, the node gives it {n}",
            g.name,
            g.inputs.len()
        );
        let mut env = Env::new();
        // With a runner, each capture's value and whether it is a constant.
        let mut captured = Vec::new();
        for c in &g.captures {
            let from_env = self.env.get(&c.outer);
            let v = from_env
                .or_else(|| self.consts.get(&c.outer))
                .ok_or_else(|| {
                    err!(
                        InvalidModel,
                        "captured value '{}' is not available",
                        g.name_of(c.inner)
                    )
                })?;
            env.insert(c.inner, v.clone());
            if self.runner.is_some() {
                captured.push((v, from_env.is_none()));
            }
        }
        let depth = self.depth + 1;
        let max = self.control.limits().max_nesting;
        ensure!(
            depth <= max,
            ResourceExhausted,
            "subgraph '{}' nests {depth} deep, over the limit of {max}",
            g.name
        );
        if let Some(runner) = self.runner.filter(|_| n == g.inputs.len()) {
            let captured: Vec<(Value, bool)> =
                captured.into_iter().map(|(v, c)| (v.clone(), c)).collect();
            if let Some(r) = runner.run(g, &inputs, &captured) {
                return r;
            }
        }
        let consts = Constants::of(g);
        let run = Run {
            control: self.control,
            depth,
            runner: self.runner,
        };
        execute(g, inputs.into_iter().map(Some).collect(), env, &consts, run)
    }
}

/// A graph's constants as values, built once and shared by every run of the graph.
pub struct Constants(Env);

impl Constants {
    /// Copies the graph's constants.
    pub fn of(g: &Graph) -> Constants {
        Constants(
            g.constants
                .iter()
                .map(|c| (c.id, Value::Tensor(c.tensor.clone())))
                .collect(),
        )
    }
}

/// Runs a graph on inputs given by name; missing inputs take their defaults.
/// Returns the outputs in graph order.
pub fn run_graph_named(g: &Graph, inputs: HashMap<String, Value>) -> Result<Vec<Value>> {
    run_graph_prepared(g, &Constants::of(g), inputs)
}

/// Runs a graph on inputs given by name, with its constants prepared once by the caller,
/// under the thread's run control (see [`RunControl::enter`]) or the default limits.
pub fn run_graph_prepared(
    g: &Graph,
    consts: &Constants,
    inputs: HashMap<String, Value>,
) -> Result<Vec<Value>> {
    let control = RunControl::current().unwrap_or_default();
    run_graph_controlled(g, consts, inputs, &control)
}

/// Runs a graph on inputs given by name under a run control: its deadline and cancel token
/// are checked before every node, its limits bound what the run allocates and holds.
pub fn run_graph_controlled(
    g: &Graph,
    consts: &Constants,
    inputs: HashMap<String, Value>,
    control: &Arc<RunControl>,
) -> Result<Vec<Value>> {
    run_graph_with_runner(g, consts, inputs, control, None)
}

/// [`run_graph_controlled`], with the graph's subgraphs (at every depth) offered to
/// `runner` first.
pub fn run_graph_with_runner(
    g: &Graph,
    consts: &Constants,
    mut inputs: HashMap<String, Value>,
    control: &Arc<RunControl>,
    runner: Option<&dyn SubgraphRunner>,
) -> Result<Vec<Value>> {
    let mut pos = Vec::with_capacity(g.inputs.len());
    for inp in &g.inputs {
        pos.push(inputs.remove(g.name_of(inp.id)));
    }
    if let Some(extra) = inputs.keys().next() {
        bail!(InvalidInput, "the model has no input named '{extra}'");
    }
    let _entered = control.enter();
    let run = Run {
        control,
        depth: 0,
        runner,
    };
    execute(g, pos, Env::new(), consts, run)
}

/// Runs a graph on positional inputs (None takes the input's default).
pub fn run_graph(g: &Graph, inputs: Vec<Option<Value>>) -> Result<Vec<Value>> {
    let control = RunControl::current().unwrap_or_default();
    let _entered = control.enter();
    let run = Run {
        control: &control,
        depth: 0,
        runner: None,
    };
    execute(g, inputs, Env::new(), &Constants::of(g), run)
}

/// A run control with the process's default limits, for kernels tested outside a run.
#[cfg(test)]
pub(crate) fn test_control() -> &'static RunControl {
    static C: std::sync::OnceLock<RunControl> = std::sync::OnceLock::new();
    C.get_or_init(RunControl::default)
}

/// The run a graph executes in, and how deep it nests.
#[derive(Clone, Copy)]
struct Run<'a> {
    control: &'a RunControl,
    depth: usize,
    runner: Option<&'a dyn SubgraphRunner>,
}

/// Counts a value's bytes against the run, naming what made it.
fn charge(run: Run, v: &Value, what: &dyn Fn() -> String) -> Result<u64> {
    let bytes = v.memory_bytes();
    run.control.charge(bytes, what)?;
    Ok(bytes)
}

fn execute(
    g: &Graph,
    inputs: Vec<Option<Value>>,
    env: Env,
    consts: &Constants,
    run: Run,
) -> Result<Vec<Value>> {
    // Everything this graph's values hold is released when it returns (its outputs are
    // counted again by the node that receives them).
    let mut held = 0u64;
    let r = execute_counted(g, inputs, env, consts, run, &mut held);
    run.control.release(held);
    r
}

fn execute_counted(
    g: &Graph,
    inputs: Vec<Option<Value>>,
    mut env: Env,
    consts: &Constants,
    run: Run,
    held: &mut u64,
) -> Result<Vec<Value>> {
    let consts = &consts.0;
    run.control.check()?;
    if inputs.len() > g.inputs.len() {
        bail!(
            InvalidInput,
            "graph '{}' takes {} inputs, got {}",
            g.name,
            g.inputs.len(),
            inputs.len()
        );
    }
    let mut inputs = inputs;
    inputs.resize(g.inputs.len(), None);
    for (inp, v) in g.inputs.iter().zip(inputs) {
        let v = match (v, &inp.default) {
            (Some(v), _) => v,
            (None, Some(d)) => Value::Tensor(d.clone()),
            (None, None) => bail!(
                InvalidInput,
                "missing required input '{}'",
                g.name_of(inp.id)
            ),
        };
        *held += charge(run, &v, &|| format!("input '{}'", g.name_of(inp.id)))?;
        env.insert(inp.id, v);
    }
    for v in env.values() {
        *held += charge(run, v, &|| "a captured value".to_string())?;
    }
    // Free intermediate values after their last use.
    let mut last_use: HashMap<ValueId, usize> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for id in n.inputs.iter().flatten() {
            last_use.insert(*id, i);
        }
        for sub in n.op.subgraphs() {
            for c in &sub.captures {
                last_use.insert(c.outer, i);
            }
        }
    }
    for o in &g.outputs {
        last_use.insert(*o, usize::MAX);
    }
    // Values computed from the graph's constants alone: a node reading only these fails on
    // the model's data, never on a caller's, so what its kernel calls an invalid input is
    // an invalid model.
    let mut from_consts: HashSet<ValueId> = HashSet::new();
    for (i, node) in g.nodes.iter().enumerate() {
        run.control
            .check()
            .map_err(|e| e.context(format!("before node {} ({})", node.name, node.op.name())))?;
        let constant_only = node.inputs.iter().any(Option::is_some)
            && node.op.subgraphs().is_empty()
            && node
                .inputs
                .iter()
                .flatten()
                .all(|id| consts.contains_key(id) || from_consts.contains(id));
        let outs = {
            let vals = node
                .inputs
                .iter()
                .map(|id| id.and_then(|id| env.get(&id).or_else(|| consts.get(&id))))
                .collect();
            let cx = Ctx {
                n_outputs: node.outputs.len(),
                outputs_used: node.outputs.iter().map(|o| o.is_some()).collect(),
                env: &env,
                consts,
                control: run.control,
                depth: run.depth,
                runner: run.runner,
            };
            run_op(&node.op, &Inputs::new(vals), &cx).map_err(|e| {
                let e = match e.kind() {
                    ErrorKind::InvalidInput if constant_only => {
                        e.with_kind(ErrorKind::InvalidModel)
                    }
                    _ => e,
                };
                e.context(format!("node {} ({})", node.name, node.op.name()))
            })?
        };
        if constant_only {
            from_consts.extend(node.outputs.iter().flatten());
        }
        for (slot, v) in node.outputs.iter().zip(outs) {
            if let Some(id) = slot {
                *held += charge(run, &v, &|| {
                    format!("node {} ({}) output", node.name, node.op.name())
                })?;
                if let Some(old) = env.insert(*id, v) {
                    let b = old.memory_bytes();
                    run.control.release(b);
                    *held = held.saturating_sub(b);
                }
            }
        }
        for id in node.inputs.iter().flatten() {
            if last_use.get(id) == Some(&i) {
                if let Some(old) = env.remove(id) {
                    let b = old.memory_bytes();
                    run.control.release(b);
                    *held = held.saturating_sub(b);
                }
            }
        }
    }
    g.outputs
        .iter()
        .map(|o| {
            env.get(o)
                .or_else(|| consts.get(o))
                .cloned()
                .ok_or_else(|| {
                    err!(
                        InvalidModel,
                        "graph output '{}' was not computed",
                        g.name_of(*o)
                    )
                })
        })
        .collect()
}

/// A zeroed buffer of `dims`' product of elements (`what` names it in errors), allocated
/// only after the count is checked against the run's limits: an output or scratch sized by
/// products of dims (a MatMul over an empty inner axis) can be far larger than its inputs.
pub(crate) fn zeroed<T: Clone + Default>(dims: &[usize], what: &str) -> Result<Vec<T>> {
    let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let n = n.ok_or_else(|| err!(ResourceExhausted, "{what}: {dims:?} elements overflow"))?;
    smelt_ir::limits::try_vec(n, T::default(), &|| what.to_string())
}

/// Runs one op.
pub fn run_op(op: &Op, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    match op {
        Op::Elementwise(o) => elementwise::run(o, x, cx),
        Op::Reduce(o) => reduce::run(o, x, cx),
        Op::Layout(o) => layout::run(o, x, cx),
        Op::Nn(o) => nn::run(o, x, cx),
        Op::Control(o) => control::run(o, x, cx),
        Op::Sequence(o) => sequence::run(o, x, cx),
        Op::Quant(o) => quant::run(o, x, cx),
        Op::Recurrent(o) => recurrent::run(o, x, cx),
        Op::Loss(o) => loss::run(o, x, cx),
        Op::Llm(o) => llm::run(o, x, cx),
        Op::Misc(o) => misc::run(o, x, cx),
    }
}

/// Wraps one tensor as a node's only output.
pub fn one(t: Tensor) -> Result<Vec<Value>> {
    Ok(vec![Value::Tensor(t)])
}

/// Evaluates one op on borrowed values (no subgraph captures), without copying its inputs.
pub fn eval_values(op: &Op, inputs: &[Option<&Value>], n_outputs: usize) -> Result<Vec<Value>> {
    let empty = Env::new();
    let control = RunControl::current().unwrap_or_default();
    let cx = Ctx {
        n_outputs,
        outputs_used: vec![true; n_outputs],
        env: &empty,
        consts: &empty,
        control: &control,
        depth: 0,
        runner: None,
    };
    run_op(op, &Inputs::new(inputs.to_vec()), &cx)
}

/// Evaluates one op on constant tensors (no subgraphs): what constant folding needs.
pub fn eval_op(op: &Op, inputs: &[Option<&Tensor>], n_outputs: usize) -> Result<Vec<Tensor>> {
    let owned: Vec<Option<Value>> = inputs
        .iter()
        .map(|t| t.map(|t| Value::Tensor(t.clone())))
        .collect();
    let vals = owned.iter().map(|v| v.as_ref()).collect();
    let empty = Env::new();
    let control = RunControl::current().unwrap_or_default();
    let cx = Ctx {
        n_outputs,
        outputs_used: vec![true; n_outputs],
        env: &empty,
        consts: &empty,
        control: &control,
        depth: 0,
        runner: None,
    };
    run_op(op, &Inputs::new(vals), &cx)?
        .into_iter()
        .map(Value::into_tensor)
        .collect()
}
