//! Load against a running server over the KServe v2 REST protocol with binary tensors (as
//! tritonclient sends them): N clients on keep-alive connections, closed-loop or at Poisson
//! arrivals, each request timed to its last byte read.

use crate::answer::Expected;
use smelt_ir::{bail, err, DType, Data, Result, Tensor};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// What one load run measured.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Latency of each answered request in the measured window, milliseconds.
    pub latencies_ms: Vec<f64>,
    /// Requests answered 200 in the window.
    pub ok: usize,
    /// Other answers in the window by status code (0: the connection failed).
    pub errors: BTreeMap<u16, usize>,
    /// Answers 200 whose outputs the check found wrong (counted in `ok` too), and the
    /// first one's fault.
    pub wrong: usize,
    /// The first wrong answer: what was off.
    pub first_wrong: Option<String>,
    /// Answers 200 within the check's tolerance but not bit-equal to the expected outputs.
    pub inexact: usize,
    /// Length of the measured window, seconds.
    pub seconds: f64,
}

/// The socket address of `http://host:port` (or `host:port`).
pub fn address(url: &str) -> Result<SocketAddr> {
    let hostport = url.trim_start_matches("http://").trim_end_matches('/');
    hostport
        .to_socket_addrs()
        .map_err(|e| err!(InvalidInput, "server address '{url}': {e}"))?
        .next()
        .ok_or_else(|| err!(InvalidInput, "server address '{url}' resolves to nothing"))
}

fn datatype(d: DType) -> Result<&'static str> {
    Ok(match d {
        DType::F32 => "FP32",
        DType::F64 => "FP64",
        DType::I64 => "INT64",
        DType::I32 => "INT32",
        DType::I8 => "INT8",
        DType::U8 => "UINT8",
        DType::Bool => "BOOL",
        other => bail!(
            Unsupported,
            "{other} inputs are not sent by the load generator"
        ),
    })
}

fn le_bytes(t: &Tensor) -> Result<Vec<u8>> {
    Ok(match t.data() {
        Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Data::I8(v) => v.iter().map(|&x| x as u8).collect(),
        Data::U8(v) => v.to_vec(),
        Data::Bool(v) => v.iter().map(|&x| u8::from(x)).collect(),
        _ => bail!(
            Unsupported,
            "{} inputs are not sent by the load generator",
            t.dtype()
        ),
    })
}

/// One infer request, ready to send again and again.
pub struct InferRequest {
    head: Vec<u8>,
}

impl InferRequest {
    /// The request for `model` with these inputs (binary in, binary out).
    pub fn new(addr: SocketAddr, model: &str, inputs: &[(String, Tensor)]) -> Result<InferRequest> {
        let mut specs = Vec::new();
        let mut binary = Vec::new();
        for (name, t) in inputs {
            let b = le_bytes(t)?;
            specs.push(serde_json::json!({
                "name": name, "shape": t.shape(), "datatype": datatype(t.dtype())?,
                "parameters": {"binary_data_size": b.len()}
            }));
            binary.extend_from_slice(&b);
        }
        let json = serde_json::json!({"inputs": specs, "parameters": {"binary_data_output": true}})
            .to_string();
        let mut head = format!(
            "POST /v2/models/{model}/infer HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: {}\r\nContent-Length: {}\r\n\r\n",
            json.len(),
            json.len() + binary.len()
        )
        .into_bytes();
        head.extend_from_slice(json.as_bytes());
        head.extend_from_slice(&binary);
        Ok(InferRequest { head })
    }
}

/// An answer: its status, body, and the length of the body's JSON header when the body
/// also holds binary tensor data (`Inference-Header-Content-Length`).
struct Answer {
    status: u16,
    body: Vec<u8>,
    header_len: Option<usize>,
}

/// Sends raw request bytes on a keep-alive connection; returns the answer.
fn exchange(r: &mut BufReader<TcpStream>, bytes: &[u8]) -> std::io::Result<Answer> {
    r.get_mut().write_all(bytes)?;
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (mut len, mut header_len) = (0usize, None);
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            } else if k.eq_ignore_ascii_case("inference-header-content-length") {
                header_len = v.trim().parse().ok();
            }
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    Ok(Answer {
        status,
        body,
        header_len,
    })
}

fn connect(addr: SocketAddr) -> std::io::Result<BufReader<TcpStream>> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    Ok(BufReader::new(s))
}

/// `GET path` on a fresh connection; the body as text.
pub fn get(addr: SocketAddr, path: &str) -> Result<String> {
    let mut c = connect(addr).map_err(|e| err!(Io, "cannot connect to {addr}: {e}"))?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    let a =
        exchange(&mut c, req.as_bytes()).map_err(|e| err!(Io, "GET {path} from {addr}: {e}"))?;
    if a.status != 200 {
        bail!(Io, "GET {path} from {addr}: status {}", a.status);
    }
    Ok(String::from_utf8_lossy(&a.body).into_owned())
}

/// Arrival times of a Poisson process at `qps` over `seconds`, from the start.
pub fn poisson(qps: f64, seconds: f64, seed: u64) -> Vec<Duration> {
    let mut rng = crate::rng::Rng::new(seed);
    let (mut t, mut out) = (0.0, Vec::new());
    loop {
        t += rng.exponential(qps);
        if t >= seconds {
            return out;
        }
        out.push(Duration::from_secs_f64(t));
    }
}

/// How requests are sent.
pub enum Arrivals<'a> {
    /// Each client sends its next request when the last is answered.
    Closed,
    /// Requests are due at these times from the start (Poisson: [`poisson`]); a request
    /// is timed from when it was due, so a late send counts against the server.
    Open(&'a [Duration]),
}

/// Runs `clients` clients (connections) for `warmup` (not measured) then `duration`;
/// with `expected`, each measured answer 200 is checked against it.
pub fn run(
    addr: SocketAddr,
    req: &InferRequest,
    clients: usize,
    arrivals: Arrivals,
    (warmup, duration): (Duration, Duration),
    expected: Option<&Expected>,
) -> Outcome {
    let start = Instant::now();
    let (from, until) = (start + warmup, start + warmup + duration);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (next, arrivals) = (&next, &arrivals);
    let per_client: Vec<Outcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients.max(1))
            .map(|_| {
                scope.spawn(move || {
                    let mut out = Outcome::default();
                    let mut conn = None;
                    loop {
                        let due = match arrivals {
                            Arrivals::Closed => Instant::now(),
                            Arrivals::Open(times) => {
                                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let Some(&at) = times.get(k) else { break };
                                let due = start + at;
                                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                                due
                            }
                        };
                        if due >= until {
                            break;
                        }
                        let c = match conn.take().map_or_else(|| connect(addr), Ok) {
                            Ok(c) => conn.insert(c),
                            Err(_) => {
                                *out.errors.entry(0).or_default() += 1;
                                std::thread::sleep(Duration::from_millis(10));
                                continue;
                            }
                        };
                        let r = exchange(c, &req.head);
                        let done = Instant::now();
                        let measured = due >= from && done <= until;
                        match r {
                            Ok(a) if a.status == 200 && measured => {
                                out.ok += 1;
                                out.latencies_ms.push((done - due).as_secs_f64() * 1e3);
                                if let Some(want) = expected {
                                    judge(&mut out, &a, want);
                                }
                            }
                            Ok(a) if a.status == 200 => {}
                            Ok(a) => {
                                if measured {
                                    *out.errors.entry(a.status).or_default() += 1;
                                }
                            }
                            Err(_) => {
                                conn = None;
                                if measured {
                                    *out.errors.entry(0).or_default() += 1;
                                }
                            }
                        }
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let mut all = Outcome {
        seconds: duration.as_secs_f64(),
        ..Default::default()
    };
    for o in per_client {
        all.ok += o.ok;
        all.wrong += o.wrong;
        all.inexact += o.inexact;
        all.first_wrong = all.first_wrong.or(o.first_wrong);
        all.latencies_ms.extend(o.latencies_ms);
        for (k, v) in o.errors {
            *all.errors.entry(k).or_default() += v;
        }
    }
    all
}

/// Checks one answer's outputs against the expected ones and counts the verdict.
fn judge(out: &mut Outcome, a: &Answer, want: &Expected) {
    use crate::answer::{check, parse, Verdict};
    let verdict = parse(&a.body, a.header_len)
        .map_or_else(|e| Verdict::Wrong(e.to_string()), |got| check(&got, want));
    match verdict {
        Verdict::Exact => {}
        Verdict::Close => out.inexact += 1,
        Verdict::Wrong(why) => {
            out.wrong += 1;
            out.first_wrong.get_or_insert(why);
        }
    }
}

/// Sums the samples of a metric whose labels include `model="M"`, from Prometheus text.
pub fn metric(text: &str, name: &str, model: &str) -> f64 {
    let label = format!("model=\"{model}\"");
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{') && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Each `le` bucket of a histogram for model M, cumulative counts.
pub fn buckets(text: &str, name: &str, model: &str) -> Vec<(String, f64)> {
    let label = format!("model=\"{model}\"");
    let prefix = format!("{name}_bucket{{");
    text.lines()
        .filter(|l| l.starts_with(&prefix) && l.contains(&label))
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?.to_string();
            Some((le, l.rsplit(' ').next()?.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_read_per_model() {
        let text = "nv_inference_count{model=\"a\",version=\"1\"} 12\nnv_inference_count{model=\"b\",version=\"1\"} 3\n\
                    nv_inference_exec_count{model=\"a\",version=\"1\"} 4\n\
                    smelt_batch_size_bucket{le=\"1.0\",model=\"a\",version=\"1\"} 1\n";
        assert_eq!(metric(text, "nv_inference_count", "a"), 12.0);
        assert_eq!(metric(text, "nv_inference_exec_count", "a"), 4.0);
        assert_eq!(
            buckets(text, "smelt_batch_size", "a"),
            vec![("1.0".into(), 1.0)]
        );
        assert!(address("http://127.0.0.1:8000/").is_ok());
        let p = poisson(100.0, 10.0, 1);
        assert!((900..1100).contains(&p.len()), "{}", p.len());
        assert!(p.windows(2).all(|w| w[0] <= w[1]));
    }
}
