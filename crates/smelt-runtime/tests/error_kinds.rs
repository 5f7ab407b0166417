//! A caller's mistakes are invalid inputs, whatever the optimization level: unknown or
//! missing inputs, wrong element types, ranks and sizes, symbols bound two ways, shapes
//! not given for symbolic inputs. The messages name no command-line flag.

use smelt_ir::{ErrorKind, Model, Sequence, Tensor, Value};
use smelt_runtime::{InputShapes, Session, SessionOptions};
use std::collections::HashMap;

const GRAPH: &str = r#"graph "g" {
  input %0 "x": f32[n,3]
  input %1 "y": f32[n,3]
  %2 "s" = elementwise.Add (%0, %1) # "add"
  output %2
}"#;

fn session(level: u8, shapes: &[(&str, Vec<usize>)]) -> smelt_ir::Result<Session> {
    let model = Model {
        graph: smelt_ir::text::parse_graph(GRAPH).expect("parse"),
        opsets: vec![(String::new(), 17)],
        ir_version: 8,
        producer: "test".into(),
    };
    let options = SessionOptions {
        opt_level: level,
        input_shapes: {
            let mut s = InputShapes::new();
            for (n, d) in shapes {
                s.insert(*n, d.clone())?;
            }
            s
        },
        ..Default::default()
    };
    Session::from_model_with(model, &options)
}

fn f32s(shape: &[usize]) -> Value {
    let n = shape.iter().product();
    Value::Tensor(Tensor::from_f32(shape.to_vec(), vec![1.0; n]).expect("tensor"))
}

fn run_kind(level: u8, inputs: Vec<(&str, Value)>) -> ErrorKind {
    let s = session(level, &[]).expect("session");
    let inputs: HashMap<String, Value> = inputs
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    let e = s.run(inputs).expect_err("the run fails");
    assert!(!e.to_string().contains("--"), "{e}");
    e.kind()
}

#[test]
fn bad_inputs_are_invalid_inputs() {
    for level in [0, 1] {
        let i64s = Value::Tensor(Tensor::from_i64_vec(vec![2, 3], vec![0; 6]).expect("tensor"));
        let empty = Value::Sequence(Sequence {
            elem: None,
            items: Vec::new(),
        });
        let cases = vec![
            vec![("x", f32s(&[2, 3]))],
            vec![
                ("x", f32s(&[2, 3])),
                ("y", f32s(&[2, 3])),
                ("z", f32s(&[1])),
            ],
            vec![("x", f32s(&[2, 3])), ("y", i64s)],
            vec![("x", f32s(&[2, 3])), ("y", f32s(&[6]))],
            vec![("x", f32s(&[2, 3])), ("y", f32s(&[2, 4]))],
            vec![("x", f32s(&[2, 3])), ("y", f32s(&[5, 3]))],
            vec![("x", f32s(&[2, 3])), ("y", empty)],
        ];
        for (i, inputs) in cases.into_iter().enumerate() {
            assert_eq!(
                run_kind(level, inputs),
                ErrorKind::InvalidInput,
                "case {i} at level {level}"
            );
        }
    }
}

#[test]
fn shapes_that_do_not_fit_are_invalid_inputs() {
    let e = session(1, &[("nope", vec![2, 3])]).err().expect("fails");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let e = session(1, &[("x", vec![2, 4]), ("y", vec![2, 4])])
        .err()
        .expect("fails");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let s = session(1, &[]).expect("session");
    let e = s.plan_for(&InputShapes::new()).err().expect("no shapes");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert_eq!(
        e.message(),
        "no shape given for input 'x' (it has symbolic dimensions)"
    );
}
