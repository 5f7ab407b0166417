//! Baseline adapters: a Python worker process (scripts/bench_baseline.py) that runs the
//! model in onnxruntime, tract or openvino and times each run call itself.

use crate::scenario::Runner;
use serde_json::Value;
use smelt_ir::{err, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The worker script, embedded so the binary works from any directory.
pub const WORKER_SCRIPT: &str = include_str!("../../../scripts/bench_baseline.py");

/// Runtimes the worker knows: `openvino` runs in f32 like smelt's default; `openvino-default`
/// with OpenVINO's own choice of precision (bf16 on CPUs with AVX512-BF16 or AMX), the
/// baseline of smelt's `--precision bf16` (the worker reports the precision it chose).
pub const RUNTIMES: &[&str] = &["onnxruntime", "tract", "openvino", "openvino-default"];

/// The Python to use: the one given, else `$SMELT_PYTHON`, else the project's venv in
/// `${SMELT_CACHE:-~/.cache/smelt}/venv/bin/python`.
pub fn find_python(arg: Option<&Path>) -> PathBuf {
    if let Some(p) = arg {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os("SMELT_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("SMELT_CACHE")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
            home.join(".cache").join("smelt")
        });
    cache.join("venv").join("bin").join("python")
}

/// A running baseline worker.
pub struct Worker {
    name: String,
    /// The runtime's version as the worker reported it.
    pub version: String,
    /// Load (session creation) time in milliseconds, as the worker measured it.
    pub load_ms: f64,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    /// Starts the worker for `runtime` on `model` with `threads` intra-op threads; `inputs`
    /// lists (name, .npy path) in the model's input order; `dir` holds the script.
    pub fn spawn(
        python: &Path,
        runtime: &str,
        model: &Path,
        inputs: &[(String, PathBuf)],
        threads: usize,
        dir: &Path,
    ) -> Result<Worker> {
        if !RUNTIMES.contains(&runtime) {
            return Err(err!(
                InvalidInput,
                "unknown baseline runtime '{runtime}' (known: {})",
                RUNTIMES.join(", ")
            ));
        }
        let script = dir.join("bench_baseline.py");
        std::fs::write(&script, WORKER_SCRIPT)
            .map_err(|e| err!(Io, "cannot write {}: {e}", script.display()))?;
        let manifest = dir.join("inputs.json");
        let pairs: Vec<(String, String)> = inputs
            .iter()
            .map(|(n, p)| (n.clone(), p.display().to_string()))
            .collect();
        std::fs::write(&manifest, serde_json::to_string(&pairs).unwrap_or_default())
            .map_err(|e| err!(Io, "cannot write {}: {e}", manifest.display()))?;
        let mut child = Command::new(python)
            .arg(&script)
            .args(["--runtime", runtime, "--threads", &threads.to_string()])
            .arg("--model")
            .arg(model)
            .arg("--inputs")
            .arg(&manifest)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                err!(
                    Io,
                    "{runtime}: cannot start Python '{}': {e}\n  hint: set SMELT_PYTHON to a Python with {runtime} and numpy (pip install {} numpy)",
                    python.display(),
                    pip_name(runtime)
                )
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(err!(Internal, "cannot talk to the baseline worker"));
        };
        let mut w = Worker {
            name: runtime.to_string(),
            version: String::new(),
            load_ms: 0.0,
            child,
            stdin,
            stdout: BufReader::new(stdout),
        };
        let hello = w.read_reply()?;
        if hello.get("ok").and_then(Value::as_bool) != Some(true) {
            let err = hello
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("failed");
            let hint = hello.get("hint").and_then(Value::as_str).unwrap_or("");
            let hint = if hint.is_empty() {
                String::new()
            } else {
                format!(
                    "\n  hint: {} -m pip install {} numpy, or set SMELT_PYTHON to a Python that has it",
                    python.display(),
                    pip_name(runtime)
                )
            };
            // The baseline cannot run here (not installed, or it refuses the model).
            return Err(err!(Unsupported, "{runtime}: {err}{hint}"));
        }
        w.version = hello
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        w.load_ms = hello
            .get("load_ms")
            .and_then(Value::as_f64)
            .unwrap_or(f64::NAN);
        Ok(w)
    }

    fn read_reply(&mut self) -> Result<Value> {
        let mut line = String::new();
        let n = self
            .stdout
            .read_line(&mut line)
            .map_err(|e| err!(Io, "{}: reading from the worker: {e}", self.name))?;
        if n == 0 {
            return Err(err!(
                Io,
                "{}: the baseline worker exited (see its messages above)",
                self.name
            ));
        }
        serde_json::from_str(&line).map_err(|e| {
            err!(
                Internal,
                "{}: bad reply from the worker ({e}): {}",
                self.name,
                line.trim()
            )
        })
    }
}

/// The PyPI package that provides a runtime.
pub fn pip_name(runtime: &str) -> &str {
    match runtime {
        "tract" => "tract",
        "openvino" | "openvino-default" => "openvino",
        _ => "onnxruntime",
    }
}

impl Runner for Worker {
    fn name(&self) -> &str {
        &self.name
    }

    fn run_block(&mut self, n: usize) -> Result<Vec<f64>> {
        writeln!(self.stdin, "run {n}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| err!(Io, "{}: writing to the worker: {e}", self.name))?;
        let r = self.read_reply()?;
        if let Some(e) = r.get("error").and_then(Value::as_str) {
            return Err(err!(Unsupported, "{}: {e}", self.name));
        }
        let ns = r
            .get("ns")
            .and_then(Value::as_array)
            .ok_or_else(|| err!(Internal, "{}: reply without timings", self.name))?;
        Ok(ns.iter().filter_map(Value::as_f64).collect())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_from_argument_wins() {
        assert_eq!(
            find_python(Some(Path::new("/x/py"))),
            PathBuf::from("/x/py")
        );
    }

    #[test]
    fn unknown_runtime_is_an_error() {
        let d = std::env::temp_dir();
        let e = Worker::spawn(Path::new("python3"), "nope", Path::new("m"), &[], 1, &d).err();
        let e = e.unwrap();
        assert_eq!(e.kind(), smelt_ir::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("unknown baseline runtime"), "{e}");
    }

    #[test]
    fn missing_python_gives_a_hint() {
        let d = std::env::temp_dir();
        let e = Worker::spawn(
            Path::new("/nonexistent/python"),
            "onnxruntime",
            Path::new("m"),
            &[],
            1,
            &d,
        )
        .err()
        .unwrap();
        assert_eq!(e.kind(), smelt_ir::ErrorKind::Io);
        let msg = e.to_string();
        assert!(msg.contains("hint") && !msg.contains("--"), "{msg}");
    }
}
