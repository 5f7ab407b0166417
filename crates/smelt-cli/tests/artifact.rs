//! `smelt compile`, `verify`, and `run`/`explain`/`bench` of the artifact, on the example
//! model: the same output bytes as the .onnx path, clear exit codes for another shape, a
//! damaged file or an artifact given to `compile`.

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

fn example(file: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/mlp")
        .join(file);
    p.display().to_string()
}

fn tmp(name: &str) -> String {
    let d = std::env::temp_dir().join(format!("smelt-cli-artifact-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp");
    d.join(name).display().to_string()
}

#[test]
fn compiled_artifact_runs_like_the_model() {
    let art = tmp("mlp.smelt");
    let (code, out, err) = smelt(&[
        "compile",
        &example("model.onnx"),
        "--shape",
        "x=2x16",
        "--deterministic",
        "-o",
        &art,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("wrote"), "{out}");
    let (code, out, err) = smelt(&["verify", &art]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("deterministic true") && out.contains("x f32 [2, 16]"),
        "{out}"
    );
    let x = format!("x={}", example("x.npy"));
    let (d1, d2) = (tmp("out-onnx"), tmp("out-art"));
    let (c1, _, e1) = smelt(&[
        "run",
        &example("model.onnx"),
        "--input",
        &x,
        "--output-dir",
        &d1,
    ]);
    let (c2, _, e2) = smelt(&[
        "run",
        &art,
        "--input",
        &x,
        "--output-dir",
        &d2,
        "--threads",
        "1",
    ]);
    assert_eq!((c1, c2), (0, 0), "{e1} {e2}");
    let read = |d: &str| std::fs::read(format!("{d}/y.npy")).expect("output");
    assert_eq!(read(&d1), read(&d2), "the artifact's output differs");
    let (code, out, err) = smelt(&["explain", &art]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("loaded from the artifact"), "{out}");
    assert!(out.contains("deterministic true; no pass ran"), "{out}");
    let (code, _, err) = smelt(&["bench", &art, "--iterations", "3", "--warmup", "1"]);
    assert_eq!(code, 0, "{err}");

    // Another shape: invalid input (4), naming the input.
    let (code, _, err) = smelt(&["run", &art, "--random-inputs", "--shape", "x=5x16"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("'x'"), "{err}");
    // An artifact is not a model to compile.
    let (code, _, err) = smelt(&["compile", &art, "-o", &tmp("again.smelt")]);
    assert_eq!(code, 4, "{err}");
    // A flipped byte in the plan: invalid model (3), no panic.
    let mut b = std::fs::read(&art).expect("read");
    b[100] ^= 0x20;
    let bad = tmp("bad.smelt");
    std::fs::write(&bad, &b).expect("write");
    for cmd in ["run", "verify", "explain"] {
        let (code, _, err) =
            smelt(&[cmd, &bad, "--random-inputs"][..if cmd == "run" { 3 } else { 2 }]);
        assert_eq!(code, 3, "{cmd}: {err}");
        assert!(err.contains("checksum"), "{cmd}: {err}");
    }
    // A flipped weight byte: only `verify` reads the weights.
    let mut b = std::fs::read(&art).expect("read");
    let last = b.len() - 1;
    b[last] ^= 0x20;
    std::fs::write(&bad, &b).expect("write");
    let (code, _, err) = smelt(&["verify", &bad]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("weights checksum"), "{err}");
    let (code, _, err) = smelt(&["run", &bad, "--random-inputs"]);
    assert_eq!(code, 0, "mapping is lazy: {err}");
    let (code, _, err) = smelt(&["run", &bad, "--random-inputs", "--verify-weights"]);
    assert_eq!(code, 3, "{err}");
    // A truncated file.
    std::fs::write(&bad, &b[..b.len() / 2]).expect("write");
    let (code, _, err) = smelt(&["run", &bad, "--random-inputs"]);
    assert_eq!(code, 3, "{err}");
}

#[test]
fn presets_decide_and_explain_shows_it() {
    // edge: batch 1 (x is [batch, 16]), proven deterministic, threads timed and capped.
    let art = tmp("edge.smelt");
    let (code, out, err) = smelt(&[
        "compile",
        &example("model.onnx"),
        "--preset",
        "edge",
        "-o",
        &art,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("input 'x': batch (dim 0) set to 1"), "{out}");
    let (code, out, err) = smelt(&["explain", &art]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("preset edge:") && out.contains("threads: at most"),
        "{out}"
    );
    assert!(out.contains("deterministic true"), "{out}");
    // datacenter: batch buckets; a batch between them runs, one beyond them is refused.
    let art = tmp("dc.smelt");
    let (code, out, err) = smelt(&[
        "compile",
        &example("model.onnx"),
        "--preset",
        "datacenter",
        "--tuning-cache",
        &tmp("dc-tuning.json"),
        "-o",
        &art,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("batch buckets 1, 2, 4, 8"), "{out}");
    // Each bucket's plan is tuned (datacenter's default is --autotune fast).
    assert_eq!(out.matches("autotune fast (batch ").count(), 4, "{out}");
    let (code, _, err) = smelt(&["run", &art, "--random-inputs", "--shape", "x=3x16"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = smelt(&["run", &art, "--random-inputs", "--shape", "x=9x16"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("buckets 1, 2, 4, 8"), "{err}");
    // A budget too small names the largest parts and writes nothing.
    let small = tmp("small.smelt");
    let (code, _, err) = smelt(&[
        "compile",
        &example("model.onnx"),
        "--shape",
        "x=2x16",
        "--max-memory",
        "1K",
        "-o",
        &small,
    ]);
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains("does not fit") && err.contains("largest"),
        "{err}"
    );
    assert!(!std::path::Path::new(&small).exists());
    // Buckets need a symbolic batch: the example's x given a fixed shape still has one,
    // but a bucket of 0 is refused.
    let (code, _, err) = smelt(&[
        "compile",
        &example("model.onnx"),
        "--batch-buckets",
        "0,2",
        "-o",
        &small,
    ]);
    assert_eq!(code, 4, "{err}");
}

#[test]
fn autotune_records_its_choices_and_a_second_compile_times_nothing() {
    let cache = tmp("tuning.json");
    let _ = std::fs::remove_file(&cache);
    let compile = |art: &str, cache: &str| {
        smelt(&[
            "compile",
            &example("model.onnx"),
            "--shape",
            "x=64x16",
            "--threads",
            "2",
            "--autotune",
            "fast",
            "--tuning-cache",
            cache,
            "-o",
            art,
        ])
    };
    let (a1, a2) = (tmp("tuned1.smelt"), tmp("tuned2.smelt"));
    let (code, out, err) = compile(&a1, &cache);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("autotune fast (batch 64)") && out.contains("timed in"),
        "{out}"
    );
    assert!(std::path::Path::new(&cache).exists());
    let (code, out, err) = compile(&a2, &cache);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("from the tuning cache"), "{out}");
    // Both artifacts run the same kernels, and verify lists the decision.
    let kernels = |art: &str| {
        let (code, out, err) = smelt(&["explain", art]);
        assert_eq!(code, 0, "{err}");
        out.lines()
            .filter(|l| l.trim_start().starts_with("kernel:"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(kernels(&a1), kernels(&a2));
    let (code, out, err) = smelt(&["verify", &a2]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("autotune fast"), "{out}");
    let (code, _, err) = smelt(&["run", &a2, "--random-inputs"]);
    assert_eq!(code, 0, "{err}");
    // A damaged cache is set aside with a warning, then rewritten.
    std::fs::write(&cache, b"{not json").expect("write");
    let (code, out, err) = compile(&a2, &cache);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("tuning cache") && err.contains("ignored"),
        "{err}"
    );
    assert!(out.contains("timed in"), "{out}");
    let text = std::fs::read_to_string(&cache).expect("cache");
    assert!(text.starts_with("{\"version\":1"), "{text}");
    // Without a cache, nothing is remembered.
    let (code, out, err) = compile(&a2, "none");
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("timed in") && !out.contains("tuning cache:"),
        "{out}"
    );
}
