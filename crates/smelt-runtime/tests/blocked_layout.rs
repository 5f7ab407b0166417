//! The blocked channel layout end to end: a residual block of convolutions (1x1, 3x3 with
//! stride 1 and 2, a residual add, activations, an output read plain and one reordered in)
//! compiled with `blocked_layout` runs its convolutions on the blocked kernels and matches
//! the plain oracle on every ISA this CPU runs; without the option nothing is blocked. At
//! 16x16 and 24x24 the stride-1 3x3 layer runs on the blocked Winograd F(2x2) and F(4x4)
//! kernels.
//!
//! Tolerance: |blocked - oracle| <= 2e-4 (1 + |oracle|) + 2e-5 max|oracle|: sums in
//! another order, and Winograd's rounding, which grows with the output's scale (measured:
//! F(4x4) 0.5e-5 to 0.9e-5 of it, F(2x2) 1.4e-6, direct 1e-6).

use smelt_ir::{Model, Tensor, Value};
use smelt_kernels::Isa;
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;

/// Deterministic values in [-0.5, 0.5).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let v = smelt_kernels::testing::rand_vec(n, seed);
    v.into_iter().map(|x| x * 0.5).collect()
}

fn tensor(name: &str, shape: &[usize], seed: u64) -> String {
    let n: usize = shape.iter().product();
    let data = values(n, seed)
        .iter()
        .map(|x| format!("{x:.4}"))
        .collect::<Vec<_>>()
        .join(",");
    format!("{{\"dtype\":\"F32\",\"shape\":{shape:?},\"data\":{{\"F32\":[{data}]}}}}  # {name}")
}

/// `x [1, 256, hw, hw]`: a = relu(conv1x1(x)), b = conv3x3(a), r = relu(b + a),
/// s = silu(conv3x3/2(r)); outputs r (read plain mid-region) and s. Enough work per
/// element reordered for the pass to keep the region.
fn text(hw: usize) -> String {
    let conv = |k: usize, s: usize, p: usize| {
        format!(
            "nn.Conv {{\"auto_pad\":\"NotSet\",\"dilations\":[1,1],\"group\":1,\"kernel_shape\":[{k},{k}],\"pads\":[{p},{p},{p},{p}],\"strides\":[{s},{s}]}}"
        )
    };
    let strip = |t: String| t.split("  #").next().unwrap().to_string();
    format!(
        "graph \"g\" {{\n  input %0 \"x\": f32[1,256,{hw},{hw}]\n  \
         const %1 \"w1\" = {w1}\n  const %2 \"b1\" = {b1}\n  \
         const %3 \"w2\" = {w2}\n  const %4 \"b2\" = {b2}\n  \
         const %5 \"w3\" = {w3}\n  \
         %6 \"c1\" = {c1} (%0, %1, %2)\n  %7 \"a\" = elementwise.Relu (%6)\n  \
         %8 \"c2\" = {c2} (%7, %3, %4)\n  %9 \"sum\" = elementwise.Add (%8, %7)\n  \
         %10 \"r\" = elementwise.Relu (%9)\n  \
         %11 \"c3\" = {c3} (%10, %5)\n  %12 \"sig\" = elementwise.Sigmoid (%11)\n  \
         %13 \"s\" = elementwise.Mul (%11, %12)\n  output %10\n  output %13\n}}\n",
        w1 = strip(tensor("w1", &[256, 256, 1, 1], 1)),
        b1 = strip(tensor("b1", &[256], 2)),
        w2 = strip(tensor("w2", &[256, 256, 3, 3], 3)),
        b2 = strip(tensor("b2", &[256], 4)),
        w3 = strip(tensor("w3", &[48, 256, 3, 3], 5)),
        c1 = conv(1, 1, 0),
        c2 = conv(3, 1, 1),
        c3 = conv(3, 2, 1),
    )
}

fn session(hw: usize, level: u8, isa: Option<Isa>, blocked: bool) -> Session {
    let t = text(hw);
    let graph = smelt_ir::text::parse_graph(&t).unwrap_or_else(|e| panic!("{e}\n{t}"));
    let model = Model {
        graph,
        opsets: vec![(String::new(), 19)],
        ..Default::default()
    };
    let o = SessionOptions {
        opt_level: level,
        isa,
        threads: 2,
        blocked_layout: Some(blocked),
        ..Default::default()
    };
    Session::from_model_with(model, &o).unwrap_or_else(|e| panic!("{e}"))
}

fn run(s: &Session, hw: usize) -> Vec<Vec<f64>> {
    let x = Tensor::from_f32(vec![1, 256, hw, hw], values(256 * hw * hw, 9)).expect("x");
    let out = s
        .run(HashMap::from([("x".to_string(), Value::Tensor(x))]))
        .expect("run");
    out.iter()
        .map(|(_, v)| v.tensor().expect("tensor").to_f64().expect("f64"))
        .collect()
}

fn blocked_kernels(s: &Session) -> usize {
    let plan = s.last_plan().expect("plan");
    plan.kernel_names()
        .iter()
        .filter(|n| n.contains("conv.blocked"))
        .count()
}

#[test]
fn blocked_block_matches_the_oracle_on_every_isa() {
    // Unset, so the option decides (a CI environment may set it).
    std::env::remove_var("SMELT_BLOCKED_LAYOUT");
    // The stride-1 3x3 layer's kernel at each size: direct, F(2x2), F(4x4).
    for (hw, stride1) in [
        (8, "conv.blocked."),
        (16, "winograd-f2x2"),
        (24, "winograd-f4x4"),
    ] {
        let want = run(&session(hw, 0, None, false), hw);
        for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
            if !isa.is_supported() {
                continue;
            }
            let s = session(hw, 1, Some(isa), true);
            let got = run(&s, hw);
            let plan = s.last_plan().expect("plan");
            let names = plan.kernel_names();
            assert_eq!(blocked_kernels(&s), 3, "{hw} {isa:?}: {names:?}");
            assert!(
                names.iter().any(|n| n.contains(stride1)),
                "{hw} {isa:?}: {names:?}"
            );
            for (o, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.len(), w.len());
                let scale = w.iter().fold(0f64, |m, v| m.max(v.abs()));
                for (i, (a, b)) in g.iter().zip(w).enumerate() {
                    assert!(
                        (a - b).abs() <= 2e-4 * (1.0 + b.abs()) + 2e-5 * scale,
                        "{hw} {isa:?} output {o} [{i}]: {a} vs {b}"
                    );
                }
            }
            assert_eq!(
                blocked_kernels(&session(hw, 1, Some(isa), false)),
                0,
                "{isa:?}"
            );
        }
    }
}
