//! `smelt compile`: compiles a model ahead of time for fixed input shapes and one
//! instruction set, and writes the plan and its weights as one artifact (.smelt).

use super::autotune::{self, Autotune};
use super::preset;
use crate::inputs::{index_limits, parse_shapes, SplitMix};
use smelt_ir::kernel::ConvAlgorithm;
use smelt_ir::{bail, err, ErrorKind, Result, Tensor, Value, ValueType};
use smelt_runtime::artifact::{self, CompileInfo};
use smelt_runtime::{Session, SessionOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Arguments of `smelt compile`.
#[derive(clap::Args)]
pub struct Args {
    /// The ONNX model file.
    model: PathBuf,
    /// Input shape, NAME=DIMS (e.g. x=1x3x224x224); needed for inputs with symbolic dims.
    /// The artifact runs at these shapes only.
    #[arg(long, value_name = "NAME=DIMS")]
    shape: Vec<String>,
    /// Where to write the artifact.
    #[arg(short = 'o', long, value_name = "FILE.smelt")]
    output: PathBuf,
    /// The CPU the kernels are for: x86-64-v3 (AVX2+FMA), x86-64-v4 (AVX-512) or native
    /// (the best of this CPU). Compiling needs a CPU that has it.
    #[arg(long, value_name = "CPU", default_value = "native")]
    target_cpu: String,
    /// Prove before writing that the outputs are bit-identical across runs, thread counts
    /// (1 and 2) and between this compilation and the written artifact; record it.
    #[arg(long)]
    deterministic: bool,
    /// edge: latency first: batch 1, proven deterministic, the fewest threads that hold
    /// latency (timed here). datacenter: throughput first: batch buckets (see
    /// --batch-buckets), all cores. `smelt explain FILE.smelt` lists what it decided.
    #[arg(long, value_enum)]
    preset: Option<Preset>,
    /// Fail unless the compiled model fits in this many bytes (suffixes K, M, G, T):
    /// weights and packed weights, arenas and outputs. The error names what is largest.
    #[arg(long, value_name = "BYTES", value_parser = super::run::parse_bytes)]
    max_memory: Option<u64>,
    /// Batch sizes to compile plans for (dim 0 of every input and output); a run takes the
    /// smallest that holds its batch, padded. Default with --preset datacenter: 1,2,4,8.
    #[arg(long, value_name = "N,N,...", value_delimiter = ',')]
    batch_buckets: Vec<usize>,
    /// Time each group's candidate kernels here (convolution algorithms, one thread or
    /// all) and keep the winners in the artifact: off, fast (seconds) or max (more
    /// rounds). Default: fast with --preset datacenter, else off.
    #[arg(long, value_enum)]
    autotune: Option<Autotune>,
    /// The tuning cache file (default: $SMELT_TUNING_CACHE, else
    /// ~/.cache/smelt/tuning.json); `none` to time everything and remember nothing.
    #[arg(long, value_name = "FILE|none")]
    tuning_cache: Option<String>,
    #[command(flatten)]
    compile: super::run::CompileArgs,
}

/// Runs the subcommand.
pub fn main(a: Args) -> Result<ExitCode> {
    ensure_not_artifact(&a.model)?;
    let mut options = a.compile.options()?;
    options.input_shapes = parse_shapes(&a.shape)?;
    let isa = artifact::target_isa(&a.target_cpu).map_err(|e| e.context("--target-cpu"))?;
    if options.isa.is_some_and(|i| i != isa) {
        bail!(
            InvalidInput,
            "--isa and --target-cpu {} ask for different instruction sets",
            a.target_cpu
        );
    }
    if !isa.is_supported() {
        bail!(
            Unsupported,
            "--target-cpu {}: this CPU cannot run {isa} kernels, so it cannot compile (or check) them; compile on a machine that has them",
            a.target_cpu
        );
    }
    options.isa = Some(isa);
    let t = std::time::Instant::now();
    let mut session = Session::load_with(&a.model, &options)?;
    let mut decisions = Vec::new();
    if !options.precision.is_f32() {
        decisions.push(
            if options.precision.precision == smelt_ir::Precision::Int8 {
                format!(
                "{}: MatMul/Gemm weights int8, activations quantized per run (i32 accumulation)",
                options.precision.describe()
            )
            } else {
                format!(
                    "weights stored in {} (accumulation in f32)",
                    options.precision.describe()
                )
            },
        );
    }
    let deterministic = a.deterministic || a.preset == Some(Preset::Edge);
    if a.preset == Some(Preset::Edge) {
        for (name, dims) in preset::batch_one(&session, &options.input_shapes) {
            decisions.push(format!("input '{name}': batch (dim 0) set to 1"));
            options.input_shapes.set(&name, dims);
        }
        if !decisions.is_empty() {
            session = Session::load_with(&a.model, &options)?;
        }
        decisions.push("outputs proven bit-identical across runs and thread counts".into());
    }
    let buckets = match (&a.batch_buckets[..], a.preset) {
        ([], Some(Preset::Datacenter)) => vec![1, 2, 4, 8],
        (b, _) => b.to_vec(),
    };
    let bucketed = match buckets.is_empty() {
        true => None,
        false => match preset::bucket_plans(&session, &options.input_shapes, &buckets) {
            Ok((plans, said)) => {
                decisions.push(said);
                Some(plans)
            }
            // The preset's default buckets give way to a model that cannot have them.
            Err(e) if a.batch_buckets.is_empty() && e.kind() == ErrorKind::Unsupported => {
                decisions.push(format!("no batch buckets: {e}"));
                None
            }
            Err(e) => return Err(e.context(a.model.display().to_string())),
        },
    };
    let mut plans = match bucketed {
        Some(p) => p,
        None => vec![super::explain::session_plan(&session, &options, &a.model)?],
    };
    let autotune = a.autotune.unwrap_or(match a.preset {
        Some(Preset::Datacenter) => Autotune::Fast,
        _ => Autotune::Off,
    });
    let mut tuning = Vec::new();
    if autotune != Autotune::Off {
        let (records, lines) = autotune::tune_plans(
            &mut plans,
            autotune,
            a.tuning_cache.as_deref(),
            &index_limits(&session),
        )
        .map_err(|e| e.context(format!("--autotune: {}", a.model.display())))?;
        tuning = records;
        decisions.extend(lines);
    }
    if a.preset == Some(Preset::Datacenter) {
        decisions.push(format!(
            "threads: all {} this process may use",
            smelt_kernels::pool::available_threads()
        ));
    }
    let info = CompileInfo {
        target: a.target_cpu.clone(),
        deterministic,
        index_limits: index_limits(&session),
        preset: a.preset.map(|p| p.name().to_string()),
        decisions: decisions.clone(),
        max_threads: None,
        max_memory: a.max_memory,
        tuning,
    };
    let refs: Vec<&smelt_runtime::Plan> = plans.iter().map(|p| p.as_ref()).collect();
    let mut bytes = artifact::write::encode_buckets(&session, &refs, &info)
        .map_err(|e| e.context(a.model.display().to_string()))?;
    let mut footprint = artifact::budget::Footprint::of(&bytes)?;
    if let Some(max) = a.max_memory {
        let mut lean = None;
        // Winograd's transformed filters take memory (F(4x4)'s 4x the filters, F(2x2)'s
        // 1.8x): F(4x4) goes to F(2x2) first, then every Winograd convolution to the
        // direct kernel, until the compiled model fits.
        for to in [ConvAlgorithm::WinogradF2, ConvAlgorithm::Direct] {
            if footprint.check(max).is_ok() {
                break;
            }
            let Some((lean_plans, n)) = leaner_winograd(&plans, to)? else {
                continue;
            };
            let refs: Vec<&smelt_runtime::Plan> = lean_plans.iter().map(|p| p.as_ref()).collect();
            let lean_bytes = artifact::write::encode_buckets(&session, &refs, &info)
                .map_err(|e| e.context(a.model.display().to_string()))?;
            let f = artifact::budget::Footprint::of(&lean_bytes)?;
            let on = match to {
                ConvAlgorithm::WinogradF2 => "on Winograd F(2x2)",
                _ => "on the direct kernel",
            };
            decisions.push(format!(
                "memory: {n} Winograd convolution(s) {on} instead, to fit (the compiled model {} -> {})",
                artifact::budget::mib(footprint.total()),
                artifact::budget::mib(f.total())
            ));
            lean = Some((n, on));
            (bytes, footprint, plans) = (lean_bytes, f, lean_plans);
        }
        footprint.check(max).map_err(|e| {
            let e = match lean {
                Some((n, on)) => {
                    e.context(format!("even with its {n} Winograd convolution(s) {on}"))
                }
                None => e,
            };
            e.context(a.model.display().to_string())
        })?;
        decisions.push(format!(
            "memory: {} of the --max-memory {} budget",
            artifact::budget::mib(footprint.total()),
            artifact::budget::mib(max as usize)
        ));
    }
    if deterministic {
        check_deterministic(&plans[0], &bytes, &options)?;
    }
    let mut max_threads = None;
    if a.preset == Some(Preset::Edge) {
        let (n, said) = preset::fewest_threads(&bytes, &options, random_inputs)?;
        decisions.push(said);
        max_threads = Some(n);
    }
    if decisions != info.decisions || max_threads.is_some() {
        bytes = artifact::write::amend(&bytes, |m| {
            m.decisions = decisions.clone();
            m.max_threads = max_threads;
        })?;
    }
    write_atomic(&a.output, &bytes)?;
    let plan = &plans[0];
    let weights: usize = (0..)
        .map_while(|i| plan.weight(i))
        .map(|w| w.nbytes())
        .sum();
    outln!(
        "wrote {}: {} bytes ({} groups, {isa} kernels for {}, weights {} bytes, arena {} bytes) in {:.0} ms",
        a.output.display(),
        bytes.len(),
        plan.kernel_names().len(),
        a.target_cpu,
        weights,
        plan.kernels().map_or(0, |k| k.memory.arena_bytes),
        t.elapsed().as_secs_f64() * 1e3
    );
    for d in &decisions {
        outln!("  {d}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The plans with their Winograd convolutions on `to` (F(2x2): the F(4x4) ones; the
/// direct kernel: all), and how many changed (None when none did).
fn leaner_winograd(
    plans: &[Arc<smelt_runtime::Plan>],
    to: ConvAlgorithm,
) -> Result<Option<(Vec<Arc<smelt_runtime::Plan>>, usize)>> {
    let mut out = Vec::with_capacity(plans.len());
    let mut changed = 0;
    for p in plans {
        let lean = match to {
            ConvAlgorithm::WinogradF2 => smelt_runtime::tune::winograd_f2(p)?,
            _ => smelt_runtime::tune::without_winograd(p)?,
        };
        match lean {
            (Some(lean), n) => {
                out.push(Arc::new(lean));
                changed += n;
            }
            (None, _) => out.push(p.clone()),
        }
    }
    Ok((changed > 0).then_some((out, changed)))
}

/// The compile presets.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Preset {
    /// Latency first, one request at a time, little memory.
    Edge,
    /// Throughput first, batches, all cores.
    Datacenter,
}

impl Preset {
    fn name(self) -> &'static str {
        match self {
            Preset::Edge => "edge",
            Preset::Datacenter => "datacenter",
        }
    }
}

fn ensure_not_artifact(path: &Path) -> Result<()> {
    if artifact::is_artifact(path) {
        bail!(
            InvalidInput,
            "{} is already a compiled artifact; compile the source model",
            path.display()
        );
    }
    Ok(())
}

/// Writes next to the destination, then renames, so a failed write leaves no half file.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let io = |e: std::io::Error| err!(Io, "cannot write {}: {e}", path.display());
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Random, plausible inputs for a session's (concrete) signature.
pub(super) fn random_inputs(session: &Session) -> Result<Vec<(String, Tensor)>> {
    let limits = index_limits(session);
    let mut rng = SplitMix::new(0xD37E_2A11);
    let mut out = Vec::new();
    for s in session.inputs().into_iter().filter(|s| s.required) {
        let Some(ValueType::Tensor {
            dtype,
            shape: Some(shape),
        }) = &s.ty
        else {
            bail!(
                Unsupported,
                "input '{}' has no concrete tensor type",
                s.name
            );
        };
        let dims: Vec<usize> = shape
            .iter()
            .map(|d| match d {
                smelt_ir::Dim::Known(n) => Ok(*n as usize),
                _ => Err(err!(
                    Internal,
                    "artifact input '{}' is not concrete",
                    s.name
                )),
            })
            .collect::<Result<_>>()?;
        let mut t = crate::inputs::random_tensor(*dtype, dims, &mut rng)?;
        crate::inputs::make_plausible(&s.name, &mut t, &limits, &mut rng)?;
        out.push((s.name, t));
    }
    Ok(out)
}

/// The output bits of a run of a session.
fn bits(session: &Session, inputs: &[(String, Tensor)]) -> Result<Vec<Vec<u64>>> {
    let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    output_bits(session.run_ref(&refs)?)
}

/// The bits of named outputs.
fn output_bits(outputs: Vec<(String, Value)>) -> Result<Vec<Vec<u64>>> {
    outputs
        .into_iter()
        .map(|(name, v)| match v {
            Value::Tensor(t) => Ok(t
                .to_f64()
                .map_err(|e| e.context(format!("output '{name}'")))?
                .into_iter()
                .map(f64::to_bits)
                .collect()),
            _ => bail!(Unsupported, "output '{name}' is not a tensor"),
        })
        .collect()
}

/// Fails unless the artifact's outputs, at 1 and 2 threads and run twice, are the same
/// bits as those of the compiled plan it was written from (its first).
fn check_deterministic(
    plan: &smelt_runtime::Plan,
    bytes: &[u8],
    options: &SessionOptions,
) -> Result<()> {
    let file: Arc<dyn smelt_ir::Backing> = Arc::new(smelt_ir::AlignedBytes::copy_of(bytes)?);
    let (inputs, names) = {
        let s = Session::from_artifact(file.clone(), options, "the new artifact")?;
        let names: Vec<String> = s.outputs().into_iter().map(|o| o.name).collect();
        (random_inputs(&s)?, names)
    };
    let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let want = output_bits(names.into_iter().zip(plan.run_ref(&refs)?).collect())?;
    for threads in [1, 2, 1, 2] {
        let o = SessionOptions {
            threads,
            ..options.clone()
        };
        let s = Session::from_artifact(file.clone(), &o, "the new artifact")?;
        if bits(&s, &inputs)? != want {
            bail!(
                Unsupported,
                "--deterministic: the artifact's outputs at {threads} thread(s) differ from the compiled model's"
            );
        }
    }
    Ok(())
}
