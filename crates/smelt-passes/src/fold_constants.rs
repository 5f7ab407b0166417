//! Constant folding: a node whose inputs are all constants is evaluated once, at compile
//! time, and its outputs become constants. Random ops and ops with subgraphs are left alone.

use crate::{Pass, PassContext};
use smelt_ir::{Constant, Graph, Op, Result, Tensor, ValueId};
use std::collections::HashMap;

/// The constant-folding pass.
pub struct FoldConstants {
    /// Outputs larger than this many elements are not folded (they would bloat the plan).
    pub max_elements: usize,
}

impl Default for FoldConstants {
    fn default() -> Self {
        FoldConstants {
            max_elements: 1 << 24,
        }
    }
}

/// Ops whose result differs from run to run.
pub(crate) fn is_random(op: &Op) -> bool {
    matches!(
        op.name(),
        "RandomUniform"
            | "RandomNormal"
            | "RandomUniformLike"
            | "RandomNormalLike"
            | "Bernoulli"
            | "Multinomial"
            | "Dropout"
    )
}

impl Pass for FoldConstants {
    fn name(&self) -> &'static str {
        "fold-constants"
    }

    fn run(&self, g: &mut Graph, cx: &PassContext) -> Result<bool> {
        let Some(eval) = cx.evaluate else {
            return Ok(false);
        };
        let mut consts: HashMap<ValueId, usize> = g
            .constants
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id, i))
            .collect();
        let mut changed = false;
        let mut i = 0;
        while i < g.nodes.len() {
            let n = &g.nodes[i];
            let foldable = !n.inputs.is_empty()
                && n.op.subgraphs().is_empty()
                && !is_random(&n.op)
                && n.inputs.iter().flatten().all(|id| consts.contains_key(id));
            if !foldable {
                i += 1;
                continue;
            }
            let inputs: Vec<Option<&Tensor>> = n
                .inputs
                .iter()
                .map(|id| id.map(|id| &g.constants[consts[&id]].tensor))
                .collect();
            // An op that fails on its constants is left for run time, where the error names it.
            let Ok(outs) = eval(&n.op, &inputs, n.outputs.len()) else {
                i += 1;
                continue;
            };
            if outs.len() < n.outputs.iter().flatten().count()
                || outs.iter().any(|t| t.len() > self.max_elements)
            {
                i += 1;
                continue;
            }
            let node = g.nodes.remove(i);
            for (slot, t) in node.outputs.iter().zip(outs) {
                if let Some(id) = slot {
                    consts.insert(*id, g.constants.len());
                    g.constants.push(Constant { id: *id, tensor: t });
                }
            }
            changed = true;
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::tests::golden;
    use smelt_ir::bail;

    /// Adds two f32 constants; anything else is "unsupported".
    fn add_only(op: &Op, x: &[Option<&Tensor>], _n: usize) -> Result<Vec<Tensor>> {
        match (op.name(), x) {
            ("Add", [Some(a), Some(b)]) => {
                let v: Vec<f32> = a
                    .as_f32()
                    .unwrap_or(&[])
                    .iter()
                    .zip(b.as_f32().unwrap_or(&[]))
                    .map(|(p, q)| p + q)
                    .collect();
                Ok(vec![Tensor::from_f32(a.shape().to_vec(), v)?])
            }
            _ => bail!("unsupported"),
        }
    }

    #[test]
    fn constant_subexpression_folds() {
        let eval: crate::Evaluator = &add_only;
        golden(
            &FoldConstants::default(),
            &PassContext {
                evaluate: Some(eval),
            },
            r#"graph "g" {
  input %0 "x": f32[2]
  const %1 "a" = {"dtype":"F32","shape":[2],"data":{"F32":[1.0,2.0]}}
  const %2 "b" = {"dtype":"F32","shape":[2],"data":{"F32":[0.5,0.25]}}
  %3 "c" = elementwise.Add (%1, %2) # "fold_me"
  %4 "y" = elementwise.Add (%0, %3) # "keep_me"
  output %4
}"#,
            r#"graph "g" {
  input %0 "x": f32[2]
  const %1 "a" = {"dtype":"F32","shape":[2],"data":{"F32":[1.0,2.0]}}
  const %2 "b" = {"dtype":"F32","shape":[2],"data":{"F32":[0.5,0.25]}}
  const %3 "c" = {"dtype":"F32","shape":[2],"data":{"F32":[1.5,2.25]}}
  %4 "y" = elementwise.Add (%0, %3) # "keep_me"
  output %4
}"#,
        );
    }
}
