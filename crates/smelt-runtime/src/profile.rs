//! Per-kernel timing profiles, written as Chrome trace JSON (chrome://tracing, Perfetto).

use std::fmt::Write as _;

/// One kernel's run.
#[derive(Debug, Clone)]
pub struct KernelEvent {
    /// The kernel's name (its first source node).
    pub name: String,
    /// The group kind (elementwise, reduction, anchor, copy, single, reference).
    pub kind: String,
    /// The source ONNX node names.
    pub nodes: Vec<String>,
    /// The member op names.
    pub ops: Vec<String>,
    /// Start, in nanoseconds from the run's start.
    pub start_ns: u64,
    /// Duration in nanoseconds.
    pub dur_ns: u64,
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Chrome trace JSON for the runs given (each run's events offset by `run_start_us`).
pub fn chrome_trace(runs: &[(f64, Vec<KernelEvent>)]) -> String {
    let mut out = String::from("{\"traceEvents\":[\n");
    let mut first = true;
    for (run, (start_us, events)) in runs.iter().enumerate() {
        for e in events {
            if !first {
                out.push_str(",\n");
            }
            first = false;
            let list = |v: &[String]| {
                format!(
                    "[{}]",
                    v.iter().map(|s| json_str(s)).collect::<Vec<_>>().join(",")
                )
            };
            let _ = write!(
                out,
                "{{\"name\":{},\"cat\":{},\"ph\":\"X\",\"ts\":{:.3},\"dur\":{:.3},\"pid\":1,\"tid\":1,\"args\":{{\"run\":{run},\"onnx_nodes\":{},\"ops\":{}}}}}",
                json_str(&e.name),
                json_str(&e.kind),
                start_us + e.start_ns as f64 / 1e3,
                e.dur_ns as f64 / 1e3,
                list(&e.nodes),
                list(&e.ops),
            );
        }
    }
    out.push_str("\n],\"displayTimeUnit\":\"ms\"}\n");
    out
}
