//! Differential test: the optimized pipeline gives the reference executor's results on a
//! graph every pass rewrites (BatchNorm folding, inverse transposes, CSE, folding, no-ops).

mod common;

use common::{floats, model, tensor_json};
use smelt_ir::{Tensor, Value};
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;

fn graph_text() -> String {
    let w = tensor_json(&[4, 3, 3, 3], &floats(108, 1));
    let stat = |s: u32, lo: f32| {
        tensor_json(
            &[4],
            &floats(4, s).iter().map(|x| x + lo).collect::<Vec<_>>(),
        )
    };
    format!(
        r#"graph "g" {{
  input %0 "x": f32[1,3,6,6]
  const %1 "w" = {w}
  const %2 "scale" = {}
  const %3 "beta" = {}
  const %4 "mean" = {}
  const %5 "var" = {}
  const %6 "two" = {}
  %7 "c" = nn.Conv {{"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[],"pads":[1,1,1,1],"strides":[]}} (%0, %1) # "conv"
  %8 "bn" = nn.BatchNormalization {{"epsilon":0.001,"momentum":0.9,"training_mode":false,"spatial":true}} (%7, %2, %3, %4, %5) # "bn"
  %9 "t1" = layout.Transpose {{"perm":[0,2,3,1]}} (%8) # "t1"
  %10 "t2" = layout.Transpose {{"perm":[0,3,1,2]}} (%9) # "t2"
  %11 "id" = layout.Identity (%10) # "id"
  %12 "r1" = elementwise.Relu (%11) # "relu_a"
  %13 "r2" = elementwise.Relu (%11) # "relu_b"
  %14 "four" = elementwise.Add (%6, %6) # "const_add"
  %15 "s" = elementwise.Add (%12, %13) # "sum"
  %16 "y" = elementwise.Mul (%15, %14) # "scale_out"
  output %16
}}"#,
        stat(2, 1.0),
        stat(3, 0.0),
        stat(4, 0.0),
        stat(5, 1.0),
        tensor_json(&[1], &[2.0]),
    )
}

#[test]
fn optimized_matches_reference() {
    let model = model(&graph_text());
    let x = Tensor::from_f32(vec![1, 3, 6, 6], floats(108, 9)).expect("x");
    let run = |level: u8| {
        let s = Session::from_model_with(
            model.clone(),
            &SessionOptions {
                opt_level: level,
                ..Default::default()
            },
        )
        .expect("compile");
        let out = s
            .run(HashMap::from([("x".to_string(), Value::Tensor(x.clone()))]))
            .expect("run");
        let nodes = s.last_plan().expect("a plan").graph().nodes.len();
        (
            nodes,
            out[0].1.tensor().expect("tensor").to_f64().expect("f64"),
        )
    };
    let (n0, reference) = run(0);
    let (n1, optimized) = run(1);
    assert_eq!(n0, 10);
    // Conv (with BatchNorm folded in), one Relu, the Add and the Mul remain.
    assert_eq!(n1, 4, "passes should leave conv, relu, add, mul");
    // Tolerance: folding reorders f32 arithmetic; |diff| <= 1e-5 + 1e-4 |ref|.
    for (a, b) in optimized.iter().zip(&reference) {
        assert!((a - b).abs() <= 1e-5 + 1e-4 * b.abs(), "{a} vs {b}");
    }
}
