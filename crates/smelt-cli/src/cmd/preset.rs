//! What `smelt compile --preset` decides: edge's batch of one and thread count (timed on
//! this machine), datacenter's batch buckets.

use smelt_ir::{bail, Dim, Result, Tensor, ValueType};
use smelt_runtime::{InputShapes, Plan, Session, SessionOptions};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A latency within this fraction of the best holds it.
const LATENCY_SLACK: f64 = 0.05;

/// The declared shape of a tensor input, dims unknown as None.
fn declared(ty: &Option<ValueType>) -> Option<Vec<Option<usize>>> {
    match ty {
        Some(ValueType::Tensor { shape: Some(s), .. }) => Some(
            s.iter()
                .map(|d| match d {
                    Dim::Known(n) => usize::try_from(*n).ok(),
                    _ => None,
                })
                .collect(),
        ),
        _ => None,
    }
}

/// The inputs not given a shape whose batch (dim 0) alone is symbolic, with their shape
/// at batch 1.
pub fn batch_one(session: &Session, given: &InputShapes) -> Vec<(String, Vec<usize>)> {
    session
        .inputs()
        .into_iter()
        .filter(|i| given.get(&i.name).is_none())
        .filter_map(|i| {
            let d = declared(&i.ty)?;
            let (first, rest) = d.split_first()?;
            let rest: Option<Vec<usize>> = rest.iter().copied().collect();
            match (first, rest) {
                (None, Some(rest)) => Some((i.name, [vec![1], rest].concat())),
                _ => None,
            }
        })
        .collect()
}

/// One plan per batch bucket, the largest first, and the line that says so. Every input
/// needs a symbolic batch (dim 0) and its other dims known (declared, or from `given`).
pub fn bucket_plans(
    session: &Session,
    given: &InputShapes,
    buckets: &[usize],
) -> Result<(Vec<Arc<Plan>>, String)> {
    let mut sizes = buckets.to_vec();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.dedup();
    if sizes.contains(&0) || sizes.len() > 16 {
        bail!(
            InvalidInput,
            "--batch-buckets: each bucket is a batch of 1 or more, and at most 16 of them"
        );
    }
    let mut rests = Vec::new();
    for i in session.inputs() {
        let d = declared(&i.ty);
        match d.as_deref().and_then(|d| d.split_first()) {
            Some((Some(n), _)) => bail!(
                Unsupported,
                "input '{}' fixes its batch (dim 0) at {n}: batch buckets need a symbolic batch",
                i.name
            ),
            Some((None, rest)) => {
                let rest: Vec<usize> = match given.get(&i.name) {
                    Some(g) if g.len() == rest.len() + 1 => g[1..].to_vec(),
                    _ => rest.iter().copied().collect::<Option<_>>().ok_or_else(|| {
                        smelt_ir::err!(
                            InvalidInput,
                            "input '{}' has symbolic dims besides the batch: give them with --shape",
                            i.name
                        )
                    })?,
                };
                rests.push((i.name, rest));
            }
            None => bail!(
                Unsupported,
                "input '{}' has no declared shape: batch buckets need a batch dim",
                i.name
            ),
        }
    }
    let mut plans = Vec::with_capacity(sizes.len());
    for &b in &sizes {
        let mut shapes = InputShapes::new();
        for (name, rest) in &rests {
            shapes.set(name, [vec![b], rest.clone()].concat());
        }
        plans.push(
            session
                .plan_for(&shapes)
                .map_err(|e| e.context(format!("batch bucket {b}")))?,
        );
    }
    let list: Vec<String> = sizes.iter().rev().map(|b| b.to_string()).collect();
    Ok((
        plans,
        format!(
            "batch buckets {}: a batch between them is padded to the next (nothing compiles at run time)",
            list.join(", ")
        ),
    ))
}

/// The median time of runs of `session`, after two warm-up runs: at least 5, at most
/// what fits in about half a second.
fn median_run(session: &Session, inputs: &[(String, Tensor)]) -> Result<Duration> {
    let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    for _ in 0..2 {
        session.run_ref(&refs)?;
    }
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < 5 || (start.elapsed() < Duration::from_millis(500) && times.len() < 200) {
        let t = Instant::now();
        session.run_ref(&refs)?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// The fewest threads whose median latency on the artifact is within 5% of the best
/// count's (timed here, 1 up to the threads asked for and the process may use), and the
/// line that says so.
pub fn fewest_threads(
    bytes: &[u8],
    options: &SessionOptions,
    random_inputs: impl Fn(&Session) -> Result<Vec<(String, Tensor)>>,
) -> Result<(usize, String)> {
    let file: Arc<dyn smelt_ir::Backing> = Arc::new(smelt_ir::AlignedBytes::copy_of(bytes)?);
    // Timing more threads than the process may use measures nothing.
    let most = options
        .threads
        .min(smelt_kernels::pool::available_threads())
        .max(1);
    let mut times = Vec::with_capacity(most);
    let mut inputs = None;
    for threads in 1..=most {
        let o = SessionOptions {
            threads,
            ..options.clone()
        };
        let s = Session::from_artifact(file.clone(), &o, "the new artifact")?;
        if inputs.is_none() {
            inputs = Some(random_inputs(&s)?);
        }
        times.push(median_run(&s, inputs.as_deref().unwrap_or_default())?);
    }
    let best = times.iter().min().copied().unwrap_or_default();
    let n = 1 + times
        .iter()
        .position(|t| t.as_secs_f64() <= best.as_secs_f64() * (1.0 + LATENCY_SLACK))
        .unwrap_or(0);
    let each: Vec<String> = times
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{} thread(s) {:.2} ms", i + 1, t.as_secs_f64() * 1e3))
        .collect();
    Ok((
        n,
        format!(
            "threads: at most {n}, the fewest within {:.0}% of the best median latency ({})",
            LATENCY_SLACK * 100.0,
            each.join(", ")
        ),
    ))
}
