//! Cancels a transpose followed by its inverse: `Transpose(p2)(Transpose(p1)(x))` is `x`
//! when `p1[p2[i]] == i` for every axis. The first transpose is left for dead-code.

use crate::{manager::rewrite_nested, rewire::replace_uses, Pass, PassContext};
use smelt_ir::op::LayoutOp;
use smelt_ir::{Graph, Op, Result};

/// The inverse-transpose cancellation pass.
pub struct CancelTransposes;

impl Pass for CancelTransposes {
    fn name(&self) -> &'static str {
        "cancel-transposes"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        Ok(rewrite_nested(g, &mut cancel))
    }
}

fn perm(op: &Op) -> Option<&[i64]> {
    match op {
        Op::Layout(LayoutOp::Transpose { perm: Some(p) }) => Some(p),
        _ => None,
    }
}

fn cancel(g: &mut Graph) -> bool {
    let mut changed = false;
    let mut i = 0;
    while i < g.nodes.len() {
        let n = &g.nodes[i];
        let pair = (|| {
            let p2 = perm(&n.op)?;
            let mid = (*n.inputs.first()?)?;
            let out = (*n.outputs.first()?)?;
            let first = g
                .nodes
                .iter()
                .find(|m| m.outputs.first() == Some(&Some(mid)))?;
            let p1 = perm(&first.op)?;
            let x = (*first.inputs.first()?)?;
            let inverse = p1.len() == p2.len()
                && p2.iter().enumerate().all(|(i, &a)| {
                    usize::try_from(a).ok().and_then(|a| p1.get(a)) == Some(&(i as i64))
                });
            (inverse && !g.outputs.contains(&out)).then_some((out, x))
        })();
        match pair {
            Some((out, x)) => {
                g.nodes.remove(i);
                replace_uses(g, out, x);
                changed = true;
            }
            None => i += 1,
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::tests::{golden, no_eval};

    #[test]
    fn inverse_pair_cancels_and_others_stay() {
        golden(
            &CancelTransposes,
            &no_eval(),
            r#"graph "g" {
  input %0 "x": f32[2,3,4]
  %1 "a" = layout.Transpose {"perm":[0,2,1]} (%0) # "t1"
  %2 "b" = layout.Transpose {"perm":[0,2,1]} (%1) # "t2"
  %3 "c" = layout.Transpose {"perm":[1,2,0]} (%0) # "t3"
  %4 "d" = layout.Transpose {"perm":[1,2,0]} (%3) # "t4"
  %5 "y" = elementwise.Relu (%2) # "relu"
  %6 "z" = elementwise.Relu (%4) # "relu2"
  output %5, %6
}"#,
            r#"graph "g" {
  input %0 "x": f32[2,3,4]
  %1 "a" = layout.Transpose {"perm":[0,2,1]} (%0) # "t1"
  %3 "c" = layout.Transpose {"perm":[1,2,0]} (%0) # "t3"
  %4 "d" = layout.Transpose {"perm":[1,2,0]} (%3) # "t4"
  %5 "y" = elementwise.Relu (%0) # "relu"
  %6 "z" = elementwise.Relu (%4) # "relu2"
  output %5, %6
}"#,
        );
    }
}
