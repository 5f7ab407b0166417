//! The `smelt` command line: run, inspect, check, conformance-test, benchmark and serve ONNX models.

#[macro_use]
mod out;
mod cmd;
mod conformance;
mod hint;
mod inputs;
mod values;

use clap::{Parser, Subcommand};
use smelt_ir::ErrorKind;
use std::process::ExitCode;

/// Large buffers get huge pages before their first touch (see `HugePageAlloc`).
#[global_allocator]
static ALLOC: smelt_kernels::buf::HugePageAlloc = smelt_kernels::buf::HugePageAlloc;

/// What `smelt --help` says about exit codes; [`exit_code`] is the table itself.
const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  a check failed (conformance outputs or expected failures not as listed; check found unsupported ops)
  2  usage error (bad command line)
  3  invalid model (malformed file, graph, attribute or weight)
  4  invalid input (input name, type, shape or value; a bad option or input file)
  5  unsupported (an op, type or feature smelt does not do)
  6  resource exhausted (memory, tensor size or another limit)
  7  cancelled or past its deadline
  8  I/O error (a file that cannot be read or written)
  9  internal error (a bug in smelt: please report it)
Errors print as one line on stderr: error[KIND]: message.";

/// smelt: a model compiler and runtime for ONNX models.
#[derive(Parser)]
#[command(name = "smelt", version, about, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a model once: .npy inputs in, .npy outputs out.
    Run(cmd::run::Args),
    /// Show a model's inputs, outputs, opsets, op histogram and parameters.
    Inspect(cmd::inspect::Args),
    /// List every unsupported op or opset of a model at once (exit 1 if any).
    Check(cmd::check::Args),
    /// Show what the compiler did: passes, kernel groups, refused fusions, memory plan.
    Explain(cmd::explain::Args),
    /// Compare a lower precision with fp32 node by node, naming the first node that turns
    /// NaN/Inf or diverges (exit 1 if one does).
    Compare(cmd::compare::Args),
    /// Quantize a float model to int8 (a QDQ model onnxruntime also runs), calibrated on
    /// sample inputs.
    Quantize(cmd::quantize::Args),
    /// Run ONNX backend-test cases (model.onnx + test_data_set_N) and compare outputs.
    Conformance(conformance::Args),
    /// Benchmark a model (scenarios, --vs baselines, statistics, reports) or the machine (--roofline).
    Bench(Box<cmd::bench::Args>),
    /// Compile a model ahead of time into an artifact (.smelt) for fixed shapes and a CPU.
    Compile(cmd::compile::Args),
    /// Check an artifact's checksums and plan, and show what it was compiled for.
    Verify(cmd::verify::Args),
    /// Serve models over HTTP and gRPC (KServe v2 / Triton protocol) with dynamic batching.
    Serve(cmd::serve::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => cmd::run::main(a),
        Command::Inspect(a) => cmd::inspect::main(a),
        Command::Check(a) => cmd::check::main(a),
        Command::Explain(a) => cmd::explain::main(a),
        Command::Compare(a) => cmd::compare::main(a),
        Command::Quantize(a) => cmd::quantize::main(a),
        Command::Conformance(a) => conformance::main(a),
        Command::Bench(a) => cmd::bench::main(*a),
        Command::Compile(a) => cmd::compile::main(a),
        Command::Verify(a) => cmd::verify::main(a),
        Command::Serve(a) => cmd::serve::main(a),
    };
    match result {
        // Output lost for another reason than a closed pipe (a full disk) is an I/O failure.
        Ok(_) if out::stdout_failed() => ExitCode::from(exit_code(ErrorKind::Io)),
        Ok(code) => code,
        Err(e) => {
            let e = hint::with_flags(e);
            errln!("error[{}]: {e}", e.kind());
            ExitCode::from(exit_code(e.kind()))
        }
    }
}

/// The exit code for an error of a kind (documented in [`EXIT_CODES`]).
fn exit_code(kind: ErrorKind) -> u8 {
    kind.exit_code()
}
