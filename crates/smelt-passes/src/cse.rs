//! Common-subexpression elimination: a node that repeats an earlier node (same op and
//! attributes, same inputs) reuses the earlier node's outputs.

use crate::{manager::rewrite_nested, rewire::replace_uses, Pass, PassContext};
use smelt_ir::{Graph, Result, ValueId};
use std::collections::HashMap;

/// The common-subexpression elimination pass.
pub struct Cse;

impl Pass for Cse {
    fn name(&self) -> &'static str {
        "cse"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        Ok(rewrite_nested(g, &mut eliminate))
    }
}

fn eliminate(g: &mut Graph) -> bool {
    let mut changed = false;
    // Candidates by (op name, inputs); the op itself is compared in full.
    let mut seen: HashMap<(&'static str, Vec<Option<ValueId>>), Vec<usize>> = HashMap::new();
    let mut i = 0;
    while i < g.nodes.len() {
        let n = &g.nodes[i];
        let key = (n.op.name(), n.inputs.clone());
        let eligible = n.op.subgraphs().is_empty() && !crate::fold_constants::is_random(&n.op);
        let twin = seen.get(&key).and_then(|c| {
            c.iter()
                .copied()
                .find(|&j| g.nodes[j].op == n.op && g.nodes[j].outputs.len() == n.outputs.len())
        });
        let outputs_free = n.outputs.iter().flatten().all(|o| !g.outputs.contains(o));
        match twin {
            Some(j) if eligible && outputs_free => {
                let pairs: Vec<(ValueId, Option<ValueId>)> = n
                    .outputs
                    .iter()
                    .zip(&g.nodes[j].outputs)
                    .filter_map(|(a, b)| a.map(|a| (a, *b)))
                    .collect();
                // Every used output of the repeat must exist on the original.
                if pairs.iter().all(|(_, b)| b.is_some()) {
                    g.nodes.remove(i);
                    for (from, to) in pairs {
                        if let Some(to) = to {
                            replace_uses(g, from, to);
                        }
                    }
                    changed = true;
                    continue;
                }
                i += 1;
            }
            _ => {
                if eligible {
                    seen.entry(key).or_default().push(i);
                }
                i += 1;
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::tests::{golden, no_eval};

    #[test]
    fn repeated_node_is_shared() {
        golden(
            &Cse,
            &no_eval(),
            r#"graph "g" {
  input %0 "x": f32[2]
  %1 "a" = elementwise.Relu (%0) # "relu1"
  %2 "b" = elementwise.Relu (%0) # "relu2"
  %3 "c" = elementwise.LeakyRelu {"alpha":0.1} (%0) # "leaky1"
  %4 "d" = elementwise.LeakyRelu {"alpha":0.2} (%0) # "leaky2"
  %5 "s" = elementwise.Add (%1, %2) # "add"
  %6 "t" = elementwise.Add (%3, %4) # "add2"
  %7 "y" = elementwise.Add (%5, %6) # "out"
  output %7
}"#,
            r#"graph "g" {
  input %0 "x": f32[2]
  %1 "a" = elementwise.Relu (%0) # "relu1"
  %3 "c" = elementwise.LeakyRelu {"alpha":0.1} (%0) # "leaky1"
  %4 "d" = elementwise.LeakyRelu {"alpha":0.2} (%0) # "leaky2"
  %5 "s" = elementwise.Add (%1, %1) # "add"
  %6 "t" = elementwise.Add (%3, %4) # "add2"
  %7 "y" = elementwise.Add (%5, %6) # "out"
  output %7
}"#,
        );
    }
}
