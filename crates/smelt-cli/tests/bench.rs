//! `smelt bench` end to end on the example model: JSON fields, reports, bad arguments.

use std::path::PathBuf;
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
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/mlp/model.onnx");
    root.display().to_string()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("smelt-bench-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

#[test]
fn single_stream_writes_json_and_report() {
    let d = tmpdir("single");
    let json = d.join("r.json");
    let rep = d.join("rep");
    let (code, out, err) = smelt(&[
        "bench",
        &example(),
        "--iterations",
        "30",
        "--json",
        json.to_str().unwrap(),
        "--report",
        rep.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("p50 ms"), "{out}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(j["smelt"]["latency_ms"]["p50"].as_f64().unwrap() > 0.0);
    assert_eq!(j["smelt"]["iterations"], 30);
    assert!(j["smelt"]["throughput_per_s"].as_f64().unwrap() > 0.0);
    assert!(j["environment"]["cores"].as_u64().unwrap() >= 1);
    for f in ["summary.md", "latency_cdf.svg", "result.json"] {
        assert!(rep.join(f).exists(), "{f}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn server_scenario_reports_queueing_latency() {
    let d = tmpdir("server");
    let json = d.join("s.json");
    let (code, out, err) = smelt(&[
        "bench",
        &example(),
        "--scenario",
        "server",
        "--qps",
        "200",
        "--iterations",
        "50",
        "--threads",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["server"]["requests"], 50);
    assert!(j["server"]["latency_ms"]["p99"].as_f64().unwrap() > 0.0);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    let m = example();
    // Bad options are invalid inputs (exit 4); what cannot be started or read is I/O (8).
    for (args, want, kind) in [
        (vec!["bench"], 4, "invalid_input"),
        (vec!["bench", &m, "--iterations", "0"], 4, "invalid_input"),
        (
            vec!["bench", &m, "--scenario", "server"],
            4,
            "invalid_input",
        ),
        (vec!["bench", &m, "--batch", "2"], 4, "invalid_input"),
        (
            vec!["bench", &m, "--vs", "nonesuch", "--iterations", "2"],
            4,
            "invalid_input",
        ),
        (
            vec![
                "bench",
                &m,
                "--vs",
                "onnxruntime",
                "--python",
                "/nonexistent/python",
                "--iterations",
                "2",
            ],
            8,
            "io",
        ),
        (vec!["bench", "/nonexistent/model.onnx"], 8, "io"),
    ] {
        let (code, out, err) = smelt(&args);
        assert_eq!(code, want, "{args:?}: {out}\n{err}");
        assert!(err.contains(&format!("error[{kind}]: ")), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // A flag out of its range is a usage error, from clap.
    let (code, _, err) = smelt(&["bench", &m, "--threads", "0"]);
    assert_eq!(code, 2, "{err}");
    let (_, _, err) = smelt(&[
        "bench",
        &m,
        "--vs",
        "onnxruntime",
        "--python",
        "/nonexistent/python",
    ]);
    assert!(
        err.contains("hint") && err.contains("--python PATH"),
        "{err}"
    );
}
