//! Models whose outputs are maps and sequences of maps (scikit-learn classifiers end in
//! ZipMap): `smelt run` prints them and writes JSON, `smelt conformance` reads and compares
//! the SequenceProto/MapProto files.

use prost::Message;
use smelt_onnx::proto::{
    attribute_proto::attribute_type, sequence_proto, tensor_proto::data_type, tensor_shape_proto,
    type_proto, AttributeProto, GraphProto, MapProto, ModelProto, NodeProto, OperatorSetIdProto,
    SequenceProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use std::path::{Path, PathBuf};
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

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smelt-maps-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn tensor(elem: i32) -> TypeProto {
    TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: elem,
            shape: Some(TensorShapeProto {
                dim: vec![
                    tensor_shape_proto::Dimension {
                        value: Some(tensor_shape_proto::dimension::Value::DimParam("N".into())),
                        denotation: String::new(),
                    },
                    tensor_shape_proto::Dimension {
                        value: Some(tensor_shape_proto::dimension::Value::DimValue(2)),
                        denotation: String::new(),
                    },
                ],
            }),
        })),
        denotation: String::new(),
    }
}

/// y = ZipMap(x) with labels 3 and 7: x f32[N,2] -> seq(map(int64, float)).
fn zipmap_model() -> ModelProto {
    let scalar = TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: data_type::FLOAT,
            shape: None,
        })),
        denotation: String::new(),
    };
    let map = TypeProto {
        value: Some(type_proto::Value::MapType(type_proto::Map {
            key_type: data_type::INT64,
            value_type: Some(Box::new(scalar)),
        })),
        denotation: String::new(),
    };
    let seq = TypeProto {
        value: Some(type_proto::Value::SequenceType(type_proto::Sequence {
            elem_type: Some(Box::new(map)),
        })),
        denotation: String::new(),
    };
    ModelProto {
        ir_version: 8,
        opset_import: vec![
            OperatorSetIdProto {
                domain: String::new(),
                version: 17,
            },
            OperatorSetIdProto {
                domain: "ai.onnx.ml".into(),
                version: 1,
            },
        ],
        graph: Some(GraphProto {
            node: vec![NodeProto {
                input: vec!["x".into()],
                output: vec!["y".into()],
                name: "zipmap".into(),
                op_type: "ZipMap".into(),
                domain: "ai.onnx.ml".into(),
                attribute: vec![AttributeProto {
                    name: "classlabels_int64s".into(),
                    r#type: attribute_type::INTS,
                    ints: vec![3, 7],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            name: "g".into(),
            input: vec![ValueInfoProto {
                name: "x".into(),
                r#type: Some(tensor(data_type::FLOAT)),
                ..Default::default()
            }],
            output: vec![ValueInfoProto {
                name: "y".into(),
                r#type: Some(seq),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn write_model(dir: &Path) -> String {
    let p = dir.join("model.onnx");
    std::fs::write(&p, zipmap_model().encode_to_vec()).expect("write");
    p.display().to_string()
}

#[test]
fn run_prints_maps_and_writes_json() {
    let d = tmpdir("run");
    let model = write_model(&d);
    let out = d.join("out");
    let (code, stdout, err) = smelt(&[
        "run",
        &model,
        "--random-inputs",
        "--shape",
        "x=2x2",
        "--output-dir",
        out.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.starts_with("y: seq of 2 [{3: "), "{stdout}");
    assert!(err.contains("written as JSON"), "{err}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("y.json")).expect("y.json"))
            .expect("JSON");
    let rows = j.as_array().expect("an array of maps");
    assert_eq!(rows.len(), 2);
    assert!(rows[0]["3"].is_f64() && rows[0]["7"].is_f64(), "{j}");
}

/// A SequenceProto of MapProto with int64 keys and float values (written as onnx's
/// numpy_helper.from_dict writes them: the values a sequence of scalar tensors).
fn maps_pb(rows: &[[f32; 2]], keys: [i64; 2]) -> Vec<u8> {
    let map = |r: &[f32; 2]| MapProto {
        key_type: data_type::INT64,
        keys: keys.to_vec(),
        values: Some(SequenceProto {
            elem_type: sequence_proto::data_type::TENSOR,
            tensor_values: r
                .iter()
                .map(|&v| TensorProto {
                    data_type: data_type::FLOAT,
                    float_data: vec![v],
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    SequenceProto {
        name: "y".into(),
        elem_type: sequence_proto::data_type::MAP,
        map_values: rows.iter().map(map).collect(),
        ..Default::default()
    }
    .encode_to_vec()
}

#[test]
fn conformance_reads_and_compares_sequences_of_maps() {
    let d = tmpdir("conformance");
    write_model(&d);
    let set = d.join("test_data_set_0");
    std::fs::create_dir_all(&set).expect("mkdir");
    let x = TensorProto {
        dims: vec![2, 2],
        data_type: data_type::FLOAT,
        float_data: vec![0.25, 0.75, 1.0, 0.0],
        ..Default::default()
    };
    std::fs::write(set.join("input_0.pb"), x.encode_to_vec()).expect("write");
    let dir = d.to_str().expect("utf8");
    // Keys in another order than the labels: maps have none.
    std::fs::write(
        set.join("output_0.pb"),
        maps_pb(&[[0.75, 0.25], [0.0, 1.0]], [7, 3]),
    )
    .expect("write");
    let (code, out, err) = smelt(&["conformance", dir]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("1 passed"), "{out}");
    // A wrong value fails, naming the item and the key.
    std::fs::write(
        set.join("output_0.pb"),
        maps_pb(&[[0.25, 0.75], [1.0, 0.5]], [3, 7]),
    )
    .expect("write");
    let (code, out, _) = smelt(&["conformance", dir]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("sequence item 1: map key 7"), "{out}");
    // A missing key too.
    std::fs::write(
        set.join("output_0.pb"),
        maps_pb(&[[0.25, 0.75], [1.0, 0.0]], [3, 8]),
    )
    .expect("write");
    let (code, out, _) = smelt(&["conformance", dir]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no key 8"), "{out}");
}
