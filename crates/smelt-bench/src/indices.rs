//! Which integer graph inputs index a constant (a `Gather` table such as a vocabulary),
//! so that random inputs stay within what the model can index.

use smelt_ir::op::LayoutOp;
use smelt_ir::{Graph, Op, ValueId};
use std::collections::HashMap;

/// Ops through which an integer input reaches a `Gather` unchanged in value.
const PASS_THROUGH: &[&str] = &[
    "Cast",
    "Reshape",
    "Unsqueeze",
    "Squeeze",
    "Flatten",
    "Identity",
    "Expand",
    "Transpose",
];

/// For each graph input name that feeds (through value-preserving ops) the indices of a
/// `Gather` whose data is a constant, the smallest such table size on the gathered axis.
pub fn index_limits(g: &Graph) -> HashMap<String, i64> {
    let consts: HashMap<ValueId, &[usize]> = g
        .constants
        .iter()
        .map(|c| (c.id, c.tensor.shape()))
        .chain(
            g.inputs
                .iter()
                .filter_map(|i| i.default.as_ref().map(|t| (i.id, t.shape()))),
        )
        .collect();
    let mut out = HashMap::new();
    for input in &g.inputs {
        let mut frontier = vec![input.id];
        let mut seen = vec![input.id];
        let mut limit: Option<i64> = None;
        while let Some(v) = frontier.pop() {
            for node in &g.nodes {
                let uses: Vec<usize> = (0..node.inputs.len())
                    .filter(|&k| node.inputs[k] == Some(v))
                    .collect();
                if uses.is_empty() {
                    continue;
                }
                if let Op::Layout(LayoutOp::Gather { axis }) = &node.op {
                    if uses.contains(&1) {
                        if let Some(shape) = node.inputs[0].and_then(|d| consts.get(&d)) {
                            let r = shape.len() as i64;
                            let ax = if *axis < 0 { axis + r } else { *axis };
                            if (0..r).contains(&ax) {
                                let n = shape[ax as usize] as i64;
                                limit = Some(limit.map_or(n, |l| l.min(n)));
                            }
                        }
                    }
                } else if PASS_THROUGH.contains(&node.op.name()) && uses.contains(&0) {
                    for o in node.outputs.iter().flatten() {
                        if !seen.contains(o) {
                            seen.push(*o);
                            frontier.push(*o);
                        }
                    }
                }
            }
        }
        if let Some(l) = limit {
            out.insert(g.name_of(input.id).to_string(), l);
        }
    }
    out
}

/// Whether an input is an attention mask (filled with ones): its name contains "mask".
pub fn is_mask(name: &str) -> bool {
    name.to_ascii_lowercase().contains("mask")
}

#[cfg(test)]
mod tests {
    use super::*;
    use smelt_ir::{Constant, DType, GraphInput, Node, Tensor};

    #[test]
    fn finds_the_vocabulary_size() {
        let mut g = Graph::default();
        let ids = g.add_value("input_ids", None);
        let table = g.add_value("table", None);
        let out = g.add_value("out", None);
        g.inputs.push(GraphInput {
            id: ids,
            default: None,
        });
        g.constants.push(Constant {
            id: table,
            tensor: Tensor::zeros(DType::F32, vec![30522, 4]).unwrap(),
        });
        g.nodes.push(Node {
            name: "g".into(),
            op: Op::Layout(LayoutOp::Gather { axis: 0 }),
            inputs: vec![Some(table), Some(ids)],
            outputs: vec![Some(out)],
        });
        assert_eq!(index_limits(&g).get("input_ids"), Some(&30522));
        assert!(is_mask("attention_mask"));
    }
}
