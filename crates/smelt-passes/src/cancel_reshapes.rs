//! Collapses reshape chains: `Reshape(Reshape(x, s1), s2)` is `Reshape(x, s2)` when `s2` is
//! a constant that does not copy input dims (no 0 entries, or `allowzero`), and the inner
//! reshape is known to succeed (inference gave its output a fully known shape, which it
//! does only for a valid target): the collapse must not turn a failing model into one that
//! runs. The inner reshape is left for dead-code. Main graph only (types are facts there).

use crate::{manager::rewrite_scoped, Pass, PassContext};
use smelt_ir::op::LayoutOp;
use smelt_ir::{Dim, Graph, Node, Op, Result, ValueId, ValueType};

/// The reshape-chain cancellation pass.
pub struct CancelReshapes;

impl Pass for CancelReshapes {
    fn name(&self) -> &'static str {
        "cancel-reshapes"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        Ok(rewrite_scoped(g, &mut |g, typed| typed && collapse(g)))
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
    let valid = matches!(
        &g.value(v).ty,
        Some(ValueType::Tensor { shape: Some(s), .. }) if s.iter().all(|d| matches!(d, Dim::Known(_)))
    );
    match n.op {
        Op::Layout(LayoutOp::Reshape { .. }) if valid => *n.inputs.first()?,
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
  %4 "a": f32[6,4] = layout.Reshape {"allowzero":false,"shape":null} (%0, %1) # "r1"
  %5 "b" = layout.Reshape {"allowzero":false,"shape":null} (%4, %2) # "r2"
  %6 "c" = layout.Reshape {"allowzero":false,"shape":null} (%4, %3) # "r3"
  output %5, %6
}"#,
            r#"graph "g" {
  input %0 "x": f32[2,3,4]
  const %1 "s1" = {"dtype":"I64","shape":[2],"data":{"I64":[6,4]}}
  const %2 "s2" = {"dtype":"I64","shape":[2],"data":{"I64":[4,-1]}}
  const %3 "s3" = {"dtype":"I64","shape":[2],"data":{"I64":[0,-1]}}
  %4 "a": f32[6,4] = layout.Reshape {"allowzero":false,"shape":null} (%0, %1) # "r1"
  %5 "b" = layout.Reshape {"allowzero":false,"shape":null} (%0, %2) # "r2"
  %6 "c" = layout.Reshape {"allowzero":false,"shape":null} (%4, %3) # "r3"
  output %5, %6
}"#,
        );
    }

    /// An inner reshape whose output inference did not type (its target comes from an
    /// input) may fail at run time: collapsing it would hide the failure.
    #[test]
    fn an_unconfirmed_inner_reshape_stays() {
        let g = r#"graph "g" {
  input %0 "x": f32[2,3,4]
  input %1 "s1": i64[2]
  const %2 "s2" = {"dtype":"I64","shape":[2],"data":{"I64":[4,-1]}}
  %3 "a" = layout.Reshape {"allowzero":false,"shape":null} (%0, %1) # "r1"
  %4 "b" = layout.Reshape {"allowzero":false,"shape":null} (%3, %2) # "r2"
  output %4
}"#;
        golden(&CancelReshapes, &no_eval(), g, g);
    }
}
