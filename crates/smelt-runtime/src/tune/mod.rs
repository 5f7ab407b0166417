//! Autotuning (`smelt compile --autotune fast|max`): each kernel group's candidate kernels
//! (the convolution algorithms, one thread or all) timed on this machine, the winners
//! written into the plan as [`KernelChoice`]s and kept in a persistent [`cache`], so a
//! second compile of the same plan on the same CPU times nothing.
//!
//! Candidates are timed inside whole runs of the plan (one variant of the plan per
//! candidate, every variant run in turn, round after round, so a drift of the machine's
//! speed touches them all alike), per group, by median. A group keeps the fastest
//! candidate when it beats the cost model's kernel by more than a margin; the tuned plan
//! is then timed against the default one, interleaved, and kept only when its median is
//! faster, so tuning never makes a plan slower by more than noise.

pub mod cache;

use crate::plan::{Execution, Plan};
use serde::{Deserialize, Serialize};
use smelt_cpu::fused::{Arena, CpuOptions, CpuPlan, KernelTiming};
use smelt_ir::kernel::{ConvAlgorithm, GroupBody, KernelChoice, KernelPlan};
use smelt_ir::op::NnOp;
use smelt_ir::{Op, Result, Tensor};
use std::time::Instant;

/// How hard to tune.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// No timing: the cost model decides.
    Off,
    /// A few rounds per candidate (seconds).
    Fast,
    /// More rounds and a tighter margin (tens of seconds on a large model).
    Max,
}

impl Level {
    /// The level's name: off, fast or max.
    pub fn name(self) -> &'static str {
        match self {
            Level::Off => "off",
            Level::Fast => "fast",
            Level::Max => "max",
        }
    }

    /// Warm-up rounds, timed rounds and the fraction a candidate must win by.
    fn schedule(self) -> (usize, usize, f64) {
        match self {
            Level::Off => (0, 0, 0.0),
            Level::Fast => (1, 4, 0.05),
            Level::Max => (1, 10, 0.03),
        }
    }
}

/// A candidate must also win by this many nanoseconds (timer and scheduling noise).
const MIN_WIN_NS: u64 = 2_000;

/// The tuned plan is kept when its groups' wins add up to this fraction of a run and its
/// median run beats the default's by as much.
const KEEP_MARGIN: f64 = 0.01;

/// One group whose kernel tuning changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunedGroup {
    /// The group's index in the plan.
    pub group: usize,
    /// Its first source node.
    pub node: String,
    /// What was chosen.
    pub choice: KernelChoice,
    /// The kernel it runs now.
    pub kernel: String,
    /// The kernel the cost model picked.
    pub default_kernel: String,
    /// Median nanoseconds of the cost model's kernel.
    pub default_ns: u64,
    /// Median nanoseconds of the chosen one.
    pub tuned_ns: u64,
}

/// What tuning one plan did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneRecord {
    /// The level (`fast`, `max`).
    pub level: String,
    /// The plan's batch (dim 0 of its first input).
    pub batch: usize,
    /// Median nanoseconds of a run of the plan as the cost model chose.
    pub default_ns: u64,
    /// Median nanoseconds of a run of the tuned plan (timed against it, interleaved).
    pub tuned_ns: u64,
    /// Whether the tuned plan was kept (false: it was not 1% faster, so the default
    /// stays).
    pub kept: bool,
    /// The groups whose candidate won alone (the plan runs them only when kept).
    pub groups: Vec<TunedGroup>,
    /// Groups that had a candidate besides the cost model's kernel.
    pub candidates: usize,
    /// Whether the choices came from the tuning cache (nothing timed).
    pub from_cache: bool,
    /// Seconds tuning took.
    pub seconds: f64,
}

impl TuneRecord {
    /// One line for `smelt compile` and `smelt explain`.
    pub fn summary(&self) -> String {
        let ms = |ns: u64| ns as f64 / 1e6;
        let gain = 100.0 * (1.0 - self.tuned_ns as f64 / self.default_ns.max(1) as f64);
        let what = if self.candidates == 0 {
            "no group has a kernel besides the cost model's".to_string()
        } else if self.groups.is_empty() {
            "no candidate beat the cost model's kernel by the margin".to_string()
        } else if self.kept {
            format!(
                "{} group(s) changed, median run {:.2} -> {:.2} ms ({gain:.1}% faster)",
                self.groups.len(),
                ms(self.default_ns),
                ms(self.tuned_ns)
            )
        } else {
            format!(
                "{} group(s) won alone, but not by 1% of a run together ({:.2} ms tuned vs {:.2} ms): kept the cost model's kernels",
                self.groups.len(),
                ms(self.tuned_ns),
                ms(self.default_ns)
            )
        };
        format!(
            "autotune {} (batch {}): {what}; {} group(s) had candidates; {}",
            self.level,
            self.batch,
            self.candidates,
            if self.from_cache {
                "from the tuning cache".to_string()
            } else {
                format!("timed in {:.1} s", self.seconds)
            }
        )
    }

    /// One line per changed group (none when the tuned plan was not kept): its choice
    /// and what it won by.
    pub fn group_lines(&self) -> Vec<String> {
        self.groups
            .iter()
            .filter(|_| self.kept)
            .map(|g| {
                format!(
                    "group {} ({}): {} -> {} ({:.1} -> {:.1} us)",
                    g.group,
                    g.node,
                    g.default_kernel,
                    g.kernel,
                    g.default_ns as f64 / 1e3,
                    g.tuned_ns as f64 / 1e3
                )
            })
            .collect()
    }
}

/// How to tune.
pub struct TuneOptions<'a> {
    /// How hard.
    pub level: Level,
    /// The persistent cache (None: time everything, remember nothing).
    pub cache: Option<&'a cache::TuningCache>,
    /// Called with (runs done, runs in all) as timing goes.
    pub progress: &'a mut dyn FnMut(usize, usize),
}

/// The plan tuned on this machine with `inputs` (one per kernel-plan input, in its
/// order), and what tuning did. A plan not on the kernels comes back as it is.
pub fn autotune(
    plan: &Plan,
    inputs: &[&Tensor],
    opts: &mut TuneOptions,
) -> Result<(Option<Plan>, Option<TuneRecord>)> {
    let (Some(kp), Some((threads, isa))) = (plan.kernels(), plan.cpu_setup()) else {
        return Ok((None, None));
    };
    if opts.level == Level::Off || plan.segments().is_some() {
        return Ok((None, None));
    }
    let t = Instant::now();
    let cpu = CpuOptions {
        threads,
        isa: Some(isa),
    };
    let full = KernelPlan {
        weights: (0..).map_while(|i| plan.weight(i)).cloned().collect(),
        ..kp.clone()
    };
    let batch = kp
        .buffers
        .iter()
        .find(|b| matches!(b.kind, smelt_ir::kernel::BufferKind::Input(0)))
        .and_then(|b| b.shape.first().copied())
        .unwrap_or(0);
    let key = cache::plan_key(kp, isa, threads, opts.level);
    if let Some(hit) = opts.cache.and_then(|c| c.get(&key)) {
        let mut record = hit;
        record.from_cache = true;
        record.seconds = t.elapsed().as_secs_f64();
        if !record.kept {
            return Ok((None, Some(record)));
        }
        let tuned = with_choices(&full, &record.groups);
        let built = CpuPlan::with_options(tuned, cpu)?;
        return Ok((Some(wrap(plan, built, t)), Some(record)));
    }
    let (warm, rounds, margin) = opts.level.schedule();
    let default = CpuPlan::with_options(full.clone(), cpu)?;
    let mut variants = Vec::new();
    for choice in candidate_choices(threads) {
        let v = KernelPlan {
            groups: full
                .groups
                .iter()
                .map(|g| {
                    let mut g = g.clone();
                    if applies(&g.body, &choice) {
                        g.choice = choice;
                    }
                    g
                })
                .collect(),
            ..full.clone()
        };
        let built = CpuPlan::with_options(v, cpu)?;
        let differs =
            (0..full.groups.len()).any(|i| built.kernel_names()[i] != default.kernel_names()[i]);
        if differs {
            variants.push((choice, built));
        }
    }
    let candidates = (0..full.groups.len())
        .filter(|&i| {
            variants
                .iter()
                .any(|(_, v)| v.kernel_names()[i] != default.kernel_names()[i])
        })
        .count();
    if variants.is_empty() {
        let record = TuneRecord {
            level: opts.level.name().to_string(),
            batch,
            default_ns: 0,
            tuned_ns: 0,
            kept: false,
            groups: Vec::new(),
            candidates: 0,
            from_cache: false,
            seconds: t.elapsed().as_secs_f64(),
        };
        return Ok((None, Some(record)));
    }
    let mut arena = Arena::new(kp.memory.arena_bytes);
    // Every timed run follows an untimed one of the same plan, so its own packs are in
    // cache as when it runs alone (the variants' packs together outgrow the caches).
    let total = 2 * ((warm + rounds) * (variants.len() + 1) + 2 * (warm + rounds));
    let mut done = 0;
    let mut step = |done: &mut usize| {
        *done += 1;
        (opts.progress)(*done, total);
    };
    // Per plan (the default first), per round, per group: nanoseconds.
    let all: Vec<&CpuPlan> = std::iter::once(&default)
        .chain(variants.iter().map(|(_, v)| v))
        .collect();
    let mut times: Vec<Vec<Vec<u64>>> = vec![Vec::new(); all.len()];
    for round in 0..warm + rounds {
        for (p, cp) in all.iter().enumerate() {
            timed_run(cp, inputs, &mut arena)?;
            step(&mut done);
            let per_group = profiled_run(cp, inputs, &mut arena)?;
            if round >= warm {
                times[p].push(per_group);
            }
            step(&mut done);
        }
    }
    let medians: Vec<Vec<u64>> = times.iter().map(|t| per_group_median(t)).collect();
    let mut groups = Vec::new();
    for (i, (group, &base)) in full.groups.iter().zip(&medians[0]).enumerate() {
        let best = variants
            .iter()
            .zip(&medians[1..])
            .filter(|((_, v), _)| v.kernel_names()[i] != default.kernel_names()[i])
            .map(|((c, v), m)| (m[i], c, v))
            .min_by_key(|(ns, _, _)| *ns);
        let Some((ns, c, v)) = best else { continue };
        let win = base.saturating_sub(ns);
        if win as f64 > margin * base as f64 && win > MIN_WIN_NS {
            groups.push(TunedGroup {
                group: i,
                node: group
                    .nodes
                    .first()
                    .cloned()
                    .unwrap_or_else(|| group.ops.join("+")),
                choice: *c,
                kernel: v.kernel_names()[i].clone(),
                default_kernel: default.kernel_names()[i].clone(),
                default_ns: base,
                tuned_ns: ns,
            });
        }
    }
    drop(variants);
    let tuned = CpuPlan::with_options(with_choices(&full, &groups), cpu)?;
    // The whole tuned plan against the default, interleaved.
    let (mut d, mut u) = (Vec::new(), Vec::new());
    for round in 0..warm + rounds {
        timed_run(&default, inputs, &mut arena)?;
        let a = timed_run(&default, inputs, &mut arena)?;
        step(&mut done);
        step(&mut done);
        timed_run(&tuned, inputs, &mut arena)?;
        let b = timed_run(&tuned, inputs, &mut arena)?;
        step(&mut done);
        step(&mut done);
        if round >= warm {
            d.push(a);
            u.push(b);
        }
    }
    let (default_ns, tuned_ns) = (median(&mut d), median(&mut u));
    // Kept when the groups' wins add up to the margin (a whole run is noisier than the
    // medians of its groups) and the whole tuned run confirms it.
    let won: u64 = groups.iter().map(|g| g.default_ns - g.tuned_ns).sum();
    let floor = default_ns as f64 * KEEP_MARGIN;
    let kept = won as f64 >= floor && (tuned_ns as f64) < default_ns as f64 - floor;
    let record = TuneRecord {
        level: opts.level.name().to_string(),
        batch,
        default_ns,
        tuned_ns,
        kept,
        groups,
        candidates,
        from_cache: false,
        seconds: t.elapsed().as_secs_f64(),
    };
    if let Some(c) = opts.cache {
        c.put(&key, &record)?;
    }
    let plan = kept.then(|| wrap(plan, tuned, t));
    Ok((plan, Some(record)))
}

/// The plan with Winograd convolutions (whose transformed filters take 4x the memory)
/// on the direct kernel instead, and how many groups changed (0: the plan as it was).
pub fn without_winograd(plan: &Plan) -> Result<(Option<Plan>, usize)> {
    leaner_winograd(plan, ConvAlgorithm::Direct)
}

/// The plan with Winograd F(4x4) convolutions on F(2x2) instead (16 transformed weights
/// per filter, not 36), and how many groups changed (0: the plan as it was).
pub fn winograd_f2(plan: &Plan) -> Result<(Option<Plan>, usize)> {
    leaner_winograd(plan, ConvAlgorithm::WinogradF2)
}

/// The plan with its Winograd convolutions on `to`: the direct kernel (all of them), or
/// F(2x2) (the F(4x4) ones).
fn leaner_winograd(plan: &Plan, to: ConvAlgorithm) -> Result<(Option<Plan>, usize)> {
    let (Some(kp), Some((threads, isa))) = (plan.kernels(), plan.cpu_setup()) else {
        return Ok((None, 0));
    };
    let t = Instant::now();
    let mut lean = KernelPlan {
        weights: (0..).map_while(|i| plan.weight(i)).cloned().collect(),
        ..kp.clone()
    };
    let mut changed = 0;
    let from = match to {
        ConvAlgorithm::WinogradF2 => "conv.winograd-f4x4",
        _ => "conv.winograd",
    };
    for (g, name) in lean.groups.iter_mut().zip(plan.kernel_names()) {
        if name.starts_with(from) {
            g.choice.conv = Some(to);
            changed += 1;
        }
    }
    if changed == 0 {
        return Ok((None, 0));
    }
    let cpu = CpuOptions {
        threads,
        isa: Some(isa),
    };
    let built = CpuPlan::with_options(lean, cpu)?;
    Ok((Some(wrap(plan, built, t)), changed))
}

/// The choices tried on every group they apply to: each convolution algorithm, and one
/// thread where runs have more.
fn candidate_choices(threads: usize) -> Vec<KernelChoice> {
    let mut out: Vec<KernelChoice> = ConvAlgorithm::ALL
        .iter()
        .map(|&a| KernelChoice {
            conv: Some(a),
            max_threads: None,
        })
        .collect();
    if threads > 1 {
        out.push(KernelChoice {
            conv: None,
            max_threads: Some(1),
        });
    }
    out
}

/// Whether a choice means anything for a group.
fn applies(body: &GroupBody, c: &KernelChoice) -> bool {
    let conv = matches!(body, GroupBody::Anchor(a) if matches!(a.op, Op::Nn(NnOp::Conv { .. })));
    c.conv.is_none() || conv
}

/// The plan with the tuned groups' choices set.
fn with_choices(full: &KernelPlan, groups: &[TunedGroup]) -> KernelPlan {
    let mut p = full.clone();
    for g in groups {
        if let Some(x) = p.groups.get_mut(g.group) {
            x.choice = g.choice;
        }
    }
    p
}

/// A plan like `plan` running `cpu`.
fn wrap(plan: &Plan, cpu: CpuPlan, t: Instant) -> Plan {
    Plan::new(
        plan.graph().clone(),
        Execution::Kernels(Box::new(cpu)),
        plan.pass_reports().to_vec(),
        plan.compile_seconds() + t.elapsed().as_secs_f64(),
    )
}

/// One run's nanoseconds per group.
fn profiled_run(p: &CpuPlan, inputs: &[&Tensor], arena: &mut Arena) -> Result<Vec<u64>> {
    let mut prof: Vec<KernelTiming> = Vec::with_capacity(p.plan().groups.len());
    p.run(inputs, arena, Some(&mut prof))?;
    let mut ns = vec![0; p.plan().groups.len()];
    for t in prof {
        if let Some(slot) = ns.get_mut(t.group) {
            *slot += t.dur_ns;
        }
    }
    Ok(ns)
}

/// One run's nanoseconds.
fn timed_run(p: &CpuPlan, inputs: &[&Tensor], arena: &mut Arena) -> Result<u64> {
    let t = Instant::now();
    p.run(inputs, arena, None)?;
    Ok(t.elapsed().as_nanos() as u64)
}

/// The median of each group over rounds.
fn per_group_median(rounds: &[Vec<u64>]) -> Vec<u64> {
    let n = rounds.first().map_or(0, Vec::len);
    (0..n)
        .map(|g| median(&mut rounds.iter().map(|r| r[g]).collect::<Vec<_>>()))
        .collect()
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}
