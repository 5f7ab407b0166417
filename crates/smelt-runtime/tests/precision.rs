//! Half-precision weights end to end: an embedding lookup, a MatMul, a Gemm with B
//! transposed, a pointwise and a 3x3 convolution, compiled with `precision` bf16 and fp16,
//! store those weights narrow (the plan's weights and kernel names say so) and match the
//! f32 oracle of the same model with its weights rounded to that precision, on every ISA
//! this CPU runs: widening is exact and products still accumulate in f32, so the only
//! difference is summation order. Tolerance: |plan - oracle| <= 2e-4 (1 + |oracle|);
//! 2e-2 for the products' output where bf16 products run on AMX tiles, which round their
//! activations to bf16 too (the kernel's own test checks it exactly against rounded
//! operands).

use smelt_ir::{DType, Model, Precision, PrecisionPolicy, Tensor, Value};
use smelt_kernels::Isa;
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;

/// Deterministic values in [-0.5, 0.5).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let v = smelt_kernels::testing::rand_vec(n, seed);
    v.into_iter().map(|x| x * 0.5).collect()
}

/// `x` rounded to `p` and back.
fn rounded(x: f32, p: Precision) -> f32 {
    match p {
        Precision::F32 => x,
        Precision::Bf16 => half::bf16::from_f32(x).to_f32(),
        Precision::F16 => half::f16::from_f32(x).to_f32(),
        // (Not a storage rounding: int8 rewrites the products, tests/quantized.rs.)
        Precision::Int8 => x,
    }
}

fn tensor(shape: &[usize], seed: u64, p: Precision) -> String {
    let n: usize = shape.iter().product();
    let data = values(n, seed)
        .iter()
        .map(|&x| format!("{:e}", rounded(x, p)))
        .collect::<Vec<_>>()
        .join(",");
    format!("{{\"dtype\":\"F32\",\"shape\":{shape:?},\"data\":{{\"F32\":[{data}]}}}}")
}

/// Inputs `ids [2, 5]` (i64) and `x [1, 32, 6, 6]`: y = Gemm(Reshape(MatMul(Gather(table,
/// ids), w1)), w2, transB) + b2 and z = Conv3x3(Relu(Conv1x1(x, wc1)), wc2) (64 output
/// channels: on AMX where the CPU has it), weights rounded to `weights`.
fn text(weights: Precision) -> String {
    let conv = |k: usize, p: usize| {
        format!(
            "nn.Conv {{\"auto_pad\":\"NotSet\",\"dilations\":[1,1],\"group\":1,\"kernel_shape\":[{k},{k}],\"pads\":[{p},{p},{p},{p}],\"strides\":[1,1]}}"
        )
    };
    let w = |shape: &[usize], seed| tensor(shape, seed, weights);
    format!(
        "graph \"g\" {{\n  input %0 \"ids\": i64[2,5]\n  input %1 \"x\": f32[1,32,6,6]\n  \
         const %2 \"table\" = {table}\n  const %3 \"w1\" = {w1}\n  \
         const %4 \"w2\" = {w2}\n  const %5 \"b2\" = {b2}\n  \
         const %6 \"wc1\" = {wc1}\n  const %7 \"wc2\" = {wc2}\n  \
         const %8 \"shape\" = {{\"dtype\":\"I64\",\"shape\":[2],\"data\":{{\"I64\":[10,96]}}}}\n  \
         %9 \"e\" = layout.Gather {{\"axis\":0}} (%2, %0)\n  \
         %10 \"m\" = nn.MatMul (%9, %3) # \"mm\"\n  \
         %11 \"r\" = layout.Reshape {{\"allowzero\":false,\"shape\":null}} (%10, %8)\n  \
         %12 \"y\" = nn.Gemm {{\"alpha\":1.0,\"beta\":1.0,\"trans_a\":false,\"trans_b\":true}} (%11, %4, %5)\n  \
         %13 \"c1\" = {c1} (%1, %6)\n  %14 \"a\" = elementwise.Relu (%13)\n  \
         %15 \"z\" = {c2} (%14, %7)\n  output %12\n  output %15\n}}\n",
        table = w(&[512, 64], 1),
        w1 = w(&[64, 96], 2),
        w2 = w(&[48, 96], 3),
        b2 = tensor(&[48], 4, Precision::F32),
        wc1 = w(&[32, 32, 1, 1], 5),
        wc2 = w(&[64, 32, 3, 3], 6),
        c1 = conv(1, 0),
        c2 = conv(3, 1),
    )
}

fn session(weights: Precision, level: u8, isa: Option<Isa>, precision: Precision) -> Session {
    let t = text(weights);
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
        precision: PrecisionPolicy::uniform(precision),
        ..Default::default()
    };
    Session::from_model_with(model, &o).unwrap_or_else(|e| panic!("{e}"))
}

fn run(s: &Session) -> Vec<Vec<f64>> {
    let ids: Vec<i64> = (0..10).map(|i| (i * 97 + 3) % 512).collect();
    let ids = Tensor::from_i64_vec(vec![2, 5], ids).expect("ids");
    let x = Tensor::from_f32(vec![1, 32, 6, 6], values(1152, 9)).expect("x");
    let out = s
        .run(HashMap::from([
            ("ids".to_string(), Value::Tensor(ids)),
            ("x".to_string(), Value::Tensor(x)),
        ]))
        .expect("run");
    out.iter()
        .map(|(_, v)| v.tensor().expect("tensor").to_f64().expect("f64"))
        .collect()
}

#[test]
fn half_weights_match_the_oracle_of_rounded_weights_on_every_isa() {
    for p in [Precision::Bf16, Precision::F16] {
        let want = run(&session(p, 0, None, Precision::F32));
        for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
            if !isa.is_supported() {
                continue;
            }
            let s = session(Precision::F32, 1, Some(isa), p);
            let got = run(&s);
            let plan = s.last_plan().expect("plan");
            let names = plan.kernel_names().join("\n");
            let tag = format!("({} weights", p.dtype());
            // The MatMul, the Gemm and the pointwise convolution read narrow weights; the
            // 3x3 one too, or widens them at plan time (direct kernels).
            let narrow = names.matches(&tag).count();
            let widened = names.matches("weights widened").count();
            assert!(narrow == 4 && widened <= 1, "{isa:?} {p}:\n{names}");
            // Every weight but the bias and the shape is narrow.
            let narrow = (0..)
                .map_while(|i| plan.weight(i))
                .filter(|w| w.dtype() == p.dtype())
                .count();
            assert_eq!(narrow, 5, "{isa:?} {p}");
            // On AMX the bf16 products also round their activations to bf16 (8 significant
            // bits): the MatMul, the Gemm and the 64-channel 3x3 convolution then differ
            // from the oracle by up to about 2^-8 of their terms' magnitudes.
            let amx = names.contains("amx");
            // The MatMul, the Gemm and the 64-channel 3x3 convolution (not the 32-channel
            // pointwise one).
            assert!(!amx || names.matches("amx-bf16").count() == 3, "{names}");
            assert_eq!(
                amx,
                isa == Isa::Avx512 && p == Precision::Bf16 && smelt_kernels::amx::available()
            );
            for (o, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.len(), w.len());
                let tol = if amx { 2e-2 } else { 2e-4 };
                for (i, (a, b)) in g.iter().zip(w).enumerate() {
                    assert!(
                        (a - b).abs() <= tol * (1.0 + b.abs()),
                        "{isa:?} {p} output {o} [{i}]: {a} vs {b}"
                    );
                }
            }
        }
    }
}

#[test]
fn f32_plans_and_f32_overrides_keep_every_weight_f32() {
    let s = session(Precision::F32, 1, None, Precision::F32);
    let plan = s.last_plan().expect("plan");
    assert!((0..)
        .map_while(|i| plan.weight(i))
        .all(|w| w.dtype() != DType::BF16));
    // Per-node overrides: only the MatMul narrowed.
    let t = text(Precision::F32);
    let graph = smelt_ir::text::parse_graph(&t).unwrap();
    let model = Model {
        graph,
        opsets: vec![(String::new(), 19)],
        ..Default::default()
    };
    let o = SessionOptions {
        precision: PrecisionPolicy {
            precision: Precision::F32,
            ops: None,
            nodes: vec![("mm".into(), Precision::Bf16)],
        },
        ..Default::default()
    };
    let s = Session::from_model_with(model, &o).unwrap();
    run(&s);
    let plan = s.last_plan().expect("plan");
    let narrow = (0..)
        .map_while(|i| plan.weight(i))
        .filter(|w| w.dtype() == DType::BF16)
        .count();
    assert_eq!(narrow, 1);
}

#[cfg(feature = "compiler")]
#[test]
fn comparison_finds_an_injected_nan_at_its_node() {
    let t = text(Precision::F32);
    let model = Model {
        graph: smelt_ir::text::parse_graph(&t).unwrap(),
        opsets: vec![(String::new(), 19)],
        ..Default::default()
    };
    let ids = Tensor::from_i64_vec(vec![2, 5], (0..10).map(|i| i * 31 % 512).collect()).unwrap();
    let x = Tensor::from_f32(vec![1, 32, 6, 6], values(1152, 9)).unwrap();
    let inputs = HashMap::from([
        ("ids".to_string(), Value::Tensor(ids)),
        ("x".to_string(), Value::Tensor(x)),
    ]);
    let base = SessionOptions::default();
    let lower = SessionOptions {
        precision: PrecisionPolicy::uniform(Precision::Bf16),
        ..Default::default()
    };
    let c = smelt_runtime::compare::compare(&model, &inputs, &base, &lower, 0.999, None).unwrap();
    // Every node's value, bf16 weights close to f32, nothing non-finite.
    assert!(c.values.len() >= 7, "{:?}", c.values);
    assert!(c.first_nonfinite.is_none() && c.first_divergent.is_none());
    assert!(c
        .values
        .iter()
        .all(|v| v.cosine > 0.999 && v.cosine <= 1.0 + 1e-12));
    assert!(c.values.iter().any(|v| v.max_abs > 0.0));
    // A NaN at the MatMul: the first non-finite value is its output, and what follows it
    // on that branch is non-finite too; the convolution branch is not.
    let c =
        smelt_runtime::compare::compare(&model, &inputs, &base, &lower, 0.999, Some("mm")).unwrap();
    let first = &c.values[c.first_nonfinite.expect("a NaN found")];
    assert_eq!((first.node.as_str(), first.value.as_str()), ("mm", "m"));
    let y = c.values.iter().find(|v| v.value == "y").unwrap();
    assert!(y.nonfinite > 0);
    let z = c.values.iter().find(|v| v.value == "z").unwrap();
    assert_eq!(z.nonfinite, 0);
}
