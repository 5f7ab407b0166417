//! A model's serving configuration: the subset of Triton's config.pbtxt that smelt uses
//! (`max_batch_size`, `input`/`output` with `dims`, `dynamic_batching`, `instance_group`
//! counts, `model_warmup` shapes). Unknown fields are ignored, as a repository written for
//! Triton carries fields for other backends.

use crate::datatype;
use crate::pbtxt::{self, Value};
use smelt_ir::DType;
use std::time::Duration;

/// How many requests a model's queue holds when the config sets no bound.
pub const DEFAULT_QUEUE_SIZE: usize = 1024;

/// A model's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// The model's name (the repository folder's, when the config gives none).
    pub name: String,
    /// 0: the model does not batch; n >= 1: dim 0 is the batch dim, at most n.
    pub max_batch_size: usize,
    /// Declared inputs (empty: the model's own signature).
    pub inputs: Vec<TensorConfig>,
    /// Declared outputs (empty: the model's own signature).
    pub outputs: Vec<TensorConfig>,
    /// The dynamic batcher's settings, when it is on.
    pub dynamic_batching: Option<DynamicBatching>,
    /// How many requests run at once (instance_group counts summed), each on its share of
    /// the runtime's thread pool.
    pub instance_count: usize,
    /// The requests' queue bound: beyond it, requests are refused (503 / UNAVAILABLE).
    pub max_queue_size: usize,
    /// How long a request may wait and run unless it says otherwise.
    pub default_timeout: Option<Duration>,
    /// Shapes to run once before the model is ready.
    pub warmup: Vec<Warmup>,
}

/// A declared input or output.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorConfig {
    /// Its name.
    pub name: String,
    /// Its element type, when declared.
    pub dtype: Option<DType>,
    /// Its dims without the batch dim (-1: variable).
    pub dims: Vec<i64>,
}

/// The dynamic batcher's settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DynamicBatching {
    /// Batch sizes to run as soon as they can be formed.
    pub preferred_batch_size: Vec<usize>,
    /// How long the oldest request may wait for a fuller batch.
    pub max_queue_delay: Duration,
}

/// One warm-up request: a batch size and the shape of each input (without the batch dim
/// when the model batches).
#[derive(Debug, Clone, PartialEq)]
pub struct Warmup {
    /// The batch size (1 when the model does not batch).
    pub batch_size: usize,
    /// Each input's dims.
    pub inputs: Vec<(String, Vec<usize>)>,
}

impl ModelConfig {
    /// The configuration of a model given without a config file.
    pub fn named(name: &str) -> ModelConfig {
        ModelConfig {
            name: name.to_string(),
            max_batch_size: 0,
            inputs: Vec::new(),
            outputs: Vec::new(),
            dynamic_batching: None,
            instance_count: 1,
            max_queue_size: DEFAULT_QUEUE_SIZE,
            default_timeout: None,
            warmup: Vec::new(),
        }
    }

    /// Parses config.pbtxt text; `name` is used when the file names no model.
    pub fn parse(text: &str, name: &str) -> Result<ModelConfig, String> {
        let fields = pbtxt::parse(text).map_err(|e| e.to_string())?;
        let mut c = ModelConfig::named(name);
        let mut groups = 0;
        for (key, v) in &fields {
            match key.as_str() {
                "name" => c.name = text_of(key, v)?.to_string(),
                "max_batch_size" => c.max_batch_size = uint(key, v)?,
                "input" => c.inputs.extend(tensors(key, v)?),
                "output" => c.outputs.extend(tensors(key, v)?),
                "dynamic_batching" => {
                    let (b, queue, timeout) = batching(v)?;
                    c.dynamic_batching = Some(b);
                    if let Some(q) = queue {
                        c.max_queue_size = q;
                    }
                    c.default_timeout = timeout;
                }
                "instance_group" => {
                    for g in v.items() {
                        groups += field(g, "count")
                            .map(|n| uint("count", n))
                            .transpose()?
                            .unwrap_or(1);
                    }
                }
                "model_warmup" => {
                    for w in v.items() {
                        c.warmup.push(warmup(w)?);
                    }
                }
                _ => {}
            }
        }
        if groups > 0 {
            c.instance_count = groups;
        }
        if c.dynamic_batching.is_some() && c.max_batch_size == 0 {
            return Err("dynamic_batching needs max_batch_size >= 1".into());
        }
        Ok(c)
    }
}

fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v.fields().iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn text_of<'a>(key: &str, v: &'a Value) -> Result<&'a str, String> {
    v.text()
        .ok_or_else(|| format!("'{key}' must be a value, not a message or list"))
}

fn int(key: &str, v: &Value) -> Result<i64, String> {
    let t = text_of(key, v)?;
    t.parse()
        .map_err(|_| format!("'{key}' must be an integer, not '{t}'"))
}

fn uint(key: &str, v: &Value) -> Result<usize, String> {
    usize::try_from(int(key, v)?).map_err(|_| format!("'{key}' must not be negative"))
}

fn ints(key: &str, v: &Value) -> Result<Vec<i64>, String> {
    v.items().into_iter().map(|x| int(key, x)).collect()
}

fn tensors(key: &str, v: &Value) -> Result<Vec<TensorConfig>, String> {
    v.items()
        .into_iter()
        .map(|t| {
            let name = field(t, "name")
                .and_then(Value::text)
                .ok_or_else(|| format!("an '{key}' entry has no name"))?
                .to_string();
            let dtype = match field(t, "data_type").and_then(Value::text) {
                Some(s) => Some(
                    datatype::parse_config(s)
                        .ok_or_else(|| format!("{key} '{name}': unknown data_type {s}"))?,
                ),
                None => None,
            };
            let dims = field(t, "dims")
                .map(|d| ints("dims", d))
                .transpose()?
                .unwrap_or_default();
            if dims.iter().any(|&d| d < -1) {
                return Err(format!(
                    "{key} '{name}': dims must be -1 or more, not {dims:?}"
                ));
            }
            Ok(TensorConfig { name, dtype, dims })
        })
        .collect()
}

type Batching = (DynamicBatching, Option<usize>, Option<Duration>);

fn batching(v: &Value) -> Result<Batching, String> {
    let mut b = DynamicBatching::default();
    if let Some(p) = field(v, "preferred_batch_size") {
        b.preferred_batch_size = p
            .items()
            .into_iter()
            .map(|x| uint("preferred_batch_size", x))
            .collect::<Result<_, _>>()?;
    }
    if let Some(d) = field(v, "max_queue_delay_microseconds") {
        b.max_queue_delay = Duration::from_micros(uint("max_queue_delay_microseconds", d)? as u64);
    }
    let (mut queue, mut timeout) = (None, None);
    if let Some(q) = field(v, "default_queue_policy") {
        if let Some(n) = field(q, "max_queue_size") {
            // Triton reads 0 as unbounded; smelt keeps a bound.
            queue = Some(match uint("max_queue_size", n)? {
                0 => DEFAULT_QUEUE_SIZE,
                n => n,
            });
        }
        if let Some(t) = field(q, "default_timeout_microseconds") {
            timeout = match uint("default_timeout_microseconds", t)? {
                0 => None,
                us => Some(Duration::from_micros(us as u64)),
            };
        }
    }
    Ok((b, queue, timeout))
}

fn warmup(w: &Value) -> Result<Warmup, String> {
    let batch_size = field(w, "batch_size")
        .map(|b| uint("batch_size", b))
        .transpose()?
        .unwrap_or(1);
    let mut inputs = Vec::new();
    for (k, entry) in w.fields() {
        if k != "inputs" {
            continue;
        }
        for e in entry.items() {
            let name = field(e, "key")
                .and_then(Value::text)
                .ok_or_else(|| "a model_warmup input has no key".to_string())?;
            let dims = field(e, "value")
                .and_then(|v| field(v, "dims"))
                .map(|d| ints("dims", d))
                .transpose()?
                .unwrap_or_default();
            let dims = dims
                .into_iter()
                .map(|d| {
                    usize::try_from(d)
                        .map_err(|_| format!("model_warmup '{name}': dims must be concrete"))
                })
                .collect::<Result<_, _>>()?;
            inputs.push((name.to_string(), dims));
        }
    }
    Ok(Warmup {
        batch_size: batch_size.max(1),
        inputs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_subset_and_ignores_the_rest() {
        let text = r#"
name: "minilm"
backend: "onnxruntime"
max_batch_size: 16
input [
  { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }
]
dynamic_batching {
  preferred_batch_size: [ 8, 16 ]
  max_queue_delay_microseconds: 2000
  default_queue_policy { max_queue_size: 64 default_timeout_microseconds: 500000 }
}
instance_group [ { count: 1 kind: KIND_CPU }, { count: 1 kind: KIND_CPU } ]
model_warmup [ {
  name: "seq16" batch_size: 1
  inputs { key: "input_ids" value: { data_type: TYPE_INT64 dims: [ 16 ] zero_data: true } }
  inputs { key: "attention_mask" value: { data_type: TYPE_INT64 dims: [ 16 ] zero_data: true } }
} ]
optimization { execution_accelerators { cpu_execution_accelerator: [ { name: "x" } ] } }
"#;
        let c = ModelConfig::parse(text, "dir").unwrap();
        assert_eq!(c.name, "minilm");
        assert_eq!(c.max_batch_size, 16);
        assert_eq!(c.inputs[1].dims, vec![-1]);
        assert_eq!(c.inputs[0].dtype, Some(DType::I64));
        let b = c.dynamic_batching.as_ref().unwrap();
        assert_eq!(b.preferred_batch_size, vec![8, 16]);
        assert_eq!(b.max_queue_delay, Duration::from_micros(2000));
        assert_eq!((c.max_queue_size, c.instance_count), (64, 2));
        assert_eq!(c.default_timeout, Some(Duration::from_millis(500)));
        assert_eq!(c.warmup[0].inputs[1], ("attention_mask".into(), vec![16]));
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(ModelConfig::parse("max_batch_size: -1", "m").is_err());
        assert!(ModelConfig::parse("dynamic_batching { }", "m").is_err());
        assert!(ModelConfig::parse("input [ { dims: [1] } ]", "m").is_err());
        assert!(ModelConfig::parse("input { name: \"x\" data_type: TYPE_NOPE }", "m").is_err());
        assert_eq!(
            ModelConfig::parse("", "m").unwrap(),
            ModelConfig::named("m")
        );
    }
}
