//! Runtime values (tensors, sequences, optionals) and their static types.

use crate::{dim::format_shape, DType, Shape, Tensor};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The static type of a value, as far as it is known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ValueType {
    /// A tensor; the shape is None when even the rank is unknown.
    Tensor {
        /// Element type.
        dtype: DType,
        /// Dimensions, possibly symbolic.
        shape: Option<Shape>,
    },
    /// A sequence of values of one type.
    Sequence(Box<ValueType>),
    /// A value that may be absent.
    Optional(Box<ValueType>),
    /// A map from keys of one element type to values (ai.onnx.ml).
    Map(DType, Box<ValueType>),
}

/// A value flowing through a graph at run time.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A dense tensor.
    Tensor(Tensor),
    /// A sequence of values.
    Sequence(Sequence),
    /// An optional value.
    Optional(Optional),
}

/// A sequence value; `elem` types the elements even when empty.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequence {
    /// Element type, when known.
    pub elem: Option<ValueType>,
    /// The elements.
    pub items: Vec<Value>,
}

/// An optional value; `elem` types the content even when absent.
#[derive(Debug, Clone, PartialEq)]
pub struct Optional {
    /// Content type, when known.
    pub elem: Option<ValueType>,
    /// The content, if present.
    pub value: Option<Box<Value>>,
}

impl Value {
    /// The tensor inside, if this is a tensor.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The tensor inside, or an error naming what it is instead.
    pub fn tensor(&self) -> crate::Result<&Tensor> {
        self.as_tensor()
            .ok_or_else(|| crate::err!(InvalidModel, "expected a tensor, got {}", self.kind()))
    }

    /// Takes the tensor inside, or an error.
    pub fn into_tensor(self) -> crate::Result<Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => Err(crate::err!(
                InvalidModel,
                "expected a tensor, got {}",
                other.kind()
            )),
        }
    }

    /// A word for what the value is: tensor, sequence or optional.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Tensor(_) => "tensor",
            Value::Sequence(_) => "sequence",
            Value::Optional(_) => "optional",
        }
    }

    /// A one-line summary: `f32[1,3,224,224]`, `seq(3 x f32)`, `optional(none)`.
    pub fn summary(&self) -> String {
        match self {
            Value::Tensor(t) => format!("{}{:?}", t.dtype(), t.shape()),
            Value::Sequence(s) => format!("seq({} items)", s.items.len()),
            Value::Optional(o) => match &o.value {
                Some(v) => format!("optional({})", v.summary()),
                None => "optional(none)".into(),
            },
        }
    }

    /// The static type of this value (concrete shapes).
    pub fn value_type(&self) -> Option<ValueType> {
        Some(match self {
            Value::Tensor(t) => ValueType::Tensor {
                dtype: t.dtype(),
                shape: Some(
                    t.shape()
                        .iter()
                        .map(|&d| crate::Dim::Known(d as u64))
                        .collect(),
                ),
            },
            Value::Sequence(s) => ValueType::Sequence(Box::new(
                s.elem
                    .clone()
                    .or_else(|| s.items.first().and_then(|v| v.value_type()))?,
            )),
            Value::Optional(o) => ValueType::Optional(Box::new(
                o.elem
                    .clone()
                    .or_else(|| o.value.as_ref().and_then(|v| v.value_type()))?,
            )),
        })
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Self {
        Value::Tensor(t)
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueType::Tensor {
                dtype,
                shape: Some(s),
            } => write!(f, "{dtype}{}", format_shape(s)),
            ValueType::Tensor { dtype, shape: None } => write!(f, "{dtype}[*]"),
            ValueType::Sequence(e) => write!(f, "seq<{e}>"),
            ValueType::Optional(e) => write!(f, "opt<{e}>"),
            ValueType::Map(k, v) => write!(f, "map<{k},{v}>"),
        }
    }
}
