//! Implicit-GEMM convolution: the packed weights times the im2col matrix, its rows read
//! straight from a padded copy of the input split into stride phases, so no B panel is
//! ever packed.
//!
//! Phase `(rp, cp)` of channel `ci` holds padded rows `ry * sh + rp` and columns
//! `cx * sw + cp`, in rows of `wv` floats. Output pixel `(y, x)` is virtual column
//! `y * wv + x`, and tap `(ci, ky, kx)` of it sits at a fixed offset from that column in
//! every output row, so each tap's im2col row over a panel of consecutive virtual columns
//! is one contiguous run. The `wv - ow` virtual columns past each output row are computed
//! and dropped: a stride-2 3x3 layer at 28x28 computes 29 columns a row.

use crate::buf::with_scratch;
use crate::conv::{phase_spans, Conv2d, PhaseSpan};
use crate::direct::DirectInput;
use crate::gemm::{a_block_bytes, Micro, PackedA, TileSink};
use crate::pool::ThreadPool;
use crate::Kernels;

/// The phase-split padded input of one batch and the virtual pixel grid over it.
struct Phases {
    /// Floats per phase row, and virtual columns per output row: `ow` plus the taps'
    /// reach past it.
    wv: usize,
    /// Floats per (phase, channel) plane: rows of `oh` plus the taps' reach below it.
    plane: usize,
    /// Floats per batch: every phase of every channel.
    batch: usize,
}

impl Phases {
    fn new(g: &Conv2d) -> Phases {
        let wv = g.ow + (g.kw - 1) * g.dw / g.sw;
        let hv = g.oh + (g.kh - 1) * g.dh / g.sh;
        let plane = wv * hv;
        Phases {
            wv,
            plane,
            batch: plane * g.c * g.sh * g.sw,
        }
    }

    /// Virtual columns of the product: `oh` rows of `wv`.
    fn columns(&self, g: &Conv2d) -> usize {
        g.oh * self.wv
    }

    /// Where channel `ci` of phase `(rp, cp)` starts in a batch.
    fn plane_at(&self, g: &Conv2d, rp: usize, cp: usize, ci: usize) -> usize {
        ((rp * g.sw + cp) * g.c + ci) * self.plane
    }

    /// Each tap's offset from its pixel's virtual column, in the order of the weights' k.
    fn tap_offsets(&self, g: &Conv2d) -> Vec<isize> {
        let mut offs = Vec::with_capacity(g.k());
        for ci in 0..g.c {
            for ky in 0..g.kh {
                for kx in 0..g.kw {
                    let (row, col) = (ky * g.dh, kx * g.dw);
                    let at = self.plane_at(g, row % g.sh, col % g.sw, ci)
                        + (row / g.sh) * self.wv
                        + col / g.sw;
                    offs.push(at as isize);
                }
            }
        }
        offs
    }
}

/// Whether the implicit GEMM serves `g` into `m` output channels with `micro`'s tiles: a
/// strided convolution (stride 1 has the direct and Winograd kernels) whose virtual columns
/// cost at most an eighth more column panels than its pixels, and whose packed weights fit
/// in L2. (Zen 5, one core: ResNet-50's 28x28 and YOLOv8n's 40x40 and 20x20 stride-2 layers
/// ran 5-15% faster than the im2col GEMM; with weights of 1.2-9.4 MB, ResNet-50's 7x7 and
/// YOLOv8n's 10x10 ones ran 6-11% slower in the model, each tile's weights from memory.)
pub fn applies(micro: &Micro, g: &Conv2d, m: usize) -> bool {
    let strided = g.sh > 1 || g.sw > 1;
    let ph = Phases::new(g);
    let real = g.pixels().div_ceil(micro.nr);
    let virt = ph.columns(g).div_ceil(micro.nr);
    strided
        && !(g.kh == 1 && g.kw == 1)
        && 8 * virt <= 9 * real
        && m * g.k() * 4 <= crate::isa::l2_bytes()
}

/// Floats of one batch's phase-split copy, counted without overflow: a plan checks it
/// against the memory limits before a run allocates it.
pub fn copy_floats(g: &Conv2d) -> u128 {
    let u = |x: usize| x as u128;
    let wv = u(g.ow) + u(g.kw.saturating_sub(1) * g.dw / g.sw.max(1));
    let hv = u(g.oh) + u(g.kh.saturating_sub(1) * g.dh / g.sh.max(1));
    wv * hv * u(g.c) * u(g.sh) * u(g.sw)
}

/// Fills `buf` with the phase-split padded copies of the input, one (batch, channel) per
/// task; phases no tap reads are zeroed.
///
/// # Safety
/// As for [`implicit_conv`]; `buf` holds `batches * ph.batch` floats.
#[allow(clippy::too_many_arguments)]
unsafe fn fill(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    batches: usize,
    input: &DirectInput,
    ph: &Phases,
    buf: &mut [f32],
) {
    let [cs, rs, es] = input.strides;
    let row_used: Vec<bool> = (0..g.sh)
        .map(|p| (0..g.kh).any(|ky| (ky * g.dh) % g.sh == p))
        .collect();
    let spans = phase_spans(g, es, ph.wv);
    let out = Shared(buf.as_mut_ptr());
    let (sw, wv) = (g.sw as isize, ph.wv);
    pool.run(threads, batches * g.c, &|t| {
        let _ = &out;
        let (b, ci) = (t / g.c, t % g.c);
        let src = input.x.offset(input.batch[b] + ci as isize * cs);
        for (rp, &rows_read) in row_used.iter().enumerate() {
            for (cp, span) in spans.iter().enumerate() {
                let dst = out.0.add(b * ph.batch + ph.plane_at(g, rp, cp, ci));
                let plane = std::slice::from_raw_parts_mut(dst, ph.plane);
                let (
                    Some(PhaseSpan {
                        lo,
                        hi,
                        first,
                        avail,
                    }),
                    true,
                ) = (*span, rows_read)
                else {
                    plane.fill(0.0);
                    continue;
                };
                for (ry, row) in plane.chunks_exact_mut(wv).enumerate() {
                    let iy = (ry * g.sh + rp) as isize - g.ph as isize;
                    if iy < 0 || iy >= g.h as isize {
                        row.fill(0.0);
                        continue;
                    }
                    let srow = src.offset(iy * rs + first * es);
                    crate::conv::pad_row(kern.strided_copy, row, (lo, hi), srow, sw * es, avail);
                }
            }
        }
    });
}

/// A raw pointer shared by tasks that write disjoint parts (or only read).
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: see the uses: filling writes disjoint planes, the product only reads.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// Computes `batches` convolutions `C_b = A * im2col(x_b)` (`a` the `m x k` weights packed
/// for `kern`), handing each tile of real pixels to `sink` (rows output channels, columns
/// pixels `y * ow + x`), on up to `threads` threads of `pool`.
///
/// # Safety
/// Every element of the input `g` and `input` describe is readable during the call; `a`
/// was packed for `kern`'s micro-kernels with `k = g.k()`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn implicit_conv(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    g: &Conv2d,
    batches: usize,
    input: &DirectInput,
    a: &PackedA,
    sink: &dyn TileSink,
) {
    let micro = &kern.micro;
    let (mr, nr, m, k) = (micro.mr, micro.nr, a.m(), g.k());
    debug_assert!(a.k() == k && a.mr() == mr);
    if batches == 0 || m == 0 || g.pixels() == 0 {
        return;
    }
    let ph = Phases::new(g);
    let cols = ph.columns(g);
    let (mp, np) = (m.div_ceil(mr), cols.div_ceil(nr));
    let offs = ph.tap_offsets(g);
    // All of A sweeps each column panel while it fits in half of L2 (read from there once
    // per panel); a larger A goes in blocks of a quarter of L2, each sweeping every panel.
    let mut mpt = if m * k * 4 <= crate::isa::l2_bytes() / 2 {
        mp
    } else {
        (a_block_bytes() / (k.max(1) * mr * 4)).clamp(1, mp)
    };
    let mut npt = np;
    let tasks = |mpt: usize, npt: usize| batches * mp.div_ceil(mpt) * np.div_ceil(npt);
    if threads > 1 {
        while tasks(mpt, npt) < 4 * threads && npt > 1 {
            npt = npt.div_ceil(2);
        }
        while tasks(mpt, npt) < 4 * threads && mpt > 1 {
            mpt = mpt.div_ceil(2);
        }
    }
    let (rb, cb) = (mp.div_ceil(mpt), np.div_ceil(npt));
    // The last panel reads up to `nr` floats past the last plane.
    let len = batches * ph.batch;
    with_scratch(len + nr, |buf| {
        buf[len..].fill(0.0);
        fill(kern, pool, threads, g, batches, input, &ph, &mut buf[..len]);
        let base = Shared(buf.as_mut_ptr());
        pool.run(threads, batches * rb * cb, &|t| {
            let _ = &base;
            let bi = t / (rb * cb);
            let (ib, jb) = ((t / cb) % rb, t % cb);
            let x = base.0.add(bi * ph.batch) as *const f32;
            let mut tile = [0f32; crate::gemm::micro::MAX_MR * 32];
            for j in jb * npt..((jb + 1) * npt).min(np) {
                let (lo, hi) = (j * nr, ((j + 1) * nr).min(cols));
                for i in ib * mpt..((ib + 1) * mpt).min(mp) {
                    let rows = mr.min(m - i * mr);
                    let ker = micro.offsets[rows - 1];
                    ker(
                        k,
                        a.panel(i).as_ptr(),
                        x.add(lo),
                        offs.as_ptr(),
                        tile.as_mut_ptr(),
                        nr,
                    );
                    // The real pixels, one output row's run at a time.
                    let mut v = lo;
                    while v < hi {
                        let (y, x0) = (v / ph.wv, v % ph.wv);
                        let row_end = ((y + 1) * ph.wv).min(hi);
                        if x0 < g.ow {
                            let run = (y * ph.wv + g.ow).min(row_end) - v;
                            let t = &mut tile[v - lo..rows * nr];
                            sink.tile(bi, i * mr, y * g.ow + x0, rows, run, t, nr);
                        }
                        v = row_end;
                    }
                }
            }
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa_tests;

    /// The implicit GEMM computes the plain convolution of two images, for strides,
    /// dilations, paddings, short row panels and images narrower than a panel.
    fn matches_plain(kern: &Kernels) {
        for &(c, co, h, w, k, s, d, p) in &[
            (3, 5, 9, 40, 3, 2, 1, 1),
            (16, 13, 28, 28, 3, 2, 1, 1),
            (4, 24, 14, 14, 3, 2, 1, 1),
            (5, 7, 7, 7, 3, 2, 1, 1),
            (2, 3, 11, 9, 7, 2, 1, 3),
            (3, 4, 17, 33, 3, 3, 1, 0),
            (2, 6, 12, 10, 3, 2, 2, 2),
            (3, 2, 10, 13, 1, 2, 1, 1),
        ] {
            let g = crate::testing::square_conv(c, h, w, k, s, d, p);
            crate::direct::tests::check_conv(kern, &g, co, |input, _, wt, sink| {
                let packed = PackedA::new(&kern.micro, co, g.k(), wt, g.k(), 1);
                let pool = crate::pool::global();
                unsafe { implicit_conv(kern, pool, 2, &g, 2, input, &packed, sink) };
            });
        }
    }

    isa_tests!(implicit_gemm, matches_plain);
}
