//! Scenarios: interleaved blocks of back-to-back runs (single-stream and offline) and a
//! Poisson-arrival server with concurrent callers, plus the max-QPS search.

use crate::progress::Progress;
use crate::rng::Rng;
use crate::stats::Summary;
use smelt_ir::{err, Error, Result};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Something that can run the model: smelt in-process or a baseline worker.
pub trait Runner {
    /// Its name (e.g. "smelt", "onnxruntime").
    fn name(&self) -> &str;
    /// Runs `n` iterations back to back and returns each run call's time in nanoseconds.
    fn run_block(&mut self, n: usize) -> Result<Vec<f64>>;
}

/// How long to measure.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    /// This many timed iterations per runner.
    Iterations(usize),
    /// About this many seconds in all (shared by the runners).
    Seconds(f64),
}

/// Measurement plan for interleaved blocks.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Untimed iterations per runner before measuring.
    pub warmup: usize,
    /// How long to measure.
    pub budget: Budget,
}

/// Blocks of per-iteration times (ns) per runner, in the runners' order.
pub type Blocks = Vec<Vec<Vec<f64>>>;

/// Runs warmup, then alternates blocks between the runners (ABBA order, so neither always
/// goes first) until the budget is spent. Returns `[runner][block][iteration]` times in ns.
pub fn interleaved(runners: &mut [&mut dyn Runner], plan: &Plan) -> Result<Blocks> {
    let k = runners.len();
    let mut per_iter = vec![1e6f64; k];
    for (i, r) in runners.iter_mut().enumerate() {
        let w = r.run_block(plan.warmup.max(1))?;
        if let Some(s) = Summary::of(&w) {
            per_iter[i] = s.p50.max(1.0);
        }
    }
    let mut out: Blocks = vec![Vec::new(); k];
    match plan.budget {
        Budget::Iterations(n) => {
            let n = n.max(1);
            let nblocks = n.min((n / 50).max(10));
            let mut bar = Progress::new("measuring", nblocks as f64);
            for b in 0..nblocks {
                let size = n / nblocks + usize::from(b < n % nblocks);
                run_round(runners, b, &mut out, |_| size)?;
                bar.update((b + 1) as f64);
            }
            bar.finish();
        }
        Budget::Seconds(secs) => {
            // Aim for about 20 rounds, each giving every runner the same time slice.
            let slice_ns = secs.max(0.001) * 1e9 / (k as f64 * 20.0);
            let sizes: Vec<usize> = per_iter
                .iter()
                .map(|t| ((slice_ns / t) as usize).clamp(1, 100_000))
                .collect();
            let start = Instant::now();
            let mut bar = Progress::new("measuring", secs);
            let mut b = 0;
            while b < 2 || start.elapsed().as_secs_f64() < secs {
                run_round(runners, b, &mut out, |i| sizes[i])?;
                b += 1;
                bar.update(start.elapsed().as_secs_f64());
            }
            bar.finish();
        }
    }
    Ok(out)
}

fn run_round(
    runners: &mut [&mut dyn Runner],
    round: usize,
    out: &mut Blocks,
    size_of: impl Fn(usize) -> usize,
) -> Result<()> {
    let k = runners.len();
    let order: Vec<usize> = if round & 1 == 0 {
        (0..k).collect()
    } else {
        (0..k).rev().collect()
    };
    for i in order {
        settle();
        let t = runners[i].run_block(size_of(i))?;
        out[i].push(t);
    }
    Ok(())
}

/// Waits until the machine is idle again (20 ms windows, at most 300 ms): a runtime whose
/// workers spin after a run would otherwise take cores from the next runtime's block.
pub fn settle() {
    let start = Instant::now();
    let mut last = cpu_ticks();
    while start.elapsed() < Duration::from_millis(300) {
        std::thread::sleep(Duration::from_millis(20));
        let now = cpu_ticks();
        match (last, now) {
            (Some((b0, i0)), Some((b1, i1))) => {
                let (busy, idle) = (b1.saturating_sub(b0), i1.saturating_sub(i0));
                if busy + idle > 0 && (busy as f64) < 0.15 * (busy + idle) as f64 {
                    return;
                }
            }
            _ => return,
        }
        last = now;
    }
}

/// Busy and idle jiffies over all CPUs, from /proc/stat (None where it cannot be read).
fn cpu_ticks() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let line = s.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 5 {
        return None;
    }
    let idle = v[3] + v[4];
    let total: u64 = v.iter().take(8).sum();
    Some((total - idle, idle))
}

/// What a server run measured.
#[derive(Debug, Clone)]
pub struct ServerRun {
    /// Offered rate (requests per second).
    pub qps: f64,
    /// Requests issued.
    pub requests: usize,
    /// Latency from scheduled arrival to completion, in ns, per request.
    pub latencies_ns: Vec<f64>,
    /// Completed requests per second over the run.
    pub achieved_qps: f64,
}

/// Serves `requests` requests arriving as a Poisson process at `qps` with `callers`
/// concurrent callers sharing `run`. Latency includes the wait in the queue.
pub fn server(
    run: &(dyn Fn() -> Result<()> + Sync),
    qps: f64,
    requests: usize,
    callers: usize,
    seed: u64,
) -> Result<ServerRun> {
    if !(qps.is_finite() && qps > 0.0) {
        return Err(err!(
            InvalidInput,
            "the request rate must be positive, got {qps} per second"
        ));
    }
    let mut rng = Rng::new(seed);
    let mut t = 0.0;
    let arrivals: Vec<Duration> = (0..requests.max(1))
        .map(|_| {
            t += rng.exponential(qps);
            Duration::from_secs_f64(t)
        })
        .collect();
    let next = AtomicUsize::new(0);
    let lat = Mutex::new(vec![0.0f64; arrivals.len()]);
    let error: Mutex<Option<Error>> = Mutex::new(None);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..callers.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= arrivals.len() || error.lock().map_or(true, |e| e.is_some()) {
                    break;
                }
                let due = start + arrivals[i];
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                if let Err(e) = run() {
                    if let Ok(mut g) = error.lock() {
                        *g = Some(e);
                    }
                    break;
                }
                let l = due.elapsed().as_nanos() as f64;
                if let Ok(mut g) = lat.lock() {
                    g[i] = l;
                }
            });
        }
    });
    let wall = start.elapsed().as_secs_f64();
    if let Some(e) = error.into_inner().ok().flatten() {
        return Err(e);
    }
    let latencies_ns = lat
        .into_inner()
        .map_err(|_| err!(Internal, "a caller panicked"))?;
    Ok(ServerRun {
        qps,
        requests: latencies_ns.len(),
        achieved_qps: latencies_ns.len() as f64 / wall,
        latencies_ns,
    })
}

/// Binary-searches the highest Poisson rate whose p99 latency stays under `bound_ms`,
/// starting from an estimate of capacity `guess_qps`. Each probe serves `requests_for(qps)`
/// requests. Returns the best passing run (if any) and every probe.
pub fn find_max_qps(
    run: &(dyn Fn() -> Result<()> + Sync),
    bound_ms: f64,
    guess_qps: f64,
    callers: usize,
    requests_for: &dyn Fn(f64) -> usize,
    seed: u64,
) -> Result<(Option<ServerRun>, Vec<ServerRun>)> {
    let mut probes = Vec::new();
    let p99 = |r: &ServerRun| Summary::of(&r.latencies_ns).map_or(f64::INFINITY, |s| s.p99 / 1e6);
    let mut best: Option<ServerRun> = None;
    let (mut lo, mut hi) = (0.0f64, guess_qps.max(0.1));
    // Grow the upper end until it fails (at most a few doublings).
    for _ in 0..4 {
        let r = server(run, hi, requests_for(hi), callers, seed)?;
        let ok = p99(&r) <= bound_ms;
        let _ = writeln!(
            std::io::stderr(),
            "  qps {hi:9.2}: p99 {:9.3} ms {}",
            p99(&r),
            if ok { "ok" } else { "over" }
        );
        probes.push(r.clone());
        if !ok {
            break;
        }
        lo = hi;
        best = Some(r);
        hi *= 2.0;
    }
    for _ in 0..6 {
        if best.as_ref().is_some_and(|b| b.qps >= hi) {
            break;
        }
        let mid = if lo == 0.0 { hi / 2.0 } else { (lo + hi) / 2.0 };
        let r = server(run, mid, requests_for(mid), callers, seed)?;
        let ok = p99(&r) <= bound_ms;
        let _ = writeln!(
            std::io::stderr(),
            "  qps {mid:9.2}: p99 {:9.3} ms {}",
            p99(&r),
            if ok { "ok" } else { "over" }
        );
        probes.push(r.clone());
        if ok {
            lo = mid;
            best = Some(r);
        } else {
            hi = mid;
        }
    }
    Ok((best, probes))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sleeper(&'static str, u64);
    impl Runner for Sleeper {
        fn name(&self) -> &str {
            self.0
        }
        fn run_block(&mut self, n: usize) -> Result<Vec<f64>> {
            Ok((0..n)
                .map(|_| {
                    let t = Instant::now();
                    std::thread::sleep(Duration::from_micros(self.1));
                    t.elapsed().as_nanos() as f64
                })
                .collect())
        }
    }

    #[test]
    fn interleaved_gives_every_runner_its_iterations() {
        let (mut a, mut b) = (Sleeper("a", 10), Sleeper("b", 20));
        let plan = Plan {
            warmup: 1,
            budget: Budget::Iterations(23),
        };
        let out = interleaved(&mut [&mut a, &mut b], &plan).unwrap();
        assert_eq!(out[0].iter().map(Vec::len).sum::<usize>(), 23);
        assert_eq!(out[1].iter().map(Vec::len).sum::<usize>(), 23);
        assert_eq!(out[0].len(), 10);
    }

    #[test]
    fn server_latency_includes_queueing() {
        let work = || {
            std::thread::sleep(Duration::from_millis(2));
            Ok(())
        };
        // Offered 2000/s to one caller that serves 500/s: the queue grows.
        let r = server(&work, 2000.0, 40, 1, 1).unwrap();
        let s = Summary::of(&r.latencies_ns).unwrap();
        assert!(s.max > 20e6, "{s:?}");
        assert!(server(&work, -1.0, 5, 1, 1).is_err());
    }
}
