//! `smelt conformance`: pass/fail per case, time limits, expected-failures lists, JSON.

use prost::Message;
use smelt_onnx::proto::{
    tensor_proto::data_type, tensor_shape_proto, type_proto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use std::path::{Path, PathBuf};
use std::process::Command;

fn smelt(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_smelt"))
        .args(args)
        .output()
        .expect("smelt runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn vi(name: &str) -> ValueInfoProto {
    let dim = |d| tensor_shape_proto::Dimension {
        value: Some(tensor_shape_proto::dimension::Value::DimValue(d)),
        denotation: String::new(),
    };
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: data_type::FLOAT,
                shape: Some(TensorShapeProto { dim: vec![dim(3)] }),
            })),
            denotation: String::new(),
        }),
        ..Default::default()
    }
}

fn floats(v: &[f32]) -> Vec<u8> {
    TensorProto {
        dims: vec![v.len() as i64],
        data_type: data_type::FLOAT,
        float_data: v.to_vec(),
        ..Default::default()
    }
    .encode_to_vec()
}

/// A case folder: y = Relu(x), with one data set whose expected output is `expected`.
fn relu_case(root: &Path, name: &str, expected: &[f32]) -> PathBuf {
    let dir = root.join(name);
    let set = dir.join("test_data_set_0");
    std::fs::create_dir_all(&set).expect("mkdir");
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            node: vec![NodeProto {
                input: vec!["x".into()],
                output: vec!["y".into()],
                op_type: "Relu".into(),
                ..Default::default()
            }],
            name: "g".into(),
            input: vec![vi("x")],
            output: vec![vi("y")],
            ..Default::default()
        }),
        ..Default::default()
    };
    std::fs::write(dir.join("model.onnx"), model.encode_to_vec()).expect("write");
    std::fs::write(set.join("input_0.pb"), floats(&[-1.0, 0.5, 2.0])).expect("write");
    std::fs::write(set.join("output_0.pb"), floats(expected)).expect("write");
    dir
}

fn suite(name: &str) -> PathBuf {
    let root =
        std::env::temp_dir().join(format!("smelt-conformance-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    relu_case(&root, "case_good", &[0.0, 0.5, 2.0]);
    relu_case(&root, "case_bad", &[0.0, 0.5, 2.5]);
    root
}

#[test]
fn reports_each_failure_and_a_summary() {
    let root = suite("summary");
    let json = root.join("r.json");
    let (code, out) = smelt(&[
        "conformance",
        root.to_str().expect("utf8"),
        "--json",
        json.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL case_bad: "), "{out}");
    assert!(!out.contains("case_good"), "{out}");
    assert_eq!(
        out.lines().last(),
        Some("conformance: 1 passed, 1 failed, 0 skipped")
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).expect("json")).expect("parse");
    assert_eq!(doc["summary"]["passed"], 1);
    assert_eq!(doc["cases"].as_array().map(|a| a.len()), Some(2));
}

#[test]
fn tolerances_decide() {
    let root = suite("tolerance");
    // 2.5 vs 2.0 passes with a loose absolute tolerance.
    let (code, out) = smelt(&["conformance", root.to_str().expect("utf8"), "--atol", "0.6"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn expected_failures_must_match_exactly() {
    let root = suite("xfail");
    let list = root.join("xfail.txt");
    std::fs::write(
        &list,
        "# comment\ncase_bad  expected output is wrong on purpose\n",
    )
    .expect("write");
    let (code, out) = smelt(&[
        "conformance",
        root.to_str().expect("utf8"),
        "--expected-failures",
        list.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 0, "{out}");
    std::fs::write(
        &list,
        "case_bad  wrong on purpose\ncase_good  listed but passes\n",
    )
    .expect("write");
    let (code, out) = smelt(&[
        "conformance",
        root.to_str().expect("utf8"),
        "--expected-failures",
        list.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("XPASS case_good"), "{out}");
    std::fs::write(&list, "").expect("write");
    let (code, _) = smelt(&[
        "conformance",
        root.to_str().expect("utf8"),
        "--expected-failures",
        list.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 1);
}

/// A case whose model loops (almost) forever: Loop with a huge trip count and a pass-through body.
fn endless_case(root: &Path) {
    let dir = root.join("case_endless");
    let set = dir.join("test_data_set_0");
    std::fs::create_dir_all(&set).expect("mkdir");
    let scalar = |name: &str, ty: i32| ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: ty,
                shape: Some(TensorShapeProto { dim: vec![] }),
            })),
            denotation: String::new(),
        }),
        ..Default::default()
    };
    let ident = |i: &str, o: &str| NodeProto {
        input: vec![i.into()],
        output: vec![o.into()],
        op_type: "Identity".into(),
        ..Default::default()
    };
    let body = GraphProto {
        node: vec![ident("c_in", "c_out"), ident("v_in", "v_out")],
        name: "body".into(),
        input: vec![
            scalar("i", data_type::INT64),
            scalar("c_in", data_type::BOOL),
            vi("v_in"),
        ],
        output: vec![scalar("c_out", data_type::BOOL), vi("v_out")],
        ..Default::default()
    };
    let trip = TensorProto {
        data_type: data_type::INT64,
        int64_data: vec![1 << 40],
        name: "M".into(),
        ..Default::default()
    };
    let cond = TensorProto {
        data_type: data_type::BOOL,
        int32_data: vec![1],
        name: "C".into(),
        ..Default::default()
    };
    let node = NodeProto {
        input: vec!["M".into(), "C".into(), "x".into()],
        output: vec!["y".into()],
        op_type: "Loop".into(),
        attribute: vec![smelt_onnx::proto::AttributeProto {
            name: "body".into(),
            r#type: 5,
            g: Some(body),
            ..Default::default()
        }],
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            node: vec![node],
            name: "g".into(),
            initializer: vec![trip, cond],
            input: vec![vi("x")],
            output: vec![vi("y")],
            ..Default::default()
        }),
        ..Default::default()
    };
    std::fs::write(dir.join("model.onnx"), model.encode_to_vec()).expect("write");
    std::fs::write(set.join("input_0.pb"), floats(&[1.0, 2.0, 3.0])).expect("write");
    std::fs::write(set.join("output_0.pb"), floats(&[1.0, 2.0, 3.0])).expect("write");
}

#[test]
fn time_limit_fails_the_case_and_the_run_goes_on() {
    let root = suite("timeout");
    endless_case(&root);
    let (code, out) = smelt(&[
        "conformance",
        root.to_str().expect("utf8"),
        "--timeout",
        "1",
        "--jobs",
        "1",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL case_endless: timed out after 1s"),
        "{out}"
    );
    assert_eq!(
        out.lines().last(),
        Some("conformance: 1 passed, 2 failed, 0 skipped"),
        "{out}"
    );
}

#[test]
fn broken_case_fails_without_stopping_the_run() {
    let root = suite("broken");
    std::fs::write(root.join("case_good").join("model.onnx"), b"not a model").expect("write");
    let (code, out) = smelt(&["conformance", root.to_str().expect("utf8")]);
    assert_eq!(code, 1);
    assert!(
        out.contains("FAIL case_good: ") && out.contains("not a valid ONNX model"),
        "{out}"
    );
    assert_eq!(
        out.lines().last(),
        Some("conformance: 0 passed, 2 failed, 0 skipped")
    );
}
