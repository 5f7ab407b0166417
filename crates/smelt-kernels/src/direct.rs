//! Direct 2-D convolution, NCHW, without im2col: a register tile of `mr` output channels x
//! `nr` output pixels of one row, summed over every (input channel, kernel row, kernel
//! column) tap with the tap's input row segment loaded whole from a padded copy of the
//! input. Strides become unit steps by splitting the padded input into `stride` column
//! phases (phase `p` holds columns `p, p + s, ...`), so every tap reads contiguous floats.
//!
//! Each output element is one in-order sum over its taps, whatever the split of the work.

use crate::buf::with_scratch;
use crate::conv::{Conv2d, PhaseSpan};
use crate::epilogue::TileEpi;
use crate::gemm::{MatRef, PanelSource, TileSink};
use crate::pool::ThreadPool;
use crate::prepack::{packed, Floats};
use crate::Kernels;

/// A direct micro-kernel: `(taps, tap offsets, input base, weight panel, tile)`: for each tap
/// `t`, `mr` weights at `w[t * mr ..]` times `nr` floats at `base + offs[t]`, into a row-major
/// `mr x nr` tile.
///
/// # Safety
/// Every float read must be readable; the tile holds `mr * nr` floats.
pub type DirectFn = unsafe fn(usize, *const isize, *const f32, *const f32, *mut f32);

/// A direct micro-kernel that finishes its full `mr x nr` tile with a fused epilogue in
/// registers and stores it straight to the destination (see
/// [`crate::gemm::micro::FusedFn`]): `(taps, tap offsets, input base, weight panel,
/// epilogue)`.
///
/// # Safety
/// As for [`DirectFn`], with the epilogue's pointers covering the whole tile.
pub type DirectFusedFn = unsafe fn(usize, *const isize, *const f32, *const f32, &TileEpi);

/// Weights packed for the direct kernel: panels of `mr` output channels, each `taps x mr`.
#[derive(Clone, Debug)]
pub struct DirectWeights {
    mr: usize,
    co: usize,
    taps: usize,
    data: Floats,
}

impl DirectWeights {
    /// Packs `co x taps` weights (row-major: channel-major, then taps in (ci, ky, kx) order)
    /// for `kern`'s tile rows; channels past `co` in the last panel are zero.
    ///
    /// # Panics
    /// When `w` holds fewer than `co * taps` floats.
    pub fn new(kern: &Kernels, co: usize, taps: usize, w: &[f32]) -> DirectWeights {
        assert!(
            w.len() >= co * taps,
            "{} weights for {co} x {taps}",
            w.len()
        );
        let mr = kern.direct_mr;
        let panels = co.div_ceil(mr);
        let data = packed(
            || format!("direct mr{mr} {co}x{taps}"),
            panels * taps * mr,
            |d| {
                for c in 0..co {
                    let (p, r) = (c / mr, c % mr);
                    for t in 0..taps {
                        d[(p * taps + t) * mr + r] = w[c * taps + t];
                    }
                }
            },
        );
        DirectWeights { mr, co, taps, data }
    }

    /// Output channels.
    pub fn channels(&self) -> usize {
        self.co
    }

    /// The packed panels: panel `p`'s tap `t` holds its `mr` channels' weights at
    /// `(p * taps + t) * mr`.
    pub fn panels(&self) -> &[f32] {
        self.data.as_slice()
    }
}

/// Where each batch's input channel block starts, and the input's steps (channel, row,
/// column).
#[derive(Clone, Copy)]
pub struct DirectInput<'a> {
    /// Element (0, 0, 0) of batch 0's channels.
    pub x: *const f32,
    /// Start of each batch's channel block, past `x`.
    pub batch: &'a [isize],
    /// Steps between channels, rows and columns.
    pub strides: [isize; 3],
}

// SAFETY: only read; the creator guarantees the input outlives the call.
unsafe impl Sync for DirectInput<'_> {}

/// A raw pointer shared by tasks that write disjoint parts (or only read).
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: see the uses: padding writes disjoint planes, compute only reads.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// The layout of the padded, phase-split input of one batch.
struct PadLayout {
    /// Columns per phase row (with slack for the last tile's overrun).
    wph: usize,
    /// Rows per channel.
    hp: usize,
    /// Floats per phase (all channels).
    phase: usize,
    /// Floats per batch (all phases).
    batch: usize,
}

impl PadLayout {
    fn new(g: &Conv2d, nr: usize) -> PadLayout {
        let hp = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1;
        // A tap of the last tile reads up to ow.div_ceil(nr) * nr + (kw - 1) * dw / sw columns.
        // Rows start on cache lines, so a tile's first-column taps load whole lines (a
        // 96 -> 24 channel 3x3 convolution at 160x160 ran 15-25% faster than with rows
        // of 163 floats, most loads split across two lines).
        let wph = (g.ow.div_ceil(nr) * nr + ((g.kw - 1) * g.dw) / g.sw + 1).next_multiple_of(16);
        let phase = g.c * hp * wph;
        PadLayout {
            wph,
            hp,
            phase,
            batch: phase * g.sw,
        }
    }
}

/// Floats of one batch's padded, phase-split copy for tiles `nr` pixels wide (the direct
/// kernel's `micro.nr`, the im2col panels' 1), counted without overflow: a plan checks it
/// against the memory limits before a run allocates it.
pub fn padded_copy_floats(g: &Conv2d, nr: usize) -> u128 {
    let u = |x: usize| x as u128;
    let hp = u(g.oh.saturating_sub(1)) * u(g.sh) + u(g.kh.saturating_sub(1)) * u(g.dh) + 1;
    let wph =
        (u(g.ow.div_ceil(nr.max(1))) * u(nr) + u(g.kw.saturating_sub(1) * g.dw / g.sw.max(1)) + 1)
            .next_multiple_of(16);
    u(g.c) * hp * wph * u(g.sw)
}

/// Each tap's offset into one batch's padded, phase-split input: tap `(ci, ky, kx)` of
/// output `(y, x)` reads `offs[tap] + y * sh * wph + x`.
fn tap_offsets(g: &Conv2d, pl: &PadLayout) -> Vec<isize> {
    let mut offs = vec![0isize; g.k()];
    for ci in 0..g.c {
        for ky in 0..g.kh {
            for kx in 0..g.kw {
                let col = kx * g.dw;
                let (phase, c) = (col % g.sw, col / g.sw);
                offs[(ci * g.kh + ky) * g.kw + kx] =
                    (phase * pl.phase + ci * pl.hp * pl.wph + ky * g.dh * pl.wph + c) as isize;
            }
        }
    }
    offs
}

/// Fills `buf` (`batches * pl.batch` floats) with the padded, phase-split copies of the
/// input, one (batch, channel) plane per task: only the phases and padded rows some tap
/// reads.
///
/// # Safety
/// As for [`direct_conv`].
#[allow(clippy::too_many_arguments)]
unsafe fn pad_input(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    batches: usize,
    input: &DirectInput,
    pl: &PadLayout,
    buf: &mut [f32],
) {
    let [cs, rs, es] = input.strides;
    let row_used: Vec<bool> = (0..pl.hp)
        .map(|py| {
            (0..g.kh).any(|ky| {
                py >= ky * g.dh
                    && (py - ky * g.dh).is_multiple_of(g.sh)
                    && (py - ky * g.dh) / g.sh < g.oh
            })
        })
        .collect();
    let sw = g.sw as isize;
    // The phases some tap reads, each with its span inside the input row.
    let spans: Vec<(usize, PhaseSpan)> = crate::conv::phase_spans(g, es, pl.wph)
        .into_iter()
        .enumerate()
        .filter_map(|(p, s)| Some((p, s?)))
        .collect();
    let rows: Vec<usize> = (0..pl.hp).filter(|&r| row_used[r]).collect();
    let bp = Shared(buf.as_mut_ptr());
    pool.run(threads, batches * g.c, &|t| {
        let _ = &bp;
        let (b, ci) = (t / g.c, t % g.c);
        let src = input.x.offset(input.batch[b] + ci as isize * cs);
        for &(
            phase,
            PhaseSpan {
                lo,
                hi,
                first,
                avail,
            },
        ) in &spans
        {
            let dst =
                bp.0.add(b * pl.batch + phase * pl.phase + ci * pl.hp * pl.wph);
            for &py in &rows {
                let iy = py as isize - g.ph as isize;
                let row = std::slice::from_raw_parts_mut(dst.add(py * pl.wph), pl.wph);
                if iy < 0 || iy >= g.h as isize {
                    row.fill(0.0);
                    continue;
                }
                let srow = src.offset(iy * rs + first * es);
                crate::conv::pad_row(kern.strided_copy, row, (lo, hi), srow, sw * es, avail);
            }
        }
    });
}

/// The im2col matrix of a convolution (`k x pixels` per batch) served from a padded,
/// phase-split copy of its input: every tap row of a panel is a few contiguous copies, with
/// no padding or stride to handle per element.
pub struct PaddedIm2col {
    base: *const f32,
    batch: usize,
    offs: Vec<isize>,
    row_step: usize,
    ow: usize,
}

// SAFETY: the padded copy is only read while products use it.
unsafe impl Sync for PaddedIm2col {}

impl PanelSource for PaddedIm2col {
    fn pack(&self, batch: usize, j0: usize, cols: usize, k: usize, nr: usize, out: &mut [f32]) {
        debug_assert_eq!(k, self.offs.len());
        // The panel's pixels as runs within one output row: (first column, start offset).
        let mut runs = [(0usize, 0usize, 0isize); 72];
        let mut nruns = 0;
        let mut j = 0;
        while j < cols && nruns < runs.len() {
            let p = j0 + j;
            let (y, x0) = (p / self.ow, p % self.ow);
            let len = (self.ow - x0).min(cols - j);
            runs[nruns] = (
                j,
                len,
                (batch * self.batch + y * self.row_step + x0) as isize,
            );
            nruns += 1;
            j += len;
        }
        let runs = &runs[..nruns];
        for (dst, &off) in out[..k * nr].chunks_exact_mut(nr).zip(&self.offs) {
            for &(jj, len, at) in runs {
                // SAFETY: every tap of every output pixel lies in the padded copy.
                let src = unsafe { std::slice::from_raw_parts(self.base.offset(at + off), len) };
                crate::buf::copy_short(&mut dst[jj..jj + len], src);
            }
            dst[cols..].fill(0.0);
        }
    }
}

/// Runs `f` with the im2col matrix of `batches` images served from a padded, phase-split
/// copy of the input made here (in this thread's scratch).
///
/// # Safety
/// As for [`direct_conv`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn with_padded_im2col<R>(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    batches: usize,
    input: &DirectInput,
    f: impl FnOnce(&PaddedIm2col) -> R,
) -> R {
    // Copies take exactly a run's columns, so rows need no slack past the last pixel.
    let pl = PadLayout::new(g, 1);
    with_scratch(batches * pl.batch, |buf| {
        pad_input(kern, pool, threads, g, batches, input, &pl, buf);
        let src = PaddedIm2col {
            base: buf.as_ptr(),
            batch: pl.batch,
            offs: tap_offsets(g, &pl),
            row_step: g.sh * pl.wph,
            ow: g.ow,
        };
        f(&src)
    })
}

/// Runs `f` with the input of a 1x1 convolution without padding sampled at its strides
/// into a compact copy made here (in this thread's scratch): the `channels x pixels`
/// matrix of each batch, row-major, batches `channels * pixels` floats apart, which the
/// GEMM reads in place like a stride-1 convolution's input.
///
/// # Safety
/// As for [`direct_conv`]; `g` is 1x1 without padding.
pub unsafe fn with_subsampled<R>(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    batches: usize,
    input: &DirectInput,
    f: impl FnOnce(MatRef, isize) -> R,
) -> R {
    debug_assert!(g.kh == 1 && g.kw == 1 && g.ph == 0 && g.pw == 0);
    let px = g.oh * g.ow;
    let [cs, rs, es] = input.strides;
    with_scratch(batches * g.c * px, |buf| {
        let bp = Shared(buf.as_mut_ptr());
        pool.run(threads, batches * g.c, &|t| {
            let _ = &bp;
            let (b, ci) = (t / g.c, t % g.c);
            let src = input.x.offset(input.batch[b] + ci as isize * cs);
            let dst = std::slice::from_raw_parts_mut(bp.0.add(t * px), px);
            for (y, row) in dst.chunks_exact_mut(g.ow).enumerate() {
                let srow = src.offset((y * g.sh) as isize * rs);
                // Floats from the row's first sample to its last element.
                let avail = ((g.w as isize - 1) * es + 1).max(0) as usize;
                (kern.strided_copy)(srow, g.sw as isize * es, avail, row);
            }
        });
        f(MatRef::rows(buf.as_ptr(), px), (g.c * px) as isize)
    })
}

/// Runs the convolution of `batches` images (or image groups) with `w`, handing each finished
/// `mr x nr` tile to `sink` as batch `b`, rows = output channels, columns = output pixels
/// (`y * ow + x`).
///
/// # Safety
/// Every input element the geometry reads (through `input`) must be readable, and not
/// written during the call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn direct_conv(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    batches: usize,
    input: &DirectInput,
    w: &DirectWeights,
    sink: &dyn TileSink,
) {
    let (mr, nr) = (kern.direct_mr, kern.micro.nr);
    if batches == 0 || g.oh == 0 || g.ow == 0 || w.co == 0 {
        return;
    }
    debug_assert_eq!(w.mr, mr);
    debug_assert_eq!(w.taps, g.k());
    if crate::strided::applies(kern, g, input.strides[2]) {
        // Column stride 2 reads the input in place, without the padded phase-split copy.
        return crate::strided::conv(kern, pool, threads, g, batches, input, w, sink);
    }
    let pl = PadLayout::new(g, nr);
    let taps = g.k();
    let offs = tap_offsets(g, &pl);
    with_scratch(batches * pl.batch, |buf| {
        let bp = Shared(buf.as_mut_ptr());
        // Phase 1: padded, phase-split copies, one (batch, channel) plane per task.
        pad_input(kern, pool, threads, g, batches, input, &pl, buf);
        // Phase 2: tiles. Tasks are (batch, block of channel panels, block of output
        // rows); within a task each tile position runs every panel of the block, so its
        // input stays in L1 while the block's weights (sized to half the L2) stream by.
        let panels = w.co.div_ceil(mr);
        let per_panel = taps * mr * 4;
        let pb = ((crate::isa::l2_bytes() / 2) / per_panel.max(1)).clamp(1, panels);
        let pblocks = panels.div_ceil(pb);
        let rows_per =
            g.oh.div_ceil((4 * threads).div_ceil(batches * pblocks).max(1))
                .max(1);
        let blocks = g.oh.div_ceil(rows_per);
        let xt = g.ow.div_ceil(nr);
        let ker = kern.direct;
        pool.run(threads, batches * pblocks * blocks, &|t| {
            let _ = &bp;
            let b = t / (pblocks * blocks);
            let pbk = (t / blocks) % pblocks;
            let blk = t % blocks;
            let mut tile = [0f32; 8 * 64];
            let y_end = ((blk + 1) * rows_per).min(g.oh);
            for y in blk * rows_per..y_end {
                let base = bp.0.add(b * pl.batch + y * g.sh * pl.wph);
                // The padded rows output row y + 1 reads that row y does not, one per
                // (phase, channel), each tile of the row asking for its share towards L2:
                // too many streams for the hardware prefetchers (a 96 -> 24 channel 3x3
                // layer at 160x160 stalled half its time on those rows' first loads).
                let new_rows = g.sh.min((g.kh - 1) * g.dh + 1);
                let last = (y + 1) * g.sh + (g.kh - 1) * g.dh;
                let fresh = new_rows * g.sw * g.c;
                let share = if y + 1 < y_end { fresh.div_ceil(xt) } else { 0 };
                for xi in 0..xt {
                    for r in xi * share..((xi + 1) * share).min(fresh) {
                        let (plane, iy) = (r / new_rows, last + 1 - new_rows + r % new_rows);
                        let (phase, ci) = (plane / g.c, plane % g.c);
                        let row = bp.0.wrapping_add(
                            b * pl.batch + phase * pl.phase + (ci * pl.hp + iy) * pl.wph,
                        );
                        for o in (0..pl.wph).step_by(16) {
                            crate::simd::prefetch_l2(row.wrapping_add(o));
                        }
                    }
                    let x0 = xi * nr;
                    let cols = nr.min(g.ow - x0);
                    for p in pbk * pb..((pbk + 1) * pb).min(panels) {
                        let wp = w.data.as_slice().as_ptr().add(p * taps * mr);
                        let rows = mr.min(w.co - p * mr);
                        if rows == mr && cols == nr {
                            if let Some(fused) = kern.direct_fused {
                                if let Some(epi) = sink.fused(b, p * mr, y * g.ow + x0) {
                                    fused(taps, offs.as_ptr(), base.add(x0), wp, &epi);
                                    continue;
                                }
                            }
                        }
                        // A last tile of at most half the pixels takes the half-width
                        // kernel where the ISA has one (YOLOv8n's and PP-OCR's 80-wide rows
                        // are 32 + 32 + 16).
                        let ker = match kern.direct_half {
                            Some(half) if 2 * cols <= nr => half,
                            _ => ker,
                        };
                        ker(taps, offs.as_ptr(), base.add(x0), wp, tile.as_mut_ptr());
                        sink.tile(
                            b,
                            p * mr,
                            y * g.ow + x0,
                            rows,
                            cols,
                            &mut tile[..rows * nr],
                            nr,
                        );
                    }
                }
            }
        });
    });
}

macro_rules! direct_portable {
    () => {
        /// The portable direct kernel (4 x 8 tile).
        ///
        /// # Safety
        /// See [`DirectFn`].
        pub unsafe fn direct(
            k: usize,
            offs: *const isize,
            base: *const f32,
            w: *const f32,
            t: *mut f32,
        ) {
            const MR: usize = crate::gemm::micro::PORTABLE_MR;
            const NR: usize = crate::gemm::micro::PORTABLE_NR;
            let mut c = [[0f32; NR]; MR];
            for tap in 0..k {
                let p = base.offset(*offs.add(tap));
                let x = std::slice::from_raw_parts(p, NR);
                for (r, row) in c.iter_mut().enumerate() {
                    let wv = *w.add(tap * MR + r);
                    for j in 0..NR {
                        row[j] += wv * x[j];
                    }
                }
            }
            for (r, row) in c.iter().enumerate() {
                std::ptr::copy_nonoverlapping(row.as_ptr(), t.add(r * NR), NR);
            }
        }
    };
}

/// The portable build.
pub mod portable {
    direct_portable!();
}

/// The AVX2 (6 x 16) and AVX-512 (6 x 32) direct kernels.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use crate::epilogue::TileEpi;
    use crate::simd::{Y8, Z16};
    use std::arch::x86_64::*;

    /// See [`super::DirectFn`] (AVX2+FMA CPUs only).
    ///
    /// # Safety
    /// See [`super::DirectFn`]; the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn direct_avx2(
        k: usize,
        offs: *const isize,
        base: *const f32,
        w: *const f32,
        t: *mut f32,
    ) {
        let (c0, c1) = avx2_taps(k, offs, base, w);
        for r in 0..6 {
            _mm256_storeu_ps(t.add(r * 16), c0[r]);
            _mm256_storeu_ps(t.add(r * 16 + 8), c1[r]);
        }
    }

    /// See [`super::DirectFusedFn`] (AVX2+FMA CPUs only).
    ///
    /// # Safety
    /// See [`super::DirectFusedFn`]; the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn direct_avx2_fused(
        k: usize,
        offs: *const isize,
        base: *const f32,
        w: *const f32,
        epi: &TileEpi,
    ) {
        epi.prefetch(6, 16);
        let (c0, c1) = avx2_taps(k, offs, base, w);
        for r in 0..6 {
            epi.apply(r, 0, Y8(c0[r]));
            epi.apply(r, 8, Y8(c1[r]));
        }
    }

    /// The AVX2 tile's sums over its taps.
    #[inline(always)]
    unsafe fn avx2_taps(
        k: usize,
        offs: *const isize,
        base: *const f32,
        w: *const f32,
    ) -> ([__m256; 6], [__m256; 6]) {
        let mut c0 = [_mm256_setzero_ps(); 6];
        let mut c1 = [_mm256_setzero_ps(); 6];
        // Four taps per iteration, as the GEMM micro-kernel (Zen 3 sustains more of its
        // FMA peak unrolled); then the rest one by one, in the same order.
        let mut tap = 0;
        while tap + 4 <= k {
            for u in 0..4 {
                let p = base.offset(*offs.add(tap + u));
                let x0 = _mm256_loadu_ps(p);
                let x1 = _mm256_loadu_ps(p.add(8));
                let wt = w.add((tap + u) * 6);
                for r in 0..6 {
                    let wv = _mm256_broadcast_ss(&*wt.add(r));
                    c0[r] = _mm256_fmadd_ps(wv, x0, c0[r]);
                    c1[r] = _mm256_fmadd_ps(wv, x1, c1[r]);
                }
            }
            tap += 4;
        }
        for tap in tap..k {
            let p = base.offset(*offs.add(tap));
            let x0 = _mm256_loadu_ps(p);
            let x1 = _mm256_loadu_ps(p.add(8));
            let wt = w.add(tap * 6);
            for r in 0..6 {
                let wv = _mm256_broadcast_ss(&*wt.add(r));
                c0[r] = _mm256_fmadd_ps(wv, x0, c0[r]);
                c1[r] = _mm256_fmadd_ps(wv, x1, c1[r]);
            }
        }
        (c0, c1)
    }

    /// Output channels of the AVX-512 tile: 8 x 32 pixels, 16 zmm accumulators, so each
    /// pair of input loads feeds 16 FMAs.
    pub const AVX512_DIRECT_MR: usize = 8;

    /// See [`super::DirectFn`] (AVX-512 CPUs only).
    ///
    /// # Safety
    /// See [`super::DirectFn`]; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    pub unsafe fn direct_avx512(
        k: usize,
        offs: *const isize,
        base: *const f32,
        w: *const f32,
        t: *mut f32,
    ) {
        let (c0, c1) = avx512_taps(k, offs, base, w);
        for r in 0..AVX512_DIRECT_MR {
            _mm512_storeu_ps(t.add(r * 32), c0[r]);
            _mm512_storeu_ps(t.add(r * 32 + 16), c1[r]);
        }
    }

    /// See [`super::DirectFusedFn`] (AVX-512 CPUs only).
    ///
    /// # Safety
    /// See [`super::DirectFusedFn`]; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    pub unsafe fn direct_avx512_fused(
        k: usize,
        offs: *const isize,
        base: *const f32,
        w: *const f32,
        epi: &TileEpi,
    ) {
        epi.prefetch(AVX512_DIRECT_MR, 32);
        let (c0, c1) = avx512_taps(k, offs, base, w);
        for r in 0..AVX512_DIRECT_MR {
            epi.apply(r, 0, Z16(c0[r]));
            epi.apply(r, 16, Z16(c1[r]));
        }
    }

    /// The first 16 of the AVX-512 tile's 32 pixels (see [`super::DirectFn`]; the tile's
    /// rows keep their 32-float stride), for a row's last tile that narrow.
    ///
    /// # Safety
    /// See [`super::DirectFn`]; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    pub unsafe fn direct_avx512_half(
        k: usize,
        offs: *const isize,
        base: *const f32,
        w: *const f32,
        t: *mut f32,
    ) {
        const R: usize = AVX512_DIRECT_MR;
        let mut c = [_mm512_setzero_ps(); R];
        for tap in 0..k {
            let x = _mm512_loadu_ps(base.offset(*offs.add(tap)));
            let wt = w.add(tap * R);
            for (r, acc) in c.iter_mut().enumerate() {
                *acc = _mm512_fmadd_ps(_mm512_set1_ps(*wt.add(r)), x, *acc);
            }
        }
        for (r, &v) in c.iter().enumerate() {
            _mm512_storeu_ps(t.add(r * 32), v);
        }
    }

    /// The first 8 of the AVX2 tile's 16 pixels (see [`direct_avx512_half`]).
    ///
    /// # Safety
    /// See [`super::DirectFn`]; the CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn direct_avx2_half(
        k: usize,
        offs: *const isize,
        base: *const f32,
        w: *const f32,
        t: *mut f32,
    ) {
        let mut c = [_mm256_setzero_ps(); 6];
        for tap in 0..k {
            let x = _mm256_loadu_ps(base.offset(*offs.add(tap)));
            let wt = w.add(tap * 6);
            for (r, acc) in c.iter_mut().enumerate() {
                *acc = _mm256_fmadd_ps(_mm256_set1_ps(*wt.add(r)), x, *acc);
            }
        }
        for (r, &v) in c.iter().enumerate() {
            _mm256_storeu_ps(t.add(r * 16), v);
        }
    }

    /// The AVX-512 tile's sums over its taps.
    #[inline(always)]
    unsafe fn avx512_taps(
        k: usize,
        offs: *const isize,
        base: *const f32,
        w: *const f32,
    ) -> ([__m512; AVX512_DIRECT_MR], [__m512; AVX512_DIRECT_MR]) {
        const R: usize = AVX512_DIRECT_MR;
        let mut c0 = [_mm512_setzero_ps(); R];
        let mut c1 = [_mm512_setzero_ps(); R];
        for tap in 0..k {
            let p = base.offset(*offs.add(tap));
            let x0 = _mm512_loadu_ps(p);
            let x1 = _mm512_loadu_ps(p.add(16));
            let wt = w.add(tap * R);
            for r in 0..R {
                let wv = _mm512_set1_ps(*wt.add(r));
                c0[r] = _mm512_fmadd_ps(wv, x0, c0[r]);
                c1[r] = _mm512_fmadd_ps(wv, x1, c1[r]);
            }
        }
        (c0, c1)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gemm::StoreC;
    use crate::isa_tests;
    use crate::testing::rand_vec;

    fn check(kern: &Kernels) {
        for &(c, h, w, co, k, s, d, p) in &[
            (1, 1, 1, 1, 1, 1, 1, 0),
            (3, 5, 7, 5, 3, 1, 1, 1),
            (2, 9, 40, 7, 3, 2, 1, 1),
            (4, 8, 8, 13, 5, 1, 2, 4),
            (3, 17, 33, 6, 3, 2, 1, 0),
            (2, 11, 9, 3, 7, 2, 1, 3),
            (5, 6, 70, 17, 1, 2, 1, 0),
            // Stride 2 over wider rows and kernels, dilated rows, more padding than the
            // kernel needs.
            (6, 13, 71, 19, 3, 2, 1, 1),
            (3, 10, 66, 9, 5, 2, 1, 2),
            (2, 9, 20, 8, 7, 2, 1, 3),
            (4, 12, 12, 8, 3, 2, 2, 2),
            (3, 7, 8, 5, 3, 2, 1, 3),
        ] {
            let g = crate::testing::square_conv(c, h, w, k, s, d, p);
            check_conv(kern, &g, co, |input, dw, _, sink| unsafe {
                direct_conv(kern, crate::pool::global(), 2, &g, 2, input, dw, sink)
            });
        }
    }

    /// Runs `conv` (given the weights packed for the direct kernel and as they are) on two
    /// random contiguous images of geometry `g` into `co` channels and checks it against a
    /// plain sum.
    pub(crate) fn check_conv(
        kern: &Kernels,
        g: &Conv2d,
        co: usize,
        conv: impl Fn(&DirectInput, &DirectWeights, &[f32], &StoreC),
    ) {
        let (c, h, w, px) = (g.c, g.h, g.w, g.oh * g.ow);
        let x = rand_vec(2 * c * h * w, 1);
        let wt = rand_vec(co * g.k(), 2);
        let dw = DirectWeights::new(kern, co, g.k(), &wt);
        let mut out = vec![f32::NAN; 2 * co * px];
        let sink = StoreC {
            c: out.as_mut_ptr(),
            ldc: px,
            batch_stride: co * px,
        };
        let input = DirectInput {
            x: x.as_ptr(),
            batch: &[0, (c * h * w) as isize],
            strides: [(h * w) as isize, w as isize, 1],
        };
        conv(&input, &dw, &wt, &sink);
        let want = crate::testing::conv_plain(g, 2, co, &x, &wt);
        for (i, (&got, &want)) in out.iter().zip(&want).enumerate() {
            assert!(
                (got as f64 - want).abs() < 1e-4,
                "{} {g:?} co {co} element {i}: {got} vs {want}",
                kern.isa
            );
        }
    }

    isa_tests!(direct_convolution, check);

    /// Delegates tiles to a sink but never offers the fused kernel its epilogue.
    pub(crate) struct ScratchOnly<'a>(pub &'a dyn TileSink);

    impl TileSink for ScratchOnly<'_> {
        fn tile(
            &self,
            b: usize,
            i0: usize,
            j0: usize,
            rows: usize,
            cols: usize,
            t: &mut [f32],
            ld: usize,
        ) {
            self.0.tile(b, i0, j0, rows, cols, t, ld)
        }
    }

    /// Full tiles finished in registers give the bits of tiles finished from scratch.
    fn fused_matches_scratch(kern: &Kernels) {
        use crate::epilogue::{Act, Fused, FusedSink, RowMajor, Vector};
        // Stride 2 takes the in-place path where the ISA has one.
        for s in [1, 2] {
            let (c, h, w, co) = (5, 9, 2 * s * kern.micro.nr + 7, 2 * kern.direct_mr + 3);
            let (oh, ow) = ((h - 1) / s + 1, (w - 1) / s + 1);
            let g = Conv2d {
                c,
                h,
                w,
                kh: 3,
                kw: 3,
                sh: s,
                sw: s,
                dh: 1,
                dw: 1,
                ph: 1,
                pw: 1,
                oh,
                ow,
            };
            let x = rand_vec(c * h * w, 3);
            let wt = rand_vec(co * g.k(), 4);
            let bias = rand_vec(co, 5);
            let res = rand_vec(co * oh * ow, 6);
            let dw = DirectWeights::new(kern, co, g.k(), &wt);
            let input = DirectInput {
                x: x.as_ptr(),
                batch: &[0],
                strides: [(h * w) as isize, w as isize, 1],
            };
            for (act1, with_res) in [(Act::Silu, false), (Act::Relu, true)] {
                let run = |fused: bool| {
                    let mut out = vec![f32::NAN; co * oh * ow];
                    let sink = FusedSink {
                        epi: Fused {
                            alpha: 1.0,
                            row_bias: Some(Vector {
                                ptr: bias.as_ptr(),
                                batch: &[0],
                                step: 1,
                            }),
                            col_bias: None,
                            act1,
                            scale: None,
                            shift: None,
                            residual: with_res.then_some(RowMajor {
                                ptr: res.as_ptr() as *mut f32,
                                batch: &[0],
                                rs: (oh * ow) as isize,
                                cs: 1,
                            }),
                            act2: Act::None,
                            out: RowMajor {
                                ptr: out.as_mut_ptr(),
                                batch: &[0],
                                rs: (oh * ow) as isize,
                                cs: 1,
                            },
                        },
                        finish: kern.finish,
                    };
                    let pool = crate::pool::global();
                    unsafe {
                        if fused {
                            direct_conv(kern, pool, 1, &g, 1, &input, &dw, &sink);
                        } else {
                            direct_conv(kern, pool, 1, &g, 1, &input, &dw, &ScratchOnly(&sink));
                        }
                    }
                    out
                };
                let (got, want) = (run(true), run(false));
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "{} {act1:?} [{i}]: {a} vs {b}",
                        kern.isa
                    );
                }
            }
        }
    }

    isa_tests!(fused_direct_same_bits, fused_matches_scratch);

    /// The padded im2col packs the panels the plain im2col view packs, at every panel
    /// start and width, for strides, dilations, paddings and images narrower than a panel.
    fn padded_im2col_matches_plain(kern: &Kernels) {
        use crate::conv::Im2col;
        for &(c, h, w, k, s, d, p) in &[
            (3, 9, 40, 3, 2, 1, 1),
            (2, 7, 5, 3, 1, 1, 1),
            (4, 8, 8, 5, 1, 2, 4),
            (3, 17, 33, 3, 3, 1, 0),
            (2, 11, 9, 7, 2, 1, 3),
            (5, 6, 70, 1, 2, 1, 0),
        ] {
            let oh = (h + 2 * p - d * (k - 1) - 1) / s + 1;
            let ow = (w + 2 * p - d * (k - 1) - 1) / s + 1;
            let g = Conv2d {
                c,
                h,
                w,
                kh: k,
                kw: k,
                sh: s,
                sw: s,
                dh: d,
                dw: d,
                ph: p,
                pw: p,
                oh,
                ow,
            };
            let x = rand_vec(2 * c * h * w, 7);
            let offsets = [0isize, (c * h * w) as isize];
            let strides = [(h * w) as isize, w as isize, 1];
            let plain = Im2col {
                x: x.as_ptr(),
                batch: &offsets,
                strides,
                geom: g,
            };
            let input = DirectInput {
                x: x.as_ptr(),
                batch: &offsets,
                strides,
            };
            let pool = crate::pool::global();
            unsafe {
                with_padded_im2col(kern, pool, 2, &g, 2, &input, |padded| {
                    let (kk, px) = (g.k(), oh * ow);
                    for nr in [kern.micro.mr, kern.micro.nr] {
                        for b in 0..2 {
                            for j0 in (0..px).step_by(nr.min(7)) {
                                let cols = nr.min(px - j0);
                                let mut want = vec![f32::NAN; kk * nr];
                                let mut got = vec![f32::NAN; kk * nr];
                                plain.pack(b, j0, cols, kk, nr, &mut want);
                                padded.pack(b, j0, cols, kk, nr, &mut got);
                                assert_eq!(want, got, "{} {g:?} b{b} j0 {j0} nr {nr}", kern.isa);
                            }
                        }
                    }
                })
            };
        }
    }

    isa_tests!(padded_im2col_packs_like_plain, padded_im2col_matches_plain);

    /// The compact copy of a strided 1x1 convolution's input holds its samples in order.
    fn subsampled_holds_the_samples(kern: &Kernels) {
        for &(c, h, w, s) in &[(3, 9, 40, 2), (2, 7, 5, 3), (4, 8, 33, 2), (1, 1, 1, 2)] {
            let (oh, ow) = ((h - 1) / s + 1, (w - 1) / s + 1);
            let g = Conv2d {
                c,
                h,
                w,
                kh: 1,
                kw: 1,
                sh: s,
                sw: s,
                dh: 1,
                dw: 1,
                ph: 0,
                pw: 0,
                oh,
                ow,
            };
            let x = rand_vec(2 * c * h * w, 9);
            let offsets = [0isize, (c * h * w) as isize];
            let input = DirectInput {
                x: x.as_ptr(),
                batch: &offsets,
                strides: [(h * w) as isize, w as isize, 1],
            };
            unsafe {
                with_subsampled(kern, crate::pool::global(), 2, &g, 2, &input, |m, bs| {
                    for b in 0..2 {
                        for ci in 0..c {
                            for p in 0..oh * ow {
                                let (y, xo) = (p / ow, p % ow);
                                let want = x[b * c * h * w + ci * h * w + y * s * w + xo * s];
                                let got = *m
                                    .ptr
                                    .offset(b as isize * bs + ci as isize * m.rs + p as isize);
                                assert_eq!(got, want, "{} {g:?} ({b},{ci},{p})", kern.isa);
                            }
                        }
                    }
                })
            };
        }
    }

    isa_tests!(subsampled_copy, subsampled_holds_the_samples);
}
