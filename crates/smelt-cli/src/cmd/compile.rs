//! `smelt compile`: compiles a model ahead of time for fixed input shapes and one
//! instruction set, and writes the plan and its weights as one artifact (.smelt).

use crate::inputs::{index_limits, parse_shapes, SplitMix};
use smelt_ir::{bail, err, Result, Tensor, Value, ValueType};
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
    let session = Session::load_with(&a.model, &options)?;
    let plan = super::explain::session_plan(&session, &options, &a.model)?;
    let info = CompileInfo {
        target: a.target_cpu.clone(),
        deterministic: a.deterministic,
        index_limits: index_limits(&session),
    };
    let bytes = artifact::write::encode(&session, &plan, &info)
        .map_err(|e| e.context(a.model.display().to_string()))?;
    if a.deterministic {
        check_deterministic(&session, &bytes, &options)?;
    }
    write_atomic(&a.output, &bytes)?;
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
    Ok(ExitCode::SUCCESS)
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
fn random_inputs(session: &Session) -> Result<Vec<(String, Tensor)>> {
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

/// The output bits of a run.
fn bits(session: &Session, inputs: &[(String, Tensor)]) -> Result<Vec<Vec<u64>>> {
    let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    session
        .run_ref(&refs)?
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
/// bits as the compiled session's.
fn check_deterministic(session: &Session, bytes: &[u8], options: &SessionOptions) -> Result<()> {
    let file: Arc<dyn smelt_ir::Backing> = Arc::new(smelt_ir::AlignedBytes::copy_of(bytes)?);
    let inputs = {
        let s = Session::from_artifact(file.clone(), options, "the new artifact")?;
        random_inputs(&s)?
    };
    let want = bits(session, &inputs)?;
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
