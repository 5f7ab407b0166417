//! Outputs placed in place of a dying input: never of one the group's anchor op reads.
//! `relu(x)` feeds a convolution (or a product) whose epilogue adds `x` back, and `x`
//! dies there: the sum may not take over `x`'s memory, since the op still reads `x`
//! while its epilogue stores finished tiles (it did, and gave wrong sums).

mod common;

use common::{floats, model, tensor_json};
use smelt_ir::{Tensor, Value};
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;

/// The graph's outputs at opt level 0 (the reference executor) and at the default.
fn both(text: &str, x: Tensor) -> (Vec<f64>, Vec<f64>) {
    let model = model(text);
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
        out[0].1.tensor().expect("tensor").to_f64().expect("f64")
    };
    (run(0), run(SessionOptions::default().opt_level))
}

fn close(reference: &[f64], fast: &[f64], what: &str) {
    assert_eq!(reference.len(), fast.len());
    for (i, (a, b)) in fast.iter().zip(reference).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 + 1e-3 * b.abs(),
            "{what} at {i}: {a} vs {b}"
        );
    }
}

#[test]
fn conv_plus_its_own_input() {
    // Winograd (3x3), pointwise (1x1) and direct-sized layers.
    for (c, hw, k) in [(64, 56, 3), (64, 28, 1), (16, 32, 3), (32, 20, 3)] {
        let w = tensor_json(&[c, c, k, k], &floats(c * c * k * k, 3));
        let b = tensor_json(&[c], &floats(c, 4));
        let p = k / 2;
        let text = format!(
            r#"graph "g" {{
  input %0 "x": f32[1,{c},{hw},{hw}]
  const %1 "w" = {w}
  const %2 "b" = {b}
  %3 "r" = elementwise.Relu (%0) # "relu"
  %4 "c" = nn.Conv {{"auto_pad":"NotSet","dilations":[],"group":1,"kernel_shape":[],"pads":[{p},{p},{p},{p}],"strides":[]}} (%3, %1, %2) # "conv"
  %5 "s" = elementwise.Add (%4, %3) # "add"
  %6 "y" = nn.MaxPool {{"auto_pad":"NotSet","ceil_mode":false,"dilations":[],"kernel_shape":[2,2],"pads":[0,0,0,0],"storage_order":0,"strides":[2,2]}} (%5) # "pool"
  output %6
}}"#
        );
        let x = Tensor::from_f32(vec![1, c, hw, hw], floats(c * hw * hw, 9)).expect("x");
        let (reference, fast) = both(&text, x);
        close(&reference, &fast, &format!("conv {c}x{hw}x{hw} k{k}"));
    }
}

#[test]
fn matmul_plus_its_own_input() {
    let n = 96;
    let w = tensor_json(&[n, n], &floats(n * n, 5));
    let text = format!(
        r#"graph "g" {{
  input %0 "x": f32[{n},{n}]
  const %1 "w" = {w}
  %2 "r" = elementwise.Relu (%0) # "relu"
  %3 "m" = nn.MatMul (%2, %1) # "mm"
  %4 "s" = elementwise.Add (%3, %2) # "add"
  %5 "y" = layout.Transpose {{"perm":[1,0]}} (%4) # "t"
  output %5
}}"#
    );
    let x = Tensor::from_f32(vec![n, n], floats(n * n, 7)).expect("x");
    let (reference, fast) = both(&text, x);
    close(&reference, &fast, "matmul");
}
