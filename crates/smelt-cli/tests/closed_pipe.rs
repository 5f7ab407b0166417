//! Output to a reader that has gone away (`smelt inspect MODEL | head`) stops quietly: the
//! command finishes with its usual status and no panic message ("failed printing to
//! stdout: Broken pipe").

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn example() -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/mlp");
    root.join("model.onnx").display().to_string()
}

/// Runs smelt with stdout a pipe whose read end is already closed (so the first write
/// fails with EPIPE, whatever the timing); returns (status, stderr).
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_smelt"))
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("smelt runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_command_stops_quietly_on_a_closed_stdout() {
    let model = example();
    let x = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/mlp/x.npy")
        .display()
        .to_string();
    let dir = std::env::temp_dir().join(format!("smelt-closed-pipe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out_dir = dir.join("out");
    let x_arg = format!("x={x}");
    let cases: Vec<Vec<&str>> = vec![
        vec!["inspect", &model],
        vec!["inspect", &model, "--ir"],
        vec!["check", &model],
        vec!["run", &model, "--input", &x_arg],
        vec![
            "run",
            &model,
            "--input",
            &x_arg,
            "--output-dir",
            out_dir.to_str().expect("utf8"),
        ],
        vec!["explain", &model, "--shape", "x=2x16"],
        vec!["bench", &model, "--iterations", "3", "--warmup", "1"],
        vec!["--help"],
    ]
    .into_iter()
    .collect();
    for args in cases {
        let (code, err) = with_closed_stdout(&args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
    }
    // The command still did its work.
    assert!(out_dir.join("y.npy").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_closed_stderr_is_no_failure_either() {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let (reader2, writer2) = std::io::pipe().expect("pipe");
    drop(reader2);
    let status = Command::new(env!("CARGO_BIN_EXE_smelt"))
        .args(["run", &example(), "--random-inputs", "--dump-after", "all"])
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(writer2))
        .status()
        .expect("smelt runs");
    assert_eq!(status.code(), Some(0));
}
