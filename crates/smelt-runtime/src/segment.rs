//! Plans in segments. A graph that cannot be planned whole (an output shape that depends on
//! data, an op shape inference cannot type, a subgraph, strings, sequences) runs as a head
//! and a tail: the head is a kernel plan of every node that can be planned now (the
//! predecessor-closed part), or, when no node can, the reference executor on the nodes that
//! need nothing computed; the tail, the rest of the graph, is compiled when the head has run
//! and its inputs are known. Tail plans are cached by the shapes of the tail's inputs and by
//! the contents of the few small inputs its shapes depend on (a reduction's axes, Reshape's
//! shape, Resize's scales), which the tail is compiled with as constants. A tail may split
//! again; every level plans or runs at least one node, and past [`MAX_DEPTH`] levels the
//! rest runs on the reference executor.

use crate::compile;
use crate::plan::{Execution, Plan};
use crate::profile::KernelEvent;
use crate::{InputShapes, SessionOptions};
use smelt_ir::{
    Constant, DType, Dim, Graph, GraphInput, Node, Result, RunControl, Tensor, Value, ValueId,
    ValueType,
};
use smelt_passes::lower::Plannability;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How many times a graph may split before its rest runs on the reference executor.
pub(crate) const MAX_DEPTH: usize = 32;

/// The largest input (in elements) a tail is compiled with as a constant.
const MAX_BAKED_ELEMENTS: usize = 1024;

/// A graph run as a head, then a tail planned at run time.
pub struct Segments {
    /// None when the whole graph waits for its inputs' contents.
    head: Option<Plan>,
    /// Whether the head is a kernel plan (else the reference executor on its nodes).
    head_planned: bool,
    /// Why the graph was split: what the first node left out of the head lacks.
    reason: String,
    tail: Option<Tail>,
    /// The graph's outputs by name, and those that are constants.
    outputs: Vec<String>,
    const_outputs: HashMap<String, Tensor>,
    options: SessionOptions,
    depth: usize,
}

/// The rest of a graph and its plans.
struct Tail {
    graph: Graph,
    /// Tail inputs whose contents some shape depends on.
    shape_operands: Vec<String>,
    /// Compiled tails, the most recently used last.
    plans: Mutex<Vec<(TailKey, Arc<Plan>)>>,
}

/// What a tail plan is specialized to: its tensor inputs' shapes and its baked inputs'
/// contents.
#[derive(Clone, PartialEq, Eq)]
struct TailKey {
    shapes: InputShapes,
    baked: Vec<(String, Baked)>,
}

/// The contents of a baked input, exactly.
#[derive(Clone, PartialEq, Eq)]
enum Baked {
    Ints(Vec<i64>),
    FloatBits(Vec<u64>),
}

impl Segments {
    /// Splits `g` (optimized and typed; `reason` says why it cannot be planned whole).
    /// The weights move out of `g` into the segments. None when nothing can be split off
    /// (the graph then runs on the reference executor).
    pub(crate) fn split(
        g: &mut Graph,
        reason: String,
        options: &SessionOptions,
        depth: usize,
    ) -> Result<Option<Segments>> {
        if depth == 0 {
            if let Some(s) = Segments::defer(g, &reason, options)? {
                return Ok(Some(s));
            }
        }
        let p = Plannability::new(g);
        let producer: HashMap<ValueId, usize> = g
            .nodes
            .iter()
            .enumerate()
            .flat_map(|(i, n)| n.outputs.iter().flatten().map(move |&v| (v, i)))
            .collect();
        let mut in_head = vec![false; g.nodes.len()];
        for (i, n) in g.nodes.iter().enumerate() {
            in_head[i] = p.node(n).is_none()
                && uses(n)
                    .iter()
                    .all(|v| producer.get(v).is_none_or(|&j| j < i && in_head[j]));
        }
        let head_planned = in_head.iter().any(|&h| h);
        if !head_planned {
            // No node can be planned: the nodes that need nothing computed run first.
            for (i, n) in g.nodes.iter().enumerate() {
                in_head[i] = uses(n).iter().all(|v| !producer.contains_key(v));
            }
        }
        if !in_head.iter().any(|&h| h) {
            return Ok(None);
        }
        // Why: the first node left out of a planned head, or the first node of a reference one.
        let split_reason = g
            .nodes
            .iter()
            .zip(&in_head)
            .filter(|(_, &h)| h != head_planned)
            .find_map(|(n, _)| p.node(n))
            .unwrap_or_else(|| reason.clone());
        drop(p);
        let (head_nodes, tail_nodes): (Vec<_>, Vec<_>) = std::mem::take(&mut g.nodes)
            .into_iter()
            .zip(&in_head)
            .partition(|(_, &h)| h);
        let head_nodes: Vec<Node> = head_nodes.into_iter().map(|(n, _)| n).collect();
        let tail_nodes: Vec<Node> = tail_nodes.into_iter().map(|(n, _)| n).collect();

        let head_uses: HashSet<ValueId> = head_nodes.iter().flat_map(uses).collect();
        let tail_uses: HashSet<ValueId> = tail_nodes.iter().flat_map(uses).collect();
        let needed: HashSet<ValueId> = tail_uses.iter().chain(&g.outputs).copied().collect();
        let mut head_outputs: Vec<ValueId> = Vec::new();
        for n in &head_nodes {
            for &v in n.outputs.iter().flatten() {
                if needed.contains(&v) && !head_outputs.contains(&v) {
                    head_outputs.push(v);
                }
            }
        }
        let tail_produced: HashSet<ValueId> = tail_nodes
            .iter()
            .flat_map(|n| n.outputs.iter().flatten().copied())
            .collect();

        let take_consts = |used: &HashSet<ValueId>| -> Vec<Constant> {
            g.constants
                .iter()
                .filter(|c| used.contains(&c.id))
                .cloned()
                .collect()
        };
        let head_graph = Graph {
            name: g.name.clone(),
            values: g.values.clone(),
            inputs: g
                .inputs
                .iter()
                .filter(|i| head_uses.contains(&i.id))
                .cloned()
                .collect(),
            outputs: head_outputs.clone(),
            constants: take_consts(&head_uses),
            captures: Vec::new(),
            nodes: head_nodes,
        };
        let tail = if tail_nodes.is_empty() {
            None
        } else {
            let mut inputs: Vec<GraphInput> = head_outputs
                .iter()
                .filter(|v| tail_uses.contains(v))
                .map(|&id| GraphInput { id, default: None })
                .collect();
            inputs.extend(
                g.inputs
                    .iter()
                    .filter(|i| tail_uses.contains(&i.id))
                    .cloned(),
            );
            let graph = Graph {
                name: g.name.clone(),
                values: g.values.clone(),
                inputs,
                outputs: g
                    .outputs
                    .iter()
                    .filter(|o| tail_produced.contains(o))
                    .copied()
                    .collect(),
                constants: take_consts(&tail_uses),
                captures: Vec::new(),
                nodes: tail_nodes,
            };
            let operands = smelt_passes::infer_shapes::shape_operands(&graph)?;
            let shape_operands = graph
                .inputs
                .iter()
                .filter(|i| operands.contains(&i.id))
                .map(|i| graph.name_of(i.id).to_string())
                .collect();
            Some(Tail {
                graph,
                shape_operands,
                plans: Mutex::new(Vec::new()),
            })
        };
        let const_outputs = g
            .constants
            .iter()
            .filter(|c| g.outputs.contains(&c.id))
            .map(|c| (g.name_of(c.id).to_string(), c.tensor.clone()))
            .collect();
        // The weights now live in the segments; the graph keeps their ids and types.
        for c in &mut g.constants {
            c.tensor = Tensor::zeros(c.tensor.dtype(), vec![0])?;
        }
        g.nodes = head_graph
            .nodes
            .iter()
            .chain(tail.iter().flat_map(|t| &t.graph.nodes))
            .cloned()
            .collect();

        let mut head_graph = head_graph;
        let execution = if head_planned {
            compile::kernels(&mut head_graph, options)?
        } else {
            Execution::Reference {
                reason: split_reason.clone(),
            }
        };
        let head =
            Plan::new(head_graph, execution, Vec::new(), 0.0).with_compiled_subgraphs(options);
        Ok(Some(Segments {
            head: Some(head),
            head_planned,
            reason: split_reason,
            tail,
            outputs: g
                .outputs
                .iter()
                .map(|&o| g.name_of(o).to_string())
                .collect(),
            const_outputs,
            options: options.clone(),
            depth,
        }))
    }

    /// When some graph input's contents decide a shape, the whole graph is the tail,
    /// compiled with those contents as constants; None when none does.
    fn defer(g: &mut Graph, reason: &str, options: &SessionOptions) -> Result<Option<Segments>> {
        let operands = smelt_passes::infer_shapes::shape_operands(g)?;
        let shape_operands: Vec<String> = g
            .inputs
            .iter()
            .filter(|i| operands.contains(&i.id))
            .map(|i| g.name_of(i.id).to_string())
            .collect();
        if shape_operands.is_empty() {
            return Ok(None);
        }
        let graph = g.clone();
        for c in &mut g.constants {
            c.tensor = Tensor::zeros(c.tensor.dtype(), vec![0])?;
        }
        Ok(Some(Segments {
            head: None,
            head_planned: false,
            reason: reason.to_string(),
            outputs: graph
                .outputs
                .iter()
                .map(|&o| graph.name_of(o).to_string())
                .collect(),
            const_outputs: graph
                .constants
                .iter()
                .filter(|c| graph.outputs.contains(&c.id))
                .map(|c| (graph.name_of(c.id).to_string(), c.tensor.clone()))
                .collect(),
            tail: Some(Tail {
                graph,
                shape_operands,
                plans: Mutex::new(Vec::new()),
            }),
            options: options.clone(),
            depth: 0,
        }))
    }

    /// The head's plan (None when the whole graph is planned at run time).
    pub fn head(&self) -> Option<&Plan> {
        self.head.as_ref()
    }

    /// One line on how the graph runs: the head, why it was split, what the tail waits for.
    pub fn summary(&self) -> String {
        let nodes = self.head.as_ref().map_or(0, |h| h.graph().nodes.len());
        let head = match (&self.head, self.head_planned) {
            (None, _) => "nothing planned ahead".to_string(),
            (Some(_), true) => format!("{nodes} nodes planned to kernels"),
            (Some(_), false) => format!("{nodes} nodes on the reference executor"),
        };
        let Some(t) = &self.tail else {
            return format!("{head} ({})", self.reason);
        };
        let mut on = "the shapes of its inputs".to_string();
        if !t.shape_operands.is_empty() {
            on.push_str(&format!(
                " and the values of {}",
                t.shape_operands
                    .iter()
                    .map(|s| format!("'{s}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        format!(
            "{head}, then {} nodes planned at run time by {on} ({})",
            t.graph.nodes.len(),
            self.reason
        )
    }

    /// The summary, then the head's parts and every tail compiled so far (indented).
    pub fn describe(&self) -> Vec<String> {
        let mut out = vec![self.summary()];
        if let Some(h) = &self.head {
            out.extend(h.describe().into_iter().map(|l| format!("  head: {l}")));
        }
        let Some(t) = &self.tail else {
            return out;
        };
        let Ok(plans) = t.plans.lock() else {
            return out;
        };
        if plans.is_empty() {
            out.push("  tail: not compiled yet (no run so far)".into());
        }
        for (key, plan) in plans.iter() {
            let mut on = key
                .shapes
                .as_slice()
                .iter()
                .map(|(n, d)| format!("{n}={}", crate::cache::format_dims(d)))
                .collect::<Vec<_>>();
            on.extend(key.baked.iter().map(|(n, _)| format!("{n} (its value)")));
            out.push(format!("  tail for {}:", on.join(", ")));
            out.extend(plan.describe().into_iter().map(|l| format!("    {l}")));
        }
        out
    }

    /// Runs the head, then the tail plan for what the head produced.
    pub(crate) fn run(
        &self,
        mut inputs: HashMap<String, Value>,
        control: &Arc<RunControl>,
        mut profile: Option<&mut Vec<KernelEvent>>,
    ) -> Result<Vec<Value>> {
        // Graph inputs later segments or the outputs need stay at hand.
        let mut env: HashMap<String, Value> = HashMap::new();
        let later: Vec<&str> = self
            .tail
            .iter()
            .flat_map(|t| t.graph.inputs.iter().map(|i| t.graph.name_of(i.id)))
            .chain(self.outputs.iter().map(String::as_str))
            .collect();
        for name in later {
            if let Some(v) = inputs.get(name) {
                env.insert(name.to_string(), v.clone());
            }
        }
        if let Some(head) = &self.head {
            let hg = head.graph();
            let head_inputs: HashMap<String, Value> = hg
                .inputs
                .iter()
                .filter_map(|i| {
                    let name = hg.name_of(i.id);
                    inputs.remove(name).map(|v| (name.to_string(), v))
                })
                .collect();
            let outs = head.run(head_inputs, control, profile.as_deref_mut())?;
            for (&id, v) in hg.outputs.iter().zip(outs) {
                env.insert(hg.name_of(id).to_string(), v);
            }
        }
        if let Some(t) = &self.tail {
            let tg = &t.graph;
            let tail_inputs: HashMap<String, Value> = tg
                .inputs
                .iter()
                .filter_map(|i| {
                    let name = tg.name_of(i.id);
                    env.get(name).map(|v| (name.to_string(), v.clone()))
                })
                .collect();
            let plan = t.plan_for(&tail_inputs, &self.options, self.depth, control)?;
            // Inputs compiled in as constants are not passed again.
            let pg = plan.graph();
            let wanted: HashSet<&str> = pg.inputs.iter().map(|i| pg.name_of(i.id)).collect();
            let tail_inputs = tail_inputs
                .into_iter()
                .filter(|(n, _)| wanted.contains(n.as_str()))
                .collect();
            let outs = plan.run(tail_inputs, control, profile)?;
            for (&id, v) in tg.outputs.iter().zip(outs) {
                env.insert(tg.name_of(id).to_string(), v);
            }
        }
        self.outputs
            .iter()
            .map(|name| {
                env.get(name)
                    .cloned()
                    .or_else(|| self.const_outputs.get(name).cloned().map(Value::Tensor))
                    .ok_or_else(|| {
                        smelt_ir::err!(Internal, "segments did not produce output '{name}'")
                    })
            })
            .collect()
    }
}

impl Tail {
    /// The tail plan for these inputs, compiled on a miss (outside the lock, so runs of
    /// cached tails proceed meanwhile).
    fn plan_for(
        &self,
        inputs: &HashMap<String, Value>,
        options: &SessionOptions,
        depth: usize,
        control: &Arc<RunControl>,
    ) -> Result<Arc<Plan>> {
        let key = self.key(inputs);
        let lock = || {
            self.plans
                .lock()
                .map_err(|_| smelt_ir::err!(Internal, "a tail compilation panicked"))
        };
        {
            let mut plans = lock()?;
            if let Some(i) = plans.iter().position(|(k, _)| *k == key) {
                let entry = plans.remove(i);
                let plan = entry.1.clone();
                plans.push(entry);
                return Ok(plan);
            }
        }
        let _entered = control.enter();
        let plan = Arc::new(self.compile(&key, inputs, options, depth)?);
        let mut plans = lock()?;
        if !plans.iter().any(|(k, _)| *k == key) {
            if plans.len() >= options.max_plans.max(1) {
                plans.remove(0);
            }
            plans.push((key, plan.clone()));
        }
        Ok(plan)
    }

    fn key(&self, inputs: &HashMap<String, Value>) -> TailKey {
        let mut key = TailKey {
            shapes: InputShapes::new(),
            baked: Vec::new(),
        };
        let g = &self.graph;
        for i in &g.inputs {
            let name = g.name_of(i.id);
            // An input the run leaves out takes its default (an initializer), baked like
            // a given one when shapes depend on it.
            let t = match (inputs.get(name), &i.default) {
                (Some(Value::Tensor(t)), _) => t,
                (None, Some(d)) => d,
                _ => continue,
            };
            match self.bakes(name, t) {
                Some(b) => key.baked.push((name.to_string(), b)),
                None => key.shapes.set(name, t.shape().to_vec()),
            }
        }
        key
    }

    /// The contents of `t` when the tail is compiled with input `name` as a constant.
    fn bakes(&self, name: &str, t: &Tensor) -> Option<Baked> {
        if !self.shape_operands.iter().any(|s| s == name) || t.len() > MAX_BAKED_ELEMENTS {
            return None;
        }
        match t.dtype() {
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Some(Baked::FloatBits(
                t.to_f64().ok()?.into_iter().map(f64::to_bits).collect(),
            )),
            d if d.is_int() => Some(Baked::Ints(t.to_i64().ok()?)),
            DType::Bool => Some(Baked::Ints(
                t.to_bool().ok()?.into_iter().map(i64::from).collect(),
            )),
            _ => None,
        }
    }

    fn compile(
        &self,
        key: &TailKey,
        inputs: &HashMap<String, Value>,
        options: &SessionOptions,
        depth: usize,
    ) -> Result<Plan> {
        let t = Instant::now();
        let mut g = self.graph.clone();
        let ids: HashMap<String, ValueId> = g
            .inputs
            .iter()
            .map(|i| (g.name_of(i.id).to_string(), i.id))
            .collect();
        for (name, dims) in key.shapes.as_slice() {
            let (Some(&id), Some(Value::Tensor(v))) = (ids.get(name), inputs.get(name)) else {
                continue;
            };
            g.values[id.0 as usize].ty = Some(ValueType::Tensor {
                dtype: v.dtype(),
                shape: Some(dims.iter().map(|&d| Dim::Known(d as u64)).collect()),
            });
        }
        let defaults: HashMap<String, Tensor> = g
            .inputs
            .iter()
            .filter_map(|i| Some((g.name_of(i.id).to_string(), i.default.clone()?)))
            .collect();
        for (name, _) in &key.baked {
            let v = match (inputs.get(name), defaults.get(name)) {
                (Some(Value::Tensor(v)), _) => v,
                (None, Some(d)) => d,
                _ => continue,
            };
            let Some(&id) = ids.get(name) else {
                continue;
            };
            g.inputs.retain(|i| i.id != id);
            g.values[id.0 as usize].ty = Some(ValueType::Tensor {
                dtype: v.dtype(),
                shape: Some(v.shape().iter().map(|&d| Dim::Known(d as u64)).collect()),
            });
            g.constants.push(Constant {
                id,
                tensor: v.clone(),
            });
        }
        compile::optimize_and_lower(g, options, t, depth + 1)
    }
}

/// Every value node `n` reads: its inputs and what its subgraphs capture.
fn uses(n: &Node) -> Vec<ValueId> {
    let mut v: Vec<ValueId> = n.inputs.iter().flatten().copied().collect();
    for sub in n.op.subgraphs() {
        v.extend(sub.captures.iter().map(|c| c.outer));
    }
    v
}
