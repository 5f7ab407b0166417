//! Differential tests for BatchNormalization folding into Conv/ConvTranspose/Gemm/MatMul and
//! for scalar and bias folding: level 1 gives level 0's results with fewer nodes.

mod common;

use common::floats;
use smelt_ir::{Model, Tensor, Value};
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;

/// Folding reorders f32 arithmetic: |optimized - reference| <= ATOL + RTOL * |reference|.
const ATOL: f64 = 1e-5;
const RTOL: f64 = 1e-4;

/// A constant's JSON with deterministic values shifted by `lo`.
fn constant(shape: &[usize], seed: u32, lo: f32) -> String {
    let n = shape.iter().product();
    let v = floats(n, seed).iter().map(|x| x + lo).collect();
    serde_json::to_string(&Tensor::from_f32(shape.to_vec(), v).expect("tensor")).expect("json")
}

/// A constant filled with `v`.
fn filled(shape: &[usize], v: f32) -> String {
    let n = shape.iter().product();
    serde_json::to_string(&Tensor::from_f32(shape.to_vec(), vec![v; n]).expect("tensor"))
        .expect("json")
}

/// BatchNormalization statistics for `c` channels as constants %2..%5 (variance positive).
fn stats(c: usize) -> String {
    format!(
        r#"  const %2 "scale" = {}
  const %3 "beta" = {}
  const %4 "mean" = {}
  const %5 "var" = {}"#,
        constant(&[c], 2, 1.0),
        constant(&[c], 3, 0.0),
        constant(&[c], 4, 0.0),
        constant(&[c], 5, 1.0),
    )
}

const BN: &str = r#"nn.BatchNormalization {"epsilon":0.001,"momentum":0.9,"spatial":true,"training_mode":false}"#;

/// Runs the graph at levels 0 and 1 on deterministic inputs; compares the outputs and
/// returns the node counts of both plans.
fn differential(text: &str, inputs: &[(&str, &[usize])]) -> (usize, usize) {
    let graph = smelt_ir::text::parse_graph(text).expect("parse");
    smelt_ir::verify::verify(&graph).expect("verify");
    let model = Model {
        graph,
        opsets: vec![(String::new(), 17)],
        ..Default::default()
    };
    let feeds: HashMap<String, Value> = inputs
        .iter()
        .enumerate()
        .map(|(k, (name, shape))| {
            let n = shape.iter().product();
            let t = Tensor::from_f32(shape.to_vec(), floats(n, 9 + k as u32)).expect("input");
            (name.to_string(), Value::Tensor(t))
        })
        .collect();
    let run = |level: u8| {
        let options = SessionOptions {
            opt_level: level,
            ..Default::default()
        };
        let s = Session::from_model_with(model.clone(), &options).expect("compile");
        let out = s.run(feeds.clone()).expect("run");
        let nodes = s.last_plan().expect("a plan").graph().nodes.len();
        let values: Vec<Vec<f64>> = out
            .iter()
            .map(|(_, v)| v.tensor().expect("tensor").to_f64().expect("f64"))
            .collect();
        (nodes, values)
    };
    let (n0, reference) = run(0);
    let (n1, optimized) = run(1);
    assert_eq!(reference.len(), optimized.len());
    for (r, o) in reference.iter().zip(&optimized) {
        assert_eq!(r.len(), o.len());
        for (a, b) in o.iter().zip(r) {
            assert!((a - b).abs() <= ATOL + RTOL * b.abs(), "{a} vs {b}");
        }
    }
    assert!(n1 < n0, "level 1 has {n1} nodes, level 0 {n0}");
    (n0, n1)
}

#[test]
fn conv_bias_scale_and_scalar_chains_fold() {
    let text = format!(
        r#"graph "g" {{
  input %0 "x": f32[1,3,6,6]
  const %1 "w" = {}
  const %2 "b" = {}
  const %3 "c" = {}
  const %4 "s" = {}
  const %5 "two" = {}
  const %6 "quarter" = {}
  const %7 "half" = {}
  const %8 "one" = {}
  %9 "v" = nn.Conv {{"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[],"pads":[1,1,1,1],"strides":[]}} (%0, %1, %2) # "conv"
  %10 "a" = elementwise.Add (%9, %3) # "add_c"
  %11 "m" = elementwise.Mul (%10, %4) # "mul_s"
  %12 "r" = elementwise.Relu (%11) # "relu"
  %13 "p" = elementwise.Mul (%12, %5) # "times_two"
  %14 "q" = elementwise.Mul (%6, %13) # "times_quarter"
  %15 "d" = elementwise.Div (%14, %5) # "div_two"
  %16 "e" = elementwise.Sub (%15, %7) # "minus_half"
  %17 "f" = elementwise.Add (%16, %8) # "plus_one"
  %18 "y" = elementwise.Div (%17, %7) # "div_half"
  output %18
}}"#,
        constant(&[4, 3, 3, 3], 1, 0.0),
        constant(&[4], 11, 0.0),
        constant(&[1, 4, 1, 1], 12, 0.0),
        constant(&[4, 1, 1], 13, 1.0),
        filled(&[], 2.0),
        filled(&[1], 0.25),
        filled(&[], 0.5),
        filled(&[1], 1.0),
    );
    let (n0, n1) = differential(&text, &[("x", &[1, 3, 6, 6])]);
    assert_eq!(n0, 10);
    // Conv (bias and scale folded in), Relu, x * 0.25, + 0.5, * 2 (the Div by 0.5).
    assert_eq!(n1, 5);
}

#[test]
fn matmul_bias_chain_folds() {
    let text = format!(
        r#"graph "g" {{
  input %0 "x": f32[4,8]
  const %1 "w" = {}
  const %2 "b1" = {}
  const %3 "b2" = {}
  %4 "m" = nn.MatMul (%0, %1) # "matmul"
  %5 "a" = elementwise.Add (%4, %2) # "bias1"
  %6 "y" = elementwise.Sub (%5, %3) # "bias2"
  output %6
}}"#,
        constant(&[8, 5], 1, 0.0),
        constant(&[5], 2, 0.0),
        constant(&[1, 5], 3, 0.0),
    );
    let (_, n1) = differential(&text, &[("x", &[4, 8])]);
    assert_eq!(n1, 2);
}

#[test]
fn batchnorm_folds_into_gemm_and_matmul() {
    let text = format!(
        r#"graph "g" {{
  input %0 "x": f32[3,4]
  const %1 "w" = {}
{}
  const %6 "c" = {}
  const %7 "w2" = {}
  %8 "g" = nn.Gemm {{"alpha":0.5,"beta":2.0,"trans_a":false,"trans_b":true}} (%0, %1, %6) # "gemm"
  %9 "bn1" = {BN} (%8, %2, %3, %4, %5) # "bn1"
  %10 "m" = nn.MatMul (%9, %7) # "matmul"
  %11 "y" = {BN} (%10, %2, %3, %4, %5) # "bn2"
  output %11
}}"#,
        constant(&[6, 4], 1, 0.0),
        stats(6),
        constant(&[6], 6, 0.0),
        constant(&[6, 6], 7, 0.0),
    );
    let (n0, n1) = differential(&text, &[("x", &[3, 4])]);
    assert_eq!((n0, n1), (4, 2));
}

#[test]
fn batchnorm_folds_into_grouped_conv_transpose() {
    let text = format!(
        r#"graph "g" {{
  input %0 "x": f32[1,4,3,3]
  const %1 "w" = {}
{}
  const %6 "b" = {}
  %7 "c" = nn.ConvTranspose {{"auto_pad":"NotSet","dilations":[],"group":2,"kernel_shape":[],"output_padding":[],"output_shape":[],"pads":[],"strides":[2,2]}} (%0, %1, %6) # "deconv"
  %8 "y" = {BN} (%7, %2, %3, %4, %5) # "bn"
  output %8
}}"#,
        constant(&[4, 3, 2, 2], 1, 0.0),
        stats(6),
        constant(&[6], 6, 0.0),
    );
    let (n0, n1) = differential(&text, &[("x", &[1, 4, 3, 3])]);
    assert_eq!((n0, n1), (2, 1));
}
