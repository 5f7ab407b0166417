//! What the server tests share: a server on ephemeral ports, a plain HTTP/1.1 client, and
//! the example model with its reference outputs from a session.

#![allow(dead_code)]

use smelt_ir::{Tensor, Value};
use smelt_runtime::Session;
use smelt_serve::{Running, ServeOptions};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;

/// The example model shipped with the repository (input x: f32[batch,16], output y).
pub fn mlp() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/mlp/model.onnx")
}

/// Options serving the example model on ephemeral local ports.
pub fn options() -> ServeOptions {
    ServeOptions {
        models: vec![
            smelt_serve::repository::from_arg(&format!("mlp={}", mlp().display())).unwrap(),
        ],
        host: "127.0.0.1".parse().unwrap(),
        http_port: Some(0),
        grpc_port: Some(0),
        metrics_port: Some(0),
        ..Default::default()
    }
}

/// Starts a server; returns it ready.
pub async fn serve(options: ServeOptions) -> Running {
    smelt_serve::start(options).await.expect("server starts")
}

/// An HTTP response.
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
}

/// One HTTP/1.1 request on a fresh connection (blocking: call from spawn_blocking).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Resp {
    let mut s = TcpStream::connect(addr).expect("connect");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("write");
    // A server may answer (413) before reading everything; a reset is then fine.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Resp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let end = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let n = usize::from_str_radix(std::str::from_utf8(&b[..end]).unwrap().trim(), 16).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&b[end + 2..end + 2 + n]);
        b = &b[end + 4 + n..];
    }
}

/// Async wrapper of [`http`].
pub async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
) -> Resp {
    let (method, path) = (method.to_string(), path.to_string());
    tokio::task::spawn_blocking(move || http(addr, &method, &path, &headers, &body))
        .await
        .unwrap()
}

/// Deterministic inputs for x: `rows` rows of 16.
pub fn x(rows: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..rows * 16)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2000) as f32 / 500.0 - 2.0
        })
        .collect()
}

/// y from a session on the same inputs (what `smelt run` computes).
pub fn reference(rows: usize, data: &[f32]) -> Vec<f32> {
    let s = Session::load(&mlp()).unwrap();
    let t = Tensor::from_f32(vec![rows, 16], data.to_vec()).unwrap();
    let out = s
        .run(HashMap::from([("x".to_string(), Value::Tensor(t))]))
        .unwrap();
    out[0].1.tensor().unwrap().as_f32().unwrap().to_vec()
}

/// Little-endian bytes of f32s.
pub fn le(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// f32s from little-endian bytes.
pub fn from_le(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Bits of f32s, to compare exactly.
pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}
