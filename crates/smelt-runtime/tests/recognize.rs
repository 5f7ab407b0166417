//! Differential tests for composite recognition: small graphs in the decomposed forms
//! exporters emit, run at level 1 (where `recognize-composites` rewrites them) and at
//! level 0 (the graph as written), on seeded random inputs.
//!
//! Tolerance: |level1 - level0| <= 1e-5 + 1e-4 * |level0| per element. The composite
//! kernels compute in f64 and round once, the decompositions round after every op.

use smelt_ir::{Model, Tensor, Value};
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;

/// Deterministic values in [-scale, scale).
fn floats(n: usize, seed: u32, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u32)
                .wrapping_mul(2654435761)
                .wrapping_add(seed.wrapping_mul(40503))
                .rotate_left(13)
                .wrapping_mul(2246822519);
            ((h >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// Compiles `text` at `level`; returns the op names of the compiled graph and the outputs.
fn run(text: &str, inputs: &HashMap<String, Value>, level: u8) -> (Vec<String>, Vec<Vec<f64>>) {
    let graph = smelt_ir::text::parse_graph(text).expect("parse");
    let model = Model {
        graph,
        opsets: vec![(String::new(), 23)],
        ..Default::default()
    };
    let s = Session::from_model_with(
        model,
        &SessionOptions {
            opt_level: level,
            ..Default::default()
        },
    )
    .expect("compile");
    let outs = s
        .run(inputs.clone())
        .expect("run")
        .into_iter()
        .map(|(_, v)| v.tensor().expect("tensor").to_f64().expect("f64"))
        .collect();
    let ops = s
        .last_plan()
        .expect("a plan")
        .graph()
        .nodes
        .iter()
        .map(|n| n.op.name().to_string())
        .collect();
    (ops, outs)
}

/// Runs both levels on random inputs (name, shape, scale); checks that level 1 uses `op`
/// and agrees with level 0.
fn compare(text: &str, inputs: &[(&str, &[usize], f32)], op: &str) {
    let values: HashMap<String, Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, (name, shape, scale))| {
            let n = shape.iter().product();
            let t = Tensor::from_f32(shape.to_vec(), floats(n, i as u32 + 7, *scale)).expect("t");
            (name.to_string(), Value::Tensor(t))
        })
        .collect();
    let (ops0, reference) = run(text, &values, 0);
    let (ops1, optimized) = run(text, &values, 1);
    assert!(!ops0.iter().any(|o| o == op), "level 0 already has {op}");
    assert!(
        ops1.iter().any(|o| o == op),
        "{op} not recognized: {ops1:?}"
    );
    assert_eq!(reference.len(), optimized.len());
    for (r, o) in reference.iter().zip(&optimized) {
        assert_eq!(r.len(), o.len());
        for (a, b) in o.iter().zip(r) {
            assert!((a - b).abs() <= 1e-5 + 1e-4 * b.abs(), "{op}: {a} vs {b}");
        }
    }
}

#[test]
fn gelu_erf_and_tanh_forms() {
    compare(
        r#"graph "g" {
  input %0 "x": f32[3,17]
  const %1 "sqrt2" = {"dtype":"F32","shape":[],"data":{"F32":[1.4142135]}}
  const %2 "one" = {"dtype":"F32","shape":[],"data":{"F32":[1.0]}}
  const %3 "half" = {"dtype":"F32","shape":[],"data":{"F32":[0.5]}}
  const %4 "c" = {"dtype":"F32","shape":[],"data":{"F32":[0.7978846]}}
  const %5 "k" = {"dtype":"F32","shape":[],"data":{"F32":[0.044715]}}
  const %6 "three" = {"dtype":"F32","shape":[],"data":{"F32":[3.0]}}
  %7 "u" = elementwise.Div (%0, %1) # "div"
  %8 "e" = elementwise.Erf (%7) # "erf"
  %9 "p" = elementwise.Add (%8, %2) # "add"
  %10 "m" = elementwise.Mul (%0, %9) # "mul"
  %11 "y" = elementwise.Mul (%10, %3) # "gelu_erf"
  %12 "x3" = elementwise.Pow (%0, %6) # "pow"
  %13 "kx3" = elementwise.Mul (%12, %5) # "mul_k"
  %14 "s" = elementwise.Add (%0, %13) # "add_x"
  %15 "t" = elementwise.Mul (%14, %4) # "mul_c"
  %16 "th" = elementwise.Tanh (%15) # "tanh"
  %17 "q" = elementwise.Add (%2, %16) # "add_1"
  %18 "hx" = elementwise.Mul (%0, %3) # "half_x"
  %19 "z" = elementwise.Mul (%18, %17) # "gelu_tanh"
  output %11, %19
}"#,
        &[("x", &[3, 17], 4.0)],
        "Gelu",
    );
}

#[test]
fn silu() {
    compare(
        r#"graph "g" {
  input %0 "x": f32[2,8,3,3]
  %1 "s" = elementwise.Sigmoid (%0) # "sig"
  %2 "y" = elementwise.Mul (%1, %0) # "silu"
  output %2
}"#,
        &[("x", &[2, 8, 3, 3], 6.0)],
        "Swish",
    );
}

#[test]
fn hardswish_clip_and_hardsigmoid_forms() {
    compare(
        r#"graph "g" {
  input %0 "x": f32[1,4,5,5]
  const %1 "three" = {"dtype":"F32","shape":[],"data":{"F32":[3.0]}}
  const %2 "zero" = {"dtype":"F32","shape":[],"data":{"F32":[0.0]}}
  const %3 "six" = {"dtype":"F32","shape":[],"data":{"F32":[6.0]}}
  %4 "a" = elementwise.Add (%0, %1) # "add"
  %5 "c" = elementwise.Clip {"max":null,"min":null} (%4, %2, %3) # "clip"
  %6 "m" = elementwise.Mul (%0, %5) # "mul"
  %7 "y" = elementwise.Div (%6, %3) # "hswish_clip"
  %8 "h" = elementwise.HardSigmoid {"alpha":0.16666667,"beta":0.5} (%0) # "hsig"
  %9 "z" = elementwise.Mul (%8, %0) # "hswish_hsig"
  output %7, %9
}"#,
        &[("x", &[1, 4, 5, 5], 5.0)],
        "HardSwish",
    );
}

#[test]
fn layer_normalization() {
    let mean = r#"reduce.ReduceMean {"axes":[-1],"keepdims":true,"noop_with_empty_axes":false}"#;
    let gamma = serde_json::to_string(&Tensor::from_f32(vec![6], floats(6, 3, 1.0)).unwrap())
        .expect("json");
    compare(
        &format!(
            r#"graph "g" {{
  input %0 "x": f32[2,3,6]
  const %1 "two" = {{"dtype":"F32","shape":[],"data":{{"F32":[2.0]}}}}
  const %2 "eps" = {{"dtype":"F32","shape":[],"data":{{"F32":[0.00001]}}}}
  const %3 "gamma" = {gamma}
  const %4 "beta" = {{"dtype":"F32","shape":[6],"data":{{"F32":[0.1,-0.2,0.3,-0.4,0.5,-0.6]}}}}
  %5 "mean" = {mean} (%0) # "ReduceMean"
  %6 "d" = elementwise.Sub (%0, %5) # "Sub"
  %7 "sq" = elementwise.Pow (%6, %1) # "Pow"
  %8 "var" = {mean} (%7) # "ReduceMean_1"
  %9 "ve" = elementwise.Add (%8, %2) # "Add"
  %10 "std" = elementwise.Sqrt (%9) # "Sqrt"
  %11 "n" = elementwise.Div (%6, %10) # "Div"
  %12 "g" = elementwise.Mul (%11, %3) # "Mul"
  %13 "y" = elementwise.Add (%12, %4) # "Add_1"
  output %13
}}"#
        ),
        &[("x", &[2, 3, 6], 3.0)],
        "LayerNormalization",
    );
}

/// A BERT-style attention block with a mask of shape `mask`.
fn attention_graph(mask: &str) -> String {
    format!(
        r#"graph "g" {{
  input %0 "q": f32[2,3,5,4]
  input %1 "k": f32[2,7,3,4]
  input %2 "v": f32[2,3,7,6]
  input %3 "mask": f32[{mask}]
  const %4 "sqrt_d" = {{"dtype":"F32","shape":[],"data":{{"F32":[2.0]}}}}
  %5 "kt" = layout.Transpose {{"perm":[0,2,3,1]}} (%1) # "Transpose_2"
  %6 "qk" = nn.MatMul (%0, %5) # "MatMul"
  %7 "z" = elementwise.Div (%6, %4) # "Div"
  %8 "s" = elementwise.Add (%7, %3) # "Add"
  %9 "p" = reduce.Softmax {{"axis":-1,"coerce_2d":false}} (%8) # "Softmax"
  %10 "y" = nn.MatMul (%9, %2) # "MatMul_1"
  output %10
}}"#
    )
}

#[test]
fn attention_with_a_mask_broadcast_over_keys() {
    // Expanded to the keys' length before the Attention op, which would pad it with -inf.
    compare(
        &attention_graph("2,1,5,1"),
        &[
            ("q", &[2, 3, 5, 4], 2.0),
            ("k", &[2, 7, 3, 4], 2.0),
            ("v", &[2, 3, 7, 6], 1.0),
            ("mask", &[2, 1, 5, 1], 3.0),
        ],
        "Attention",
    );
}

#[test]
fn attention_with_padding_mask() {
    compare(
        &attention_graph("2,1,1,7"),
        &[
            ("q", &[2, 3, 5, 4], 2.0),
            ("k", &[2, 7, 3, 4], 2.0),
            ("v", &[2, 3, 7, 6], 1.0),
            ("mask", &[2, 1, 1, 7], 3.0),
        ],
        "Attention",
    );
}
