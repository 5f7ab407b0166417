//! smelt's model server: the KServe v2 / Triton inference protocol over HTTP and gRPC, a
//! dynamic batcher per model, a Triton-layout model repository and Prometheus metrics.

/// Messages and the tonic service generated from `proto/grpc_service.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("inference");
}

pub mod batch;
pub mod batcher;
pub mod config;
pub mod datatype;
pub mod error;
pub mod grpc;
mod grpc_contents;
pub mod http;
pub mod http_infer;
pub mod json;
pub mod lane;
pub mod meta;
pub mod metrics;
pub mod model;
pub mod pbtxt;
pub mod raw;
pub mod repository;
pub mod server;
pub mod state;

pub use server::{run, start, Running, ServeOptions};
