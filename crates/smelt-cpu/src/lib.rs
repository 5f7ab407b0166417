//! smelt's CPU backend. For now: the reference executor, plain loops that are the
//! correctness oracle for every optimized path.

pub mod reference;

pub use reference::{eval_op, run_graph, run_graph_named, run_graph_prepared, Constants};
