//! Folds elementwise arithmetic with constant operands on float tensors. A node is read as
//! `x + c` (`Add`, or `Sub` of a constant as `x + (-c)`) or `x * c` (`Mul`, or `Div` by a
//! constant power of two as `x * (1/c)`, which is exact). Then:
//! - `(x + a) + b` becomes `x + (a + b)` and `(x * a) * b` becomes `x * (a * b)` (biases of a
//!   MatMul included), the constants combined with numpy broadcasting;
//! - `Conv(x, W, b) + c` and `Conv(x, W, b) * c` with `c` constant per output channel fold
//!   into the Conv's bias (and weights), `ConvTranspose(x, W, b) + c` into its bias;
//! - `x + 0` and `x * 1` (also `x - 0`, `x / 1`) go when the result has `x`'s type;
//! - a remaining `Div` by a power of two becomes a `Mul` by its reciprocal.
//!
//! Intermediates must be read by the next node only (no graph outputs, no subgraph
//! captures), and the result must keep the output's shape (as inference typed it: the main
//! graph only).

use crate::infer_shapes::broadcast;
use crate::{manager::rewrite_scoped, rewire::replace_uses, Pass, PassContext};
use smelt_ir::op::{ElementwiseOp, NnOp};
use smelt_ir::{Constant, DType, Dim, Graph, Node, Op, Result, Tensor, ValueId, ValueType};
use std::collections::HashMap;

/// The scalar and bias folding pass.
pub struct FoldScalars;

impl Pass for FoldScalars {
    fn name(&self) -> &'static str {
        "fold-scalars"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        // Every rewrite here reads shapes: the main graph only (see `rewrite_scoped`).
        Ok(rewrite_scoped(g, &mut |g, typed| typed && fold(g)))
    }
}

/// Combined constants larger than this are not built.
const MAX_ELEMENTS: usize = 1 << 24;

/// Where values come from and how often they are read, for one state of the graph.
struct Index {
    consts: HashMap<ValueId, usize>,
    producer: HashMap<ValueId, usize>,
    uses: HashMap<ValueId, usize>,
}

impl Index {
    fn new(g: &Graph) -> Index {
        let consts = g.constants.iter().enumerate().map(|(i, c)| (c.id, i));
        let mut producer = HashMap::new();
        let mut uses: HashMap<ValueId, usize> = HashMap::new();
        for v in &g.outputs {
            *uses.entry(*v).or_default() += 1;
        }
        for (i, n) in g.nodes.iter().enumerate() {
            producer.extend(n.outputs.iter().flatten().map(|&o| (o, i)));
            for v in n.inputs.iter().flatten() {
                *uses.entry(*v).or_default() += 1;
            }
            for sub in n.op.subgraphs() {
                for c in &sub.captures {
                    *uses.entry(c.outer).or_default() += 1;
                }
            }
        }
        Index {
            consts: consts.collect(),
            producer,
            uses,
        }
    }

    fn constant<'g>(&self, g: &'g Graph, v: ValueId) -> Option<&'g Tensor> {
        self.consts.get(&v).map(|&i| &g.constants[i].tensor)
    }

    /// The node producing `v` when its only reader is one node input.
    fn single_use_producer(&self, v: ValueId) -> Option<usize> {
        (self.uses.get(&v) == Some(&1))
            .then(|| self.producer.get(&v).copied())
            .flatten()
    }
}

/// The two kinds of affine step.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Add,
    Mul,
}

/// How the node's constant turns into the step's constant.
#[derive(Clone, Copy, PartialEq)]
enum Adjust {
    Keep,
    Negate,
    Invert,
}

/// A node read as `out = x <kind> adjust(c)`.
struct Affine {
    kind: Kind,
    x: ValueId,
    c: ValueId,
    adjust: Adjust,
    out: ValueId,
}

/// f16, bf16, f32 or f64.
fn plain_float(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

/// The tensor type of a value (a constant's, or the declared or inferred one).
fn tensor_type(g: &Graph, ix: &Index, v: ValueId) -> Option<(DType, Option<Vec<Dim>>)> {
    if let Some(t) = ix.constant(g, v) {
        let dims = t.shape().iter().map(|&d| Dim::Known(d as u64));
        return Some((t.dtype(), Some(dims.collect())));
    }
    match &g.value(v).ty {
        Some(ValueType::Tensor { dtype, shape }) => Some((*dtype, shape.clone())),
        _ => None,
    }
}

fn shape_of(g: &Graph, ix: &Index, v: ValueId) -> Option<Vec<Dim>> {
    tensor_type(g, ix, v)?.1
}

/// True when every element is a power of two whose reciprocal the dtype holds exactly.
fn exact_reciprocal(t: &Tensor) -> bool {
    let Ok(v) = t.to_f64() else { return false };
    let pow2 = |x: f64| x.is_normal() && x.to_bits() & ((1u64 << 52) - 1) == 0;
    if !v.iter().all(|&x| pow2(x)) {
        return false;
    }
    let inv: Vec<f64> = v.iter().map(|x| 1.0 / x).collect();
    Tensor::from_f64(t.dtype(), vec![inv.len()], &inv)
        .and_then(|r| r.to_f64())
        .is_ok_and(|r| r == inv)
}

/// Node `n` as an affine step with a constant operand on a float tensor.
fn affine(g: &Graph, ix: &Index, n: &Node) -> Option<Affine> {
    let Op::Elementwise(e) = &n.op else {
        return None;
    };
    let ([Some(a), Some(b)], [Some(out)]) = (&n.inputs[..], &n.outputs[..]) else {
        return None;
    };
    let (a, b, out) = (*a, *b, *out);
    let ca = ix.constant(g, a);
    let cb = ix.constant(g, b);
    let (kind, x, c, adjust) = match (e, ca, cb) {
        (ElementwiseOp::Add, None, Some(_)) => (Kind::Add, a, b, Adjust::Keep),
        (ElementwiseOp::Add, Some(_), None) => (Kind::Add, b, a, Adjust::Keep),
        (ElementwiseOp::Mul, None, Some(_)) => (Kind::Mul, a, b, Adjust::Keep),
        (ElementwiseOp::Mul, Some(_), None) => (Kind::Mul, b, a, Adjust::Keep),
        (ElementwiseOp::Sub, None, Some(_)) => (Kind::Add, a, b, Adjust::Negate),
        (ElementwiseOp::Div, None, Some(t)) if exact_reciprocal(t) => {
            (Kind::Mul, a, b, Adjust::Invert)
        }
        _ => return None,
    };
    let dt = ix.constant(g, c)?.dtype();
    let same = |v| tensor_type(g, ix, v).is_some_and(|t| t.0 == dt);
    (plain_float(dt) && same(x) && same(out)).then_some(Affine {
        kind,
        x,
        c,
        adjust,
        out,
    })
}

/// The step's constant values (adjusted), shape and dtype.
fn step_constant(g: &Graph, ix: &Index, s: &Affine) -> Option<(Vec<f64>, Vec<usize>, DType)> {
    let t = ix.constant(g, s.c)?;
    let v = t.to_f64().ok()?;
    let v = match s.adjust {
        Adjust::Keep => v,
        Adjust::Negate => v.iter().map(|x| -x).collect(),
        Adjust::Invert => v.iter().map(|x| 1.0 / x).collect(),
    };
    Some((v, t.shape().to_vec(), t.dtype()))
}

/// `f(a, b)` elementwise with numpy broadcasting of the two shapes.
fn broadcast_apply(
    (va, sa): (&[f64], &[usize]),
    (vb, sb): (&[f64], &[usize]),
    f: impl Fn(f64, f64) -> f64,
) -> Option<(Vec<f64>, Vec<usize>)> {
    let rank = sa.len().max(sb.len());
    let pad = |s: &[usize]| [vec![1; rank - s.len()], s.to_vec()].concat();
    let (pa, pb) = (pad(sa), pad(sb));
    let mut shape = Vec::with_capacity(rank);
    for (&x, &y) in pa.iter().zip(&pb) {
        shape.push(match (x, y) {
            _ if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        });
    }
    let total: usize = shape.iter().product();
    if total > MAX_ELEMENTS {
        return None;
    }
    let strides = |p: &[usize]| {
        let mut st = vec![0; rank];
        let mut acc = 1;
        for d in (0..rank).rev() {
            st[d] = if p[d] == 1 { 0 } else { acc };
            acc *= p[d];
        }
        st
    };
    let (ta, tb) = (strides(&pa), strides(&pb));
    let mut out = Vec::with_capacity(total);
    for k in 0..total {
        let (mut rest, mut ia, mut ib) = (k, 0, 0);
        for d in (0..rank).rev() {
            let i = rest % shape[d];
            rest /= shape[d];
            ia += i * ta[d];
            ib += i * tb[d];
        }
        out.push(f(va[ia], vb[ib]));
    }
    Some((out, shape))
}

/// Adds a constant named `name`; its value id.
fn add_constant(g: &mut Graph, name: String, tensor: Tensor) -> ValueId {
    let id = g.add_value(name, None);
    g.constants.push(Constant { id, tensor });
    id
}

/// Folds one graph (not its subgraphs); true if anything changed.
fn fold(g: &mut Graph) -> bool {
    let mut changed = false;
    let mut ix = Index::new(g);
    let mut i = 0;
    while i < g.nodes.len() {
        match rewrite_at(g, &ix, i) {
            Some(next) => {
                changed = true;
                ix = Index::new(g);
                i = next;
            }
            None => i += 1,
        }
    }
    changed
}

/// Applies the first rule that matches node `i`; the index to continue from.
fn rewrite_at(g: &mut Graph, ix: &Index, i: usize) -> Option<usize> {
    let s = affine(g, ix, &g.nodes[i])?;
    if let Some(next) = remove_identity(g, ix, i, &s) {
        return Some(next);
    }
    if let Some(p) = ix.single_use_producer(s.x) {
        if let Some(next) = merge(g, ix, p, i, &s).or_else(|| into_conv(g, ix, p, i, &s)) {
            return Some(next);
        }
    }
    if s.adjust == Adjust::Invert {
        let (v, shape, dt) = step_constant(g, ix, &s)?;
        let t = Tensor::from_f64(dt, shape, &v).ok()?;
        let c = add_constant(g, format!("{}_reciprocal", g.nodes[i].name), t);
        g.nodes[i].op = Op::Elementwise(ElementwiseOp::Mul);
        g.nodes[i].inputs = vec![Some(s.x), Some(c)];
        return Some(i + 1);
    }
    None
}

/// `x + 0` or `x * 1` of `x`'s own type: the node goes, readers take `x`.
fn remove_identity(g: &mut Graph, ix: &Index, i: usize, s: &Affine) -> Option<usize> {
    let (v, _, _) = step_constant(g, ix, s)?;
    let unit = if s.kind == Kind::Add { 0.0 } else { 1.0 };
    let (tx, to) = (tensor_type(g, ix, s.x)?, tensor_type(g, ix, s.out)?);
    let known = to.1.as_ref().is_some_and(|d| !d.contains(&Dim::Unknown));
    if !v.iter().all(|&c| c == unit) || tx != to || !known || g.outputs.contains(&s.out) {
        return None;
    }
    g.nodes.remove(i);
    replace_uses(g, s.out, s.x);
    Some(i)
}

/// `(x . a) . b` with node `p` the inner step: node `i` becomes `x . (a . b)`, `p` goes.
fn merge(g: &mut Graph, ix: &Index, p: usize, i: usize, s: &Affine) -> Option<usize> {
    let inner = affine(g, ix, &g.nodes[p])?;
    if inner.kind != s.kind {
        return None;
    }
    let (va, sa, dt) = step_constant(g, ix, &inner)?;
    let (vb, sb, _) = step_constant(g, ix, s)?;
    let f = match s.kind {
        Kind::Add => |a, b| a + b,
        Kind::Mul => |a, b| a * b,
    };
    let (v, shape) = broadcast_apply((&va, &sa), (&vb, &sb), f)?;
    let dims: Vec<Dim> = shape.iter().map(|&d| Dim::Known(d as u64)).collect();
    let out_shape = shape_of(g, ix, s.out)?;
    if broadcast(&[shape_of(g, ix, inner.x)?, dims]) != Some(out_shape) {
        return None;
    }
    let t = Tensor::from_f64(dt, shape, &v).ok()?;
    let c = add_constant(g, format!("{}_folded", g.nodes[i].name), t);
    let op = match s.kind {
        Kind::Add => ElementwiseOp::Add,
        Kind::Mul => ElementwiseOp::Mul,
    };
    g.nodes[i].op = Op::Elementwise(op);
    g.nodes[i].inputs = vec![Some(inner.x), Some(c)];
    g.nodes.remove(p);
    Some(p)
}

/// `Conv(x, W, b) + c` or `* c` with `c` constant per output channel: folded into the Conv
/// (node `p`), node `i` goes.
fn into_conv(g: &mut Graph, ix: &Index, p: usize, i: usize, s: &Affine) -> Option<usize> {
    let conv = &g.nodes[p];
    // A ConvTranspose takes a bias the same way (its weights' layout differs: adds only).
    let transposed_group = match &conv.op {
        Op::Nn(NnOp::ConvTranspose { group, .. }) if s.kind == Kind::Add => {
            Some(usize::try_from(*group).ok().filter(|&g| g >= 1)?)
        }
        _ => None,
    };
    let conv_like = (matches!(conv.op, Op::Nn(NnOp::Conv { .. })) || transposed_group.is_some())
        && conv.outputs.len() == 1;
    if !conv_like || conv.inputs.len() > 3 {
        return None;
    }
    let w = ix.constant(g, (*conv.inputs.get(1)?)?)?;
    let bias = match conv.inputs.get(2).copied().flatten() {
        Some(b) => Some(ix.constant(g, b)?),
        None => None,
    };
    let m = match transposed_group {
        Some(groups) => w.shape().get(1)?.checked_mul(groups)?,
        None => *w.shape().first()?,
    };
    let rank = w.rank();
    let (c, c_shape, dt) = step_constant(g, ix, s)?;
    // c right-aligned against [N, M, ...]: 1 everywhere but the channel axis (1 or M).
    let per_channel = c_shape.len() <= rank
        && c_shape
            .iter()
            .enumerate()
            .all(|(d, &k)| k == 1 || (k == m && rank - c_shape.len() + d == 1));
    let same_shape = shape_of(g, ix, s.x).is_some_and(|x| Some(x) == shape_of(g, ix, s.out));
    if !per_channel || !same_shape || w.dtype() != dt || rank < 3 || m == 0 {
        return None;
    }
    let at = |ch: usize| if c.len() == 1 { c[0] } else { c[ch] };
    let old_b = match bias {
        Some(t) if t.len() == m => t.to_f64().ok()?,
        Some(_) => return None,
        None => vec![0.0; m],
    };
    let new_b: Vec<f64> = (0..m)
        .map(|ch| match s.kind {
            Kind::Add => old_b[ch] + at(ch),
            Kind::Mul => old_b[ch] * at(ch),
        })
        .collect();
    let name = g.nodes[p].name.clone();
    let mut inputs = vec![conv.inputs[0], conv.inputs[1]];
    if s.kind == Kind::Mul {
        let per = w.len() / m;
        let wv = w.to_f64().ok()?;
        let scaled: Vec<f64> = (0..wv.len()).map(|k| wv[k] * at(k / per)).collect();
        let t = Tensor::from_f64(dt, w.shape().to_vec(), &scaled).ok()?;
        inputs[1] = Some(add_constant(g, format!("{name}_scaled_weight"), t));
    }
    let t = Tensor::from_f64(dt, vec![m], &new_b).ok()?;
    inputs.push(Some(add_constant(g, format!("{name}_folded_bias"), t)));
    g.nodes[p].inputs = inputs;
    g.nodes[p].outputs = vec![Some(s.out)];
    g.nodes.remove(i);
    Some(p)
}

#[cfg(test)]
mod tests;
