//! Operations: a typed enum of op families, each family an enum with typed attributes.
//!
//! The ONNX importer is the only place that knows ONNX attribute names and opset
//! differences; here every attribute is a Rust field with its final meaning.

pub mod control;
pub mod elementwise;
pub mod layout;
pub mod llm;
pub mod loss;
pub mod misc;
pub mod ml;
pub mod nn;
pub mod quant;
pub mod recurrent;
pub mod reduce;
pub mod sequence;

pub use control::ControlOp;
pub use elementwise::ElementwiseOp;
pub use layout::LayoutOp;
pub use llm::LlmOp;
pub use loss::LossOp;
pub use misc::MiscOp;
pub use nn::NnOp;
pub use quant::QuantOp;
pub use recurrent::RecurrentOp;
pub use reduce::ReduceOp;
pub use sequence::SequenceOp;

use crate::Graph;
use serde::{Deserialize, Serialize};

/// Declares an op family enum with a `name()` that returns the variant's name.
#[macro_export]
macro_rules! op_family {
    (
        $(#[$em:meta])*
        pub enum $name:ident {
            $( $(#[$vm:meta])* $var:ident $( ( $($tup:tt)* ) )? $( { $($body:tt)* } )? ),* $(,)?
        }
    ) => {
        $(#[$em])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $( $(#[$vm])* $var $( ( $($tup)* ) )? $( { $($body)* } )? ),*
        }

        impl $name {
            /// The op's name, as the text IR prints it.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Self::$var { .. } => stringify!($var), )*
                }
            }
        }
    };
}

/// An operation of the IR.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// Elementwise math, activations, comparisons, logic, casts.
    Elementwise(ElementwiseOp),
    /// Reductions, arg-reductions, softmax family, scans over an axis, top-k, sorting.
    Reduce(ReduceOp),
    /// Shape and data movement: reshape, transpose, slice, gather, scatter, pad, concat...
    Layout(LayoutOp),
    /// Neural-network anchors: matmul, gemm, conv, pooling, normalization.
    Nn(NnOp),
    /// Control flow with subgraphs: If, Loop, Scan.
    Control(ControlOp),
    /// Sequence and optional values.
    Sequence(SequenceOp),
    /// Quantization and integer arithmetic.
    Quant(QuantOp),
    /// Recurrent layers: RNN, GRU, LSTM.
    Recurrent(RecurrentOp),
    /// Training losses.
    Loss(LossOp),
    /// Language-model blocks: SwiGLU, KV-cache scatter, linear/flex attention.
    Llm(LlmOp),
    /// Everything else: vision, signal, strings, random, ML ops.
    Misc(MiscOp),
}

impl Op {
    /// The op's name (e.g. `Conv`).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Elementwise(o) => o.name(),
            Op::Reduce(o) => o.name(),
            Op::Layout(o) => o.name(),
            Op::Nn(o) => o.name(),
            Op::Control(o) => o.name(),
            Op::Sequence(o) => o.name(),
            Op::Quant(o) => o.name(),
            Op::Recurrent(o) => o.name(),
            Op::Loss(o) => o.name(),
            Op::Llm(o) => o.name(),
            Op::Misc(o) => o.name(),
        }
    }

    /// The op's family name (e.g. `nn`).
    pub fn family(&self) -> &'static str {
        match self {
            Op::Elementwise(_) => "elementwise",
            Op::Reduce(_) => "reduce",
            Op::Layout(_) => "layout",
            Op::Nn(_) => "nn",
            Op::Control(_) => "control",
            Op::Sequence(_) => "sequence",
            Op::Quant(_) => "quant",
            Op::Recurrent(_) => "recurrent",
            Op::Loss(_) => "loss",
            Op::Llm(_) => "llm",
            Op::Misc(_) => "misc",
        }
    }

    /// Subgraphs the op carries (bodies of If/Loop/Scan, SequenceMap).
    pub fn subgraphs(&self) -> Vec<&Graph> {
        match self {
            Op::Control(c) => c.subgraphs(),
            Op::Sequence(s) => s.subgraphs(),
            Op::Llm(o) => o.subgraphs(),
            _ => Vec::new(),
        }
    }

    /// Mutable access to the subgraphs the op carries.
    pub fn subgraphs_mut(&mut self) -> Vec<&mut Graph> {
        match self {
            Op::Control(c) => c.subgraphs_mut(),
            Op::Sequence(s) => s.subgraphs_mut(),
            Op::Llm(o) => o.subgraphs_mut(),
            _ => Vec::new(),
        }
    }

    /// The typed attributes as JSON (for the text IR and `explain`); `null` when there are none.
    pub fn attrs_json(&self) -> serde_json::Value {
        let v = match self {
            Op::Elementwise(o) => serde_json::to_value(o),
            Op::Reduce(o) => serde_json::to_value(o),
            Op::Layout(o) => serde_json::to_value(o),
            Op::Nn(o) => serde_json::to_value(o),
            Op::Control(o) => serde_json::to_value(o),
            Op::Sequence(o) => serde_json::to_value(o),
            Op::Quant(o) => serde_json::to_value(o),
            Op::Recurrent(o) => serde_json::to_value(o),
            Op::Loss(o) => serde_json::to_value(o),
            Op::Llm(o) => serde_json::to_value(o),
            Op::Misc(o) => serde_json::to_value(o),
        };
        match v {
            Ok(serde_json::Value::Object(mut m)) if m.len() == 1 => {
                m.remove(self.name()).unwrap_or(serde_json::Value::Null)
            }
            _ => serde_json::Value::Null,
        }
    }

    /// Rebuilds an op from its family, name and attributes JSON (the inverse of
    /// [`Op::family`], [`Op::name`] and [`Op::attrs_json`]).
    pub fn from_parts(family: &str, name: &str, attrs: serde_json::Value) -> crate::Result<Op> {
        let tagged = if attrs.is_null() {
            serde_json::Value::String(name.to_string())
        } else {
            serde_json::json!({ name: attrs })
        };
        fn de<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> crate::Result<T> {
            serde_json::from_value(v).map_err(|e| crate::err!(InvalidModel, "{e}"))
        }
        Ok(match family {
            "elementwise" => Op::Elementwise(de(tagged)?),
            "reduce" => Op::Reduce(de(tagged)?),
            "layout" => Op::Layout(de(tagged)?),
            "nn" => Op::Nn(de(tagged)?),
            "control" => Op::Control(de(tagged)?),
            "sequence" => Op::Sequence(de(tagged)?),
            "quant" => Op::Quant(de(tagged)?),
            "recurrent" => Op::Recurrent(de(tagged)?),
            "loss" => Op::Loss(de(tagged)?),
            "llm" => Op::Llm(de(tagged)?),
            "misc" => Op::Misc(de(tagged)?),
            _ => crate::bail!(InvalidModel, "unknown op family '{family}'"),
        })
    }
}

/// Padding style shared by convolution and pooling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AutoPad {
    /// Explicit pads.
    NotSet,
    /// Pad so output = ceil(input / stride), extra at the end.
    SameUpper,
    /// Pad so output = ceil(input / stride), extra at the start.
    SameLower,
    /// No padding.
    Valid,
}
