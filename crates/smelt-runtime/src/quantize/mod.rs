//! Static post-training quantization (`smelt quantize`): calibrates the activation ranges
//! of a float model's products on sample inputs (the compiled float plan, with those
//! activations exposed as outputs), then writes a QDQ model (see `smelt_onnx::qdq`) that
//! smelt runs on its integer kernels and onnxruntime runs too.

mod ranges;

use crate::{Session, SessionOptions};
use smelt_ir::{bail, err, Limits, Result, Tensor, Value};
use smelt_onnx::qdq::{self, QdqOptions, Range};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

/// How an activation's range is taken from the calibration values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    /// The smallest and largest value seen.
    MinMax,
    /// The values at this percentile from each end (e.g. 99.99: the lowest and highest
    /// 0.01% are clipped), from a histogram over the min-max range (a second pass).
    Percentile(f64),
    /// The clipping whose 256-level quantization keeps the most information (least
    /// Kullback-Leibler divergence from the calibration values' histogram, a second pass).
    Entropy,
}

/// What to quantize and how.
#[derive(Debug, Clone)]
pub struct QuantizeOptions {
    /// The range method.
    pub method: Method,
    /// One weight scale per output channel (else per tensor).
    pub per_channel: bool,
    /// 7-bit weights (see `smelt_onnx::qdq::QdqOptions::reduce_range`).
    pub reduce_range: bool,
    /// Which Add and Sum nodes read quantized activations (see
    /// `smelt_onnx::qdq::Residuals`).
    pub residuals: qdq::Residuals,
    /// The op types quantized (Conv, MatMul, Gemm).
    pub ops: Vec<String>,
    /// How the float model runs for calibration.
    pub session: SessionOptions,
}

/// What a quantization did.
#[derive(Debug, Clone)]
pub struct QuantizeReport {
    /// Products quantized.
    pub products: usize,
    /// BatchNormalization nodes folded into convolutions first.
    pub folded_batchnorms: usize,
    /// Activations calibrated.
    pub activations: usize,
    /// Calibration samples run.
    pub samples: usize,
    /// Each activation's calibrated range, in graph order.
    pub ranges: Vec<(String, Range)>,
}

/// Smallest embedding table `--dynamic` stores as int8 (a 2 x 384 token-type table stays
/// float; MiniLM's 30522 x 384 word and 512 x 384 position tables do not).
const GATHER_MIN_ELEMENTS: usize = 4096;

/// Bins of the percentile and entropy histograms.
const BINS: usize = 4096;

/// Quantizes the ONNX model `bytes` (external data under `base_dir`) on `samples` (each
/// a full set of the model's inputs); returns the QDQ model's bytes.
pub fn quantize(
    bytes: &[u8],
    base_dir: Option<PathBuf>,
    samples: &[HashMap<String, Value>],
    o: &QuantizeOptions,
) -> Result<(Vec<u8>, QuantizeReport)> {
    if samples.is_empty() {
        bail!(InvalidInput, "no calibration samples");
    }
    let mut proto = smelt_onnx::decode_model(bytes, Limits::process_default())?;
    let Some(g) = proto.graph.as_mut() else {
        bail!(InvalidModel, "the model has no graph");
    };
    let folded = qdq::fold_batchnorm(g);
    let ops: Vec<&str> = o.ops.iter().map(String::as_str).collect();
    let targets = qdq::targets(g, &ops);
    if targets.is_empty() {
        bail!(
            Unsupported,
            "no {} node with float initializer weights to quantize",
            o.ops.join("/")
        );
    }
    let mut names: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    for t in &targets {
        if seen.insert(t.activation.clone()) {
            names.push(t.activation.clone());
        }
    }
    let mut model = smelt_onnx::import_model(&proto, base_dir, false)?.model;
    // Activations that are graph inputs are read from the samples; the others become
    // outputs of the calibration plan.
    let input_names: HashSet<String> = model
        .graph
        .inputs
        .iter()
        .map(|i| model.graph.name_of(i.id).to_string())
        .collect();
    for n in names.iter().filter(|n| !input_names.contains(*n)) {
        let Some(id) = model.graph.values.iter().position(|v| &v.name == n) else {
            bail!(
                Internal,
                "activation {n} is not a value of the imported graph"
            );
        };
        let id = smelt_ir::ValueId(id as u32);
        if !model.graph.outputs.contains(&id) {
            model.graph.outputs.push(id);
        }
    }
    let session = Session::from_model_with(model, &o.session)?;
    let ranges = calibrate(&session, &names, samples, o.method)?;
    qdq::write_qdq(
        &mut proto,
        &targets,
        &ranges,
        QdqOptions {
            per_channel: o.per_channel,
            reduce_range: o.reduce_range,
            residuals: o.residuals,
        },
    )?;
    let report = QuantizeReport {
        products: targets.len(),
        folded_batchnorms: folded,
        activations: names.len(),
        samples: samples.len(),
        ranges: names.iter().map(|n| (n.clone(), ranges[n])).collect(),
    };
    Ok((qdq::encode(&proto), report))
}

/// Dynamic quantization of the ONNX model `bytes`: its MatMul and Gemm products with float
/// initializer weights (among `ops`) rewritten as onnxruntime's `quantize_dynamic` writes
/// them, and with `Gather` among `ops` its embedding tables stored as int8 (see
/// `smelt_onnx::qdq::dynamic`); no calibration. Returns the model's bytes and the count of
/// products and tables rewritten.
pub fn quantize_dynamic(
    bytes: &[u8],
    ops: &[String],
    opts: QdqOptions,
) -> Result<(Vec<u8>, usize)> {
    let gathers = ops.iter().any(|o| o == "Gather");
    let mut proto = smelt_onnx::decode_model(bytes, Limits::process_default())?;
    let Some(g) = proto.graph.as_ref() else {
        bail!(InvalidModel, "the model has no graph");
    };
    let ops: Vec<&str> = ops
        .iter()
        .map(String::as_str)
        .filter(|o| matches!(*o, "MatMul" | "Gemm"))
        .collect();
    let targets = qdq::targets(g, &ops);
    let mut count = if targets.is_empty() {
        0
    } else {
        qdq::dynamic::write_dynamic(&mut proto, &targets, opts)?
    };
    if gathers {
        count += qdq::dynamic::quantize_gathers(&mut proto, opts, GATHER_MIN_ELEMENTS)?;
    }
    if count == 0 {
        bail!(
            Unsupported,
            "no MatMul/Gemm with float initializer weights, nor Gather of a float table, to quantize dynamically"
        );
    }
    Ok((qdq::encode(&proto), count))
}

/// The values of `names` in one run of `sample` (inputs read from the sample).
fn observe<'a>(
    session: &Session,
    names: &'a [String],
    sample: &HashMap<String, Value>,
) -> Result<Vec<(&'a String, Tensor)>> {
    let out: HashMap<String, Value> = session.run(sample.clone())?.into_iter().collect();
    names
        .iter()
        .map(|n| {
            let v = out
                .get(n)
                .or_else(|| sample.get(n))
                .ok_or_else(|| err!(Internal, "calibration run gave no value {n}"))?;
            let t = v.tensor()?;
            let f = match t.as_f32() {
                Some(_) => t.clone(),
                None => Tensor::from_f64(smelt_ir::DType::F32, t.shape().to_vec(), &t.to_f64()?)?,
            };
            Ok((n, f))
        })
        .collect()
}

/// Calibrated ranges of `names` over the samples.
fn calibrate(
    session: &Session,
    names: &[String],
    samples: &[HashMap<String, Value>],
    method: Method,
) -> Result<HashMap<String, Range>> {
    let mut ranges: HashMap<String, Range> = names
        .iter()
        .map(|n| {
            (
                n.clone(),
                Range {
                    min: f32::INFINITY,
                    max: f32::NEG_INFINITY,
                },
            )
        })
        .collect();
    for s in samples {
        for (n, t) in observe(session, names, s)? {
            let r = ranges.get_mut(n).expect("every name has a range");
            for &x in t.as_f32().unwrap_or(&[]).iter().filter(|x| x.is_finite()) {
                r.min = r.min.min(x);
                r.max = r.max.max(x);
            }
        }
    }
    for r in ranges.values_mut() {
        if r.min > r.max {
            *r = Range { min: 0.0, max: 0.0 };
        }
    }
    if let Method::Percentile(p) = method {
        if !(50.0..=100.0).contains(&p) {
            bail!(InvalidInput, "percentile {p} is not within [50, 100]");
        }
    }
    if method == Method::MinMax {
        return Ok(ranges);
    }
    let mut hist: HashMap<String, Vec<u64>> =
        names.iter().map(|n| (n.clone(), vec![0; BINS])).collect();
    for s in samples {
        for (n, t) in observe(session, names, s)? {
            let r = ranges[n];
            let h = hist.get_mut(n).expect("every name has a histogram");
            let width = (r.max - r.min).max(f32::MIN_POSITIVE);
            // Exact zeros (most of a Relu's output) are exact at any scale, so entropy
            // leaves them out: counted, they outweighed every other bin of its search.
            let skip_zeros = method == Method::Entropy;
            let values = t.as_f32().unwrap_or(&[]).iter();
            for &x in values.filter(|x| x.is_finite() && !(skip_zeros && **x == 0.0)) {
                let b = (((x - r.min) / width) * BINS as f32) as usize;
                h[b.min(BINS - 1)] += 1;
            }
        }
    }
    for (n, h) in hist {
        let r = ranges.get_mut(&n).expect("every name has a range");
        *r = match method {
            Method::Percentile(p) => ranges::percentile(&h, *r, p),
            _ => ranges::entropy(&h, *r),
        };
    }
    Ok(ranges)
}
