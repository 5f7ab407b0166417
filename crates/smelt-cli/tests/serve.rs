//! `smelt serve` as a process: it gets ready, `smelt bench --server` loads it through the
//! protocol and reads the batches it formed, and SIGTERM stops it cleanly (exit 0).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MLP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/mlp/model.onnx");

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    r.split(' ').nth(1)?.parse().ok()
}

/// Kills the server if the test fails before stopping it (it would outlive the test).
struct Guard(Option<std::process::Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `smelt bench --server` for 1 s against the example model; stdout and stderr. Every
/// request must have been answered 200.
fn bench(http: u16, extra: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_smelt"))
        .args(["bench", MLP, "--shape", "x=1x16", "--duration", "1"])
        .args([
            "--server",
            &format!("http://127.0.0.1:{http}"),
            "--server-model",
            "mlp",
        ])
        .args(extra)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("errors by status {}"), "{stdout}");
    (stdout, stderr)
}

#[test]
fn serve_then_bench_against_it_then_sigterm() {
    let (http, grpc, metrics) = (free_port(), free_port(), free_port());
    let server = Command::new(env!("CARGO_BIN_EXE_smelt"))
        .args([
            "serve",
            "--host",
            "127.0.0.1",
            "--model",
            &format!("mlp={MLP}"),
        ])
        .args([
            "--http-port",
            &http.to_string(),
            "--grpc-port",
            &grpc.to_string(),
        ])
        .args([
            "--metrics-port",
            &metrics.to_string(),
            "--max-queue-delay-us",
            "1000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("smelt serve starts");
    let mut guard = Guard(None);
    let server = guard.0.insert(server);
    let t = Instant::now();
    while status(http, "/v2/health/ready") != Some(200) {
        assert!(t.elapsed() < Duration::from_secs(60), "not ready in 60 s");
        assert!(
            server.try_wait().unwrap().is_none(),
            "smelt serve exited early"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let metrics_url = format!("http://127.0.0.1:{metrics}");
    let (stdout, _) = bench(http, &["--concurrency", "4", "--metrics-url", &metrics_url]);
    assert!(stdout.contains("p99"), "{stdout}");
    assert!(stdout.contains("mean batch"), "{stdout}");
    // Poisson arrivals at 200 requests/s on 2 connections.
    let (_, stderr) = bench(http, &["--concurrency", "2", "--qps", "200"]);
    assert!(stderr.contains("Poisson at 200"), "{stderr}");
    let mut server = guard.0.take().unwrap();
    let term = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let code = server.wait().unwrap();
    let mut log = String::new();
    server
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(code.success(), "{code:?}: {log}");
    assert!(log.contains("shutting down"), "{log}");
}
