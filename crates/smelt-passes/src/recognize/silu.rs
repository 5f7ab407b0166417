//! SiLU: `x * Sigmoid(x)` becomes `Swish { alpha: 1 }` (the reference executor computes
//! `x / (1 + e^-x)`).

use super::pattern::*;
use super::{Arg, Rewrite};
use smelt_ir::op::ElementwiseOp;
use smelt_ir::{Graph, Op};

/// Matches `x * Sigmoid(x)` at the `Mul` node `root`.
pub(crate) fn recognize(g: &Graph, root: usize) -> Option<Rewrite> {
    if !is_op(g, root, "Mul") {
        return None;
    }
    let (a, b) = binary_inputs(&g.nodes[root])?;
    for (x, s) in [(a, b), (b, a)] {
        let Some(j) = single_use_producer(g, s, "Sigmoid", root) else {
            continue;
        };
        if g.nodes[j].inputs.first() == Some(&Some(x)) && float_or_unknown(g, x) {
            return Some(Rewrite {
                root,
                op: Op::Elementwise(ElementwiseOp::Swish { alpha: 1.0 }),
                inputs: vec![Arg::Value(x)],
                interior: vec![j],
            });
        }
    }
    None
}
