//! Valid models as real exporters write them load and run.

use prost::Message;
use smelt_onnx::proto::{
    tensor_proto::data_type, tensor_shape_proto, type_proto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use std::process::Command;

fn smelt(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_smelt"))
        .args(args)
        .output()
        .expect("smelt runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A float tensor value whose dims are `dim_param` strings, or sizes when they parse.
fn vi(name: &str, dims: &[&str]) -> ValueInfoProto {
    use tensor_shape_proto::dimension::Value;
    let dim = dims
        .iter()
        .map(|d| tensor_shape_proto::Dimension {
            value: Some(match d.parse::<i64>() {
                Ok(n) => Value::DimValue(n),
                Err(_) => Value::DimParam(d.to_string()),
            }),
            denotation: String::new(),
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: data_type::FLOAT,
                shape: Some(TensorShapeProto { dim }),
            })),
            denotation: String::new(),
        }),
        ..Default::default()
    }
}

/// PaddlePaddle exports write `dim_param: "?"` for every unknown dim: each is its own
/// unknown, not one symbol shared by all (6x3x48x192 was refused: "dimension 3 ('?') is
/// 192, but input 'x' has ? = 48").
#[test]
fn question_mark_dims_are_independent_unknowns() {
    let dir = std::env::temp_dir().join(format!("smelt-exports-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let m = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            node: vec![NodeProto {
                input: vec!["x".into(), "z".into()],
                output: vec!["y".into()],
                name: "add".into(),
                op_type: "Add".into(),
                ..Default::default()
            }],
            name: "g".into(),
            input: vec![vi("x", &["?", "3", "?", "?"]), vi("z", &["?"])],
            output: vec![vi("y", &["?", "3", "?", "?"])],
            ..Default::default()
        }),
        ..Default::default()
    };
    let p = dir.join("paddle.onnx");
    std::fs::write(&p, m.encode_to_vec()).expect("write model");
    let p = p.to_str().expect("utf8");
    for level in ["0", "1"] {
        let (code, out, err) = smelt(&[
            "run",
            p,
            "--random-inputs",
            "--shape",
            "x=6x3x48x192",
            "--shape",
            "z=192",
            "--opt-level",
            level,
        ]);
        assert_eq!(code, 0, "level {level}: {err}");
        assert!(out.contains("y: f32 [6, 3, 48, 192]"), "{out}");
    }
    let (code, _, err) = smelt(&["inspect", p]);
    assert_eq!(code, 0, "{err}");
}
