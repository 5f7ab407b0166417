//! What a model declares about intermediate values is not trusted: an invalid node is an
//! error (not a wrong answer), and a declaration inference cannot confirm changes nothing
//! about the result (the optimized plan gives what the reference gives).

use smelt_ir::{ErrorKind, Model, Tensor, Value};
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;

fn model(text: &str) -> Model {
    Model {
        graph: smelt_ir::text::parse_graph(text).unwrap_or_else(|e| panic!("{e}\n{text}")),
        opsets: vec![(String::new(), 17)],
        ir_version: 8,
        producer: "test".into(),
    }
}

fn options(level: u8) -> SessionOptions {
    SessionOptions {
        opt_level: level,
        ..Default::default()
    }
}

fn x23() -> Value {
    Value::Tensor(Tensor::from_f32(vec![2, 3], vec![1.0, -2.0, 3.0, -4.0, 5.0, -6.0]).unwrap())
}

/// The hardening finding: a Reshape to `[-5, 3]`, declared to keep its input's shape, ran
/// at the default level (remove-noops saw a no-op) and failed only at level 0.
#[test]
fn an_invalid_reshape_is_an_error_at_every_level() {
    let m = model(
        r#"graph "g" {
  input %0 "x": f32[2,3]
  const %1 "s" = {"dtype":"I64","shape":[2],"data":{"I64":[-5,3]}}
  %2 "r": f32[2,3] = layout.Reshape {"allowzero":false,"shape":null} (%0, %1) # "bad_reshape"
  %3 "y": f32[2,3] = elementwise.Relu (%2) # "relu"
  output %3
}"#,
    );
    let e = Session::from_model_with(m.clone(), &options(1))
        .err()
        .expect("level 1 rejects the model");
    assert_eq!(e.kind(), ErrorKind::InvalidModel, "{e}");
    assert!(e.to_string().contains("node bad_reshape (Reshape)"), "{e}");
    assert!(e.to_string().contains("-5"), "{e}");
    let s = Session::from_model_with(m, &options(0)).expect("level 0 loads");
    let inputs = HashMap::from([("x".to_string(), x23())]);
    assert!(s.run(inputs).is_err(), "level 0 fails at run time");
}

fn run(m: &Model, level: u8, inputs: &HashMap<String, Value>) -> Vec<(Vec<usize>, Vec<f64>)> {
    let s = Session::from_model_with(m.clone(), &options(level)).expect("compile");
    s.run(inputs.clone())
        .expect("run")
        .into_iter()
        .map(|(_, v)| {
            let t = v.into_tensor().expect("tensor");
            (t.shape().to_vec(), t.to_f64().expect("numbers"))
        })
        .collect()
}

/// A Reshape whose target is an input, declared to keep its input's shape: the declaration
/// is a lie at this input, and the optimized plan must not believe it.
#[test]
fn a_declared_shape_does_not_make_a_reshape_a_noop() {
    let m = model(
        r#"graph "g" {
  input %0 "x": f32[2,3]
  input %1 "s": i64[2]
  %2 "r": f32[2,3] = layout.Reshape {"allowzero":false,"shape":null} (%0, %1) # "reshape"
  %3 "y": f32[2,3] = elementwise.Relu (%2) # "relu"
  output %3
}"#,
    );
    let s = Value::Tensor(Tensor::from_i64_vec(vec![2], vec![3, 2]).unwrap());
    let inputs = HashMap::from([("x".to_string(), x23()), ("s".to_string(), s)]);
    let want = run(&m, 0, &inputs);
    assert_eq!(want[0].0, vec![3, 2]);
    assert_eq!(run(&m, 1, &inputs), want);
}

/// An op inference has no rule for, with a declared output shape that is wrong: the plan
/// must not be laid out by the declaration.
#[test]
fn a_wrong_declaration_on_an_uninferred_op_changes_nothing() {
    let m = model(
        r#"graph "g" {
  input %0 "x": f32[2,3]
  %1 "p": f32[5,1] = misc.LinearRegressor {"coefficients":[1.0,2.0,3.0],"intercepts":[0.5],"targets":1} (%0) # "linreg"
  %2 "y": f32[5,1] = elementwise.Relu (%1) # "relu"
  output %2
}"#,
    );
    let inputs = HashMap::from([("x".to_string(), x23())]);
    let want = run(&m, 0, &inputs);
    assert_eq!(want[0].0, vec![2, 1]);
    assert_eq!(run(&m, 1, &inputs), want);
}
