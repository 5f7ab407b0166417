//! `smelt quantize`: static post-training quantization of an ONNX model into a QDQ model
//! (see `smelt_runtime::quantize`), calibrated on sample inputs read from a folder; or,
//! with `--dynamic`, dynamic quantization of its matrix products (no calibration).

use smelt_ir::{bail, err, Result, Value};
use smelt_onnx::qdq::{QdqOptions, Residuals};
use smelt_runtime::quantize::{quantize, quantize_dynamic, Method, QuantizeOptions};
use smelt_runtime::{npy, Session};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `smelt quantize`.
#[derive(clap::Args)]
pub struct Args {
    /// The float ONNX model.
    model: PathBuf,
    /// Calibration samples: for a model of one input, every `*.npy` in the folder is one
    /// sample; otherwise each subfolder is one, holding `input_<i>.npy` per input (i its
    /// position) or `<name>.npy` (`/` and `:` in the name as `_`).
    #[arg(long, value_name = "DIR", required_unless_present = "dynamic")]
    calibrate: Option<PathBuf>,
    /// Dynamic quantization instead: MatMul and Gemm weights to int8, their activations
    /// quantized at run time from each run's own range (DynamicQuantizeLinear, as
    /// onnxruntime's `quantize_dynamic` writes); no calibration samples.
    #[arg(long, conflicts_with = "calibrate")]
    dynamic: bool,
    /// How activation ranges are taken: minmax, percentile (clipping the tails) or entropy
    /// (the clipping of least KL divergence after quantization).
    #[arg(
        long,
        default_value = "minmax",
        value_name = "minmax|percentile|entropy"
    )]
    method: String,
    /// With --method percentile: the percentile kept at each end.
    #[arg(long, default_value_t = 99.99, value_name = "P")]
    percentile: f64,
    /// One weight scale per output channel (else one per tensor).
    #[arg(long)]
    per_channel: bool,
    /// 7-bit weights (within [-63, 63]): on CPUs without VNNI (AVX2) the integer kernels
    /// then multiply twice as fast (`vpmaddubsw` without saturation), for one bit of
    /// weight precision.
    #[arg(long)]
    reduce_range: bool,
    /// Which Add and Sum nodes (skip connections) read a quantized activation's
    /// dequantized value rather than its float value: `auto` where it is a Relu's or
    /// Clip's output (a convolutional network's blocks: the skip connection stays 8-bit),
    /// `quantized` everywhere (as onnxruntime does), `float` nowhere.
    #[arg(long, default_value = "auto", value_name = "auto|quantized|float")]
    residuals: String,
    /// The op types to quantize (Gather: embedding tables stored as int8, with --dynamic).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "Conv,MatMul,Gemm,Gather",
        value_name = "OP,OP"
    )]
    ops: Vec<String>,
    /// Use at most this many samples (the first, by file name).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Where to write the QDQ model.
    #[arg(short, long, value_name = "OUT.onnx")]
    output: PathBuf,
    #[command(flatten)]
    compile: super::run::CompileArgs,
}

/// The entries of a folder, sorted by name.
fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir).map_err(|e| err!(InvalidInput, "{}: {e}", dir.display()))?;
    let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    v.sort();
    Ok(v)
}

/// The calibration samples in `dir` for inputs `names`.
fn samples(
    dir: &Path,
    names: &[String],
    limit: Option<usize>,
) -> Result<Vec<HashMap<String, Value>>> {
    let entries = sorted_entries(dir)?;
    let mut out = Vec::new();
    if names.len() == 1 {
        for p in entries
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "npy"))
        {
            let t = npy::read(p)?;
            out.push(HashMap::from([(names[0].clone(), Value::Tensor(t))]));
        }
    } else {
        for d in entries.iter().filter(|p| p.is_dir()) {
            let mut s = HashMap::new();
            for (i, n) in names.iter().enumerate() {
                let by_index = d.join(format!("input_{i}.npy"));
                let by_name = d.join(format!("{}.npy", n.replace(['/', ':'], "_")));
                let p = if by_index.exists() { by_index } else { by_name };
                if !p.exists() {
                    bail!(
                        InvalidInput,
                        "{}: no input_{i}.npy or {} for input {n}",
                        d.display(),
                        p.display()
                    );
                }
                s.insert(n.clone(), Value::Tensor(npy::read(&p)?));
            }
            out.push(s);
        }
    }
    if let Some(l) = limit {
        out.truncate(l);
    }
    if out.is_empty() {
        bail!(
            InvalidInput,
            "{}: no calibration samples ({})",
            dir.display(),
            if names.len() == 1 {
                "no .npy files"
            } else {
                "no sample folders"
            }
        );
    }
    Ok(out)
}

/// Writes the dynamic-quantized model.
fn dynamic(a: &Args) -> Result<ExitCode> {
    let bytes =
        std::fs::read(&a.model).map_err(|e| err!(InvalidInput, "{}: {e}", a.model.display()))?;
    let opts = QdqOptions {
        per_channel: a.per_channel,
        reduce_range: a.reduce_range,
        residuals: Default::default(),
    };
    let (out, count) = quantize_dynamic(&bytes, &a.ops, opts)
        .map_err(|e| e.context(a.model.display().to_string()))?;
    std::fs::write(&a.output, &out).map_err(|e| err!(Io, "{}: {e}", a.output.display()))?;
    outln!(
        "{}: {count} products and embedding tables quantized dynamically ({} weights, u8 activations from each run's range)",
        a.output.display(),
        match (a.per_channel, a.reduce_range) {
            (true, false) => "per-channel int8",
            (false, false) => "per-tensor int8",
            (true, true) => "per-channel 7-bit",
            (false, true) => "per-tensor 7-bit",
        },
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs the subcommand.
pub fn main(a: Args) -> Result<ExitCode> {
    if a.dynamic {
        return dynamic(&a);
    }
    let Some(calibrate) = a.calibrate.clone() else {
        bail!(InvalidInput, "--calibrate DIR (or --dynamic) is required");
    };
    let method = match a.method.as_str() {
        "minmax" => Method::MinMax,
        "percentile" => Method::Percentile(a.percentile),
        "entropy" => Method::Entropy,
        m => bail!(
            InvalidInput,
            "--method {m}: expected minmax, percentile or entropy"
        ),
    };
    let residuals = match a.residuals.as_str() {
        "auto" => Residuals::Auto,
        "quantized" => Residuals::Quantized,
        "float" => Residuals::Float,
        r => bail!(
            InvalidInput,
            "--residuals {r}: expected auto, quantized or float"
        ),
    };
    let session = a.compile.options()?;
    let names: Vec<String> = Session::load_with(&a.model, &session)?
        .inputs()
        .into_iter()
        .filter(|i| i.required)
        .map(|i| i.name)
        .collect();
    let samples = samples(&calibrate, &names, a.limit)?;
    let bytes =
        std::fs::read(&a.model).map_err(|e| err!(InvalidInput, "{}: {e}", a.model.display()))?;
    let o = QuantizeOptions {
        method,
        per_channel: a.per_channel,
        reduce_range: a.reduce_range,
        residuals,
        ops: a.ops.clone(),
        session,
    };
    let base = a.model.parent().map(Path::to_path_buf);
    let (out, r) = quantize(&bytes, base, &samples, &o)
        .map_err(|e| e.context(a.model.display().to_string()))?;
    std::fs::write(&a.output, &out).map_err(|e| err!(Io, "{}: {e}", a.output.display()))?;
    outln!(
        "{}: {} products quantized ({} weights, u8 activations by {}), {} activations calibrated on {} samples, {} BatchNormalization folded",
        a.output.display(),
        r.products,
        match (a.per_channel, a.reduce_range) {
            (true, false) => "per-channel int8",
            (false, false) => "per-tensor int8",
            (true, true) => "per-channel 7-bit",
            (false, true) => "per-tensor 7-bit",
        },
        a.method,
        r.activations,
        r.samples,
        r.folded_batchnorms
    );
    Ok(ExitCode::SUCCESS)
}
