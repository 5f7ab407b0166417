//! The `smelt` command line: run, inspect, check, conformance-test and benchmark ONNX models.

mod cmd;
mod conformance;
mod inputs;
mod npy;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// smelt: a model compiler and runtime for ONNX models.
#[derive(Parser)]
#[command(name = "smelt", version, about)]
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
    /// Run ONNX backend-test cases (model.onnx + test_data_set_N) and compare outputs.
    Conformance(conformance::Args),
    /// Benchmark a model (scenarios, --vs baselines, statistics, reports) or the machine (--roofline).
    Bench(cmd::bench::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => cmd::run::main(a),
        Command::Inspect(a) => cmd::inspect::main(a),
        Command::Check(a) => cmd::check::main(a),
        Command::Explain(a) => cmd::explain::main(a),
        Command::Conformance(a) => conformance::main(a),
        Command::Bench(a) => cmd::bench::main(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
