//! smelt's graph passes: small rewrites of a [`smelt_ir::Graph`], run in a fixed pipeline
//! per optimization level by the [`PassManager`], which can show the IR after any pass.

pub mod blocked_layout;
pub mod cancel_reshapes;
pub mod cancel_transposes;
pub mod cse;
pub mod dead_code;
mod dynamic_int8;
pub mod flatten_sequences;
pub mod fold_batchnorm;
pub mod fold_constants;
pub mod fold_scalars;
pub mod infer_shapes;
pub mod inline_if;
pub mod lower;
pub mod manager;
pub mod precision;
pub mod quantized;
pub mod recognize;
pub mod remove_noops;
pub mod rewire;

pub use manager::{Evaluator, Pass, PassContext, PassManager, PassReport};
