//! smelt's benchmark harness: scenarios, statistics, baseline adapters, environment record,
//! reports and roofline microbenchmarks. Each module has one job; `smelt bench` glues them.

#![warn(missing_docs)]

pub mod answer;
pub mod baseline;
pub mod env;
pub mod gemm;
pub mod indices;
pub mod progress;
pub mod remote;
pub mod report;
pub mod rng;
pub mod roofline;
pub mod scenario;
pub mod stats;
pub mod svg;
