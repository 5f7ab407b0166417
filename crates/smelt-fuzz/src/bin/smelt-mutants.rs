//! The mutant campaign: mutates ONNX models (the node test cases, say) with the
//! structure-aware mutator and runs each mutant through `smelt run --random-inputs` in its
//! own process, under an address-space limit and a wall-clock limit. A clean error (exit
//! codes 3 to 8) or success is fine; an internal error, a panic, an abort, a signal or a
//! hang is a finding, and the mutant is kept to reproduce it.
//!
//! ```text
//! smelt-mutants --smelt target/release/smelt --models ~/.cache/smelt/data/node \
//!     --count 20000 --seed 1 --vmem-kb 4000000 --timeout 20 --keep target/mutants
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Args {
    smelt: PathBuf,
    models: PathBuf,
    count: usize,
    seed: u64,
    jobs: usize,
    vmem_kb: u64,
    timeout: f64,
    keep: PathBuf,
    extra: Vec<String>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        smelt: PathBuf::from("target/release/smelt"),
        models: PathBuf::new(),
        count: 1000,
        seed: 1,
        jobs: 1,
        vmem_kb: 4_000_000,
        timeout: 20.0,
        keep: PathBuf::from("target/mutants"),
        extra: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--" {
            a.extra.extend(it.by_ref());
            break;
        }
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {v}"))
        };
        match flag.as_str() {
            "--smelt" => a.smelt = v.into(),
            "--models" => a.models = v.into(),
            "--count" => a.count = num(&v)? as usize,
            "--seed" => a.seed = num(&v)?,
            "--jobs" => a.jobs = (num(&v)? as usize).max(1),
            "--vmem-kb" => a.vmem_kb = num(&v)?,
            "--timeout" => {
                a.timeout = v
                    .parse()
                    .map_err(|_| format!("--timeout: not a number: {v}"))?
            }
            "--keep" => a.keep = v.into(),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.models.as_os_str().is_empty() {
        return Err("--models DIR is required (a folder of cases, each with a model.onnx)".into());
    }
    // Mutants run in their own folders: a relative binary path must not depend on that.
    a.smelt = std::fs::canonicalize(&a.smelt)
        .map_err(|e| format!("--smelt {}: {e}", a.smelt.display()))?;
    Ok(a)
}

/// Every `*/model.onnx` under `dir`, sorted (so a seed names the same mutants everywhere).
fn models(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("model.onnx"))
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[derive(Default)]
struct Tally {
    ok: usize,
    by_code: [usize; 10],
    findings: Vec<String>,
}

/// How one mutant ended: Ok(exit code) for a clean exit, Err(what) for a finding.
fn run_one(a: &Args, model: &Path, dir: &Path) -> Result<i32, String> {
    let err_path = dir.join("stderr.txt");
    let err_file = std::fs::File::create(&err_path).map_err(|e| format!("stderr file: {e}"))?;
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("ulimit -v {}; exec \"$0\" \"$@\"", a.vmem_kb))
        .arg(&a.smelt)
        .arg("run")
        .arg(model)
        .arg("--random-inputs")
        .args(&a.extra)
        .current_dir(dir)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err_file);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start smelt: {e}"))?;
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(s);
        }
        if start.elapsed().as_secs_f64() > a.timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    // The line that says what happened: a panic's, an abort's, or the error line.
    let last = stderr
        .lines()
        .find(|l| {
            l.contains("panicked") || l.contains("memory allocation") || l.starts_with("error[")
        })
        .or_else(|| stderr.lines().last())
        .unwrap_or("")
        .to_string();
    let Some(status) = status else {
        return Err(format!("hang (over {} s): {last}", a.timeout));
    };
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c @ (0 | 3..=8)), _) => Ok(c),
        (Some(9), _) => Err(format!("internal error: {last}")),
        (Some(101), _) => Err(format!("panic: {last}")),
        (Some(c), _) => Err(format!("exit {c}: {last}")),
        (None, Some(sig)) => Err(format!("signal {sig}: {last}")),
        (None, None) => Err("no exit status".into()),
    }
}

fn main() -> ExitCode {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("smelt-mutants: {e}");
            return ExitCode::from(2);
        }
    };
    let models = models(&a.models);
    if models.is_empty() {
        eprintln!(
            "smelt-mutants: no */model.onnx under {}",
            a.models.display()
        );
        return ExitCode::from(2);
    }
    let work = std::env::temp_dir().join(format!("smelt-mutants-{}", std::process::id()));
    let next = AtomicUsize::new(0);
    let tally = Mutex::new(Tally::default());
    let started = Instant::now();
    std::thread::scope(|s| {
        for j in 0..a.jobs {
            let (a, models, next, tally, work) = (&a, &models, &next, &tally, &work);
            s.spawn(move || {
                let dir = work.join(j.to_string());
                if std::fs::create_dir_all(&dir).is_err() {
                    return;
                }
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= a.count {
                        break;
                    }
                    let src = &models[i % models.len()];
                    let seed = a.seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
                    let Some(bytes) = std::fs::read(src)
                        .ok()
                        .and_then(|b| smelt_fuzz::mutate_bytes(&b, seed))
                    else {
                        continue;
                    };
                    let path = dir.join("model.onnx");
                    if std::fs::write(&path, &bytes).is_err() {
                        continue;
                    }
                    let r = run_one(a, &path, &dir);
                    let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
                    match r {
                        Ok(0) => t.ok += 1,
                        Ok(c) => t.by_code[c as usize] += 1,
                        Err(what) => {
                            let case = src
                                .parent()
                                .and_then(|p| p.file_name())
                                .map(|n| n.to_string_lossy().to_string())
                                .unwrap_or_default();
                            let keep = a.keep.join(format!("{case}-seed{seed}.onnx"));
                            let _ = std::fs::create_dir_all(&a.keep);
                            let _ = std::fs::write(&keep, &bytes);
                            let line = format!("{}: {what}", keep.display());
                            eprintln!("FINDING {line}");
                            t.findings.push(line);
                        }
                    }
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&work);
    let t = tally.into_inner().unwrap_or_else(|e| e.into_inner());
    let codes: Vec<String> = (3..=8)
        .map(|c| format!("exit {c}: {}", t.by_code[c]))
        .collect();
    println!(
        "{} mutants of {} models (seed {}, ulimit -v {} KB, {} s limit) in {:.0} s: {} ran, {}; {} findings",
        a.count,
        models.len(),
        a.seed,
        a.vmem_kb,
        a.timeout,
        started.elapsed().as_secs_f64(),
        t.ok,
        codes.join(", "),
        t.findings.len()
    );
    println!(
        "{} passed, {} failed",
        a.count - t.findings.len(),
        t.findings.len()
    );
    if t.findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
