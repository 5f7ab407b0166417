//! `smelt serve`: serve models over the KServe v2 / Triton protocol (HTTP and gRPC) with
//! dynamic batching and Prometheus metrics; the server itself is the smelt-serve crate.

use smelt_ir::Result;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `smelt serve`.
#[derive(clap::Args)]
pub struct Args {
    /// A model to serve, as NAME=PATH (repeatable).
    #[arg(long = "model", value_name = "NAME=PATH")]
    models: Vec<String>,
    /// A model repository in Triton's layout: DIR/<model>/[config.pbtxt], DIR/<model>/<version>/model.onnx.
    #[arg(long, value_name = "DIR")]
    model_repository: Option<PathBuf>,
    /// The address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    host: IpAddr,
    /// The HTTP/REST port (0: any free port).
    #[arg(long, default_value_t = 8000)]
    http_port: u16,
    /// The gRPC port (0: any free port).
    #[arg(long, default_value_t = 8001)]
    grpc_port: u16,
    /// The Prometheus metrics port (0: any free port).
    #[arg(long, default_value_t = 8002)]
    metrics_port: u16,
    /// The largest request body or gRPC message, in MiB.
    #[arg(long, default_value_t = 64)]
    max_body_mib: usize,
    /// For --model models whose inputs and outputs have a variable dim 0: the largest
    /// dynamic batch (0: no batching).
    #[arg(long, default_value_t = 8)]
    max_batch_size: usize,
    /// For --model models: how long a request may wait for a fuller batch, in microseconds.
    #[arg(long, default_value_t = 0)]
    max_queue_delay_us: u64,
    /// For --model models: how many instances run requests at once.
    #[arg(long, default_value_t = 1)]
    instances: usize,
    /// For --model models: how many requests may wait; beyond, requests get 503 / UNAVAILABLE.
    #[arg(long, default_value_t = smelt_serve::config::DEFAULT_QUEUE_SIZE)]
    max_queue_size: usize,
    /// Threads of each model, all its instances together (default: the CPUs available).
    #[arg(long)]
    threads: Option<usize>,
}

/// Runs the subcommand: serves until SIGTERM or Ctrl-C.
pub fn main(a: Args) -> Result<ExitCode> {
    let models = a
        .models
        .iter()
        .map(|m| smelt_serve::repository::from_arg(m))
        .collect::<Result<Vec<_>>>()?;
    let options = smelt_serve::ServeOptions {
        models,
        repository: a.model_repository,
        host: a.host,
        http_port: Some(a.http_port),
        grpc_port: Some(a.grpc_port),
        metrics_port: Some(a.metrics_port),
        max_body_bytes: a.max_body_mib.saturating_mul(1 << 20),
        max_batch_size: a.max_batch_size,
        max_queue_delay: Duration::from_micros(a.max_queue_delay_us),
        instances: a.instances,
        max_queue_size: a.max_queue_size,
        threads: a.threads,
    };
    smelt_serve::run(options)?;
    Ok(ExitCode::SUCCESS)
}
