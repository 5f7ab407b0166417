//! Every fast kernel path of the CPU executor against the plain oracle (the reference
//! executor at optimization level 0), on odd sizes, for every instruction set this CPU
//! runs (a note says which could not run). Each case also checks that the fast path it is
//! about was the one taken, by the kernel name the plan reports.
//! Tolerance: |fast - oracle| <= 2e-4 (1 + |oracle|) (Winograd and reordered sums).

use smelt_ir::{Model, Tensor, Value};
use smelt_kernels::Isa;
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;
use std::fmt::Write as _;

struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % 20000) as f32 / 10000.0 - 1.0
    }
}

fn dims(s: &[usize]) -> String {
    s.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// A graph with input `x` of `shape`, constants, and body lines using `%x` and `%cK`.
struct Case {
    name: &'static str,
    shape: Vec<usize>,
    consts: Vec<Vec<usize>>,
    /// Constants with given values instead of random ones: (index, comma-separated values).
    fixed: &'static [(usize, &'static str)],
    body: &'static str,
    /// A substring of the kernel name the plan must report for some group.
    kernel: &'static str,
}

fn text(c: &Case, rng: &mut Rng) -> String {
    let mut t = format!(
        "graph \"g\" {{\n  input %0 \"x\": f32[{}]\n",
        dims(&c.shape)
    );
    for (k, s) in c.consts.iter().enumerate() {
        let n: usize = s.iter().product();
        let mut data: Vec<String> = (0..n).map(|_| format!("{:.4}", rng.unit())).collect();
        if let Some((_, v)) = c.fixed.iter().find(|f| f.0 == k) {
            data = vec![v.to_string()];
        }
        let _ = writeln!(
            t,
            "  const %{} \"c{k}\" = {{\"dtype\":\"F32\",\"shape\":[{}],\"data\":{{\"F32\":[{}]}}}}",
            k + 1,
            dims(s),
            data.join(",")
        );
    }
    let mut body = c.body.replace("%x", "%0");
    for k in (0..c.consts.len()).rev() {
        body = body.replace(&format!("%c{k}"), &format!("%{}", k + 1));
    }
    t.push_str(&body);
    t.push_str("}\n");
    t
}

fn session(text: &str, level: u8, isa: Option<Isa>) -> Session {
    let graph = smelt_ir::text::parse_graph(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let model = Model {
        graph,
        opsets: vec![(String::new(), 19)],
        ..Default::default()
    };
    Session::from_model_with(
        model,
        &SessionOptions {
            opt_level: level,
            isa,
            threads: 2,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn outputs(s: &Session, x: &Tensor) -> Vec<Vec<f64>> {
    s.run(HashMap::from([("x".to_string(), Value::Tensor(x.clone()))]))
        .expect("run")
        .into_iter()
        .map(|(_, v)| v.tensor().expect("tensor").to_f64().expect("f64"))
        .collect()
}

fn check(c: &Case) {
    let mut rng = Rng(c.name.len() as u64 * 7919);
    let t = text(c, &mut rng);
    let n: usize = c.shape.iter().product();
    let x = Tensor::from_f32(c.shape.clone(), (0..n).map(|_| rng.unit()).collect()).expect("x");
    let want = outputs(&session(&t, 0, None), &x);
    for isa in Isa::ALL {
        if !isa.is_supported() {
            eprintln!("note: {}: this CPU has no {isa}; not run", c.name);
            continue;
        }
        let s = session(&t, 1, Some(isa));
        let plan = s.last_plan().expect("plan");
        let names = plan.kernel_names();
        // A kernel whose name carries no ISA (a copy) is the same code on every ISA.
        let isa_free = |k: &str| !Isa::ALL.iter().any(|i| k.contains(i.name()));
        assert!(
            names
                .iter()
                .any(|k| k.contains(c.kernel) && (k.contains(isa.name()) || isa_free(k))),
            "{} ({isa}): expected a {} kernel, got {names:?}",
            c.name,
            c.kernel
        );
        let got = outputs(&s, &x);
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.len(), w.len(), "{}", c.name);
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                assert!(
                    (a - b).abs() <= 2e-4 * (1.0 + b.abs()),
                    "{} ({isa}) at {i}: {a} vs {b}\n{t}",
                    c.name
                );
            }
        }
    }
}

const CONV: &str = "nn.Conv";

fn conv(pads: &str, strides: &str, dil: &str, group: usize, k: usize) -> String {
    format!(
        "{CONV} {{\"auto_pad\":\"NotSet\",\"dilations\":[{dil}],\"group\":{group},\"kernel_shape\":[{k},{k}],\"pads\":[{pads}],\"strides\":[{strides}]}}"
    )
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn cases() -> Vec<Case> {
    let c3 = conv("1,1,1,1", "1,1", "1,1", 1, 3);
    vec![
        Case {
            name: "1-D conv, stride 2, pads, + bias + relu",
            shape: vec![2, 24, 450],
            fixed: &[],
            consts: vec![vec![64, 24, 5], vec![64]],
            body: "  %10 \"y\" = nn.Conv {\"auto_pad\":\"NotSet\",\"dilations\":[1],\"group\":1,\"kernel_shape\":[5],\"pads\":[2,1],\"strides\":[2]} (%x, %c0, %c1)\n  %11 \"r\" = elementwise.Relu (%10)\n  output %11\n",
            kernel: "conv.",
        },
        Case {
            // Small 1-D convolutions (a voice model's front end) run on the fast kernels too.
            name: "1-D conv, one input channel, stride 4, + bias + relu",
            shape: vec![1, 1, 512],
            fixed: &[],
            consts: vec![vec![16, 1, 8], vec![16]],
            body: "  %10 \"y\" = nn.Conv {\"auto_pad\":\"NotSet\",\"dilations\":[1],\"group\":1,\"kernel_shape\":[8],\"pads\":[0,0],\"strides\":[4]} (%x, %c0, %c1)\n  %11 \"r\" = elementwise.Relu (%10)\n  output %11\n",
            kernel: "conv.",
        },
        Case {
            name: "1-D conv, dilated, grouped",
            shape: vec![1, 32, 1000],
            fixed: &[],
            consts: vec![vec![128, 8, 3]],
            body: "  %10 \"y\" = nn.Conv {\"auto_pad\":\"NotSet\",\"dilations\":[3],\"group\":4,\"kernel_shape\":[3],\"pads\":[0,0],\"strides\":[1]} (%x, %c0)\n  output %10\n",
            kernel: "conv.",
        },
        Case {
            name: "1-D conv, depthwise, same-upper",
            shape: vec![2, 256, 1031],
            fixed: &[],
            consts: vec![vec![256, 1, 4]],
            body: "  %10 \"y\" = nn.Conv {\"auto_pad\":\"SameUpper\",\"dilations\":[],\"group\":256,\"kernel_shape\":[4],\"pads\":[],\"strides\":[1]} (%x, %c0)\n  output %10\n",
            kernel: "conv.depthwise",
        },
        Case {
            name: "lstm, weights packed with the plan, peepholes",
            shape: vec![7, 3, 10],
            fixed: &[],
            consts: vec![vec![1, 52, 10], vec![1, 52, 13], vec![1, 104], vec![1, 39]],
            body: "  %10 \"y\", %11 \"yh\", %12 \"yc\" = recurrent.Lstm {\"activations\":[\"Sigmoid\",\"Tanh\",\"Tanh\"],\"batch_major\":false,\"clip\":null,\"direction\":\"Forward\",\"hidden_size\":13,\"input_forget\":false} (%x, %c0, %c1, %c2, _, _, _, %c3)\n  output %10\n  output %11\n  output %12\n",
            kernel: "lstm",
        },
        Case {
            name: "lstm, bidirectional, batch-major, clip",
            shape: vec![2, 5, 6],
            fixed: &[],
            consts: vec![vec![2, 36, 6], vec![2, 36, 9], vec![2, 72]],
            body: "  %10 \"y\", %11 \"yh\", %12 \"yc\" = recurrent.Lstm {\"activations\":[\"Sigmoid\",\"Tanh\",\"Tanh\",\"Sigmoid\",\"Tanh\",\"Tanh\"],\"batch_major\":true,\"clip\":0.5,\"direction\":\"Bidirectional\",\"hidden_size\":9,\"input_forget\":false} (%x, %c0, %c1, %c2)\n  output %10\n  output %11\n  output %12\n",
            kernel: "lstm",
        },
        Case {
            // The oracle's zero final states (as onnxruntime gives), not the initial ones.
            name: "lstm, empty sequence, initial states",
            shape: vec![0, 2, 5],
            fixed: &[],
            consts: vec![vec![1, 24, 5], vec![1, 24, 6], vec![1, 48], vec![1, 2, 6], vec![1, 2, 6]],
            body: "  %10 \"y\", %11 \"yh\", %12 \"yc\" = recurrent.Lstm {\"activations\":[\"Sigmoid\",\"Tanh\",\"Tanh\"],\"batch_major\":false,\"clip\":null,\"direction\":\"Forward\",\"hidden_size\":6,\"input_forget\":false} (%x, %c0, %c1, %c2, _, %c3, %c4)\n  output %10\n  output %11\n  output %12\n",
            kernel: "lstm",
        },
        Case {
            name: "gru, linear before reset, reverse, initial state",
            shape: vec![6, 4, 7],
            fixed: &[],
            consts: vec![vec![1, 33, 7], vec![1, 33, 11], vec![1, 66], vec![1, 4, 11]],
            body: "  %10 \"y\", %11 \"yh\" = recurrent.Gru {\"activations\":[\"Sigmoid\",\"Tanh\"],\"batch_major\":false,\"clip\":null,\"direction\":\"Reverse\",\"hidden_size\":11,\"linear_before_reset\":true} (%x, %c0, %c1, %c2, _, %c3)\n  output %10\n  output %11\n",
            kernel: "gru",
        },
        Case {
            name: "gru, reset before the product, bidirectional, batch-major, clip",
            shape: vec![3, 5, 6],
            fixed: &[],
            consts: vec![vec![2, 60, 6], vec![2, 60, 20], vec![2, 120]],
            body: "  %10 \"y\", %11 \"yh\" = recurrent.Gru {\"activations\":[\"Sigmoid\",\"Tanh\",\"Sigmoid\",\"Tanh\"],\"batch_major\":true,\"clip\":0.8,\"direction\":\"Bidirectional\",\"hidden_size\":20,\"linear_before_reset\":false} (%x, %c0, %c1, %c2)\n  output %10\n  output %11\n",
            kernel: "gru",
        },
        Case {
            name: "rnn, relu, only the last state wanted",
            shape: vec![9, 2, 5],
            fixed: &[],
            consts: vec![vec![1, 40, 5], vec![1, 40, 40], vec![1, 80]],
            body: "  %10 \"y\", %11 \"yh\" = recurrent.Rnn {\"activations\":[\"Relu\"],\"batch_major\":false,\"clip\":null,\"direction\":\"Forward\",\"hidden_size\":40} (%x, %c0, %c1, %c2)\n  output %11\n",
            kernel: "rnn",
        },
        Case {
            // Edge tiles in both directions; full O tiles are written in place and scaled.
            name: "attention, additive mask broadcast over heads and queries",
            shape: vec![2, 3, 37, 40],
            fixed: &[],
            consts: vec![vec![2, 3, 29, 40], vec![2, 3, 29, 33], vec![2, 1, 1, 29]],
            body: "  %10 \"o\" = nn.Attention {\"is_causal\":false,\"kv_num_heads\":null,\"left_window_size\":-1,\"q_num_heads\":null,\"qk_matmul_output_mode\":0,\"right_window_size\":-1,\"scale\":0.3,\"softcap\":0.0,\"softmax_precision\":null} (%x, %c0, %c1, %c2)\n  output %10\n",
            kernel: "attention",
        },
        Case {
            name: "winograd 3x3 + bias + relu",
            shape: vec![1, 40, 21, 19],
            fixed: &[],
            consts: vec![vec![72, 40, 3, 3], vec![72]],
            body: leak(format!(
                "  %10 \"y\" = {c3} (%x, %c0, %c1)\n  %11 \"r\" = elementwise.Relu (%10)\n  output %11\n"
            )),
            kernel: "winograd",
        },
        Case {
            name: "winograd with few tiles (tiles as rows) + residual",
            shape: vec![2, 48, 13, 15],
            fixed: &[],
            consts: vec![vec![64, 48, 3, 3], vec![64], vec![2, 64, 13, 15]],
            body: leak(format!(
                "  %10 \"y\" = {c3} (%x, %c0, %c1)\n  %11 \"s\" = elementwise.Add (%10, %c2)\n  output %11\n"
            )),
            kernel: "winograd",
        },
        Case {
            name: "direct 3x3 stride 1, few channels",
            shape: vec![1, 5, 9, 60],
            fixed: &[],
            consts: vec![vec![7, 5, 3, 3], vec![7]],
            body: leak(format!("  %10 \"y\" = {c3} (%x, %c0, %c1)\n  output %10\n")),
            kernel: "conv.direct",
        },
        Case {
            name: "direct 3x3 stride 2 + silu",
            shape: vec![2, 6, 17, 125],
            fixed: &[],
            consts: vec![vec![10, 6, 3, 3]],
            body: leak(format!(
                "  %10 \"y\" = {} (%x, %c0)\n  %11 \"s\" = elementwise.Swish {{\"alpha\":1.0}} (%10)\n  output %11\n",
                conv("1,1,1,1", "2,2", "1,1", 1, 3)
            )),
            kernel: "conv.direct",
        },
        Case {
            name: "direct 5x5 dilated",
            shape: vec![1, 3, 16, 62],
            fixed: &[],
            consts: vec![vec![9, 3, 5, 5], vec![9]],
            body: leak(format!("  %10 \"y\" = {} (%x, %c0, %c1)\n  output %10\n", conv("4,4,4,4", "1,1", "2,2", 1, 5))),
            kernel: "conv.direct",
        },
        Case {
            name: "pointwise + residual + relu",
            shape: vec![1, 17, 11, 13],
            fixed: &[],
            consts: vec![vec![33, 17, 1, 1], vec![33], vec![1, 33, 11, 13]],
            body: leak(format!(
                "  %10 \"y\" = {} (%x, %c0, %c1)\n  %11 \"a\" = elementwise.Add (%10, %c2)\n  %12 \"r\" = elementwise.Relu (%11)\n  output %12\n",
                conv("0,0,0,0", "1,1", "1,1", 1, 1)
            )),
            kernel: "conv.pointwise",
        },
        Case {
            name: "1x1 stride 2 (direct)",
            shape: vec![1, 19, 21, 63],
            fixed: &[],
            consts: vec![vec![24, 19, 1, 1]],
            body: leak(format!("  %10 \"y\" = {} (%x, %c0)\n  output %10\n", conv("0,0,0,0", "2,2", "1,1", 1, 1))),
            kernel: "conv.direct",
        },
        Case {
            name: "pointwise on a tiny image, pixels as rows + residual + relu",
            shape: vec![2, 256, 3, 3],
            fixed: &[],
            consts: vec![vec![64, 256, 1, 1], vec![64], vec![2, 64, 3, 3]],
            body: leak(format!(
                "  %10 \"y\" = {} (%x, %c0, %c1)\n  %11 \"a\" = elementwise.Add (%10, %c2)\n  %12 \"r\" = elementwise.Relu (%11)\n  output %12\n",
                conv("0,0,0,0", "1,1", "1,1", 1, 1)
            )),
            kernel: "conv.pointwise-gemm",
        },
        Case {
            name: "3x3 on a tiny image, pixels as rows (im2col)",
            shape: vec![2, 29, 3, 3],
            fixed: &[],
            consts: vec![vec![64, 29, 3, 3], vec![64]],
            body: leak(format!("  %10 \"y\" = {} (%x, %c0, %c1)\n  output %10\n", conv("1,1,1,1", "1,1", "1,1", 1, 3))),
            kernel: "conv.im2col-gemm",
        },
        Case {
            // Too narrow for the implicit GEMM: its virtual columns would double the panels.
            name: "7x7 stride 2 on a narrow image (im2col)",
            shape: vec![1, 3, 13, 5],
            fixed: &[],
            consts: vec![vec![8, 3, 7, 7], vec![8]],
            body: leak(format!("  %10 \"y\" = {} (%x, %c0, %c1)\n  output %10\n", conv("3,3,3,3", "2,2", "1,1", 1, 7))),
            kernel: "conv.im2col",
        },
        Case {
            name: "3x3 stride 2, 32 channels (implicit GEMM)",
            shape: vec![1, 32, 28, 28],
            fixed: &[],
            consts: vec![vec![8, 32, 3, 3], vec![8]],
            body: leak(format!("  %10 \"y\" = {} (%x, %c0, %c1)\n  output %10\n", conv("1,1,1,1", "2,2", "1,1", 1, 3))),
            kernel: "conv.implicit-gemm",
        },
        Case {
            name: "depthwise 3x3 stride 2 + hardswish + affine",
            shape: vec![1, 12, 19, 23],
            fixed: &[(2, "0.75"), (3, "-0.25")],
            consts: vec![vec![12, 1, 3, 3], vec![12], vec![], vec![]],
            body: leak(format!(
                "  %10 \"y\" = {} (%x, %c0, %c1)\n  %11 \"h\" = elementwise.HardSwish (%10)\n  %12 \"m\" = elementwise.Mul (%11, %c2)\n  %13 \"a\" = elementwise.Add (%12, %c3)\n  output %13\n",
                conv("1,1,1,1", "2,2", "1,1", 12, 3)
            )),
            kernel: "conv.depthwise",
        },
        Case {
            name: "grouped 3x3",
            shape: vec![1, 8, 12, 62],
            fixed: &[],
            consts: vec![vec![6, 4, 3, 3], vec![6]],
            body: leak(format!("  %10 \"y\" = {} (%x, %c0, %c1)\n  output %10\n", conv("1,1,1,1", "1,1", "1,1", 2, 3))),
            kernel: "conv.direct",
        },
        Case {
            name: "max pool 3x3 stride 2 ceil mode",
            shape: vec![2, 3, 17, 16],
            fixed: &[],
            consts: vec![],
            body: "  %10 \"y\" = nn.MaxPool {\"auto_pad\":\"NotSet\",\"ceil_mode\":true,\"dilations\":[],\"kernel_shape\":[3,3],\"pads\":[1,1,1,1],\"storage_order\":0,\"strides\":[2,2]} (%x)\n  output %10\n",
            kernel: "maxpool",
        },
        Case {
            name: "average pool with padding counted",
            shape: vec![1, 4, 11, 9],
            fixed: &[],
            consts: vec![],
            body: "  %10 \"y\" = nn.AveragePool {\"auto_pad\":\"NotSet\",\"ceil_mode\":false,\"count_include_pad\":true,\"dilations\":[],\"kernel_shape\":[3,2],\"pads\":[1,0,1,1],\"strides\":[2,1]} (%x)\n  output %10\n",
            kernel: "avgpool",
        },
        Case {
            name: "average pool without padding counted",
            shape: vec![1, 4, 11, 9],
            fixed: &[],
            consts: vec![],
            body: "  %10 \"y\" = nn.AveragePool {\"auto_pad\":\"NotSet\",\"ceil_mode\":false,\"count_include_pad\":false,\"dilations\":[],\"kernel_shape\":[3,3],\"pads\":[1,1,1,1],\"strides\":[1,1]} (%x)\n  output %10\n",
            kernel: "avgpool",
        },
        Case {
            name: "conv transpose 2x2 stride 2 + bias + sigmoid",
            shape: vec![1, 6, 7, 9],
            fixed: &[],
            consts: vec![vec![6, 5, 2, 2], vec![5]],
            body: "  %10 \"y\" = nn.ConvTranspose {\"auto_pad\":\"NotSet\",\"dilations\":[],\"group\":1,\"kernel_shape\":[2,2],\"output_padding\":[],\"output_shape\":[],\"pads\":[0,0,0,0],\"strides\":[2,2]} (%x, %c0, %c1)\n  %11 \"s\" = elementwise.Sigmoid (%10)\n  output %11\n",
            kernel: "epilogue fused",
        },
        Case {
            name: "conv transpose 2x3 stride 2x3 (tiles exactly), 2 groups",
            shape: vec![1, 4, 5, 7],
            fixed: &[],
            consts: vec![vec![4, 3, 2, 3]],
            body: "  %10 \"y\" = nn.ConvTranspose {\"auto_pad\":\"NotSet\",\"dilations\":[],\"group\":2,\"kernel_shape\":[2,3],\"output_padding\":[],\"output_shape\":[],\"pads\":[0,0,0,0],\"strides\":[2,3]} (%x, %c0)\n  output %10\n",
            kernel: "conv-transpose",
        },
        Case {
            name: "conv transpose 3x3 stride 2 pads, 2 groups",
            shape: vec![2, 4, 5, 6],
            fixed: &[],
            consts: vec![vec![4, 3, 3, 3]],
            body: "  %10 \"y\" = nn.ConvTranspose {\"auto_pad\":\"NotSet\",\"dilations\":[],\"group\":2,\"kernel_shape\":[3,3],\"output_padding\":[1,1],\"output_shape\":[],\"pads\":[1,1,1,1],\"strides\":[2,2]} (%x, %c0)\n  output %10\n",
            kernel: "conv-transpose",
        },
        Case {
            name: "matmul batched + bias + gelu",
            shape: vec![3, 17, 33],
            fixed: &[],
            consts: vec![vec![33, 65], vec![65]],
            body: "  %10 \"m\" = nn.MatMul (%x, %c0)\n  %11 \"b\" = elementwise.Add (%10, %c1)\n  %12 \"g\" = elementwise.Gelu {\"approximate\":\"None\"} (%11)\n  output %12\n",
            kernel: "gemm",
        },
        Case {
            name: "gemm transposed with alpha, beta and C",
            shape: vec![19, 7],
            fixed: &[],
            consts: vec![vec![23, 19], vec![23]],
            body: "  %10 \"y\" = nn.Gemm {\"alpha\":0.5,\"beta\":1.0,\"trans_a\":true,\"trans_b\":true} (%x, %c0, %c1)\n  output %10\n",
            kernel: "gemm",
        },
        Case {
            name: "layer norm rows",
            shape: vec![5, 3, 100],
            fixed: &[],
            consts: vec![vec![100], vec![100]],
            body: "  %10 \"y\" = nn.LayerNormalization {\"axis\":-1,\"epsilon\":1e-5,\"stash_type\":\"F32\"} (%x, %c0, %c1)\n  output %10\n",
            kernel: "layer-norm",
        },
        Case {
            name: "layer norm of a sum (an embedding add)",
            shape: vec![3, 17, 100],
            fixed: &[],
            consts: vec![vec![3, 17, 100], vec![100], vec![100]],
            body: "  %9 \"s\" = elementwise.Add (%x, %c0)\n  %10 \"y\" = nn.LayerNormalization {\"axis\":-1,\"epsilon\":1e-5,\"stash_type\":\"F32\"} (%9, %c1, %c2)\n  output %10\n",
            kernel: "layer-norm",
        },
        Case {
            name: "masked sum down a middle axis (mean pooling), by columns",
            shape: vec![3, 17, 300],
            fixed: &[],
            consts: vec![vec![3, 17, 1]],
            body: "  %9 \"m\" = elementwise.Mul (%x, %c0)\n  %10 \"y\" = reduce.ReduceSum {\"axes\":[1],\"keepdims\":false,\"noop_with_empty_axes\":false} (%9)\n  %11 \"z\" = reduce.ReduceSum {\"axes\":[1],\"keepdims\":false,\"noop_with_empty_axes\":false} (%c0)\n  output %10\n  output %11\n",
            kernel: "reduction",
        },
        Case {
            name: "max and mean down the first axis, by columns",
            shape: vec![5, 3, 33],
            fixed: &[],
            consts: vec![],
            body: "  %10 \"y\" = reduce.ReduceMax {\"axes\":[0],\"keepdims\":true,\"noop_with_empty_axes\":false} (%x)\n  %11 \"z\" = reduce.ReduceMean {\"axes\":[0, 1],\"keepdims\":false,\"noop_with_empty_axes\":false} (%x)\n  output %10\n  output %11\n",
            kernel: "reduction",
        },
        Case {
            name: "softmax rows",
            shape: vec![7, 33],
            fixed: &[],
            consts: vec![],
            body: "  %10 \"y\" = reduce.Softmax {\"axis\":-1,\"coerce_2d\":false} (%x)\n  output %10\n",
            kernel: "softmax",
        },
        Case {
            name: "concat along a middle axis (an input and a constant)",
            shape: vec![2, 3, 5],
            fixed: &[],
            consts: vec![vec![2, 4, 5]],
            body: "  %10 \"y\" = layout.Concat {\"axis\":1} (%x, %c0)\n  %11 \"z\" = elementwise.Relu (%10)\n  output %11\n",
            kernel: "concat.copy",
        },
        Case {
            name: "softmax down columns (a middle axis, as YOLO's DFL)",
            shape: vec![2, 5, 37],
            fixed: &[],
            consts: vec![],
            body: "  %10 \"y\" = reduce.Softmax {\"axis\":1,\"coerce_2d\":false} (%x)\n  output %10\n",
            kernel: "softmax-columns",
        },
        Case {
            name: "resize nearest x2 (asymmetric, floor)",
            shape: vec![1, 3, 5, 7],
            fixed: &[(0, "1,1,2,2")],
            consts: vec![vec![4]],
            body: "  %10 \"y\" = misc.Resize {\"antialias\":false,\"axes\":null,\"coord\":\"Asymmetric\",\"cubic_coeff_a\":-0.75,\"exclude_outside\":false,\"extrapolation_value\":0.0,\"keep_aspect_ratio_policy\":\"Stretch\",\"mode\":\"Nearest\",\"nearest\":\"Floor\",\"roi_input\":1,\"scales\":null,\"scales_input\":2,\"sizes_input\":3} (%x, _, %c0)\n  output %10\n",
            kernel: "resize.nearest",
        },
        Case {
            name: "resize bilinear x2 (half pixel) + add",
            shape: vec![2, 3, 5, 7],
            fixed: &[(0, "1,1,2,2")],
            consts: vec![vec![4], vec![2, 3, 10, 14]],
            body: "  %10 \"y\" = misc.Resize {\"antialias\":false,\"axes\":null,\"coord\":\"HalfPixel\",\"cubic_coeff_a\":-0.75,\"exclude_outside\":false,\"extrapolation_value\":0.0,\"keep_aspect_ratio_policy\":\"Stretch\",\"mode\":\"Linear\",\"nearest\":\"RoundPreferFloor\",\"roi_input\":1,\"scales\":null,\"scales_input\":2,\"sizes_input\":3} (%x, _, %c0)\n  %11 \"a\" = elementwise.Add (%10, %c1)\n  output %11\n",
            kernel: "resize.bilinear",
        },
        Case {
            name: "resize nearest x2 + add (fused residual)",
            shape: vec![1, 3, 5, 37],
            fixed: &[(0, "1,1,2,2")],
            consts: vec![vec![4], vec![1, 3, 10, 74]],
            body: "  %10 \"y\" = misc.Resize {\"antialias\":false,\"axes\":null,\"coord\":\"Asymmetric\",\"cubic_coeff_a\":-0.75,\"exclude_outside\":false,\"extrapolation_value\":0.0,\"keep_aspect_ratio_policy\":\"Stretch\",\"mode\":\"Nearest\",\"nearest\":\"Floor\",\"roi_input\":1,\"scales\":null,\"scales_input\":2,\"sizes_input\":3} (%x, _, %c0)\n  %11 \"a\" = elementwise.Add (%10, %c1)\n  output %11\n",
            kernel: "epilogue fused residual",
        },
        Case {
            name: "depthwise 3x3 stride 2 (deinterleaved phases)",
            shape: vec![2, 5, 9, 77],
            fixed: &[],
            consts: vec![vec![5, 1, 3, 3], vec![5]],
            body: "  %10 \"y\" = nn.Conv {\"auto_pad\":\"NotSet\",\"dilations\":[1,1],\"group\":5,\"kernel_shape\":[3,3],\"pads\":[1,1,1,1],\"strides\":[2,2]} (%x, %c0, %c1)\n  output %10\n",
            kernel: "conv.depthwise",
        },
        Case {
            name: "max pool 3x3 stride 2 on wide rows (deinterleaved taps)",
            shape: vec![1, 3, 9, 77],
            fixed: &[],
            consts: vec![],
            body: "  %10 \"y\" = nn.MaxPool {\"auto_pad\":\"NotSet\",\"ceil_mode\":false,\"dilations\":[],\"kernel_shape\":[3,3],\"pads\":[1,1,1,1],\"storage_order\":0,\"strides\":[2,2]} (%x)\n  %11 \"a\" = nn.AveragePool {\"auto_pad\":\"NotSet\",\"ceil_mode\":false,\"count_include_pad\":true,\"dilations\":[],\"kernel_shape\":[3,3],\"pads\":[1,1,1,1],\"strides\":[2,2]} (%x)\n  output %10\n  output %11\n",
            kernel: "pool",
        },
        Case {
            name: "global average pool (rows reduced in place)",
            shape: vec![2, 7, 13, 29],
            fixed: &[],
            consts: vec![],
            body: "  %10 \"y\" = nn.GlobalAveragePool (%x)\n  output %10\n",
            kernel: "reduction",
        },
        Case {
            name: "resize bilinear x1.5 (align corners)",
            shape: vec![1, 2, 6, 7],
            fixed: &[(0, "1,1,1.5,1.5")],
            consts: vec![vec![4]],
            body: "  %10 \"y\" = misc.Resize {\"antialias\":false,\"axes\":null,\"coord\":\"AlignCorners\",\"cubic_coeff_a\":-0.75,\"exclude_outside\":false,\"extrapolation_value\":0.0,\"keep_aspect_ratio_policy\":\"Stretch\",\"mode\":\"Linear\",\"nearest\":\"RoundPreferFloor\",\"roi_input\":1,\"scales\":null,\"scales_input\":2,\"sizes_input\":3} (%x, _, %c0)\n  output %10\n",
            kernel: "resize.bilinear",
        },
    ]
}

#[test]
fn fast_paths_match_the_oracle_on_every_isa() {
    for c in cases() {
        check(&c);
    }
}

/// The cases on tiny images take the pixels-as-rows GEMM where the tile is 32 wide (their
/// results are checked against the oracle above, on every ISA).
#[test]
fn tiny_images_run_with_pixels_as_rows_on_avx512() {
    if !Isa::Avx512.is_supported() {
        eprintln!("note: this CPU has no avx512; pixels-as-rows not run");
        return;
    }
    let tiny: Vec<Case> = cases()
        .into_iter()
        .filter(|c| c.name.contains("pixels as rows"))
        .collect();
    assert_eq!(tiny.len(), 2);
    for c in tiny {
        let t = text(&c, &mut Rng(1));
        let s = session(&t, 1, Some(Isa::Avx512));
        let plan = s.last_plan().expect("plan");
        let names = plan.kernel_names();
        assert!(
            names.iter().any(|k| k.contains("pixel-rows.avx512")),
            "{}: {names:?}",
            c.name
        );
    }
}

/// A convolution whose kernel would copy its input padded past the tensor limit (the pads
/// are the model's: 60 on each side of an 8x8 image) leaves the node to the reference
/// kernel, with the oracle's result; under the default limits Winograd takes it.
#[test]
fn a_padded_copy_past_the_limits_leaves_the_conv_to_the_reference_kernel() {
    let body = leak(format!(
        "  %10 \"y\" = {} (%x, %c0)\n  output %10\n",
        conv("60,60,60,60", "1,1", "1,1", 1, 3)
    ));
    let c = Case {
        name: "3x3 conv padded by 60",
        shape: vec![1, 64, 8, 8],
        fixed: &[],
        consts: vec![vec![32, 64, 3, 3]],
        body,
        kernel: "conv.",
    };
    let mut rng = Rng(11);
    let t = text(&c, &mut rng);
    let x =
        Tensor::from_f32(c.shape.clone(), (0..64 * 64).map(|_| rng.unit()).collect()).expect("x");
    let want = outputs(&session(&t, 0, None), &x);
    // The output (32 x 126 x 126 floats, 2 MB) fits 3 MiB; Winograd's padded copy (64 x
    // 130 x 130 floats, 4.3 MB) does not.
    for (max_tensor_bytes, kernel) in [(None, "conv.winograd"), (Some(3 << 20), "reference")] {
        let mut o = SessionOptions {
            opt_level: 1,
            threads: 2,
            ..Default::default()
        };
        if let Some(m) = max_tensor_bytes {
            o.limits.max_tensor_bytes = m;
        }
        let graph = smelt_ir::text::parse_graph(&t).expect("graph");
        let model = Model {
            graph,
            opsets: vec![(String::new(), 19)],
            ..Default::default()
        };
        let s = Session::from_model_with(model, &o).expect("session");
        let got = outputs(&s, &x);
        let names = s.last_plan().expect("plan").kernel_names().to_vec();
        assert!(
            names.iter().any(|k| k.contains(kernel)),
            "{max_tensor_bytes:?}: expected {kernel}, got {names:?}"
        );
        for (i, (a, b)) in got[0].iter().zip(&want[0]).enumerate() {
            assert!(
                (a - b).abs() <= 2e-4 * (1.0 + b.abs()),
                "at {i}: {a} vs {b}"
            );
        }
    }
}
