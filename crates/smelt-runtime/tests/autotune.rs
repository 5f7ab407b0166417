//! Autotuning: every convolution algorithm a tuned plan may force matches the plain
//! oracle on every ISA this CPU runs (a forced algorithm that cannot apply leaves the
//! cost model's kernel), and `tune::autotune` keeps a plan that computes the same,
//! records its choices and takes them from the tuning cache the second time.
//! Tolerance: |tuned - oracle| <= 2e-4 (1 + |oracle|) (Winograd and reordered sums).

use smelt_cpu::fused::{Arena, CpuOptions, CpuPlan};
use smelt_ir::kernel::{ConvAlgorithm, GroupBody, KernelChoice, KernelPlan};
use smelt_ir::{Model, Tensor, Value};
use smelt_kernels::Isa;
use smelt_runtime::tune::{self, cache::TuningCache, Level, TuneOptions};
use smelt_runtime::{Plan, Session, SessionOptions};
use std::collections::HashMap;

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % 20000) as f32 / 10000.0 - 1.0
        })
        .collect()
}

/// One convolution (+ bias + relu) of `x: [1, c, h, w]` by `m` filters `k` x `k`.
struct ConvCase {
    c: usize,
    m: usize,
    hw: usize,
    k: usize,
    stride: usize,
    pad: usize,
    group: usize,
}

impl ConvCase {
    fn text(&self) -> String {
        let (c, m, k) = (self.c, self.m, self.k);
        let list = |v: Vec<f32>| {
            v.iter()
                .map(|x| format!("{x:.4}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let p = self.pad;
        format!(
            "graph \"g\" {{\n  input %0 \"x\": f32[1,{c},{h},{h}]\n  \
             const %1 \"w\" = {{\"dtype\":\"F32\",\"shape\":[{m},{cg},{k},{k}],\"data\":{{\"F32\":[{w}]}}}}\n  \
             const %2 \"b\" = {{\"dtype\":\"F32\",\"shape\":[{m}],\"data\":{{\"F32\":[{b}]}}}}\n  \
             %3 \"y\" = nn.Conv {{\"auto_pad\":\"NotSet\",\"dilations\":[1,1],\"group\":{g},\"kernel_shape\":[{k},{k}],\"pads\":[{p},{p},{p},{p}],\"strides\":[{s},{s}]}} (%0, %1, %2)\n  \
             %4 \"r\" = elementwise.Relu (%3)\n  output %4\n}}\n",
            h = self.hw,
            cg = c / self.group,
            g = self.group,
            s = self.stride,
            w = list(values(m * (c / self.group) * k * k, 7)),
            b = list(values(m, 11)),
        )
    }

    fn x(&self) -> Tensor {
        let n = self.c * self.hw * self.hw;
        Tensor::from_f32(vec![1, self.c, self.hw, self.hw], values(n, 3)).expect("x")
    }
}

fn session(text: &str, level: u8, isa: Option<Isa>) -> Session {
    let graph = smelt_ir::text::parse_graph(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let model = Model {
        graph,
        opsets: vec![(String::new(), 19)],
        ..Default::default()
    };
    let o = SessionOptions {
        opt_level: level,
        isa,
        threads: 2,
        ..Default::default()
    };
    Session::from_model_with(model, &o).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn run(s: &Session, x: &Tensor) -> Vec<f64> {
    let out = s
        .run(HashMap::from([("x".to_string(), Value::Tensor(x.clone()))]))
        .expect("run");
    out[0].1.tensor().expect("tensor").to_f64().expect("f64")
}

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 2e-4 * (1.0 + b.abs()),
            "{what} at {i}: {a} vs {b}"
        );
    }
}

/// The plan's kernel plan with its weights, every conv group's choice set to `choice`.
fn forced(plan: &Plan, choice: KernelChoice) -> KernelPlan {
    let mut kp = KernelPlan {
        weights: (0..).map_while(|i| plan.weight(i)).cloned().collect(),
        ..plan.kernels().expect("kernels").clone()
    };
    for g in &mut kp.groups {
        if matches!(g.body, GroupBody::Anchor(_)) {
            g.choice = choice;
        }
    }
    kp
}

#[test]
fn every_forced_conv_algorithm_matches_the_oracle_on_every_isa() {
    let cases = [
        // 3x3 stride 1: every algorithm applies.
        ConvCase {
            c: 8,
            m: 12,
            hw: 13,
            k: 3,
            stride: 1,
            pad: 1,
            group: 1,
        },
        // 3x3 stride 1 in two groups: Winograd's weights per group.
        ConvCase {
            c: 8,
            m: 6,
            hw: 9,
            k: 3,
            stride: 1,
            pad: 1,
            group: 2,
        },
        // Too few channels for the cost model's Winograd, forced anyway.
        ConvCase {
            c: 3,
            m: 5,
            hw: 9,
            k: 3,
            stride: 1,
            pad: 0,
            group: 1,
        },
        // Stride 2: no Winograd (the forced choice gives way).
        ConvCase {
            c: 6,
            m: 10,
            hw: 11,
            k: 3,
            stride: 2,
            pad: 1,
            group: 1,
        },
        // Pointwise: neither direct nor Winograd.
        ConvCase {
            c: 16,
            m: 7,
            hw: 6,
            k: 1,
            stride: 1,
            pad: 0,
            group: 1,
        },
        // 5x5 and two groups.
        ConvCase {
            c: 8,
            m: 6,
            hw: 10,
            k: 5,
            stride: 1,
            pad: 2,
            group: 2,
        },
    ];
    for (n, case) in cases.iter().enumerate() {
        let text = case.text();
        let x = case.x();
        let want = run(&session(&text, 0, None), &x);
        for isa in Isa::ALL {
            if !isa.is_supported() {
                eprintln!("note: case {n}: this CPU has no {isa}; not run");
                continue;
            }
            let s = session(&text, 1, Some(isa));
            let plan = s.last_plan().expect("plan");
            for algo in ConvAlgorithm::ALL {
                let choice = KernelChoice {
                    conv: Some(algo),
                    max_threads: None,
                };
                let cpu = CpuPlan::with_options(
                    forced(&plan, choice),
                    CpuOptions {
                        threads: 2,
                        isa: Some(isa),
                    },
                )
                .expect("plan with a forced algorithm");
                let name = cpu
                    .kernel_names()
                    .iter()
                    .find(|k| k.starts_with("conv."))
                    .cloned()
                    .unwrap_or_default();
                let applies = match algo {
                    ConvAlgorithm::Gemm => true,
                    ConvAlgorithm::Direct => case.k > 1,
                    ConvAlgorithm::Winograd | ConvAlgorithm::WinogradF2 => {
                        case.k == 3 && case.stride == 1
                    }
                };
                let expect = match algo {
                    ConvAlgorithm::Gemm => "gemm",
                    ConvAlgorithm::Direct => "conv.direct",
                    ConvAlgorithm::Winograd => "conv.winograd-f4x4",
                    ConvAlgorithm::WinogradF2 => "conv.winograd-f2x2",
                };
                assert_eq!(
                    name.contains(expect),
                    applies,
                    "case {n} ({isa}), {}: kernel {name}",
                    algo.name()
                );
                let mut arena = Arena::new(0);
                let got = cpu.run(&[&x], &mut arena, None).expect("run");
                close(
                    &got[0].to_f64().expect("f64"),
                    &want,
                    &format!("case {n} ({isa}), forced {}", algo.name()),
                );
            }
        }
    }
}

/// A 3x3 convolution that takes Winograd on every ISA: its input, the oracle's output and
/// the compiled plan.
fn winograd_case() -> (Tensor, Vec<f64>, std::sync::Arc<Plan>) {
    let case = ConvCase {
        c: 32,
        m: 64,
        hw: 20,
        k: 3,
        stride: 1,
        pad: 1,
        group: 1,
    };
    let text = case.text();
    let x = case.x();
    let want = run(&session(&text, 0, None), &x);
    let plan = session(&text, 1, None).last_plan().expect("plan");
    (x, want, plan)
}

#[test]
fn autotune_keeps_what_computes_the_same_and_caches_its_choices() {
    let (x, want, plan) = winograd_case();
    let dir = std::env::temp_dir().join(format!("smelt-tune-{}", std::process::id()));
    let path = dir.join("tuning.json");
    let _ = std::fs::remove_file(&path);
    let cache = TuningCache::open(&path);
    assert!(cache.warning().is_none());
    let tuned = |cache: &TuningCache| {
        let mut progress = |_: usize, _: usize| {};
        let mut o = TuneOptions {
            level: Level::Fast,
            cache: Some(cache),
            progress: &mut progress,
        };
        tune::autotune(&plan, &[&x], &mut o).expect("autotune")
    };
    let (first, record) = tuned(&cache);
    let record = record.expect("a record");
    assert!(!record.from_cache && record.candidates > 0, "{record:?}");
    assert_eq!(record.kept, first.is_some(), "{record:?}");
    if let Some(p) = &first {
        // What it chose is in the plan, and computes what the oracle does.
        let kp = p.kernels().expect("kernels");
        for g in &record.groups {
            assert_eq!(kp.groups[g.group].choice, g.choice);
            assert!(g.tuned_ns < g.default_ns, "{g:?}");
        }
        let outs = p.run_ref(&[("x", &x)]).expect("run");
        close(
            &outs[0].tensor().expect("tensor").to_f64().expect("f64"),
            &want,
            "tuned plan",
        );
    }
    // A second tuning, through the file, times nothing and decides the same.
    let again = TuningCache::open(&path);
    let (second, r2) = tuned(&again);
    let r2 = r2.expect("a record");
    assert!(r2.from_cache, "{r2:?}");
    assert_eq!(r2.groups, record.groups);
    assert_eq!(
        second.map(|p| p.kernel_names().to_vec()),
        first.map(|p| p.kernel_names().to_vec())
    );
    // Off tunes nothing.
    let mut progress = |_: usize, _: usize| {};
    let mut off = TuneOptions {
        level: Level::Off,
        cache: None,
        progress: &mut progress,
    };
    let (p, r) = tune::autotune(&plan, &[&x], &mut off).expect("off");
    assert!(p.is_none() && r.is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_lean_plan_trades_winograd_for_the_direct_kernel_and_computes_the_same() {
    let (x, want, plan) = winograd_case();
    assert!(
        plan.kernel_names()
            .iter()
            .any(|k| k.starts_with("conv.winograd")),
        "{:?}",
        plan.kernel_names()
    );
    let (lean, n) = tune::without_winograd(&plan).expect("lean");
    let lean = lean.expect("a lean plan");
    assert_eq!(n, 1);
    assert!(
        lean.kernel_names()
            .iter()
            .any(|k| k.starts_with("conv.direct")),
        "{:?}",
        lean.kernel_names()
    );
    let outs = lean.run_ref(&[("x", &x)]).expect("run");
    close(
        &outs[0].tensor().expect("tensor").to_f64().expect("f64"),
        &want,
        "lean plan",
    );
    // A plan without Winograd has nothing to trade.
    let (again, n) = tune::without_winograd(&lean).expect("lean");
    assert!(again.is_none() && n == 0);
}

#[test]
fn a_lean_plan_trades_winograd_f4x4_for_f2x2_and_computes_the_same() {
    let (x, want, plan) = winograd_case();
    let names = plan.kernel_names();
    assert!(
        names.iter().any(|k| k.starts_with("conv.winograd-f4x4")),
        "{names:?}"
    );
    let (lean, n) = tune::winograd_f2(&plan).expect("lean");
    let lean = lean.expect("a lean plan");
    assert_eq!(n, 1);
    let names = lean.kernel_names();
    assert!(
        names.iter().any(|k| k.starts_with("conv.winograd-f2x2")),
        "{names:?}"
    );
    let outs = lean.run_ref(&[("x", &x)]).expect("run");
    close(
        &outs[0].tensor().expect("tensor").to_f64().expect("f64"),
        &want,
        "F(2x2) plan",
    );
    // No F(4x4) left to trade; the direct kernel still takes the F(2x2) one.
    let (again, n) = tune::winograd_f2(&lean).expect("lean");
    assert!(again.is_none() && n == 0);
    let (direct, n) = tune::without_winograd(&lean).expect("lean");
    assert!(direct.is_some() && n == 1);
}
