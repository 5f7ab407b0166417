//! smelt's CPU backend: the reference executor (plain loops, the correctness oracle for
//! every optimized path) and the fused executor that runs compiled kernel plans.

pub mod fused;
pub mod reference;

pub use reference::{eval_op, run_graph, run_graph_named, run_graph_prepared, Constants};
