//! smelt fast CPU kernels.
