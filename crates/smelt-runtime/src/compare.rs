//! Where a lower precision changes a model's values: the model compiled twice (say fp32
//! and bf16), each optimized graph run on the reference executor with every node's output
//! kept, and each value both graphs have compared (cosine similarity, largest absolute
//! difference, non-finite elements). The first value that turns NaN or infinite where the
//! baseline is finite, and the first whose cosine falls under a threshold, name the node
//! where the lower precision goes wrong (values in graph order, so the first is the
//! earliest node, what a bisection would find).
//!
//! The optimized graphs carry the precision as casts (see `smelt_passes::precision`), so
//! the reference executor computes what the lower-precision plan computes, up to
//! summation order.

use crate::{Session, SessionOptions};
use smelt_ir::op::ElementwiseOp;
use smelt_ir::{err, DType, Graph, Model, Node, Op, Result, Tensor, Value, ValueId};
use std::collections::HashMap;

/// One value compared.
#[derive(Debug, Clone)]
pub struct ValueDiff {
    /// The node that makes it.
    pub node: String,
    /// Its op.
    pub op: String,
    /// The value's name.
    pub value: String,
    /// Cosine similarity against the baseline (1 for two all-zero tensors).
    pub cosine: f64,
    /// Largest absolute difference over the elements both have finite.
    pub max_abs: f64,
    /// Non-finite elements in the lower-precision value.
    pub nonfinite: usize,
    /// Non-finite elements in the baseline's.
    pub base_nonfinite: usize,
}

/// A comparison, values in the lower-precision graph's node order.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// Every value compared.
    pub values: Vec<ValueDiff>,
    /// The first value with more non-finite elements than the baseline's (an index into
    /// `values`).
    pub first_nonfinite: Option<usize>,
    /// The first value whose cosine is under the threshold.
    pub first_divergent: Option<usize>,
    /// The graph outputs of the two compiled plans themselves (the kernels, not the
    /// reference executor: where the kernels round more than the graph says, as bf16
    /// products on AMX tiles round their activations, this is where it shows).
    pub outputs: Vec<ValueDiff>,
}

/// The optimized graph `options` compile `model` to (the pipeline stopped after its last
/// pass, before lowering, so its constants are intact), run once on `inputs` to fix shapes.
fn optimized(
    model: &Model,
    options: &SessionOptions,
    inputs: &HashMap<String, Value>,
) -> Result<Graph> {
    let mut o = options.clone();
    o.opt_level = o.opt_level.max(1);
    o.stop_after = Some("dead-code".into());
    let s = Session::from_model_with(model.clone(), &o)?;
    s.run(inputs.clone())?;
    let plan = s
        .last_plan()
        .ok_or_else(|| err!(Internal, "the comparison run left no plan"))?;
    Ok(plan.graph().clone())
}

/// Each value a node makes, with the node's name and op, in graph order.
type Made = Vec<(ValueId, String, String)>;

/// Every tensor a node of `g` makes, by value name, with its node's name and op.
fn all_values(
    g: &Graph,
    inputs: &HashMap<String, Value>,
) -> Result<(Made, HashMap<String, Tensor>)> {
    let mut g = g.clone();
    let mut made = Vec::new();
    for n in &g.nodes {
        for o in n.outputs.iter().flatten() {
            made.push((*o, n.name.clone(), n.op.name().to_string()));
        }
    }
    g.outputs = made.iter().map(|m| m.0).collect();
    let out = smelt_reference::run_graph_named(&g, inputs.clone())?;
    let mut values = HashMap::new();
    for ((id, _, _), v) in made.iter().zip(out) {
        if let Value::Tensor(t) = v {
            values.insert(g.name_of(*id).to_string(), t);
        }
    }
    Ok((made, values))
}

/// Makes node `name`'s first output NaN (an added node of the same name adds NaN to it),
/// for checking that a comparison finds it.
fn inject_nan(g: &mut Graph, name: &str) -> Result<()> {
    let at = g.nodes.iter().position(|n| n.name == name).ok_or_else(|| {
        err!(
            InvalidInput,
            "no node named '{name}' in the optimized graph"
        )
    })?;
    let out = g.nodes[at]
        .outputs
        .first()
        .copied()
        .flatten()
        .ok_or_else(|| err!(InvalidInput, "node '{name}' has no output"))?;
    let ty = g.value(out).ty.clone();
    let raw = g.add_value(format!("{}.before_nan", g.name_of(out)), ty);
    g.nodes[at].outputs[0] = Some(raw);
    let nan = g.add_value(format!("{name}.nan"), None);
    g.constants.push(smelt_ir::Constant {
        id: nan,
        tensor: Tensor::from_f32(vec![], vec![f32::NAN])?,
    });
    let cast = g.add_value(format!("{name}.nan_cast"), None);
    g.nodes.insert(
        at + 1,
        Node {
            name: name.to_string(),
            op: Op::Elementwise(ElementwiseOp::CastLike {
                saturate: true,
                round_mode: smelt_ir::op::elementwise::E8M0Rounding::Up,
            }),
            inputs: vec![Some(nan), Some(raw)],
            outputs: vec![Some(cast)],
        },
    );
    g.nodes.insert(
        at + 2,
        Node {
            name: name.to_string(),
            op: Op::Elementwise(ElementwiseOp::Add),
            inputs: vec![Some(raw), Some(cast)],
            outputs: vec![Some(out)],
        },
    );
    Ok(())
}

/// Cosine, largest finite difference and non-finite counts of `a` (lower) against `b`.
fn diff(a: &[f64], b: &[f64]) -> (f64, f64, usize, usize) {
    let (mut ab, mut aa, mut bb, mut max) = (0.0, 0.0, 0.0, 0f64);
    let (mut na, mut nb) = (0, 0);
    for (&x, &y) in a.iter().zip(b) {
        na += usize::from(!x.is_finite());
        nb += usize::from(!y.is_finite());
        if x.is_finite() && y.is_finite() {
            ab += x * y;
            aa += x * x;
            bb += y * y;
            max = max.max((x - y).abs());
        }
    }
    let cos = if aa == 0.0 && bb == 0.0 {
        1.0
    } else {
        ab / (aa.sqrt() * bb.sqrt()).max(f64::MIN_POSITIVE)
    };
    (cos, max, na, nb)
}

/// Compares `model` compiled with `lower` against it compiled with `base` on `inputs`;
/// `min_cosine` marks divergence. `nan_at` poisons that node's output in the lower run.
pub fn compare(
    model: &Model,
    inputs: &HashMap<String, Value>,
    base: &SessionOptions,
    lower: &SessionOptions,
    min_cosine: f64,
    nan_at: Option<&str>,
) -> Result<Comparison> {
    let gb = optimized(model, base, inputs)?;
    let mut gl = optimized(model, lower, inputs)?;
    if let Some(n) = nan_at {
        inject_nan(&mut gl, n)?;
    }
    let (_, want) = all_values(&gb, inputs)?;
    let (order, got) = all_values(&gl, inputs)?;
    let mut values = Vec::new();
    for (id, node, op) in order {
        let name = gl.name_of(id);
        let (Some(a), Some(b)) = (got.get(name), want.get(name)) else {
            continue;
        };
        if a.shape() != b.shape() || a.dtype() == DType::Str || b.dtype() == DType::Str {
            continue;
        }
        let (Ok(x), Ok(y)) = (a.to_f64(), b.to_f64()) else {
            continue;
        };
        let (cosine, max_abs, nonfinite, base_nonfinite) = diff(&x, &y);
        values.push(ValueDiff {
            node,
            op,
            value: name.to_string(),
            cosine,
            max_abs,
            nonfinite,
            base_nonfinite,
        });
    }
    let first_nonfinite = values.iter().position(|v| v.nonfinite > v.base_nonfinite);
    let first_divergent = values.iter().position(|v| v.cosine < min_cosine);
    let run = |o: &SessionOptions| -> Result<Vec<(String, Value)>> {
        Session::from_model_with(model.clone(), o)?.run(inputs.clone())
    };
    let mut outputs = Vec::new();
    for ((name, a), (_, b)) in run(lower)?.iter().zip(run(base)?.iter()) {
        let (Value::Tensor(a), Value::Tensor(b)) = (a, b) else {
            continue;
        };
        let (Ok(x), Ok(y)) = (a.to_f64(), b.to_f64()) else {
            continue;
        };
        if x.len() != y.len() {
            continue;
        }
        let (cosine, max_abs, nonfinite, base_nonfinite) = diff(&x, &y);
        outputs.push(ValueDiff {
            node: String::new(),
            op: String::new(),
            value: name.clone(),
            cosine,
            max_abs,
            nonfinite,
            base_nonfinite,
        });
    }
    Ok(Comparison {
        values,
        first_nonfinite,
        first_divergent,
        outputs,
    })
}
