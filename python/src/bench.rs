//! `smelt.bench`: smelt's benchmark harness (smelt-bench) from Python. smelt runs through
//! the Rust API in-process, timed in Rust; baselines run in their own worker processes, as
//! `smelt bench --vs` runs them; blocks are interleaved and the report is the CLI's JSON.

use crate::convert::tensor_from_py;
use crate::errors::{no_panic, to_py};
use crate::session::PySession;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use smelt_bench::baseline::Worker;
use smelt_bench::env::{peak_rss_bytes, Environment};
use smelt_bench::report::{BenchResult, Measured};
use smelt_bench::scenario::{self, Budget, Plan, Runner};
use smelt_ir::{Result, Tensor};
use smelt_runtime::Session;
use std::path::PathBuf;
use std::time::Instant;

/// smelt through the Rust API on borrowed inputs: each run call timed on its own.
struct SmeltRunner<'a> {
    session: &'a Session,
    inputs: &'a [(String, Tensor)],
}

impl Runner for SmeltRunner<'_> {
    fn name(&self) -> &str {
        "smelt"
    }

    fn run_block(&mut self, n: usize) -> Result<Vec<f64>> {
        let refs: Vec<(&str, &Tensor)> = self.inputs.iter().map(|(k, t)| (k.as_str(), t)).collect();
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let r = self.session.run_ref(&refs);
            let ns = t.elapsed().as_nanos() as f64;
            r?;
            out.push(ns);
        }
        Ok(out)
    }
}

/// What a benchmark runs against what, for how long.
#[derive(FromPyObject)]
pub struct BenchArgs {
    label: String,
    warmup: usize,
    iterations: Option<usize>,
    duration: Option<f64>,
    threads: usize,
    seed: u64,
    /// Baseline runtimes, with the model file and the feed saved as .npy files.
    vs: Vec<String>,
    model_path: Option<PathBuf>,
    npy_inputs: Vec<(String, PathBuf)>,
    python: Option<PathBuf>,
    workdir: Option<PathBuf>,
}

/// Benchmarks `session` on `feed`; returns the report as JSON text and the terminal table.
#[pyfunction]
pub fn bench(
    py: Python<'_>,
    session: &PySession,
    feed: &Bound<'_, PyDict>,
    args: BenchArgs,
) -> PyResult<(String, String)> {
    let inputs: Vec<(String, Tensor)> = feed
        .iter()
        .map(|(k, v)| {
            let name: String = k.extract()?;
            let t = tensor_from_py(&name, &v, None)?;
            Ok((name, t))
        })
        .collect::<PyResult<_>>()?;
    let s = session.session();
    py.detach(|| no_panic("benchmarking", || measure(s, &inputs, &args)))
        .map_err(to_py)
}

fn measure(s: &Session, inputs: &[(String, Tensor)], a: &BenchArgs) -> Result<(String, String)> {
    let version = env!("CARGO_PKG_VERSION");
    let mut workers = Vec::new();
    if !a.vs.is_empty() {
        let model = a
            .model_path
            .as_deref()
            .ok_or_else(|| smelt_ir::err!(InvalidInput, "a baseline needs the model as a file"))?;
        let python = smelt_bench::baseline::find_python(a.python.as_deref());
        let dir = a.workdir.clone().unwrap_or_else(std::env::temp_dir);
        for rt in &a.vs {
            workers.push(Worker::spawn(
                &python,
                rt,
                model,
                &a.npy_inputs,
                a.threads,
                &dir,
            )?);
        }
    }
    let mut smelt = SmeltRunner { session: s, inputs };
    let blocks = {
        let mut runners: Vec<&mut dyn Runner> = vec![&mut smelt];
        for w in workers.iter_mut() {
            runners.push(w);
        }
        let budget = match (a.iterations, a.duration) {
            (Some(n), _) => Budget::Iterations(n),
            (None, Some(d)) => Budget::Seconds(d),
            (None, None) => Budget::Seconds(10.0),
        };
        let plan = Plan {
            warmup: a.warmup,
            budget,
        };
        scenario::interleaved(&mut runners, &plan)?
    };
    let mut blocks = blocks.into_iter();
    let threads = s
        .last_plan()
        .and_then(|p| p.cpu_setup())
        .map_or(a.threads, |c| c.0);
    let mut result = BenchResult {
        model: a.label.clone(),
        scenario: "single-stream".into(),
        batch: 1,
        threads,
        seed: a.seed,
        inputs: inputs
            .iter()
            .map(|(n, t)| {
                (
                    n.clone(),
                    t.dtype().to_string(),
                    t.shape().to_vec(),
                    "given".into(),
                )
            })
            .collect(),
        env: Environment::detect(version),
        peak_rss_bytes: peak_rss_bytes(),
        rss_after_load_bytes: None,
        smelt: Measured {
            name: "smelt".into(),
            version: version.into(),
            load_ms: f64::NAN,
            blocks: blocks.next().unwrap_or_default(),
        },
        baselines: Vec::new(),
        comparisons: Vec::new(),
        server: None,
        search: None,
        warnings: Vec::new(),
    };
    for (w, b) in workers.iter().zip(blocks) {
        result.baselines.push(Measured {
            name: w.name().to_string(),
            version: w.version.clone(),
            load_ms: w.load_ms,
            blocks: b,
        });
    }
    result.analyze();
    Ok((result.to_json().to_string(), result.table()))
}
