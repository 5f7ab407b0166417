//! `smelt-run`: the runtime-only build. It loads a compiled artifact (`smelt compile`),
//! checks it, runs it on `.npy` inputs, and writes or summarizes the outputs; it holds
//! no ONNX importer and no compiler pass.

use clap::Parser;
use smelt_ir::{Result, Tensor, Value};
use smelt_runtime::{Session, SessionOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Large buffers get huge pages before their first touch, as in `smelt`.
#[global_allocator]
static ALLOC: smelt_kernels::buf::HugePageAlloc = smelt_kernels::buf::HugePageAlloc;

/// Runs a compiled smelt artifact (.smelt).
#[derive(Parser)]
#[command(name = "smelt-run", version)]
struct Args {
    /// The artifact, written by `smelt compile`.
    artifact: PathBuf,
    /// An input as NAME=FILE.npy (repeatable); every required input needs one unless
    /// --zeros is given.
    #[arg(long, value_name = "NAME=FILE.npy")]
    input: Vec<String>,
    /// Fill inputs not given with zeros, at the shapes the artifact was compiled for.
    #[arg(long)]
    zeros: bool,
    /// Folder to write each output to, as `<name>.npy`.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    /// Threads per run (default: the CPUs this process may use).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: Option<u32>,
    /// Run this many times and print the median time (outputs are the last run's).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Check the weights' checksum at load too (reads every weight byte).
    #[arg(long)]
    verify_weights: bool,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error[{}]: {e}", e.kind());
            ExitCode::from(e.kind().exit_code())
        }
    }
}

fn run(a: Args) -> Result<()> {
    let mut options = SessionOptions {
        verify_weights: a.verify_weights,
        ..Default::default()
    };
    if let Some(t) = a.threads {
        options.threads = t as usize;
    }
    let session = Session::load_with(&a.artifact, &options)?;
    let inputs = inputs(&session, &a)?;
    let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut times = Vec::with_capacity(a.repeat as usize);
    let mut outputs = Vec::new();
    for _ in 0..a.repeat {
        let t = Instant::now();
        outputs = session.run_ref(&refs)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    for (name, v) in &outputs {
        let Value::Tensor(t) = v else {
            println!("{name}: not a tensor");
            continue;
        };
        match &a.output_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| smelt_ir::err!(Io, "cannot create {}: {e}", dir.display()))?;
                let file: String = name
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '-' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                smelt_runtime::npy::write(&dir.join(format!("{file}.npy")), t)?;
            }
            None => println!("{name}: {} {:?} {}", t.dtype(), t.shape(), head(t)),
        }
    }
    if a.repeat > 1 {
        times.sort_by(f64::total_cmp);
        println!(
            "{} runs, median {:.3} ms",
            times.len(),
            times[times.len() / 2]
        );
    }
    Ok(())
}

/// The first few elements, for a glance.
fn head(t: &Tensor) -> String {
    match t.to_f64() {
        Ok(v) => {
            let shown: Vec<String> = v.iter().take(6).map(|x| format!("{x:.6}")).collect();
            let more = if v.len() > 6 { ", ..." } else { "" };
            format!("[{}{more}]", shown.join(", "))
        }
        Err(_) => String::new(),
    }
}

/// The inputs from the command line, each checked by the session when it runs; those not
/// given are zeros at the compiled shapes with --zeros, else an error naming them.
fn inputs(session: &Session, a: &Args) -> Result<Vec<(String, Tensor)>> {
    let mut out = Vec::new();
    for spec in &a.input {
        let Some((name, file)) = spec.split_once('=') else {
            smelt_ir::bail!(InvalidInput, "--input {spec}: expected NAME=FILE.npy");
        };
        let t = smelt_runtime::npy::read(std::path::Path::new(file))
            .map_err(|e| e.context(format!("input '{name}'")))?;
        out.push((name.to_string(), t));
    }
    let fixed = session
        .artifact()
        .ok_or_else(|| smelt_ir::err!(Internal, "not an artifact session"))?;
    for info in session.inputs().into_iter().filter(|i| i.required) {
        if out.iter().any(|(n, _)| *n == info.name) {
            continue;
        }
        let (Some(dims), true) = (fixed.shapes.get(&info.name), a.zeros) else {
            smelt_ir::bail!(
                InvalidInput,
                "input '{}' is not given (--input {}=FILE.npy, or --zeros)",
                info.name,
                info.name
            );
        };
        let dtype = match &info.ty {
            Some(smelt_ir::ValueType::Tensor { dtype, .. }) => *dtype,
            _ => smelt_ir::bail!(Unsupported, "input '{}' is not a tensor", info.name),
        };
        out.push((info.name.clone(), Tensor::zeros(dtype, dims.to_vec())?));
    }
    Ok(out)
}
