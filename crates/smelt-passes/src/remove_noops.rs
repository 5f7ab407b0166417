//! Removes ops that pass their input through unchanged: `Identity`, and `Dropout` in
//! inference mode whose mask is unused. Nodes whose output is a graph output stay, so
//! output names do not change.

use crate::{manager::rewrite_nested, rewire::replace_uses, Pass, PassContext};
use smelt_ir::op::{nn::DropoutMode, LayoutOp, NnOp};
use smelt_ir::{Graph, Node, Op, Result, ValueId};

/// The no-op removal pass.
pub struct RemoveNoops;

impl Pass for RemoveNoops {
    fn name(&self) -> &'static str {
        "remove-noops"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        Ok(rewrite_nested(g, &mut remove))
    }
}

/// Removes pass-through nodes from one graph (not its subgraphs); true if any went.
fn remove(g: &mut Graph) -> bool {
    let mut changed = false;
    let mut i = 0;
    while i < g.nodes.len() {
        match passthrough(g, &g.nodes[i]) {
            Some((from, to)) if !g.outputs.contains(&from) => {
                g.nodes.remove(i);
                replace_uses(g, from, to);
                changed = true;
            }
            _ => i += 1,
        }
    }
    changed
}

/// (output, input) when the node copies its input to its only used output.
fn passthrough(g: &Graph, n: &Node) -> Option<(ValueId, ValueId)> {
    let input = (*n.inputs.first()?)?;
    let output = (*n.outputs.first()?)?;
    match &n.op {
        Op::Layout(LayoutOp::Identity) => Some((output, input)),
        Op::Nn(NnOp::Dropout { mode, .. }) => {
            let mask_unused = n
                .outputs
                .get(1)
                .copied()
                .flatten()
                .is_none_or(|m| !is_used(g, m));
            let inference = match mode {
                DropoutMode::Fixed { training, .. } => !training,
                // training_mode (input 2) absent means inference.
                DropoutMode::FromInputs => n.inputs.get(2).copied().flatten().is_none(),
            };
            (mask_unused && inference).then_some((output, input))
        }
        _ => None,
    }
}

fn is_used(g: &Graph, v: ValueId) -> bool {
    crate::rewire::used_values(g).contains(&v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::tests::{golden, no_eval};

    #[test]
    fn identity_chain_is_removed_but_output_names_stay() {
        golden(
            &RemoveNoops,
            &no_eval(),
            r#"graph "g" {
  input %0 "x": f32[2]
  %1 "a" = layout.Identity (%0) # "id1"
  %2 "b" = elementwise.Relu (%1) # "relu"
  %3 "y" = layout.Identity (%2) # "id2"
  output %3
}"#,
            r#"graph "g" {
  input %0 "x": f32[2]
  %2 "b" = elementwise.Relu (%0) # "relu"
  %3 "y" = layout.Identity (%2) # "id2"
  output %3
}"#,
        );
    }
}
