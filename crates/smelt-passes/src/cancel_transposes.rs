//! Cancels a transpose followed by its inverse: `Transpose(p2)(Transpose(p1)(x))` is `x`
//! when `p1[p2[i]] == i` for every axis and `x` is known to have that many axes (else the
//! first transpose fails, and the model must too). The first transpose is left for
//! dead-code. Main graph only (types are facts there).

use crate::{manager::rewrite_scoped, rewire::replace_uses, Pass, PassContext};
use smelt_ir::op::LayoutOp;
use smelt_ir::{Graph, Op, Result, ValueId, ValueType};

/// The inverse-transpose cancellation pass.
pub struct CancelTransposes;

impl Pass for CancelTransposes {
    fn name(&self) -> &'static str {
        "cancel-transposes"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        Ok(rewrite_scoped(g, &mut |g, typed| typed && cancel(g)))
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
            let inverse = rank(g, x) == Some(p1.len())
                && p1.len() == p2.len()
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

/// The rank of a value, from its type or its constant.
fn rank(g: &Graph, v: ValueId) -> Option<usize> {
    if let Some(c) = g.constants.iter().find(|c| c.id == v) {
        return Some(c.tensor.rank());
    }
    match &g.value(v).ty {
        Some(ValueType::Tensor { shape: Some(s), .. }) => Some(s.len()),
        _ => None,
    }
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

    /// A pair on a value of another rank: the first transpose fails at run time, so the
    /// pair stays (the model must fail too).
    #[test]
    fn a_pair_of_the_wrong_rank_stays() {
        let g = r#"graph "g" {
  input %0 "x": f32[2,3]
  %1 "a" = layout.Transpose {"perm":[0,2,1]} (%0) # "t1"
  %2 "b" = layout.Transpose {"perm":[0,2,1]} (%1) # "t2"
  %3 "y" = elementwise.Relu (%2) # "relu"
  output %3
}"#;
        golden(&CancelTransposes, &no_eval(), g, g);
    }
}
