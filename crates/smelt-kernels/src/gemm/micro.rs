//! Register-blocked GEMM micro-kernels, one per ISA: `R x NR` of C from A (element
//! `(r, p)` at `a + r * rs + p * ps`: a packed panel has `rs = 1, ps = MR`, a row-major A
//! read in place has `rs = lda, ps = 1`) and a B panel (k-major, `NR` floats per step),
//! written row-major into a tile of row stride `ldt` (at least `NR`), or added to it. `R` runs from 1 to
//! `MR`, so an edge of fewer rows costs only its own FMAs.
//!
//! Every variant sums over k in order with one fused or unfused multiply-add per step, so a
//! given ISA gives the same result for an element whatever tile or thread computed it.

use crate::epilogue::TileEpi;

/// A micro-kernel: `(k, a, a_row_step, a_k_step, b, b_k_step, tile, tile_row_step,
/// accumulate)`. B is a packed panel (`b_k_step = NR`) or `NR` columns of a row-major
/// matrix read in place (`b_k_step` its row stride).
///
/// # Safety
/// A's `R x k` elements are readable, `b` holds `k` rows of `NR` floats `b_k_step` apart,
/// `tile` holds `R` rows of `NR` floats `tile_row_step` apart.
pub type MicroFn =
    unsafe fn(usize, *const f32, isize, isize, *const f32, isize, *mut f32, usize, bool);

/// A full-tile micro-kernel that finishes its `MR x NR` accumulators with a fused epilogue
/// in registers and stores them straight to the destination:
/// `(k, a, a_row_step, a_k_step, b, b_k_step, epilogue)`.
///
/// # Safety
/// As for [`MicroFn`], with the epilogue's pointers covering the whole tile.
pub type FusedFn = unsafe fn(usize, *const f32, isize, isize, *const f32, isize, &TileEpi);

/// The micro-kernel family of one ISA: tile geometry and one kernel per row count.
#[derive(Clone, Copy)]
pub struct Micro {
    /// Rows of a full tile (A panel width).
    pub mr: usize,
    /// Columns of a tile (B panel width).
    pub nr: usize,
    /// `kernels[r - 1]` computes `r` rows.
    pub kernels: [MicroFn; MAX_MR],
    /// `warm[r - 1]` computes `r` rows from a packed B panel a previous tile of this thread
    /// just read (still in its caches): without the k loop's B prefetches, where the ISA's
    /// kernels issue them (see [`Micro::for_warm_tile`]); otherwise the same as `kernels`.
    pub warm: [MicroFn; MAX_MR],
    /// The full tile with its epilogue fused, where the ISA has one.
    pub fused: Option<FusedFn>,
    /// [`Micro::fused`] for a warm B panel, as `warm` is for `kernels`.
    pub fused_warm: Option<FusedFn>,
    /// `half[r - 1]` computes `r` rows of only the first `nr / 2` columns, for a last column
    /// panel that narrow (B's rows are still `nr` wide, or read in place), where the ISA
    /// has them: such a panel then costs half a full one.
    pub half: Option<[MicroFn; MAX_MR]>,
    /// `offsets[r - 1]` computes `r` rows with B's rows at per-step offsets (see
    /// [`super::offsets`]).
    pub offsets: [super::offsets::OffsetsFn; MAX_MR],
    /// `gathered[s][r - 1]` computes `r` rows with A's rows at per-step offsets, consecutive
    /// rows `gathered::STRIDES[s]` floats apart, and B packed (see [`super::gathered`]).
    pub gathered: super::gathered::GatheredTables,
    /// [`Micro::gathered`] finishing the tile's halves with fused epilogues from
    /// registers, where the ISA has them.
    pub gathered_fused: Option<super::gathered::GatheredFusedTables>,
}

impl Micro {
    /// The kernel for `rows` rows (1..=mr).
    #[inline]
    pub fn for_rows(&self, rows: usize) -> MicroFn {
        self.kernels[rows.clamp(1, self.mr) - 1]
    }

    /// The kernel for a tile of `rows` rows (1..=mr) of which the first `cols` columns are
    /// wanted: a half-width one when they fit in half the tile and the ISA has one. It
    /// writes at least `cols` of the tile's columns.
    #[inline]
    pub fn for_tile(&self, rows: usize, cols: usize) -> MicroFn {
        self.tile_kernel(&self.kernels, rows, cols)
    }

    /// [`Micro::for_tile`] for a packed B panel still in this thread's caches from its
    /// previous tile. (The half-width kernels prefetch nothing.)
    #[inline]
    pub fn for_warm_tile(&self, rows: usize, cols: usize) -> MicroFn {
        self.tile_kernel(&self.warm, rows, cols)
    }

    /// The half-width kernel for `rows` when `cols` fit in half the tile and the ISA has
    /// one, else `full`'s.
    #[inline]
    fn tile_kernel(&self, full: &[MicroFn; MAX_MR], rows: usize, cols: usize) -> MicroFn {
        let r = rows.clamp(1, self.mr) - 1;
        match &self.half {
            Some(half) if 2 * cols <= self.nr => half[r],
            _ => full[r],
        }
    }
}

/// Portable tile geometry: 4 x 8 (SSE2 keeps 8 accumulators in registers).
pub const PORTABLE_MR: usize = 4;
/// Portable tile columns.
pub const PORTABLE_NR: usize = 8;

/// The most rows any family's tile has.
pub const MAX_MR: usize = 12;

/// One kernel per row count 1..=`MAX_MR`: `$f::<r>` for `r <= $mr`, and the `$mr`-row kernel
/// in the slots above (never called: [`Micro::for_rows`] clamps to `mr`).
macro_rules! rows_table {
    ($f:ident, $mr:expr) => {{
        const fn at(r: usize) -> usize {
            if r < $mr {
                r
            } else {
                $mr
            }
        }
        [
            $f::<{ at(1) }>,
            $f::<{ at(2) }>,
            $f::<{ at(3) }>,
            $f::<{ at(4) }>,
            $f::<{ at(5) }>,
            $f::<{ at(6) }>,
            $f::<{ at(7) }>,
            $f::<{ at(8) }>,
            $f::<{ at(9) }>,
            $f::<{ at(10) }>,
            $f::<{ at(11) }>,
            $f::<{ at(12) }>,
        ]
    }};
}

pub(crate) use rows_table;

#[allow(clippy::too_many_arguments)]
unsafe fn portable<const R: usize>(
    k: usize,
    a: *const f32,
    rs: isize,
    ps: isize,
    b: *const f32,
    bs: isize,
    t: *mut f32,
    ldt: usize,
    acc: bool,
) {
    const NR: usize = PORTABLE_NR;
    let mut c = [[0f32; NR]; R];
    for p in 0..k {
        let bp = std::slice::from_raw_parts(b.offset(p as isize * bs), NR);
        for (r, row) in c.iter_mut().enumerate() {
            let av = *a.offset(r as isize * rs + p as isize * ps);
            for j in 0..NR {
                row[j] += av * bp[j];
            }
        }
    }
    for (r, row) in c.iter().enumerate() {
        let dst = std::slice::from_raw_parts_mut(t.add(r * ldt), NR);
        for j in 0..NR {
            dst[j] = if acc { dst[j] + row[j] } else { row[j] };
        }
    }
}

/// The portable family.
pub fn portable_micro() -> Micro {
    Micro {
        mr: PORTABLE_MR,
        nr: PORTABLE_NR,
        kernels: rows_table!(portable, PORTABLE_MR),
        warm: rows_table!(portable, PORTABLE_MR),
        fused: None,
        fused_warm: None,
        half: None,
        offsets: super::offsets::portable_table(),
        gathered: super::gathered::portable_tables(),
        gathered_fused: None,
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::Micro;
    use crate::epilogue::TileEpi;
    use crate::simd::{Vf, Y8, Z16};
    use std::arch::x86_64::*;

    /// AVX2 tile: 6 rows x 16 columns, 12 ymm accumulators.
    pub const AVX2_MR: usize = 6;
    /// AVX2 tile columns.
    pub const AVX2_NR: usize = 16;
    /// AVX-512 tile: 12 rows x 32 columns, 24 of the 32 zmm registers accumulating, so
    /// each B vector loaded serves twelve multiply-adds.
    pub const AVX512_MR: usize = 12;
    /// AVX-512 tile columns.
    pub const AVX512_NR: usize = 32;

    /// k steps the AVX2 loop takes per iteration: unrolled, Zen 3 sustains 87-92% of its
    /// FMA peak in L1 against 70% for one step per iteration (measured, 6x16 tile).
    const AVX2_UNROLL: usize = 4;

    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2<const R: usize>(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
        t: *mut f32,
        ldt: usize,
        acc: bool,
    ) {
        // The two layouts the driver passes get their strides as constants, so A's
        // addresses are immediate offsets of one pointer (packed) or of R row pointers.
        let (c0, c1) = avx2_dispatch::<R>(k, a, rs, ps, b, bs);
        for r in 0..R {
            let d = t.add(r * ldt);
            let (mut x0, mut x1) = (c0[r], c1[r]);
            if acc {
                x0 = _mm256_add_ps(x0, _mm256_loadu_ps(d));
                x1 = _mm256_add_ps(x1, _mm256_loadu_ps(d.add(8)));
            }
            _mm256_storeu_ps(d, x0);
            _mm256_storeu_ps(d.add(8), x1);
        }
    }

    /// The full AVX2 tile, finished in registers by `epi` (see [`super::FusedFn`]).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2_fused(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
        epi: &TileEpi,
    ) {
        // A packed A's k loop runs here, its accumulators finished straight from registers.
        // Other layouts' loops run in the plain kernel into a tile in L1 that the epilogue
        // reads back: inlined beside the epilogue, their row pointers and accumulators
        // spilled to the stack (MiniLM's GEMMs ran at 107 GFLOP/s on Zen 5, against 200).
        const R: usize = AVX2_MR;
        const NR: usize = AVX2_NR;
        epi.prefetch(R, NR);
        if rs == 1 && ps == R as isize {
            let (c0, c1) = avx2_steps::<R>(k, a, 1, R as isize, b, bs);
            epi.apply_tile(c0.map(Y8), c1.map(Y8));
            return;
        }
        let mut t = [0f32; R * NR];
        avx2::<R>(k, a, rs, ps, b, bs, t.as_mut_ptr(), NR, false);
        for r in 0..R {
            let row = t.as_ptr().add(r * NR);
            epi.apply(r, 0, Y8::load(row));
            epi.apply(r, 8, Y8::load(row.add(8)));
        }
    }

    /// The k loop with the layouts the driver passes given their strides as constants, so
    /// A's and B's addresses are immediate offsets of a few pointers (runtime strides cost
    /// an add per row per step): packed A or row-major A beside a packed B, and packed A
    /// beside a row-major B read in place.
    #[inline(always)]
    unsafe fn avx2_dispatch<const R: usize>(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
    ) -> ([__m256; R], [__m256; R]) {
        const NR: isize = AVX2_NR as isize;
        const MR: isize = AVX2_MR as isize;
        if bs == NR {
            if rs == 1 && ps == MR {
                avx2_steps::<R>(k, a, 1, MR, b, NR)
            } else if ps == 1 {
                avx2_steps::<R>(k, a, rs, 1, b, NR)
            } else {
                avx2_steps::<R>(k, a, rs, ps, b, NR)
            }
        } else if rs == 1 && ps == MR {
            avx2_steps::<R>(k, a, 1, MR, b, bs)
        } else {
            avx2_steps::<R>(k, a, rs, ps, b, bs)
        }
    }

    /// The k loop of the AVX2 kernel: R rows x 16 columns accumulated in 2R registers.
    #[inline(always)]
    unsafe fn avx2_steps<const R: usize>(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
    ) -> ([__m256; R], [__m256; R]) {
        let mut c0 = [_mm256_setzero_ps(); R];
        let mut c1 = [_mm256_setzero_ps(); R];
        let mut rows = [a; R];
        for (r, p) in rows.iter_mut().enumerate() {
            *p = a.offset(r as isize * rs);
        }
        let mut bp = b;
        // A packed B (its panel contiguous) is prefetched ahead, a line per 16 floats.
        let prefetch = bs == AVX2_NR as isize;
        // So is a packed A (each step's R floats side by side).
        let prefetch_a = rs == 1 && ps == R as isize;
        for _ in 0..k / AVX2_UNROLL {
            if prefetch {
                for l in 0..(AVX2_UNROLL * AVX2_NR / 16) as isize {
                    crate::simd::prefetch_read(bp.wrapping_offset(B_PREFETCH_AHEAD + l * 16));
                }
            }
            if prefetch_a {
                for l in 0..(AVX2_UNROLL * R).div_ceil(16) as isize {
                    crate::simd::prefetch_read(rows[0].wrapping_offset(A_PREFETCH_AHEAD + l * 16));
                }
            }
            for u in 0..AVX2_UNROLL {
                let b0 = _mm256_loadu_ps(bp.offset(u as isize * bs));
                let b1 = _mm256_loadu_ps(bp.offset(u as isize * bs + 8));
                for r in 0..R {
                    let av = _mm256_broadcast_ss(&*rows[r].offset(u as isize * ps));
                    c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
                    c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
                }
            }
            for p in rows.iter_mut() {
                *p = p.offset(AVX2_UNROLL as isize * ps);
            }
            bp = bp.offset(AVX2_UNROLL as isize * bs);
        }
        for _ in 0..k % AVX2_UNROLL {
            let b0 = _mm256_loadu_ps(bp);
            let b1 = _mm256_loadu_ps(bp.add(8));
            for r in 0..R {
                let av = _mm256_broadcast_ss(&*rows[r]);
                c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
                c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
                rows[r] = rows[r].offset(ps);
            }
            bp = bp.offset(bs);
        }
        (c0, c1)
    }

    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    unsafe fn avx512<const R: usize>(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
        t: *mut f32,
        ldt: usize,
        acc: bool,
    ) {
        avx512_tile::<R, true>(k, a, rs, ps, b, bs, t, ldt, acc)
    }

    /// [`avx512`] for a warm B panel: no B prefetches (see [`super::Micro::warm`]).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    unsafe fn avx512_warm<const R: usize>(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
        t: *mut f32,
        ldt: usize,
        acc: bool,
    ) {
        avx512_tile::<R, false>(k, a, rs, ps, b, bs, t, ldt, acc)
    }

    /// The AVX-512 tile, its packed B prefetched ahead when `PF_B`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn avx512_tile<const R: usize, const PF_B: bool>(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
        t: *mut f32,
        ldt: usize,
        acc: bool,
    ) {
        // As for AVX2: the packed layout's strides as constants keep A's broadcasts
        // immediate offsets of one pointer, so the loop issues no address arithmetic beside
        // its FMAs (runtime strides cost one add per row per step).
        let (c0, c1) = avx512_dispatch::<R, PF_B>(k, a, rs, ps, b, bs);
        for r in 0..R {
            let d = t.add(r * ldt);
            let (mut x0, mut x1) = (c0[r], c1[r]);
            if acc {
                x0 = _mm512_add_ps(x0, _mm512_loadu_ps(d));
                x1 = _mm512_add_ps(x1, _mm512_loadu_ps(d.add(16)));
            }
            _mm512_storeu_ps(d, x0);
            _mm512_storeu_ps(d.add(16), x1);
        }
    }

    /// The full AVX-512 tile, finished in registers by `epi` (see [`super::FusedFn`]).
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    unsafe fn avx512_fused(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
        epi: &TileEpi,
    ) {
        avx512_fused_tile::<true>(k, a, rs, ps, b, bs, epi)
    }

    /// [`avx512_fused`] for a warm B panel (see [`super::Micro::fused_warm`]).
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    unsafe fn avx512_fused_warm(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
        epi: &TileEpi,
    ) {
        avx512_fused_tile::<false>(k, a, rs, ps, b, bs, epi)
    }

    /// The fused AVX-512 tile, its packed B prefetched ahead when `PF_B`.
    #[inline(always)]
    unsafe fn avx512_fused_tile<const PF_B: bool>(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
        epi: &TileEpi,
    ) {
        // A packed A's k loop runs here, its accumulators finished straight from registers.
        // Other layouts' loops run in the plain kernel into a tile in L1 that the epilogue
        // reads back: inlined beside the epilogue, their row pointers and accumulators
        // spilled to the stack (MiniLM's GEMMs ran at 107 GFLOP/s on Zen 5, against 200).
        const R: usize = AVX512_MR;
        const NR: usize = AVX512_NR;
        epi.prefetch(R, NR);
        if rs == 1 && ps == R as isize {
            let (c0, c1) = avx512_steps::<R, PF_B>(k, a, 1, R as isize, b, bs);
            epi.apply_tile(c0.map(Z16), c1.map(Z16));
            return;
        }
        let mut t = [0f32; R * NR];
        // (A call, not inlined: see above.)
        let plain = if PF_B { avx512::<R> } else { avx512_warm::<R> };
        plain(k, a, rs, ps, b, bs, t.as_mut_ptr(), NR, false);
        for r in 0..R {
            let row = t.as_ptr().add(r * NR);
            epi.apply(r, 0, Z16::load(row));
            epi.apply(r, 16, Z16::load(row.add(16)));
        }
    }

    /// How far ahead (floats) the k loops prefetch a packed B panel into L1: 12 KiB, past
    /// the panel's end into the next one (packed panels are contiguous). A model's weights
    /// come from memory on their first tile, each panel's stream then latency-bound; the
    /// other tiles find it in L2 and the prefetch costs one load slot per cache line.
    /// Zen 5, one core, interleaved runs of MiniLM-L3 b1 (GEMMs of 128 rows): 7.2-7.5 ms
    /// against 7.8-7.9 (AVX-512), 14.1-14.3 against 15.0-15.2 (AVX2); b8 (1024 rows, each
    /// panel reused by 86 row panels) unchanged.
    const B_PREFETCH_AHEAD: isize = 3072;
    /// How far ahead (floats) the AVX-512 k loop prefetches a packed B panel into L2 instead
    /// on Intel CPUs: 48 KiB. L1 prefetches stop at its few fill buffers, so a panel that
    /// comes from memory (weights past L2) arrives latency-bound; L2 keeps more misses in
    /// flight and the hardware brings the lines on to L1. On a 2-vCPU Xeon (family 6 model
    /// 167), one thread, five interleaved rounds: ResNet-50 2-6% faster (sums of per-layer
    /// medians 56.5-59.0 ms against 58.8-60.1; its 7x7 layers, 4-9 MB of weights each, most),
    /// MiniLM b1, YOLOv8n and PP-OCR within noise. Keeping the L1 prefetch as well was slower
    /// on MiniLM b1. Not measured on AMD, which keeps the L1 prefetch.
    const B_PREFETCH_L2_AHEAD: isize = 4 * B_PREFETCH_AHEAD;
    /// How far ahead (floats) the k loops prefetch a packed A panel into L1: 4 KiB. A
    /// convolution's packed weights are swept once per column panel, from L2 or (past it)
    /// L3. Zen 5, one core, interleaved runs: ResNet-50 38.4-39.0 ms in kernels against
    /// 40.3-41.6 (AVX-512), 73.2-75.9 against 79.8-83.8 (AVX2); YOLOv8n 10.6-10.8 against
    /// 11.1-11.3.
    const A_PREFETCH_AHEAD: isize = 1024;

    /// k steps the AVX-512 loop takes per iteration.
    const AVX512_UNROLL: usize = 4;

    /// The k loop with the layouts the driver passes given their strides as constants, so
    /// A's and B's addresses are immediate offsets of a few pointers (runtime strides cost
    /// an add per row per step): packed A or row-major A beside a packed B, and packed A
    /// beside a row-major B read in place.
    #[inline(always)]
    unsafe fn avx512_dispatch<const R: usize, const PF_B: bool>(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
    ) -> ([__m512; R], [__m512; R]) {
        const NR: isize = AVX512_NR as isize;
        const MR: isize = AVX512_MR as isize;
        if bs == NR {
            if rs == 1 && ps == MR {
                avx512_steps::<R, PF_B>(k, a, 1, MR, b, NR)
            } else if ps == 1 {
                avx512_steps::<R, PF_B>(k, a, rs, 1, b, NR)
            } else {
                avx512_steps::<R, PF_B>(k, a, rs, ps, b, NR)
            }
        } else if rs == 1 && ps == MR {
            avx512_steps::<R, PF_B>(k, a, 1, MR, b, bs)
        } else {
            avx512_steps::<R, PF_B>(k, a, rs, ps, b, bs)
        }
    }

    /// The k loop of the AVX-512 kernel: R rows x 32 columns accumulated in 2R registers.
    #[inline(always)]
    unsafe fn avx512_steps<const R: usize, const PF_B: bool>(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
    ) -> ([__m512; R], [__m512; R]) {
        let mut c0 = [_mm512_setzero_ps(); R];
        let mut c1 = [_mm512_setzero_ps(); R];
        let mut rows = [a; R];
        for (r, p) in rows.iter_mut().enumerate() {
            *p = a.offset(r as isize * rs);
        }
        let mut bp = b;
        // A packed B (its panel contiguous) is prefetched ahead, a line per 16 floats:
        // into L1 12 KiB ahead, or on Intel into L2 48 KiB ahead (see B_PREFETCH_L2_AHEAD).
        let prefetch = PF_B && bs == AVX512_NR as isize;
        let to_l2 = crate::isa::is_intel();
        // So is a packed A (each step's R floats side by side).
        let prefetch_a = rs == 1 && ps == R as isize;
        for _ in 0..k / AVX512_UNROLL {
            if prefetch {
                for l in 0..(AVX512_UNROLL * AVX512_NR / 16) as isize {
                    if to_l2 {
                        crate::simd::prefetch_l2(bp.wrapping_offset(B_PREFETCH_L2_AHEAD + l * 16));
                    } else {
                        crate::simd::prefetch_read(bp.wrapping_offset(B_PREFETCH_AHEAD + l * 16));
                    }
                }
            }
            if prefetch_a {
                for l in 0..(AVX512_UNROLL * R).div_ceil(16) as isize {
                    crate::simd::prefetch_read(rows[0].wrapping_offset(A_PREFETCH_AHEAD + l * 16));
                }
            }
            for u in 0..AVX512_UNROLL {
                let b0 = _mm512_loadu_ps(bp.offset(u as isize * bs));
                let b1 = _mm512_loadu_ps(bp.offset(u as isize * bs + 16));
                for r in 0..R {
                    let av = _mm512_set1_ps(*rows[r].offset(u as isize * ps));
                    c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
                    c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
                }
            }
            for p in rows.iter_mut() {
                *p = p.offset(AVX512_UNROLL as isize * ps);
            }
            bp = bp.offset(AVX512_UNROLL as isize * bs);
        }
        for _ in 0..k % AVX512_UNROLL {
            let b0 = _mm512_loadu_ps(bp);
            let b1 = _mm512_loadu_ps(bp.add(16));
            for r in 0..R {
                let av = _mm512_set1_ps(*rows[r]);
                c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
                c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
                rows[r] = rows[r].offset(ps);
            }
            bp = bp.offset(bs);
        }
        (c0, c1)
    }

    /// The half-width tile's k loop over lanes `V`: R rows x one vector of columns, each B
    /// vector loaded serving R multiply-adds (a last column panel of at most half a tile).
    #[inline(always)]
    unsafe fn half_steps<V: Vf, const R: usize, const U: usize>(
        k: usize,
        a: *const f32,
        rs: isize,
        ps: isize,
        b: *const f32,
        bs: isize,
    ) -> [V; R] {
        let mut c = [V::splat(0.0); R];
        let mut rows = [a; R];
        for (r, p) in rows.iter_mut().enumerate() {
            *p = a.offset(r as isize * rs);
        }
        let mut bp = b;
        for _ in 0..k / U {
            for u in 0..U {
                let bv = V::load(bp.offset(u as isize * bs));
                for r in 0..R {
                    let av = V::splat(*rows[r].offset(u as isize * ps));
                    c[r] = av.fma(bv, c[r]);
                }
            }
            for p in rows.iter_mut() {
                *p = p.offset(U as isize * ps);
            }
            bp = bp.offset(U as isize * bs);
        }
        for _ in 0..k % U {
            let bv = V::load(bp);
            for r in 0..R {
                c[r] = V::splat(*rows[r]).fma(bv, c[r]);
                rows[r] = rows[r].offset(ps);
            }
            bp = bp.offset(bs);
        }
        c
    }

    /// Stores (or adds) a half-width tile's R accumulators.
    #[inline(always)]
    unsafe fn half_store<V: Vf, const R: usize>(c: [V; R], t: *mut f32, ldt: usize, acc: bool) {
        for (r, &x) in c.iter().enumerate() {
            let d = t.add(r * ldt);
            let x = if acc { x.add(V::load(d)) } else { x };
            x.store(d);
        }
    }

    /// A half-width kernel of one ISA (see [`Micro::half`]): the driver's layouts get their
    /// strides as constants, as in the full kernels.
    macro_rules! half_kernel {
        ($(#[$doc:meta])* $name:ident, $v:ty, $nr:expr, $mr:expr, $unroll:expr, $features:literal) => {
            $(#[$doc])*
            #[inline(never)]
            #[allow(clippy::too_many_arguments)]
            #[target_feature(enable = $features)]
            unsafe fn $name<const R: usize>(
                k: usize,
                a: *const f32,
                rs: isize,
                ps: isize,
                b: *const f32,
                bs: isize,
                t: *mut f32,
                ldt: usize,
                acc: bool,
            ) {
                const NR: isize = $nr as isize;
                const MR: isize = $mr as isize;
                let c = if bs == NR && ps == 1 {
                    half_steps::<$v, R, { $unroll }>(k, a, rs, 1, b, NR)
                } else if bs == NR && rs == 1 && ps == MR {
                    half_steps::<$v, R, { $unroll }>(k, a, 1, MR, b, NR)
                } else {
                    half_steps::<$v, R, { $unroll }>(k, a, rs, ps, b, bs)
                };
                half_store(c, t, ldt, acc);
            }
        };
    }

    half_kernel!(
        /// R rows x the first 8 of the AVX2 tile's 16 columns.
        avx2_half, Y8, AVX2_NR, AVX2_MR, AVX2_UNROLL, "avx2,fma"
    );
    half_kernel!(
        /// R rows x the first 16 of the AVX-512 tile's 32 columns.
        avx512_half, Z16, AVX512_NR, AVX512_MR, AVX512_UNROLL, "avx512f,avx512vl,avx2,fma"
    );

    /// The AVX2+FMA family (callers check the CPU first).
    pub fn avx2_micro() -> Micro {
        Micro {
            mr: AVX2_MR,
            nr: AVX2_NR,
            kernels: rows_table!(avx2, AVX2_MR),
            warm: rows_table!(avx2, AVX2_MR),
            fused: Some(avx2_fused),
            fused_warm: Some(avx2_fused),
            half: Some(rows_table!(avx2_half, AVX2_MR)),
            offsets: crate::gemm::offsets::avx2_table(),
            gathered: crate::gemm::gathered::avx2_tables(),
            gathered_fused: Some(crate::gemm::gathered::avx2_fused_tables()),
        }
    }

    /// The AVX-512 family (callers check the CPU first). Its warm kernels skip the B
    /// prefetches on Intel CPUs, where that was measured (see [`B_PREFETCH_L2_AHEAD`]).
    pub fn avx512_micro() -> Micro {
        let intel = crate::isa::is_intel();
        Micro {
            mr: AVX512_MR,
            nr: AVX512_NR,
            kernels: rows_table!(avx512, AVX512_MR),
            warm: if intel {
                rows_table!(avx512_warm, AVX512_MR)
            } else {
                rows_table!(avx512, AVX512_MR)
            },
            fused: Some(avx512_fused),
            fused_warm: Some(if intel {
                avx512_fused_warm
            } else {
                avx512_fused
            }),
            half: Some(rows_table!(avx512_half, AVX512_MR)),
            offsets: crate::gemm::offsets::avx512_table(),
            gathered: crate::gemm::gathered::avx512_tables(),
            gathered_fused: Some(crate::gemm::gathered::avx512_fused_tables()),
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{avx2_micro, avx512_micro};
