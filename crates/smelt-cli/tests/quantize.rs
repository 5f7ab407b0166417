//! `smelt quantize` on the example model: a QDQ file smelt runs on its integer kernels,
//! close to the float model; and clear errors for a missing or empty calibration folder.

use smelt_ir::Tensor;
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

fn example() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/mlp/model.onnx");
    p.display().to_string()
}

/// `smelt run MODEL --input INPUT` into `dir`: the output `y`.
fn run_y(model: &str, input: &str, dir: &Path) -> Tensor {
    let (code, _, err) = smelt(&[
        "run",
        model,
        "--input",
        input,
        "--output-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    smelt_runtime::npy::read(&dir.join("y.npy")).unwrap()
}

/// The largest difference between two f32 tensors.
fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    let (a, b) = (a.as_f32().unwrap(), b.as_f32().unwrap());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max)
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("smelt-quantize-{}-{name}", std::process::id()))
}

/// Deterministic inputs [4, 16] in [-2, 2).
fn batch(seed: u64) -> Tensor {
    let v = smelt_kernels::testing::rand_vec(64, seed);
    Tensor::from_f32(vec![4, 16], v.into_iter().map(|x| x * 4.0).collect()).unwrap()
}

#[test]
fn quantized_example_runs_on_integer_kernels_close_to_float() {
    let cal = tmp("cal");
    std::fs::create_dir_all(&cal).unwrap();
    for s in 0..4 {
        smelt_runtime::npy::write(&cal.join(format!("{s}.npy")), &batch(s)).unwrap();
    }
    for method in ["minmax", "percentile", "entropy"] {
        let out = tmp(&format!("q-{method}.onnx"));
        let (code, stdout, err) = smelt(&[
            "quantize",
            &example(),
            "--calibrate",
            cal.to_str().unwrap(),
            "--per-channel",
            "--method",
            method,
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{method}: {err}");
        assert!(stdout.contains("2 products quantized"), "{stdout}");
        let (code, stdout, err) = smelt(&["explain", out.to_str().unwrap(), "--shape", "x=4x16"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(stdout.matches("matmul.qgemm").count(), 2, "{stdout}");
        // Both models on a calibration batch: softmax outputs within 0.05.
        let x = cal.join("1.npy");
        let input = format!("x={}", x.display());
        let f = run_y(&example(), &input, &tmp("f32"));
        let q = run_y(
            &out.display().to_string(),
            &input,
            &tmp(&format!("int8-{method}")),
        );
        let worst = max_diff(&f, &q);
        assert!(worst <= 0.05, "{method}: softmax outputs {worst} apart");
    }
}

#[test]
fn a_missing_or_empty_calibration_folder_is_an_input_error() {
    let out = tmp("none.onnx");
    let (code, _, err) = smelt(&[
        "quantize",
        &example(),
        "--calibrate",
        "/nonexistent/dir",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("/nonexistent/dir"), "{err}");
    let empty = tmp("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, _, err) = smelt(&[
        "quantize",
        &example(),
        "--calibrate",
        empty.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("no calibration samples"), "{err}");
    let (code, _, err) = smelt(&[
        "quantize",
        &example(),
        "--calibrate",
        empty.to_str().unwrap(),
        "--method",
        "kl",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("--method kl"), "{err}");
}

#[test]
fn dynamic_quantization_needs_no_calibration_and_runs_on_integer_kernels() {
    let out = tmp("dyn.onnx");
    let (code, stdout, err) = smelt(&[
        "quantize",
        &example(),
        "--dynamic",
        "--per-channel",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("2 products and embedding tables quantized dynamically"),
        "{stdout}"
    );
    let (code, stdout, err) = smelt(&["explain", out.to_str().unwrap(), "--shape", "x=4x16"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(stdout.matches("matmul.qgemm").count(), 2, "{stdout}");
    assert_eq!(stdout.matches("dynamic-quantize").count(), 2, "{stdout}");
    let x = tmp("dyn-x.npy");
    smelt_runtime::npy::write(&x, &batch(7)).unwrap();
    let input = format!("x={}", x.display());
    let f = run_y(&example(), &input, &tmp("dyn-f32"));
    let q = run_y(&out.display().to_string(), &input, &tmp("dyn-int8"));
    let worst = max_diff(&f, &q);
    assert!(worst <= 0.05, "softmax outputs {worst} apart");
    // Calibration and --dynamic exclude each other; one of them is needed.
    let (code, _, err) = smelt(&[
        "quantize",
        &example(),
        "--dynamic",
        "--calibrate",
        "/tmp",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = smelt(&["quantize", &example(), "-o", out.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--calibrate"), "{err}");
}
