//! `smelt inspect`: a model's signature, opsets, op histogram and parameter count.

use smelt_ir::{Graph, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `smelt inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// The ONNX model file.
    model: PathBuf,
    /// Print the imported graph as IR text instead of the summary.
    #[arg(long)]
    ir: bool,
}

/// Runs the subcommand.
pub fn main(a: Args) -> Result<ExitCode> {
    let imported = smelt_onnx::load_model_lenient(&a.model)?;
    let m = &imported.model;
    let g = &m.graph;
    if a.ir {
        out!("{}", smelt_ir::text::print_graph(g));
        return Ok(ExitCode::SUCCESS);
    }
    outln!("model: {}", a.model.display());
    outln!(
        "ir_version: {}  producer: {}",
        m.ir_version,
        if m.producer.is_empty() {
            "?"
        } else {
            &m.producer
        }
    );
    let opsets: Vec<String> = m
        .opsets
        .iter()
        .map(|(d, v)| format!("{}={v}", if d.is_empty() { "ai.onnx" } else { d }))
        .collect();
    outln!("opsets: {}", opsets.join(", "));
    outln!("inputs:");
    for i in &g.inputs {
        let ty = g
            .value(i.id)
            .ty
            .as_ref()
            .map(|t| t.to_string())
            .unwrap_or_else(|| "?".into());
        let note = if i.default.is_some() {
            "  (optional: has a default)"
        } else {
            ""
        };
        outln!("  {}: {ty}{note}", g.name_of(i.id));
    }
    outln!("outputs:");
    for &o in &g.outputs {
        let ty = g
            .value(o)
            .ty
            .as_ref()
            .map(|t| t.to_string())
            .unwrap_or_else(|| "?".into());
        outln!("  {}: {ty}", g.name_of(o));
    }
    let mut hist = BTreeMap::new();
    histogram(g, &mut hist);
    let total: usize = hist.values().sum();
    outln!("ops: {total} nodes, {} kinds", hist.len());
    let mut by_count: Vec<_> = hist.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    for (op, n) in by_count {
        outln!("  {op:<28} {n}");
    }
    let (count, bytes) = params(g);
    outln!("parameters: {count} ({})", human_bytes(bytes));
    if !imported.unsupported.is_empty() {
        outln!(
            "unsupported: {} node(s) (see `smelt check`)",
            imported.unsupported.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn histogram(g: &Graph, h: &mut BTreeMap<&'static str, usize>) {
    for n in &g.nodes {
        *h.entry(n.op.name()).or_default() += 1;
        for s in n.op.subgraphs() {
            histogram(s, h);
        }
    }
}

fn params(g: &Graph) -> (usize, usize) {
    let consts = g.constants.iter().map(|c| &c.tensor);
    let defaults = g.inputs.iter().filter_map(|i| i.default.as_ref());
    consts
        .chain(defaults)
        .fold((0, 0), |(n, b), t| (n + t.len(), b + t.nbytes()))
}

fn human_bytes(b: usize) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.2} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}
