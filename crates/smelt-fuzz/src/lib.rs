//! Hostile-input tooling for smelt: a structure-aware mutator of ONNX models ([`mutate`])
//! that the fuzz targets (`fuzz/`) and the mutant campaign (`smelt-mutants`) share.
//!
//! The mutations are the ones that found crashes before: dims set to 0, negative or huge
//! values, attributes set to extremes, NaN and infinities, initializer dims and element
//! types changed, inputs rewired (cycles included), op types swapped, data truncated.

pub mod hostile;
pub mod inputs;
pub mod mutate;

pub use mutate::{mutate_bytes, mutate_model, Mutation};
