//! Removes ops that pass their input through unchanged: `Identity`, `Dropout` in
//! inference mode whose mask is unused, `Cast`/`CastLike` to the input's own type, and
//! `Reshape`/`Flatten`/`Squeeze`/`Unsqueeze`/`Expand` whose output shape is the input's
//! (both fully known, or the same symbolic dims). Nodes whose output is a graph output
//! stay, so output names do not change. The type-based removals (casts, reshapes) apply to
//! the main graph only, whose types inference confirmed; a subgraph's declared types are
//! not evidence.

use crate::{manager::rewrite_scoped, rewire::replace_uses, Pass, PassContext};
use smelt_ir::op::{nn::DropoutMode, ElementwiseOp, LayoutOp, NnOp};
use smelt_ir::{DType, Dim, Graph, Node, Op, Result, ValueId, ValueType};

/// The no-op removal pass.
pub struct RemoveNoops;

impl Pass for RemoveNoops {
    fn name(&self) -> &'static str {
        "remove-noops"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        Ok(rewrite_scoped(g, &mut remove))
    }
}

/// Removes pass-through nodes from one graph (not its subgraphs); true if any went. With
/// `typed` false, only removals that read no types.
fn remove(g: &mut Graph, typed: bool) -> bool {
    let mut changed = false;
    let mut i = 0;
    while i < g.nodes.len() {
        match passthrough(g, &g.nodes[i], typed) {
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
fn passthrough(g: &Graph, n: &Node, typed: bool) -> Option<(ValueId, ValueId)> {
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
        // What follows decides from types.
        _ if !typed => None,
        Op::Elementwise(ElementwiseOp::Cast { to, .. }) => {
            (dtype_of(g, input)? == *to).then_some((output, input))
        }
        Op::Elementwise(ElementwiseOp::CastLike { .. }) => {
            let like = (*n.inputs.get(1)?)?;
            (dtype_of(g, input)? == dtype_of(g, like)?).then_some((output, input))
        }
        Op::Layout(
            LayoutOp::Reshape { .. }
            | LayoutOp::Flatten { .. }
            | LayoutOp::Squeeze { .. }
            | LayoutOp::Unsqueeze { .. }
            | LayoutOp::Expand,
        ) => {
            let (a, b) = (shape_of(g, input)?, shape_of(g, output)?);
            let same = a == b && !a.contains(&Dim::Unknown);
            (same && dtype_of(g, input) == dtype_of(g, output)).then_some((output, input))
        }
        _ => None,
    }
}

/// The value's tensor type: declared or inferred, or a constant's.
fn tensor_type(g: &Graph, v: ValueId) -> Option<(DType, Option<Vec<Dim>>)> {
    if let Some(c) = g.constants.iter().find(|c| c.id == v) {
        let dims = c.tensor.shape().iter().map(|&d| Dim::Known(d as u64));
        return Some((c.tensor.dtype(), Some(dims.collect())));
    }
    match &g.value(v).ty {
        Some(ValueType::Tensor { dtype, shape }) => Some((*dtype, shape.clone())),
        _ => None,
    }
}

fn dtype_of(g: &Graph, v: ValueId) -> Option<DType> {
    tensor_type(g, v).map(|t| t.0)
}

fn shape_of(g: &Graph, v: ValueId) -> Option<Vec<Dim>> {
    tensor_type(g, v)?.1
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

    #[test]
    fn same_type_cast_and_same_shape_reshape_go() {
        golden(
            &RemoveNoops,
            &no_eval(),
            r#"graph "g" {
  input %0 "x": f32[b,4]
  const %1 "s" = {"dtype":"I64","shape":[2],"data":{"I64":[0,4]}}
  %2 "a": f32[b,4] = elementwise.Cast {"round_mode":"Up","saturate":true,"to":"F32"} (%0) # "cast_same"
  %3 "b": f32[b,4] = layout.Reshape {"allowzero":false,"shape":null} (%2, %1) # "reshape_same"
  %4 "c": f16[b,4] = elementwise.Cast {"round_mode":"Up","saturate":true,"to":"F16"} (%3) # "cast_f16"
  %5 "d": f16[b,4] = elementwise.CastLike {"round_mode":"Up","saturate":true} (%4, %4) # "castlike_same"
  %6 "e": f16[?,4] = layout.Reshape {"allowzero":false,"shape":null} (%5, %1) # "reshape_unknown"
  %7 "y" = elementwise.Relu (%6) # "relu"
  output %7
}"#,
            r#"graph "g" {
  input %0 "x": f32[b,4]
  const %1 "s" = {"dtype":"I64","shape":[2],"data":{"I64":[0,4]}}
  %4 "c": f16[b,4] = elementwise.Cast {"round_mode":"Up","saturate":true,"to":"F16"} (%0) # "cast_f16"
  %6 "e": f16[?,4] = layout.Reshape {"allowzero":false,"shape":null} (%4, %1) # "reshape_unknown"
  %7 "y" = elementwise.Relu (%6) # "relu"
  output %7
}"#,
        );
    }

    /// The hardening finding: a Reshape to `[-5, 3]` whose declared output equals its input
    /// looked like a no-op. Inference now rejects it before remove-noops runs, and a Reshape
    /// whose target is not constant keeps its node (the declaration is dropped, not used).
    #[test]
    fn declared_types_do_not_make_a_reshape_a_noop() {
        use crate::infer_shapes::InferShapes;
        let text = r#"graph "g" {
  input %0 "x": f32[2,3]
  input %1 "s": i64[2]
  const %2 "bad" = {"dtype":"I64","shape":[2],"data":{"I64":[-5,3]}}
  %3 "r": f32[2,3] = layout.Reshape {"allowzero":false,"shape":null} (%0, SHAPE) # "reshape"
  %4 "y": f32[2,3] = elementwise.Relu (%3) # "relu"
  output %4
}"#;
        let mut g = smelt_ir::text::parse_graph(&text.replace("SHAPE", "%2")).unwrap();
        let e = InferShapes.run(&mut g, &no_eval()).unwrap_err();
        assert_eq!(e.kind(), smelt_ir::ErrorKind::InvalidModel);
        assert!(e.to_string().contains("node reshape (Reshape)"), "{e}");
        let mut g = smelt_ir::text::parse_graph(&text.replace("SHAPE", "%1")).unwrap();
        InferShapes.run(&mut g, &no_eval()).unwrap();
        RemoveNoops.run(&mut g, &no_eval()).unwrap();
        assert!(g.nodes.iter().any(|n| n.name == "reshape"));
    }

    /// In a subgraph, types are the model's word (unconfirmed): only the removals that read
    /// no type happen there.
    #[test]
    fn subgraphs_keep_type_based_noops() {
        let text = r#"graph "g" {
  input %0 "c": bool[]
  input %1 "x": f32[2,3]
  %2 "y": f32[2,3] = control.If {"else_branch":"$graph0","then_branch":"$graph1"} (%0) # "if"
    graph "else" {
      capture %0 "x": f32[2,3] <- %1
      output %0
    }
    graph "then" {
      capture %0 "x": f32[2,3] <- %1
      %1 "a": f32[2,3] = layout.Identity (%0) # "id"
      %2 "b": f32[2,3] = elementwise.Cast {"round_mode":"Up","saturate":true,"to":"F32"} (%1) # "cast"
      %3 "t": f32[2,3] = elementwise.Relu (%2) # "relu"
      output %3
    }
  output %2
}"#;
        let expected = text
            .replace(
                "      %1 \"a\": f32[2,3] = layout.Identity (%0) # \"id\"\n",
                "",
            )
            .replace("} (%1) # \"cast\"", "} (%0) # \"cast\"");
        assert_ne!(expected, text);
        golden(&RemoveNoops, &no_eval(), text, &expected);
    }
}
