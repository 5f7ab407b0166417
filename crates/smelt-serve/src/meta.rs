//! Server and model metadata and the model configuration, as the REST side returns them
//! (the gRPC side builds the same from the same fields).

use crate::datatype;
use crate::model::{ServedModel, TensorSpec};
use serde_json::{json, Value as Json};

/// The server's name in metadata.
pub const SERVER_NAME: &str = "smelt";

/// The protocol extensions served.
pub const EXTENSIONS: [&str; 2] = ["binary_tensor_data", "model_configuration"];

/// The platform reported for a model, as Triton reports ONNX models.
pub const PLATFORM: &str = "onnx_onnxv1";

/// `GET v2`.
pub fn server() -> Json {
    json!({ "name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION"), "extensions": EXTENSIONS })
}

fn tensors(specs: &[TensorSpec]) -> Json {
    specs
        .iter()
        .map(|s| json!({ "name": s.name, "datatype": datatype::name(s.dtype).unwrap_or("?"), "shape": s.shape }))
        .collect()
}

/// `GET v2/models/{m}`.
pub fn model(m: &ServedModel) -> Json {
    json!({
        "name": m.name,
        "versions": [m.version],
        "platform": PLATFORM,
        "inputs": tensors(&m.inputs),
        "outputs": tensors(&m.outputs),
    })
}

/// A spec's dims as config.pbtxt writes them (without the batch dim when batching).
pub fn config_dims(m: &ServedModel, s: &TensorSpec) -> Vec<i64> {
    let skip = usize::from(m.config.max_batch_size > 0);
    s.shape.iter().skip(skip).copied().collect()
}

/// `GET v2/models/{m}/config`: the configuration in use, in ModelConfig's JSON form.
pub fn config_json(m: &ServedModel) -> Json {
    let io = |specs: &[TensorSpec]| -> Json {
        specs
            .iter()
            .map(|s| {
                let t = datatype::name(s.dtype).map(|n| if n == "BYTES" { "STRING" } else { n }).unwrap_or("INVALID");
                json!({ "name": s.name, "data_type": format!("TYPE_{t}"), "dims": config_dims(m, s) })
            })
            .collect()
    };
    let c = &m.config;
    let mut out = json!({
        "name": m.name,
        "platform": PLATFORM,
        "backend": "smelt",
        "max_batch_size": c.max_batch_size,
        "input": io(&m.inputs),
        "output": io(&m.outputs),
        "instance_group": [{ "count": c.instance_count, "kind": "KIND_CPU" }],
    });
    if let Some(b) = &c.dynamic_batching {
        out["dynamic_batching"] = json!({
            "preferred_batch_size": b.preferred_batch_size,
            "max_queue_delay_microseconds": b.max_queue_delay.as_micros() as u64,
            "default_queue_policy": {
                "max_queue_size": c.max_queue_size,
                "default_timeout_microseconds": c.default_timeout.map_or(0, |t| t.as_micros() as u64),
            },
        });
    }
    out
}
