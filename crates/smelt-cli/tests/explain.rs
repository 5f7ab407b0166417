//! `smelt explain` and `smelt run --profile` on the example model.

use std::path::PathBuf;
use std::process::Command;

fn smelt(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_smelt"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
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

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("smelt-explain-{}-{name}", std::process::id()))
}

#[test]
fn explain_json_has_kernels_memory_and_passes() {
    let json = tmp("explain.json");
    let (code, out, err) = smelt(&[
        "explain",
        &example(),
        "--shape",
        "x=3x16",
        "--json",
        json.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("kernel_count"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("json");
    assert_eq!(v["execution"], "kernels");
    let kernels = v["kernel_count"].as_u64().expect("kernel_count");
    assert!(kernels >= 1);
    assert_eq!(
        v["groups"].as_array().expect("groups").len() as u64,
        kernels
    );
    let g0 = &v["groups"][0];
    assert!(
        g0["nodes"].as_array().is_some_and(|n| !n.is_empty()),
        "{g0}"
    );
    assert!(v["memory"]["arena_bytes"].is_u64());
    assert!(v["memory"]["intermediate_bytes"].is_u64());
    assert!(v["passes"].as_array().is_some_and(|p| !p.is_empty()));
    assert_eq!(v["compilations"][0]["shapes"]["x"], "[3,16]");
    let _ = std::fs::remove_file(json);
}

#[test]
fn explain_without_a_shape_for_a_symbolic_input_names_it() {
    let (code, _, err) = smelt(&["explain", &example()]);
    assert_eq!(code, 4, "{err}");
    assert!(
        err.starts_with("error[invalid_input]: ")
            && err.contains("no shape given for input 'x'")
            && err.contains("--shape x=DIMS"),
        "{err}"
    );
}

#[test]
fn explain_level_zero_says_reference() {
    let (code, out, err) = smelt(&["explain", &example(), "--opt-level", "0"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("reference executor"), "{out}");
}

#[test]
fn run_profile_writes_a_chrome_trace_with_node_names() {
    let trace = tmp("trace.json");
    let (code, _, err) = smelt(&[
        "run",
        &example(),
        "--random-inputs",
        "--shape",
        "x=2x16",
        "--profile",
        trace.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).expect("trace")).expect("json");
    let events = v["traceEvents"].as_array().expect("events");
    assert!(!events.is_empty());
    assert!(events
        .iter()
        .all(|e| e["ph"] == "X" && e["args"]["onnx_nodes"].is_array()));
    let _ = std::fs::remove_file(trace);
}

#[test]
fn explain_with_inputs_reports_the_cost_around_the_kernels() {
    let json = tmp("per-call.json");
    let (code, out, err) = smelt(&[
        "explain",
        &example(),
        "--shape",
        "x=1x16",
        "--random-inputs",
        "--json",
        json.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("per call (") && out.contains("around them"),
        "{out}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("json");
    let c = &v["per_call"];
    assert!(c["calls"].as_u64().is_some_and(|n| n >= 5), "{c}");
    let (wall, kernels) = (c["wall_us"].as_f64(), c["kernels_us"].as_f64());
    assert!(
        wall.is_some_and(|w| w > 0.0) && kernels.is_some_and(|k| k > 0.0),
        "{c}"
    );
    assert!(
        c["around_kernels_us"].as_f64().is_some_and(|a| a >= 0.0),
        "{c}"
    );
    let _ = std::fs::remove_file(json);
}
