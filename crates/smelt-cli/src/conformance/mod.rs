//! `smelt conformance`: runs ONNX backend-test cases in worker processes (so a crash or a
//! hang fails one case, not the run) and compares with the expected-failures list. A case
//! that fails with an internal error (or a panic) is a bug in smelt: it fails the run even
//! when the list names it.

mod case;
mod compare;
mod pool;

use compare::Tolerance;
use smelt_ir::{err, ErrorKind, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Arguments of `smelt conformance`.
#[derive(clap::Args)]
pub struct Args {
    /// Case folders, or folders to search for them.
    #[arg(required_unless_present = "worker")]
    paths: Vec<PathBuf>,
    /// Relative tolerance for floats.
    #[arg(long, default_value_t = 1e-3)]
    rtol: f64,
    /// Absolute tolerance for floats.
    #[arg(long, default_value_t = 1e-7)]
    atol: f64,
    /// Seconds a case may run before it counts as failed.
    #[arg(long, default_value_t = 60.0)]
    timeout: f64,
    /// File listing the cases expected to fail, one per line: `name  reason`.
    #[arg(long)]
    expected_failures: Option<PathBuf>,
    /// Write every case's result here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Worker processes to run at once (default: the number of CPUs).
    #[arg(long)]
    jobs: Option<usize>,
    /// Optimization level: 0 runs the imported graph on the reference executor as is.
    #[arg(long, default_value_t = 1)]
    pub opt_level: u8,
    /// Internal: run cases named on stdin and report on stdout.
    #[arg(long, hide = true)]
    worker: bool,
}

/// The result of one case as reported.
#[derive(Clone)]
pub struct CaseResult {
    /// Case name (the folder name).
    pub name: String,
    /// "pass", "fail" or "skip".
    pub status: &'static str,
    /// Why it failed or was skipped.
    pub reason: String,
    /// The kind of the error it failed with (`invalid_model`, ...; `internal` for a panic),
    /// or None when it did not fail with an error (a mismatch, a crash, a time-out).
    pub kind: Option<String>,
    /// Seconds it took.
    pub seconds: f64,
}

/// Runs the subcommand.
pub fn main(a: Args) -> Result<ExitCode> {
    let tol = Tolerance {
        rtol: a.rtol,
        atol: a.atol,
    };
    if a.worker {
        return worker(tol, a.opt_level);
    }
    let expected = match &a.expected_failures {
        Some(p) => Some(read_expected(p)?),
        None => None,
    };
    let cases = case::discover(&a.paths)?;
    if cases.is_empty() {
        return Err(err!(
            InvalidInput,
            "no cases (folders with model.onnx) found under the given paths"
        ));
    }
    let jobs = a
        .jobs
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1);
    let started = Instant::now();
    let results = pool::run_all(&cases, jobs, &a, a.timeout)?;
    let verdict = judge(&results, expected.as_ref());
    for line in &verdict.lines {
        outln!("{line}");
    }
    if let Some(p) = &a.json {
        write_json(p, &results, a.rtol, a.atol)?;
    }
    errln!(
        "({} cases in {:.1}s with {jobs} workers)",
        results.len(),
        started.elapsed().as_secs_f64()
    );
    let Verdict {
        passed,
        failed,
        skipped,
        ok,
        ..
    } = verdict;
    outln!("conformance: {passed} passed, {failed} failed, {skipped} skipped");
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The results set against the expected-failures list.
struct Verdict {
    /// One line per failure, then the unexpected passes and the list's summary.
    lines: Vec<String>,
    passed: usize,
    failed: usize,
    skipped: usize,
    /// Whether the run matches the list (or, without a list, nothing failed).
    ok: bool,
}

/// Counts the results and checks them against the expected failures. A failure with an
/// internal error (a panic included) is a bug in smelt: no entry of the list covers it.
fn judge(results: &[CaseResult], expected: Option<&BTreeMap<String, String>>) -> Verdict {
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut lines = Vec::new();
    let mut failed_names = BTreeSet::new();
    let mut unexpected_fail = 0;
    for r in results {
        match r.status {
            "pass" => passed += 1,
            "skip" => skipped += 1,
            _ => {
                failed += 1;
                failed_names.insert(r.name.as_str());
                let internal = r.kind.as_deref() == Some(ErrorKind::Internal.name());
                let listed = expected.is_some_and(|e| e.contains_key(&r.name));
                let kind = r
                    .kind
                    .as_deref()
                    .map(|k| format!("[{k}] "))
                    .unwrap_or_default();
                let (tag, note) = match (listed, internal) {
                    (true, false) => ("xfail", ""),
                    (true, true) => (
                        "FAIL",
                        " (listed as an expected failure, but an internal error is a bug, never expected)",
                    ),
                    (false, _) => ("FAIL", ""),
                };
                if tag == "FAIL" {
                    unexpected_fail += 1;
                }
                lines.push(format!(
                    "{tag} {}: {kind}{}{note}",
                    r.name,
                    one_line(&r.reason)
                ));
            }
        }
    }
    let mut ok = failed == 0;
    if let Some(exp) = expected {
        let run: BTreeSet<&str> = results.iter().map(|r| r.name.as_str()).collect();
        // A case listed for a random output may match by chance: its pass is no news.
        let unexpected_pass: Vec<&String> = exp
            .iter()
            .filter(|(n, why)| {
                run.contains(n.as_str())
                    && !failed_names.contains(n.as_str())
                    && !why.starts_with(RANDOM_REASON)
            })
            .map(|(n, _)| n)
            .collect();
        for n in &unexpected_pass {
            lines.push(format!(
                "XPASS {n}: listed as an expected failure but passed (remove it from the list)"
            ));
        }
        ok = unexpected_pass.is_empty() && unexpected_fail == 0;
        lines.push(format!(
            "expected failures: {} listed, {unexpected_fail} unexpected failures, {} unexpected passes",
            exp.len(),
            unexpected_pass.len()
        ));
    }
    Verdict {
        lines,
        passed,
        failed,
        skipped,
        ok,
    }
}

/// How an expected-failures entry for a random output starts (such a case may also pass).
const RANDOM_REASON: &str = "random output";

fn one_line(s: &str) -> String {
    let s = s.replace('\n', " ");
    if s.chars().count() > 300 {
        format!("{}...", s.chars().take(300).collect::<String>())
    } else {
        s
    }
}

/// Reads an expected-failures file: `name  reason` per line; `#` starts a comment line.
pub fn read_expected(p: &PathBuf) -> Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(p).map_err(|e| err!(Io, "{}: {e}", p.display()))?;
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, reason) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        out.insert(name.to_string(), reason.trim().to_string());
    }
    Ok(out)
}

fn write_json(p: &PathBuf, results: &[CaseResult], rtol: f64, atol: f64) -> Result<()> {
    let cases: Vec<serde_json::Value> = results
        .iter()
        .map(|r| serde_json::json!({"name": r.name, "status": r.status, "kind": r.kind, "reason": r.reason, "seconds": r.seconds}))
        .collect();
    let count = |s: &str| results.iter().filter(|r| r.status == s).count();
    let doc = serde_json::json!({
        "tolerance": {"rtol": rtol, "atol": atol},
        "summary": {"passed": count("pass"), "failed": count("fail"), "skipped": count("skip")},
        "cases": cases,
    });
    let text = serde_json::to_string_pretty(&doc).map_err(|e| err!(Internal, "{e}"))?;
    std::fs::write(p, text).map_err(|e| err!(Io, "{}: {e}", p.display()))
}

/// Worker side: one case folder per stdin line, one result line per case on stdout:
/// `status TAB seconds TAB kind TAB reason`, the kind `-` unless the case failed with an error.
fn worker(tol: Tolerance, opt_level: u8) -> Result<ExitCode> {
    let options = smelt_runtime::SessionOptions {
        opt_level,
        ..Default::default()
    };
    // Panics are caught per case and reported as failures; keep stderr quiet.
    std::panic::set_hook(Box::new(|_| {}));
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let dir = PathBuf::from(line?);
        let t = Instant::now();
        let outcome = std::panic::catch_unwind(|| case::run_case(&dir, tol, &options))
            .unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                // A panic is a bug, as an internal error is.
                case::Outcome::Error(err!(Internal, "panic: {msg}"))
            });
        let (status, kind, reason) = match outcome {
            case::Outcome::Pass => ("pass", "-", String::new()),
            case::Outcome::Mismatch(r) => ("fail", "-", r),
            case::Outcome::Error(e) => ("fail", e.kind().name(), e.to_string()),
            case::Outcome::Skip(r) => ("skip", "-", r),
        };
        writeln!(
            out,
            "{status}\t{:.4}\t{kind}\t{}",
            t.elapsed().as_secs_f64(),
            one_line(&reason)
        )?;
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, status: &'static str, kind: Option<ErrorKind>) -> CaseResult {
        CaseResult {
            name: name.into(),
            status,
            reason: "why".into(),
            kind: kind.map(|k| k.name().to_string()),
            seconds: 0.0,
        }
    }

    #[test]
    fn an_internal_error_fails_even_when_listed() {
        let listed: BTreeMap<String, String> = ["mismatch", "unsupported", "bug"]
            .iter()
            .map(|n| (n.to_string(), "reason".to_string()))
            .collect();
        let mut results = vec![
            result("ok", "pass", None),
            result("mismatch", "fail", None),
            result("unsupported", "fail", Some(ErrorKind::Unsupported)),
        ];
        let v = judge(&results, Some(&listed));
        assert!(v.ok, "{:?}", v.lines);
        assert_eq!((v.passed, v.failed, v.skipped), (1, 2, 0));
        assert!(v.lines[1].starts_with("xfail unsupported: [unsupported] why"));
        results.push(result("bug", "fail", Some(ErrorKind::Internal)));
        let v = judge(&results, Some(&listed));
        assert!(!v.ok, "{:?}", v.lines);
        assert!(
            v.lines
                .iter()
                .any(|l| l.starts_with("FAIL bug: [internal] why (listed")),
            "{:?}",
            v.lines
        );
        assert!(v.lines.iter().any(|l| l.contains("1 unexpected failures")));
        // Without a list every failure fails the run.
        assert!(!judge(&results[..1], None)
            .lines
            .iter()
            .any(|l| l.contains("FAIL")));
        assert!(!judge(&results, None).ok);
    }

    #[test]
    fn a_random_case_may_pass_by_chance() {
        let mut listed = BTreeMap::new();
        listed.insert("coin".to_string(), "random output: a draw".to_string());
        listed.insert("fixed".to_string(), "expected output: rounding".to_string());
        let results = vec![result("coin", "pass", None), result("fixed", "fail", None)];
        assert!(judge(&results, Some(&listed)).ok);
        let results = vec![result("coin", "fail", None), result("fixed", "pass", None)];
        assert!(!judge(&results, Some(&listed)).ok);
    }
}
