//! Runtime values (tensors, sequences, optionals, maps) and their static types.

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
    /// A map from scalar keys to scalar values (ai.onnx.ml: ZipMap's rows, DictVectorizer's
    /// input).
    Map(Map),
}

/// A map: `keys[i]` maps to `values[i]`, in this order. Both are 1-D tensors of one length;
/// keys are integers or strings, none twice.
#[derive(Debug, Clone, PartialEq)]
pub struct Map {
    keys: Tensor,
    values: Tensor,
}

impl Map {
    /// A map of keys to values; an error unless both are 1-D of one length, the keys
    /// integers or strings and distinct.
    pub fn new(keys: Tensor, values: Tensor) -> crate::Result<Map> {
        crate::ensure!(
            keys.rank() == 1 && values.rank() == 1 && keys.len() == values.len(),
            InvalidInput,
            "a map needs 1-D keys and values of one length, got {:?} and {:?}",
            keys.shape(),
            values.shape()
        );
        crate::ensure!(
            keys.dtype().is_int() || keys.dtype() == DType::Str,
            InvalidInput,
            "map keys must be integers or strings, not {}",
            keys.dtype()
        );
        let distinct = match keys.data() {
            crate::Data::Str(s) => {
                let set: std::collections::HashSet<&String> = s.iter().collect();
                set.len() == s.len()
            }
            _ => {
                let v = keys.to_i64()?;
                let set: std::collections::HashSet<i64> = v.iter().copied().collect();
                set.len() == v.len()
            }
        };
        crate::ensure!(distinct, InvalidInput, "a map has a key twice");
        Ok(Map { keys, values })
    }

    /// The keys (1-D).
    pub fn keys(&self) -> &Tensor {
        &self.keys
    }

    /// The values (1-D, one per key).
    pub fn values(&self) -> &Tensor {
        &self.values
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.keys.len() == 0
    }
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
    /// Bytes the value's elements take in memory (string contents included), as the run
    /// limits count them.
    pub fn memory_bytes(&self) -> u64 {
        fn tensor(t: &Tensor) -> u64 {
            let base = crate::limits::storage_bytes(t.dtype(), t.len()).unwrap_or(u64::MAX);
            match t.data() {
                crate::Data::Str(v) => base.saturating_add(v.iter().map(|s| s.len() as u64).sum()),
                _ => base,
            }
        }
        match self {
            Value::Tensor(t) => tensor(t),
            Value::Sequence(s) => s
                .items
                .iter()
                .fold(0u64, |a, v| a.saturating_add(v.memory_bytes())),
            Value::Optional(o) => o.value.as_ref().map_or(0, |v| v.memory_bytes()),
            Value::Map(m) => tensor(m.keys()).saturating_add(tensor(m.values())),
        }
    }

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

    /// A word for what the value is: tensor, sequence, optional or map.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Tensor(_) => "tensor",
            Value::Sequence(_) => "sequence",
            Value::Optional(_) => "optional",
            Value::Map(_) => "map",
        }
    }

    /// A one-line summary: `f32[1,3,224,224]`, `seq(3 items)`, `optional(none)`,
    /// `map(3 x str -> f32)`.
    pub fn summary(&self) -> String {
        match self {
            Value::Tensor(t) => format!("{}{:?}", t.dtype(), t.shape()),
            Value::Sequence(s) => format!("seq({} items)", s.items.len()),
            Value::Optional(o) => match &o.value {
                Some(v) => format!("optional({})", v.summary()),
                None => "optional(none)".into(),
            },
            Value::Map(m) => format!(
                "map({} x {} -> {})",
                m.len(),
                m.keys.dtype(),
                m.values.dtype()
            ),
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
            Value::Map(m) => ValueType::Map(
                m.keys.dtype(),
                Box::new(ValueType::Tensor {
                    dtype: m.values.dtype(),
                    shape: None,
                }),
            ),
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
