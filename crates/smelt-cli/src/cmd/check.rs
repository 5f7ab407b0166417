//! `smelt check`: every unsupported op or opset of a model, at once.

use smelt_ir::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `smelt check`.
#[derive(clap::Args)]
pub struct Args {
    /// The ONNX model file.
    model: PathBuf,
}

/// Runs the subcommand: exit 0 when everything is supported, 1 otherwise.
pub fn main(a: Args) -> Result<ExitCode> {
    let imported = smelt_onnx::load_model_lenient(&a.model)?;
    if imported.unsupported.is_empty() {
        outln!(
            "{}: every op is supported ({} nodes)",
            a.model.display(),
            imported.model.graph.node_count_deep()
        );
        return Ok(ExitCode::SUCCESS);
    }
    for line in &imported.unsupported {
        outln!("{}: {line}", a.model.display());
    }
    outln!("{} unsupported node(s)", imported.unsupported.len());
    Ok(ExitCode::from(1))
}
