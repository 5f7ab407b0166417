//! `smelt compile --autotune`: each plan tuned on this machine (a progress bar on stderr
//! when it is a terminal), and the lines that say what tuning decided.

use crate::inputs::{make_plausible, random_tensor, SplitMix};
use smelt_ir::kernel::BufferKind;
use smelt_ir::{err, Result, Tensor};
use smelt_runtime::tune::{self, cache::TuningCache, Level, TuneOptions, TuneRecord};
use smelt_runtime::Plan;
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// The `--autotune` levels.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Autotune {
    /// No timing: the cost model picks every kernel.
    Off,
    /// A few timed rounds per candidate.
    Fast,
    /// More rounds, a tighter margin.
    Max,
}

impl Autotune {
    fn level(self) -> Level {
        match self {
            Autotune::Off => Level::Off,
            Autotune::Fast => Level::Fast,
            Autotune::Max => Level::Max,
        }
    }
}

/// The cache `--tuning-cache` names (`none`: no cache; absent: the default place).
fn open_cache(arg: Option<&str>) -> Option<TuningCache> {
    let path = match arg {
        Some("none") => return None,
        Some(p) => PathBuf::from(p),
        None => tune::cache::default_path()?,
    };
    let c = TuningCache::open(&path);
    if let Some(w) = c.warning() {
        eprintln!("warning: {w}");
    }
    Some(c)
}

/// Tunes each plan in place at `level`; returns the records, in plan order, and a line
/// each for the compile's decisions.
pub fn tune_plans(
    plans: &mut [Arc<Plan>],
    level: Autotune,
    cache: Option<&str>,
    limits: &HashMap<String, i64>,
) -> Result<(Vec<TuneRecord>, Vec<String>)> {
    let cache = open_cache(cache);
    let (mut records, mut lines) = (Vec::new(), Vec::new());
    for plan in plans.iter_mut() {
        let inputs = plan_inputs(plan, limits)?;
        let refs: Vec<&Tensor> = inputs.iter().collect();
        let bar = Bar::new();
        let mut progress = |done: usize, total: usize| bar.show(done, total);
        let mut opts = TuneOptions {
            level: level.level(),
            cache: cache.as_ref(),
            progress: &mut progress,
        };
        let (tuned, record) = tune::autotune(plan, &refs, &mut opts)?;
        bar.clear();
        if let Some(p) = tuned {
            *plan = Arc::new(p);
        }
        if let Some(r) = record {
            lines.push(r.summary());
            records.push(r);
        }
    }
    if let Some(c) = &cache {
        lines.push(format!("tuning cache: {}", c.path().display()));
    }
    Ok((records, lines))
}

/// Random, plausible inputs for a plan on the kernels, in its input order.
fn plan_inputs(plan: &Plan, limits: &HashMap<String, i64>) -> Result<Vec<Tensor>> {
    let kp = plan
        .kernels()
        .ok_or_else(|| err!(Unsupported, "--autotune: the plan is not on the kernels"))?;
    let mut rng = SplitMix::new(0x7A11_7E57);
    let mut out = Vec::with_capacity(kp.inputs.len());
    for (i, name) in kp.inputs.iter().enumerate() {
        let b = kp
            .buffers
            .iter()
            .find(|b| b.kind == BufferKind::Input(i))
            .ok_or_else(|| err!(Internal, "input '{name}' has no buffer"))?;
        let mut t = random_tensor(b.dtype, b.shape.clone(), &mut rng)?;
        make_plausible(name, &mut t, limits, &mut rng)?;
        out.push(t);
    }
    Ok(out)
}

/// A one-line progress bar on stderr, drawn only on a terminal.
struct Bar {
    on: bool,
    last: std::cell::Cell<usize>,
}

impl Bar {
    fn new() -> Bar {
        Bar {
            on: std::io::stderr().is_terminal(),
            last: std::cell::Cell::new(usize::MAX),
        }
    }

    fn show(&self, done: usize, total: usize) {
        let pct = 100 * done / total.max(1);
        if !self.on || pct == self.last.get() {
            return;
        }
        self.last.set(pct);
        let full = pct * 30 / 100;
        eprint!(
            "\rautotune [{}{}] {pct:3}% ({done}/{total} runs)",
            "#".repeat(full),
            "-".repeat(30 - full)
        );
        let _ = std::io::stderr().flush();
    }

    fn clear(&self) {
        if self.on && self.last.get() != usize::MAX {
            eprint!("\r{}\r", " ".repeat(72));
        }
    }
}
