//! Direct 2-D convolution at column stride 2, read straight from the NCHW input: no padded
//! or phase-split copy. A tile is `mr` output channels x two segments of 16 output pixels
//! (each segment within one output row, the two in the same row or consecutive ones, so
//! narrow rows fill lanes too). Per (input channel, kernel row) each segment loads the 48
//! input floats its taps span (masked to the row: padding reads as zero, and nothing past
//! the row is touched), splits them into even and odd columns, and every kernel column is
//! then a lane shift of one of the two.
//!
//! Each output element is one sum over its taps in a fixed order, whatever the split of
//! the work.

use crate::conv::Conv2d;
use crate::direct::{DirectInput, DirectWeights};
use crate::epilogue::TileEpi;
use crate::gemm::TileSink;
use crate::pool::ThreadPool;
use crate::Kernels;

/// Output pixels per segment (one AVX-512 vector).
pub const SEG: usize = 16;

/// Widest kernel the tile kernel takes. (Its taps would lie in the 48 floats a segment
/// loads up to 7 columns, but a 7-wide kernel's columns spill registers: ResNet-50's 7x7
/// stem ran 1.2-1.4x slower than on the padded copy.)
pub const MAX_KW: usize = 3;

/// Largest input image, in L2s: the tiles read one row stream per input channel, which the
/// hardware prefetchers do not follow, and every channel panel reads the whole image again.
/// A 64-channel 320x320 image (26 MB) took 45-70 ms against 21-22 on the im2col GEMM;
/// YOLOv8n's 16-channel 160x160 one (1.6 MB) is the one measured faster.
pub const MAX_INPUT_L2S: usize = 4;

/// Fewest input channels: below, a tile's few taps leave its per-tile setup dominant
/// (PP-OCRv4's 3 -> 16 channel layer at 640x640 ran 1.2-1.3x slower than on the padded copy).
pub const MIN_CHANNELS: usize = 8;

/// Fewest of a row's segment lanes that must hold output pixels: YOLOv8n's 20-wide rows
/// (16 + 4, 38% of the FMAs wasted) ran slower than on the im2col GEMM, and its 40-wide
/// ones (17% wasted) no faster in the model; 80-wide ones ran 1.4x faster.
pub const MIN_ROW_USE: f64 = 0.9;

/// One segment of a tile: `n` output pixels of one row from the segment's first.
#[derive(Clone, Copy, Debug, Default)]
pub struct Segment {
    /// Offset of input row `iy0`'s column `col0` from the batch's first element (may lie
    /// before it; only in-row lanes are read).
    pub at: isize,
    /// The input row the segment's kernel row 0 reads (may be outside the image).
    pub iy0: isize,
    /// Lanes of the three input vectors inside the row.
    pub masks: [u16; 3],
    /// Output pixels in the segment (0: an empty second segment).
    pub n: usize,
    /// Its first output pixel, `y * ow + x0`.
    pub first: usize,
}

/// What the tile kernel needs of the geometry and the input.
pub struct TileCtx {
    /// Input channels.
    pub c: usize,
    /// Kernel rows.
    pub kh: usize,
    /// Kernel columns (1 or 3).
    pub kw: usize,
    /// Dilation between kernel rows.
    pub dh: usize,
    /// Input rows.
    pub h: usize,
    /// Steps between input channels and rows.
    pub cs: isize,
    /// See `cs`.
    pub rs: isize,
}

/// The tile kernel: sums `taps` for both segments with the weight panel `w` (`c * kh * kw`
/// taps of `mr` weights), then per segment finishes it into `epis[s]` when given, else
/// stores it into `tile` (row-major, 32 floats a row, segment `s` from column `16 s`).
///
/// # Safety
/// `x` is the batch's input: every in-row element of every in-image row is readable; the
/// weight panel holds the taps; the epilogues cover their segments; `tile` holds `mr x 32`.
pub type TileFn =
    unsafe fn(&TileCtx, *const f32, &[Segment; 2], *const f32, &[Option<TileEpi>; 2], *mut f32);

/// Whether this path can run the convolution on `kern` (its input's column step `es`).
pub fn can_run(kern: &Kernels, g: &Conv2d, es: isize) -> bool {
    kern.direct_s2.is_some()
        && es == 1
        && g.sw == 2
        && g.dw == 1
        && g.kw % 2 == 1
        && g.kw <= MAX_KW
        && g.ow > 0
        && g.oh > 0
}

/// Whether this path takes the convolution on `kern`: it can run it, and its rows fill
/// lanes and its channels amortize a tile's setup.
pub fn applies(kern: &Kernels, g: &Conv2d, es: isize) -> bool {
    can_run(kern, g, es)
        && g.ow as f64 / g.ow.next_multiple_of(SEG) as f64 >= MIN_ROW_USE
        && g.c >= MIN_CHANNELS
        && g.c * g.h * g.w * 4 <= MAX_INPUT_L2S * crate::isa::l2_bytes()
}

/// The segments of one output image in order, planned over an input with row step `rs`:
/// rows, then 16-pixel runs within each.
fn segments(g: &Conv2d, rs: isize) -> Vec<Segment> {
    let per_row = g.ow.div_ceil(SEG);
    (0..g.oh)
        .flat_map(|y| (0..per_row).map(move |s| (y, s * SEG, SEG.min(g.ow - s * SEG))))
        .map(|r| plan(g, rs, r))
        .collect()
}

/// Plans segment `(y, x0, n)` of `g` over an input with row step `rs`.
fn plan(g: &Conv2d, rs: isize, (y, x0, n): (usize, usize, usize)) -> Segment {
    let iy0 = (y * g.sh) as isize - g.ph as isize;
    let col0 = (x0 * g.sw) as isize - g.pw as isize;
    let mut masks = [0u16; 3];
    for (i, m) in masks.iter_mut().enumerate() {
        let first = col0 + (i * SEG) as isize;
        let lo = (-first).clamp(0, SEG as isize) as usize;
        let hi = (g.w as isize - first).clamp(0, SEG as isize) as usize;
        if lo < hi {
            *m = (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as u16;
        }
    }
    Segment {
        at: iy0 * rs + col0,
        iy0,
        masks,
        n,
        first: y * g.ow + x0,
    }
}

/// Runs the convolution of `batches` images with `w`, handing each finished segment of
/// `mr` channels to `sink` as batch `b`, rows = output channels, columns = output pixels
/// (`y * ow + x`).
///
/// # Safety
/// As for [`crate::direct::direct_conv`]; [`can_run`] holds.
#[allow(clippy::too_many_arguments)]
pub unsafe fn conv(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    batches: usize,
    input: &DirectInput,
    w: &DirectWeights,
    sink: &dyn TileSink,
) {
    let Some(ker) = kern.direct_s2 else {
        return;
    };
    let mr = kern.direct_mr;
    let [cs, rs, _] = input.strides;
    let segs = segments(g, rs);
    let tiles = segs.len().div_ceil(2);
    let taps = g.k();
    let panels = w.channels().div_ceil(mr);
    // Panel blocks whose weights fit in half of L2 stream past each tile's input (in L1).
    let per_panel = taps * mr * 4;
    let pb = ((crate::isa::l2_bytes() / 2) / per_panel.max(1)).clamp(1, panels);
    let pblocks = panels.div_ceil(pb);
    let per_task = tiles
        .div_ceil((4 * threads).div_ceil(batches * pblocks).max(1))
        .max(1);
    let tblocks = tiles.div_ceil(per_task);
    let ctx = TileCtx {
        c: g.c,
        kh: g.kh,
        kw: g.kw,
        dh: g.dh,
        h: g.h,
        cs,
        rs,
    };
    let weights = w.panels();
    pool.run(threads, batches * pblocks * tblocks, &|t| {
        let b = t / (pblocks * tblocks);
        let pbk = (t / tblocks) % pblocks;
        let tb = t % tblocks;
        let x = input.x.wrapping_offset(input.batch[b]);
        let mut tile = [0f32; 8 * 32];
        // Panel outer: its weights stay in L1 while the tiles' inputs stream from L2 (a
        // 32 -> 64 channel layer at 80x80 ran 1.3x faster than tiles outer, whose input
        // and eight panels of weights did not fit in L1 together).
        for p in pbk * pb..((pbk + 1) * pb).min(panels) {
            for ti in tb * per_task..((tb + 1) * per_task).min(tiles) {
                let pair = [
                    segs[2 * ti],
                    segs.get(2 * ti + 1).copied().unwrap_or_default(),
                ];
                let first = [pair[0].first, pair[1].first];
                let rows = mr.min(w.channels() - p * mr);
                let epi = |s: usize| {
                    (rows == mr && pair[s].n == SEG)
                        .then(|| sink.fused(b, p * mr, first[s]))
                        .flatten()
                };
                let epis = [epi(0), epi(1)];
                let wp = weights.as_ptr().add(p * taps * mr);
                ker(&ctx, x, &pair, wp, &epis, tile.as_mut_ptr());
                for s in 0..2 {
                    let n = pair[s].n;
                    if n > 0 && epis[s].is_none() {
                        let t = &mut tile[s * SEG..s * SEG + (rows - 1) * 32 + SEG];
                        sink.tile(b, p * mr, first[s], rows, n, t, 32);
                    }
                }
            }
        }
    });
}

/// The AVX-512 tile kernel.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::{Segment, TileCtx, SEG};
    use crate::direct::x86::AVX512_DIRECT_MR as MR;
    use crate::epilogue::TileEpi;
    use crate::simd::Z16;
    use std::arch::x86_64::*;

    /// One segment's `KW` (1 or 3) kernel columns for input row pointer `p` under `masks`:
    /// column `kx` holds the segment's floats `kx, kx + 2, ...`, its evens, its odds, or its
    /// evens one lane on (the last lane the first of the third vector).
    #[inline(always)]
    unsafe fn columns<const KW: usize>(p: *const f32, masks: [u16; 3]) -> [__m512; KW] {
        let even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
        let odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
        let v0 = _mm512_maskz_loadu_ps(masks[0], p);
        let v1 = _mm512_maskz_loadu_ps(masks[1], p.wrapping_add(SEG));
        let e = _mm512_permutex2var_ps(v0, even, v1);
        let mut cols = [e; KW];
        if KW > 1 {
            cols[1] = _mm512_permutex2var_ps(v0, odd, v1);
            let v2 = _mm512_maskz_loadu_ps(masks[2], p.wrapping_add(2 * SEG));
            cols[2] = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
                _mm512_castps_si512(v2),
                _mm512_castps_si512(e),
            ));
        }
        cols
    }

    /// The sums of one tile over all taps, kernel width `KW`.
    #[inline(always)]
    unsafe fn taps<const KW: usize>(
        ctx: &TileCtx,
        x: *const f32,
        segs: &[Segment; 2],
        w: *const f32,
    ) -> ([__m512; MR], [__m512; MR]) {
        let mut c0 = [_mm512_setzero_ps(); MR];
        let mut c1 = [_mm512_setzero_ps(); MR];
        for ci in 0..ctx.c {
            let plane = ci as isize * ctx.cs;
            for ky in 0..ctx.kh {
                // A kernel row outside the image reads nothing (its lanes masked to zero).
                let dy = (ky * ctx.dh) as isize;
                let mask = |s: &Segment| {
                    let iy = s.iy0 + dy;
                    if iy >= 0 && iy < ctx.h as isize && s.n > 0 {
                        s.masks
                    } else {
                        [0; 3]
                    }
                };
                let (ma, mb) = (mask(&segs[0]), mask(&segs[1]));
                let off = plane + dy * ctx.rs;
                let a = columns::<KW>(x.wrapping_offset(off + segs[0].at), ma);
                let b = columns::<KW>(x.wrapping_offset(off + segs[1].at), mb);
                let wt = w.add((ci * ctx.kh + ky) * KW * MR);
                for kx in 0..KW {
                    for r in 0..MR {
                        let wv = _mm512_set1_ps(*wt.add(kx * MR + r));
                        c0[r] = _mm512_fmadd_ps(wv, a[kx], c0[r]);
                        c1[r] = _mm512_fmadd_ps(wv, b[kx], c1[r]);
                    }
                }
            }
        }
        (c0, c1)
    }

    /// See [`super::TileFn`] (AVX-512 CPUs only).
    ///
    /// # Safety
    /// See [`super::TileFn`]; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    pub unsafe fn tile_avx512(
        ctx: &TileCtx,
        x: *const f32,
        segs: &[Segment; 2],
        w: *const f32,
        epis: &[Option<TileEpi>; 2],
        tile: *mut f32,
    ) {
        let (c0, c1) = match ctx.kw {
            1 => taps::<1>(ctx, x, segs, w),
            _ => taps::<3>(ctx, x, segs, w),
        };
        for (s, acc) in [c0, c1].iter().enumerate() {
            match &epis[s] {
                Some(epi) => {
                    for (r, &v) in acc.iter().enumerate() {
                        epi.apply(r, 0, Z16(v));
                    }
                }
                None => {
                    for (r, &v) in acc.iter().enumerate() {
                        _mm512_storeu_ps(tile.add(r * 32 + s * SEG), v);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa_tests;

    /// Every geometry the path can run (odd and even widths, rows of one to several
    /// segments, row dilation, more padding than the kernel needs, a last channel panel
    /// part full) against a plain sum.
    fn matches_plain(kern: &Kernels) {
        for &(c, h, w, co, k, sh, dh, p) in &[
            (3, 9, 40, 7, 3, 2, 1, 1),
            (6, 13, 71, 19, 3, 2, 1, 1),
            (9, 7, 8, 5, 3, 1, 1, 3),
            (4, 12, 33, 8, 3, 2, 2, 2),
            (2, 5, 160, 16, 3, 2, 1, 0),
            (5, 6, 31, 9, 1, 2, 1, 0),
        ] {
            let oh = (h + 2 * p - dh * (k - 1) - 1) / sh + 1;
            let ow = (w + 2 * p - k) / 2 + 1;
            let g = Conv2d {
                c,
                h,
                w,
                kh: k,
                kw: k,
                sh,
                sw: 2,
                dh,
                dw: 1,
                ph: p,
                pw: p,
                oh,
                ow,
            };
            if !can_run(kern, &g, 1) {
                assert!(kern.direct_s2.is_none(), "{g:?}");
                continue;
            }
            crate::direct::tests::check_conv(kern, &g, co, |input, dw, _, sink| unsafe {
                conv(kern, crate::pool::global(), 2, &g, 2, input, dw, sink)
            });
        }
    }

    isa_tests!(in_place_stride_2, matches_plain);
}
