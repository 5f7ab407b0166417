//! QDQ products end to end: a per-channel 3x3 convolution with an i32 bias, Relu and the
//! next QuantizeLinear (its u8 result an output); a stride-2 1x1 convolution; a MatMul and a Gemm (B transposed) of
//! per-channel int8 weights. Compiled, they run on the integer kernels (the plan's kernel
//! names say so) on every ISA this CPU runs, and match the oracle running the QDQ graph as
//! written (dequantize, float product): the integer sums are exact, so float outputs differ
//! by f32 rounding only (|plan - oracle| <= 1e-4 (1 + |oracle|)), and a re-quantized
//! output by at most one quantization step, in under 2% of its elements (a value on a
//! rounding boundary may land on either side).

use smelt_ir::{Model, Precision, PrecisionPolicy, Tensor, Value};
use smelt_kernels::Isa;
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;

/// Deterministic values in [-0.5, 0.5).
fn values(n: usize, seed: u64) -> Vec<f32> {
    smelt_kernels::testing::rand_vec(n, seed)
        .into_iter()
        .map(|x| x * 0.5)
        .collect()
}

fn json(dtype: &str, shape: &[usize], data: &[String]) -> String {
    format!(
        "{{\"dtype\":\"{dtype}\",\"shape\":{shape:?},\"data\":{{\"{dtype}\":[{}]}}}}",
        data.join(",")
    )
}

fn f32s(shape: &[usize], v: &[f32]) -> String {
    json(
        "F32",
        shape,
        &v.iter().map(|x| format!("{x:e}")).collect::<Vec<_>>(),
    )
}

/// Deterministic int8 weights.
fn i8s(shape: &[usize], seed: u64) -> String {
    let n: usize = shape.iter().product();
    let v: Vec<String> = values(n, seed)
        .iter()
        .map(|x| ((x * 254.0).round() as i32).clamp(-127, 127).to_string())
        .collect();
    json("I8", shape, &v)
}

fn scales(n: usize, seed: u64) -> Vec<f32> {
    values(n, seed)
        .iter()
        .map(|x| 0.002 + 0.004 * (x + 0.5))
        .collect()
}

/// QuantizeLinear (per tensor) in the text form.
const Q: &str = "quant.QuantizeLinear {\"axis\":1,\"block_size\":0,\"output_dtype\":null,\"precision\":null,\"saturate\":true}";

/// DequantizeLinear along `axis`.
fn dq(axis: i64) -> String {
    format!("quant.DequantizeLinear {{\"axis\":{axis},\"block_size\":0,\"output_dtype\":null}}")
}

/// A `k x k` 2-D convolution, padding `p`, stride `s`.
fn conv(k: usize, p: usize, s: usize) -> String {
    format!("nn.Conv {{\"auto_pad\":\"NotSet\",\"dilations\":[1,1],\"group\":1,\"kernel_shape\":[{k},{k}],\"pads\":[{p},{p},{p},{p}],\"strides\":[{s},{s}]}}")
}

/// A u8 scalar.
fn u8s(v: u8) -> String {
    json("U8", &[], &[v.to_string()])
}

/// A conv bias of 16 int32 values, and 16 int8 zeros.
fn bias16() -> (String, String) {
    let bias: Vec<String> = (0..16)
        .map(|i| ((i * 37) % 200 - 100).to_string())
        .collect();
    (
        json("I32", &[16], &bias),
        json("I8", &[16], &vec!["0".to_string(); 16]),
    )
}

/// The QDQ graph: inputs `x [1, 8, 9, 7]`, `a [6, 12]`; outputs the re-quantized 3x3
/// convolution (dequantized), the stride-2 1x1 convolution, the MatMul and the Gemm.
fn text() -> String {
    let q = Q;
    let (bq, zeros16) = bias16();
    let gbias: Vec<String> = (0..10)
        .map(|i| ((i * 53) % 300 - 150).to_string())
        .collect();
    format!(
        "graph \"g\" {{\n  input %0 \"x\": f32[1,8,9,7]\n  input %1 \"a\": f32[6,12]\n  \
         const %2 \"sx\" = {sx}\n  const %3 \"zx\" = {zx}\n  const %4 \"wq\" = {wq}\n  \
         const %5 \"sw\" = {sw}\n  const %6 \"zw\" = {zeros16}\n  const %7 \"bq\" = {bq}\n  \
         const %8 \"sb\" = {sb}\n  const %9 \"sy\" = {sy}\n  const %10 \"zy\" = {zy}\n  \
         const %11 \"w2q\" = {w2q}\n  const %12 \"s2\" = {s2}\n  \
         const %13 \"mq\" = {mq}\n  const %14 \"sm\" = {sm}\n  \
         const %15 \"gq\" = {gq}\n  const %16 \"sg\" = {sg}\n  const %17 \"gbq\" = {gbq}\n  \
         const %18 \"sgb\" = {sgb}\n  const %19 \"za\" = {za}\n\
         %20 \"xq\" = {q} (%0, %2, %3)\n  %21 \"xd\" = {dq0} (%20, %2, %3)\n  \
         %22 \"wd\" = {dq0} (%4, %5, %6)\n  %23 \"bd\" = {dq0} (%7, %8)\n  \
         %24 \"c\" = {c3} (%21, %22, %23)\n  %25 \"r\" = elementwise.Relu (%24)\n  \
         %26 \"rq\" = {q} (%25, %9, %10)\n  %27 \"rd\" = {dq0} (%26, %9, %10)\n  \
         %28 \"w2d\" = {dq0} (%11, %12)\n  %29 \"c2\" = {c1} (%21, %28)\n  \
         %30 \"aq\" = {q} (%1, %2, %19)\n  %31 \"ad\" = {dq0} (%30, %2, %19)\n  \
         %32 \"md\" = {dq1} (%13, %14)\n  %33 \"m\" = nn.MatMul (%31, %32)\n  \
         %34 \"gd\" = {dq0} (%15, %16)\n  %35 \"gbd\" = {dq0} (%17, %18)\n  \
         %36 \"g\" = nn.Gemm {{\"alpha\":1.0,\"beta\":1.0,\"trans_a\":false,\"trans_b\":true}} (%31, %34, %35)\n  \
         output %26\n  output %29\n  output %33\n  output %36\n}}\n",
        sx = f32s(&[], &[0.004]),
        zx = u8s(128),
        za = u8s(131),
        wq = i8s(&[16, 8, 3, 3], 1),
        sw = f32s(&[16], &scales(16, 2)),
        sb = f32s(&[16], &scales(16, 2).iter().map(|s| s * 0.004).collect::<Vec<_>>()),
        sy = f32s(&[], &[0.003]),
        zy = u8s(2),
        w2q = i8s(&[5, 8, 1, 1], 3),
        s2 = f32s(&[], &[0.01]),
        mq = i8s(&[12, 20], 4),
        sm = f32s(&[20], &scales(20, 5)),
        gq = i8s(&[10, 12], 6),
        sg = f32s(&[10], &scales(10, 7)),
        gbq = json("I32", &[10], &gbias),
        sgb = f32s(&[], &[0.0001]),
        dq0 = dq(0),
        dq1 = dq(1),
        c3 = conv(3, 1, 1),
        c1 = conv(1, 0, 2),
    )
}

/// A session of the graph `t` (text form) at an optimization level, ISA and precision.
fn session_of(t: &str, level: u8, isa: Option<Isa>, precision: Precision) -> Session {
    let graph = smelt_ir::text::parse_graph(t).unwrap_or_else(|e| panic!("{e}\n{t}"));
    let model = Model {
        graph,
        opsets: vec![(String::new(), 21)],
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

fn session(level: u8, isa: Option<Isa>) -> Session {
    session_of(&text(), level, isa, Precision::F32)
}

fn run(s: &Session) -> Vec<Vec<f64>> {
    let x = Tensor::from_f32(vec![1, 8, 9, 7], values(504, 9)).expect("x");
    let a = Tensor::from_f32(vec![6, 12], values(72, 10)).expect("a");
    let out = s
        .run(HashMap::from([
            ("x".to_string(), Value::Tensor(x)),
            ("a".to_string(), Value::Tensor(a)),
        ]))
        .expect("run");
    out.iter()
        .map(|(_, v)| v.tensor().expect("tensor").to_f64().expect("f64"))
        .collect()
}

#[test]
fn qdq_products_run_on_integer_kernels_and_match_the_oracle() {
    let want = run(&session(0, None));
    for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
        if !isa.is_supported() {
            continue;
        }
        let s = session(1, Some(isa));
        let got = run(&s);
        let names = s.last_plan().expect("plan").kernel_names().join("\n");
        assert_eq!(names.matches("qgemm").count(), 4, "{isa:?}:\n{names}");
        assert!(
            names.contains("epilogue fused rescale+relu+requantize"),
            "{isa:?}:\n{names}"
        );
        for (o, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.len(), w.len());
            if o == 0 {
                // Re-quantized (u8): at most one step off, rarely.
                let off = g.iter().zip(w).filter(|(a, b)| a != b).count();
                assert!(
                    g.iter().zip(w).all(|(a, b)| (a - b).abs() <= 1.0),
                    "{isa:?}"
                );
                assert!(
                    off * 50 <= g.len(),
                    "{isa:?}: {off} of {} off by a step",
                    g.len()
                );
                continue;
            }
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                    "{isa:?} output {o} [{i}]: {a} vs {b}"
                );
            }
        }
    }
}

/// onnxruntime's QDQ form, a fake quantization (QuantizeLinear, DequantizeLinear) after
/// every product: a 3x3 convolution fake-quantized and stored as f32; a 1x1 convolution
/// fake-quantized, plus the first as a residual, Relu, quantized (a u8 output) and that
/// dequantized (an f32 output); a MatMul fake-quantized. Inputs as in [`text`].
fn fake_quant_text() -> String {
    let q = Q;
    let (bq, zeros16) = bias16();
    format!(
        "graph \"g\" {{\n  input %0 \"x\": f32[1,8,9,7]\n  input %1 \"a\": f32[6,12]\n  \
         const %2 \"sx\" = {sx}\n  const %3 \"zx\" = {zx}\n  const %4 \"wq\" = {wq}\n  \
         const %5 \"sw\" = {sw}\n  const %6 \"zw\" = {zeros16}\n  const %7 \"bq\" = {bq}\n  \
         const %8 \"sb\" = {sb}\n  const %9 \"s1\" = {s1}\n  const %10 \"z1\" = {z1}\n  \
         const %11 \"w3q\" = {w3q}\n  const %12 \"s3\" = {s3}\n  const %13 \"s1b\" = {s1b}\n  \
         const %14 \"z1b\" = {z1b}\n  const %15 \"so\" = {so}\n  const %16 \"zo\" = {zo}\n  \
         const %17 \"mq\" = {mq}\n  const %18 \"sm\" = {sm}\n  const %19 \"za\" = {za}\n  \
         const %20 \"sf\" = {sf}\n  const %21 \"zf\" = {zf}\n\
         %22 \"xq\" = {q} (%0, %2, %3)\n  %23 \"xd\" = {dq0} (%22, %2, %3)\n  \
         %24 \"wd\" = {dq0} (%4, %5, %6)\n  %25 \"bd\" = {dq0} (%7, %8)\n  \
         %26 \"c\" = {c3} (%23, %24, %25)\n  %27 \"cq\" = {q} (%26, %9, %10)\n  \
         %28 \"cd\" = {dq0} (%27, %9, %10)\n  %29 \"w3d\" = {dq0} (%11, %12)\n  \
         %30 \"c3\" = {c1} (%23, %29)\n  %31 \"c3q\" = {q} (%30, %13, %14)\n  \
         %32 \"c3d\" = {dq0} (%31, %13, %14)\n  %33 \"sum\" = elementwise.Add (%32, %28)\n  \
         %34 \"r\" = elementwise.Relu (%33)\n  %35 \"rq\" = {q} (%34, %15, %16)\n  \
         %36 \"rd\" = {dq0} (%35, %15, %16)\n  %37 \"aq\" = {q} (%1, %2, %19)\n  \
         %38 \"ad\" = {dq0} (%37, %2, %19)\n  %39 \"md\" = {dq1} (%17, %18)\n  \
         %40 \"m\" = nn.MatMul (%38, %39)\n  %41 \"mq2\" = {q} (%40, %20, %21)\n  \
         %42 \"md2\" = {dq0} (%41, %20, %21)\n  \
         output %35\n  output %36\n  output %42\n}}\n",
        sx = f32s(&[], &[0.004]),
        zx = u8s(128),
        za = u8s(131),
        wq = i8s(&[16, 8, 3, 3], 1),
        sw = f32s(&[16], &scales(16, 2)),
        sb = f32s(
            &[16],
            &scales(16, 2).iter().map(|s| s * 0.004).collect::<Vec<_>>()
        ),
        s1 = f32s(&[], &[0.02]),
        z1 = u8s(128),
        w3q = i8s(&[16, 8, 1, 1], 3),
        s3 = f32s(&[16], &scales(16, 11)),
        s1b = f32s(&[], &[0.01]),
        z1b = u8s(128),
        so = f32s(&[], &[0.025]),
        zo = u8s(0),
        mq = i8s(&[12, 20], 4),
        sm = f32s(&[20], &scales(20, 5)),
        sf = f32s(&[], &[0.01]),
        zf = u8s(128),
        dq0 = dq(0),
        dq1 = dq(1),
        c3 = conv(3, 1, 1),
        c1 = conv(1, 0, 1),
    )
}

#[test]
fn fake_quantized_products_fuse_into_the_integer_epilogue_and_match_the_oracle() {
    let t = fake_quant_text();
    let session = |level: u8, isa: Option<Isa>| session_of(&t, level, isa, Precision::F32);
    let want = run(&session(0, None));
    // Each output's quantization step.
    let steps = [1.0, 0.025, 0.01];
    for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
        if !isa.is_supported() {
            continue;
        }
        let s = session(1, Some(isa));
        let got = run(&s);
        let names = s.last_plan().expect("plan").kernel_names().join("\n");
        assert_eq!(names.matches("qgemm").count(), 3, "{isa:?}:\n{names}");
        // The first convolution's fake quantization is read by the Add only: it stores
        // the bytes, and the second dequantizes them as its residual.
        for epilogue in [
            "epilogue fused rescale+requantize\n",
            "epilogue fused rescale+fakequant+residual(8-bit)+relu+requantize+fakequant store",
            "epilogue fused rescale+fakequant store",
        ] {
            assert!(names.contains(epilogue), "{isa:?}: {epilogue}\n{names}");
        }
        for (o, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.len(), w.len());
            // Integer sums against float ones: a value on a rounding boundary may land on
            // either side, and a step upstream moves the residual sum by under one step
            // here; so at most two steps apart, and rarely apart at all.
            let steps_off: Vec<f64> = g
                .iter()
                .zip(w)
                .map(|(a, b)| ((a - b) / steps[o]).abs())
                .collect();
            let off = steps_off.iter().filter(|&&d| d > 1e-3).count();
            assert!(
                steps_off.iter().all(|&d| d <= 2.0 + 1e-3),
                "{isa:?} output {o}"
            );
            assert!(
                off * 50 <= g.len(),
                "{isa:?} output {o}: {off} of {} off",
                g.len()
            );
        }
    }
}

/// onnxruntime's dynamic quantization: DynamicQuantizeLinear of the activations, then
/// MatMulInteger with the run-time zero point, Cast, a Mul by the run-time scale times the
/// weights' per-column scales (computed first, as onnxruntime's and smelt's writers order
/// it, so it fuses into the product's epilogue), and the bias. Input `a [2, 5, 12]`.
fn dynamic_text() -> String {
    let cast = "elementwise.Cast {\"round_mode\":\"Up\",\"saturate\":true,\"to\":\"F32\"}";
    let zeros = json("I8", &[20], &vec!["0".to_string(); 20]);
    let bias: Vec<f32> = values(20, 12);
    format!(
        "graph \"g\" {{\n  input %0 \"a\": f32[2,5,12]\n  const %1 \"wq\" = {wq}\n  \
         const %2 \"wz\" = {zeros}\n  const %3 \"ws\" = {ws}\n  const %4 \"b\" = {b}\n  \
         %5 \"q\", %6 \"s\", %7 \"z\" = quant.DynamicQuantizeLinear (%0)\n  \
         %8 \"sc\" = elementwise.Mul (%6, %3)\n  %9 \"p\" = quant.MatMulInteger (%5, %1, %7, %2)\n  \
         %10 \"pf\" = {cast} (%9)\n  %11 \"m\" = elementwise.Mul (%10, %8)\n  \
         %12 \"y\" = elementwise.Add (%11, %4)\n  \
         output %12\n  output %5\n  output %6\n  output %7\n}}\n",
        wq = i8s(&[12, 20], 13),
        ws = f32s(&[20], &scales(20, 14)),
        b = f32s(&[20], &bias),
    )
}

#[test]
fn dynamic_quantization_runs_on_integer_kernels_and_matches_the_oracle() {
    let t = dynamic_text();
    let session = |level: u8, isa: Option<Isa>| session_of(&t, level, isa, Precision::F32);
    let run = |s: &Session, a: &[f32]| -> Vec<Vec<f64>> {
        let a = Tensor::from_f32(vec![2, 5, 12], a.to_vec()).expect("a");
        let out = s
            .run(HashMap::from([("a".to_string(), Value::Tensor(a))]))
            .expect("run");
        out.iter()
            .map(|(_, v)| v.tensor().expect("tensor").to_f64().expect("f64"))
            .collect()
    };
    // Mixed signs, all positive (zero point 0), all zero (scale 1).
    let inputs = [
        values(120, 15),
        values(120, 16).iter().map(|v| v + 0.6).collect(),
        vec![0.0; 120],
    ];
    let oracle = session(0, None);
    for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
        if !isa.is_supported() {
            continue;
        }
        let s = session(1, Some(isa));
        for a in &inputs {
            let (got, want) = (run(&s, a), run(&oracle, a));
            let names = s.last_plan().expect("plan").kernel_names().join("\n");
            assert!(names.contains("dynamic-quantize"), "{isa:?}:\n{names}");
            assert!(
                names.contains("matmul.qgemm") && names.contains("epilogue fused rescale"),
                "{isa:?}:\n{names}"
            );
            // The bytes, scale and zero point exactly; the product's integer sums are exact.
            assert_eq!(got[1..], want[1..], "{isa:?}");
            for (i, (g, w)) in got[0].iter().zip(&want[0]).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{isa:?} [{i}]: {g} vs {w}"
                );
            }
        }
    }
}

/// `--precision int8` on a float model: input `a [6, 12]`, a MatMul by `w1 [12, 32]` plus
/// a bias, Relu, a Gemm by `w2 [16, 32]` (B transposed) with a bias (weights of 256
/// elements or more: smaller ones stay f32).
fn float_text() -> String {
    format!(
        "graph \"g\" {{\n  input %0 \"a\": f32[6,12]\n  const %1 \"w1\" = {w1}\n  \
         const %2 \"b1\" = {b1}\n  const %3 \"w2\" = {w2}\n  const %4 \"b2\" = {b2}\n  \
         %5 \"m\" = nn.MatMul (%0, %1) # \"fc1\"\n  %6 \"mb\" = elementwise.Add (%5, %2)\n  \
         %7 \"r\" = elementwise.Relu (%6)\n  \
         %8 \"y\" = nn.Gemm {{\"alpha\":1.0,\"beta\":1.0,\"trans_a\":false,\"trans_b\":true}} (%7, %3, %4) # \"fc2\"\n  \
         output %8\n}}\n",
        w1 = f32s(&[12, 32], &values(384, 21)),
        b1 = f32s(&[32], &values(32, 22)),
        w2 = f32s(&[16, 32], &values(512, 23)),
        b2 = f32s(&[16], &values(16, 24)),
    )
}

#[test]
fn precision_int8_runs_float_products_dynamically_quantized() {
    let t = float_text();
    let session = |precision: Precision, isa: Option<Isa>| session_of(&t, 1, isa, precision);
    let a = Tensor::from_f32(vec![6, 12], values(72, 25)).expect("a");
    let run = |s: &Session| -> Vec<f64> {
        let out = s
            .run(HashMap::from([("a".to_string(), Value::Tensor(a.clone()))]))
            .expect("run");
        out[0].1.tensor().expect("tensor").to_f64().expect("f64")
    };
    let want = run(&session(Precision::F32, None));
    for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
        if !isa.is_supported() {
            continue;
        }
        let s = session(Precision::Int8, Some(isa));
        let got = run(&s);
        let names = s.last_plan().expect("plan").kernel_names().join("\n");
        assert_eq!(
            names.matches("matmul.qgemm").count(),
            2,
            "{isa:?}:\n{names}"
        );
        assert_eq!(
            names.matches("dynamic-quantize").count(),
            2,
            "{isa:?}:\n{names}"
        );
        // u8 activations of each run's range and int8 weights: within a few steps of
        // |x| |w| (about 0.5 / 127 and 1 / 255) summed over 12 and 32 terms.
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 0.02, "{isa:?} [{i}]: {g} vs {w}");
        }
        assert_ne!(got, want, "{isa:?}: int8 changed nothing");
    }
}

/// onnxruntime's QOperator form: `QLinearConv` (3x3, per-channel int8 weights, an i32
/// bias) of `x [1, 8, 9, 7]` quantized, and `QLinearMatMul` of `a [6, 12]` quantized; both
/// u8 outputs. Inputs as in [`text`].
fn qlinear_text() -> String {
    let (bq, zeros16) = bias16();
    let qconv = "quant.QLinearConv {\"conv\":{\"auto_pad\":\"NotSet\",\"dilations\":null,\"group\":1,\"kernel_shape\":[3,3],\"pads\":[1,1,1,1],\"strides\":[1,1]}}";
    format!(
        "graph \"g\" {{\n  input %0 \"x\": f32[1,8,9,7]\n  input %1 \"a\": f32[6,12]\n  \
         const %2 \"sx\" = {sx}\n  const %3 \"zx\" = {zx}\n  const %4 \"wq\" = {wq}\n  \
         const %5 \"sw\" = {sw}\n  const %6 \"zw\" = {zeros16}\n  const %7 \"bq\" = {bq}\n  \
         const %8 \"sy\" = {sy}\n  const %9 \"zy\" = {zy}\n  const %10 \"mq\" = {mq}\n  \
         const %11 \"sm\" = {sm}\n  const %12 \"za\" = {za}\n  const %13 \"sf\" = {sf}\n  \
         const %14 \"zf\" = {zf}\n\
         %15 \"xq\" = {q} (%0, %2, %3)\n  \
         %16 \"y\" = {qconv} (%15, %2, %3, %4, %5, %6, %8, %9, %7)\n  \
         %17 \"aq\" = {q} (%1, %2, %12)\n  \
         %18 \"m\" = quant.QLinearMatMul (%17, %2, %12, %10, %11, _, %13, %14)\n  \
         output %16\n  output %18\n}}\n",
        q = Q,
        sx = f32s(&[], &[0.004]),
        zx = u8s(128),
        za = u8s(131),
        wq = i8s(&[16, 8, 3, 3], 1),
        sw = f32s(&[16], &scales(16, 2)),
        sy = f32s(&[], &[0.02]),
        zy = u8s(100),
        mq = i8s(&[12, 20], 4),
        sm = f32s(&[20], &scales(20, 5)),
        sf = f32s(&[], &[0.01]),
        zf = u8s(128),
    )
}

#[test]
fn qlinear_products_run_on_integer_kernels_and_match_the_oracle() {
    let t = qlinear_text();
    let want = run(&session_of(&t, 0, None, Precision::F32));
    for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
        if !isa.is_supported() {
            continue;
        }
        let s = session_of(&t, 1, Some(isa), Precision::F32);
        let got = run(&s);
        let names = s.last_plan().expect("plan").kernel_names().join("\n");
        assert_eq!(names.matches("qgemm").count(), 2, "{isa:?}:\n{names}");
        assert!(
            names.contains("epilogue fused rescale+requantize"),
            "{isa:?}:\n{names}"
        );
        // u8 outputs: at most one step off, rarely (a value on a rounding boundary).
        for (o, (g, w)) in got.iter().zip(&want).enumerate() {
            let off = g.iter().zip(w).filter(|(a, b)| a != b).count();
            assert!(
                g.iter().zip(w).all(|(a, b)| (a - b).abs() <= 1.0),
                "{isa:?} {o}"
            );
            assert!(off * 50 <= g.len(), "{isa:?} {o}: {off} of {} off", g.len());
        }
    }
}
