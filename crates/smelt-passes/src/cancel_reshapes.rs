//! Collapses reshape chains: `Reshape(Reshape(x, s1), s2)` is `Reshape(x, s2)` when `s2` is
//! a constant that does not copy input dims (no 0 entries, or `allowzero`). The inner
//! reshape is left for dead-code.

use crate::{manager::rewrite_nested, Pass, PassContext};
use smelt_ir::op::LayoutOp;
use smelt_ir::{Graph, Node, Op, Result, ValueId};

/// The reshape-chain cancellation pass.
pub struct CancelReshapes;

impl Pass for CancelReshapes {
    fn name(&self) -> &'static str {
        "cancel-reshapes"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        Ok(rewrite_nested(g, &mut collapse))
    }
}

/// Whether the node is a Reshape whose target is a constant independent of the input's dims.
fn fixed_target(g: &Graph, n: &Node) -> bool {
    let Op::Layout(LayoutOp::Reshape { shape, allowzero }) = &n.op else {
        return false;
    };
    let target = match shape {
        Some(s) => Some(s.clone()),
        None => n
            .inputs
            .get(1)
            .copied()
            .flatten()
            .and_then(|id| g.constants.iter().find(|c| c.id == id))
            .and_then(|c| c.tensor.to_i64().ok()),
    };
    target.is_some_and(|t| *allowzero || !t.contains(&0))
}

/// The data input of a Reshape node producing `v`, if `v` comes from one.
fn reshape_source(g: &Graph, v: ValueId) -> Option<ValueId> {
    let n = g
        .nodes
        .iter()
        .find(|n| n.outputs.first() == Some(&Some(v)))?;
    match n.op {
        Op::Layout(LayoutOp::Reshape { .. }) => *n.inputs.first()?,
        _ => None,
    }
}

fn collapse(g: &mut Graph) -> bool {
    let mut changed = false;
    for i in 0..g.nodes.len() {
        if !fixed_target(g, &g.nodes[i]) {
            continue;
        }
        let Some(mid) = g.nodes[i].inputs.first().copied().flatten() else {
            continue;
        };
        if let Some(x) = reshape_source(g, mid) {
            g.nodes[i].inputs[0] = Some(x);
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::tests::{golden, no_eval};

    #[test]
    fn chain_collapses_unless_the_outer_copies_dims() {
        golden(
            &CancelReshapes,
            &no_eval(),
            r#"graph "g" {
  input %0 "x": f32[2,3,4]
  const %1 "s1" = {"dtype":"I64","shape":[2],"data":{"I64":[6,4]}}
  const %2 "s2" = {"dtype":"I64","shape":[2],"data":{"I64":[4,-1]}}
  const %3 "s3" = {"dtype":"I64","shape":[2],"data":{"I64":[0,-1]}}
  %4 "a" = layout.Reshape {"allowzero":false,"shape":null} (%0, %1) # "r1"
  %5 "b" = layout.Reshape {"allowzero":false,"shape":null} (%4, %2) # "r2"
  %6 "c" = layout.Reshape {"allowzero":false,"shape":null} (%4, %3) # "r3"
  output %5, %6
}"#,
            r#"graph "g" {
  input %0 "x": f32[2,3,4]
  const %1 "s1" = {"dtype":"I64","shape":[2],"data":{"I64":[6,4]}}
  const %2 "s2" = {"dtype":"I64","shape":[2],"data":{"I64":[4,-1]}}
  const %3 "s3" = {"dtype":"I64","shape":[2],"data":{"I64":[0,-1]}}
  %4 "a" = layout.Reshape {"allowzero":false,"shape":null} (%0, %1) # "r1"
  %5 "b" = layout.Reshape {"allowzero":false,"shape":null} (%0, %2) # "r2"
  %6 "c" = layout.Reshape {"allowzero":false,"shape":null} (%4, %3) # "r3"
  output %5, %6
}"#,
        );
    }
}
