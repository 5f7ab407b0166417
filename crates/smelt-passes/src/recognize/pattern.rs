//! Matching helpers shared by the composite recognizers: producers and users of values,
//! scalar constants compared with a tolerance, and products of factors flattened through
//! single-use `Mul` and `Div`-by-constant nodes.

use smelt_ir::op::{ElementwiseOp, LayoutOp};
use smelt_ir::{DType, Dim, Graph, Node, Op, Shape, Tensor, ValueId};

/// Index of the node that defines `v`, if a node does.
pub fn producer(g: &Graph, v: ValueId) -> Option<usize> {
    g.nodes.iter().position(|n| n.outputs.contains(&Some(v)))
}

/// The node that defines `v`, if a node does.
pub fn producer_node(g: &Graph, v: ValueId) -> Option<&Node> {
    producer(g, v).map(|i| &g.nodes[i])
}

/// Indices of the nodes that read `v` (each node once).
pub fn users(g: &Graph, v: ValueId) -> Vec<usize> {
    g.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.inputs.contains(&Some(v)))
        .map(|(i, _)| i)
        .collect()
}

/// True when `v` escapes the node list: a graph output or captured by a subgraph.
pub fn escapes(g: &Graph, v: ValueId) -> bool {
    g.outputs.contains(&v)
        || g.nodes.iter().any(|n| {
            n.op.subgraphs()
                .iter()
                .any(|s| s.captures.iter().any(|c| c.outer == v))
        })
}

/// True when only nodes in `within` read `v` and it does not escape.
pub fn used_only_by(g: &Graph, v: ValueId, within: &[usize]) -> bool {
    !escapes(g, v) && users(g, v).iter().all(|u| within.contains(u))
}

/// The single output of a node with exactly one output slot.
pub fn single_output(n: &Node) -> Option<ValueId> {
    match n.outputs.as_slice() {
        [Some(o)] => Some(*o),
        _ => None,
    }
}

/// The two inputs of a binary node.
pub fn binary_inputs(n: &Node) -> Option<(ValueId, ValueId)> {
    match n.inputs.as_slice() {
        [Some(a), Some(b)] => Some((*a, *b)),
        _ => None,
    }
}

/// The elementwise op of a node, if it is one.
pub fn elementwise(n: &Node) -> Option<&ElementwiseOp> {
    match &n.op {
        Op::Elementwise(e) => Some(e),
        _ => None,
    }
}

/// The constant tensor bound to `v`.
pub fn constant(g: &Graph, v: ValueId) -> Option<&Tensor> {
    g.constants.iter().find(|c| c.id == v).map(|c| &c.tensor)
}

/// True for the float types the recognizers rewrite.
pub fn is_plain_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
}

/// Relative tolerance for comparing a constant of type `d` with an exact value.
pub fn tolerance(d: DType) -> f64 {
    match d {
        DType::F16 => 1e-3,
        DType::BF16 => 8e-3,
        _ => 1e-5,
    }
}

/// True when `a` is within relative tolerance `tol` of `b`.
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1e-30)
}

/// A one-element float constant: (value, dtype, rank).
pub fn float_scalar(g: &Graph, v: ValueId) -> Option<(f64, DType, usize)> {
    let t = constant(g, v)?;
    if t.len() != 1 || !is_plain_float(t.dtype()) {
        return None;
    }
    Some((*t.to_f64().ok()?.first()?, t.dtype(), t.rank()))
}

/// True when `v` is a one-element float constant close to `c`, of rank at most `max_rank`.
pub fn is_scalar_near(g: &Graph, v: ValueId, c: f64, max_rank: usize) -> bool {
    float_scalar(g, v).is_some_and(|(x, d, r)| r <= max_rank && close(x, c, tolerance(d)))
}

/// The static shape of `v`, when its type gives one.
pub fn shape(g: &Graph, v: ValueId) -> Option<&Shape> {
    match &g.value(v).ty {
        Some(smelt_ir::ValueType::Tensor { shape, .. }) => shape.as_ref(),
        _ => None,
    }
}

/// The element type of `v`, when its type gives one.
pub fn dtype(g: &Graph, v: ValueId) -> Option<DType> {
    match &g.value(v).ty {
        Some(smelt_ir::ValueType::Tensor { dtype, .. }) => Some(*dtype),
        _ => None,
    }
}

/// The rank of `v`: from its type, a constant, or a Transpose with an explicit permutation.
pub fn rank(g: &Graph, v: ValueId) -> Option<usize> {
    if let Some(s) = shape(g, v) {
        return Some(s.len());
    }
    if let Some(t) = constant(g, v) {
        return Some(t.rank());
    }
    match &producer_node(g, v)?.op {
        Op::Layout(LayoutOp::Transpose { perm: Some(p) }) => Some(p.len()),
        _ => None,
    }
}

/// True when `a` and `b` are provably the same size (known and equal, or the same expression).
pub fn same_dim(a: &Dim, b: &Dim) -> bool {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => x == y,
        (Dim::Sym(x), Dim::Sym(y)) => x == y,
        _ => false,
    }
}

/// False when `v`'s type is known and not a plain float type.
pub fn float_or_unknown(g: &Graph, v: ValueId) -> bool {
    dtype(g, v).is_none_or(is_plain_float)
}

/// A product `coefficient * values[0] * values[1] * ...` read off a tree of `Mul` nodes
/// and `Div`s by a constant.
#[derive(Debug, Default)]
pub struct Product {
    /// The non-constant factors, in tree order.
    pub values: Vec<ValueId>,
    /// The product of the constant factors (1 when there are none).
    pub coefficient: f64,
    /// The loosest relative tolerance of the constants' types.
    pub tolerance: f64,
    /// The largest rank of a constant factor.
    pub const_rank: usize,
    /// Nodes inside the tree (the root included).
    pub nodes: Vec<usize>,
}

/// Most leaves a product may have before matching gives up.
const MAX_FACTORS: usize = 8;

/// Flattens the product rooted at node `root` (a `Mul`, or a `Div` by a constant). Inner
/// `Mul`/`Div` nodes are expanded only when their output is read by their parent alone.
pub fn product(g: &Graph, root: usize) -> Option<Product> {
    let mut p = Product {
        coefficient: 1.0,
        tolerance: 1e-5,
        ..Default::default()
    };
    expand(g, root, &mut p)?;
    (p.values.len() + p.nodes.len() <= 2 * MAX_FACTORS).then_some(p)
}

/// Adds node `i`'s factors to `p`; None when `i` is not a product node.
fn expand(g: &Graph, i: usize, p: &mut Product) -> Option<()> {
    let n = &g.nodes[i];
    let (a, b) = binary_inputs(n)?;
    single_output(n)?;
    let divisor = match elementwise(n)? {
        ElementwiseOp::Mul => false,
        ElementwiseOp::Div => true,
        _ => return None,
    };
    if p.nodes.len() > MAX_FACTORS {
        return None;
    }
    p.nodes.push(i);
    factor(g, i, a, false, p)?;
    factor(g, i, b, divisor, p)
}

/// Adds the factor `v` read by node `parent` (inverted when it is a divisor).
fn factor(g: &Graph, parent: usize, v: ValueId, divisor: bool, p: &mut Product) -> Option<()> {
    if let Some((c, d, r)) = float_scalar(g, v) {
        if divisor && c == 0.0 {
            return None;
        }
        p.coefficient *= if divisor { 1.0 / c } else { c };
        p.tolerance = p.tolerance.max(tolerance(d));
        p.const_rank = p.const_rank.max(r);
        return Some(());
    }
    if divisor {
        return None;
    }
    if let Some(j) = producer(g, v) {
        let single = users(g, v) == [parent] && !escapes(g, v);
        if single && expand_if_product(g, j, p) {
            return Some(());
        }
    }
    if p.values.len() >= MAX_FACTORS {
        return None;
    }
    p.values.push(v);
    Some(())
}

/// Expands node `j` into `p` when it is a product node; leaves `p` unchanged otherwise.
fn expand_if_product(g: &Graph, j: usize, p: &mut Product) -> bool {
    let is_product = match g.nodes[j].op {
        Op::Elementwise(ElementwiseOp::Mul) => true,
        Op::Elementwise(ElementwiseOp::Div) => g.nodes[j]
            .inputs
            .get(1)
            .copied()
            .flatten()
            .is_some_and(|d| float_scalar(g, d).is_some()),
        _ => false,
    };
    if !is_product {
        return false;
    }
    let mut trial = Product {
        values: p.values.clone(),
        coefficient: p.coefficient,
        tolerance: p.tolerance,
        const_rank: p.const_rank,
        nodes: p.nodes.clone(),
    };
    if expand(g, j, &mut trial).is_some() {
        *p = trial;
        true
    } else {
        false
    }
}

impl Product {
    /// True when the coefficient is close to `c` and the constants do not raise the rank
    /// of `x` (rank-0 constants always qualify; others need `x`'s rank).
    pub fn coefficient_is(&self, g: &Graph, x: ValueId, c: f64) -> bool {
        close(self.coefficient, c, self.tolerance) && scalar_rank_ok(g, x, self.const_rank)
    }
}

/// True when a constant of rank `r` broadcast against `x` keeps `x`'s shape.
pub fn scalar_rank_ok(g: &Graph, x: ValueId, r: usize) -> bool {
    r == 0 || rank(g, x).is_some_and(|xr| xr >= r)
}

/// The other operand of a commutative binary node when one operand satisfies `pred`.
pub fn other_operand(n: &Node, pred: impl Fn(ValueId) -> bool) -> Option<ValueId> {
    let (a, b) = binary_inputs(n)?;
    if pred(a) {
        Some(b)
    } else if pred(b) {
        Some(a)
    } else {
        None
    }
}

/// Node `i` if it is the elementwise op `want` (compared by name) with one output.
pub fn is_op(g: &Graph, i: usize, want: &str) -> bool {
    let n = &g.nodes[i];
    matches!(n.op, Op::Elementwise(_)) && n.op.name() == want && single_output(n).is_some()
}

/// The producer of `v` when it is the elementwise op `want` and `v` is read only by `user`.
pub fn single_use_producer(g: &Graph, v: ValueId, want: &str, user: usize) -> Option<usize> {
    let j = producer(g, v)?;
    (is_op(g, j, want) && used_only_by(g, v, &[user])).then_some(j)
}
