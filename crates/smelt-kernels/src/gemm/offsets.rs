//! Micro-kernels whose B rows sit at per-step offsets: `R x NR` of C from a packed A panel
//! (`a + p * MR + r`) and, for step `p`, the `NR` contiguous floats at `b + offs[p]`. An
//! implicit-GEMM convolution reads its im2col rows this way straight from a padded copy of
//! its input (one offset per tap), so its B panels are never packed.
//!
//! Each element is summed over k in order with one multiply-add per step, like the other
//! micro-kernels of its ISA.

use super::micro::{rows_table, MAX_MR};
use crate::simd::Vf;

/// `(k, a, b, offs, tile, tile_row_step)`: writes the `R x NR` tile.
///
/// # Safety
/// `a` holds a packed panel of `k` steps, `offs` `k` offsets, `b + offs[p]` `NR` readable
/// floats for each step, `tile` `R` rows of `NR` floats `tile_row_step` apart.
pub type OffsetsFn = unsafe fn(usize, *const f32, *const f32, *const isize, *mut f32, usize);

/// The k loop over lanes `V`: `R` rows of two vectors, A's panel `MR` floats a step.
#[inline(always)]
unsafe fn steps<V: Vf, const R: usize, const MR: usize>(
    k: usize,
    a: *const f32,
    b: *const f32,
    offs: *const isize,
) -> ([V; R], [V; R]) {
    const UNROLL: usize = 4;
    const AHEAD: usize = 16;
    let mut c0 = [V::splat(0.0); R];
    let mut c1 = [V::splat(0.0); R];
    let (mut ap, mut op) = (a, offs);
    // A nested function, not a closure: a closure would not inherit the caller's target
    // features, and its vector operations would not be inlined.
    #[inline(always)]
    unsafe fn step<V: Vf, const R: usize>(
        b: *const f32,
        ap: *const f32,
        op: *const isize,
        c0: &mut [V; R],
        c1: &mut [V; R],
    ) {
        let bp = b.offset(*op);
        let (b0, b1) = (V::load(bp), V::load(bp.add(V::LANES)));
        for r in 0..R {
            let av = V::splat(*ap.add(r));
            c0[r] = av.fma(b0, c0[r]);
            c1[r] = av.fma(b1, c1[r]);
        }
    }
    // B's rows sit wherever their taps put them, a pattern the hardware prefetchers do
    // not follow: each step asks for the lines of the row `AHEAD` steps on (of the last
    // row, near the end). A 128 -> 128 channel 3x3 stride-2 56x56 layer on a 2-vCPU Xeon,
    // one thread: 1.83 -> 1.70 ms (8 to 32 steps on gave the same); YOLOv8n 14.66 -> 14.36.
    let last = offs.add(k.saturating_sub(1));
    for _ in 0..k / UNROLL {
        for u in 0..UNROLL {
            let row = b.offset(*op.wrapping_add(u + AHEAD).min(last));
            crate::simd::prefetch_read(row);
            crate::simd::prefetch_read(row.add(V::LANES));
            crate::simd::prefetch_read(row.add(2 * V::LANES - 1));
            step(b, ap.add(u * MR), op.add(u), &mut c0, &mut c1);
        }
        ap = ap.add(UNROLL * MR);
        op = op.add(UNROLL);
    }
    for _ in 0..k % UNROLL {
        step(b, ap, op, &mut c0, &mut c1);
        ap = ap.add(MR);
        op = op.add(1);
    }
    (c0, c1)
}

/// Stores a tile of two vectors a row.
#[inline(always)]
unsafe fn store<V: Vf, const R: usize>(c0: [V; R], c1: [V; R], t: *mut f32, ldt: usize) {
    for r in 0..R {
        c0[r].store(t.add(r * ldt));
        c1[r].store(t.add(r * ldt + V::LANES));
    }
}

/// The portable kernel: `R` rows of [`super::micro::PORTABLE_NR`] floats.
unsafe fn portable<const R: usize>(
    k: usize,
    a: *const f32,
    b: *const f32,
    offs: *const isize,
    t: *mut f32,
    ldt: usize,
) {
    const NR: usize = super::micro::PORTABLE_NR;
    const MR: usize = super::micro::PORTABLE_MR;
    let mut c = [[0f32; NR]; R];
    for p in 0..k {
        let bp = std::slice::from_raw_parts(b.offset(*offs.add(p)), NR);
        for (r, row) in c.iter_mut().enumerate() {
            let av = *a.add(p * MR + r);
            for j in 0..NR {
                row[j] += av * bp[j];
            }
        }
    }
    for (r, row) in c.iter().enumerate() {
        std::slice::from_raw_parts_mut(t.add(r * ldt), NR).copy_from_slice(row);
    }
}

/// The portable family's kernels, by row count.
pub fn portable_table() -> [OffsetsFn; MAX_MR] {
    rows_table!(portable, super::micro::PORTABLE_MR)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{steps, store, OffsetsFn, MAX_MR};
    use crate::gemm::micro::rows_table;
    use crate::gemm::micro::x86::{AVX2_MR, AVX512_MR};
    use crate::simd::{Y8, Z16};

    #[inline(never)]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2<const R: usize>(
        k: usize,
        a: *const f32,
        b: *const f32,
        offs: *const isize,
        t: *mut f32,
        ldt: usize,
    ) {
        let (c0, c1) = steps::<Y8, R, AVX2_MR>(k, a, b, offs);
        store(c0, c1, t, ldt);
    }

    #[inline(never)]
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    unsafe fn avx512<const R: usize>(
        k: usize,
        a: *const f32,
        b: *const f32,
        offs: *const isize,
        t: *mut f32,
        ldt: usize,
    ) {
        let (c0, c1) = steps::<Z16, R, AVX512_MR>(k, a, b, offs);
        store(c0, c1, t, ldt);
    }

    /// The AVX2 family's kernels (6 x 16), by row count.
    pub fn avx2_table() -> [OffsetsFn; MAX_MR] {
        rows_table!(avx2, AVX2_MR)
    }

    /// The AVX-512 family's kernels (12 x 32), by row count.
    pub fn avx512_table() -> [OffsetsFn; MAX_MR] {
        rows_table!(avx512, AVX512_MR)
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{avx2_table, avx512_table};
