//! LayerNormalization over the last axis:
//! `d = x - ReduceMean(x)`, `v = ReduceMean(d^2)` (`Pow(d, 2)` or `d * d`),
//! `y = d / Sqrt(v + eps)` (or `d * Reciprocal(Sqrt(v + eps))`), then optionally `* gamma`
//! and `+ beta`. Matched forwards from the first ReduceMean; the last node becomes the op.
//! Without gamma a ones constant is made when the last dimension is known.

use super::pattern::*;
use super::{Arg, Rewrite};
use smelt_ir::op::{NnOp, ReduceOp};
use smelt_ir::{DType, Dim, Graph, Op, Tensor, ValueId};

/// Matches a LayerNormalization whose first ReduceMean is node `i`.
pub(crate) fn recognize(g: &Graph, i: usize) -> Option<Rewrite> {
    let x = mean_input(g, i)?;
    let xr = rank(g, x);
    if !last_axis_mean(g, i, xr) {
        return None;
    }
    let mean = single_output(&g.nodes[i])?;
    let mut nodes = vec![i];
    // d = x - mean
    let sub = only_user(g, mean)?;
    let (sx, sm) = binary_inputs(&g.nodes[sub])?;
    if !is_op(g, sub, "Sub") || sx != x || sm != mean {
        return None;
    }
    nodes.push(sub);
    let d = single_output(&g.nodes[sub])?;
    let r = rank(g, x).unwrap_or(0);
    // d's users: the square and the normalizing division.
    let du = users(g, d);
    let [u1, u2] = du[..] else { return None };
    let (sq, div) = if is_square(g, u1, d, r) {
        (u1, u2)
    } else {
        (u2, u1)
    };
    if !is_square(g, sq, d, r) {
        return None;
    }
    nodes.push(sq);
    let var_node = only_user(g, single_output(&g.nodes[sq])?)?;
    if !last_axis_mean(g, var_node, xr) || mean_input(g, var_node)? != single_output(&g.nodes[sq])?
    {
        return None;
    }
    nodes.push(var_node);
    let var = single_output(&g.nodes[var_node])?;
    let add = only_user(g, var)?;
    let mut epsilon = None;
    if is_op(g, add, "Add") {
        let eps = other_operand(&g.nodes[add], |v| v == var)?;
        if let Some((e, _, er)) = float_scalar(g, eps) {
            epsilon = (scalar_rank_ok(g, x, er) && e >= 0.0).then_some(e);
        }
    }
    let epsilon = epsilon?;
    nodes.push(add);
    let sqrt = only_user(g, single_output(&g.nodes[add])?)?;
    if !is_op(g, sqrt, "Sqrt") {
        return None;
    }
    nodes.push(sqrt);
    let std = single_output(&g.nodes[sqrt])?;
    let mut last = normalize(g, div, d, std, &mut nodes)?;
    // Optional scale and shift.
    let mut gamma = None;
    let mut beta = None;
    if let Some((m, gm)) = affine(g, last, "Mul", x) {
        nodes.push(m);
        last = m;
        gamma = Some(gm);
    }
    if let Some((a, bt)) = affine(g, last, "Add", x) {
        nodes.push(a);
        last = a;
        beta = Some(bt);
    }
    // Every intermediate is read inside the pattern only.
    let inner_ok = nodes
        .iter()
        .filter(|&&j| j != last)
        .all(|&j| single_output(&g.nodes[j]).is_some_and(|o| used_only_by(g, o, &nodes)));
    if !inner_ok || !float_or_unknown(g, x) {
        return None;
    }
    let scale = match gamma {
        Some(v) => Arg::Value(v),
        None => ones(g, x, &g.nodes[last].name)?,
    };
    nodes.retain(|&j| j != last);
    Some(Rewrite {
        root: last,
        op: Op::Nn(NnOp::LayerNormalization {
            axis: -1,
            epsilon: epsilon as f32,
            stash_type: DType::F32,
        }),
        inputs: vec![Arg::Value(x), scale, beta.map_or(Arg::Absent, Arg::Value)],
        interior: nodes,
    })
}

/// The data input of node `i` when it is a ReduceMean with one output.
fn mean_input(g: &Graph, i: usize) -> Option<ValueId> {
    let n = &g.nodes[i];
    let Op::Reduce(ReduceOp::ReduceMean(_)) = &n.op else {
        return None;
    };
    single_output(n)?;
    *n.inputs.first()?
}

/// True when node `i` is a keepdims ReduceMean over the last axis only of an input of
/// rank `r` (needed only when the axis is given as a non-negative index).
fn last_axis_mean(g: &Graph, i: usize, r: Option<usize>) -> bool {
    let n = &g.nodes[i];
    let Op::Reduce(ReduceOp::ReduceMean(red)) = &n.op else {
        return false;
    };
    let axes = match &red.axes {
        Some(a) => Some(a.clone()),
        None => n
            .inputs
            .get(1)
            .copied()
            .flatten()
            .and_then(|a| constant(g, a))
            .and_then(|t| t.to_i64().ok()),
    };
    let last = match axes.as_deref() {
        Some([-1]) => true,
        Some(&[a]) => r.is_some_and(|r| a >= 0 && a as usize + 1 == r),
        _ => false,
    };
    red.keepdims && last
}

/// The one node reading `v`.
fn only_user(g: &Graph, v: ValueId) -> Option<usize> {
    match users(g, v)[..] {
        [u] => Some(u),
        _ => None,
    }
}

/// True when node `j` squares `d`: `Pow(d, 2)` or `d * d`.
fn is_square(g: &Graph, j: usize, d: ValueId, r: usize) -> bool {
    let n = &g.nodes[j];
    let Some((a, b)) = binary_inputs(n) else {
        return false;
    };
    (is_op(g, j, "Mul") && a == d && b == d) || (is_op(g, j, "Pow") && a == d && is_two(g, b, r))
}

/// A constant exponent 2 (float or integer).
fn is_two(g: &Graph, v: ValueId, r: usize) -> bool {
    constant(g, v)
        .filter(|t| t.len() == 1 && t.rank() <= r.max(1))
        .and_then(|t| t.to_f64().ok())
        .is_some_and(|e| e.first() == Some(&2.0))
}

/// `d / std`, or `d * Reciprocal(std)`, at node `div`: the node giving the normalized value.
fn normalize(
    g: &Graph,
    div: usize,
    d: ValueId,
    std: ValueId,
    nodes: &mut Vec<usize>,
) -> Option<usize> {
    let n = &g.nodes[div];
    let (a, b) = binary_inputs(n)?;
    if is_op(g, div, "Div") && a == d && b == std {
        nodes.push(div);
        return Some(div);
    }
    if !is_op(g, div, "Mul") {
        return None;
    }
    let r = other_operand(n, |v| v == d)?;
    let rec = producer(g, r)?;
    if !is_op(g, rec, "Reciprocal") || g.nodes[rec].inputs.first() != Some(&Some(std)) {
        return None;
    }
    nodes.extend([rec, div]);
    Some(div)
}

/// The single user of node `last`'s output when it is `op` with a per-feature operand
/// (a rank-1 constant or value that matches the last dimension of `x`): (node, operand).
fn affine(g: &Graph, last: usize, op: &str, x: ValueId) -> Option<(usize, ValueId)> {
    let out = single_output(&g.nodes[last])?;
    if escapes(g, out) {
        return None;
    }
    let j = only_user(g, out)?;
    if !is_op(g, j, op) {
        return None;
    }
    let p = other_operand(&g.nodes[j], |v| v == out)?;
    let len = match (constant(g, p), shape(g, p)) {
        (Some(t), _) if t.rank() == 1 => Dim::Known(t.len() as u64),
        (None, Some(s)) if s.len() == 1 => s[0].clone(),
        _ => return None,
    };
    let last_dim = shape(g, x).and_then(|s| s.last());
    let fits = match last_dim {
        Some(dx) => same_dim(&len, dx) || len == Dim::Known(1),
        // Unknown width: a vector of more than one element must match it in a valid graph.
        None => matches!(len, Dim::Known(_)),
    };
    let dtype_ok = constant(g, p).is_none_or(|t| is_plain_float(t.dtype()));
    (fits && dtype_ok).then_some((j, p))
}

/// A ones Scale for a LayerNormalization without gamma, when `x`'s type gives the width.
fn ones(g: &Graph, x: ValueId, name: &str) -> Option<Arg> {
    let Dim::Known(w) = shape(g, x)?.last()? else {
        return None;
    };
    let w = usize::try_from(*w).ok()?;
    let dt = dtype(g, x)?;
    let t = Tensor::from_f64(dt, vec![w], &vec![1.0; w]).ok()?;
    Some(Arg::Constant(format!("{name}/ones_scale"), t))
}
