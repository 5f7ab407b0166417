//! The REST infer request and response: JSON tensors and the binary tensor data extension
//! (a JSON header of `Inference-Header-Content-Length` bytes, then the raw tensors in the
//! order the JSON lists them, each sized by its `binary_data_size` parameter).

use crate::datatype;
use crate::error::{Result, ServeError};
use crate::model::ServedModel;
use crate::state::Decoded;
use crate::{json, raw};
use serde::Deserialize;
use serde_json::{json as j, Map, Value as Json};
use smelt_ir::Tensor;
use std::time::Duration;

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    parameters: Map<String, Json>,
    inputs: Vec<Input>,
    #[serde(default)]
    outputs: Option<Vec<Output>>,
}

#[derive(Deserialize)]
struct Input {
    name: String,
    shape: Vec<i64>,
    datatype: String,
    #[serde(default)]
    parameters: Map<String, Json>,
    #[serde(default)]
    data: Option<Json>,
}

#[derive(Deserialize)]
struct Output {
    name: String,
    #[serde(default)]
    parameters: Map<String, Json>,
}

/// How the response is to be written: the request's id, and per output (in the model's
/// order) whether it was asked for and whether in binary.
pub struct Wanted {
    id: Option<String>,
    outputs: Vec<Option<bool>>,
}

fn flag(p: &Map<String, Json>, key: &str) -> bool {
    p.get(key).and_then(Json::as_bool).unwrap_or(false)
}

/// The request's `timeout` parameter (microseconds), as Triton reads it.
pub fn timeout_of(us: Option<u64>) -> Option<Duration> {
    us.filter(|&u| u > 0).map(Duration::from_micros)
}

/// Decodes a request body; `header_len` is the JSON part's length when the binary
/// extension is used (the rest of the body is the tensors' bytes).
pub fn decode(
    model: &ServedModel,
    body: &[u8],
    header_len: Option<usize>,
) -> Result<Decoded<Wanted>> {
    let (head, mut binary) = match header_len {
        Some(n) => body.split_at_checked(n).ok_or_else(|| {
            ServeError::invalid(format!(
                "Inference-Header-Content-Length is {n}, but the body has {} bytes",
                body.len()
            ))
        })?,
        None => (body, &[][..]),
    };
    let req: Request = serde_json::from_slice(head).map_err(|e| {
        ServeError::invalid(format!(
            "the request is not valid JSON for an inference request: {e}"
        ))
    })?;
    let mut inputs = Vec::with_capacity(req.inputs.len().min(model.inputs.len()));
    for i in &req.inputs {
        let (pos, dtype, shape) = model.check_wire_input(&i.name, &i.datatype, &i.shape)?;
        let t = match (i.parameters.get("binary_data_size"), &i.data) {
            (Some(size), _) => {
                let size = size
                    .as_u64()
                    .and_then(|s| usize::try_from(s).ok())
                    .ok_or_else(|| {
                        ServeError::invalid(format!(
                            "input '{}': binary_data_size must be a byte count",
                            i.name
                        ))
                    })?;
                let (bytes, rest) = binary.split_at_checked(size).ok_or_else(|| {
                    ServeError::invalid(format!(
                        "input '{}': binary_data_size is {size}, but {} bytes of binary data are left",
                        i.name,
                        binary.len()
                    ))
                })?;
                binary = rest;
                raw::decode(&i.name, dtype, shape, bytes)?
            }
            (None, Some(data)) => json::decode(&i.name, dtype, shape, data)?,
            (None, None) => {
                return Err(ServeError::invalid(format!(
                    "input '{}' has no data",
                    i.name
                )))
            }
        };
        inputs.push((pos, t));
    }
    if !binary.is_empty() {
        return Err(ServeError::invalid(format!(
            "{} bytes of binary data follow the inputs that no input's binary_data_size accounts for",
            binary.len()
        )));
    }
    let all_binary = flag(&req.parameters, "binary_data_output");
    let mut outputs: Vec<Option<bool>> = vec![None; model.outputs.len()];
    match &req.outputs {
        None => outputs.iter_mut().for_each(|o| *o = Some(all_binary)),
        Some(list) => {
            for o in list {
                let pos = model.output_position(&o.name)?;
                if o.parameters.contains_key("classification") {
                    return Err(ServeError::new(
                        crate::error::Status::Unsupported,
                        "the classification extension is not supported",
                    ));
                }
                outputs[pos] = Some(all_binary || flag(&o.parameters, "binary_data"));
            }
        }
    }
    let timeout = timeout_of(req.parameters.get("timeout").and_then(Json::as_u64));
    Ok(Decoded {
        inputs,
        timeout,
        extra: Wanted {
            id: req.id,
            outputs,
        },
    })
}

/// An encoded response: the body, and the JSON part's length when binary tensors follow.
pub struct Encoded {
    /// The whole body.
    pub body: Vec<u8>,
    /// `Some(json length)` when the binary extension was used.
    pub header_len: Option<usize>,
}

/// Encodes the outputs a request asked for.
pub fn encode(model: &ServedModel, outputs: Vec<Tensor>, wanted: Wanted) -> Result<Encoded> {
    let mut list = Vec::new();
    let mut binary = Vec::new();
    for ((spec, t), want) in model.outputs.iter().zip(outputs).zip(wanted.outputs) {
        let Some(as_binary) = want else { continue };
        let datatype = datatype::name(t.dtype()).ok_or_else(|| {
            ServeError::internal(format!("output '{}' is {}", spec.name, t.dtype()))
        })?;
        let mut o = j!({ "name": spec.name, "datatype": datatype, "shape": t.shape() });
        if as_binary {
            let b = raw::encode(&t)?;
            o["parameters"] = j!({ "binary_data_size": b.len() });
            binary.extend_from_slice(&b);
        } else {
            o["data"] = json::encode(&t)?;
        }
        list.push(o);
    }
    let mut head =
        j!({ "model_name": model.name, "model_version": model.version, "outputs": list });
    if let Some(id) = wanted.id {
        head["id"] = Json::String(id);
    }
    let mut body = head.to_string().into_bytes();
    let header_len = (!binary.is_empty()).then_some(body.len());
    body.extend_from_slice(&binary);
    Ok(Encoded { body, header_len })
}
