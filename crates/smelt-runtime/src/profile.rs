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
    /// Its floating-point operations, estimated from the shapes (0: not counted).
    pub flops: u64,
    /// Bytes it reads plus writes, each distinct element once (0: not counted).
    pub bytes: u64,
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
                "{{\"name\":{},\"cat\":{},\"ph\":\"X\",\"ts\":{:.3},\"dur\":{:.3},\"pid\":1,\"tid\":1,\"args\":{{\"run\":{run},\"onnx_nodes\":{},\"ops\":{},\"flops\":{},\"bytes\":{}}}}}",
                json_str(&e.name),
                json_str(&e.kind),
                start_us + e.start_ns as f64 / 1e3,
                e.dur_ns as f64 / 1e3,
                list(&e.nodes),
                list(&e.ops),
                e.flops,
                e.bytes,
            );
        }
    }
    out.push_str("\n],\"displayTimeUnit\":\"ms\"}\n");
    out
}

/// One kernel's time averaged over the runs of a profile, with its work.
#[derive(Debug, Clone)]
pub struct KernelSummary {
    /// The kernel's name (its first source node).
    pub name: String,
    /// The group kind.
    pub kind: String,
    /// The member ops, joined by `+`.
    pub ops: String,
    /// Mean milliseconds per run.
    pub ms: f64,
    /// Floating-point operations per run.
    pub flops: u64,
    /// Bytes moved per run.
    pub bytes: u64,
}

impl KernelSummary {
    /// Achieved GFLOP/s.
    pub fn gflops(&self) -> f64 {
        self.flops as f64 / (self.ms * 1e6).max(1e-9)
    }

    /// Achieved GB/s.
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 / (self.ms * 1e6).max(1e-9)
    }

    /// The fraction of the roofline ceiling reached: achieved flops over
    /// min(peak, intensity x bandwidth), or bandwidth alone for kernels without flops.
    pub fn roofline_fraction(&self, peak_gflops: f64, gbps: f64) -> f64 {
        if self.flops == 0 {
            return self.gbps() / gbps;
        }
        let intensity = self.flops as f64 / self.bytes.max(1) as f64;
        self.gflops() / peak_gflops.min(intensity * gbps)
    }
}

/// Each kernel of the runs (matched by name, kind and ops), slowest first.
pub fn summarize(runs: &[(f64, Vec<KernelEvent>)]) -> Vec<KernelSummary> {
    let mut index: std::collections::HashMap<(String, String, String), usize> =
        std::collections::HashMap::new();
    let mut out: Vec<KernelSummary> = Vec::new();
    for (_, events) in runs {
        for e in events {
            let ops = e.ops.join("+");
            let key = (e.name.clone(), e.kind.clone(), ops.clone());
            let i = *index.entry(key).or_insert_with(|| {
                out.push(KernelSummary {
                    name: e.name.clone(),
                    kind: e.kind.clone(),
                    ops,
                    ms: 0.0,
                    flops: 0,
                    bytes: 0,
                });
                out.len() - 1
            });
            let k = &mut out[i];
            k.ms += e.dur_ns as f64 / 1e6;
            k.flops = k.flops.saturating_add(e.flops);
            k.bytes = k.bytes.saturating_add(e.bytes);
        }
    }
    let n = runs.len().max(1);
    for k in &mut out {
        k.ms /= n as f64;
        k.flops /= n as u64;
        k.bytes /= n as u64;
    }
    out.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(name: &str, dur_ns: u64, flops: u64, bytes: u64) -> KernelEvent {
        KernelEvent {
            name: name.into(),
            kind: "anchor".into(),
            nodes: vec![name.into()],
            ops: vec!["MatMul".into()],
            start_ns: 0,
            dur_ns,
            flops,
            bytes,
        }
    }

    #[test]
    fn summaries_average_runs_and_give_rates() {
        let runs = vec![
            (
                0.0,
                vec![
                    ev("a", 1_000_000, 10_000_000, 1000),
                    ev("b", 3_000_000, 0, 3_000_000),
                ],
            ),
            (
                5.0,
                vec![
                    ev("a", 3_000_000, 10_000_000, 1000),
                    ev("b", 3_000_000, 0, 3_000_000),
                ],
            ),
        ];
        let s = summarize(&runs);
        assert_eq!(s[0].name, "b");
        assert!((s[0].ms - 3.0).abs() < 1e-9 && (s[0].gbps() - 1.0).abs() < 1e-9);
        assert!((s[1].ms - 2.0).abs() < 1e-9 && (s[1].gflops() - 5.0).abs() < 1e-9);
        // Compute-bound: 5 of a 10 GFLOP/s peak; bandwidth-bound: 1 of 4 GB/s.
        assert!((s[1].roofline_fraction(10.0, 4.0) - 0.5).abs() < 1e-9);
        assert!((s[0].roofline_fraction(10.0, 4.0) - 0.25).abs() < 1e-9);
    }
}
