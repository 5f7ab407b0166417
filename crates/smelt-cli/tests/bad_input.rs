//! Malformed input never panics: each case gives a one-line `error[KIND]: ...` and the exit
//! code of its kind (3 invalid model, 4 invalid input, 5 unsupported, 8 I/O; 2 for usage).

use prost::Message;
use smelt_onnx::proto::{
    tensor_proto::data_type, tensor_shape_proto, type_proto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto,
    ValueInfoProto,
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
    let d = std::env::temp_dir().join(format!("smelt-bad-input-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn tensor_type(elem: i32, dims: &[i64]) -> TypeProto {
    TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: elem,
            shape: Some(TensorShapeProto {
                dim: dims
                    .iter()
                    .map(|&d| tensor_shape_proto::Dimension {
                        value: Some(tensor_shape_proto::dimension::Value::DimValue(d)),
                        denotation: String::new(),
                    })
                    .collect(),
            }),
        })),
        denotation: String::new(),
    }
}

fn vi(name: &str, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(tensor_type(data_type::FLOAT, dims)),
        ..Default::default()
    }
}

/// y = Relu(x) with x: f32[2,3]; `input` names the Relu's input.
fn relu_model(input: &str) -> ModelProto {
    let node = NodeProto {
        input: vec![input.into()],
        output: vec!["y".into()],
        name: "relu_1".into(),
        op_type: "Relu".into(),
        ..Default::default()
    };
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            node: vec![node],
            name: "g".into(),
            input: vec![vi("x", &[2, 3])],
            output: vec![vi("y", &[2, 3])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn write_model(dir: &Path, m: &ModelProto) -> String {
    let p = dir.join("model.onnx");
    std::fs::write(&p, m.encode_to_vec()).expect("write model");
    p.display().to_string()
}

fn npy_f64(dir: &Path, name: &str, shape: &str, n: usize) -> String {
    let header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    let mut h = header.clone();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    for i in 0..n {
        b.extend_from_slice(&(i as f64).to_le_bytes());
    }
    let p = dir.join(name);
    std::fs::write(&p, b).expect("write npy");
    p.display().to_string()
}

/// The exit code and `error[KIND]` a kind gives (see `smelt --help`).
fn code_of(kind: &str) -> i32 {
    match kind {
        "invalid_model" => 3,
        "invalid_input" => 4,
        "unsupported" => 5,
        "resource_exhausted" => 6,
        "deadline_exceeded" => 7,
        "io" => 8,
        other => panic!("no code for {other} here"),
    }
}

fn assert_one_line_error(code: i32, stderr: &str, kind: &str, must_contain: &str) {
    assert_eq!(code, code_of(kind), "stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected a one-line error, got: {stderr}");
    assert!(
        lines[0].starts_with(&format!("error[{kind}]: ")),
        "error '{}' should be of kind {kind}",
        lines[0]
    );
    assert!(
        lines[0].contains(must_contain),
        "error '{}' should mention '{must_contain}'",
        lines[0]
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn truncated_model_file() {
    let d = tmpdir("truncated");
    let bytes = relu_model("x").encode_to_vec();
    let p = d.join("model.onnx");
    std::fs::write(&p, &bytes[..bytes.len() / 2]).expect("write");
    let (code, _, err) = smelt(&["run", p.to_str().expect("utf8"), "--random-inputs"]);
    assert_one_line_error(code, &err, "invalid_model", "model.onnx");
}

#[test]
fn missing_model_file() {
    for cmd in ["run", "inspect", "check", "explain"] {
        let (code, _, err) = smelt(&[cmd, "/definitely/not/here/model.onnx"]);
        assert_one_line_error(code, &err, "io", "model.onnx");
    }
}

#[test]
fn unknown_op() {
    let d = tmpdir("unknown-op");
    let mut m = relu_model("x");
    if let Some(g) = m.graph.as_mut() {
        g.node[0].op_type = "NoSuchOp".into();
    }
    let p = write_model(&d, &m);
    let (code, _, err) = smelt(&["run", &p, "--random-inputs"]);
    assert_one_line_error(code, &err, "unsupported", "NoSuchOp");
    // `check` lists unsupported ops rather than failing on the first: exit 1.
    let (code, out, _) = smelt(&["check", &p]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("NoSuchOp"), "{out}");
}

#[test]
fn random_bytes_model_file() {
    let d = tmpdir("random");
    let p = d.join("model.onnx");
    let bytes: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&p, bytes).expect("write");
    for cmd in ["run", "inspect", "check"] {
        let (code, _, err) = smelt(&[cmd, p.to_str().expect("utf8")]);
        assert_one_line_error(code, &err, "invalid_model", "model.onnx");
    }
}

#[test]
fn node_with_missing_input() {
    let d = tmpdir("missing-node-input");
    let p = write_model(&d, &relu_model("nowhere"));
    let (code, _, err) = smelt(&["run", &p, "--random-inputs"]);
    assert_one_line_error(code, &err, "invalid_model", "relu_1");
    assert!(err.contains("nowhere"), "{err}");
}

#[test]
fn input_of_wrong_dtype() {
    let d = tmpdir("wrong-dtype");
    let p = write_model(&d, &relu_model("x"));
    let x = npy_f64(&d, "x.npy", "(2, 3)", 6);
    let (code, _, err) = smelt(&["run", &p, "--input", &format!("x={x}")]);
    assert_one_line_error(code, &err, "invalid_input", "input 'x'");
}

#[test]
fn input_of_wrong_shape() {
    let d = tmpdir("wrong-shape");
    let mut m = relu_model("x");
    if let Some(g) = m.graph.as_mut() {
        // Output too: a model whose f64 Relu declares an f32 result is itself invalid.
        g.input[0].r#type = Some(tensor_type(data_type::DOUBLE, &[2, 3]));
        g.output[0].r#type = Some(tensor_type(data_type::DOUBLE, &[2, 3]));
    }
    let p = write_model(&d, &m);
    let x = npy_f64(&d, "x.npy", "(3, 2)", 6);
    let (code, _, err) = smelt(&["run", &p, "--input", &format!("x={x}")]);
    assert_one_line_error(code, &err, "invalid_input", "input 'x'");
}

#[test]
fn malformed_npy_file() {
    let d = tmpdir("bad-npy");
    let p = write_model(&d, &relu_model("x"));
    let x = d.join("x.npy");
    std::fs::write(&x, b"\x93NUMPY\x01\x00").expect("write");
    let (code, _, err) = smelt(&["run", &p, "--input", &format!("x={}", x.display())]);
    assert_one_line_error(code, &err, "invalid_input", "x.npy");
}

#[test]
fn missing_npy_file() {
    let d = tmpdir("missing-npy");
    let p = write_model(&d, &relu_model("x"));
    let (code, _, err) = smelt(&["run", &p, "--input", "x=/definitely/not/here.npy"]);
    assert_one_line_error(code, &err, "io", "here.npy");
}

#[test]
fn missing_required_input() {
    let d = tmpdir("missing-input");
    let p = write_model(&d, &relu_model("x"));
    let (code, _, err) = smelt(&["run", &p]);
    assert_one_line_error(code, &err, "invalid_input", "'x'");
}

#[test]
fn external_data_leaving_the_model_folder() {
    let d = tmpdir("external-escape");
    let mut m = relu_model("w");
    let w = TensorProto {
        dims: vec![2, 3],
        data_type: data_type::FLOAT,
        name: "w".into(),
        data_location: 1,
        external_data: vec![
            StringStringEntryProto {
                key: "location".into(),
                value: "../secret.bin".into(),
            },
            StringStringEntryProto {
                key: "length".into(),
                value: "24".into(),
            },
        ],
        ..Default::default()
    };
    if let Some(g) = m.graph.as_mut() {
        g.initializer.push(w);
    }
    std::fs::write(d.parent().expect("parent").join("secret.bin"), [0u8; 24]).expect("write");
    let p = write_model(&d, &m);
    let (code, _, err) = smelt(&["run", &p, "--random-inputs"]);
    assert_one_line_error(code, &err, "invalid_model", "leaves the model's folder");
    for abs in ["/etc/passwd", "sub/../../secret.bin"] {
        let mut m2 = m.clone();
        if let Some(g) = m2.graph.as_mut() {
            g.initializer[0].external_data[0].value = abs.into();
        }
        let p = write_model(&d, &m2);
        let (code, _, err) = smelt(&["run", &p, "--random-inputs"]);
        assert_one_line_error(code, &err, "invalid_model", "leaves the model's folder");
    }
}

#[test]
fn random_inputs_obey_the_limits() {
    // A declared input of 2^40 x 2^40 floats aborted the process allocating it.
    let d = tmpdir("huge-input");
    let mut m = relu_model("x");
    if let Some(g) = m.graph.as_mut() {
        g.input = vec![vi("x", &[1 << 40, 1 << 40])];
        g.output = vec![vi("y", &[1 << 40, 1 << 40])];
    }
    let p = write_model(&d, &m);
    let (code, _, err) = smelt(&["run", &p, "--random-inputs", "--opt-level", "0"]);
    assert_one_line_error(code, &err, "resource_exhausted", "random f32 input");
    // Compiled for that shape, the plan's output is refused before anything runs.
    let (code, _, err) = smelt(&["run", &p, "--random-inputs"]);
    assert_one_line_error(
        code,
        &err,
        "resource_exhausted",
        "too many elements to address",
    );
    // A small limit holds too, and names the input.
    let p = write_model(&d, &relu_model("x"));
    let limit = ["--max-tensor-bytes", "16", "--opt-level", "0"];
    let (code, _, err) = smelt(&[&["run", p.as_str(), "--random-inputs"][..], &limit].concat());
    assert_one_line_error(code, &err, "resource_exhausted", "input [2, 3]");
    let (code, _, err) = smelt(&["run", &p, "--random-inputs", "--max-tensor-bytes", "lots"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn an_endless_loop_stops_at_the_timeout() {
    let d = tmpdir("endless");
    let p = write_model(&d, &smelt_fuzz::hostile::endless_loop(i64::MAX));
    let (code, _, err) = smelt(&["run", &p, "--random-inputs", "--timeout", "0.2"]);
    let err: String = err.lines().filter(|l| !l.starts_with("input ")).collect();
    assert_one_line_error(code, &err, "deadline_exceeded", "Loop iteration");
}

#[test]
fn usage_errors_exit_2() {
    let (code, _, _) = smelt(&["run"]);
    assert_eq!(code, 2);
    let (code, _, _) = smelt(&["no-such-command"]);
    assert_eq!(code, 2);
}

#[test]
fn help_documents_the_exit_codes() {
    let (code, out, _) = smelt(&["--help"]);
    assert_eq!(code, 0);
    for line in ["3  invalid model", "4  invalid input", "9  internal error"] {
        assert!(out.contains(line), "{out}");
    }
}

#[test]
fn runs_and_writes_outputs() {
    let d = tmpdir("ok");
    let p = write_model(&d, &relu_model("x"));
    let out = d.join("out");
    let (code, stdout, err) = smelt(&[
        "run",
        &p,
        "--random-inputs",
        "--seed",
        "3",
        "--output-dir",
        out.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("y: f32 [2, 3]"), "{stdout}");
    assert!(out.join("y.npy").is_file());
}

#[test]
fn bad_shapes_are_errors_in_every_command() {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/mlp/model.onnx")
        .display()
        .to_string();
    let cases = [
        ("x=1xq", "'q' is not a dimension"),
        ("x=-2x16", "'-2' is not a dimension"),
        ("x16", "NAME=DIMS"),
        ("nope=2x16", "'nope'"),
        ("x=2x16x1", "rank"),
        ("x=2x15", "dimension 1"),
    ];
    for cmd in [
        &["run", &model, "--random-inputs"][..],
        &["explain", &model][..],
        &["bench", &model, "--iterations", "1"][..],
    ] {
        for (shape, needle) in cases {
            let mut args = cmd.to_vec();
            args.extend(["--shape", shape]);
            let (code, _, err) = smelt(&args);
            assert_one_line_error(code, &err, "invalid_input", needle);
        }
        let mut twice = cmd.to_vec();
        twice.extend(["--shape", "x=2x16", "--shape", "x=3x16"]);
        let (code, _, err) = smelt(&twice);
        assert_one_line_error(code, &err, "invalid_input", "two shapes");
    }
}
