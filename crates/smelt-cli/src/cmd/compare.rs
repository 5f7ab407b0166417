//! `smelt compare`: per node, how far a lower precision moves a model's values from fp32
//! (cosine similarity, largest absolute difference, NaN/Inf), and the first node where it
//! turns non-finite or diverges (see `smelt_runtime::compare`).

use crate::inputs::{build_inputs, parse_shapes, InputArgs};
use smelt_ir::{bail, PrecisionPolicy, Result};
use smelt_runtime::compare::{compare, ValueDiff};
use smelt_runtime::Session;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `smelt compare`.
#[derive(clap::Args)]
pub struct Args {
    /// The ONNX model file.
    model: PathBuf,
    #[command(flatten)]
    inputs: InputArgs,
    /// The baseline's precision.
    #[arg(long, value_name = "fp32|bf16|fp16", default_value = "fp32", value_parser = super::run::parse_precision)]
    against: smelt_ir::Precision,
    /// A value diverges under this cosine similarity to the baseline's.
    #[arg(long, default_value_t = 0.999, value_name = "COS")]
    min_cosine: f64,
    /// How many values to list, the least similar first (0: every value, in graph order).
    #[arg(long, default_value_t = 20, value_name = "N")]
    top: usize,
    /// Make this node's output NaN in the lower-precision run (checks the bisection).
    #[arg(long, value_name = "NODE")]
    inject_nan: Option<String>,
    #[command(flatten)]
    compile: super::run::CompileArgs,
}

fn line(v: &ValueDiff) -> String {
    format!(
        "  {:<10.6} {:<11.4e} {:>6}  {} ({}) -> {}",
        v.cosine, v.max_abs, v.nonfinite, v.node, v.op, v.value
    )
}

/// Runs the subcommand.
pub fn main(a: Args) -> Result<ExitCode> {
    let mut lower = a.compile.options()?;
    lower.input_shapes = parse_shapes(&a.inputs.shape)?;
    if smelt_runtime::artifact::is_artifact(&a.model) {
        bail!(
            InvalidInput,
            "{}: an artifact is compiled for one precision; compare the ONNX model",
            a.model.display()
        );
    }
    if a.inputs.input.is_empty() && !a.inputs.random_inputs {
        bail!(
            InvalidInput,
            "give inputs (--input NAME=FILE.npy) or --random-inputs"
        );
    }
    let session = Session::load_with(&a.model, &lower)?;
    let inputs = build_inputs(&session.inputs(), &a.inputs, &lower.input_shapes)?;
    let mut base = lower.clone();
    base.precision = PrecisionPolicy::uniform(a.against);
    let c = compare(
        session.model(),
        &inputs,
        &base,
        &lower,
        a.min_cosine,
        a.inject_nan.as_deref(),
    )
    .map_err(|e| e.context(a.model.display().to_string()))?;
    outln!(
        "{} against {}: {} values compared",
        lower.precision.describe(),
        a.against,
        c.values.len()
    );
    outln!("  cosine     max |diff|  NaN/Inf  node (op) -> value");
    let mut shown: Vec<&ValueDiff> = c.values.iter().collect();
    if a.top > 0 {
        shown.sort_by(|x, y| x.cosine.total_cmp(&y.cosine));
        shown.truncate(a.top);
    }
    for v in shown {
        outln!("{}", line(v));
    }
    match c.first_nonfinite {
        Some(i) => outln!("first NaN/Inf:\n{}", line(&c.values[i])),
        None => outln!("first NaN/Inf: none"),
    }
    match c.first_divergent {
        Some(i) => outln!(
            "first under cosine {}:\n{}",
            a.min_cosine,
            line(&c.values[i])
        ),
        None => outln!("first under cosine {}: none", a.min_cosine),
    }
    outln!("the compiled plans' outputs:");
    for v in &c.outputs {
        outln!(
            "  {:<10.6} {:<11.4e} {:>6}  {}",
            v.cosine,
            v.max_abs,
            v.nonfinite,
            v.value
        );
    }
    let bad = c.first_nonfinite.is_some() || c.first_divergent.is_some();
    Ok(if bad {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
