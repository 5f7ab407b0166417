//! GELU: `0.5 * x * (1 + erf(x / sqrt 2))` (exact) and
//! `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))` (tanh form), with the products
//! in any order and grouping, `/ sqrt 2` or `* (1 / sqrt 2)`, `x^3` as `Pow(x, 3)` or
//! `x * x * x`.

use super::pattern::*;
use super::{Arg, Rewrite};
use smelt_ir::op::elementwise::GeluApprox;
use smelt_ir::op::ElementwiseOp;
use smelt_ir::{Graph, Op, ValueId};
use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_PI};

/// Matches a GELU whose final product is node `root`.
pub(crate) fn recognize(g: &Graph, root: usize) -> Option<Rewrite> {
    let prod = product(g, root)?;
    let [a, b] = prod.values[..] else {
        return None;
    };
    for (x, p) in [(a, b), (b, a)] {
        let Some((approximate, mut chain)) = one_plus(g, p, x) else {
            continue;
        };
        if !prod.coefficient_is(g, x, 0.5) || !float_or_unknown(g, x) {
            continue;
        }
        // p and the chain's values must be read inside the pattern only.
        let mut nodes = prod.nodes.clone();
        nodes.extend(&chain);
        let inner_ok = chain
            .iter()
            .chain(&prod.nodes)
            .filter(|&&j| j != root)
            .all(|&j| single_output(&g.nodes[j]).is_some_and(|o| used_only_by(g, o, &nodes)));
        if !inner_ok {
            continue;
        }
        chain.extend(prod.nodes.iter().filter(|&&j| j != root));
        return Some(Rewrite {
            root,
            op: Op::Elementwise(ElementwiseOp::Gelu { approximate }),
            inputs: vec![Arg::Value(x)],
            interior: chain,
        });
    }
    None
}

/// `p = 1 + f(x)` with f the erf or tanh part of GELU: the approximation and the chain's nodes.
fn one_plus(g: &Graph, p: ValueId, x: ValueId) -> Option<(GeluApprox, Vec<usize>)> {
    let add = producer(g, p)?;
    if !is_op(g, add, "Add") {
        return None;
    }
    let r = rank(g, x).unwrap_or(0);
    let inner = other_operand(&g.nodes[add], |v| is_scalar_near(g, v, 1.0, r))?;
    let f = producer(g, inner)?;
    let arg = *g.nodes[f].inputs.first()?;
    let arg = arg?;
    let (approx, mut chain) = match elementwise(&g.nodes[f])? {
        ElementwiseOp::Erf => (GeluApprox::None, erf_argument(g, arg, x)?),
        ElementwiseOp::Tanh => (GeluApprox::Tanh, tanh_argument(g, arg, x)?),
        _ => return None,
    };
    chain.extend([add, f]);
    Some((approx, chain))
}

/// `u = x / sqrt 2` or `x * (1 / sqrt 2)`: the node.
fn erf_argument(g: &Graph, u: ValueId, x: ValueId) -> Option<Vec<usize>> {
    let j = producer(g, u)?;
    let prod = product(g, j)?;
    (prod.values == [x] && prod.coefficient_is(g, x, FRAC_1_SQRT_2)).then_some(prod.nodes)
}

/// `t = sqrt(2/pi) * (x + 0.044715 * x^3)`: the nodes.
fn tanh_argument(g: &Graph, t: ValueId, x: ValueId) -> Option<Vec<usize>> {
    let j = producer(g, t)?;
    let outer = product(g, j)?;
    let [s] = outer.values[..] else {
        return None;
    };
    if !outer.coefficient_is(g, x, FRAC_2_PI.sqrt()) {
        return None;
    }
    let add = producer(g, s)?;
    if !is_op(g, add, "Add") {
        return None;
    }
    let cubic = other_operand(&g.nodes[add], |v| v == x)?;
    let k = producer(g, cubic)?;
    let kp = product(g, k)?;
    if !kp.coefficient_is(g, x, 0.044715) {
        return None;
    }
    let mut nodes = outer.nodes;
    nodes.push(add);
    nodes.extend(kp.nodes);
    match kp.values[..] {
        [a, b, c] if a == x && b == x && c == x => {}
        [c] => nodes.push(cube(g, c, x)?),
        _ => return None,
    }
    Some(nodes)
}

/// `c = Pow(x, 3)`: the node.
fn cube(g: &Graph, c: ValueId, x: ValueId) -> Option<usize> {
    let j = producer(g, c)?;
    let n = &g.nodes[j];
    let (base, e) = binary_inputs(n)?;
    let three = constant(g, e)
        .filter(|t| t.len() == 1 && t.rank() <= rank(g, x).unwrap_or(0))
        .and_then(|t| t.to_f64().ok())
        .is_some_and(|v| v.first() == Some(&3.0));
    (is_op(g, j, "Pow") && base == x && three).then_some(j)
}
