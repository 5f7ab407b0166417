//! Winograd F(4x4, 3x3) and F(2x2, 3x3) convolution in the blocked channel layout
//! (NCHW16c, see [`crate::blocked`]), so a chain of blocked convolutions keeps its layout
//! through its 3x3 stride-1 layers instead of converting at each.
//!
//! The layout turns the transforms around: a tile's 16 channels of one block sit side by
//! side at every pixel, so each transform works on one tile and one block at a time with
//! the channels in the vector lanes, loading and storing whole vectors (the plain layout
//! gathers tiles into lanes). The products take the tiles as rows and the channels as
//! depth and columns (`M[k] = V[k] U[k]^T` per transform point `k`), both contiguous, and
//! the output transform writes whole pixels of 16 output channels, which the sink gets as
//! runs of output rows per block.

use crate::blocked::{BlockedInput, BLOCK};
use crate::buf::with_scratch;
use crate::conv::Conv2d;
use crate::gemm::{gemm, Batches, Gemm, Lhs, MatRef, Rhs, StoreC, TileSink};
use crate::pool::ThreadPool;
use crate::simd::Vf;
use crate::winograd::{output_rows, points, transform_input, Shared, WinogradWeights};
use crate::Kernels;

/// The input transform of one tile of one block: point `(i, j)` of the tile's input at
/// `patch + i * row + j * px` (16 floats), read only where bit `6 i + j` of `valid` is set
/// (zero elsewhere); transformed point `k` to `dst + k * pstride` (16 floats).
pub type InputFn = unsafe fn(*const f32, isize, isize, u64, *mut f32, usize);

/// The output transform of one tile of one block: point `k` of the tile's products at
/// `src + k * pstride` (16 floats); output `(r, c)` to `dst + r * row + c * px` (16 floats)
/// for `r < rows`, `c < cols`.
pub type OutputFn = unsafe fn(*const f32, usize, *mut f32, usize, usize, usize, usize);

/// One Winograd variant's blocked transforms on one ISA.
#[derive(Clone, Copy)]
pub struct Transforms {
    /// The input transform.
    pub input: InputFn,
    /// The output transform.
    pub output: OutputFn,
}

/// See [`InputFn`]: the block's 16 lanes in `16 / V::LANES` vectors.
#[inline(always)]
unsafe fn input_block<V: Vf, const M: usize>(
    patch: *const f32,
    row: isize,
    px: isize,
    valid: u64,
    dst: *mut f32,
    pstride: usize,
) {
    let a = M + 2;
    for h in (0..BLOCK).step_by(V::LANES) {
        let mut d = [[V::splat(0.0); 6]; 6];
        for (i, drow) in d.iter_mut().take(a).enumerate() {
            for (j, v) in drow.iter_mut().take(a).enumerate() {
                if valid >> (6 * i + j) & 1 != 0 {
                    let at = i as isize * row + j as isize * px;
                    *v = V::load(patch.wrapping_offset(at).add(h));
                }
            }
        }
        transform_input::<V, M>(d, dst.add(h), pstride, V::LANES);
    }
}

/// See [`OutputFn`].
#[inline(always)]
unsafe fn output_block<V: Vf, const M: usize>(
    src: *const f32,
    pstride: usize,
    dst: *mut f32,
    row: usize,
    px: usize,
    rows: usize,
    cols: usize,
) {
    for h in (0..BLOCK).step_by(V::LANES) {
        output_rows::<V, M>(src.add(h), pstride, 1, |r, o| {
            if r < rows {
                for (c, v) in o.iter().take(cols.min(M)).enumerate() {
                    v.store(dst.add(r * row + c * px + h));
                }
            }
        });
    }
}

/// The blocked transforms at tile size `$m` over lanes `$v`, as one ISA's [`Transforms`].
macro_rules! transforms {
    ($(#[$doc:meta])* $name:ident, $v:ty, $m:literal $(, $features:literal)?) => {
        $(#[$doc])*
        pub fn $name() -> super::Transforms {
            $(#[target_feature(enable = $features)])?
            unsafe fn input(p: *const f32, row: isize, px: isize, valid: u64, d: *mut f32, ps: usize) {
                super::input_block::<$v, $m>(p, row, px, valid, d, ps)
            }
            $(#[target_feature(enable = $features)])?
            #[allow(clippy::too_many_arguments)]
            unsafe fn output(
                s: *const f32,
                ps: usize,
                d: *mut f32,
                row: usize,
                px: usize,
                rows: usize,
                cols: usize,
            ) {
                super::output_block::<$v, $m>(s, ps, d, row, px, rows, cols)
            }
            super::Transforms { input, output }
        }
    };
}

/// The portable transforms (one lane at a time).
pub mod portable {
    transforms!(
        /// F(4x4)'s blocked transforms.
        f4, f32, 4
    );
    transforms!(
        /// F(2x2)'s blocked transforms.
        f2, f32, 2
    );
}

/// The AVX2 (two vectors a block) and AVX-512 (one) transforms.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use crate::simd::{Y8, Z16};
    transforms!(
        /// F(4x4)'s blocked transforms (AVX2+FMA CPUs only).
        f4_avx2, Y8, 4, "avx2,fma"
    );
    transforms!(
        /// F(2x2)'s blocked transforms (AVX2+FMA CPUs only).
        f2_avx2, Y8, 2, "avx2,fma"
    );
    transforms!(
        /// F(4x4)'s blocked transforms (AVX-512 CPUs only).
        f4_avx512, Z16, 4, "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma"
    );
    transforms!(
        /// F(2x2)'s blocked transforms (AVX-512 CPUs only).
        f2_avx512, Z16, 2, "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma"
    );
}

/// Whether [`winograd_blocked_conv`] serves `g` read through `input`'s strides: a 3x3
/// stride-1 undilated convolution whose lanes are contiguous.
pub fn applies(g: &Conv2d, lane_step: isize) -> bool {
    crate::winograd::applies(g) && lane_step == 1
}

/// The most transformed input and products (bytes) one band of an image holds when its
/// weights do not fit in L2 (see `winograd_blocked_conv`).
const WHOLE_IMAGE_BYTES: usize = 8 << 20;

/// Floats of scratch one band of [`winograd_blocked_conv`] takes at most (a band is at
/// most the whole image), and of its transformed weights, counted without overflow: a plan
/// checks both against the memory limits before packing or running.
pub fn scratch_floats(g: &Conv2d, m: usize, ci: usize, co: usize) -> (u128, u128) {
    let pts = points(m) as u128;
    let tiles = crate::winograd::tiles(g, m) as u128;
    let (ci, co) = (ci as u128, co as u128);
    let band = pts * (ci + co) * tiles + co * g.pixels() as u128;
    (band, pts * ci * co)
}

/// Convolves `images` blocked images with `w` (packed by
/// [`WinogradWeights::tiles_as_rows`]), handing the output to `sink` as
/// [`crate::blocked::blocked_conv`] does: product `image * blocks(co) + block`, rows the
/// output pixels `y * ow + x`, columns the block's 16 lanes; on up to `threads` threads.
///
/// # Safety
/// Every input element the geometry reads must be readable and not written during the
/// call; `g` must satisfy [`applies`] with the input's lane step, `g.c` must be `w`'s input
/// channels, a multiple of 16, and `w`'s output channels a multiple of 16.
#[allow(clippy::too_many_arguments)]
pub unsafe fn winograd_blocked_conv(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    images: usize,
    input: &BlockedInput,
    w: &WinogradWeights,
    sink: &dyn TileSink,
) {
    debug_assert!(
        w.tiles_as_rows && w.ci == g.c && w.ci.is_multiple_of(BLOCK) && w.co.is_multiple_of(BLOCK)
    );
    let (m, pts, ci, co) = (w.m, points(w.m), w.ci, w.co);
    let (ty, tx) = (g.oh.div_ceil(m), g.ow.div_ceil(m));
    if images == 0 || ty == 0 || tx == 0 {
        return;
    }
    // Bands of tile rows whose transformed input and products stay within half of L2,
    // while the transformed weights, which every band's products read whole, fit there
    // too; larger weights would stream from memory once per band, so the image is then
    // one band (ResNet-50's 256-channel 14x14 layers, 4.2 MB of F(2x2) weights: 0.07 ms
    // a layer slower in two bands), unless that band is past `WHOLE_IMAGE_BYTES`.
    let l2 = crate::isa::l2_bytes();
    let per_row = pts * (ci + co) * tx * 4;
    let weights_in_l2 = pts * ci * co * 4 <= l2 / 2;
    let band = if !weights_in_l2 && per_row.saturating_mul(ty) <= WHOLE_IMAGE_BYTES {
        ty
    } else {
        (l2 / 2 / per_row.max(1)).clamp(1, ty)
    };
    // Each thread runs whole bands on its own (no barriers between the phases) while the
    // weights fit in half of L2 and there are bands for every thread; otherwise the bands
    // run in turn, each phase split among the threads (the products by their columns).
    let own = threads > 1 && weights_in_l2 && images * ty >= threads;
    let per_image = if own {
        ty.div_ceil(band).max(threads.div_ceil(images)).min(ty)
    } else {
        ty.div_ceil(band)
    };
    let even = |n: usize, parts: usize, q: usize| q * (n / parts) + q.min(n % parts);
    let unit = |u: usize| {
        let (img, q) = (u / per_image, u % per_image);
        (img, even(ty, per_image, q), even(ty, per_image, q + 1))
    };
    let units = images * per_image;
    if own {
        pool.run(threads, units, &|u| {
            let (img, ty0, ty1) = unit(u);
            band_conv(kern, pool, 1, g, input, w, sink, img, ty0, ty1);
        });
    } else {
        for u in 0..units {
            let (img, ty0, ty1) = unit(u);
            band_conv(kern, pool, threads, g, input, w, sink, img, ty0, ty1);
        }
    }
}

/// Tile rows `ty0 .. ty1` of image `img` (see [`winograd_blocked_conv`]): input
/// transforms, products and output transforms, each phase on up to `threads` threads.
#[allow(clippy::too_many_arguments)]
unsafe fn band_conv(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    input: &BlockedInput,
    w: &WinogradWeights,
    sink: &dyn TileSink,
    img: usize,
    ty0: usize,
    ty1: usize,
) {
    if ty0 >= ty1 {
        return;
    }
    let tr = if w.m == 2 {
        kern.winograd_blocked[0]
    } else {
        kern.winograd_blocked[1]
    };
    let (m, pts, ci, co) = (w.m, points(w.m), w.ci, w.co);
    let tx = g.ow.div_ceil(m);
    let bt = (ty1 - ty0) * tx;
    let (cb, ob) = (ci / BLOCK, co / BLOCK);
    let (oy0, oy1) = (m * ty0, (m * ty1).min(g.oh));
    let band_px = (oy1 - oy0) * g.ow;
    let [s_block, s_row, s_px, _] = input.strides;
    let base = Shared(input.x.offset(input.batch[img]) as *mut f32);
    let (v_len, m_len) = (pts * bt * ci, pts * bt * co);
    with_scratch(v_len + m_len + co * band_px, |buf| {
        let (v, rest) = buf.split_at_mut(v_len);
        let (prod, out) = rest.split_at_mut(m_len);
        let (vp, mp, op) = (
            Shared(v.as_mut_ptr()),
            Shared(prod.as_mut_ptr()),
            Shared(out.as_mut_ptr()),
        );
        // 1. Input transforms, a tile (all its blocks) per task: V[k][tile][channel].
        pool.run(threads, bt, &|t| {
            let _ = (&vp, &base);
            let (yt, xt) = (ty0 + t / tx, t % tx);
            let iy0 = (m * yt) as isize - g.ph as isize;
            let ix0 = (m * xt) as isize - g.pw as isize;
            let a = m + 2;
            let mut valid = 0u64;
            for i in 0..a {
                let iy = iy0 + i as isize;
                if iy < 0 || iy >= g.h as isize {
                    continue;
                }
                for j in 0..a {
                    let ix = ix0 + j as isize;
                    if ix >= 0 && ix < g.w as isize {
                        valid |= 1 << (6 * i + j);
                    }
                }
            }
            let patch = base.0.wrapping_offset(iy0 * s_row + ix0 * s_px) as *const f32;
            for c in 0..cb {
                (tr.input)(
                    patch.wrapping_offset(c as isize * s_block),
                    s_row,
                    s_px,
                    valid,
                    vp.0.add(t * ci + c * BLOCK),
                    bt * ci,
                );
            }
        });
        // 2. The products, tiles as rows: M[k] (tiles x co) = V[k] (tiles x ci) U[k]^T.
        let gm = Gemm {
            batch: pts,
            m: bt,
            n: co,
            k: ci,
            a: Lhs::Strided(
                MatRef {
                    ptr: vp.0,
                    rs: ci as isize,
                    cs: 1,
                },
                Batches::Stride((bt * ci) as isize),
            ),
            b: Rhs::PackedEach(&w.ut),
        };
        let store = StoreC {
            c: mp.0,
            ldc: co,
            batch_stride: bt * co,
        };
        gemm(kern, pool, threads, &gm, &store);
        // 3. Output transforms, a block of output channels per task, into its run of the
        // band's output pixels, then to the sink.
        pool.run(threads, ob, &|o| {
            let _ = (&mp, &op);
            let dst = op.0.add(o * band_px * BLOCK);
            for t in 0..bt {
                let (yt, xt) = (ty0 + t / tx, t % tx);
                let (oy, ox) = (m * yt, m * xt);
                let at = ((oy - oy0) * g.ow + ox) * BLOCK;
                (tr.output)(
                    mp.0.add(t * co + o * BLOCK),
                    bt * co,
                    dst.add(at),
                    g.ow * BLOCK,
                    BLOCK,
                    (g.oh - oy).min(m),
                    (g.ow - ox).min(m),
                );
            }
            let run = std::slice::from_raw_parts_mut(dst, band_px * BLOCK);
            sink.tile(img * ob + o, oy0 * g.ow, 0, band_px, BLOCK, run, BLOCK);
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocked::{blocks, to_blocked};
    use crate::isa_tests;
    use crate::testing::{conv_plain, median_ms, rand_vec, square_conv};

    fn check(kern: &Kernels) {
        for m in [2, 4] {
            for threads in [1, 2, 3] {
                check_on(kern, m, threads);
            }
        }
    }

    fn check_on(kern: &Kernels, m: usize, threads: usize) {
        for &(c, co, hw, p) in &[
            (16, 16, (1, 1), 1),
            (16, 32, (7, 9), 1),
            (32, 16, (16, 16), 1),
            (16, 16, (13, 37), 0),
            (48, 32, (40, 6), 1),
            // Many channels on a tall image: several bands, the last short.
            (64, 16, (83, 42), 0),
        ] {
            let g = square_conv(c, hw.0, hw.1, 3, 1, 1, p);
            if g.oh == 0 || g.ow == 0 {
                continue;
            }
            let images = 2;
            let x = rand_vec(images * c * hw.0 * hw.1, 3);
            let wt = rand_vec(co * c * 9, 4);
            let px = hw.0 * hw.1;
            let mut xb = vec![0f32; images * c * px];
            for i in 0..images {
                to_blocked(c, hw.0, hw.1, &x[i * c * px..], &mut xb[i * c * px..]);
            }
            let ww = WinogradWeights::tiles_as_rows(kern, m, co, c, &wt);
            let opx = g.oh * g.ow;
            let mut out = vec![f32::NAN; images * blocks(co) * opx * BLOCK];
            let sink = StoreC {
                c: out.as_mut_ptr(),
                ldc: BLOCK,
                batch_stride: opx * BLOCK,
            };
            let batch = [0isize, (c * px) as isize];
            let input = BlockedInput {
                x: xb.as_ptr(),
                batch: &batch,
                strides: [
                    (px * BLOCK) as isize,
                    (hw.1 * BLOCK) as isize,
                    BLOCK as isize,
                    1,
                ],
            };
            let pool = crate::pool::global();
            unsafe { winograd_blocked_conv(kern, pool, threads, &g, images, &input, &ww, &sink) };
            let want = conv_plain(&g, images, co, &x, &wt);
            // The terms' magnitudes: Winograd's rounding grows with them, not with their
            // sum (F(4x4)'s transforms scale them by up to ~30).
            let abs = |v: &[f32]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
            let mag = conv_plain(&g, images, co, &abs(&x), &abs(&wt));
            for (i, (&w, &mg)) in want.iter().zip(&mag).enumerate() {
                let (b, o, q) = (i / (co * opx), (i / opx) % co, i % opx);
                let got = out[((b * blocks(co) + o / BLOCK) * opx + q) * BLOCK + o % BLOCK] as f64;
                assert!(
                    (got - w).abs() < 4e-6 * mg + 1e-5,
                    "{} F({m}x{m}) t{threads} c{c} co{co} {hw:?} p{p} ({b},{o},{q}): {got} vs {w}",
                    kern.isa
                );
            }
        }
    }

    isa_tests!(winograd_blocked, check);

    /// ResNet-50's 3x3 stride-1 layers, one thread, warm caches: blocked against plain
    /// Winograd (`cargo test --release -p smelt-kernels winograd_blocked_layer_time --
    /// --ignored --nocapture`).
    #[test]
    #[ignore]
    fn winograd_blocked_layer_time() {
        use crate::direct::DirectInput;
        let kern = crate::kernels();
        let pool = crate::pool::global();
        for &(c, hw, m) in &[(64, 56, 4), (128, 28, 4), (256, 14, 2), (256, 14, 4)] {
            let g = square_conv(c, hw, hw, 3, 1, 1, 1);
            let px = hw * hw;
            let (x, wt) = (rand_vec(c * px, 1), rand_vec(c * c * 9, 2));
            let mut xb = vec![0f32; c * px];
            to_blocked(c, hw, hw, &x, &mut xb);
            let mut y = vec![0f32; c * px];
            let wb = WinogradWeights::tiles_as_rows(kern, m, c, c, &wt);
            let blocked = median_ms(&mut || {
                let sink = StoreC {
                    c: y.as_mut_ptr(),
                    ldc: BLOCK,
                    batch_stride: px * BLOCK,
                };
                let input = BlockedInput {
                    x: xb.as_ptr(),
                    batch: &[0],
                    strides: [
                        (px * BLOCK) as isize,
                        (hw * BLOCK) as isize,
                        BLOCK as isize,
                        1,
                    ],
                };
                unsafe { winograd_blocked_conv(kern, pool, 1, &g, 1, &input, &wb, &sink) };
            });
            let wp = WinogradWeights::new(kern, m, c, c, &wt, crate::winograd::tiles(&g, m));
            let plain = median_ms(&mut || {
                let sink = StoreC {
                    c: y.as_mut_ptr(),
                    ldc: px,
                    batch_stride: c * px,
                };
                let input = DirectInput {
                    x: x.as_ptr(),
                    batch: &[0],
                    strides: [px as isize, hw as isize, 1],
                };
                unsafe { crate::winograd::winograd_conv(kern, pool, 1, &g, 1, &input, &wp, &sink) };
            });
            println!("{c} ch {hw}x{hw} F({m}x{m}): blocked {blocked:.3} ms, plain {plain:.3} ms");
        }
    }
}
