//! smelt's CPU backend: the fused executor that runs compiled kernel plans with the fast
//! kernels of `smelt-kernels`, falling back to the reference executor (`smelt-reference`)
//! for ops that have no fast kernel.

pub mod fused;
