//! The explanation of a compiled plan, as JSON: each pass, the compilations and their
//! reasons, the kernel groups with their source nodes, the fusions refused and why, the
//! memory plan. `smelt explain` prints it; the Python package returns it.

use crate::{format_dims, Plan, Session};
use serde_json::{json, Value as Json};
use smelt_ir::kernel::{BufferKind, GroupBody, KernelPlan};
use std::collections::BTreeMap;

fn kind_counts(p: &KernelPlan) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for g in &p.groups {
        *m.entry(g.body.kind()).or_default() += 1;
    }
    m
}

/// The output shape a group computes.
pub fn group_shape(b: &GroupBody) -> Vec<usize> {
    match b {
        GroupBody::Elementwise(l) => l.shape.clone(),
        GroupBody::Reduction(r) => r.body.shape.clone(),
        GroupBody::Anchor(a) => a.shape.clone(),
        GroupBody::Copy { dst, .. } => dst.shape.clone(),
        GroupBody::Single(s) => s
            .outputs
            .iter()
            .flatten()
            .next()
            .map(|r| r.shape.clone())
            .unwrap_or_default(),
    }
}

/// What the compiler did for `plan` (one of `s`'s plans) as nested JSON objects: passes,
/// compilations and their reasons, kernel groups, refused fusions and the memory plan.
/// `model` labels the report (a path, or a name).
pub fn explain_json(model: &str, s: &Session, plan: &Plan) -> Json {
    let passes: Vec<Json> = plan
        .pass_reports()
        .iter()
        .map(|r| {
            json!({"name": r.name, "nodes_before": r.nodes_before, "nodes_after": r.nodes_after,
                   "changed": r.changed, "seconds": r.seconds})
        })
        .collect();
    let compilations: Vec<Json> = s
        .compilations()
        .iter()
        .map(|c| {
            let shapes: BTreeMap<&str, String> =
                c.shapes.iter().map(|(n, d)| (n, format_dims(d))).collect();
            json!({"shapes": shapes, "reason": c.reason})
        })
        .collect();
    let mut out = json!({
        "model": model,
        "opt_level": s.options().opt_level,
        "precision": s.options().precision.describe(),
        "compile_seconds": plan.compile_seconds(),
        "passes": passes,
        "compilations": compilations,
        "recompile_count": s.compile_count().saturating_sub(1),
    });
    if let Some(a) = s.artifact() {
        out["artifact"] = json!({"target": a.target, "isa": a.isa.name(),
                                 "deterministic": a.deterministic,
                                 "packed_weights_mapped": a.prepacked.0,
                                 "packed_weights_stored": a.prepacked.1,
                                 "preset": a.preset, "decisions": a.decisions,
                                 "max_threads": a.max_threads, "max_memory": a.max_memory,
                                 "batch_buckets": a.buckets, "tuning": a.tuning});
    }
    match plan.kernels() {
        Some(k) => {
            let names = plan.kernel_names();
            let groups: Vec<Json> = k
                .groups
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    json!({"index": i, "kind": g.body.kind(), "ops": g.ops, "nodes": g.nodes,
                           "shape": group_shape(&g.body), "kernel": names.get(i)})
                })
                .collect();
            if let Some((threads, isa)) = plan.cpu_setup() {
                out["threads"] = json!(threads);
                out["isa"] = json!(isa.name());
            }
            let rejected: Vec<Json> = k
                .rejected
                .iter()
                .map(|r| json!({"node": r.node, "into": r.into, "reason": r.reason}))
                .collect();
            let buffers: Vec<Json> = k
                .buffers
                .iter()
                .filter_map(|b| match b.kind {
                    BufferKind::Arena { offset } => {
                        Some(json!({"name": b.name, "dtype": b.dtype.to_string(),
                        "shape": b.shape, "bytes": b.bytes(), "offset": offset}))
                    }
                    _ => None,
                })
                .collect();
            // Weight bytes by element type, as the plan stores them (before any packing).
            let mut weights: BTreeMap<String, usize> = BTreeMap::new();
            for w in (0..).map_while(|i| plan.weight(i)) {
                *weights.entry(w.dtype().to_string()).or_default() += w.nbytes();
            }
            out["weights"] = json!({
                "bytes": weights.values().sum::<usize>(),
                "by_dtype": weights,
            });
            let m = &k.memory;
            out["execution"] = json!("kernels");
            out["kernel_count"] = json!(k.groups.len());
            out["kernels_by_kind"] = json!(kind_counts(k));
            out["groups"] = json!(groups);
            out["rejected_fusions"] = json!(rejected);
            out["memory"] = json!({
                "arena_bytes": m.arena_bytes,
                "intermediate_bytes": m.intermediate_bytes,
                "arena_fraction": if m.intermediate_bytes > 0 { m.arena_bytes as f64 / m.intermediate_bytes as f64 } else { 0.0 },
                "in_place": m.in_place,
                "concat_in_place": m.concat_in_place,
                "buffers": buffers,
            });
        }
        None if plan.segments().is_some() => {
            out["execution"] = json!("segments");
            out["kernel_count"] = json!(plan.graph().nodes.len());
            out["memory"] = json!({"arena_bytes": 0, "intermediate_bytes": 0});
        }
        None => {
            let g = plan.graph();
            out["execution"] = json!("reference");
            out["fallback_reason"] = json!(plan.fallback_reason());
            out["kernel_count"] = json!(g.nodes.len());
            out["memory"] = json!({"arena_bytes": 0, "intermediate_bytes": 0});
        }
    }
    if let Some(seg) = plan.segments() {
        out["execution"] = json!("segments");
        out["segments"] = json!(seg.summary());
    }
    out
}
