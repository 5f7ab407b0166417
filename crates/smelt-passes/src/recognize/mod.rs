//! Recognizes the decompositions exporters emit for composite ops and rewrites them into
//! the IR's single ops: GELU (erf and tanh forms), SiLU (Swish), HardSwish,
//! LayerNormalization and scaled dot-product Attention.
//!
//! A rewrite fires only when every intermediate value of the pattern is read inside the
//! pattern alone (not a graph output, not captured by a subgraph). The pattern's last node
//! becomes the composite: it keeps its name and output value, so names stay visible; the
//! other nodes of the pattern are removed once nothing reads them.

mod attention;
mod gelu;
mod hardswish;
mod layernorm;
pub mod pattern;
mod silu;

use crate::{manager::rewrite_scoped, rewire::used_values, Pass, PassContext};
use smelt_ir::op::LayoutOp;
use smelt_ir::{Constant, Graph, Node, Op, Result, Tensor, ValueId, ValueType};

/// The composite-recognition pass.
pub struct RecognizeComposites;

impl Pass for RecognizeComposites {
    fn name(&self) -> &'static str {
        "recognize-composites"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        // Patterns check shapes and element types: the main graph only (see `rewrite_scoped`).
        Ok(rewrite_scoped(g, &mut |g, typed| typed && recognize(g)))
    }
}

/// An input of the composite node.
#[derive(Debug)]
pub(crate) enum Arg {
    /// An existing value.
    Value(ValueId),
    /// An omitted optional input.
    Absent,
    /// A new constant, named.
    Constant(String, Tensor),
    /// The output of new nodes, inserted before the root in order.
    Derived(Vec<Step>),
}

/// A new node computing part of a composite's input.
#[derive(Debug)]
pub(crate) struct Step {
    /// Its name (also its output's).
    pub name: String,
    /// The op.
    pub op: Op,
    /// Its inputs.
    pub inputs: Vec<Src>,
}

/// Where a new node's input comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Src {
    /// An existing value.
    Value(ValueId),
    /// The output of the previous step.
    Prev,
}

/// What a recognizer found: the root node becomes `op` over `inputs`.
#[derive(Debug)]
pub(crate) struct Rewrite {
    /// The pattern's last node, which becomes the composite.
    pub root: usize,
    /// The composite op.
    pub op: Op,
    /// Its inputs.
    pub inputs: Vec<Arg>,
    /// The other nodes of the pattern, removed when nothing reads them any more.
    pub interior: Vec<usize>,
}

/// A recognizer looks at node `i` and describes the rewrite when a pattern matches there.
type Recognizer = fn(&Graph, usize) -> Option<Rewrite>;

const RECOGNIZERS: [Recognizer; 5] = [
    gelu::recognize,
    silu::recognize,
    hardswish::recognize,
    layernorm::recognize,
    attention::recognize,
];

/// Rewrites every recognized pattern of one graph (not its subgraphs); true if any fired.
fn recognize(g: &mut Graph) -> bool {
    let mut changed = false;
    let mut i = 0;
    // Every rewrite removes nodes, so this bound is never reached; it guards against loops.
    let mut budget = 16 * g.nodes.len() + 64;
    while i < g.nodes.len() && budget > 0 {
        budget -= 1;
        match RECOGNIZERS.iter().find_map(|r| r(g, i)) {
            Some(rw) => {
                // Nodes before the pattern's first node are untouched; look again from there.
                i = rw
                    .interior
                    .iter()
                    .copied()
                    .chain([rw.root, i])
                    .min()
                    .unwrap_or(i);
                apply(g, rw);
                changed = true;
            }
            None => i += 1,
        }
    }
    changed
}

/// Applies a rewrite: new constants and transposes, the root replaced, dead pattern nodes removed.
fn apply(g: &mut Graph, rw: Rewrite) {
    let mut root = rw.root;
    let mut inputs = Vec::with_capacity(rw.inputs.len());
    for arg in rw.inputs {
        inputs.push(match arg {
            Arg::Value(v) => Some(v),
            Arg::Absent => None,
            Arg::Constant(name, tensor) => {
                let id = g.add_value(name, None);
                g.constants.push(Constant { id, tensor });
                Some(id)
            }
            Arg::Derived(steps) => {
                let mut prev = None;
                for step in steps {
                    let inputs: Vec<Option<ValueId>> = step
                        .inputs
                        .iter()
                        .map(|s| match s {
                            Src::Value(v) => Some(*v),
                            Src::Prev => prev,
                        })
                        .collect();
                    let ty = match (&step.op, inputs.first()) {
                        (Op::Layout(LayoutOp::Transpose { perm: Some(p) }), Some(Some(of))) => {
                            permuted_type(g.value(*of).ty.as_ref(), p)
                        }
                        _ => None,
                    };
                    let id = g.add_value(step.name.clone(), ty);
                    g.nodes.insert(
                        root,
                        Node {
                            name: step.name,
                            op: step.op,
                            inputs,
                            outputs: vec![Some(id)],
                        },
                    );
                    root += 1;
                    prev = Some(id);
                }
                prev
            }
        });
    }
    let n = &mut g.nodes[root];
    n.op = rw.op;
    n.inputs = inputs;
    // Interior nodes precede the root, so their indices did not move; remove from the end
    // so a chain of dead nodes goes in one sweep.
    let mut interior = rw.interior;
    interior.sort_unstable();
    interior.dedup();
    for &j in interior.iter().rev() {
        let used = used_values(g);
        if j < root
            && !g.nodes[j]
                .outputs
                .iter()
                .flatten()
                .any(|o| used.contains(o))
        {
            g.nodes.remove(j);
            root -= 1;
        }
    }
}

/// The type of a transposed value, when the input's shape is known.
fn permuted_type(ty: Option<&ValueType>, perm: &[i64]) -> Option<ValueType> {
    let ValueType::Tensor {
        dtype,
        shape: Some(s),
    } = ty?
    else {
        return None;
    };
    let shape = perm
        .iter()
        .map(|&p| usize::try_from(p).ok().and_then(|p| s.get(p).cloned()))
        .collect::<Option<Vec<_>>>()?;
    (shape.len() == s.len()).then_some(ValueType::Tensor {
        dtype: *dtype,
        shape: Some(shape),
    })
}

#[cfg(test)]
mod tests;
