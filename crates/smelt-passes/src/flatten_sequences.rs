//! Flattening sequences whose structure is known when the graph is compiled (after
//! inline-if, so a taken branch's sequence ops are flattened with the graph's): a sequence
//! built by SequenceEmpty, SequenceConstruct, SequenceInsert and SequenceErase (positions
//! constant), or by SplitToSequence (split and shape known), becomes the list of its
//! tensors; SequenceAt becomes an Identity of one of them, SequenceLength a constant,
//! ConcatFromSequence a Concat (of Unsqueezes, when it stacks). The graph is then tensors
//! only and plans whole. (A position that is a graph input is a shape operand: a plan in
//! segments compiles with its value, see `infer_shapes::shape_operands`.)
//!
//! All or nothing per sequence: one that is a graph input or output, that a subgraph
//! captures, that another op reads (SequenceMap, Optional...), or whose structure needs a
//! run's values, leaves the graph as it was.

use crate::{Pass, PassContext};
use smelt_ir::op::{LayoutOp, SequenceOp};
use smelt_ir::{Constant, Dim, Graph, Node, Op, Result, Tensor, ValueId, ValueType};
use std::collections::{HashMap, HashSet};

/// The sequence-flattening pass.
pub struct FlattenSequences;

/// Most tensors a SplitToSequence is flattened into; longer sequences stay sequences.
const MAX_PIECES: usize = 1024;

impl Pass for FlattenSequences {
    fn name(&self) -> &'static str {
        "flatten-sequences"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        if !g.nodes.iter().any(|n| matches!(n.op, Op::Sequence(_))) {
            return Ok(false);
        }
        let mut flat = g.clone();
        if !flatten(&mut flat) {
            return Ok(false);
        }
        *g = flat;
        crate::infer_shapes::infer_types(g)?;
        Ok(true)
    }
}

/// Flattens every sequence of `g` (its top level); false (and `g` half rewritten, to be
/// dropped) when some sequence cannot be.
fn flatten(g: &mut Graph) -> bool {
    // Values read where a list of tensors cannot stand in: graph outputs, captures.
    let mut pinned: HashSet<ValueId> = g.outputs.iter().copied().collect();
    for n in &g.nodes {
        for sub in n.op.subgraphs() {
            pinned.extend(sub.captures.iter().map(|c| c.outer));
        }
    }
    let mut lists: HashMap<ValueId, Vec<ValueId>> = HashMap::new();
    // The element types SequenceEmpty declares: what may be inserted into them.
    let empty: HashMap<ValueId, smelt_ir::DType> = g
        .nodes
        .iter()
        .filter_map(|n| match n.op {
            Op::Sequence(SequenceOp::SequenceEmpty { dtype }) => {
                Some((n.outputs.first().copied().flatten()?, dtype))
            }
            _ => None,
        })
        .collect();
    let mut out_nodes = Vec::with_capacity(g.nodes.len());
    for n in std::mem::take(&mut g.nodes) {
        let Some(rewritten) = rewrite(g, &mut lists, &empty, n) else {
            return false;
        };
        out_nodes.extend(rewritten);
    }
    g.nodes = out_nodes;
    // Every list must have been consumed by the ops above, never read as a sequence.
    !lists.keys().any(|v| pinned.contains(v))
        && !g
            .nodes
            .iter()
            .any(|n| n.inputs.iter().flatten().any(|v| lists.contains_key(v)))
}

/// The nodes standing for `n` (none when it only builds a list), or None when `n` touches a
/// sequence whose structure is not known.
fn rewrite(
    g: &mut Graph,
    lists: &mut HashMap<ValueId, Vec<ValueId>>,
    empty: &HashMap<ValueId, smelt_ir::DType>,
    n: Node,
) -> Option<Vec<Node>> {
    let input = |i: usize| n.inputs.get(i).copied().flatten();
    let out = n.outputs.first().copied().flatten();
    let Op::Sequence(op) = &n.op else {
        // Identity passes a list through; any other op leaves its inputs as they are (one
        // reading a list is caught after).
        if matches!(n.op, Op::Layout(LayoutOp::Identity)) {
            if let (Some(s), Some(o)) = (input(0).and_then(|v| lists.get(&v)).cloned(), out) {
                lists.insert(o, s);
                return Some(Vec::new());
            }
        }
        return Some(vec![n]);
    };
    let list = |i: usize| input(i).and_then(|v| lists.get(&v)).cloned();
    let node = |name: String, op: Op, inputs: Vec<ValueId>, output: ValueId| Node {
        name,
        op,
        inputs: inputs.into_iter().map(Some).collect(),
        outputs: vec![Some(output)],
    };
    match op {
        SequenceOp::SequenceEmpty { .. } => {
            lists.insert(out?, Vec::new());
            Some(Vec::new())
        }
        SequenceOp::SequenceConstruct => {
            let items: Option<Vec<ValueId>> = n.inputs.iter().copied().collect();
            let items = items?;
            // Tensors of different types make no sequence: the reference executor says so.
            if !one_dtype(g, &items) {
                return None;
            }
            lists.insert(out?, items);
            Some(Vec::new())
        }
        SequenceOp::SequenceInsert => {
            let (mut s, t) = (list(0)?, input(1)?);
            let declared = input(0).and_then(|v| empty.get(&v));
            if !one_dtype(g, &[s.as_slice(), &[t]].concat())
                || declared.is_some_and(|&d| dtype_of(g, t) != Some(d))
            {
                return None;
            }
            // Positions in [-n, n]: a negative one counts from the back of the n tensors.
            let at = match input(2) {
                Some(p) => position(g, p, s.len(), true)?,
                None => s.len(),
            };
            s.insert(at, t);
            lists.insert(out?, s);
            Some(Vec::new())
        }
        SequenceOp::SequenceErase => {
            let mut s = list(0)?;
            if s.is_empty() {
                return None;
            }
            let at = match input(1) {
                Some(p) => position(g, p, s.len(), false)?,
                None => s.len() - 1,
            };
            s.remove(at);
            lists.insert(out?, s);
            Some(Vec::new())
        }
        SequenceOp::SequenceAt => {
            let s = list(0)?;
            let at = position(g, input(1)?, s.len(), false)?;
            let identity = Op::Layout(LayoutOp::Identity);
            Some(vec![node(n.name.clone(), identity, vec![s[at]], out?)])
        }
        SequenceOp::SequenceLength => {
            let len = list(0)?.len() as i64;
            let tensor = Tensor::from_i64_vec(vec![], vec![len]).ok()?;
            g.constants.push(Constant { id: out?, tensor });
            Some(Vec::new())
        }
        SequenceOp::ConcatFromSequence { axis, new_axis } => {
            let s = list(0)?;
            if s.is_empty() {
                return None;
            }
            if !new_axis {
                let concat = Op::Layout(LayoutOp::Concat { axis: *axis });
                return Some(vec![node(n.name.clone(), concat, s, out?)]);
            }
            // Stacking: each tensor gains the new axis (of the output's rank), then Concat.
            let rank = known_rank(g, s[0])? as i64;
            let a = if *axis < 0 { axis + rank + 1 } else { *axis };
            if !(0..=rank).contains(&a) {
                return None;
            }
            let mut nodes = Vec::new();
            let mut parts = Vec::new();
            for (k, &t) in s.iter().enumerate() {
                let v = g.add_value(format!("{}/unsqueeze{k}", n.name), None);
                let unsqueeze = Op::Layout(LayoutOp::Unsqueeze {
                    axes: Some(vec![a]),
                });
                nodes.push(node(
                    format!("{}/unsqueeze{k}", n.name),
                    unsqueeze,
                    vec![t],
                    v,
                ));
                parts.push(v);
            }
            let concat = Op::Layout(LayoutOp::Concat { axis: a });
            nodes.push(node(n.name.clone(), concat, parts, out?));
            Some(nodes)
        }
        SequenceOp::SplitToSequence { axis, keepdims } => {
            let x = input(0)?;
            let shape = known_shape(g, x)?;
            let r = shape.len() as i64;
            let a = if *axis < 0 { axis + r } else { *axis };
            // The axis length comes from the model (a declared dim) or the run: the pieces
            // are counted before any list of them is made.
            let len = i64::try_from(*shape.get(usize::try_from(a).ok()?)?).ok()?;
            let sizes: Vec<i64> = match input(1) {
                None if len as usize <= MAX_PIECES => vec![1; len as usize],
                None => return None,
                Some(sp) => {
                    let split = constant(g, sp)?;
                    let c = split.to_i64().ok()?;
                    if split.shape().is_empty() {
                        let piece = *c.first()?;
                        if piece <= 0 || len / piece > MAX_PIECES as i64 {
                            return None;
                        }
                        let mut v = vec![piece; (len / piece) as usize];
                        if len % piece != 0 {
                            v.push(len % piece);
                        }
                        v
                    } else {
                        c
                    }
                }
            };
            let total = sizes.iter().try_fold(0i64, |t, &s| t.checked_add(s));
            if sizes.is_empty()
                || sizes.len() > MAX_PIECES
                || sizes.iter().any(|&s| s < 0)
                || total != Some(len)
            {
                return None;
            }
            let squeeze = input(1).is_none() && !keepdims;
            let dtype = dtype_of(g, x)?;
            // The pieces are typed here, so a stacking reader knows their rank.
            let typed = |size: Option<u64>| {
                let mut dims: Vec<Dim> = shape.iter().map(|&d| Dim::Known(d)).collect();
                match size {
                    Some(s) => dims[a as usize] = Dim::Known(s),
                    None => {
                        dims.remove(a as usize);
                    }
                }
                Some(ValueType::Tensor {
                    dtype,
                    shape: Some(dims),
                })
            };
            let mut nodes = Vec::new();
            let mut pieces = Vec::new();
            let split_outs: Vec<ValueId> = sizes
                .iter()
                .enumerate()
                .map(|(k, &s)| g.add_value(format!("{}/piece{k}", n.name), typed(Some(s as u64))))
                .collect();
            nodes.push(Node {
                name: n.name.clone(),
                op: Op::Layout(LayoutOp::Split {
                    axis: a,
                    split: Some(sizes),
                    num_outputs: None,
                }),
                inputs: vec![Some(x)],
                outputs: split_outs.iter().map(|&v| Some(v)).collect(),
            });
            for (k, &p) in split_outs.iter().enumerate() {
                if squeeze {
                    let v = g.add_value(format!("{}/squeezed{k}", n.name), typed(None));
                    let op = Op::Layout(LayoutOp::Squeeze {
                        axes: Some(vec![a]),
                    });
                    nodes.push(node(format!("{}/squeeze{k}", n.name), op, vec![p], v));
                    pieces.push(v);
                } else {
                    pieces.push(p);
                }
            }
            lists.insert(out?, pieces);
            Some(nodes)
        }
        // SequenceMap and the optionals keep their sequences.
        _ => {
            if n.inputs.iter().flatten().any(|v| lists.contains_key(v)) {
                return None;
            }
            Some(vec![n])
        }
    }
}

/// The element type of tensor `v`, when known.
fn dtype_of(g: &Graph, v: ValueId) -> Option<smelt_ir::DType> {
    Some(tensor_type(g, v)?.0)
}

/// The element type and (when the rank is known) the dims of tensor `v`: a constant's, or
/// its value's type.
fn tensor_type(g: &Graph, v: ValueId) -> Option<(smelt_ir::DType, Option<Vec<Dim>>)> {
    match constant(g, v) {
        Some(t) => Some((
            t.dtype(),
            Some(t.shape().iter().map(|&d| Dim::Known(d as u64)).collect()),
        )),
        None => match &g.value(v).ty {
            Some(ValueType::Tensor { dtype, shape }) => Some((*dtype, shape.clone())),
            _ => None,
        },
    }
}

/// Whether the tensors `vs` share one element type (each known, or the check cannot hold).
fn one_dtype(g: &Graph, vs: &[ValueId]) -> bool {
    let Some(first) = vs.first().map(|&v| dtype_of(g, v)) else {
        return true;
    };
    first.is_some() && vs.iter().all(|&v| dtype_of(g, v) == first)
}

/// The constant tensor value `v` holds, if it is one.
fn constant(g: &Graph, v: ValueId) -> Option<&Tensor> {
    g.constants.iter().find(|c| c.id == v).map(|c| &c.tensor)
}

/// A constant position into a list of `len` tensors (negative counts from the back),
/// checked: in [-len, len - 1], or up to `len` itself where it may be one past the end (an
/// insert). None otherwise (the run's error, then, is the reference executor's).
fn position(g: &Graph, v: ValueId, len: usize, end: bool) -> Option<usize> {
    let t = constant(g, v)?;
    let p = *t.to_i64().ok()?.first()?;
    if t.len() != 1 {
        return None;
    }
    let p = if p < 0 { p + len as i64 } else { p };
    usize::try_from(p)
        .ok()
        .filter(|&p| p < len || (end && p == len))
}

/// The dims of tensor `v`, when all are known.
fn known_shape(g: &Graph, v: ValueId) -> Option<Vec<u64>> {
    tensor_type(g, v)?
        .1?
        .iter()
        .map(|d| match d {
            Dim::Known(n) => Some(*n),
            _ => None,
        })
        .collect()
}

/// The rank of tensor `v`, when known.
fn known_rank(g: &Graph, v: ValueId) -> Option<usize> {
    Some(tensor_type(g, v)?.1?.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::tests::no_eval;
    use smelt_ir::text::parse_graph;

    fn run(text: &str) -> (bool, Graph) {
        let mut g = parse_graph(text).unwrap_or_else(|e| panic!("parse: {e}"));
        let changed = FlattenSequences.run(&mut g, &no_eval()).expect("pass");
        (changed, g)
    }

    fn ops(g: &Graph) -> Vec<&'static str> {
        g.nodes.iter().map(|n| n.op.name()).collect()
    }

    /// The value an Identity node named `name` reads.
    fn identity_input<'a>(g: &'a Graph, name: &str) -> &'a str {
        let n = g.nodes.iter().find(|n| n.name == name).expect("node");
        assert!(matches!(n.op, Op::Layout(LayoutOp::Identity)), "{:?}", n.op);
        g.name_of(n.inputs[0].expect("input"))
    }

    #[test]
    fn constant_positions_resolve_to_the_tensor_read() {
        // [a, b, c], erase -3 (a): [b, c]; insert a at -1 (before the last): [b, a, c];
        // the element at -1 is c, at 1 is a; the length is 3.
        let (changed, g) = run(r#"graph "g" {
  input %0 "a": f32[2]
  input %1 "b": f32[2]
  input %2 "c": f32[2]
  const %3 "m3" = {"dtype":"I64","shape":[],"data":{"I64":[-3]}}
  const %4 "m1" = {"dtype":"I64","shape":[],"data":{"I64":[-1]}}
  const %5 "one" = {"dtype":"I64","shape":[],"data":{"I64":[1]}}
  %6 "s1" = sequence.SequenceConstruct (%0, %1, %2) # "construct"
  %7 "s2" = sequence.SequenceErase (%6, %3) # "erase"
  %8 "s3" = sequence.SequenceInsert (%7, %0, %4) # "insert"
  %9 "last" = sequence.SequenceAt (%8, %4) # "at_last"
  %10 "second" = sequence.SequenceAt (%8, %5) # "at_1"
  %11 "n" = sequence.SequenceLength (%8) # "length"
  output %9, %10, %11
}"#);
        assert!(changed);
        assert_eq!(ops(&g), ["Identity", "Identity"]);
        assert_eq!(identity_input(&g, "at_last"), "c");
        assert_eq!(identity_input(&g, "at_1"), "a");
        let n = g.outputs[2];
        let len = g
            .constants
            .iter()
            .find(|c| c.id == n)
            .expect("constant length");
        assert_eq!(len.tensor.to_i64().unwrap(), [3]);
    }

    #[test]
    fn split_and_stack_become_tensor_ops() {
        // SplitToSequence without split (pieces of 1, axis dropped), then stacked back.
        let (changed, g) = run(r#"graph "g" {
  input %0 "x": f32[3,4]
  %1 "s" = sequence.SplitToSequence {"axis":0,"keepdims":false} (%0) # "split"
  %2 "y" = sequence.ConcatFromSequence {"axis":0,"new_axis":true} (%1) # "stack"
  output %2
}"#);
        assert!(changed);
        assert_eq!(
            ops(&g),
            [
                "Split",
                "Squeeze",
                "Squeeze",
                "Squeeze",
                "Unsqueeze",
                "Unsqueeze",
                "Unsqueeze",
                "Concat"
            ]
        );
    }

    #[test]
    fn a_sequence_the_graph_returns_or_a_run_decides_stays() {
        // A sequence output: nothing to flatten it into.
        let (changed, _) = run(r#"graph "g" {
  input %0 "a": f32[2]
  %1 "s" = sequence.SequenceConstruct (%0, %0) # "construct"
  output %1
}"#);
        assert!(!changed);
        // A position that is not a constant.
        let (changed, g) = run(r#"graph "g" {
  input %0 "a": f32[2]
  input %1 "p": i64[]
  %2 "s" = sequence.SequenceConstruct (%0, %0) # "construct"
  %3 "y" = sequence.SequenceAt (%2, %1) # "at"
  output %3
}"#);
        assert!(!changed);
        assert_eq!(ops(&g), ["SequenceConstruct", "SequenceAt"]);
        // Tensors of two types make no sequence, nor one inserted into an empty sequence
        // of another type: the reference executor's error.
        let (changed, _) = run(r#"graph "g" {
  input %0 "b": i64[2]
  %1 "e" = sequence.SequenceEmpty {"dtype":"F32"} () # "empty"
  %2 "s" = sequence.SequenceInsert (%1, %0) # "insert"
  %3 "n" = sequence.SequenceLength (%2) # "length"
  output %3
}"#);
        assert!(!changed);
        let (changed, _) = run(r#"graph "g" {
  input %0 "b": f32[2]
  %1 "e" = sequence.SequenceEmpty {"dtype":"F32"} () # "empty"
  %2 "s" = sequence.SequenceInsert (%1, %0) # "insert"
  %3 "n" = sequence.SequenceLength (%2) # "length"
  output %3
}"#);
        assert!(changed, "the same insert of an f32 tensor flattens");
        let (changed, _) = run(r#"graph "g" {
  input %0 "a": f32[2]
  input %1 "b": i64[2]
  %2 "s" = sequence.SequenceConstruct (%0, %1) # "construct"
  %3 "n" = sequence.SequenceLength (%2) # "length"
  output %3
}"#);
        assert!(!changed);
        // A split into more pieces than a sequence is flattened into (the axis a declared
        // dim of the model) stays a sequence, nothing sized by it.
        let (changed, _) = run(r#"graph "g" {
  input %0 "x": f32[4000000000000,1]
  %1 "s" = sequence.SplitToSequence {"axis":0,"keepdims":true} (%0) # "split"
  %2 "n" = sequence.SequenceLength (%1) # "length"
  output %2
}"#);
        assert!(!changed);
        // A position past the end is the run's error, left to the reference executor.
        let (changed, _) = run(r#"graph "g" {
  input %0 "a": f32[2]
  const %1 "five" = {"dtype":"I64","shape":[],"data":{"I64":[5]}}
  %2 "s" = sequence.SequenceConstruct (%0, %0) # "construct"
  %3 "y" = sequence.SequenceAt (%2, %1) # "at"
  output %3
}"#);
        assert!(!changed);
    }
}
