//! The `ControlOp` family: control flow whose bodies are subgraphs.

use crate::Graph;

crate::op_family! {
    /// Control flow: the bodies are subgraphs that may read outer-scope values.
    pub enum ControlOp {
        /// Runs `then_branch` or `else_branch` depending on a boolean scalar.
        If { then_branch: Box<Graph>, else_branch: Box<Graph> },
        /// Runs `body` while the condition holds and the trip count allows.
        Loop { body: Box<Graph> },
        /// Runs `body` over slices of the scan inputs.
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
}
