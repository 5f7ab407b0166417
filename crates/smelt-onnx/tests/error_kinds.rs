//! The importer's errors carry the kind a caller acts on: a file that cannot be read is an
//! I/O error, a file that is not a model is an invalid model, an op smelt does not know is
//! unsupported, and a bad value file is an invalid input.

use prost::Message;
use smelt_ir::ErrorKind;
use smelt_onnx::proto::{
    tensor_proto::data_type, tensor_shape_proto, type_proto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use std::path::PathBuf;

fn vi(name: &str) -> ValueInfoProto {
    let dim = tensor_shape_proto::Dimension {
        value: Some(tensor_shape_proto::dimension::Value::DimValue(2)),
        denotation: String::new(),
    };
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: data_type::FLOAT,
                shape: Some(TensorShapeProto { dim: vec![dim] }),
            })),
            denotation: String::new(),
        }),
        ..Default::default()
    }
}

/// y = OP(x) in the default domain at opset 17.
fn model(op: &str) -> ModelProto {
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            node: vec![NodeProto {
                input: vec!["x".into()],
                output: vec!["y".into()],
                name: "n0".into(),
                op_type: op.into(),
                ..Default::default()
            }],
            name: "g".into(),
            input: vec![vi("x")],
            output: vec![vi("y")],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smelt-onnx-kinds-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    let p = d.join(name);
    std::fs::write(&p, bytes).expect("write");
    p
}

fn kind_of(path: &std::path::Path) -> ErrorKind {
    match smelt_onnx::load_model(path) {
        Ok(_) => panic!("{} loaded", path.display()),
        Err(e) => e.kind(),
    }
}

#[test]
fn a_missing_file_is_io() {
    let p = std::env::temp_dir().join("smelt-onnx-kinds-definitely-missing.onnx");
    assert_eq!(kind_of(&p), ErrorKind::Io);
}

#[test]
fn a_truncated_file_is_an_invalid_model() {
    let bytes = model("Relu").encode_to_vec();
    let p = write("truncated.onnx", &bytes[..bytes.len() / 2]);
    assert_eq!(kind_of(&p), ErrorKind::InvalidModel);
}

#[test]
fn an_unknown_op_is_unsupported() {
    let p = write("unknown-op.onnx", &model("NoSuchOp").encode_to_vec());
    assert_eq!(kind_of(&p), ErrorKind::Unsupported);
}

#[test]
fn a_node_reading_an_undefined_value_is_an_invalid_model() {
    let mut m = model("Relu");
    if let Some(g) = m.graph.as_mut() {
        g.node[0].input[0] = "nowhere".into();
    }
    let p = write("undefined-input.onnx", &m.encode_to_vec());
    assert_eq!(kind_of(&p), ErrorKind::InvalidModel);
}

#[test]
fn a_bad_value_file_is_an_invalid_input() {
    let t = TensorProto {
        dims: vec![2],
        data_type: data_type::FLOAT,
        raw_data: vec![0; 5],
        ..Default::default()
    };
    let e = smelt_onnx::decode_value_file(&t.encode_to_vec(), None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let e = smelt_onnx::decode_value_file(b"\xff\xff\xff", None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
}
