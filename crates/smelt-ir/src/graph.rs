//! The graph: SSA values, nodes in topological order, graph inputs/outputs, constants,
//! and (for subgraphs) captures of outer-scope values.

use crate::{Op, Tensor, ValueType};
use serde::{Deserialize, Serialize};

/// Index of a value within its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ValueId(pub u32);

/// What the graph knows about a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValueInfo {
    /// The value's name in the source model.
    pub name: String,
    /// Its type, when known.
    pub ty: Option<ValueType>,
}

/// One operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// The source node's name (ONNX `NodeProto.name`, or a generated one).
    pub name: String,
    /// The operation with its typed attributes.
    pub op: Op,
    /// Inputs; `None` for an omitted optional input.
    pub inputs: Vec<Option<ValueId>>,
    /// Outputs; `None` for an omitted optional output.
    pub outputs: Vec<Option<ValueId>>,
}

/// A graph input, with the default value when the model gave it an initializer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphInput {
    /// The value the input binds.
    pub id: ValueId,
    /// Used when the caller does not supply the input.
    pub default: Option<Tensor>,
}

/// A constant bound to a value (initializers, folded `Constant` nodes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Constant {
    /// The value it defines.
    pub id: ValueId,
    /// Its contents.
    pub tensor: Tensor,
}

/// An outer-scope value a subgraph reads: `inner` in this graph is `outer` in the parent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Capture {
    /// The value in this graph.
    pub inner: ValueId,
    /// The value in the enclosing graph.
    pub outer: ValueId,
}

/// A dataflow graph in SSA form: every value has one definition.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Graph {
    /// The graph's name.
    pub name: String,
    /// Every value, indexed by [`ValueId`].
    pub values: Vec<ValueInfo>,
    /// Graph inputs in order.
    pub inputs: Vec<GraphInput>,
    /// Graph outputs in order.
    pub outputs: Vec<ValueId>,
    /// Constants.
    pub constants: Vec<Constant>,
    /// Outer-scope values read by this (sub)graph.
    pub captures: Vec<Capture>,
    /// Nodes in a topological order.
    pub nodes: Vec<Node>,
}

impl Graph {
    /// Nodes of the graph and of every subgraph inside it, and how deep subgraphs nest
    /// (0 when there are none), as the model limits count them.
    pub fn size_and_depth(&self) -> (usize, usize) {
        let mut nodes = self.nodes.len();
        let mut depth = 0;
        for n in &self.nodes {
            for sub in n.op.subgraphs() {
                let (sn, sd) = sub.size_and_depth();
                nodes = nodes.saturating_add(sn);
                depth = depth.max(sd + 1);
            }
        }
        (nodes, depth)
    }

    /// Adds a value and returns its id.
    pub fn add_value(&mut self, name: impl Into<String>, ty: Option<ValueType>) -> ValueId {
        self.values.push(ValueInfo {
            name: name.into(),
            ty,
        });
        ValueId(self.values.len() as u32 - 1)
    }

    /// Information about a value.
    pub fn value(&self, id: ValueId) -> &ValueInfo {
        &self.values[id.0 as usize]
    }

    /// The name of a value.
    pub fn name_of(&self, id: ValueId) -> &str {
        &self.values[id.0 as usize].name
    }

    /// Inputs the caller must supply (those without a default).
    pub fn required_inputs(&self) -> impl Iterator<Item = &GraphInput> {
        self.inputs.iter().filter(|i| i.default.is_none())
    }

    /// Total number of nodes, counting those inside subgraphs.
    pub fn node_count_deep(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| {
                1 + n
                    .op
                    .subgraphs()
                    .iter()
                    .map(|g| g.node_count_deep())
                    .sum::<usize>()
            })
            .sum()
    }
}

/// A whole model: the main graph and where it came from.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Model {
    /// The main graph.
    pub graph: Graph,
    /// Operator sets the model imports: (domain, version); "" is the default ONNX domain.
    pub opsets: Vec<(String, i64)>,
    /// ONNX IR version of the source file.
    pub ir_version: i64,
    /// The program that wrote the model.
    pub producer: String,
}
