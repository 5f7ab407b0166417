//! Showing and saving run outputs of every kind: one-line summaries with the first values,
//! and JSON for what `.npy` cannot hold (sequences, maps, optionals).

use serde_json::{json, Value as Json};
use smelt_ir::{DType, Data, Result, Tensor, Value};

/// How many elements (or items) a summary line shows.
const HEAD: usize = 8;

/// `name: f32 [2, 3] [0.1, ...]`, `name: seq of 16 [{0: 0.97, 1: 0.02}, ...]`.
pub fn describe(name: &str, v: &Value) -> String {
    format!("{name}: {}", summary(v, HEAD))
}

fn summary(v: &Value, head: usize) -> String {
    match v {
        Value::Tensor(t) => {
            let n = t.len().min(head);
            let more = if t.len() > n { ", ..." } else { "" };
            format!(
                "{} {:?} [{}{more}]",
                t.dtype(),
                t.shape(),
                elements(t, n).join(", ")
            )
        }
        Value::Sequence(s) => {
            let n = s.items.len().min(head.min(3));
            let items: Vec<String> = s.items[..n].iter().map(|x| inline(x, head)).collect();
            let more = if s.items.len() > n { ", ..." } else { "" };
            format!("seq of {} [{}{more}]", s.items.len(), items.join(", "))
        }
        Value::Optional(o) => match &o.value {
            Some(x) => format!("optional {}", summary(x, head)),
            None => "optional (none)".into(),
        },
        Value::Map(_) => format!("{} {}", v.summary(), inline(v, head)),
    }
}

/// A value inside a sequence: maps as `{k: v, ...}`, tensors by their first elements.
fn inline(v: &Value, head: usize) -> String {
    match v {
        Value::Map(m) => {
            let n = m.len().min(head);
            let keys = elements(m.keys(), n);
            let vals = elements(m.values(), n);
            let pairs: Vec<String> = keys
                .iter()
                .zip(&vals)
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            let more = if m.len() > n { ", ..." } else { "" };
            format!("{{{}{more}}}", pairs.join(", "))
        }
        other => summary(other, head),
    }
}

/// The first `n` elements as text.
fn elements(t: &Tensor, n: usize) -> Vec<String> {
    let head = match t.take(vec![n], &(0..n).collect::<Vec<_>>()) {
        Ok(h) => h,
        Err(e) => return vec![e.to_string()],
    };
    match head.data() {
        Data::Str(s) => s.iter().map(|x| format!("{x:?}")).collect(),
        _ if head.dtype().is_int() || head.dtype() == DType::Bool => match head.to_i64() {
            Ok(v) => v.iter().map(|x| x.to_string()).collect(),
            Err(e) => vec![e.to_string()],
        },
        _ => match head.to_f64() {
            Ok(v) => v.iter().map(|x| format!("{x:.6}")).collect(),
            Err(_) => vec![format!("{:?}", head.data()).chars().take(80).collect()],
        },
    }
}

/// A value as JSON: a tensor as nested arrays (its shape), a sequence as an array, a map as
/// an object (keys as strings), an optional as its value or null.
pub fn to_json(v: &Value) -> Result<Json> {
    Ok(match v {
        Value::Tensor(t) => nested(&flat(t)?, t.shape()),
        Value::Sequence(s) => Json::Array(s.items.iter().map(to_json).collect::<Result<_>>()?),
        Value::Optional(o) => match &o.value {
            Some(x) => to_json(x)?,
            None => Json::Null,
        },
        Value::Map(m) => {
            let keys = flat(m.keys())?;
            let vals = flat(m.values())?;
            let obj = keys
                .into_iter()
                .zip(vals)
                .map(|(k, v)| {
                    let k = match k {
                        Json::String(s) => s,
                        other => other.to_string(),
                    };
                    (k, v)
                })
                .collect();
            Json::Object(obj)
        }
    })
}

/// The elements of a tensor as JSON scalars (non-finite floats as strings).
fn flat(t: &Tensor) -> Result<Vec<Json>> {
    Ok(match t.data() {
        Data::Str(s) => s.iter().map(|x| json!(x)).collect(),
        Data::Bool(b) => b.iter().map(|x| json!(x)).collect(),
        _ if t.dtype().is_int() => t.to_i64()?.into_iter().map(|x| json!(x)).collect(),
        _ => t
            .to_f64()?
            .into_iter()
            .map(|x| {
                if x.is_finite() {
                    json!(x)
                } else {
                    json!(x.to_string())
                }
            })
            .collect(),
    })
}

/// Flat elements shaped as nested arrays.
fn nested(v: &[Json], shape: &[usize]) -> Json {
    match shape.split_first() {
        None => v.first().cloned().unwrap_or(Json::Null),
        Some((&d, rest)) => {
            let step = rest.iter().product::<usize>();
            Json::Array(
                (0..d)
                    .map(|i| {
                        nested(
                            &v[(i * step).min(v.len())..((i + 1) * step).min(v.len())],
                            rest,
                        )
                    })
                    .collect(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smelt_ir::{Map, Sequence};

    fn probs() -> Value {
        let m = |a: f32, b: f32| {
            Value::Map(
                Map::new(
                    Tensor::from_i64_vec(vec![2], vec![0, 1]).unwrap(),
                    Tensor::from_f32(vec![2], vec![a, b]).unwrap(),
                )
                .unwrap(),
            )
        };
        Value::Sequence(Sequence {
            elem: None,
            items: vec![m(0.25, 0.75), m(1.0, 0.0)],
        })
    }

    #[test]
    fn maps_and_sequences_print_and_become_json() {
        assert_eq!(
            describe("p", &probs()),
            "p: seq of 2 [{0: 0.250000, 1: 0.750000}, {0: 1.000000, 1: 0.000000}]"
        );
        assert_eq!(
            to_json(&probs()).unwrap(),
            json!([{"0": 0.25, "1": 0.75}, {"0": 1.0, "1": 0.0}])
        );
        let t = Value::Tensor(Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, f32::NAN]).unwrap());
        assert_eq!(to_json(&t).unwrap(), json!([[1.0, 2.0], [3.0, "NaN"]]));
        assert_eq!(
            describe("t", &t),
            "t: f32 [2, 2] [1.000000, 2.000000, 3.000000, NaN]"
        );
    }
}
