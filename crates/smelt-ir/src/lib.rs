//! smelt's intermediate representation: a typed SSA dataflow graph of tensor values.
//!
//! Nothing here knows ONNX: the frontend translates into these types, passes rewrite
//! them, backends lower them.

pub mod buf;
mod count;
pub mod dim;
pub mod dtype;
pub mod error;
pub mod graph;
pub mod kernel;
pub mod limits;
pub mod lowp;
pub mod op;
pub mod precision;
pub mod tensor;
pub mod text;
pub mod value;
pub mod verify;

pub use buf::{pod_bytes, AlignedBytes, Backing, Buf, Pod};
pub use count::dims_product;
pub use dim::{Dim, DimExpr, Shape};
pub use dtype::DType;
pub use error::{Error, ErrorKind, Result, ResultExt};
pub use graph::{Capture, Constant, Graph, GraphInput, Model, Node, ValueId, ValueInfo};
pub use limits::{CancelToken, Limits, RunControl, WorkPacer};
pub use op::Op;
pub use precision::{Precision, PrecisionPolicy};
pub use tensor::{numel, strides, Data, Tensor};
pub use value::{Map, Optional, Sequence, Value, ValueType};

/// What one pass of the compiler did (here, not in the pass crate, so that a runtime built
/// without the compiler still reports its plans' passes: none).
#[derive(Debug, Clone)]
pub struct PassReport {
    /// The pass's name.
    pub name: &'static str,
    /// Nodes before the pass (subgraphs included).
    pub nodes_before: usize,
    /// Nodes after the pass.
    pub nodes_after: usize,
    /// Whether the pass changed the graph.
    pub changed: bool,
    /// Seconds the pass took.
    pub seconds: f64,
}
