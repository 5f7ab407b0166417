//! The `ControlOp` family: control flow whose bodies are subgraphs.

use crate::Graph;

crate::op_family! {
    /// Control flow: the bodies are subgraphs that may read outer-scope values.
    pub enum ControlOp {
        /// Runs `then_branch` or `else_branch` depending on a boolean scalar; outputs are the branch's outputs.
        If {
            /// Run when the condition is true.
            then_branch: Box<Graph>,
            /// Run when the condition is false.
            else_branch: Box<Graph>,
        },
        /// Runs `body` while the condition holds and the trip count allows. Inputs: (M?, cond?, carried...);
        /// body: (iter, cond, carried...) -> (cond, carried..., scan outputs...); outputs: (carried..., stacked scans...).
        Loop {
            /// The body.
            body: Box<Graph>,
        },
        /// Runs `body` over slices of the scan inputs. Inputs: (states..., scan inputs...); body:
        /// (states..., slices...) -> (states..., output slices...); outputs: (final states..., scan outputs...).
        Scan {
            /// The body.
            body: Box<Graph>,
            /// Number of scan inputs (the rest are state variables).
            num_scan_inputs: usize,
            /// Per scan input: the axis iterated over.
            scan_input_axes: Vec<i64>,
            /// Per scan input: true to iterate backwards.
            scan_input_directions: Vec<bool>,
            /// Per scan output: the axis the slices are stacked on.
            scan_output_axes: Vec<i64>,
            /// Per scan output: true to stack backwards.
            scan_output_directions: Vec<bool>,
            /// Opset 8 form: the first input is `sequence_lens` (optional) and every state, scan input and
            /// output has a leading batch dimension; the axes above then count after the batch dimension.
            batched: bool,
        },
    }
}

impl ControlOp {
    /// The subgraphs the op carries.
    pub fn subgraphs(&self) -> Vec<&Graph> {
        match self {
            ControlOp::If {
                then_branch,
                else_branch,
            } => vec![then_branch, else_branch],
            ControlOp::Loop { body } => vec![body],
            ControlOp::Scan { body, .. } => vec![body],
        }
    }

    /// The subgraphs the op carries, for passes that rewrite them.
    pub fn subgraphs_mut(&mut self) -> Vec<&mut Graph> {
        match self {
            ControlOp::If {
                then_branch,
                else_branch,
            } => vec![then_branch, else_branch],
            ControlOp::Loop { body } => vec![body],
            ControlOp::Scan { body, .. } => vec![body],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GraphInput, Node, Op};

    #[test]
    fn scan_prints_and_parses_with_its_body() {
        let mut body = Graph {
            name: "body".into(),
            ..Graph::default()
        };
        let s = body.add_value("s", None);
        let x = body.add_value("x", None);
        body.inputs = vec![
            GraphInput {
                id: s,
                default: None,
            },
            GraphInput {
                id: x,
                default: None,
            },
        ];
        body.outputs = vec![s, x];
        let mut g = Graph {
            name: "main".into(),
            ..Graph::default()
        };
        let a = g.add_value("a", None);
        let b = g.add_value("b", None);
        let y = g.add_value("y", None);
        let z = g.add_value("z", None);
        g.inputs = vec![
            GraphInput {
                id: a,
                default: None,
            },
            GraphInput {
                id: b,
                default: None,
            },
        ];
        let op = ControlOp::Scan {
            body: Box::new(body),
            num_scan_inputs: 1,
            scan_input_axes: vec![1],
            scan_input_directions: vec![true],
            scan_output_axes: vec![-1],
            scan_output_directions: vec![false],
            batched: false,
        };
        assert_eq!(op.subgraphs().len(), 1);
        g.nodes.push(Node {
            name: "scan".into(),
            op: Op::Control(op),
            inputs: vec![Some(a), Some(b)],
            outputs: vec![Some(y), Some(z)],
        });
        g.outputs = vec![y, z];
        let text = crate::text::print_graph(&g);
        let back = crate::text::parse_graph(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, g, "{text}");
    }
}
