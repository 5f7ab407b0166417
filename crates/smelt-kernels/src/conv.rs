//! 2-D convolution pieces: the geometry, the im2col view of an input packed straight into
//! GEMM panels (never materialized whole), and a direct depthwise kernel per ISA.

use crate::gemm::PanelSource;

/// The geometry of one group of a 2-D convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv2d {
    /// Input channels of the group.
    pub c: usize,
    /// Input height and width.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Kernel height and width.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Strides.
    pub sh: usize,
    /// Stride along the width.
    pub sw: usize,
    /// Dilations.
    pub dh: usize,
    /// Dilation along the width.
    pub dw: usize,
    /// Leading pads (trailing pads follow from the output size).
    pub ph: usize,
    /// Leading pad along the width.
    pub pw: usize,
    /// Output height and width.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
}

impl Conv2d {
    /// Depth of the GEMM: channels times kernel taps.
    pub fn k(&self) -> usize {
        self.c * self.kh * self.kw
    }

    /// Output pixels.
    pub fn pixels(&self) -> usize {
        self.oh * self.ow
    }

    /// Whether the convolution is a plain product of the weights with the input (1x1,
    /// unit strides, no padding).
    pub fn is_pointwise(&self) -> bool {
        self.kh == 1
            && self.kw == 1
            && self.sh == 1
            && self.sw == 1
            && self.ph == 0
            && self.pw == 0
            && self.oh == self.h
            && self.ow == self.w
    }
}

/// The entries `t < len` of a strided run whose column `ix0 + t * step` lies in `[0, w)`:
/// `[lo, hi)` (the others fall in the padding); `lo == hi` when none does.
pub fn in_row(ix0: isize, step: usize, w: usize, len: usize) -> (usize, usize) {
    let (s, w) = (step.max(1) as isize, w as isize);
    let lo = if ix0 >= 0 { 0 } else { (-ix0 + s - 1) / s };
    let hi = if ix0 >= w { 0 } else { (w - 1 - ix0) / s + 1 };
    let hi = (hi as usize).min(len);
    ((lo as usize).min(hi), hi)
}

/// The part of one column phase's padded row that comes from the input: phase columns
/// `[lo, hi)` (the others are padding), input column `first` at `lo`, and the floats
/// readable from `first` to the input row's end at column step `es`.
#[derive(Clone, Copy, Debug)]
pub struct PhaseSpan {
    /// First phase column inside the input row.
    pub lo: usize,
    /// One past the last phase column inside the input row.
    pub hi: usize,
    /// The input column of phase column `lo`.
    pub first: isize,
    /// Floats readable from `first` to the input row's end.
    pub avail: usize,
}

/// Per column phase `p < g.sw` (padded columns `j * sw + p`, `width` of them per phase), its
/// span inside the input row, or None when no tap reads the phase; the same for every row.
pub fn phase_spans(g: &Conv2d, es: isize, width: usize) -> Vec<Option<PhaseSpan>> {
    (0..g.sw)
        .map(|p| {
            (0..g.kw).any(|kx| (kx * g.dw) % g.sw == p).then(|| {
                let ix0 = p as isize - g.pw as isize;
                let (lo, hi) = in_row(ix0, g.sw, g.w, width);
                let first = ix0 + (lo * g.sw) as isize;
                let avail = ((g.w as isize - 1 - first) * es + 1).max(0) as usize;
                PhaseSpan {
                    lo,
                    hi,
                    first,
                    avail,
                }
            })
        })
        .collect()
}

/// An input image viewed as the `k x pixels` im2col matrix of a convolution, per batch.
pub struct Im2col<'a> {
    /// Element (0, 0, 0) of batch 0's channel block.
    pub x: *const f32,
    /// Where each batch's channel block starts, past `x`.
    pub batch: &'a [isize],
    /// Steps between channels, rows and columns of the input.
    pub strides: [isize; 3],
    /// The geometry.
    pub geom: Conv2d,
}

// SAFETY: the input is only read; the creator guarantees it outlives the product.
unsafe impl Sync for Im2col<'_> {}

impl PanelSource for Im2col<'_> {
    fn pack(&self, batch: usize, j0: usize, cols: usize, k: usize, nr: usize, out: &mut [f32]) {
        let g = &self.geom;
        debug_assert_eq!(k, g.k());
        let [cs, rs, es] = self.strides;
        // The panel's pixels as runs within one output row: (first column in the panel, y, x0, len).
        let mut runs = [(0usize, 0usize, 0usize, 0usize); 72];
        let mut nruns = 0;
        let mut j = 0;
        while j < cols && nruns < runs.len() {
            let p = j0 + j;
            let (y, x0) = (p / g.ow, p % g.ow);
            let len = (g.ow - x0).min(cols - j);
            runs[nruns] = (j, y, x0, len);
            nruns += 1;
            j += len;
        }
        let runs = &runs[..nruns];
        // Per (run, kernel column): the run's columns [lo, hi) whose input column lies in
        // the row, and the first such input column. Per (run, kernel row): the input row,
        // or None in the padding. Neither depends on the channel.
        let sw = g.sw as isize;
        let cols_of = |x0: usize, len: usize, tj: usize| {
            let ix0 = (x0 * g.sw + tj * g.dw) as isize - g.pw as isize;
            let (lo, hi) = in_row(ix0, g.sw, g.w, len);
            (lo, hi, ix0 + lo as isize * sw)
        };
        let xcols: Vec<(usize, usize, isize)> = runs
            .iter()
            .flat_map(|&(_, _, x0, len)| (0..g.kw).map(move |tj| cols_of(x0, len, tj)))
            .collect();
        let yrows: Vec<Option<isize>> = runs
            .iter()
            .flat_map(|&(_, y, _, _)| {
                (0..g.kh).map(move |ti| {
                    let iy = (y * g.sh + ti * g.dh) as isize - g.ph as isize;
                    (iy >= 0 && iy < g.h as isize).then_some(iy)
                })
            })
            .collect();
        let base = unsafe { self.x.offset(self.batch[batch]) };
        let mut row = 0;
        for ci in 0..g.c {
            let plane = ci as isize * cs;
            for ti in 0..g.kh {
                for tj in 0..g.kw {
                    let dst = &mut out[row * nr..(row + 1) * nr];
                    if cols < nr {
                        dst[cols..].fill(0.0);
                    }
                    for (r, &(jj, _, _, len)) in runs.iter().enumerate() {
                        let d = &mut dst[jj..jj + len];
                        let Some(iy) = yrows[r * g.kh + ti] else {
                            d.fill(0.0);
                            continue;
                        };
                        let (lo, hi, first) = xcols[r * g.kw + tj];
                        if lo > 0 {
                            d[..lo].fill(0.0);
                        }
                        if hi < len {
                            d[hi..].fill(0.0);
                        }
                        // SAFETY: (ci, iy) is a row of the input and the columns first ..
                        // first + (hi - lo) * sw lie in it.
                        let src_row = unsafe { base.offset(plane + iy * rs) };
                        if sw == 1 && es == 1 {
                            let src = unsafe {
                                std::slice::from_raw_parts(src_row.offset(first), hi - lo)
                            };
                            crate::buf::copy_short(&mut d[lo..hi], src);
                        } else {
                            for (t, v) in d[lo..hi].iter_mut().enumerate() {
                                // SAFETY: as above.
                                *v = unsafe { *src_row.offset((first + t as isize * sw) * es) };
                            }
                        }
                    }
                    row += 1;
                }
            }
        }
    }
}

/// One channel of a depthwise convolution: `out[y * ow + x] = sum over taps of
/// w[i * kw + j] * x[y * sh + i * dh - ph, x * sw + j * dw - pw]` (zero outside the input).
pub type DepthwiseFn = unsafe fn(&Conv2d, *const f32, [isize; 2], &[f32], &mut [f32]);

/// `dst[t] = src[t * step]` for every `t`, reading only `src[.. avail]`: a stride-2 copy (a
/// convolution's column phase) deinterleaves pairs of vectors; other steps copy one float
/// at a time (LLVM turns that loop into a gather, far slower on some CPUs, only when it
/// can, so it is kept simple).
pub type StridedCopyFn = unsafe fn(*const f32, isize, usize, &mut [f32]);

/// One row of a padded copy: zeros in `row[..lo]` and `row[hi..]`, and between them the
/// input floats `src[t * step]` (a unit step copied whole), reading only `src[..avail]`.
///
/// # Safety
/// `src` holds the floats `row[lo..hi]` takes, within `src[..avail]` for a positive step.
pub(crate) unsafe fn pad_row(
    copy: StridedCopyFn,
    row: &mut [f32],
    (lo, hi): (usize, usize),
    src: *const f32,
    step: isize,
    avail: usize,
) {
    row[..lo].fill(0.0);
    row[hi..].fill(0.0);
    if step == 1 {
        row[lo..hi].copy_from_slice(std::slice::from_raw_parts(src, hi - lo));
    } else {
        copy(src, step, avail, &mut row[lo..hi]);
    }
}

/// See [`StridedCopyFn`], over lanes `V`.
#[inline(always)]
pub(crate) unsafe fn strided_copy_body<V: crate::simd::Vf>(
    src: *const f32,
    step: isize,
    avail: usize,
    dst: &mut [f32],
) {
    let mut t0 = 0;
    if step == 2 {
        let lanes = V::LANES;
        while t0 + lanes <= dst.len() && 2 * (t0 + lanes) <= avail {
            let a = V::load(src.add(2 * t0));
            let b = V::load(src.add(2 * t0 + lanes));
            V::evens_odds(a, b).0.store(dst.as_mut_ptr().add(t0));
            t0 += lanes;
        }
        // The short last run by partial vectors (a padded phase row of a 28-wide output
        // copied 12 of its 28 floats one at a time: a quarter of a stride-2 layer's time).
        let n = dst.len() - t0;
        let have = avail.saturating_sub(2 * t0).min(2 * lanes);
        if lanes > 1 && n > 0 && n < lanes && have >= 2 * n - 1 {
            /// The first `m` floats from `p` (all lanes from `LANES` up), zeros after.
            #[inline(always)]
            unsafe fn part<V: crate::simd::Vf>(p: *const f32, m: usize) -> V {
                if m >= V::LANES {
                    V::load(p)
                } else if m > 0 {
                    V::load_part(p, m)
                } else {
                    V::splat(0.0)
                }
            }
            let a = part::<V>(src.add(2 * t0), have.min(lanes));
            let b = part::<V>(src.add(2 * t0 + lanes), have.saturating_sub(lanes));
            V::evens_odds(a, b)
                .0
                .store_part(dst.as_mut_ptr().add(t0), n);
            t0 += n;
        }
    }
    for (t, v) in dst.iter_mut().enumerate().skip(t0) {
        *v = *src.offset(t as isize * step);
    }
}

macro_rules! depthwise_body {
    () => {
        /// `n` output columns from `x0` of output rows `y ..` of a depthwise channel.
        struct DwRun<'a> {
            g: &'a Conv2d,
            w: &'a [f32],
            kofs: &'a [usize],
            y: usize,
            x0: usize,
            n: usize,
        }

        impl DwRun<'_> {
            /// The run on `RR` output rows as `NV` vectors each (the last maybe partial: its
            /// loads read slack past the row, its store only the run's columns), every
            /// vector its own chain of multiply-adds. `row_of(y, i)` is output row `y`'s
            /// input row for tap row `i` (None: padding); `out(y)` its output row.
            #[inline(always)]
            unsafe fn vectors<V: crate::simd::Vf, const NV: usize, const RR: usize>(
                &self,
                row_of: &dyn Fn(usize, usize) -> Option<*const f32>,
                out: &dyn Fn(usize) -> *mut f32,
            ) {
                let lanes = V::LANES;
                let mut a = [[V::splat(0.0); NV]; RR];
                for i in 0..self.g.kh {
                    let mut rows = [std::ptr::null::<f32>(); RR];
                    for (r, p) in rows.iter_mut().enumerate() {
                        if let Some(row) = row_of(self.y + r, i) {
                            *p = row.add(self.x0);
                        }
                    }
                    for (j, &off) in self.kofs.iter().enumerate() {
                        let wv = V::splat(*self.w.get_unchecked(i * self.g.kw + j));
                        for (acc, &row) in a.iter_mut().zip(&rows) {
                            if row.is_null() {
                                continue;
                            }
                            let src = row.add(off);
                            for (v, acc) in acc.iter_mut().enumerate() {
                                *acc = V::load(src.add(v * lanes)).fma(wv, *acc);
                            }
                        }
                    }
                }
                for (r, acc) in a.iter().enumerate() {
                    let o = out(self.y + r).add(self.x0);
                    for (v, acc) in acc.iter().enumerate() {
                        let m = (self.n - v * lanes).min(lanes);
                        if m == lanes {
                            acc.store(o.add(v * lanes));
                        } else {
                            acc.store_part(o.add(v * lanes), m);
                        }
                    }
                }
            }
        }

        #[inline(always)]
        unsafe fn depthwise_body<V: crate::simd::Vf>(
            g: &Conv2d,
            x: *const f32,
            st: [isize; 2],
            w: &[f32],
            out: &mut [f32],
        ) {
            let [rs, es] = st;
            // Each input row is split once (it serves up to kh output rows) into `sw`
            // zero-padded column phases, so every tap reads contiguous floats: padded column
            // xo * sw + j * dw sits in phase (j * dw) % sw at xo + j * dw / sw. Slack past the
            // last row: a row's last vector may read past its end. Not with_scratch: its
            // closure would not get this function's target features.
            let plen = g.ow + ((g.kw - 1) * g.dw) / g.sw + 1;
            let per_row = g.sw * plen;
            let mut scratch = crate::buf::take_scratch(g.h * per_row + 64);
            {
                let phases = scratch.as_mut_slice();
                for iy in 0..g.h {
                    let row = x.offset(iy as isize * rs);
                    let ph = &mut phases[iy * per_row..(iy + 1) * per_row];
                    for r in 0..g.sw {
                        // Phase r's entries q read input column q * sw + r - pw: those in
                        // [q_lo, q_hi) lie in the row, the others are padding.
                        let sw = g.sw as isize;
                        let ix0 = r as isize - g.pw as isize;
                        let (q_lo, q_hi) = super::in_row(ix0, g.sw, g.w, plen);
                        let p = &mut ph[r * plen..(r + 1) * plen];
                        p[..q_lo].fill(0.0);
                        p[q_hi..].fill(0.0);
                        let first = ix0 + q_lo as isize * sw;
                        if sw == 1 && es == 1 {
                            p[q_lo..q_hi].copy_from_slice(std::slice::from_raw_parts(
                                row.offset(first),
                                q_hi - q_lo,
                            ));
                        } else {
                            // Floats from the row's column `first` to its last element.
                            let avail = ((g.w as isize - 1 - first) * es + 1).max(0) as usize;
                            super::strided_copy_body::<V>(
                                row.offset(first * es),
                                sw * es,
                                avail,
                                &mut p[q_lo..q_hi],
                            );
                        }
                    }
                }
                // Up to four vectors of output columns at a time, each its own chain of
                // multiply-adds over every tap in registers, stored once. (One vector at a
                // time, a single chain waiting on each FMA's latency, made PP-OCR's 40x40
                // 5x5 layers run at 17 GFLOP/s.)
                let lanes = V::LANES;
                let pp = phases.as_ptr();
                // Each tap column's offset into its phase row.
                let mut kofs_small = [0usize; 32];
                let mut kofs_big = Vec::new();
                let kofs: &mut [usize] = if g.kw <= kofs_small.len() {
                    &mut kofs_small[..g.kw]
                } else {
                    kofs_big.resize(g.kw, 0);
                    &mut kofs_big
                };
                for (j, k) in kofs.iter_mut().enumerate() {
                    let c = j * g.dw;
                    *k = (c % g.sw) * plen + c / g.sw;
                }
                let kofs = &*kofs;
                let row_of = |y: usize, i: usize| {
                    let iy = (y * g.sh + i * g.dh) as isize - g.ph as isize;
                    (iy >= 0 && iy < g.h as isize).then(|| pp.add(iy as usize * per_row))
                };
                let op = out.as_mut_ptr();
                let out_row = |y: usize| op.add(y * g.ow);
                // Narrow rows (one or two vectors) run several output rows at once, for
                // four chains in flight (PP-OCR's 20x20 layers).
                let nv_row = g.ow.div_ceil(lanes);
                let rr = if nv_row <= 2 { 4 / nv_row } else { 1 };
                let mut y = 0;
                while y < g.oh {
                    let rows = if y + rr <= g.oh { rr } else { 1 };
                    let mut x0 = 0;
                    while x0 < g.ow {
                        let n = (g.ow - x0).min(4 * lanes);
                        let run = DwRun {
                            g,
                            w,
                            kofs,
                            y,
                            x0,
                            n,
                        };
                        match (n.div_ceil(lanes), rows) {
                            (1, 4) => run.vectors::<V, 1, 4>(&row_of, &out_row),
                            (2, 2) => run.vectors::<V, 2, 2>(&row_of, &out_row),
                            (4, _) => run.vectors::<V, 4, 1>(&row_of, &out_row),
                            (3, _) => run.vectors::<V, 3, 1>(&row_of, &out_row),
                            (2, _) => run.vectors::<V, 2, 1>(&row_of, &out_row),
                            _ => run.vectors::<V, 1, 1>(&row_of, &out_row),
                        }
                        x0 += n;
                    }
                    y += rows;
                }
            }
            crate::buf::return_scratch(scratch);
        }
    };
}

/// The portable depthwise kernels.
pub mod portable {
    use super::Conv2d;
    depthwise_body!();

    /// See [`super::DepthwiseFn`].
    ///
    /// # Safety
    /// Every input element the geometry reads must be readable; `w` holds `kh * kw`
    /// taps and `out` `oh * ow` floats.
    pub unsafe fn depthwise(g: &Conv2d, x: *const f32, st: [isize; 2], w: &[f32], out: &mut [f32]) {
        depthwise_body::<f32>(g, x, st, w, out)
    }

    /// See [`super::StridedCopyFn`].
    ///
    /// # Safety
    /// `src[t * step]` is readable for every `t < dst.len()`, and `src[.. avail]`.
    pub unsafe fn strided_copy(src: *const f32, step: isize, avail: usize, dst: &mut [f32]) {
        super::strided_copy_body::<f32>(src, step, avail, dst)
    }
}

/// AVX2 and AVX-512 depthwise kernels.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::Conv2d;
    depthwise_body!();

    /// See [`super::DepthwiseFn`] (AVX2+FMA CPUs only).
    ///
    /// # Safety
    /// As for the portable kernel, on a CPU with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn depthwise_avx2(
        g: &Conv2d,
        x: *const f32,
        st: [isize; 2],
        w: &[f32],
        out: &mut [f32],
    ) {
        depthwise_body::<crate::simd::Y8>(g, x, st, w, out)
    }

    /// See [`super::StridedCopyFn`] (AVX-512 CPUs only).
    ///
    /// # Safety
    /// As for the portable kernel, on a CPU with AVX-512.
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    pub unsafe fn strided_copy_avx512(src: *const f32, step: isize, avail: usize, dst: &mut [f32]) {
        super::strided_copy_body::<crate::simd::Z16>(src, step, avail, dst)
    }

    /// See [`super::StridedCopyFn`] (AVX2 CPUs only).
    ///
    /// # Safety
    /// As for the portable kernel, on a CPU with AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn strided_copy_avx2(src: *const f32, step: isize, avail: usize, dst: &mut [f32]) {
        super::strided_copy_body::<crate::simd::Y8>(src, step, avail, dst)
    }

    /// See [`super::DepthwiseFn`] (AVX-512 CPUs only).
    ///
    /// # Safety
    /// As for the portable kernel, on a CPU with AVX-512.
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    pub unsafe fn depthwise_avx512(
        g: &Conv2d,
        x: *const f32,
        st: [isize; 2],
        w: &[f32],
        out: &mut [f32],
    ) {
        depthwise_body::<crate::simd::Z16>(g, x, st, w, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::PanelSource;
    use crate::testing::rand_vec;
    use crate::{isa_tests, Kernels};

    fn geoms() -> Vec<Conv2d> {
        let mut v = Vec::new();
        for &(h, w, k, s, d, p) in &[
            (1, 1, 1, 1, 1, 0),
            (5, 7, 3, 1, 1, 1),
            (6, 9, 3, 2, 1, 1),
            (8, 8, 5, 1, 2, 4),
            (17, 3, 3, 2, 1, 0),
            (9, 11, 7, 2, 1, 3),
            // Wide rows: full vectors of four and a partial one; runs of two, three and
            // four vectors, the last partial.
            (4, 70, 3, 1, 1, 1),
            (3, 40, 5, 1, 1, 2),
            (2, 83, 5, 1, 1, 2),
            (3, 100, 3, 2, 1, 1),
            // Narrow rows run two or four output rows at once, an odd one left over.
            (9, 20, 5, 1, 1, 2),
            (7, 12, 3, 1, 1, 1),
        ] {
            let oh = (h + 2 * p - d * (k - 1) - 1) / s + 1;
            let ow = (w + 2 * p - d * (k - 1) - 1) / s + 1;
            v.push(Conv2d {
                c: 3,
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
            });
        }
        v
    }

    fn plain(g: &Conv2d, x: &[f32], ci: usize, y: usize, xo: usize, i: usize, j: usize) -> f32 {
        let iy = (y * g.sh + i * g.dh) as isize - g.ph as isize;
        let ix = (xo * g.sw + j * g.dw) as isize - g.pw as isize;
        if iy < 0 || ix < 0 || iy >= g.h as isize || ix >= g.w as isize {
            0.0
        } else {
            x[ci * g.h * g.w + iy as usize * g.w + ix as usize]
        }
    }

    #[test]
    fn im2col_panels_hold_the_taps() {
        for g in geoms() {
            let x = rand_vec(g.c * g.h * g.w, 3);
            let src = Im2col {
                x: x.as_ptr(),
                batch: &[0],
                strides: [(g.h * g.w) as isize, g.w as isize, 1],
                geom: g,
            };
            let nr = 8;
            let mut out = vec![f32::NAN; g.k() * nr];
            for j0 in (0..g.pixels()).step_by(nr) {
                let cols = nr.min(g.pixels() - j0);
                src.pack(0, j0, cols, g.k(), nr, &mut out);
                for (row, v) in out.chunks(nr).enumerate() {
                    let (ci, i, j) = (row / (g.kh * g.kw), row / g.kw % g.kh, row % g.kw);
                    for (c, &got) in v.iter().enumerate() {
                        let p = j0 + c;
                        let want = if c < cols {
                            plain(&g, &x, ci, p / g.ow, p % g.ow, i, j)
                        } else {
                            0.0
                        };
                        assert_eq!(got, want, "{g:?} panel {j0} row {row} col {c}");
                    }
                }
            }
        }
    }

    fn depthwise_matches(kern: &Kernels) {
        for g in geoms() {
            let x = rand_vec(g.h * g.w, 5);
            let w = rand_vec(g.kh * g.kw, 6);
            let mut out = vec![f32::NAN; g.pixels()];
            unsafe { (kern.depthwise)(&g, x.as_ptr(), [g.w as isize, 1], &w, &mut out) };
            for y in 0..g.oh {
                for xo in 0..g.ow {
                    let mut want = 0.0f64;
                    for i in 0..g.kh {
                        for j in 0..g.kw {
                            want += w[i * g.kw + j] as f64 * plain(&g, &x, 0, y, xo, i, j) as f64;
                        }
                    }
                    let got = out[y * g.ow + xo] as f64;
                    assert!(
                        (got - want).abs() < 1e-5,
                        "{} {g:?} ({y},{xo}): {got} vs {want}",
                        kern.isa
                    );
                }
            }
        }
    }

    isa_tests!(depthwise, depthwise_matches);

    /// A strided copy takes every `step`-th float, reading no further than it may, at every
    /// length (full vectors, a partial last one, a scalar tail) and readable extent.
    fn strided_copy_takes_the_samples(kern: &Kernels) {
        let src = rand_vec(80, 3);
        for step in [1usize, 2, 3] {
            for len in 0..=33 {
                // The last sample's float is the least the source must hold.
                let least = if len == 0 { 0 } else { (len - 1) * step + 1 };
                for avail in [least, least + 1, least + 17]
                    .into_iter()
                    .filter(|&a| a <= 80)
                {
                    let mut got = vec![f32::NAN; len + 3];
                    unsafe {
                        (kern.strided_copy)(src.as_ptr(), step as isize, avail, &mut got[..len])
                    };
                    for (t, &v) in got[..len].iter().enumerate() {
                        assert_eq!(
                            v,
                            src[t * step],
                            "{} step {step} len {len} avail {avail} at {t}",
                            kern.isa
                        );
                    }
                    assert!(
                        got[len..].iter().all(|v| v.is_nan()),
                        "{} wrote past {len}",
                        kern.isa
                    );
                }
            }
        }
    }

    isa_tests!(strided_copy, strided_copy_takes_the_samples);

    #[test]
    fn in_row_is_the_span_of_columns_inside_the_row() {
        for ix0 in -7isize..9 {
            for step in 1..4usize {
                for w in 0..6usize {
                    for len in 0..7usize {
                        let inside: Vec<usize> = (0..len)
                            .filter(|&t| (0..w as isize).contains(&(ix0 + (t * step) as isize)))
                            .collect();
                        let (lo, hi) = in_row(ix0, step, w, len);
                        assert!(lo <= hi && hi <= len);
                        assert_eq!(
                            (lo..hi).collect::<Vec<_>>(),
                            inside,
                            "{ix0} {step} {w} {len}"
                        );
                    }
                }
            }
        }
    }
}
