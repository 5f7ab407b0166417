//! Dead-code elimination: removes nodes none of whose outputs is used, and constants
//! nothing reads.

use crate::{manager::rewrite_nested, Pass, PassContext};
use smelt_ir::{Graph, Result, ValueId};
use std::collections::HashSet;

/// The dead-code elimination pass.
pub struct DeadCode;

impl Pass for DeadCode {
    fn name(&self) -> &'static str {
        "dead-code"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        Ok(rewrite_nested(g, &mut eliminate))
    }
}

/// Removes dead nodes and constants from one graph (not its subgraphs); true if any went.
fn eliminate(g: &mut Graph) -> bool {
    let mut changed = false;
    let mut used: HashSet<ValueId> = g.outputs.iter().copied().collect();
    // Walk backwards so a chain of dead nodes goes in one sweep.
    let mut keep = vec![true; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate().rev() {
        if n.outputs.iter().flatten().any(|o| used.contains(o)) {
            used.extend(n.inputs.iter().flatten().copied());
            for sub in n.op.subgraphs() {
                used.extend(sub.captures.iter().map(|c| c.outer));
            }
        } else {
            keep[i] = false;
            changed = true;
        }
    }
    let mut it = keep.iter();
    g.nodes.retain(|_| *it.next().unwrap_or(&true));
    let before = g.constants.len();
    g.constants.retain(|c| used.contains(&c.id));
    changed || g.constants.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::tests::{golden, no_eval};

    #[test]
    fn unused_chain_and_constant_go() {
        golden(
            &DeadCode,
            &no_eval(),
            r#"graph "g" {
  input %0 "x": f32[2]
  const %1 "w" = {"dtype":"F32","shape":[2],"data":{"F32":[1.0,2.0]}}
  %2 "a" = elementwise.Add (%0, %1) # "add"
  %3 "b" = elementwise.Relu (%2) # "dead_relu"
  %4 "y" = elementwise.Relu (%0) # "relu"
  output %4
}"#,
            r#"graph "g" {
  input %0 "x": f32[2]
  %4 "y" = elementwise.Relu (%0) # "relu"
  output %4
}"#,
        );
    }
}
