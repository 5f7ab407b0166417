//! Inlining If nodes whose condition is a constant (folded, or a run's value the plan was
//! specialized to): the taken branch's nodes and constants join the graph in the node's
//! place, its captures read the outer values, and each node output becomes an Identity of
//! the branch's output. The branch's declared types are claims, so the inlined values start
//! untyped and inference types them.

use crate::manager::rewrite_scoped;
use crate::{Pass, PassContext};
use smelt_ir::op::{ControlOp, LayoutOp};
use smelt_ir::{Constant, Graph, Node, Op, Result, ValueId};
use std::collections::HashMap;

/// The If-inlining pass.
pub struct InlineIf;

impl Pass for InlineIf {
    fn name(&self) -> &'static str {
        "inline-if"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        let changed = rewrite_scoped(g, &mut |g, top| top && inline(g));
        if changed {
            crate::infer_shapes::infer_types(g)?;
        }
        Ok(changed)
    }
}

/// Inlines every If of `g` (not of its subgraphs) with a constant condition.
fn inline(g: &mut Graph) -> bool {
    let mut changed = false;
    let mut i = 0;
    while i < g.nodes.len() {
        match taken_branch(g, &g.nodes[i]) {
            Some(branch) => {
                let node = g.nodes.remove(i);
                let nodes = splice(g, &node, &branch);
                i += nodes.len();
                g.nodes.splice(i - nodes.len()..i - nodes.len(), nodes);
                changed = true;
            }
            None => i += 1,
        }
    }
    changed
}

/// The branch an If node takes, when its condition is a one-element constant and the
/// branch can be inlined (no inputs, as many outputs as the node uses).
fn taken_branch(g: &Graph, n: &Node) -> Option<Graph> {
    let Op::Control(ControlOp::If {
        then_branch,
        else_branch,
    }) = &n.op
    else {
        return None;
    };
    let cond = n.inputs.first().copied().flatten()?;
    let c = g.constants.iter().find(|c| c.id == cond)?;
    let v = c.tensor.to_bool().ok()?;
    let branch = if *v.first()? {
        then_branch
    } else {
        else_branch
    };
    (v.len() == 1 && branch.inputs.is_empty() && branch.outputs.len() >= n.outputs.len())
        .then(|| (**branch).clone())
}

/// Adds the branch's values and constants to `g` and returns its nodes (ids mapped) and an
/// Identity per node output.
fn splice(g: &mut Graph, node: &Node, branch: &Graph) -> Vec<Node> {
    let mut map: HashMap<ValueId, ValueId> =
        branch.captures.iter().map(|c| (c.inner, c.outer)).collect();
    for (k, v) in branch.values.iter().enumerate() {
        let id = ValueId(k as u32);
        if let std::collections::hash_map::Entry::Vacant(e) = map.entry(id) {
            e.insert(g.add_value(format!("{}/{}", node.name, v.name), None));
        }
    }
    let m = |id: &ValueId| map.get(id).copied().unwrap_or(*id);
    for c in &branch.constants {
        g.constants.push(Constant {
            id: m(&c.id),
            tensor: c.tensor.clone(),
        });
    }
    let mut nodes: Vec<Node> = branch
        .nodes
        .iter()
        .map(|n| {
            let mut n = n.clone();
            n.name = format!("{}/{}", node.name, n.name);
            for v in n.inputs.iter_mut().chain(n.outputs.iter_mut()).flatten() {
                *v = m(v);
            }
            // Nested subgraphs capture the branch's values, now the graph's.
            for sub in n.op.subgraphs_mut() {
                for c in &mut sub.captures {
                    c.outer = m(&c.outer);
                }
            }
            n
        })
        .collect();
    for (k, out) in node.outputs.iter().enumerate() {
        let Some(out) = out else { continue };
        nodes.push(Node {
            name: format!("{}/output{k}", node.name),
            op: Op::Layout(LayoutOp::Identity),
            inputs: vec![Some(m(&branch.outputs[k]))],
            outputs: vec![Some(*out)],
        });
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::tests::{golden, no_eval};

    #[test]
    fn a_constant_condition_inlines_its_branch() {
        golden(
            &InlineIf,
            &no_eval(),
            r#"graph "g" {
  input %0 "x": f32[2]
  const %1 "c" = {"dtype":"Bool","shape":[],"data":{"Bool":[false]}}
  %2 "y" = control.If {"else_branch":"$graph0","then_branch":"$graph1"} (%1) # "if"
    graph "else" {
      capture %0 "x": f32[2] <- %0
      const %1 "k" = {"dtype":"F32","shape":[],"data":{"F32":[2.0]}}
      %2 "m": f32[2] = elementwise.Mul (%0, %1) # "mul"
      output %2
    }
    graph "then" {
      capture %0 "x": f32[2] <- %0
      %1 "n": f32[2] = elementwise.Neg (%0) # "neg"
      output %1
    }
  output %2
}"#,
            r#"graph "g" {
  input %0 "x": f32[2]
  const %1 "c" = {"dtype":"Bool","shape":[],"data":{"Bool":[false]}}
  const %3 "if/k" = {"dtype":"F32","shape":[],"data":{"F32":[2.0]}}
  %4 "if/m": f32[2] = elementwise.Mul (%0, %3) # "if/mul"
  %2 "y": f32[2] = layout.Identity (%4) # "if/output0"
  output %2
}"#,
        );
    }
}
