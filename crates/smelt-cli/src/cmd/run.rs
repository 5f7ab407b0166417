//! `smelt run`: runs a model once on .npy or random inputs and writes .npy outputs.

use crate::inputs::{build_inputs, InputArgs};
use smelt_ir::{Result, Value};
use smelt_runtime::npy;
use smelt_runtime::Session;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `smelt run`.
#[derive(clap::Args)]
pub struct Args {
    /// The ONNX model file, or a compiled artifact (.smelt).
    model: PathBuf,
    #[command(flatten)]
    inputs: InputArgs,
    /// Folder to write each output to, as `<name>.npy` (sequences and maps as `<name>.json`).
    #[arg(long)]
    output_dir: Option<PathBuf>,
    /// Write a per-kernel timing profile (Chrome trace JSON) to this file.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// With --profile: how many of the slowest kernels the printed table lists.
    #[arg(long, default_value_t = 15, value_name = "N")]
    profile_top: usize,
    /// With --profile: measure the machine's roofline (a few seconds) and give each
    /// kernel's fraction of its ceiling.
    #[arg(long)]
    roofline: bool,
    /// Run this many times (the profile records every run; outputs are the last run's).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    #[command(flatten)]
    compile: CompileArgs,
}

/// Options of commands that compile a model.
#[derive(clap::Args, Clone)]
pub struct CompileArgs {
    /// Optimization level: 0 runs the imported graph as is (the reference executor).
    #[arg(long, default_value_t = 1)]
    pub opt_level: u8,
    /// Print the IR after this pass (or `all`) to stderr.
    #[arg(long, value_name = "PASS|all")]
    pub dump_after: Option<String>,
    /// Stop the pass pipeline after this pass.
    #[arg(long, value_name = "PASS")]
    pub stop_after: Option<String>,
    /// Threads per run (default: the CPUs this process may use). `bench` gives the
    /// baselines the same count.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// CPU kernels' instruction set: avx512, avx2 or portable (default: the best this CPU has).
    #[arg(long, value_name = "ISA")]
    pub isa: Option<String>,
    /// The largest tensor a run may allocate, in bytes (suffixes K, M, G, T; default: a
    /// quarter of the memory this process may use).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub max_tensor_bytes: Option<u64>,
    /// The most bytes one run may hold at once (suffixes K, M, G, T; default: three
    /// quarters of the memory this process may use).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub max_run_bytes: Option<u64>,
    /// The most nodes a model may have, subgraphs included.
    #[arg(long, value_name = "N")]
    pub max_nodes: Option<usize>,
    /// The deepest subgraph nesting a model may have.
    #[arg(long, value_name = "N")]
    pub max_nesting: Option<usize>,
    /// Stop a run that takes longer than this (exit code 7).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub timeout: Option<std::time::Duration>,
    /// Artifacts: check the weights' checksum at load too (reads every weight byte).
    #[arg(long)]
    pub verify_weights: bool,
    /// Convolutions' channel layout: `blocked` runs chains of them in blocks of 16
    /// channels (NCHW16c), `plain` never; `auto` (default) blocks where the CPU kernels are
    /// AVX-512 (`SMELT_BLOCKED_LAYOUT=0` or `1` overrides either way)
    #[arg(long, value_name = "auto|plain|blocked", default_value = "auto", value_parser = ["auto", "plain", "blocked"])]
    pub layout: String,
    /// Precision of the products' weights: fp32 (default), bf16 or fp16 (stored narrow,
    /// widened as the kernels pack them; accumulation stays f32), or int8 (dynamic: MatMul
    /// and Gemm weights int8, activations quantized per run, integer products)
    #[arg(long, value_name = "fp32|bf16|fp16|int8", default_value = "fp32", value_parser = parse_precision)]
    pub precision: smelt_ir::Precision,
    /// With --precision: the ops it applies to, comma-separated (default MatMul, Gemm and
    /// Conv; every other op keeps f32)
    #[arg(long, value_name = "OP,OP", value_delimiter = ',')]
    pub precision_ops: Option<Vec<String>>,
    /// A node's own precision, e.g. `--precision-node /fc/MatMul=fp32` (repeatable)
    #[arg(long, value_name = "NODE=PRECISION", value_parser = parse_node_precision)]
    pub precision_node: Vec<(String, smelt_ir::Precision)>,
}

/// A precision by name.
pub fn parse_precision(s: &str) -> std::result::Result<smelt_ir::Precision, String> {
    smelt_ir::Precision::from_name(s)
        .ok_or_else(|| format!("'{s}' is not a precision (fp32, bf16, fp16 or int8)"))
}

/// `NODE=PRECISION`.
fn parse_node_precision(s: &str) -> std::result::Result<(String, smelt_ir::Precision), String> {
    let (node, p) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("'{s}' is not NODE=PRECISION"))?;
    Ok((node.to_string(), parse_precision(p)?))
}

/// A byte count: digits with an optional K, M, G or T suffix (powers of 1024; "KiB" too).
pub fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        Some('T' | 't') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| format!("'{s}' is not a byte count (e.g. 512M, 4G)"))
}

/// Seconds, possibly fractional, as a duration.
pub fn parse_seconds(s: &str) -> std::result::Result<std::time::Duration, String> {
    s.parse::<f64>()
        .ok()
        .and_then(|v| std::time::Duration::try_from_secs_f64(v).ok())
        .ok_or_else(|| format!("'{s}' is not a number of seconds"))
}

impl CompileArgs {
    /// The session options these arguments ask for.
    pub fn options(&self) -> Result<smelt_runtime::SessionOptions> {
        let mut o = smelt_runtime::SessionOptions {
            opt_level: self.opt_level,
            dump_after: self.dump_after.clone(),
            stop_after: self.stop_after.clone(),
            verify_weights: self.verify_weights,
            blocked_layout: match self.layout.as_str() {
                "plain" => Some(false),
                "blocked" => Some(true),
                _ => None,
            },
            precision: smelt_ir::PrecisionPolicy {
                precision: self.precision,
                ops: self.precision_ops.clone(),
                nodes: self.precision_node.clone(),
            },
            ..Default::default()
        };
        if let Some(t) = self.threads {
            o.threads = t as usize;
        }
        let l = &mut o.limits;
        l.max_tensor_bytes = self.max_tensor_bytes.unwrap_or(l.max_tensor_bytes);
        l.max_run_bytes = self.max_run_bytes.unwrap_or(l.max_run_bytes);
        l.max_nodes = self.max_nodes.unwrap_or(l.max_nodes);
        l.max_nesting = self.max_nesting.unwrap_or(l.max_nesting);
        l.timeout = self.timeout.or(l.timeout);
        if let Some(name) = &self.isa {
            let isa = smelt_kernels::Isa::from_name(name).ok_or_else(|| {
                smelt_ir::err!(
                    InvalidInput,
                    "--isa {name}: expected avx512, avx2 or portable"
                )
            })?;
            if !isa.is_supported() {
                smelt_ir::bail!(
                    Unsupported,
                    "--isa {name}: this CPU cannot run {name} kernels"
                );
            }
            o.isa = Some(isa);
        }
        Ok(o)
    }

    /// Threads per run: the flag, or the CPUs this process may use.
    pub fn thread_count(&self) -> usize {
        self.threads
            .map_or_else(smelt_kernels::pool::available_threads, |t| t as usize)
    }
}

/// Runs the subcommand.
pub fn main(a: Args) -> Result<ExitCode> {
    let mut options = a.compile.options()?;
    options.input_shapes = a.inputs.shapes()?;
    let session = Session::load_with(&a.model, &options)?;
    // Inputs, random ones included, are allocated within the session's limits.
    let control = session.run_control(&smelt_runtime::RunOptions::default());
    let entered = control.enter();
    // The plan's arena is made ready on another thread while the inputs are read or drawn.
    let plan = session.last_plan();
    let prepare = std::thread::spawn(move || {
        if let Some(p) = plan {
            p.prepare_arena();
        }
    });
    let mut inputs = build_inputs(&session.inputs(), &a.inputs, &options.input_shapes)?;
    if a.inputs.random_inputs {
        let given: Vec<&str> = a
            .inputs
            .input
            .iter()
            .filter_map(|s| s.rsplit_once('=').map(|(n, _)| n))
            .collect();
        let limits = crate::inputs::index_limits(&session);
        let mut rng = crate::inputs::SplitMix::new(a.inputs.seed ^ 0x5EED_1DC5);
        for (name, v) in inputs.iter_mut() {
            if let (false, Value::Tensor(t)) = (given.contains(&name.as_str()), v) {
                let how = crate::inputs::make_plausible(name, t, &limits, &mut rng)?;
                errln!(
                    "input {name}: {} {:?} {how} (seed {})",
                    t.dtype(),
                    t.shape(),
                    a.inputs.seed
                );
            }
        }
    }
    drop(entered);
    let _ = prepare.join();
    let profile = a.profile.as_deref().map(|path| Profile {
        path,
        top: a.profile_top,
        roofline: a.roofline.then_some(options.threads),
    });
    let outputs = run_repeated(&session, inputs, a.repeat, profile)
        .map_err(|e| e.context(a.model.display().to_string()))?;
    if let Some(dir) = &a.output_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| smelt_ir::err!(Io, "cannot create {}: {e}", dir.display()))?;
    }
    for (name, v) in &outputs {
        outln!("{}", crate::values::describe(name, v));
        if let Some(dir) = &a.output_dir {
            save(dir, name, v)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes one output to `dir`: a tensor as `<name>.npy`; a sequence, map or optional
/// (which .npy cannot hold) as `<name>.json`, saying so.
fn save(dir: &std::path::Path, name: &str, v: &Value) -> Result<()> {
    if let Value::Tensor(t) = v {
        return npy::write(&dir.join(format!("{}.npy", safe_file_name(name))), t);
    }
    let path = dir.join(format!("{}.json", safe_file_name(name)));
    let text = serde_json::to_string(&crate::values::to_json(v)?)
        .map_err(|e| smelt_ir::err!(Internal, "cannot encode output '{name}': {e}"))?;
    std::fs::write(&path, text + "\n")
        .map_err(|e| smelt_ir::err!(Io, "cannot write {}: {e}", path.display()))?;
    errln!(
        "output {name} is a {}: written as JSON to {} (.npy holds tensors only)",
        v.kind(),
        path.display()
    );
    Ok(())
}

/// Where a profile goes and what its printed table shows.
struct Profile<'a> {
    path: &'a std::path::Path,
    top: usize,
    /// The thread count to measure the roofline's ceilings at, when asked.
    roofline: Option<usize>,
}

/// Runs `repeat` times; with a profile, writes every run's kernel timings to its file and
/// prints the per-kernel table.
fn run_repeated(
    session: &Session,
    mut inputs: std::collections::HashMap<String, Value>,
    repeat: u32,
    profile: Option<Profile>,
) -> Result<smelt_runtime::Outputs> {
    let start = std::time::Instant::now();
    let mut runs = Vec::new();
    let mut outputs = Vec::new();
    for r in 0..repeat {
        let at_us = start.elapsed().as_secs_f64() * 1e6;
        // Every run but the last gets a copy; the last takes the inputs themselves.
        let inputs = if r + 1 == repeat {
            std::mem::take(&mut inputs)
        } else {
            inputs.clone()
        };
        outputs = match profile {
            None => session.run(inputs)?,
            Some(_) => {
                let (out, events) = session.run_profiled(inputs)?;
                runs.push((at_us, events));
                out
            }
        };
    }
    if let Some(p) = profile {
        let trace = smelt_runtime::profile::chrome_trace(&runs);
        std::fs::write(p.path, trace)
            .map_err(|e| smelt_ir::err!(Io, "cannot write {}: {e}", p.path.display()))?;
        errln!("profile: {} ({repeat} runs)", p.path.display());
        let ceilings = p.roofline.map(super::profile_table::Ceilings::measure);
        crate::out::stderr(format_args!(
            "{}",
            super::profile_table::render(&runs, p.top, ceilings.as_ref())
        ));
    }
    Ok(outputs)
}

/// A file name for an output: characters outside `[A-Za-z0-9._-]` become `_`.
pub fn safe_file_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s == "." || s == ".." {
        format!("_{s}")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::safe_file_name;

    #[test]
    fn file_names_are_sanitized() {
        assert_eq!(safe_file_name("gpu_0/softmax:1"), "gpu_0_softmax_1");
        assert_eq!(safe_file_name(".."), "_..");
        assert_eq!(safe_file_name("ok-name.1"), "ok-name.1");
    }
}
