//! Replacing every use of one value by another, in nodes, graph outputs and subgraph captures.

use smelt_ir::{Graph, ValueId};

/// Replaces uses of `from` by `to` in `g`'s nodes and in the captures of its subgraphs.
/// Graph outputs are left alone: callers keep nodes whose outputs are graph outputs.
pub fn replace_uses(g: &mut Graph, from: ValueId, to: ValueId) {
    for n in &mut g.nodes {
        for i in n.inputs.iter_mut().flatten() {
            if *i == from {
                *i = to;
            }
        }
        for sub in n.op.subgraphs_mut() {
            for c in &mut sub.captures {
                if c.outer == from {
                    c.outer = to;
                }
            }
        }
    }
}

/// Every value `g` reads: node inputs, graph outputs and what its subgraphs capture.
pub fn used_values(g: &Graph) -> std::collections::HashSet<ValueId> {
    let mut used: std::collections::HashSet<ValueId> = g.outputs.iter().copied().collect();
    for n in &g.nodes {
        used.extend(n.inputs.iter().flatten().copied());
        for sub in n.op.subgraphs() {
            used.extend(sub.captures.iter().map(|c| c.outer));
        }
    }
    used
}
