//! Element counts of sub-shapes that cannot overflow.

/// The product of some dims, saturating at `usize::MAX`. A stored tensor's dims multiply
/// to at most its element count, but an empty tensor's other dims may multiply past any
/// integer; kernels that count the outer or inner part of such a shape stay well defined
/// (and walk nothing, as the zero dim is in their loop bounds too).
pub fn dims_product(dims: &[usize]) -> usize {
    dims.iter().fold(1usize, |a, &d| a.saturating_mul(d))
}
