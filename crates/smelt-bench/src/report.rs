//! Reports: the result record, its JSON form, the terminal table and the Markdown summary
//! (the SVG chart is in [`crate::svg`]).

use crate::env::Environment;
use crate::scenario::ServerRun;
use crate::stats::{mann_whitney, noise_warnings, ratio_ci, MannWhitney, RatioCi, Summary};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

/// One runtime's measurement.
#[derive(Debug, Clone)]
pub struct Measured {
    /// "smelt" or the baseline's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Load time in ms.
    pub load_ms: f64,
    /// Per-iteration times in ns, by block.
    pub blocks: Vec<Vec<f64>>,
}

impl Measured {
    /// All latencies in milliseconds.
    pub fn latencies_ms(&self) -> Vec<f64> {
        self.blocks.iter().flatten().map(|ns| ns / 1e6).collect()
    }

    /// Latency summary in ms.
    pub fn summary(&self) -> Option<Summary> {
        Summary::of(&self.latencies_ms())
    }

    /// Samples per second given `batch` samples per run (total samples / total run time).
    pub fn throughput(&self, batch: usize) -> f64 {
        let total_ns: f64 = self.blocks.iter().flatten().sum();
        let n = self.blocks.iter().map(Vec::len).sum::<usize>();
        if total_ns > 0.0 {
            (n * batch) as f64 / (total_ns / 1e9)
        } else {
            0.0
        }
    }
}

/// smelt against one baseline.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The baseline's name.
    pub name: String,
    /// smelt/baseline ratio of medians with its 95% CI.
    pub ci: Option<RatioCi>,
    /// Mann-Whitney U test of smelt's latencies against the baseline's.
    pub mw: Option<MannWhitney>,
}

impl Comparison {
    /// Compares smelt with a baseline (seeded bootstrap).
    pub fn of(smelt: &Measured, base: &Measured, seed: u64) -> Comparison {
        let ms = |m: &Measured| -> Vec<Vec<f64>> {
            m.blocks
                .iter()
                .map(|b| b.iter().map(|x| x / 1e6).collect())
                .collect()
        };
        let (a, b) = (ms(smelt), ms(base));
        Comparison {
            name: base.name.clone(),
            ci: ratio_ci(&a, &b, 2000, seed),
            mw: mann_whitney(&a.concat(), &b.concat()),
        }
    }

    /// Whether the difference is significant at 5% (p < 0.05 and the CI excludes 1).
    pub fn significant(&self) -> bool {
        matches!((self.mw, self.ci), (Some(mw), Some(ci)) if mw.p < 0.05 && (ci.high < 1.0 || ci.low > 1.0))
    }

    /// A one-line verdict.
    pub fn verdict(&self) -> String {
        match self.ci {
            Some(ci) if self.significant() && ci.ratio > 1.0 => {
                format!("smelt is {:.2}x slower than {}", ci.ratio, self.name)
            }
            Some(ci) if self.significant() => {
                format!("smelt is {:.2}x faster than {}", 1.0 / ci.ratio, self.name)
            }
            Some(_) => format!("no significant difference from {}", self.name),
            None => format!("no comparison with {}", self.name),
        }
    }
}

/// Everything a bench run produced.
#[derive(Debug, Clone)]
pub struct BenchResult {
    /// The model path.
    pub model: String,
    /// "single-stream", "offline" or "server".
    pub scenario: String,
    /// Samples per run.
    pub batch: usize,
    /// Threads used.
    pub threads: usize,
    /// Seed of random inputs and resampling.
    pub seed: u64,
    /// Input descriptions: (name, dtype, shape, source).
    pub inputs: Vec<(String, String, Vec<usize>, String)>,
    /// The environment.
    pub env: Environment,
    /// Peak resident set size of the smelt process, bytes.
    pub peak_rss_bytes: Option<u64>,
    /// Resident set size right after loading the model, bytes.
    pub rss_after_load_bytes: Option<u64>,
    /// smelt's measurement.
    pub smelt: Measured,
    /// The baselines' measurements.
    pub baselines: Vec<Measured>,
    /// smelt against each baseline.
    pub comparisons: Vec<Comparison>,
    /// Server scenario runs (the chosen one, or the best passing one of a search).
    pub server: Option<ServerRun>,
    /// The max-QPS search: (bound ms, probes).
    pub search: Option<(f64, Vec<ServerRun>)>,
    /// Noise and other warnings.
    pub warnings: Vec<String>,
}

impl BenchResult {
    /// Fills comparisons and noise warnings from the measurements.
    pub fn analyze(&mut self) {
        self.comparisons = self
            .baselines
            .iter()
            .map(|b| Comparison::of(&self.smelt, b, self.seed))
            .collect();
        let mut w = Vec::new();
        if let Some(s) = self.smelt.summary() {
            w.extend(noise_warnings("smelt", &s, None));
        }
        for (b, c) in self.baselines.iter().zip(&self.comparisons) {
            if let Some(s) = b.summary() {
                w.extend(noise_warnings(&b.name, &s, c.ci.as_ref()));
            }
        }
        if self.env.profile == "debug" {
            w.push("smelt is a debug build: build with --release for meaningful numbers".into());
        }
        self.warnings.extend(w);
    }

    /// The JSON record (schema in docs/benchmarking.md).
    pub fn to_json(&self) -> Value {
        let mut baseline = Map::new();
        for b in &self.baselines {
            baseline.insert(b.name.clone(), self.measured_json(b));
        }
        let mut ratio = Map::new();
        for c in &self.comparisons {
            ratio.insert(
                c.name.clone(),
                json!({
                    "p50": c.ci.map(|c| c.ratio),
                    "ci95": c.ci.map(|c| vec![c.low, c.high]),
                    "mann_whitney_u": c.mw.map(|m| m.u),
                    "mann_whitney_p": c.mw.map(|m| m.p),
                    "significant": c.significant(),
                    "verdict": c.verdict(),
                }),
            );
        }
        let inputs: Map<String, Value> = self
            .inputs
            .iter()
            .map(|(n, d, s, src)| (n.clone(), json!({"dtype": d, "shape": s, "source": src})))
            .collect();
        let mut smelt = self.measured_json(&self.smelt);
        if let Some(o) = smelt.as_object_mut() {
            o.insert("peak_rss_bytes".into(), json!(self.peak_rss_bytes));
            o.insert(
                "rss_after_load_bytes".into(),
                json!(self.rss_after_load_bytes),
            );
        }
        let mut out = json!({
            "schema_version": 1,
            "model": self.model,
            "scenario": self.scenario,
            "batch": self.batch,
            "threads": self.threads,
            "seed": self.seed,
            "inputs": inputs,
            "environment": self.env.to_json(),
            "smelt": smelt,
            "baseline": baseline,
            "ratio": ratio,
            "warnings": self.warnings,
        });
        if let (Some(o), Some(r)) = (out.as_object_mut(), &self.server) {
            o.insert("server".into(), server_json(r));
        }
        if let (Some(o), Some((bound, probes))) = (out.as_object_mut(), &self.search) {
            o.insert(
                "find_max_qps".into(),
                json!({
                    "latency_bound_ms": bound,
                    "max_qps": self.server.as_ref().map(|r| r.qps),
                    "probes": probes.iter().map(server_json).collect::<Vec<_>>(),
                }),
            );
        }
        out
    }

    fn measured_json(&self, m: &Measured) -> Value {
        let s = m.summary();
        json!({
            "version": m.version,
            "load_ms": finite(m.load_ms),
            "iterations": m.blocks.iter().map(Vec::len).sum::<usize>(),
            "blocks": m.blocks.len(),
            "latency_ms": s.map(summary_json),
            "throughput_per_s": finite(m.throughput(self.batch)),
        })
    }

    /// The terminal table.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "model {}  scenario {}  batch {}  threads {}  seed {}",
            self.model, self.scenario, self.batch, self.threads, self.seed
        );
        let _ = writeln!(
            t,
            "cpu {} {} ({} cores; {})  smelt {} {}",
            self.env.cpu,
            self.env.cpu_id,
            self.env.cores,
            self.env.simd.join(" "),
            self.env.smelt_version,
            self.env.profile
        );
        if self.scenario != "server" || self.smelt.blocks.iter().any(|b| !b.is_empty()) {
            let _ = writeln!(
                t,
                "\n{:<14} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11}",
                "runtime",
                "load ms",
                "p50 ms",
                "p90 ms",
                "p99 ms",
                "mean ms",
                "min ms",
                "max ms",
                "samples/s"
            );
            for m in std::iter::once(&self.smelt).chain(&self.baselines) {
                if let Some(s) = m.summary() {
                    let _ = writeln!(
                        t,
                        "{:<14} {:>9.1} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>11.2}",
                        m.name, m.load_ms, s.p50, s.p90, s.p99, s.mean, s.min, s.max, m.throughput(self.batch)
                    );
                }
            }
        }
        for c in &self.comparisons {
            if let (Some(ci), Some(mw)) = (c.ci, c.mw) {
                let _ = writeln!(
                    t,
                    "\nsmelt/{} p50 ratio {:.3}  95% CI [{:.3}, {:.3}]  Mann-Whitney p {:.2e}  -> {}",
                    c.name, ci.ratio, ci.low, ci.high, mw.p, c.verdict()
                );
            }
        }
        if let Some(r) = &self.server {
            if let Some(s) = Summary::of(&r.latencies_ns) {
                let _ = writeln!(
                    t,
                    "\nserver: offered {:.2} qps, achieved {:.2} qps, {} requests; latency ms p50 {:.3} p90 {:.3} p99 {:.3} max {:.3}",
                    r.qps, r.achieved_qps, r.requests, s.p50 / 1e6, s.p90 / 1e6, s.p99 / 1e6, s.max / 1e6
                );
            }
        }
        if let Some((bound, _)) = &self.search {
            let _ = match &self.server {
                Some(r) => writeln!(t, "max qps with p99 <= {bound} ms: {:.2}", r.qps),
                None => writeln!(t, "no rate tried kept p99 <= {bound} ms"),
            };
        }
        let _ = writeln!(
            t,
            "\npeak RSS {}  (after load {})",
            mib(self.peak_rss_bytes),
            mib(self.rss_after_load_bytes)
        );
        for w in &self.warnings {
            let _ = writeln!(t, "warning: {w}");
        }
        t
    }

    /// The Markdown summary.
    pub fn markdown(&self) -> String {
        let mut m = String::new();
        let _ = writeln!(m, "# smelt bench: {}\n", self.model);
        let _ = writeln!(
            m,
            "Scenario **{}**, batch {}, {} threads, seed {}.\n",
            self.scenario, self.batch, self.threads, self.seed
        );
        let _ = writeln!(m, "| runtime | version | load ms | p50 ms | p90 ms | p99 ms | mean ms | min ms | max ms | samples/s |");
        let _ = writeln!(m, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in std::iter::once(&self.smelt).chain(&self.baselines) {
            if let Some(s) = r.summary() {
                let _ = writeln!(
                    m,
                    "| {} | {} | {:.1} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.2} |",
                    r.name,
                    r.version,
                    r.load_ms,
                    s.p50,
                    s.p90,
                    s.p99,
                    s.mean,
                    s.min,
                    s.max,
                    r.throughput(self.batch)
                );
            }
        }
        for c in &self.comparisons {
            if let (Some(ci), Some(mw)) = (c.ci, c.mw) {
                let _ = writeln!(
                    m,
                    "\n**smelt / {}**: ratio of medians {:.3}, 95% CI [{:.3}, {:.3}] (block bootstrap), Mann-Whitney p = {:.2e}: {}.",
                    c.name, ci.ratio, ci.low, ci.high, mw.p, c.verdict()
                );
            }
        }
        if let Some(r) = &self.server {
            if let Some(s) = Summary::of(&r.latencies_ns) {
                let _ = writeln!(
                    m,
                    "\n**Server**: offered {:.2} qps (Poisson), achieved {:.2} qps over {} requests; latency including queueing p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms.",
                    r.qps, r.achieved_qps, r.requests, s.p50 / 1e6, s.p90 / 1e6, s.p99 / 1e6
                );
            }
        }
        if let Some((bound, probes)) = &self.search {
            let _ = writeln!(
                m,
                "\nMax-QPS search with p99 <= {bound} ms: {}.",
                match &self.server {
                    Some(r) => format!("{:.2} qps", r.qps),
                    None => "no rate passed".into(),
                }
            );
            for p in probes {
                let p99 = Summary::of(&p.latencies_ns).map_or(f64::NAN, |s| s.p99 / 1e6);
                let _ = writeln!(m, "- {:.2} qps: p99 {:.3} ms", p.qps, p99);
            }
        }
        let _ = writeln!(
            m,
            "\nPeak RSS of the smelt process: {} (after load: {}).\n",
            mib(self.peak_rss_bytes),
            mib(self.rss_after_load_bytes)
        );
        let _ = writeln!(m, "![latency CDF](latency_cdf.svg)\n");
        let _ = writeln!(m, "## Environment\n");
        let _ = writeln!(
            m,
            "- CPU: {} {} ({} logical cores)",
            self.env.cpu, self.env.cpu_id, self.env.cores
        );
        let _ = writeln!(m, "- SIMD: {}", self.env.simd.join(", "));
        let _ = writeln!(m, "- OS: {}", self.env.os);
        let _ = writeln!(
            m,
            "- smelt {} ({} build)",
            self.env.smelt_version, self.env.profile
        );
        for b in &self.baselines {
            let _ = writeln!(m, "- {} {}", b.name, b.version);
        }
        let _ = writeln!(m, "\n## Inputs\n");
        for (n, d, s, src) in &self.inputs {
            let _ = writeln!(m, "- `{n}`: {d} {s:?} ({src})");
        }
        if !self.warnings.is_empty() {
            let _ = writeln!(m, "\n## Warnings\n");
            for w in &self.warnings {
                let _ = writeln!(m, "- {w}");
            }
        }
        m
    }

    /// Latency series to chart: (name, latencies in ms).
    pub fn series(&self) -> Vec<(String, Vec<f64>)> {
        let mut v: Vec<(String, Vec<f64>)> = std::iter::once(&self.smelt)
            .chain(&self.baselines)
            .filter(|m| m.blocks.iter().any(|b| !b.is_empty()))
            .map(|m| (m.name.clone(), m.latencies_ms()))
            .collect();
        if let Some(r) = &self.server {
            v.push((
                format!("smelt server @{:.1} qps", r.qps),
                r.latencies_ns.iter().map(|x| x / 1e6).collect(),
            ));
        }
        v
    }
}

fn finite(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

fn mib(b: Option<u64>) -> String {
    b.map_or("unknown".into(), |b| {
        format!("{:.1} MiB", b as f64 / 1048576.0)
    })
}

fn summary_json(s: Summary) -> Value {
    json!({"p50": s.p50, "p90": s.p90, "p99": s.p99, "mean": s.mean, "min": s.min, "max": s.max, "std": s.std, "mad": s.mad, "n": s.n})
}

fn server_json(r: &ServerRun) -> Value {
    let s = Summary::of(&r.latencies_ns.iter().map(|x| x / 1e6).collect::<Vec<_>>());
    json!({
        "offered_qps": r.qps,
        "achieved_qps": r.achieved_qps,
        "requests": r.requests,
        "latency_ms": s.map(summary_json),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::svg::cdf_svg;

    fn result() -> BenchResult {
        let m = |name: &str, scale: f64| Measured {
            name: name.into(),
            version: "1".into(),
            load_ms: 3.0,
            blocks: (0..10)
                .map(|b| {
                    (0..5)
                        .map(|i| scale * (1e6 + (b * 5 + i) as f64 * 1e3))
                        .collect()
                })
                .collect(),
        };
        let mut r = BenchResult {
            model: "m.onnx".into(),
            scenario: "single-stream".into(),
            batch: 1,
            threads: 1,
            seed: 0,
            inputs: vec![("x".into(), "f32".into(), vec![1, 3], "random".into())],
            env: Environment::detect("0.1.0"),
            peak_rss_bytes: Some(1 << 20),
            rss_after_load_bytes: None,
            smelt: m("smelt", 2.0),
            baselines: vec![m("onnxruntime", 1.0)],
            comparisons: vec![],
            server: None,
            search: None,
            warnings: vec![],
        };
        r.analyze();
        r
    }

    #[test]
    fn json_has_the_documented_fields() {
        let j = result().to_json();
        assert!(j["smelt"]["latency_ms"]["p50"].as_f64().unwrap() > 2.0);
        assert!(j["baseline"]["onnxruntime"]["latency_ms"]["p50"]
            .as_f64()
            .is_some());
        let r = j["ratio"]["onnxruntime"]["p50"].as_f64().unwrap();
        assert!((r - 2.0).abs() < 1e-9);
        let ci = j["ratio"]["onnxruntime"]["ci95"].as_array().unwrap();
        assert!(ci[0].as_f64().unwrap() <= 2.0 && ci[1].as_f64().unwrap() >= 2.0);
        assert!(j["smelt"]["throughput_per_s"].as_f64().unwrap() > 0.0);
        assert_eq!(j["ratio"]["onnxruntime"]["significant"], true);
    }

    #[test]
    fn reports_render() {
        let r = result();
        assert!(r.table().contains("smelt/onnxruntime"));
        assert!(r.markdown().contains("| smelt |"));
        let svg = cdf_svg("t", &r.series());
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(cdf_svg("<empty>", &[]).contains("&lt;empty&gt;"));
    }
}
