//! Kernel errors say whose fault they are: a data-dependent index out of range is the
//! caller's (invalid input), unless the index is one of the model's own constants (invalid
//! model); an element type a kernel does not take is unsupported.

use smelt_ir::{ErrorKind, Tensor, Value};
use std::collections::HashMap;

fn run(text: &str, inputs: Vec<(&str, Tensor)>) -> smelt_ir::Error {
    let g = smelt_ir::text::parse_graph(text).unwrap_or_else(|e| panic!("{e}"));
    let inputs: HashMap<String, Value> = inputs
        .into_iter()
        .map(|(n, t)| (n.to_string(), Value::Tensor(t)))
        .collect();
    smelt_reference::run_graph_named(&g, inputs).expect_err("the run fails")
}

fn f32s(n: usize) -> Tensor {
    Tensor::from_f32(vec![n], vec![1.0; n]).expect("tensor")
}

#[test]
fn an_index_from_the_caller_is_an_invalid_input() {
    let text = r#"graph "g" {
  input %0 "x": f32[3]
  input %1 "i": i64[1]
  %2 "y" = layout.Gather {"axis":0} (%0, %1) # "gather"
  output %2
}"#;
    let i = Tensor::from_i64_vec(vec![1], vec![7]).expect("tensor");
    let e = run(text, vec![("x", f32s(3)), ("i", i)]);
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("node gather (Gather)"), "{e}");
}

#[test]
fn an_index_from_the_model_is_an_invalid_model() {
    let text = r#"graph "g" {
  input %0 "x": f32[3]
  const %1 "d" = {"dtype":"F32","shape":[3],"data":{"F32":[1.0,2.0,3.0]}}
  const %2 "i" = {"dtype":"I64","shape":[1],"data":{"I64":[7]}}
  %3 "g" = layout.Gather {"axis":0} (%1, %2) # "gather"
  %4 "y" = elementwise.Add (%0, %3) # "add"
  output %4
}"#;
    let e = run(text, vec![("x", f32s(3))]);
    assert_eq!(e.kind(), ErrorKind::InvalidModel, "{e}");
}

#[test]
fn a_type_a_kernel_does_not_take_is_unsupported_and_a_missing_input_invalid() {
    let text = r#"graph "g" {
  input %0 "x": str[2]
  %1 "y" = elementwise.Exp (%0) # "exp"
  output %1
}"#;
    let s = Tensor::new(
        smelt_ir::DType::Str,
        vec![2],
        smelt_ir::Data::Str(vec!["a".to_string(), "b".to_string()].into()),
    )
    .expect("tensor");
    let e = run(text, vec![("x", s)]);
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    let e = run(text, vec![]);
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
}
