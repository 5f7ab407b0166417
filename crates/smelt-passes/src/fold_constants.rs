//! Constant folding: a node whose inputs are all constants is evaluated once, at compile
//! time, and its outputs become constants. Random ops and ops with subgraphs are left alone.
//! `Shape` and `Size` of a value whose shape is fully known become constants without an
//! evaluator; types are re-inferred between sweeps so shape arithmetic folds to the end.

use crate::infer_shapes::{infer_types, shape_range};
use crate::{Evaluator, Pass, PassContext};
use smelt_ir::op::LayoutOp;
use smelt_ir::{Constant, Dim, Graph, Node, Op, Result, Tensor, ValueId, ValueType};
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

    /// Alternates type inference and folding until nothing folds, so that shape arithmetic
    /// (`Shape -> Gather -> Concat -> Reshape`) folds completely once shapes are known.
    fn run(&self, g: &mut Graph, cx: &PassContext) -> Result<bool> {
        let mut changed = false;
        loop {
            changed |= infer_types(g)?;
            if !self.fold_once(g, cx.evaluate) {
                return Ok(changed);
            }
            changed = true;
        }
    }
}

/// The value of `Shape` or `Size` when its input's shape is fully known.
fn shape_value(g: &Graph, n: &Node) -> Option<Tensor> {
    let input = (*n.inputs.first()?)?;
    let Some(ValueType::Tensor {
        shape: Some(shape), ..
    }) = &g.value(input).ty
    else {
        return None;
    };
    let dims: Vec<i64> = shape
        .iter()
        .map(|d| match d {
            Dim::Known(k) => i64::try_from(*k).ok(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    match &n.op {
        Op::Layout(LayoutOp::Shape { start, end }) => {
            let (a, b) = shape_range(dims.len(), *start, *end);
            let v = dims.get(a..b.max(a))?.to_vec();
            Tensor::from_i64_vec(vec![v.len()], v).ok()
        }
        // A product past i64 is no tensor that can exist: left for the run to refuse.
        Op::Layout(LayoutOp::Size) => dims
            .iter()
            .try_fold(1i64, |a, &d| a.checked_mul(d))
            .map(Tensor::scalar_i64),
        _ => None,
    }
}

impl FoldConstants {
    /// One sweep over the nodes; true if any node became constants.
    fn fold_once(&self, g: &mut Graph, eval: Option<Evaluator>) -> bool {
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
            let outs = match shape_value(g, n) {
                Some(t) => vec![t],
                None => match eval {
                    Some(eval) => match self.evaluate(g, n, &consts, eval) {
                        Some(outs) => outs,
                        None => {
                            i += 1;
                            continue;
                        }
                    },
                    None => {
                        i += 1;
                        continue;
                    }
                },
            };
            let node = g.nodes.remove(i);
            for (slot, t) in node.outputs.iter().zip(outs) {
                if let Some(id) = slot {
                    consts.insert(*id, g.constants.len());
                    g.constants.push(Constant { id: *id, tensor: t });
                }
            }
            changed = true;
        }
        changed
    }

    /// The outputs of a node whose inputs are all constants, when it can be folded.
    fn evaluate(
        &self,
        g: &Graph,
        n: &Node,
        consts: &HashMap<ValueId, usize>,
        eval: Evaluator,
    ) -> Option<Vec<Tensor>> {
        let foldable = !n.inputs.is_empty()
            && n.op.subgraphs().is_empty()
            && !is_random(&n.op)
            && n.inputs.iter().flatten().all(|id| consts.contains_key(id));
        if !foldable {
            return None;
        }
        let inputs: Vec<Option<&Tensor>> = n
            .inputs
            .iter()
            .map(|id| id.map(|id| &g.constants[consts[&id]].tensor))
            .collect();
        // An op that fails on its constants is left for run time, where the error names it.
        let outs = eval(&n.op, &inputs, n.outputs.len()).ok()?;
        if outs.len() < n.outputs.iter().flatten().count()
            || outs.iter().any(|t| t.len() > self.max_elements)
        {
            return None;
        }
        Some(outs)
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
            _ => bail!(Unsupported, "unsupported"),
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
  %4 "y": f32[2] = elementwise.Add (%0, %3) # "keep_me"
  output %4
}"#,
        );
    }

    /// Gather of a scalar index from a 1-D i64 vector, Unsqueeze of a scalar, Concat of
    /// 1-D i64 vectors: enough for exporter shape arithmetic.
    fn shape_ops(op: &Op, x: &[Option<&Tensor>], _n: usize) -> Result<Vec<Tensor>> {
        let ints = |i: usize| -> Result<Vec<i64>> {
            x.get(i)
                .copied()
                .flatten()
                .ok_or_else(|| smelt_ir::err!(InvalidModel, "missing input"))?
                .to_i64()
        };
        let v = match op.name() {
            "Gather" => vec![ints(0)?[ints(1)?[0] as usize]],
            "Unsqueeze" => ints(0)?,
            "Concat" => (0..x.len()).map(ints).collect::<Result<Vec<_>>>()?.concat(),
            _ => bail!(Unsupported, "unsupported"),
        };
        let shape = if op.name() == "Gather" {
            vec![]
        } else {
            vec![v.len()]
        };
        Ok(vec![Tensor::from_i64_vec(shape, v)?])
    }

    #[test]
    fn exporter_shape_chain_folds_with_a_concrete_input() {
        let eval: crate::Evaluator = &shape_ops;
        golden(
            &FoldConstants::default(),
            &PassContext {
                evaluate: Some(eval),
            },
            r#"graph "g" {
  input %0 "x": f32[2,3,4]
  const %1 "zero" = {"dtype":"I64","shape":[],"data":{"I64":[0]}}
  const %2 "axes" = {"dtype":"I64","shape":[1],"data":{"I64":[0]}}
  const %3 "rest" = {"dtype":"I64","shape":[1],"data":{"I64":[-1]}}
  %4 "shape" = layout.Shape {"end":null,"start":0} (%0) # "shape"
  %5 "n" = layout.Gather {"axis":0} (%4, %1) # "gather"
  %6 "n1" = layout.Unsqueeze {"axes":null} (%5, %2) # "unsqueeze"
  %7 "target" = layout.Concat {"axis":0} (%6, %3) # "concat"
  %8 "y" = layout.Reshape {"allowzero":false,"shape":null} (%0, %7) # "reshape"
  output %8
}"#,
            r#"graph "g" {
  input %0 "x": f32[2,3,4]
  const %1 "zero" = {"dtype":"I64","shape":[],"data":{"I64":[0]}}
  const %2 "axes" = {"dtype":"I64","shape":[1],"data":{"I64":[0]}}
  const %3 "rest" = {"dtype":"I64","shape":[1],"data":{"I64":[-1]}}
  const %4 "shape" = {"dtype":"I64","shape":[3],"data":{"I64":[2,3,4]}}
  const %5 "n" = {"dtype":"I64","shape":[],"data":{"I64":[2]}}
  const %6 "n1" = {"dtype":"I64","shape":[1],"data":{"I64":[2]}}
  const %7 "target" = {"dtype":"I64","shape":[2],"data":{"I64":[2,-1]}}
  %8 "y": f32[2,12] = layout.Reshape {"allowzero":false,"shape":null} (%0, %7) # "reshape"
  output %8
}"#,
        );
    }
}
