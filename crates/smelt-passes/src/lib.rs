//! smelt's graph passes and the pass manager (passes arrive with the compiler issue).
