//! `smelt bench MODEL --server URL`: load through the real protocol against a running
//! `smelt serve` (or any KServe v2 server): closed-loop clients or Poisson arrivals (--qps),
//! throughput, latency percentiles, errors, and the batches the server formed (from its
//! metrics).

use smelt_bench::remote::{self, InferRequest};
use smelt_bench::stats::Summary;
use smelt_ir::{err, Result, Tensor, Value};
use smelt_runtime::Session;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

/// What `--server` needs besides the inputs.
pub struct ServerLoad<'a> {
    /// The server's REST address (`http://host:port`).
    pub url: &'a str,
    /// Its metrics address, if any.
    pub metrics_url: Option<&'a str>,
    /// The model's name on the server.
    pub model: &'a str,
    /// Concurrent closed-loop clients.
    pub clients: usize,
    /// Seconds measured (after a 2 s warm-up).
    pub seconds: f64,
    /// Poisson arrivals at this rate (requests per second) instead of closed loops.
    pub qps: Option<f64>,
    /// Seed of the arrivals.
    pub seed: u64,
    /// Check each answer against a local run on the same inputs.
    pub check_answers: bool,
}

fn scrape(addr: Option<SocketAddr>) -> Option<String> {
    remote::get(addr?, "/metrics").ok()
}

/// Runs the load and prints (and returns as JSON) what it measured.
pub fn run(
    l: &ServerLoad,
    session: &Session,
    inputs: &HashMap<String, Value>,
) -> Result<serde_json::Value> {
    let addr = remote::address(l.url)?;
    let metrics = l.metrics_url.map(remote::address).transpose()?;
    let named: Vec<(String, Tensor)> = session
        .inputs()
        .into_iter()
        .filter_map(|i| Some((i.name.clone(), inputs.get(&i.name)?.tensor().ok()?.clone())))
        .collect();
    let batch = named
        .first()
        .and_then(|(_, t)| t.shape().first().copied())
        .unwrap_or(1);
    let req = InferRequest::new(addr, l.model, &named)?;
    let before = scrape(metrics);
    if l.qps.is_some_and(|q| !(q.is_finite() && q > 0.0))
        || !(l.seconds.is_finite() && l.seconds > 0.0)
    {
        smelt_ir::bail!(InvalidInput, "--qps and --duration must be positive");
    }
    let (warmup, window) = (Duration::from_secs(2), Duration::from_secs_f64(l.seconds));
    let times = l
        .qps
        .map(|q| remote::poisson(q, (warmup + window).as_secs_f64(), l.seed));
    let arrivals = match &times {
        Some(t) => remote::Arrivals::Open(t),
        None => remote::Arrivals::Closed,
    };
    let how = l.qps.map_or("closed loops".to_string(), |q| {
        format!("Poisson at {q} requests/s")
    });
    errln!(
        "{} clients ({how}) against {} (model '{}') for 2 s warm-up + {} s",
        l.clients,
        l.url,
        l.model,
        l.seconds
    );
    let expected = if l.check_answers {
        let outs = session
            .run(inputs.clone())
            .map_err(|e| e.context("the local run that answers are checked against"))?;
        let tensors: Vec<(String, Tensor)> = outs
            .into_iter()
            .filter_map(|(n, v)| Some((n, v.into_tensor().ok()?)))
            .collect();
        Some(smelt_bench::answer::Expected::new(&tensors))
    } else {
        None
    };
    let out = remote::run(
        addr,
        &req,
        l.clients,
        arrivals,
        (warmup, window),
        expected.as_ref(),
    );
    let after = scrape(metrics);
    let s = Summary::of(&out.latencies_ms).ok_or_else(|| {
        err!(
            InvalidInput,
            "no request to {} succeeded in the window (errors by status: {:?})",
            l.url,
            out.errors
        )
    })?;
    let rps = out.ok as f64 / out.seconds;
    outln!(
        "requests      {} ok, errors by status {:?}",
        out.ok,
        out.errors
    );
    if l.check_answers {
        outln!(
            "answers       {} checked: {} wrong, {} within 1e-6 relative but not bit-equal{}",
            out.ok,
            out.wrong,
            out.inexact,
            out.first_wrong
                .as_deref()
                .map_or(String::new(), |w| format!(" (first wrong: {w})"))
        );
    }
    outln!(
        "throughput    {rps:.1} requests/s, {:.1} inferences/s",
        rps * batch as f64
    );
    outln!(
        "latency ms    p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        s.p50,
        s.p90,
        s.p99,
        s.max
    );
    let mut json = serde_json::json!({
        "server": l.url, "model": l.model, "clients": l.clients, "seconds": out.seconds, "offered_qps": l.qps,
        "ok": out.ok, "errors": out.errors, "wrong": l.check_answers.then_some(out.wrong),
        "inexact": l.check_answers.then_some(out.inexact), "requests_per_s": rps, "inferences_per_s": rps * batch as f64,
        "latency_ms": {"p50": s.p50, "p90": s.p90, "p99": s.p99, "mean": s.mean, "max": s.max},
    });
    if let (Some(b), Some(a)) = (before, after) {
        let d = |name: &str| remote::metric(&a, name, l.model) - remote::metric(&b, name, l.model);
        let (count, execs) = (d("nv_inference_count"), d("nv_inference_exec_count"));
        let mean = if execs > 0.0 { count / execs } else { 0.0 };
        let old = remote::buckets(&b, "smelt_batch_size", l.model);
        let hist: Vec<(String, f64)> = remote::buckets(&a, "smelt_batch_size", l.model)
            .into_iter()
            .map(|(le, v)| {
                let was = old.iter().find(|(k, _)| *k == le).map_or(0.0, |(_, w)| *w);
                (le, v - was)
            })
            .collect();
        outln!("server        {execs} executions for {count} inferences: mean batch {mean:.2} (warm-up included)");
        let cells: Vec<String> = hist.iter().map(|(le, v)| format!("<={le}: {v}")).collect();
        outln!("batch sizes   {} (cumulative)", cells.join("  "));
        json["server_metrics"] = serde_json::json!({"inferences": count, "executions": execs, "mean_batch": mean, "batch_size_cumulative": hist});
    }
    Ok(json)
}
