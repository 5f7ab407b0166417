//! Stride-1 convolutions on AMX tiles, read in place: the input is copied once per call to
//! bf16, channels paired and padded (`xp[c / 2][y][x][c % 2]` over the padded image), so
//! that for each filter tap a B tile (16 channel pairs x 16 output pixels) is 16 rows of
//! 64 contiguous bytes of that copy: no im2col and no per-panel packing. Output pixels run
//! flat over the padded width (`f = y * wp + x`; the columns past the output width are
//! computed and dropped), so a tap's pixels are one contiguous run for any image width.
//! The filters are packed once per tap as rows of output channels (A tiles).
//!
//! Each task takes 32 flat pixels of one image and sweeps every block of 32 output
//! channels over them: per tap and per 32 channels, two A tiles, two B tiles and four
//! `tdpbf16ps` into the 32 x 32 block. Finished rows of valid pixels go to a
//! [`TileSink`] as (image, channel, pixel `y * ow + x`) tiles.

use crate::amx::{TileConfig, BLOCK, CONFIG};
use crate::conv::Conv2d;
use crate::gemm::TileSink;
use crate::pool::ThreadPool;

/// The paired copy, shared by the tasks (each writes its own planes, then all read).
struct Ptr(*mut u32);
// SAFETY: see the uses: planes are written by one task each, read after the packing.
unsafe impl Send for Ptr {}
unsafe impl Sync for Ptr {}

/// The input image, read by every packing task.
struct In(*const f32);
// SAFETY: only read during the call.
unsafe impl Send for In {}
unsafe impl Sync for In {}

/// Filters packed for [`amx_conv`]: per tap, rows of output channels (padded to 32) of
/// `cp` input channels (padded to 32), bf16.
#[derive(Debug, Clone)]
pub struct AmxConvWeights {
    m: usize,
    mp: usize,
    c: usize,
    cp: usize,
    taps: usize,
    data: Vec<u16>,
}

impl AmxConvWeights {
    /// Packs `m` filters of `c x kh x kw` bf16 bits (`src[((o * c + ch) * kh + y) * kw + x]`).
    ///
    /// # Panics
    /// When `src` is shorter than `m * c * kh * kw`.
    pub fn new(m: usize, c: usize, kh: usize, kw: usize, src: &[u16]) -> AmxConvWeights {
        let (mp, cp, taps) = (
            m.next_multiple_of(BLOCK),
            c.next_multiple_of(BLOCK),
            kh * kw,
        );
        assert!(
            src.len() >= m * c * taps,
            "filters shorter than {m}x{c}x{kh}x{kw}"
        );
        let mut data = vec![0u16; taps * mp * cp];
        for o in 0..m {
            for ch in 0..c {
                for t in 0..taps {
                    data[(t * mp + o) * cp + ch] = src[(o * c + ch) * taps + t];
                }
            }
        }
        AmxConvWeights {
            m,
            mp,
            c,
            cp,
            taps,
            data,
        }
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() * 2
    }
}

/// Whether [`amx_conv`] runs a geometry: stride 1, no dilation, more than one tap. (A 1x1
/// convolution reads its input in place as a product's B, whose panels pack cheaply:
/// ResNet-50's 1x1 layers took about twice as long here, their 3x3 ones 0.6-0.9x.)
pub fn applies(g: &Conv2d) -> bool {
    g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.kh * g.kw > 1
}

/// Bytes of the paired copy [`amx_conv`] makes of one image's input (saturating: sized
/// from the model before any limit check).
pub fn copy_bytes(g: &Conv2d) -> u128 {
    let (_, npix) = padded(g);
    (g.c as u128).next_multiple_of(BLOCK as u128) * npix as u128 * 2
}

/// The padded width, and the flat pixels the copy holds (the padded image, plus room for
/// the last block's overrun past it).
fn padded(g: &Conv2d) -> (usize, usize) {
    let wp = (g.ow.saturating_add(g.kw) - 1).max(g.w.saturating_add(g.pw));
    let rows = (g.oh.saturating_add(g.kh) - 1).max(g.h.saturating_add(g.ph));
    let npix = rows
        .saturating_add(1)
        .saturating_mul(wp)
        .saturating_add(2 * BLOCK);
    (wp, npix)
}

/// Channel pair `q` of one image as bf16 pairs into `out` (`npix` flat pixels of the
/// padded image, pads zero): rows read 16 floats at a time where the columns are unit
/// steps.
///
/// # Safety
/// The image's channels `2q` and `2q + 1` (those below `c`) are readable at
/// `x + ch * sc + y * sh + col * sw`; AVX-512 F/BW present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[allow(clippy::too_many_arguments)]
unsafe fn pair_plane(
    g: &Conv2d,
    x: *const f32,
    [sc, sh, sw]: [isize; 3],
    q: usize,
    wp: usize,
    out: &mut [u32],
) {
    use std::arch::x86_64::*;
    let bits = |v: f32| -> u32 { crate::amx::bf16_bits(v) as u32 };
    out.fill(0);
    let (c0, c1) = (2 * q, 2 * q + 1);
    for y in 0..g.h {
        let row = &mut out[(y + g.ph) * wp + g.pw..(y + g.ph) * wp + g.pw + g.w];
        let p0 = x.offset(c0 as isize * sc + y as isize * sh);
        let p1 = (c1 < g.c).then(|| x.offset(c1 as isize * sc + y as isize * sh));
        if sw == 1 {
            let round = |v: __m512i| crate::amx::round_high(v);
            let mut i = 0;
            while i < g.w {
                let left = g.w - i;
                let mask: u16 = if left >= 16 { !0 } else { (1u16 << left) - 1 };
                let lo = _mm512_srli_epi32(
                    round(_mm512_maskz_loadu_epi32(mask, p0.add(i) as *const i32)),
                    16,
                );
                let hi = match p1 {
                    Some(p1) => round(_mm512_maskz_loadu_epi32(mask, p1.add(i) as *const i32)),
                    None => _mm512_setzero_si512(),
                };
                _mm512_mask_storeu_epi32(
                    row.as_mut_ptr().add(i) as *mut i32,
                    mask,
                    _mm512_or_si512(hi, lo),
                );
                i += 16;
            }
        } else {
            for (i, o) in row.iter_mut().enumerate() {
                let lo = bits(*p0.offset(i as isize * sw));
                let hi = p1.map_or(0, |p1| bits(*p1.offset(i as isize * sw)));
                *o = (hi << 16) | lo;
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
unsafe fn pair_plane(
    _g: &Conv2d,
    _x: *const f32,
    _s: [isize; 3],
    _q: usize,
    _wp: usize,
    _out: &mut [u32],
) {
    unreachable!("AMX is x86-64 only")
}

/// One 32 x 32 block: output channels `m0 ..` by flat pixels `f0 ..`, into `c` (ld 32).
///
/// # Safety
/// Tiles configured; `xp` holds the paired copy (`npix` pixels a pair plane).
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn conv_block(
    w: &AmxConvWeights,
    g: &Conv2d,
    m0: usize,
    xp: *const u32,
    npix: usize,
    wp: usize,
    f0: usize,
    c: *mut f32,
) {
    use crate::amx::{step_block, store_block, zero_block};
    zero_block();
    let sa = (w.cp * 2) as isize;
    let sb = (npix * 4) as isize;
    for t in 0..w.taps {
        let off = f0 + (t / g.kw) * wp + t % g.kw;
        let arow = w.data.as_ptr().add((t * w.mp + m0) * w.cp);
        for cb in (0..w.cp).step_by(BLOCK) {
            let a0 = arow.add(cb);
            let b0 = xp.add((cb / 2) * npix + off);
            step_block((a0, a0.add(16 * w.cp), sa), (b0, b0.add(16), sb));
        }
    }
    store_block(c);
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
unsafe fn conv_block(
    _w: &AmxConvWeights,
    _g: &Conv2d,
    _m0: usize,
    _xp: *const u32,
    _npix: usize,
    _wp: usize,
    _f0: usize,
    _c: *mut f32,
) {
    unreachable!("AMX is x86-64 only")
}

/// The convolution of `images` images (image `b`'s channels at `x + batch[b]`, steps
/// `strides` between channels, rows and columns) by `w` (stride 1, see [`applies`]), its
/// activations rounded to bf16, every output tile handed to `sink` as (image, output
/// channel, pixel `y * ow + x`).
///
/// # Safety
/// [`crate::amx::available`] is true; every input element is readable; `w` was packed for
/// `g`'s channels and kernel.
#[allow(clippy::too_many_arguments)]
pub unsafe fn amx_conv(
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    images: usize,
    x: *const f32,
    batch: &[isize],
    strides: [isize; 3],
    w: &AmxConvWeights,
    sink: &dyn TileSink,
) {
    debug_assert!(applies(g) && w.c == g.c && w.taps == g.kh * g.kw);
    let (wp, npix) = padded(g);
    let pairs = w.cp / 2;
    let flat = g.oh * wp;
    let chunks = flat.div_ceil(BLOCK);
    let blocks = w.m.div_ceil(BLOCK);
    // The paired copy: every plane is written whole (pads zeroed) before it is read.
    crate::buf::with_scratch(pairs * npix, |scratch| {
        let xp = scratch.as_mut_ptr() as *mut u32;
        for (b, &offset) in batch.iter().enumerate().take(images) {
            let xb = In(x.offset(offset));
            let xs = Ptr(xp);
            let real = g.c.div_ceil(2);
            pool.run(threads, pairs, &|q| {
                let _ = (&xs, &xb);
                let plane = std::slice::from_raw_parts_mut(xs.0.add(q * npix), npix);
                if q < real {
                    pair_plane(g, xb.0, strides, q, wp, plane);
                } else {
                    plane.fill(0);
                }
            });
            let xp = Ptr(xp);
            pool.run(threads, chunks, &|ch| {
                let _ = &xp;
                let f0 = ch * BLOCK;
                let mut tile = [0f32; BLOCK * BLOCK];
                std::arch::asm!("ldtilecfg [{}]", in(reg) &CONFIG as *const TileConfig, options(nostack));
                for ib in 0..blocks {
                    let m0 = ib * BLOCK;
                    let rows = BLOCK.min(w.m - m0);
                    conv_block(w, g, m0, xp.0, npix, wp, f0, tile.as_mut_ptr());
                    // The block's valid pixels, a run per output row.
                    let mut f = f0;
                    while f < (f0 + BLOCK).min(flat) {
                        let (y, col) = (f / wp, f % wp);
                        if col >= g.ow {
                            f = (y + 1) * wp;
                            continue;
                        }
                        let run = (g.ow - col).min(f0 + BLOCK - f);
                        let at = f - f0;
                        let len = (rows - 1) * BLOCK + run;
                        sink.tile(b, m0, y * g.ow + col, rows, run, &mut tile[at..at + len], BLOCK);
                        f += run;
                    }
                }
                std::arch::asm!("tilerelease", options(nostack));
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::StoreC;
    use crate::testing::rand_vec;

    fn check(c: usize, m: usize, h: usize, w: usize, k: usize, pad: usize, threads: usize) {
        let g = Conv2d {
            c,
            h,
            w,
            kh: k,
            kw: k,
            sh: 1,
            sw: 1,
            dh: 1,
            dw: 1,
            ph: pad,
            pw: pad,
            oh: h + 2 * pad - k + 1,
            ow: w + 2 * pad - k + 1,
        };
        let images = 2;
        let x = rand_vec(images * c * h * w, 11 + c as u64);
        let wf = rand_vec(m * c * k * k, 12 + m as u64);
        let wb: Vec<u16> = wf.iter().map(|&v| crate::amx::bf16_bits(v)).collect();
        let pw = AmxConvWeights::new(m, c, k, k, &wb);
        let (oh, ow) = (g.oh, g.ow);
        let mut out = vec![f32::NAN; images * m * oh * ow];
        let sink = StoreC {
            c: out.as_mut_ptr(),
            ldc: oh * ow,
            batch_stride: m * oh * ow,
        };
        let batch: Vec<isize> = (0..images).map(|b| (b * c * h * w) as isize).collect();
        unsafe {
            amx_conv(
                crate::pool::global(),
                threads,
                &g,
                images,
                x.as_ptr(),
                &batch,
                [(h * w) as isize, w as isize, 1],
                &pw,
                &sink,
            )
        };
        let wide = |v: u16| f32::from_bits((v as u32) << 16) as f64;
        let r = |v: f32| wide(crate::amx::bf16_bits(v));
        for b in 0..images {
            for o in 0..m {
                for y in 0..oh {
                    for xo in 0..ow {
                        let (mut s, mut mag) = (0f64, 0f64);
                        for ch in 0..c {
                            for ky in 0..k {
                                for kx in 0..k {
                                    let (iy, ix) = (
                                        (y + ky) as isize - pad as isize,
                                        (xo + kx) as isize - pad as isize,
                                    );
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                        continue;
                                    }
                                    let xv =
                                        r(x[((b * c + ch) * h + iy as usize) * w + ix as usize]);
                                    let t = xv * wide(wb[((o * c + ch) * k + ky) * k + kx]);
                                    s += t;
                                    mag += t.abs();
                                }
                            }
                        }
                        let got = out[((b * m + o) * oh + y) * ow + xo] as f64;
                        assert!(
                            (got - s).abs() <= 1e-5 * (1.0 + mag),
                            "c{c} m{m} {h}x{w} k{k} p{pad} t{threads}: [{b}][{o}][{y}][{xo}] = {got}, want {s}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn convolutions_match_the_rounded_operands() {
        if !crate::amx::available() {
            return;
        }
        check(32, 32, 6, 6, 3, 1, 1);
        check(19, 40, 9, 13, 3, 1, 2);
        check(64, 70, 7, 7, 2, 0, 2);
        check(5, 33, 20, 37, 3, 0, 1);
        check(48, 64, 5, 50, 5, 2, 2);
    }
}
