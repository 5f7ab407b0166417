//! Convolution in the blocked channel layout (NCHW16c): an image's channels in blocks of
//! [`BLOCK`], each block stored pixel by pixel with its 16 channels together
//! (`[block][y][x][lane]`), channels past the last real one zero.
//!
//! One kernel serves every 2-D convolution of stride 1 or 2 along the width: output pixels
//! are the product's rows (runs of up to `mr` pixels of one output row, or at stride 1 of
//! the whole image read as one line), output channels its columns, and the depth runs
//! over (input block, tap, lane). Each step broadcasts one
//! input channel of `mr` consecutive output pixels, found in place at a fixed offset per
//! step and `16 * stride` floats apart ([`crate::gemm::gathered`]), while the weights,
//! packed once, stream past in order; each finished tile is one or two blocks' runs of
//! contiguous pixels, finished from registers where the sink can.
//!
//! Measured alone (`blocked_layer_time`, a 2-vCPU Xeon of family 6 model 167, AVX-512,
//! one thread, warm caches): ResNet-50's pointwise layers 0.66-0.79 ms at 56x56 against
//! 0.85-0.94 by the plain GEMM, equal at 28x28, 0.60 against 0.70 at 14x14; its stride-2
//! 3x3 layers 1.6-1.7 ms (2.0-2.8 by the implicit and im2col GEMMs in the model); its
//! stride-1 3x3 layers 1.37-1.56 ms at 56x56 to 14x14, slower than Winograd (1.0-1.4),
//! which is why those run on the blocked Winograd kernels ([`crate::winograd_blocked`]).

use crate::buf::with_scratch;
use crate::conv::Conv2d;
use crate::gemm::gathered::Ahead;
use crate::gemm::micro::MAX_MR;
use crate::gemm::{Micro, PackedB, TileSink};
use crate::pool::ThreadPool;
use crate::Kernels;

/// Channels per block.
pub const BLOCK: usize = 16;

/// Blocks holding `c` channels.
pub fn blocks(c: usize) -> usize {
    c.div_ceil(BLOCK)
}

/// Whether [`blocked_conv`] serves `g`: stride 1 or 2 along the width (the row strides
/// its micro-kernels have).
pub fn applies(g: &Conv2d) -> bool {
    matches!(g.sw, 1 | 2) && g.sh > 0 && g.dh > 0 && g.dw > 0 && g.kh > 0 && g.kw > 0
}

/// A convolution's weights packed for [`blocked_conv`]: the `k x n` product operand whose
/// rows run over (input block, tap row, tap column, lane) and whose columns are the output
/// channels, both padded with zeros to whole blocks.
pub struct BlockedWeights {
    b: PackedB,
}

impl BlockedWeights {
    /// Packs `oc` filters of `g` (`w`: `oc x c x kh x kw`, row-major) for `micro`'s tiles.
    ///
    /// # Panics
    /// When `w` holds fewer than `oc * g.k()` floats.
    pub fn new(micro: &Micro, g: &Conv2d, oc: usize, w: &[f32]) -> BlockedWeights {
        assert!(w.len() >= oc * g.k(), "blocked weights: {} floats", w.len());
        let taps = g.kh * g.kw;
        let k = blocks(g.c) * taps * BLOCK;
        let n = blocks(oc) * BLOCK;
        // The reordered matrix is built only when the pack is made here (not replayed).
        let matrix = std::cell::OnceCell::new();
        let b = PackedB::from_source(micro, k, n, || {
            let m = matrix.get_or_init(|| {
                let mut m = vec![0f32; k * n];
                for o in 0..oc {
                    for ci in 0..g.c {
                        for t in 0..taps {
                            let row = ((ci / BLOCK) * taps + t) * BLOCK + ci % BLOCK;
                            m[row * n + o] = w[(o * g.c + ci) * taps + t];
                        }
                    }
                }
                m
            });
            (m.as_slice(), n, 1)
        });
        BlockedWeights { b }
    }

    /// Output channels, padded to whole blocks.
    pub fn n(&self) -> usize {
        self.b.n()
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        self.b.bytes()
    }
}

/// Copies image `src` (`c x h x w`, row-major) into the blocked layout at `dst`
/// (`blocks(c) x h x w x 16`), lanes past `c` zero.
///
/// # Panics
/// When either slice is too short.
pub fn to_blocked(c: usize, h: usize, w: usize, src: &[f32], dst: &mut [f32]) {
    let px = h * w;
    assert!(src.len() >= c * px && dst.len() >= blocks(c) * px * BLOCK);
    for cb in 0..blocks(c) {
        let out = &mut dst[cb * px * BLOCK..(cb + 1) * px * BLOCK];
        for l in 0..BLOCK {
            let ci = cb * BLOCK + l;
            if ci < c {
                let plane = &src[ci * px..(ci + 1) * px];
                for (p, &v) in plane.iter().enumerate() {
                    out[p * BLOCK + l] = v;
                }
            } else {
                (0..px).for_each(|p| out[p * BLOCK + l] = 0.0);
            }
        }
    }
}

/// Copies the first `c` channels of blocked image `src` (`blocks(c) x h x w x 16`) to
/// `dst` (`c x h x w`, row-major).
///
/// # Panics
/// When either slice is too short.
pub fn from_blocked(c: usize, h: usize, w: usize, src: &[f32], dst: &mut [f32]) {
    let px = h * w;
    assert!(dst.len() >= c * px && src.len() >= blocks(c) * px * BLOCK);
    for ci in 0..c {
        let block = &src[(ci / BLOCK) * px * BLOCK..];
        let l = ci % BLOCK;
        for (p, v) in dst[ci * px..(ci + 1) * px].iter_mut().enumerate() {
            *v = block[p * BLOCK + l];
        }
    }
}

/// The images of one call: element (block, y, x, lane) of image `b` at
/// `x + batch[b] + block * strides[0] + y * strides[1] + x * strides[2] + lane * strides[3]`.
pub struct BlockedInput<'a> {
    /// The first image's base.
    pub x: *const f32,
    /// Each image's first element, in floats past `x`.
    pub batch: &'a [isize],
    /// Steps of a block, a row, a pixel and a lane.
    pub strides: [isize; 4],
}

impl BlockedInput<'_> {
    /// Whether each image is dense (`blocks x h x w x 16`, row-major) for `g`.
    fn dense(&self, g: &Conv2d) -> bool {
        let (w, px) = ((g.w * BLOCK) as isize, (g.h * g.w * BLOCK) as isize);
        self.strides == [px, w, BLOCK as isize, 1]
    }
}

// SAFETY: the images are only read, and the caller of `blocked_conv` keeps them readable
// for the whole call.
unsafe impl Sync for BlockedInput<'_> {}

/// The rows and row width a convolution reads of its (possibly padded) input, and whether
/// the input itself serves (dense, no padding, every tap inside the image).
fn extent(g: &Conv2d, dense: bool) -> (usize, usize, bool) {
    let reach = |o: usize, s: usize, k: usize, d: usize| {
        o.saturating_sub(1)
            .saturating_mul(s)
            .saturating_add(k.saturating_sub(1).saturating_mul(d))
            .saturating_add(1)
    };
    let (hp, wp) = (reach(g.oh, g.sh, g.kh, g.dh), reach(g.ow, g.sw, g.kw, g.dw));
    if dense && g.ph == 0 && g.pw == 0 && hp <= g.h && wp <= g.w {
        (g.h, g.w, true)
    } else {
        // A row's right padding is the next row's left padding: a tap past a row's end
        // reads that row's first, zero, columns (and past the last row, the copy's zero
        // tail, see `copy_tail`). At stride 1 each row then computes `pw` fewer dropped
        // pixels: ResNet-50's 7x7 layers run 55 pixels in 5 tiles, not 61 in 6.
        // At least `ow` wide: the flat line reads output rows `width` pixels apart (a 1x1
        // layer with padding reaches no further than its output row).
        let width = wp
            .saturating_sub(g.pw)
            .max(g.pw.saturating_add(g.w).min(wp))
            .max(g.ow);
        (hp, width, false)
    }
}

/// Zero floats after a padded copy's last row: what its taps past that row's end read.
fn copy_tail(g: &Conv2d) -> usize {
    g.pw.saturating_mul(BLOCK)
}

/// [`blocked_conv`] of a pointwise `g` of stride past 1: the pixels it reads copied to a
/// dense image, convolved at stride 1.
#[allow(clippy::too_many_arguments)]
unsafe fn subsampled(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    batches: usize,
    input: &BlockedInput,
    w: &BlockedWeights,
    sink: &dyn TileSink,
) {
    let cb = blocks(g.c);
    let plane = g.oh * g.ow * BLOCK;
    let dense = Conv2d {
        h: g.oh,
        w: g.ow,
        sh: 1,
        sw: 1,
        ..*g
    };
    let [s_block, s_row, s_px, s_lane] = input.strides;
    with_scratch(batches * cb * plane, |buf| {
        let out = Shared(buf.as_mut_ptr());
        // One output row of one block of one image per task.
        pool.run(threads, batches * cb * g.oh, &|t| {
            let _ = &out;
            let (b, c, y) = (t / (cb * g.oh), (t / g.oh) % cb, t % g.oh);
            let src = input
                .x
                .offset(input.batch[b] + c as isize * s_block + (y * g.sh) as isize * s_row);
            let dst = out.at(((b * cb + c) * g.oh + y) * g.ow * BLOCK);
            for x in 0..g.ow {
                let p = src.offset((x * g.sw) as isize * s_px);
                let d = dst.add(x * BLOCK);
                if s_lane == 1 {
                    std::ptr::copy_nonoverlapping(p, d, BLOCK);
                } else {
                    for l in 0..BLOCK {
                        *d.add(l) = *p.offset(l as isize * s_lane);
                    }
                }
            }
        });
        let batch: Vec<isize> = (0..batches).map(|b| (b * cb * plane) as isize).collect();
        let sub = BlockedInput {
            x: out.at(0),
            batch: &batch,
            strides: [plane as isize, (g.ow * BLOCK) as isize, BLOCK as isize, 1],
        };
        blocked_conv(kern, pool, threads, &dense, batches, &sub, w, sink);
    })
}

/// Floats of the padded copy [`blocked_conv`] makes of `batches` images, counted without
/// overflow (a plan checks it against the memory limits first): at most this many.
pub fn copy_floats(g: &Conv2d, batches: usize) -> u128 {
    if g.pixels() == 0 {
        return 0;
    }
    let (rows, width, _) = extent(g, false);
    batches as u128 * blocks(g.c) as u128 * rows as u128 * width as u128 * BLOCK as u128
        + copy_tail(g) as u128
}

/// A raw pointer shared by tasks that write disjoint parts (or only read).
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: see the uses: padding writes disjoint rows, the product only reads.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// The float `i` past the pointer.
    ///
    /// # Safety
    /// As for `pointer::add`.
    unsafe fn at(self, i: usize) -> *mut f32 {
        self.0.add(i)
    }
}

/// Convolves `batches` blocked images with `w`, handing each finished tile to `sink` as
/// product `b * blocks(oc) + block` (rows output pixels `y * ow + x`, columns the block's
/// lanes, from `j0`), on up to `threads` threads of `pool`.
///
/// # Safety
/// Every element of the blocked images `input` describes (`blocks(g.c) x g.h x g.w x 16`
/// each) is readable during the call; `w` was packed for `kern`'s micro-kernels and `g`;
/// [`applies`] holds for `g`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn blocked_conv(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    batches: usize,
    input: &BlockedInput,
    w: &BlockedWeights,
    sink: &dyn TileSink,
) {
    let micro = &kern.micro;
    let (mr, nr, k, n) = (micro.mr, micro.nr, w.b.k(), w.b.n());
    if batches == 0 || g.pixels() == 0 || n == 0 {
        return;
    }
    debug_assert!(applies(g) && k == blocks(g.c) * g.kh * g.kw * BLOCK);
    let cb = blocks(g.c);
    // (Only when every pixel it reads is inside the image: no padding before or after.)
    let inside = (g.oh - 1) * g.sh < g.h && (g.ow - 1) * g.sw < g.w;
    if g.kh == 1 && g.kw == 1 && g.ph == 0 && g.pw == 0 && inside && (g.sh > 1 || g.sw > 1) {
        // A strided pointwise convolution runs at stride 1 on its input's pixels it reads,
        // gathered densely first: ResNet-50's 1x1 stride-2 layers read in place took
        // 1.65 ms against 1.35 by the plain layout's im2col GEMM.
        return subsampled(kern, pool, threads, g, batches, input, w, sink);
    }
    let (rows, width, in_place) = extent(g, input.dense(g));
    let plane = rows * width * BLOCK;
    // Step (block, ky, kx, lane)'s offset from its pixel, in the weights' row order.
    let mut offs = Vec::with_capacity(k);
    for b in 0..cb {
        for ky in 0..g.kh {
            for kx in 0..g.kw {
                let at = b * plane + (ky * g.dh * width + kx * g.dw) * BLOCK;
                offs.extend((0..BLOCK).map(|l| (at + l) as isize));
            }
        }
    }
    let stride = if g.sw == 1 { 0 } else { 1 };
    let table = &micro.gathered[stride];
    let fused = micro.gathered_fused.as_ref().map(|t| &t[stride]);
    // Tiles run along lines of virtual pixels: each output row (a tile never crosses one),
    // or, at stride 1, the whole image as one line whose pixels include the `width - ow`
    // past each row's end (computed and dropped), when that takes fewer tiles (a 14x14
    // pointwise layer: 17 tiles of 12 against 28 of 12 and 2).
    let flat_len = (g.oh - 1) * width + g.ow;
    let flat = g.sw == 1 && g.sh == 1 && flat_len.div_ceil(mr) < g.oh * g.ow.div_ceil(mr);
    let (lines, line_len, vw) = if flat {
        (1, flat_len, width)
    } else {
        (g.oh, g.ow, g.ow)
    };
    let per_line = line_len.div_ceil(mr);
    let (np, nb) = (n.div_ceil(nr), n / BLOCK);
    // Column panels outer (each streams its weights once per image), the tiles split
    // further where threads need the tasks. On several threads with weights under twice
    // an image, spans of tiles outer instead: each thread then reads its own span of the
    // image and all the weights, not the whole image (which the last layer left split
    // between the cores) and its share of the weights: ResNet-50's 28x28 1x1 layers at
    // two threads took 0.43-0.45 ms panels outer, 0.32-0.35 plain; its 14x14 1024 -> 256
    // ones (1 MB of weights, a 0.8 MB image) 0.38-0.39 against 0.33-0.34.
    let want = if threads > 1 { 4 * threads } else { 1 };
    let tiles = lines * per_line;
    let spans_outer = threads > 1 && k * n < 2 * cb * plane;
    let spans = if spans_outer {
        threads.clamp(1, tiles)
    } else {
        want.div_ceil(batches * np).clamp(1, tiles)
    };
    let copy = if in_place {
        0
    } else {
        batches * cb * plane + copy_tail(g)
    };
    with_scratch(copy, |buf| {
        if !in_place {
            buf[batches * cb * plane..].fill(0.0);
        }
        let out = Shared(buf.as_mut_ptr());
        if !in_place {
            pad(pool, threads, g, batches, input, (rows, width), out);
        }
        let image = |b: usize| -> *const f32 {
            if in_place {
                input.x.offset(input.batch[b])
            } else {
                out.at(b * cb * plane)
            }
        };
        pool.run(threads, batches * np * spans, &|t| {
            let (b, j, sp) = if spans_outer {
                (t / (np * spans), t % np, (t / np) % spans)
            } else {
                (t / (np * spans), (t / spans) % np, t % spans)
            };
            let (x, panel) = (image(b), w.b.panel(j).as_ptr());
            let mut tile = [0f32; MAX_MR * 32];
            let (t_lo, t_hi) = (sp * tiles / spans, (sp + 1) * tiles / spans);
            // The next panel's share each tile asks for towards L2, so the weights of a
            // layer read once per image (from memory, in a model) arrive ahead of use.
            let next = (j + 1 < np).then(|| w.b.panel(j + 1));
            let spread = k * n * 4 > crate::isa::l2_bytes() / 4;
            let share = next.map_or(0, |p| p.len().div_ceil(t_hi - t_lo).next_multiple_of(16));
            for tau in t_lo..t_hi {
                // Each line's tiles share its pixels evenly (49 as 10, 10, 10, 10, 9, not
                // 12, 12, 12, 12, 1: a 1-pixel tile costs a whole read of its panel).
                let (l, q) = (tau / per_line, tau % per_line);
                let x0 = q * line_len / per_line;
                let r = (q + 1) * line_len / per_line - x0;
                // The tile's share of the next panel. Weights past a quarter of L2 come from
                // memory panel by panel: their share is spread over the tile's k loop, one
                // line every `1 << shift` steps (the lines past one a step asked for at
                // once), so few requests wait at a time (ResNet-50's last stage, 4-9.4 MB
                // a layer, one thread: 0.2-0.45 ms faster a layer than asked for all at
                // the tile's start). Smaller weights, often still in L2, take their share
                // at once: the loop's extra requests cost their layers 3-6%.
                let mut ahead = Ahead::NONE;
                if let Some(p) = next {
                    let lo = (tau - t_lo) * share;
                    let hi = (lo + share).min(p.len());
                    let lines = hi.saturating_sub(lo).div_ceil(16);
                    if !spread {
                        for o in (lo..hi).step_by(16) {
                            crate::simd::prefetch_l2(p.as_ptr().add(o));
                        }
                    } else if let Some(per_line) = k.checked_div(lines) {
                        let shift = per_line.max(1).ilog2();
                        ahead = Ahead {
                            next: p.as_ptr().wrapping_add(lo),
                            shift,
                        };
                        for o in (lo + (k >> shift) * 16..hi).step_by(16) {
                            crate::simd::prefetch_l2(p.as_ptr().add(o));
                        }
                    }
                }
                let at = x.add((l * g.sh * width + x0 * g.sw) * BLOCK);
                let (lo, hi) = (l * line_len + x0, l * line_len + x0 + r);
                // A tile of one run of real pixels is finished from registers where the
                // sink and the ISA can.
                if let (Some(fused), true) = (fused, vw == g.ow || lo % vw + r <= g.ow) {
                    let i0 = (lo / vw) * g.ow + lo % vw;
                    let half = |h: usize| {
                        let col = j * nr + h * (nr / 2);
                        (col < n)
                            .then(|| sink.fused(b * nb + col / BLOCK, i0, col % BLOCK))
                            .flatten()
                            .map(|e| (e, 0))
                    };
                    let halves = [half(0), half(1)];
                    let wanted = if j * nr + nr / 2 < n { 2 } else { 1 };
                    if halves.iter().flatten().count() == wanted {
                        for (e, _) in halves.iter().flatten() {
                            e.prefetch(r, nr / 2);
                        }
                        fused[r - 1](k, at, offs.as_ptr(), panel, ahead, &halves);
                        continue;
                    }
                }
                table[r - 1](k, at, offs.as_ptr(), panel, ahead, tile.as_mut_ptr(), nr);
                // The real pixels, one output row's run at a time.
                let mut v = lo;
                while v < hi {
                    let (y, xv) = (v / vw, v % vw);
                    let row_end = ((y + 1) * vw).min(hi);
                    if xv < g.ow {
                        let run = (y * vw + g.ow).min(row_end) - v;
                        // The run's columns, one block's lanes at a time.
                        let mut c = 0;
                        while c < nr && j * nr + c < n {
                            let col = j * nr + c;
                            let lanes = (nr - c).min(BLOCK - col % BLOCK);
                            let first = (v - lo) * nr + c;
                            let t = &mut tile[first..first + (run - 1) * nr + lanes];
                            let blk = b * nb + col / BLOCK;
                            sink.tile(blk, y * g.ow + xv, col % BLOCK, run, lanes, t, nr);
                            c += lanes;
                        }
                    }
                    v = row_end;
                }
            }
        });
    });
}

/// Writes the padded copy of every image: `rows x width` pixels a block, the input at
/// `(ph, pw)`, zero around it.
unsafe fn pad(
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    batches: usize,
    input: &BlockedInput,
    (rows, width): (usize, usize),
    out: Shared,
) {
    let cb = blocks(g.c);
    let plane = rows * width * BLOCK;
    let [bs, rs, ps, ls] = input.strides;
    // The input's columns that land inside a padded row.
    let cols = g.w.min(width.saturating_sub(g.pw));
    pool.run(threads, batches * cb, &|t| {
        let (b, blk) = (t / cb, t % cb);
        let src = input.x.offset(input.batch[b] + blk as isize * bs);
        let dst = std::slice::from_raw_parts_mut(out.at(t * plane), plane);
        for (ry, row) in dst.chunks_exact_mut(width * BLOCK).enumerate() {
            let iy = ry as isize - g.ph as isize;
            if iy < 0 || iy >= g.h as isize {
                row.fill(0.0);
                continue;
            }
            let (left, rest) = row.split_at_mut(g.pw.min(width) * BLOCK);
            left.fill(0.0);
            let (mid, right) = rest.split_at_mut(cols * BLOCK);
            let from = src.offset(iy * rs);
            if ps == BLOCK as isize && ls == 1 {
                mid.copy_from_slice(std::slice::from_raw_parts(from, cols * BLOCK));
            } else {
                // A strided view (a transposed plain image): gathered lane by lane.
                for (p, px) in mid.chunks_exact_mut(BLOCK).enumerate() {
                    for (l, v) in px.iter_mut().enumerate() {
                        *v = *from.offset(p as isize * ps + l as isize * ls);
                    }
                }
            }
            right.fill(0.0);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::direct::tests::ScratchOnly;
    use crate::gemm::StoreC;
    use crate::isa_tests;
    use crate::testing::{conv_plain, rand_vec, square_conv};

    /// Runs `g` on two random images through the blocked layout and back; `view` reads the
    /// plain images in place as a strided blocked view instead (`c` a multiple of 16).
    fn blocked_result(
        kern: &Kernels,
        g: &Conv2d,
        co: usize,
        x: &[f32],
        wt: &[f32],
        view: bool,
    ) -> Vec<f32> {
        let (cb, ob, px, opx) = (blocks(g.c), blocks(co), g.h * g.w, g.pixels());
        let mut xb = vec![f32::NAN; 2 * cb * px * BLOCK];
        for b in 0..2 {
            let one = &mut xb[b * cb * px * BLOCK..(b + 1) * cb * px * BLOCK];
            to_blocked(g.c, g.h, g.w, &x[b * g.c * px..(b + 1) * g.c * px], one);
        }
        let w = BlockedWeights::new(&kern.micro, g, co, wt);
        assert_eq!(w.n(), ob * BLOCK);
        let mut yb = vec![f32::NAN; 2 * ob * opx * BLOCK];
        let sink = StoreC {
            c: yb.as_mut_ptr(),
            ldc: BLOCK,
            batch_stride: opx * BLOCK,
        };
        let (dense, strided) = (
            [
                (px * BLOCK) as isize,
                (g.w * BLOCK) as isize,
                BLOCK as isize,
                1,
            ],
            [(px * BLOCK) as isize, g.w as isize, 1, px as isize],
        );
        let input = BlockedInput {
            x: if view { x.as_ptr() } else { xb.as_ptr() },
            batch: &[0, (cb * px * BLOCK) as isize],
            strides: if view { strided } else { dense },
        };
        let pool = crate::pool::global();
        unsafe { blocked_conv(kern, pool, 2, g, 2, &input, &w, &sink) };
        let mut y = vec![0f32; 2 * co * opx];
        for b in 0..2 {
            let one = &yb[b * ob * opx * BLOCK..(b + 1) * ob * opx * BLOCK];
            from_blocked(
                co,
                g.oh,
                g.ow,
                one,
                &mut y[b * co * opx..(b + 1) * co * opx],
            );
            // Padded output lanes hold zeros (no bias here).
            for blk in 0..ob {
                for p in 0..opx {
                    for l in (co - blk * BLOCK).min(BLOCK)..BLOCK {
                        let v = one[(blk * opx + p) * BLOCK + l];
                        assert_eq!(v, 0.0, "{} padded lane {l} of block {blk}", kern.isa);
                    }
                }
            }
        }
        y
    }

    /// Strides 1 and 2, paddings, dilations, 1x1 and 7x7 kernels, channel counts that
    /// leave blocks part-filled, rows longer and shorter than a tile.
    fn matches_plain(kern: &Kernels) {
        for &(c, co, h, w, k, s, d, p) in &[
            (16, 32, 6, 29, 1, 1, 1, 0),
            (5, 13, 9, 40, 3, 2, 1, 1),
            (16, 13, 28, 28, 3, 2, 1, 1),
            (20, 40, 7, 7, 3, 1, 1, 1),
            (3, 24, 23, 23, 7, 2, 1, 3),
            (4, 7, 12, 10, 3, 2, 2, 2),
            (33, 17, 10, 13, 1, 2, 1, 0),
            (8, 48, 5, 31, 3, 1, 1, 0),
            // 1x1 stride 2 on whole blocks (its pixels gathered, also from a view whose
            // lanes are apart), its weights smaller than the image (spans of pixels outer).
            (32, 24, 9, 14, 1, 2, 1, 0),
            // 1x1 with padding at stride 1 (output rows wider than the taps reach), and
            // 1x1 stride 2 with padding only after the image (made below).
            (16, 16, 6, 6, 1, 1, 1, 1),
            (32, 16, 4, 4, 1, 2, 1, 0),
        ] {
            let mut g = square_conv(c, h, w, k, s, d, p);
            if (c, co, h, k, s) == (32, 16, 4, 1, 2) {
                // Pads [0, 0, 1, 1]: the last output row and column read only padding.
                (g.oh, g.ow) = (3, 3);
            }
            // A taller stride along the height (the kernels only fix the width's).
            if (c, k) == (8, 3) {
                g.sh = 3;
                g.oh = (g.h - 3) / 3 + 1;
            }
            let x = rand_vec(2 * c * h * w, 1);
            let wt = rand_vec(co * g.k(), 2);
            let want = conv_plain(&g, 2, co, &x, &wt);
            for view in [false, true].into_iter().filter(|&v| !v || c % BLOCK == 0) {
                let got = blocked_result(kern, &g, co, &x, &wt, view);
                for (i, (&got, &want)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (got as f64 - want).abs() < 1e-4,
                        "{} {g:?} co {co} view {view} element {i}: {got} vs {want}",
                        kern.isa
                    );
                }
            }
        }
    }

    isa_tests!(blocked_convolution, matches_plain);

    /// Tiles finished in registers (bias per lane, an activation, a residual) give the
    /// bits of tiles finished from scratch, for row and whole-image tiles, strides 1 and 2,
    /// and a last panel half past the channels.
    fn fused_matches_scratch(kern: &Kernels) {
        use crate::epilogue::{Act, Fused, FusedSink, RowMajor, Vector};
        for &(c, co, h, w, k, s, p) in &[
            (16, 48, 9, 30, 3, 1, 1),
            (32, 48, 14, 14, 1, 1, 0),
            (16, 32, 11, 25, 3, 2, 1),
        ] {
            let g = square_conv(c, h, w, k, s, 1, p);
            let (ob, opx) = (blocks(co), g.pixels());
            let x = rand_vec(c * h * w, 3);
            let wt = rand_vec(co * g.k(), 4);
            let bias = rand_vec(co, 5);
            let res = rand_vec(co * opx, 6);
            let bw = BlockedWeights::new(&kern.micro, &g, co, &wt);
            let mut xb = vec![0f32; c * h * w];
            to_blocked(c, h, w, &x, &mut xb);
            let input = BlockedInput {
                x: xb.as_ptr(),
                batch: &[0],
                strides: [
                    (h * w * BLOCK) as isize,
                    (w * BLOCK) as isize,
                    BLOCK as isize,
                    1,
                ],
            };
            let per_block: Vec<isize> = (0..ob).map(|b| (b * opx * BLOCK) as isize).collect();
            let bias_at: Vec<isize> = (0..ob).map(|b| (b * BLOCK) as isize).collect();
            for (act1, with_res) in [(Act::Silu, false), (Act::Relu, true)] {
                let run = |fused: bool| {
                    let mut out = vec![f32::NAN; co * opx];
                    let sink = FusedSink {
                        epi: Fused {
                            alpha: 1.0,
                            row_bias: None,
                            col_bias: Some(Vector {
                                ptr: bias.as_ptr(),
                                batch: &bias_at,
                                step: 1,
                            }),
                            act1,
                            scale: None,
                            shift: None,
                            residual: with_res.then_some(RowMajor {
                                ptr: res.as_ptr() as *mut f32,
                                batch: &per_block,
                                rs: BLOCK as isize,
                                cs: 1,
                            }),
                            act2: Act::None,
                            out: RowMajor {
                                ptr: out.as_mut_ptr(),
                                batch: &per_block,
                                rs: BLOCK as isize,
                                cs: 1,
                            },
                        },
                        finish: kern.finish,
                    };
                    let pool = crate::pool::global();
                    unsafe {
                        if fused {
                            blocked_conv(kern, pool, 2, &g, 1, &input, &bw, &sink);
                        } else {
                            blocked_conv(kern, pool, 2, &g, 1, &input, &bw, &ScratchOnly(&sink));
                        }
                    }
                    out
                };
                let (got, want) = (run(true), run(false));
                assert!(want.iter().all(|v| v.is_finite()), "{} {g:?}", kern.isa);
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "{} {g:?} {act1:?} [{i}]: {a} vs {b}",
                        kern.isa
                    );
                }
            }
        }
    }

    isa_tests!(fused_blocked_same_bits, fused_matches_scratch);

    /// Plain -> blocked -> plain gives the image back, lanes past `c` zero.
    #[test]
    fn layout_round_trip() {
        let (c, h, w) = (21, 3, 5);
        let x = rand_vec(c * h * w, 3);
        let mut b = vec![f32::NAN; blocks(c) * h * w * BLOCK];
        to_blocked(c, h, w, &x, &mut b);
        assert!(b[h * w * BLOCK..]
            .chunks(BLOCK)
            .all(|l| l[5..].iter().all(|&v| v == 0.0)));
        let mut back = vec![0f32; c * h * w];
        from_blocked(c, h, w, &b, &mut back);
        assert_eq!(back, x);
    }

    /// Times ResNet-50's layer shapes blocked, the pointwise ones also by the plain GEMM on
    /// the same products (`cargo test --release -p smelt-kernels blocked_layer_time --
    /// --ignored --nocapture`).
    #[test]
    #[ignore]
    fn blocked_layer_time() {
        use crate::gemm::{gemm, Batches, Gemm, Lhs, MatRef, PackedA, Rhs};
        let kern = crate::kernels();
        let pool = crate::pool::global();
        for &(c, co, hw, k, st) in &[
            (64, 256, 56, 1, 1),
            (256, 64, 56, 1, 1),
            (128, 512, 28, 1, 1),
            (1024, 256, 14, 1, 1),
            (64, 64, 56, 3, 1),
            (128, 128, 28, 3, 1),
            (256, 256, 14, 3, 1),
            (512, 512, 7, 3, 1),
            (128, 128, 56, 3, 2),
            (256, 256, 28, 3, 2),
            (512, 512, 14, 3, 2),
        ] {
            let g = square_conv(c, hw, hw, k, st, 1, k / 2);
            let (px, wt) = (hw * hw, rand_vec(co * g.k(), 2));
            let x = rand_vec(c * px, 1);
            let mut xb = vec![0f32; c * px];
            to_blocked(c, hw, hw, &x, &mut xb);
            let w = BlockedWeights::new(&kern.micro, &g, co, &wt);
            let mut y = vec![0f32; co * px];
            let blocked = crate::testing::median_ms(&mut || {
                let sink = StoreC {
                    c: y.as_mut_ptr(),
                    ldc: BLOCK,
                    batch_stride: g.pixels() * BLOCK,
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
                unsafe { blocked_conv(kern, pool, 1, &g, 1, &input, &w, &sink) };
            });
            let gf = 2.0 * (g.k() * co * g.pixels()) as f64 / 1e6;
            let mut line = format!(
                "{c} -> {co} {k}x{k}/{st} at {hw}x{hw}: blocked {blocked:.3} ms ({:.0} GFLOP/s)",
                gf / blocked
            );
            if k == 1 {
                let a = PackedA::new(&kern.micro, co, c, &wt, c, 1);
                let plain = crate::testing::median_ms(&mut || {
                    let gm = Gemm {
                        batch: 1,
                        m: co,
                        n: px,
                        k: c,
                        a: Lhs::Packed(&a),
                        b: Rhs::Strided(
                            MatRef {
                                ptr: x.as_ptr(),
                                rs: px as isize,
                                cs: 1,
                            },
                            Batches::Stride(0),
                        ),
                    };
                    let sink = StoreC {
                        c: y.as_mut_ptr(),
                        ldc: px,
                        batch_stride: co * px,
                    };
                    unsafe { gemm(kern, pool, 1, &gm, &sink) };
                });
                line += &format!(", plain GEMM {plain:.3} ms ({:.0} GFLOP/s)", gf / plain);
            }
            println!("{line}");
        }
    }
}
