//! `smelt explain`: what the compiler did to a model at given input shapes: each pass,
//! the kernel groups with their source nodes, the fusions refused and why, the memory plan.

use crate::inputs::parse_shapes;
use serde_json::Value as Json;
use smelt_ir::Result;
use smelt_ir::Value;
use smelt_runtime::explain::{explain_json, group_shape};
use smelt_runtime::{Plan, Session};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `smelt explain`.
#[derive(clap::Args)]
pub struct Args {
    /// The ONNX model file, or a compiled artifact (.smelt).
    model: PathBuf,
    /// Inputs and shapes; with inputs (or --random-inputs) the model runs once first, so
    /// the parts of a plan in segments compiled at run time are shown too.
    #[command(flatten)]
    inputs: crate::inputs::InputArgs,
    /// Also write the explanation as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// List every buffer of the memory plan, not just the totals.
    #[arg(long)]
    buffers: bool,
    #[command(flatten)]
    compile: super::run::CompileArgs,
}

/// Runs the subcommand.
pub fn main(a: Args) -> Result<ExitCode> {
    let mut options = a.compile.options()?;
    options.input_shapes = parse_shapes(&a.inputs.shape)?;
    let session = Session::load_with(&a.model, &options)?;
    let mut cost = None;
    if a.inputs.random_inputs || !a.inputs.input.is_empty() {
        let inputs =
            crate::inputs::build_inputs(&session.inputs(), &a.inputs, &options.input_shapes)?;
        cost = Some(
            CallCost::measure(&session, &inputs)
                .map_err(|e| e.context(a.model.display().to_string()))?,
        );
    }
    let plan = session_plan(&session, &options, &a.model)?;
    let mut report = explain_json(&a.model.display().to_string(), &session, &plan);
    if let Some(c) = &cost {
        report["per_call"] = c.json();
    }
    print_text(&report, &plan, a.buffers);
    if let Some(c) = &cost {
        c.print();
    }
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| smelt_ir::err!(Internal, "cannot encode the explanation: {e}"))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| smelt_ir::err!(Io, "cannot write {}: {e}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What one call of `Session::run` costs at the given inputs, and how much of it is spent
/// around the kernels (input checks, plan lookup, arena, outputs) rather than in them.
struct CallCost {
    /// Calls timed (of each kind).
    calls: usize,
    /// Median wall time of a plain call, ns.
    wall_ns: u64,
    /// Median sum of the kernels' times in a profiled call, ns.
    kernels_ns: u64,
}

impl CallCost {
    /// Runs the model once (compiling what it needs), then times plain and profiled calls
    /// for about 0.2 s each (5 to 2,000 calls), the inputs cloned outside the timed part.
    fn measure(session: &Session, inputs: &HashMap<String, Value>) -> Result<CallCost> {
        use std::time::{Duration, Instant};
        session.run(inputs.clone())?;
        let budget = Duration::from_millis(200);
        let (mut walls, mut kernels) = (Vec::new(), Vec::new());
        let start = Instant::now();
        while walls.len() < 5 || (walls.len() < 2000 && start.elapsed() < budget) {
            let x = inputs.clone();
            let t = Instant::now();
            session.run(x)?;
            walls.push(t.elapsed().as_nanos() as u64);
        }
        for _ in 0..walls.len() {
            let (_, events) = session.run_profiled(inputs.clone())?;
            kernels.push(events.iter().map(|e| e.dur_ns).sum::<u64>());
        }
        let median = |v: &mut Vec<u64>| {
            v.sort_unstable();
            v[v.len() / 2]
        };
        Ok(CallCost {
            calls: walls.len(),
            wall_ns: median(&mut walls),
            kernels_ns: median(&mut kernels),
        })
    }

    fn json(&self) -> Json {
        serde_json::json!({
            "calls": self.calls,
            "wall_us": self.wall_ns as f64 / 1e3,
            "kernels_us": self.kernels_ns as f64 / 1e3,
            "around_kernels_us": self.wall_ns.saturating_sub(self.kernels_ns) as f64 / 1e3,
        })
    }

    fn print(&self) {
        let us = |ns: u64| ns as f64 / 1e3;
        outln!(
            "per call ({} calls, medians): {:.2} us, of which kernels {:.2} us and around them (input checks, plan lookup, arena, outputs) {:.2} us",
            self.calls,
            us(self.wall_ns),
            us(self.kernels_ns),
            us(self.wall_ns.saturating_sub(self.kernels_ns))
        );
    }
}

/// The plan a command works on: the one the session compiled at load (it checked the
/// shapes and compiled for them when they were complete), else asking for one says which
/// input lacks a shape.
pub fn session_plan(
    session: &Session,
    options: &smelt_runtime::SessionOptions,
    model: &std::path::Path,
) -> Result<std::sync::Arc<Plan>> {
    match session.last_plan() {
        Some(p) => Ok(p),
        None => session
            .plan_for(&options.input_shapes)
            .map_err(|e| e.context(model.display().to_string())),
    }
}

fn print_text(r: &Json, plan: &Plan, buffers: bool) {
    outln!("model: {}", r["model"].as_str().unwrap_or(""));
    outln!("passes (nodes before -> after, ms):");
    for p in r["passes"].as_array().into_iter().flatten() {
        outln!(
            "  {:<20} {:>5} -> {:<5} {:>8.2}",
            p["name"].as_str().unwrap_or(""),
            p["nodes_before"],
            p["nodes_after"],
            p["seconds"].as_f64().unwrap_or(0.0) * 1e3
        );
    }
    for c in r["compilations"].as_array().into_iter().flatten() {
        outln!(
            "compiled for {}: {}",
            c["shapes"],
            c["reason"].as_str().unwrap_or("")
        );
    }
    if let Some(a) = r.get("artifact") {
        outln!(
            "artifact: compiled ahead of time for {} ({} kernels), deterministic {}; no pass ran; {} of {} packed weights mapped from the file",
            a["target"].as_str().unwrap_or(""),
            a["isa"].as_str().unwrap_or(""),
            a["deterministic"],
            a["packed_weights_mapped"],
            a["packed_weights_stored"]
        );
        if let Some(p) = a["preset"].as_str() {
            outln!("preset {p}:");
        }
        for d in a["decisions"].as_array().into_iter().flatten() {
            outln!("  {}", d.as_str().unwrap_or(""));
        }
        let tuning: Vec<smelt_runtime::tune::TuneRecord> =
            serde_json::from_value(a["tuning"].clone()).unwrap_or_default();
        for t in tuning.iter().filter(|t| t.kept) {
            outln!(
                "autotune choices (batch {}), each with the median time it won by:",
                t.batch
            );
            for l in t.group_lines() {
                outln!("  {l}");
            }
        }
    }
    if let Some(s) = plan.segments() {
        let lines = s.describe();
        outln!("execution: in segments: {}", lines[0]);
        for l in &lines[1..] {
            outln!("  {l}");
        }
    }
    let Some(k) = plan.kernels() else {
        if plan.segments().is_some() {
            return;
        }
        outln!(
            "execution: reference executor ({})",
            plan.fallback_reason().unwrap_or("")
        );
        outln!("kernel_count: {} (one per node)", r["kernel_count"]);
        return;
    };
    if let Some((threads, isa)) = plan.cpu_setup() {
        outln!("cpu kernels: {isa}, {threads} threads per run");
    }
    outln!("kernel groups:");
    let names = plan.kernel_names();
    for (i, g) in k.groups.iter().enumerate() {
        let nodes = if g.nodes.len() > 4 {
            format!(
                "{} ... {} ({} nodes)",
                g.nodes[0],
                g.nodes[g.nodes.len() - 1],
                g.nodes.len()
            )
        } else {
            g.nodes.join(", ")
        };
        outln!(
            "  #{i:<4} {:<11} {:<40} {:?}  [{nodes}]\n         kernel: {}",
            g.body.kind(),
            g.ops.join("+"),
            group_shape(&g.body),
            names.get(i).map_or("", String::as_str)
        );
    }
    if !k.rejected.is_empty() {
        outln!("fusions not done:");
        for x in &k.rejected {
            outln!("  {} into {}: {}", x.node, x.into, x.reason);
        }
    }
    let m = &k.memory;
    outln!("kernel_count: {}  {}", k.groups.len(), r["kernels_by_kind"]);
    outln!(
        "weights: {} bytes {} (precision {})",
        r["weights"]["bytes"],
        r["weights"]["by_dtype"],
        r["precision"].as_str().unwrap_or("fp32")
    );
    outln!(
        "memory: arena {} bytes for {} bytes of intermediates ({:.1}%), {} in place, {} concats in place",
        m.arena_bytes,
        m.intermediate_bytes,
        100.0 * r["memory"]["arena_fraction"].as_f64().unwrap_or(0.0),
        m.in_place,
        m.concat_in_place
    );
    if buffers {
        for b in r["memory"]["buffers"].as_array().into_iter().flatten() {
            outln!(
                "  {:>10} +{:<10} {} {}{}",
                b["bytes"],
                b["offset"],
                b["name"].as_str().unwrap_or(""),
                b["dtype"].as_str().unwrap_or(""),
                b["shape"]
            );
        }
    }
}
