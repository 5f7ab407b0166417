//! Runs on borrowed tensors (`Session::run_ref`): the same outputs as owned runs at every
//! optimization level, defaults for absent optional inputs, the same error kinds for a
//! caller's mistakes, a name given twice refused, and concurrent runs.

use smelt_ir::{ErrorKind, Model, Tensor, Value};
use smelt_runtime::{Session, SessionOptions};
use std::collections::HashMap;

/// y = Relu(x @ w + b) * scale, where `scale` is optional (default 2).
const GRAPH: &str = r#"graph "g" {
  input %0 "x": f32[n,4]
  input %1 "scale": f32[1] = {"dtype":"F32","shape":[1],"data":{"F32":[2.0]}}
  const %2 "w" = {"dtype":"F32","shape":[4,3],"data":{"F32":[0.5,-1.0,0.25,1.5,0.75,-0.5,-0.25,0.125,1.0,2.0,-1.5,0.5]}}
  const %3 "b" = {"dtype":"F32","shape":[3],"data":{"F32":[0.1,-0.2,0.3]}}
  %4 "m" = nn.MatMul (%0, %2) # "mm"
  %5 "a" = elementwise.Add (%4, %3) # "bias"
  %6 "r" = elementwise.Relu (%5) # "relu"
  %7 "y" = elementwise.Mul (%6, %1) # "scale"
  output %7
}"#;

fn session(level: u8) -> Session {
    let model = Model {
        graph: smelt_ir::text::parse_graph(GRAPH).expect("parse"),
        opsets: vec![(String::new(), 17)],
        ir_version: 8,
        producer: "test".into(),
    };
    let options = SessionOptions {
        opt_level: level,
        ..Default::default()
    };
    Session::from_model_with(model, &options).expect("session")
}

fn x(n: usize) -> Tensor {
    let data = (0..n * 4).map(|i| (i as f32 * 0.37).sin() * 2.0).collect();
    Tensor::from_f32(vec![n, 4], data).expect("tensor")
}

fn values(out: &[(String, Value)]) -> Vec<(String, Vec<f64>)> {
    out.iter()
        .map(|(n, v)| {
            (
                n.clone(),
                v.tensor().expect("tensor").to_f64().expect("f64"),
            )
        })
        .collect()
}

#[test]
fn borrowed_runs_match_owned_runs() {
    for level in [0, 1] {
        let s = session(level);
        for n in [1, 3, 8] {
            let t = x(n);
            let owned = s
                .run(HashMap::from([("x".to_string(), Value::Tensor(t.clone()))]))
                .expect("run");
            let borrowed = s.run_ref(&[("x", &t)]).expect("run_ref");
            assert_eq!(values(&owned), values(&borrowed), "level {level}, n {n}");
            // The caller's tensor is untouched.
            assert_eq!(t, x(n));
        }
    }
}

#[test]
fn optional_inputs_default_or_are_given() {
    let s = session(1);
    let t = x(2);
    let by_default = values(&s.run_ref(&[("x", &t)]).expect("run"));
    let two = Tensor::from_f32(vec![1], vec![2.0]).expect("tensor");
    let given = values(&s.run_ref(&[("x", &t), ("scale", &two)]).expect("run"));
    assert_eq!(by_default, given);
    let three = Tensor::from_f32(vec![1], vec![3.0]).expect("tensor");
    let scaled = values(&s.run_ref(&[("scale", &three), ("x", &t)]).expect("run"));
    for (a, b) in by_default[0].1.iter().zip(&scaled[0].1) {
        assert!((a * 1.5 - b).abs() < 1e-6, "{a} * 1.5 != {b}");
    }
}

/// Borrowed inputs, as `run_ref` takes them.
type Feed<'a> = Vec<(&'a str, &'a Tensor)>;

#[test]
fn mistakes_are_invalid_inputs_naming_the_input() {
    for level in [0, 1] {
        let s = session(level);
        let t = x(2);
        let f64s = Tensor::from_f64(smelt_ir::DType::F64, vec![2, 4], &[0.0; 8]).expect("t");
        let rank3 = Tensor::from_f32(vec![1, 2, 4], vec![0.0; 8]).expect("t");
        let cols5 = Tensor::from_f32(vec![2, 5], vec![0.0; 10]).expect("t");
        let cases: Vec<(&str, Feed, &str)> = vec![
            ("unknown name", vec![("x", &t), ("z", &t)], "'z'"),
            ("missing", vec![], "'x'"),
            ("dtype", vec![("x", &f64s)], "'x'"),
            ("rank", vec![("x", &rank3)], "'x'"),
            ("dimension", vec![("x", &cols5)], "'x'"),
            ("twice", vec![("x", &t), ("x", &t)], "'x'"),
        ];
        for (what, feed, names) in cases {
            let e = s.run_ref(&feed).expect_err(what);
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{what}: {e}");
            assert!(e.to_string().contains(names), "{what}: {e}");
        }
    }
}

#[test]
fn concurrent_borrowed_runs() {
    let s = session(1);
    let inputs: Vec<Tensor> = (1..=4).map(x).collect();
    let expected: Vec<_> = inputs
        .iter()
        .map(|t| values(&s.run_ref(&[("x", t)]).expect("run")))
        .collect();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..20 {
                    for (t, want) in inputs.iter().zip(&expected) {
                        assert_eq!(&values(&s.run_ref(&[("x", t)]).expect("run")), want);
                    }
                }
            });
        }
    });
}

#[test]
fn profiled_borrowed_runs_record_kernels() {
    let s = session(1);
    let t = x(2);
    let (out, events) = s.run_ref_profiled(&[("x", &t)]).expect("run");
    assert_eq!(values(&out), values(&s.run_ref(&[("x", &t)]).expect("run")));
    assert!(!events.is_empty());
}
