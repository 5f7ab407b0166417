//! HardSwish: `x * HardSigmoid(x, alpha = 1/6, beta = 1/2)` and
//! `x * Clip(x + 3, 0, 6) / 6` (divided or multiplied by 1/6, before or after the product;
//! Clip bounds as inputs or, before opset 11, attributes).

use super::pattern::*;
use super::{Arg, Rewrite};
use smelt_ir::op::ElementwiseOp;
use smelt_ir::{Graph, Op, ValueId};

/// Matches a HardSwish whose final product is node `root`.
pub(crate) fn recognize(g: &Graph, root: usize) -> Option<Rewrite> {
    let prod = product(g, root)?;
    let [a, b] = prod.values[..] else {
        return None;
    };
    for (x, h) in [(a, b), (b, a)] {
        let Some((chain, coefficient)) = gate(g, h, x) else {
            continue;
        };
        if !prod.coefficient_is(g, x, coefficient) || !float_or_unknown(g, x) {
            continue;
        }
        let mut nodes = prod.nodes.clone();
        nodes.extend(&chain);
        let inner_ok = nodes
            .iter()
            .filter(|&&j| j != root)
            .all(|&j| single_output(&g.nodes[j]).is_some_and(|o| used_only_by(g, o, &nodes)));
        if !inner_ok {
            continue;
        }
        nodes.retain(|&j| j != root);
        return Some(Rewrite {
            root,
            op: Op::Elementwise(ElementwiseOp::HardSwish),
            inputs: vec![Arg::Value(x)],
            interior: nodes,
        });
    }
    None
}

/// The gate `h` of `x`: its nodes and the coefficient the product must carry
/// (1 for HardSigmoid, 1/6 for Clip(x + 3, 0, 6)).
fn gate(g: &Graph, h: ValueId, x: ValueId) -> Option<(Vec<usize>, f64)> {
    let j = producer(g, h)?;
    let n = &g.nodes[j];
    let reads_x = n.inputs.first() == Some(&Some(x));
    match elementwise(n)? {
        ElementwiseOp::HardSigmoid { alpha, beta } => {
            let ok =
                reads_x && close(*alpha as f64, 1.0 / 6.0, 1e-5) && close(*beta as f64, 0.5, 1e-6);
            ok.then(|| (vec![j], 1.0))
        }
        ElementwiseOp::Clip { min, max } => {
            let r = rank(g, x).unwrap_or(0);
            let bound = |attr: &Option<f32>, slot: usize, want: f64| match attr {
                Some(v) => *v as f64 == want,
                None => n
                    .inputs
                    .get(slot)
                    .copied()
                    .flatten()
                    .is_some_and(|v| is_scalar_near(g, v, want, r)),
            };
            if !bound(min, 1, 0.0) || !bound(max, 2, 6.0) {
                return None;
            }
            let shifted = (*n.inputs.first()?)?;
            let add = producer(g, shifted)?;
            let three = is_op(g, add, "Add")
                && other_operand(&g.nodes[add], |v| is_scalar_near(g, v, 3.0, r)) == Some(x);
            three.then(|| (vec![j, add], 1.0 / 6.0))
        }
        _ => None,
    }
}
