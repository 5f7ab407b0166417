//! `smelt bench`: measures a model in a scenario, side by side with baseline runtimes,
//! and reports statistics; `--roofline` measures the machine's compute and memory peaks.

use crate::inputs::{build_inputs, parse_shapes, InputArgs, SplitMix};
use smelt_bench::baseline::{find_python, Worker};
use smelt_bench::env::{peak_rss_bytes, proc_status_bytes, Environment};
use smelt_bench::report::{BenchResult, Measured};
use smelt_bench::roofline::Roofline;
use smelt_bench::scenario::{self, Budget, Plan, Runner};
use smelt_bench::stats::Summary;
use smelt_bench::svg::cdf_svg;
use smelt_ir::{bail, err, Data, Dim, ErrorKind, Result, Tensor, Value, ValueType};
use smelt_runtime::npy;
use smelt_runtime::Session;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The load scenario, after MLPerf Inference's LoadGen.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum ScenarioArg {
    /// One request at a time; latency percentiles.
    SingleStream,
    /// Back-to-back (batched) runs; samples per second.
    Offline,
    /// Poisson arrivals at --qps served by --threads concurrent callers.
    Server,
}

/// Arguments of `smelt bench`.
#[derive(clap::Args)]
pub struct Args {
    /// The ONNX model file or compiled artifact (not needed with --roofline).
    model: Option<PathBuf>,
    /// An input as NAME=FILE.npy (repeatable); other inputs are random.
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    input: Vec<String>,
    /// A concrete input shape as NAME=1x3x224x224 (repeatable), for random inputs.
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    shape: Vec<String>,
    /// The scenario.
    #[arg(long, value_enum, default_value = "single-stream")]
    scenario: ScenarioArg,
    /// Seconds to measure, shared by smelt and the baselines (default 10).
    #[arg(long, conflicts_with = "iterations")]
    duration: Option<f64>,
    /// Timed iterations per runtime (server: requests per rate).
    #[arg(long)]
    iterations: Option<usize>,
    /// Untimed iterations per runtime first.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// A baseline runtime to measure in the same run: onnxruntime, tract, openvino (repeatable).
    #[arg(long = "vs", value_name = "RUNTIME")]
    vs: Vec<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a Markdown summary, an SVG latency CDF and the JSON into this folder.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Seed for random inputs, bootstrap resampling and server arrivals.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Python for the baselines (else $SMELT_PYTHON, else ${SMELT_CACHE:-~/.cache/smelt}/venv/bin/python).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Offline: samples per run along the model's symbolic batch dimension.
    #[arg(long)]
    batch: Option<usize>,
    /// Server: offered request rate (Poisson), requests per second.
    #[arg(long)]
    qps: Option<f64>,
    /// Server: latency bound on p99 in milliseconds, for --find-max-qps.
    #[arg(long)]
    latency_bound_ms: Option<f64>,
    /// Server: search the highest rate whose p99 stays under --latency-bound-ms.
    #[arg(long, requires = "latency_bound_ms")]
    find_max_qps: bool,
    /// Measure the machine's peak fp32 FMA rate and memory bandwidth instead (no MODEL).
    #[arg(long)]
    roofline: bool,
    /// Measure smelt's SGEMM on MxNxK instead (no MODEL): B packed ahead, at 1 thread and
    /// at --threads, against the FMA peak.
    #[arg(long, value_name = "MxNxK", conflicts_with = "roofline")]
    gemm: Option<String>,
    /// With --gemm: fuse `act(C + bias)` into the product (none, relu, gelu, silu...).
    #[arg(long, value_name = "ACT", requires = "gemm")]
    gemm_epilogue: Option<String>,
    /// Load a running server instead (KServe v2 REST, binary tensors), as http://HOST:PORT;
    /// MODEL and the shapes make the inputs. Measures --duration seconds after 2 s of warm-up.
    #[arg(long, value_name = "URL")]
    server: Option<String>,
    /// With --server: the model's name on the server (default: the model file's stem).
    #[arg(long, requires = "server")]
    server_model: Option<String>,
    /// With --server: the server's metrics address (http://HOST:PORT), for the batches it formed.
    #[arg(long, requires = "server")]
    metrics_url: Option<String>,
    /// With --server: concurrent clients (connections); closed loops, or with --qps the
    /// connections that Poisson arrivals are sent on.
    #[arg(long, default_value_t = 1, requires = "server")]
    concurrency: usize,
    /// With --server: check every answer's outputs against a local run of MODEL on the
    /// same inputs (bit-equal, or within 1e-6 relative for floats) and count wrong ones.
    #[arg(long, requires = "server")]
    check_answers: bool,
    #[command(flatten)]
    compile: super::run::CompileArgs,
}

/// Runs the subcommand.
pub fn main(a: Args) -> Result<ExitCode> {
    let threads = a.compile.thread_count();
    if a.roofline {
        return roofline(&a, threads);
    }
    if let Some(spec) = &a.gemm {
        return gemm_bench(&a, spec, threads);
    }
    let Some(model) = a.model.clone() else {
        bail!(InvalidInput, "give a MODEL to benchmark (or --roofline)");
    };
    check_args(&a)?;
    let env = Environment::detect(env!("CARGO_PKG_VERSION"));

    let t = Instant::now();
    let mut options = a.compile.options()?;
    options.input_shapes = parse_shapes(&a.shape)?;
    let session = Session::load_with(&model, &options)?;
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let rss_after_load = proc_status_bytes("VmRSS");
    errln!(
        "loaded {} in {load_ms:.1} ms (seed {}; smelt and the baselines run on {threads} threads)",
        model.display(),
        a.seed
    );

    let (inputs, described) = make_inputs(&session, &a, a.batch.unwrap_or(1))?;
    if let Some(url) = &a.server {
        let stem = model
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let load = super::bench_server::ServerLoad {
            url,
            metrics_url: a.metrics_url.as_deref(),
            model: a.server_model.as_deref().unwrap_or(&stem),
            clients: a.concurrency,
            seconds: a.duration.unwrap_or(10.0),
            qps: a.qps,
            seed: a.seed,
            check_answers: a.check_answers,
        };
        let json = super::bench_server::run(&load, &session, &inputs)?;
        if let Some(path) = &a.json {
            write(
                path,
                &serde_json::to_string_pretty(&json).unwrap_or_default(),
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let batch = a
        .batch
        .unwrap_or_else(|| samples_per_run(&session, &inputs));
    // Fail early, with smelt's own message, if the model does not run.
    session
        .run(inputs.clone())
        .map_err(|e| e.context(model.display().to_string()))?;

    let mut result = BenchResult {
        model: model.display().to_string(),
        scenario: match a.scenario {
            ScenarioArg::SingleStream => "single-stream",
            ScenarioArg::Offline => "offline",
            ScenarioArg::Server => "server",
        }
        .into(),
        batch,
        threads,
        seed: a.seed,
        inputs: described,
        env,
        peak_rss_bytes: None,
        rss_after_load_bytes: rss_after_load,
        smelt: Measured {
            name: "smelt".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            load_ms,
            blocks: Vec::new(),
        },
        baselines: Vec::new(),
        comparisons: Vec::new(),
        server: None,
        search: None,
        warnings: Vec::new(),
    };

    if a.scenario == ScenarioArg::Server {
        run_server(&a, &session, &inputs, &mut result)?;
    } else {
        run_interleaved(&a, &model, &session, &inputs, &mut result)?;
    }
    result.peak_rss_bytes = peak_rss_bytes();
    result.analyze();

    out!("{}", result.table());
    let json = serde_json::to_string_pretty(&result.to_json()).unwrap_or_default();
    if let Some(path) = &a.json {
        write(path, &json)?;
        errln!("wrote {}", path.display());
    }
    if let Some(dir) = &a.report {
        std::fs::create_dir_all(dir)
            .map_err(|e| err!(Io, "cannot create {}: {e}", dir.display()))?;
        write(&dir.join("summary.md"), &result.markdown())?;
        let title = format!("{} ({}) latency CDF", file_name(&model), result.scenario);
        write(
            &dir.join("latency_cdf.svg"),
            &cdf_svg(&title, &result.series()),
        )?;
        write(&dir.join("result.json"), &json)?;
        errln!(
            "wrote {}/summary.md, latency_cdf.svg, result.json",
            dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn check_args(a: &Args) -> Result<()> {
    for rt in &a.vs {
        if !smelt_bench::baseline::RUNTIMES.contains(&rt.as_str()) {
            bail!(
                InvalidInput,
                "--vs {rt}: unknown runtime (known: {})",
                smelt_bench::baseline::RUNTIMES.join(", ")
            );
        }
    }
    if a.iterations == Some(0) {
        bail!(InvalidInput, "--iterations must be at least 1");
    }
    if let Some(d) = a.duration {
        if !(d.is_finite() && d > 0.0) {
            bail!(
                InvalidInput,
                "--duration must be a positive number of seconds"
            );
        }
    }
    if a.batch == Some(0) {
        bail!(InvalidInput, "--batch must be at least 1");
    }
    if a.batch.is_some_and(|b| b > 1) && a.scenario != ScenarioArg::Offline {
        bail!(InvalidInput, "--batch applies to --scenario offline");
    }
    if a.scenario == ScenarioArg::Server {
        if !a.find_max_qps && a.qps.is_none() {
            bail!(
                InvalidInput,
                "--scenario server needs --qps Q (or --latency-bound-ms B --find-max-qps)"
            );
        }
        if let Some(q) = a.qps {
            if !(q.is_finite() && q > 0.0) {
                bail!(InvalidInput, "--qps must be positive");
            }
        }
    } else if (a.qps.is_some() && a.server.is_none()) || a.find_max_qps {
        bail!(
            InvalidInput,
            "--qps and --find-max-qps apply to --scenario server (--qps also to --server)"
        );
    }
    if let Some(b) = a.latency_bound_ms {
        if !(b.is_finite() && b > 0.0) {
            bail!(InvalidInput, "--latency-bound-ms must be positive");
        }
    }
    Ok(())
}

/// Inputs: files, else random (mask inputs ones, gather indices below the table size),
/// re-batched to `batch` along a symbolic leading dimension.
type Described = Vec<(String, String, Vec<usize>, String)>;

fn make_inputs(
    session: &Session,
    a: &Args,
    batch: usize,
) -> Result<(HashMap<String, Value>, Described)> {
    let sig = session.inputs();
    let mut shapes = session.options().input_shapes.clone();
    let batched: Vec<String> = sig
        .iter()
        .filter(|s| {
            matches!(&s.ty, Some(ValueType::Tensor { shape: Some(d), .. }) if matches!(d.first(), Some(Dim::Sym(_))))
        })
        .map(|s| s.name.clone())
        .collect();
    if batch > 1 {
        if batched.is_empty() {
            bail!(
                InvalidInput,
                "--batch {batch}: the model has no input with a symbolic batch (first) dimension"
            );
        }
        for name in &batched {
            if let Some(d) = shapes.get(name) {
                let mut d = d.to_vec();
                if let Some(first) = d.first_mut() {
                    *first = batch;
                }
                shapes.set(name, d);
            }
        }
    }
    let from_files: Vec<String> = a
        .input
        .iter()
        .filter_map(|s| s.rsplit_once('=').map(|(n, _)| n.to_string()))
        .collect();
    let args = InputArgs {
        input: a.input.clone(),
        shape: a.shape.clone(),
        random_inputs: true,
        seed: a.seed,
    };
    if batch > 1 {
        // Random inputs of a batched model get the batch as their symbolic first dimension.
        for s in &sig {
            if batched.contains(&s.name)
                && shapes.get(&s.name).is_none()
                && !from_files.contains(&s.name)
            {
                if let Some(ValueType::Tensor { shape: Some(d), .. }) = &s.ty {
                    let dims: Option<Vec<usize>> = d
                        .iter()
                        .enumerate()
                        .map(|(i, x)| match x {
                            _ if i == 0 => Some(batch),
                            Dim::Known(n) => Some(*n as usize),
                            _ => None,
                        })
                        .collect();
                    match dims {
                        Some(dims) => shapes.set(&s.name, dims),
                        None => bail!(
                            InvalidInput,
                            "input '{}' has other symbolic dimensions; give --shape {}=DIMS",
                            s.name,
                            s.name
                        ),
                    }
                }
            }
        }
    }
    let mut inputs = build_inputs(&sig, &args, &shapes)?;
    let limits = crate::inputs::index_limits(session);
    let mut rng = SplitMix::new(a.seed ^ 0x5EED_1DC5);
    let mut described = Vec::new();
    for s in &sig {
        let Some(Value::Tensor(t)) = inputs.get_mut(&s.name) else {
            continue;
        };
        let source = if from_files.contains(&s.name) {
            if batch > 1 && batched.contains(&s.name) {
                *t = tile_batch(t, batch, &s.name)?;
            }
            "file".to_string()
        } else {
            crate::inputs::make_plausible(&s.name, t, &limits, &mut rng)?
        };
        described.push((
            s.name.clone(),
            t.dtype().to_string(),
            t.shape().to_vec(),
            source,
        ));
    }
    for (n, d, s, src) in &described {
        errln!("input {n}: {d} {s:?} {src}");
    }
    Ok((inputs, described))
}

/// The batch an input set holds: the first dimension of the first input whose declared
/// first dimension is symbolic (1 when there is none).
fn samples_per_run(session: &Session, inputs: &HashMap<String, Value>) -> usize {
    session
        .inputs()
        .iter()
        .filter(|s| {
            matches!(&s.ty, Some(ValueType::Tensor { shape: Some(d), .. }) if matches!(d.first(), Some(Dim::Sym(_))))
        })
        .find_map(|s| match inputs.get(&s.name) {
            Some(Value::Tensor(t)) => t.shape().first().copied(),
            _ => None,
        })
        .unwrap_or(1)
        .max(1)
}

fn tile_batch(t: &Tensor, batch: usize, name: &str) -> Result<Tensor> {
    if t.shape().first() != Some(&1) {
        bail!(InvalidInput,
            "--batch {batch}: input '{name}' from a file must have batch 1 to be re-batched (its shape is {:?})",
            t.shape()
        );
    }
    let parts: Vec<&Data> = (0..batch).map(|_| t.data()).collect();
    let mut shape = t.shape().to_vec();
    shape[0] = batch;
    Tensor::new(t.dtype(), shape, Data::concat(&parts)?)
}

/// smelt in this process.
struct SmeltRunner<'a> {
    session: &'a Session,
    inputs: &'a HashMap<String, Value>,
}

impl Runner for SmeltRunner<'_> {
    fn name(&self) -> &str {
        "smelt"
    }

    fn run_block(&mut self, n: usize) -> Result<Vec<f64>> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let inputs = self.inputs.clone(); // outside the timed region
            let t = Instant::now();
            let r = self.session.run(inputs);
            let ns = t.elapsed().as_nanos() as f64;
            r?;
            out.push(ns);
        }
        Ok(out)
    }
}

fn budget(a: &Args) -> Budget {
    match (a.iterations, a.duration) {
        (Some(n), _) => Budget::Iterations(n),
        (None, Some(d)) => Budget::Seconds(d),
        (None, None) => Budget::Seconds(10.0),
    }
}

fn run_interleaved(
    a: &Args,
    model: &Path,
    session: &Session,
    inputs: &HashMap<String, Value>,
    result: &mut BenchResult,
) -> Result<()> {
    let threads = a.compile.thread_count();
    let mut workers = Vec::new();
    let tmp = TempDir::new()?;
    if !a.vs.is_empty() {
        let python = find_python(a.python.as_deref());
        let mut files = Vec::new();
        for (i, s) in session.inputs().iter().enumerate() {
            if let Some(Value::Tensor(t)) = inputs.get(&s.name) {
                let p = tmp.0.join(format!("input_{i}.npy"));
                npy::write(&p, t)?;
                files.push((s.name.clone(), p));
            }
        }
        for rt in &a.vs {
            errln!("starting {rt} with {} ...", python.display());
            let w = Worker::spawn(&python, rt, model, &files, threads, &tmp.0).map_err(|e| {
                let e = match e.kind() {
                    ErrorKind::Io | ErrorKind::Unsupported => {
                        crate::hint::append(e, " (or choose the Python with --python PATH)")
                    }
                    _ => e,
                };
                e.context(format!("--vs {rt}"))
            })?;
            errln!("{rt} {} loaded in {:.1} ms", w.version, w.load_ms);
            workers.push(w);
        }
    }
    let mut smelt = SmeltRunner { session, inputs };
    let blocks = {
        let mut runners: Vec<&mut dyn Runner> = vec![&mut smelt];
        for w in workers.iter_mut() {
            runners.push(w);
        }
        let plan = Plan {
            warmup: a.warmup,
            budget: budget(a),
        };
        scenario::interleaved(&mut runners, &plan)?
    };
    let mut blocks = blocks.into_iter();
    result.smelt.blocks = blocks.next().unwrap_or_default();
    for (w, b) in workers.iter().zip(blocks) {
        result.baselines.push(Measured {
            name: w.name().to_string(),
            version: w.version.clone(),
            load_ms: w.load_ms,
            blocks: b,
        });
    }
    Ok(())
}

fn run_server(
    a: &Args,
    session: &Session,
    inputs: &HashMap<String, Value>,
    result: &mut BenchResult,
) -> Result<()> {
    if !a.vs.is_empty() {
        result.warnings.push(
            "baselines are measured in single-stream and offline; --vs ignored in server".into(),
        );
    }
    let threads = a.compile.thread_count();
    let run = || -> Result<()> { session.run(inputs.clone()).map(|_| ()) };
    // Warm up and estimate the service time.
    let mut times = Vec::new();
    for _ in 0..a.warmup.max(1) {
        let t = Instant::now();
        run()?;
        times.push(t.elapsed().as_secs_f64());
    }
    let service = Summary::of(&times).map_or(1.0, |s| s.p50).max(1e-6);
    let secs = a.duration.unwrap_or(10.0);
    let requests_for = |q: f64| -> usize {
        a.iterations
            .unwrap_or_else(|| ((q * secs) as usize).clamp(20, 100_000))
    };
    if a.find_max_qps {
        let bound = a.latency_bound_ms.unwrap_or(f64::INFINITY);
        let guess = a.qps.unwrap_or(threads as f64 / service * 0.8);
        errln!("searching the highest rate with p99 <= {bound} ms (start {guess:.2} qps)");
        let (best, probes) =
            scenario::find_max_qps(&run, bound, guess, threads, &requests_for, a.seed)?;
        result.server = best;
        result.search = Some((bound, probes));
    } else {
        let q = a.qps.unwrap_or(1.0);
        let n = requests_for(q);
        errln!(
            "serving {n} requests at {q} qps (Poisson) with {} callers",
            threads
        );
        let r = scenario::server(&run, q, n, threads, a.seed)?;
        result.server = Some(r);
    }
    Ok(())
}

fn roofline(a: &Args, threads: usize) -> Result<ExitCode> {
    let env = Environment::detect(env!("CARGO_PKG_VERSION"));
    errln!("measuring fp32 FMA peak and STREAM triad (3 x 256 MiB arrays) on 1 and {threads} threads ...");
    let r = Roofline::measure(threads);
    outln!(
        "cpu {} {} ({} cores; {})  smelt {} {}",
        env.cpu,
        env.cpu_id,
        env.cores,
        env.simd.join(" "),
        env.smelt_version,
        env.profile
    );
    outln!(
        "fp32 FMA peak ({}): {:8.1} GFLOP/s one core, {:8.1} GFLOP/s {} threads",
        r.kernel.name(),
        r.gflops_1,
        r.gflops_all,
        threads
    );
    outln!(
        "STREAM triad:          {:8.1} GB/s one thread, {:8.1} GB/s {} threads",
        r.triad_gbps_1,
        r.triad_gbps_all,
        threads
    );
    if let (Some(c), Some(f)) = (r.clock_ghz, r.flops_per_cycle()) {
        outln!("core clock (dependent adds): {c:.2} GHz, so {f:.1} fp32 flops/cycle per core");
    }
    if a.iterations.is_some() || a.duration.is_some() {
        errln!("note: --iterations/--duration do not apply to --roofline");
    }
    let mut j = serde_json::json!({"schema_version": 1, "roofline": r.to_json(), "environment": env.to_json()});
    if let (Some(o), Some(rss)) = (j.as_object_mut(), peak_rss_bytes()) {
        o.insert("peak_rss_bytes".into(), rss.into());
    }
    let text = serde_json::to_string_pretty(&j).unwrap_or_default();
    if let Some(p) = &a.json {
        write(p, &text)?;
    }
    if let Some(dir) = &a.report {
        std::fs::create_dir_all(dir)
            .map_err(|e| err!(Io, "cannot create {}: {e}", dir.display()))?;
        write(&dir.join("roofline.json"), &text)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn gemm_bench(a: &Args, spec: &str, threads: usize) -> Result<ExitCode> {
    use smelt_kernels::epilogue::Act;
    let dims: Vec<usize> = spec
        .split('x')
        .map(|d| d.trim().parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| {
            err!(
                InvalidInput,
                "--gemm {spec}: expected MxNxK, e.g. 1024x1024x1024"
            )
        })?;
    let [m, n, k] = <[usize; 3]>::try_from(dims)
        .map_err(|_| err!(InvalidInput, "--gemm {spec}: expected three sizes MxNxK"))?;
    if m == 0
        || n == 0
        || k == 0
        || m.checked_mul(k)
            .and_then(|x| x.checked_mul(n))
            .is_none_or(|x| x > 1 << 40)
    {
        bail!(
            InvalidInput,
            "--gemm {spec}: sizes must be positive and the product at most 2^40"
        );
    }
    let act = match a.gemm_epilogue.as_deref() {
        None => None,
        Some("none") => Some(Act::None),
        Some("relu") => Some(Act::Relu),
        Some("gelu") => Some(Act::Gelu),
        Some("gelu-tanh") => Some(Act::GeluTanh),
        Some("silu") => Some(Act::Silu),
        Some("hardswish") => Some(Act::HardSwish),
        Some("sigmoid") => Some(Act::Sigmoid),
        Some("tanh") => Some(Act::Tanh),
        Some(o) => bail!(InvalidInput, "--gemm-epilogue {o}: expected none, relu, gelu, gelu-tanh, silu, hardswish, sigmoid or tanh"),
    };
    let env = Environment::detect(env!("CARGO_PKG_VERSION"));
    let kern = smelt_kernels::kernels();
    errln!(
        "measuring the FMA peak and SGEMM {m}x{n}x{k} ({}) ...",
        kern.name("gemm")
    );
    let kernel = smelt_bench::roofline::Kernel::detect();
    let peak1 = smelt_bench::roofline::fma_gflops(kernel, 1, 0.001, 300);
    let peakt = smelt_bench::roofline::fma_gflops(kernel, threads, 0.002, 150);
    let secs = a.duration.unwrap_or(2.0);
    let epi = match a.gemm_epilogue.as_deref() {
        Some(e) => format!(", fused bias+{e}"),
        None => String::new(),
    };
    outln!(
        "cpu {} ({}; {} cores; {})",
        env.cpu,
        env.cpu_id,
        env.cores,
        env.simd.join(" ")
    );
    let mut rows = Vec::new();
    for (t, peak) in [(1, peak1), (threads, peakt)] {
        if t == 1 && threads == 1 && !rows.is_empty() {
            break;
        }
        let r = smelt_bench::gemm::measure(m, n, k, t, act, secs);
        outln!(
            "sgemm {m}x{n}x{k}{epi} ({}) {t} thread(s): median {:.3} ms, {:.1} GFLOP/s = {:.1}% of the {:.1} GFLOP/s FMA peak",
            kern.name("gemm"),
            r.median_s * 1e3,
            r.gflops,
            100.0 * r.gflops / peak,
            peak
        );
        rows.push((r, peak));
    }
    if let [(one, _), (many, _)] = rows.as_slice() {
        outln!(
            "{} threads / 1 thread: {:.2}x",
            many.threads,
            many.gflops / one.gflops
        );
    }
    if let Some(p) = &a.json {
        let j: Vec<serde_json::Value> = rows
            .iter()
            .map(|(r, peak)| serde_json::json!({"m": m, "n": n, "k": k, "threads": r.threads, "epilogue": a.gemm_epilogue, "median_ms": r.median_s * 1e3, "best_ms": r.best_s * 1e3, "gflops": r.gflops, "fma_peak_gflops": peak, "isa": kern.isa.name()}))
            .collect();
        write(p, &serde_json::to_string_pretty(&j).unwrap_or_default())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| err!(Io, "cannot write {}: {e}", path.display()))
}

fn file_name(p: &Path) -> String {
    let parent = p
        .parent()
        .and_then(|d| d.file_name())
        .map(|s| s.to_string_lossy().to_string());
    let name = p.file_name().map_or_else(
        || p.display().to_string(),
        |s| s.to_string_lossy().to_string(),
    );
    match parent {
        Some(d) if !d.is_empty() => format!("{d}/{name}"),
        _ => name,
    }
}

/// A temporary folder removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!("smelt-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).map_err(|e| err!(Io, "cannot create {}: {e}", p.display()))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
