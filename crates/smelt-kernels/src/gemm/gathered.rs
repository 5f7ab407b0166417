//! Micro-kernels whose A rows sit a fixed stride apart at per-step offsets: `R x NR` of C
//! where step `p` of row `r` is `x[offs[p] + r * S]` and B is a packed panel (`k x NR`,
//! k-major). A convolution in the blocked channel layout (see [`crate::blocked`]) reads its
//! input this way in place, output pixels as rows: one offset per (channel block, tap,
//! lane), consecutive pixels `16 * stride` floats apart; its weights, packed once, stream
//! past as B in order.
//!
//! Each element is summed over k in order with one multiply-add per step, like the other
//! micro-kernels of its ISA.

use super::micro::MAX_MR;
use crate::epilogue::TileEpi;
use crate::simd::Vf;

/// `(k, x, offs, b, ahead, tile, tile_row_step)`: writes the `R x NR` tile.
///
/// # Safety
/// `x + offs[p] + r * S` is readable for each of the `k` steps and `R` rows, `b` holds a packed
/// panel of `k` steps, `tile` `R` rows of `NR` floats `tile_row_step` apart.
pub type GatheredFn =
    unsafe fn(usize, *const f32, *const isize, *const f32, Ahead, *mut f32, usize);

/// Lines the k loop asks for towards L2 as it goes (the next panel's share of a tile),
/// spread over its steps so the requests stay few at a time: one line every
/// `1 << shift` steps from `next` on (null: none). Only hints: the lines need not exist.
#[derive(Clone, Copy, Debug)]
pub struct Ahead {
    /// The first line.
    pub next: *const f32,
    /// Log2 of the steps per line.
    pub shift: u32,
}

impl Ahead {
    /// No lines.
    pub const NONE: Ahead = Ahead {
        next: std::ptr::null(),
        shift: 0,
    };
}

/// The epilogue of one half of a tile's columns (`NR / 2`, one vector a row) and the
/// column of its own tile the half starts at; None: the half is not stored.
pub type Half = Option<(TileEpi, usize)>;

/// `(k, x, offs, b, ahead, halves)`: the `R x NR` tile finished in registers, its first
/// `NR / 2` columns by `halves[0]`, the rest by `halves[1]`.
///
/// # Safety
/// As for [`GatheredFn`], with each epilogue's pointers covering `R` rows of its half.
pub type GatheredFusedFn =
    unsafe fn(usize, *const f32, *const isize, *const f32, Ahead, &[Half; 2]);

/// Finishes the two halves of a tile from registers.
#[inline(always)]
unsafe fn finish<V: Vf, const R: usize>(c0: [V; R], c1: [V; R], halves: &[Half; 2]) {
    if let Some((e, j)) = &halves[0] {
        for (r, &v) in c0.iter().enumerate() {
            e.apply(r, *j, v);
        }
    }
    if let Some((e, j)) = &halves[1] {
        for (r, &v) in c1.iter().enumerate() {
            e.apply(r, *j, v);
        }
    }
}

/// Steps ahead of the k loop its B prefetches reach.
const AHEAD: usize = 16;

/// Row strides (floats between consecutive rows of A) with kernel tables.
pub const STRIDES: [usize; 2] = [16, 32];

/// The k loop over lanes `V`: `R` rows `S` floats apart, of two vectors, B's panel
/// `2 * V::LANES` floats a step.
#[inline(always)]
unsafe fn steps<V: Vf, const R: usize, const S: usize>(
    k: usize,
    x: *const f32,
    offs: *const isize,
    b: *const f32,
    ahead: Ahead,
) -> ([V; R], [V; R]) {
    let mut c0 = [V::splat(0.0); R];
    let mut c1 = [V::splat(0.0); R];
    let mut bp = b;
    let (mut pf, mask) = (ahead.next, (1usize << ahead.shift) - 1);
    for p in 0..k {
        if !ahead.next.is_null() && p & mask == 0 {
            crate::simd::prefetch_l2(pf);
            pf = pf.wrapping_add(16);
        }
        // The panel's rows `AHEAD` steps on, towards L1: a panel read by several tiles
        // outgrows L1 (a 512-channel 3x3 layer's is 590 KB), and its first tile reads it
        // from memory. ResNet-50's 7x7 3x3 layers, one thread on a 2-vCPU Xeon: 2.8 ->
        // 2.4 ms.
        crate::simd::prefetch_read(bp.wrapping_add(AHEAD * 2 * V::LANES));
        crate::simd::prefetch_read(bp.wrapping_add(AHEAD * 2 * V::LANES + 16));
        let xp = x.offset(*offs.add(p));
        let (b0, b1) = (V::load(bp), V::load(bp.add(V::LANES)));
        for r in 0..R {
            let av = V::splat(*xp.add(r * S));
            c0[r] = av.fma(b0, c0[r]);
            c1[r] = av.fma(b1, c1[r]);
        }
        bp = bp.add(2 * V::LANES);
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
unsafe fn portable<const R: usize, const S: usize>(
    k: usize,
    x: *const f32,
    offs: *const isize,
    b: *const f32,
    _ahead: Ahead,
    t: *mut f32,
    ldt: usize,
) {
    const NR: usize = super::micro::PORTABLE_NR;
    let mut c = [[0f32; NR]; R];
    for p in 0..k {
        let xp = x.offset(*offs.add(p));
        let bp = std::slice::from_raw_parts(b.add(p * NR), NR);
        for (r, row) in c.iter_mut().enumerate() {
            let av = *xp.add(r * S);
            for j in 0..NR {
                row[j] += av * bp[j];
            }
        }
    }
    for (r, row) in c.iter().enumerate() {
        std::slice::from_raw_parts_mut(t.add(r * ldt), NR).copy_from_slice(row);
    }
}

/// Instantiates `$f::<R, S>` for each row count, at row stride `S`.
macro_rules! strided_rows_table {
    ($f:ident, $mr:expr, $s:expr) => {{
        const fn at(r: usize) -> usize {
            if r < $mr {
                r
            } else {
                $mr
            }
        }
        [
            $f::<{ at(1) }, $s>,
            $f::<{ at(2) }, $s>,
            $f::<{ at(3) }, $s>,
            $f::<{ at(4) }, $s>,
            $f::<{ at(5) }, $s>,
            $f::<{ at(6) }, $s>,
            $f::<{ at(7) }, $s>,
            $f::<{ at(8) }, $s>,
            $f::<{ at(9) }, $s>,
            $f::<{ at(10) }, $s>,
            $f::<{ at(11) }, $s>,
            $f::<{ at(12) }, $s>,
        ]
    }};
}

/// The kernels of one family, by row stride (as [`STRIDES`]) and row count.
pub type GatheredTables = [[GatheredFn; MAX_MR]; 2];

/// The fused kernels of one family, by row stride and row count.
pub type GatheredFusedTables = [[GatheredFusedFn; MAX_MR]; 2];

/// The portable family's kernels.
pub fn portable_tables() -> GatheredTables {
    const MR: usize = super::micro::PORTABLE_MR;
    [
        strided_rows_table!(portable, MR, 16),
        strided_rows_table!(portable, MR, 32),
    ]
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{finish, steps, store, Ahead, GatheredFusedTables, GatheredTables, Half};
    use crate::gemm::micro::x86::{AVX2_MR, AVX512_MR};
    use crate::simd::{Y8, Z16};

    #[inline(never)]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2<const R: usize, const S: usize>(
        k: usize,
        x: *const f32,
        offs: *const isize,
        b: *const f32,
        ahead: Ahead,
        t: *mut f32,
        ldt: usize,
    ) {
        let (c0, c1) = steps::<Y8, R, S>(k, x, offs, b, ahead);
        store(c0, c1, t, ldt);
    }

    #[inline(never)]
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    unsafe fn avx512<const R: usize, const S: usize>(
        k: usize,
        x: *const f32,
        offs: *const isize,
        b: *const f32,
        ahead: Ahead,
        t: *mut f32,
        ldt: usize,
    ) {
        let (c0, c1) = steps::<Z16, R, S>(k, x, offs, b, ahead);
        store(c0, c1, t, ldt);
    }

    #[inline(never)]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_fused<const R: usize, const S: usize>(
        k: usize,
        x: *const f32,
        offs: *const isize,
        b: *const f32,
        ahead: Ahead,
        halves: &[Half; 2],
    ) {
        let (c0, c1) = steps::<Y8, R, S>(k, x, offs, b, ahead);
        finish(c0, c1, halves);
    }

    #[inline(never)]
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    unsafe fn avx512_fused<const R: usize, const S: usize>(
        k: usize,
        x: *const f32,
        offs: *const isize,
        b: *const f32,
        ahead: Ahead,
        halves: &[Half; 2],
    ) {
        let (c0, c1) = steps::<Z16, R, S>(k, x, offs, b, ahead);
        finish(c0, c1, halves);
    }

    /// The AVX2 family's fused kernels.
    pub fn avx2_fused_tables() -> GatheredFusedTables {
        [
            strided_rows_table!(avx2_fused, AVX2_MR, 16),
            strided_rows_table!(avx2_fused, AVX2_MR, 32),
        ]
    }

    /// The AVX-512 family's fused kernels.
    pub fn avx512_fused_tables() -> GatheredFusedTables {
        [
            strided_rows_table!(avx512_fused, AVX512_MR, 16),
            strided_rows_table!(avx512_fused, AVX512_MR, 32),
        ]
    }

    /// The AVX2 family's kernels (6 x 16).
    pub fn avx2_tables() -> GatheredTables {
        [
            strided_rows_table!(avx2, AVX2_MR, 16),
            strided_rows_table!(avx2, AVX2_MR, 32),
        ]
    }

    /// The AVX-512 family's kernels (12 x 32).
    pub fn avx512_tables() -> GatheredTables {
        [
            strided_rows_table!(avx512, AVX512_MR, 16),
            strided_rows_table!(avx512, AVX512_MR, 32),
        ]
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{avx2_fused_tables, avx2_tables, avx512_fused_tables, avx512_tables};
