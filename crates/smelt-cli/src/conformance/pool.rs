//! A pool of worker processes; a case that crashes its worker or runs past the time limit
//! fails, the worker is replaced, and the run goes on.

use super::{Args, CaseResult};
use smelt_ir::{err, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

struct Worker {
    child: Child,
    stdin: ChildStdin,
    /// (case index, start time) of the case in flight.
    busy: Option<(usize, Instant)>,
}

type Msg = (usize, Option<String>);

fn spawn(slot: usize, a: &Args, tx: Sender<Msg>) -> Result<Worker> {
    let exe =
        std::env::current_exe().map_err(|e| err!(Io, "cannot find the smelt executable: {e}"))?;
    let mut child = Command::new(exe)
        .args([
            "conformance",
            "--worker",
            "--rtol",
            &a.rtol.to_string(),
            "--atol",
            &a.atol.to_string(),
            "--opt-level",
            &a.opt_level.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| err!(Io, "cannot start a conformance worker: {e}"))?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| err!(Internal, "worker has no stdin"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| err!(Internal, "worker has no stdout"))?;
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(l) => {
                    if tx.send((slot, Some(l))).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send((slot, None));
    });
    Ok(Worker {
        child,
        stdin,
        busy: None,
    })
}

fn name_of(p: &std::path::Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// Runs every case; results come back in case order.
pub fn run_all(cases: &[PathBuf], jobs: usize, a: &Args, timeout: f64) -> Result<Vec<CaseResult>> {
    let (tx, rx): (Sender<Msg>, Receiver<Msg>) = channel();
    let mut results: Vec<Option<CaseResult>> = vec![None; cases.len()];
    let mut workers: Vec<Option<Worker>> = Vec::new();
    // Generation per slot, so that messages from a replaced worker are ignored.
    let mut generation: Vec<usize> = Vec::new();
    let slots = jobs.min(cases.len());
    for s in 0..slots {
        workers.push(Some(spawn(s * 1_000_000, a, tx.clone())?));
        generation.push(0);
    }
    let mut next = 0usize;
    let mut done = 0usize;
    let limit = Duration::from_secs_f64(timeout.max(0.001));
    while done < cases.len() {
        for w in workers.iter_mut().take(slots) {
            if let Some(w) = w.as_mut() {
                if w.busy.is_none() && next < cases.len() {
                    let line = format!("{}\n", cases[next].display());
                    if w.stdin
                        .write_all(line.as_bytes())
                        .and_then(|_| w.stdin.flush())
                        .is_ok()
                    {
                        w.busy = Some((next, Instant::now()));
                        next += 1;
                    }
                }
            }
        }
        let now = Instant::now();
        let wait = workers
            .iter()
            .flatten()
            .filter_map(|w| {
                w.busy
                    .map(|(_, t)| (t + limit).saturating_duration_since(now))
            })
            .min()
            .unwrap_or(Duration::from_millis(50));
        let msg = rx.recv_timeout(wait.max(Duration::from_millis(1)));
        if let Ok((tag, line)) = msg {
            let s = tag / 1_000_000 % 1_000_000;
            let gen = tag % 1_000_000;
            if s < slots && gen == generation[s] {
                let mut replace = false;
                if let Some(w) = workers[s].as_mut() {
                    if let Some((idx, t)) = w.busy.take() {
                        let r = match &line {
                            Some(l) => parse_line(&name_of(&cases[idx]), l),
                            None => {
                                replace = true;
                                let status =
                                    w.child.wait().map(|st| st.to_string()).unwrap_or_default();
                                CaseResult {
                                    name: name_of(&cases[idx]),
                                    status: "fail",
                                    reason: format!("the worker crashed ({status})"),
                                    kind: None,
                                    seconds: t.elapsed().as_secs_f64(),
                                }
                            }
                        };
                        results[idx] = Some(r);
                        done += 1;
                    } else if line.is_none() {
                        replace = true;
                    }
                }
                if replace {
                    generation[s] += 1;
                    workers[s] = Some(spawn(s * 1_000_000 + generation[s], a, tx.clone())?);
                }
            }
        }
        // Time limits.
        for s in 0..slots {
            let expired = workers[s]
                .as_ref()
                .and_then(|w| w.busy)
                .filter(|(_, t)| t.elapsed() > limit);
            if let Some((idx, t)) = expired {
                if let Some(mut w) = workers[s].take() {
                    let _ = w.child.kill();
                    let _ = w.child.wait();
                }
                results[idx] = Some(CaseResult {
                    name: name_of(&cases[idx]),
                    status: "fail",
                    reason: format!("timed out after {timeout}s"),
                    kind: None,
                    seconds: t.elapsed().as_secs_f64(),
                });
                done += 1;
                generation[s] += 1;
                workers[s] = Some(spawn(s * 1_000_000 + generation[s], a, tx.clone())?);
            }
        }
    }
    for w in workers.iter_mut().flatten() {
        let _ = w.child.kill();
        let _ = w.child.wait();
    }
    Ok(results.into_iter().flatten().collect())
}

/// Reads a worker's `status TAB seconds TAB kind TAB reason` line.
fn parse_line(name: &str, l: &str) -> CaseResult {
    let mut parts = l.splitn(4, '\t');
    let status = match parts.next() {
        Some("pass") => "pass",
        Some("skip") => "skip",
        _ => "fail",
    };
    let seconds = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0.0);
    let kind = parts
        .next()
        .filter(|k| !k.is_empty() && *k != "-")
        .map(str::to_string);
    let reason = parts.next().unwrap_or("").to_string();
    CaseResult {
        name: name.to_string(),
        status,
        reason,
        kind,
        seconds,
    }
}
