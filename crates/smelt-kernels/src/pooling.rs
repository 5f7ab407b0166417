//! 2-D max and average pooling of one channel, separably: each output row first reduces
//! its window's input rows into one padded row (a vector pass down the rows, one store per
//! vector), then each vector of outputs reduces its column taps from that row (unit-stride
//! loads, a stride of 2 the even lanes of two loads). The work per output row is `kh + kw`
//! vector steps per vector instead of `kh * kw` strided ones.

use crate::conv::Conv2d;

/// 2-D pooling of one channel: max, or average (`Some(count_pads)`: whether padded taps
/// count in the divisor). Taps at `(y * sh + i * dh - ph, x * sw + j * dw - pw)` that fall
/// in the input are real; those in the padding (up to `pad_end` past the input) count for
/// `count_pads`; those beyond (ceil mode) do not count at all. A max with no real tap is
/// -inf, an average with nothing to count NaN; a NaN tap makes the max NaN. The geometry
/// must pass [`fits`] (a global pool, one window over the whole input, always does).
pub type PoolFn = unsafe fn(&Conv2d, [usize; 2], Option<bool>, *const f32, [isize; 2], &mut [f32]);

/// Floats of the padded row a kernel of `lanes` lanes reduces each output row's window into:
/// room for every column tap of every output vector (see `pool_body`).
fn padded_row(g: &Conv2d, lanes: usize) -> Option<usize> {
    let taps = g.ow.checked_next_multiple_of(lanes)?.checked_mul(g.sw)?;
    let reach = (g.kw.checked_sub(1)?).checked_mul(g.dw)?;
    let len = taps.checked_add(reach)?.checked_add(2 * lanes)?;
    Some(len.max(g.pw.checked_add(g.w)?))
}

/// Whether the pooling kernels take `g` with scratch in proportion to its input row: its
/// padded row (at the widest lanes) at most four input rows and a few vectors. A window,
/// pad or stride far wider than the input (a degenerate pool a model can still declare)
/// would otherwise ask for scratch of that width; callers run such pools elsewhere.
pub fn fits(g: &Conv2d) -> bool {
    padded_row(g, 16).is_some_and(|len| len <= 4 * g.w + 1024)
}

/// Of one axis's taps for output position `o` (kernel `k`, stride `s`, dilation `d`, lead
/// pad `p`, input size `n`, trailing pad `pe`): how many are real and how many in padding.
fn span(o: usize, k: usize, s: usize, d: usize, p: usize, n: usize, pe: usize) -> (usize, usize) {
    let (mut real, mut pads) = (0, 0);
    for t in 0..k {
        let i = (o * s + t * d) as isize - p as isize;
        if i >= 0 && i < n as isize {
            real += 1;
        } else if i < (n + pe) as isize {
            pads += 1;
        }
    }
    (real, pads)
}

/// Output row `y` of a max pool computed tap by tap, letting a NaN win (the rare path).
///
/// # Safety
/// As for [`PoolFn`].
unsafe fn exact_max_row(g: &Conv2d, x: *const f32, [rs, es]: [isize; 2], y: usize, o: &mut [f32]) {
    for (xo, v) in o.iter_mut().enumerate() {
        let mut best = f32::NEG_INFINITY;
        for i in 0..g.kh {
            let iy = (y * g.sh + i * g.dh) as isize - g.ph as isize;
            if iy < 0 || iy >= g.h as isize {
                continue;
            }
            for j in 0..g.kw {
                let ix = (xo * g.sw + j * g.dw) as isize - g.pw as isize;
                if ix >= 0 && ix < g.w as isize {
                    let t = *x.offset(iy * rs + ix * es);
                    if t > best || (t.is_nan() && !best.is_nan()) {
                        best = t;
                    }
                }
            }
        }
        *v = best;
    }
}

/// Whether the one window is the whole input, every tap real (a global pool).
fn whole_plane(g: &Conv2d) -> bool {
    g.oh == 1 && g.ow == 1 && (g.ph, g.pw, g.dh, g.dw) == (0, 0, 1, 1) && (g.kh, g.kw) == (g.h, g.w)
}

/// The max or the mean of a whole plane of rows `rs` apart, by vectors: a NaN makes either
/// NaN (a max marks the lanes where it saw one).
///
/// # Safety
/// The plane's rows are readable.
#[inline(always)]
unsafe fn whole_plane_body<V: crate::simd::Vf>(
    g: &Conv2d,
    avg: bool,
    x: *const f32,
    rs: isize,
) -> f32 {
    let (h, w) = (g.h, g.w);
    let mut acc = V::splat(if avg { 0.0 } else { f32::NEG_INFINITY });
    let mut nan = V::splat(0.0);
    let mut tail = if avg { 0.0f32 } else { f32::NEG_INFINITY };
    let mut tail_nan = false;
    // A contiguous plane is one long row.
    let (rows, len, step) = if rs == w as isize {
        (1, h * w, 0)
    } else {
        (h, w, rs)
    };
    for r in 0..rows {
        let row = x.offset(r as isize * step);
        let mut t = 0;
        while t + V::LANES <= len {
            let v = V::load(row.add(t));
            if avg {
                acc = acc.add(v);
            } else {
                nan = V::select(v.nan(), V::splat(1.0), nan);
                acc = v.max_or(acc);
            }
            t += V::LANES;
        }
        for t in t..len {
            let v = *row.add(t);
            if avg {
                tail += v;
            } else {
                tail_nan |= v.is_nan();
                tail = if v > tail { v } else { tail };
            }
        }
    }
    if avg {
        (acc.hsum() + tail) / (h * w) as f32
    } else if tail_nan || nan.hmax() > 0.0 {
        f32::NAN
    } else {
        acc.hmax().max(tail)
    }
}

macro_rules! pool_body {
    () => {
        #[inline(always)]
        unsafe fn pool_body<V: crate::simd::Vf>(
            g: &Conv2d,
            pad_end: [usize; 2],
            avg: Option<bool>,
            x: *const f32,
            st: [isize; 2],
            out: &mut [f32],
        ) {
            use super::{exact_max_row, span, whole_plane, whole_plane_body};
            let [rs, es] = st;
            let w = g.w;
            let init = if avg.is_some() {
                0.0
            } else {
                f32::NEG_INFINITY
            };
            if whole_plane(g) && es == 1 && out.len() == 1 {
                out[0] = whole_plane_body::<V>(g, avg.is_some(), x, rs);
                return;
            }
            // The window's rows reduced into one row, between `pw` leading and enough
            // trailing pad values (`init`) that every column tap of every output vector
            // reads inside it: the column taps then need no bounds.
            let lanes = V::LANES;
            // Callers check `fits`, which bounds this length at the widest lanes.
            let len = super::padded_row(g, lanes)
                .filter(|_| super::fits(g))
                .expect("pooling geometry checked by `fits`");
            let mut buf = crate::buf::take_scratch(len);
            buf.as_mut_slice().fill(init);
            let vp = buf.as_mut_slice().as_mut_ptr();
            let v = vp.add(g.pw);
            for y in 0..g.oh {
                let o = &mut out[y * g.ow..(y + 1) * g.ow];
                // The window's rows inside the input: `count` rows `step` apart from `first`.
                let top = (y * g.sh) as isize - g.ph as isize;
                let i_lo = if top < 0 { (-top) as usize } else { 0 }
                    .div_ceil(g.dh)
                    .min(g.kh);
                let i_hi = if (g.h as isize) > top {
                    ((g.h as isize - top - 1) as usize / g.dh + 1).clamp(i_lo, g.kh)
                } else {
                    i_lo
                };
                let count = i_hi - i_lo;
                let step = g.dh as isize * rs;
                let first = x.wrapping_offset((top + (i_lo * g.dh) as isize) * rs);
                let mut nan = V::splat(0.0);
                if es == 1 {
                    // Vector by vector down the window's rows, one store each; two
                    // vectors at a time, so two accumulator chains overlap.
                    let mut t = 0;
                    while t + 2 * lanes <= w {
                        let (mut a0, mut a1) = (V::splat(init), V::splat(init));
                        for i in 0..count as isize {
                            let row = first.offset(i * step).add(t);
                            let (r0, r1) = (V::load(row), V::load(row.add(lanes)));
                            if avg.is_some() {
                                a0 = a0.add(r0);
                                a1 = a1.add(r1);
                            } else {
                                nan = V::select(r0.nan(), V::splat(1.0), nan);
                                nan = V::select(r1.nan(), V::splat(1.0), nan);
                                // x86's max: `r > a ? r : a`, a NaN `r` keeps `a`.
                                a0 = r0.max_or(a0);
                                a1 = r1.max_or(a1);
                            }
                        }
                        a0.store(v.add(t));
                        a1.store(v.add(t + lanes));
                        t += 2 * lanes;
                    }
                    while t < w {
                        let n = (w - t).min(lanes);
                        let mut acc = V::splat(init);
                        for i in 0..count as isize {
                            let row = first.offset(i * step);
                            let r = if n == lanes {
                                V::load(row.add(t))
                            } else {
                                V::load_part(row.add(t), n)
                            };
                            if avg.is_some() {
                                acc = acc.add(r);
                            } else {
                                nan = V::select(r.nan(), V::splat(1.0), nan);
                                acc = r.max_or(acc);
                            }
                        }
                        if n == lanes {
                            acc.store(v.add(t));
                        } else {
                            acc.store_part(v.add(t), n);
                        }
                        t += lanes;
                    }
                } else {
                    let mut seen = false;
                    for t in 0..w {
                        let mut a = init;
                        for i in 0..count as isize {
                            let b = *first.offset(i * step + t as isize * es);
                            seen |= b.is_nan();
                            a = if avg.is_some() {
                                a + b
                            } else if b > a {
                                b
                            } else {
                                a
                            };
                        }
                        *v.add(t) = a;
                    }
                    if seen {
                        nan = V::splat(1.0);
                    }
                }
                if avg.is_none() && nan.hmax() > 0.0 {
                    exact_max_row(g, x, st, y, o);
                    continue;
                }
                // Each column tap over a vector of outputs: unit-stride loads, stride 2 the
                // even lanes of two, other strides gathered.
                let mut x0 = 0;
                while x0 < g.ow {
                    let mut acc = V::splat(init);
                    for j in 0..g.kw {
                        let base = vp.add(x0 * g.sw + j * g.dw) as *const f32;
                        let tap = match g.sw {
                            1 => V::load(base),
                            2 => V::evens_odds(V::load(base), V::load(base.add(lanes))).0,
                            sw => V::gather(base, sw as isize),
                        };
                        acc = if avg.is_some() {
                            acc.add(tap)
                        } else {
                            tap.max_or(acc)
                        };
                    }
                    let n = (g.ow - x0).min(lanes);
                    if n == lanes {
                        acc.store(o.as_mut_ptr().add(x0));
                    } else {
                        acc.store_part(o.as_mut_ptr().add(x0), n);
                    }
                    x0 += lanes;
                }
                if let Some(count_pads) = avg {
                    let (ry, py) = span(y, g.kh, g.sh, g.dh, g.ph, g.h, pad_end[0]);
                    for (xo, a) in o.iter_mut().enumerate() {
                        let (rx, px) = span(xo, g.kw, g.sw, g.dw, g.pw, g.w, pad_end[1]);
                        let cnt = if count_pads {
                            (ry + py) * (rx + px)
                        } else {
                            ry * rx
                        };
                        *a = if cnt == 0 { f32::NAN } else { *a / cnt as f32 };
                    }
                }
            }
            crate::buf::return_scratch(buf);
        }
    };
}

/// The portable pooling kernel.
pub mod portable {
    use super::Conv2d;
    pool_body!();

    /// See [`super::PoolFn`].
    ///
    /// # Safety
    /// Every input element the geometry reads must be readable; `out` holds `oh * ow`.
    pub unsafe fn pool(
        g: &Conv2d,
        pe: [usize; 2],
        avg: Option<bool>,
        x: *const f32,
        st: [isize; 2],
        out: &mut [f32],
    ) {
        pool_body::<f32>(g, pe, avg, x, st, out)
    }
}

/// AVX2 and AVX-512 pooling kernels.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::Conv2d;
    pool_body!();

    /// See [`super::PoolFn`] (AVX2+FMA CPUs only).
    ///
    /// # Safety
    /// As for the portable kernel, on a CPU with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn pool_avx2(
        g: &Conv2d,
        pe: [usize; 2],
        avg: Option<bool>,
        x: *const f32,
        st: [isize; 2],
        out: &mut [f32],
    ) {
        pool_body::<crate::simd::Y8>(g, pe, avg, x, st, out)
    }

    /// See [`super::PoolFn`] (AVX-512 CPUs only).
    ///
    /// # Safety
    /// As for the portable kernel, on a CPU with AVX-512.
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    pub unsafe fn pool_avx512(
        g: &Conv2d,
        pe: [usize; 2],
        avg: Option<bool>,
        x: *const f32,
        st: [isize; 2],
        out: &mut [f32],
    ) {
        pool_body::<crate::simd::Z16>(g, pe, avg, x, st, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::rand_vec;
    use crate::{isa_tests, Kernels};

    /// (h, w, kernel, stride, dilation, lead pad, extra trailing pad: ceil mode).
    const CASES: &[(usize, usize, usize, usize, usize, usize, usize)] = &[
        (1, 1, 1, 1, 1, 0, 0),
        (5, 7, 3, 1, 1, 1, 0),
        (6, 9, 3, 2, 1, 1, 0),
        (6, 9, 3, 2, 1, 0, 1),
        (8, 8, 5, 1, 2, 4, 0),
        (17, 3, 3, 2, 1, 0, 0),
        (9, 11, 7, 2, 1, 3, 0),
        (10, 13, 2, 3, 1, 0, 2),
        (7, 7, 7, 1, 1, 0, 0),
        (4, 70, 3, 1, 1, 1, 0),
        (5, 71, 3, 2, 1, 1, 1),
        (5, 112, 3, 2, 1, 1, 0),
        (6, 50, 3, 3, 2, 1, 1),
    ];

    fn pool_matches(kern: &Kernels) {
        for &(h, w, k, s, d, p, ceil) in CASES {
            let out_of = |n: usize| (n + 2 * p + ceil - d * (k - 1) - 1) / s + 1;
            let g = Conv2d {
                c: 1,
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
                oh: out_of(h),
                ow: out_of(w),
            };
            for es in [1, 2] {
                let mut x = rand_vec(h * w * es, 7);
                for nan_at in [None, Some(0), Some(h * w / 2 * es)] {
                    if let Some(i) = nan_at {
                        x[i] = f32::NAN;
                    }
                    for avg in [None, Some(false), Some(true)] {
                        let mut out = vec![0.5f32; g.pixels()];
                        let st = [(w * es) as isize, es as isize];
                        unsafe { (kern.pool)(&g, [p, p], avg, x.as_ptr(), st, &mut out) };
                        for y in 0..g.oh {
                            for xo in 0..g.ow {
                                let (mut best, mut sum, mut real, mut all, mut nan) =
                                    (f32::NEG_INFINITY, 0.0f64, 0, 0, false);
                                for i in 0..k {
                                    for j in 0..k {
                                        let iy = (y * s + i * d) as isize - p as isize;
                                        let ix = (xo * s + j * d) as isize - p as isize;
                                        if iy < (h + p) as isize && ix < (w + p) as isize {
                                            all += 1;
                                        }
                                        if iy >= 0 && ix >= 0 && iy < h as isize && ix < w as isize
                                        {
                                            let v = x[(iy as usize * w + ix as usize) * es];
                                            nan |= v.is_nan();
                                            best = best.max(v);
                                            sum += v as f64;
                                            real += 1;
                                        }
                                    }
                                }
                                let got = out[y * g.ow + xo];
                                let want = match avg {
                                    None if nan => f32::NAN,
                                    None => best,
                                    Some(false) => (sum / real as f64) as f32,
                                    Some(true) => (sum / all as f64) as f32,
                                };
                                let same = (got.is_nan() && want.is_nan())
                                    || got == want
                                    || (got - want).abs() < 1e-5;
                                assert!(
                                same,
                                "{} {avg:?} {g:?} es {es} nan {nan_at:?} ({y},{xo}): {got} vs {want}",
                                kern.isa
                            );
                            }
                        }
                    }
                }
            }
        }
    }

    /// A global pool over a plane of rows 3 floats apart (not contiguous) and over a
    /// contiguous one: an infinity stays infinite, a NaN wins, the mean is the mean.
    fn global_pool(kern: &Kernels) {
        let (h, w) = (5, 37);
        let g = Conv2d {
            c: 1,
            h,
            w,
            kh: h,
            kw: w,
            sh: 1,
            sw: 1,
            dh: 1,
            dw: 1,
            ph: 0,
            pw: 0,
            oh: 1,
            ow: 1,
        };
        for rs in [w, w + 3] {
            let mut x = rand_vec(h * rs, 3);
            let at = |r: usize, c: usize| r * rs + c;
            let run = |x: &[f32], avg| {
                let mut out = [0f32];
                unsafe { (kern.pool)(&g, [0, 0], avg, x.as_ptr(), [rs as isize, 1], &mut out) };
                out[0]
            };
            let mean = (0..h)
                .flat_map(|r| (0..w).map(move |c| (r, c)))
                .map(|(r, c)| x[at(r, c)] as f64)
                .sum::<f64>()
                / (h * w) as f64;
            assert!(
                (run(&x, Some(false)) as f64 - mean).abs() < 1e-5,
                "{}",
                kern.isa
            );
            x[at(4, 36)] = f32::INFINITY;
            assert_eq!(run(&x, None), f32::INFINITY, "{}", kern.isa);
            x[at(2, 5)] = f32::NAN;
            assert!(run(&x, None).is_nan(), "{}", kern.isa);
        }
    }

    /// A window or stride far wider than the input does not fit the kernels' scratch row;
    /// a global pool does.
    #[test]
    fn degenerate_windows_do_not_fit() {
        let g = |kw: usize, sw: usize, dw: usize, pw: usize, ow: usize| Conv2d {
            c: 1,
            h: 4,
            w: 8,
            kh: 1,
            kw,
            sh: 1,
            sw,
            dh: 1,
            dw,
            ph: 0,
            pw,
            oh: 4,
            ow,
        };
        assert!(fits(&g(3, 2, 1, 1, 4)));
        assert!(fits(&g(8, 1, 1, 0, 1)));
        assert!(!fits(&g(3, 1, 1 << 30, 1 << 30, 8)));
        assert!(!fits(&g(1, 1 << 40, 1, 0, 1)));
        assert!(!fits(&g(3, 1, usize::MAX / 2, 0, 1)));
    }

    isa_tests!(pooling, pool_matches);
    isa_tests!(global_pooling, global_pool);
}
