//! Test helpers: one test per ISA for every kernel test, and reproducible random data.

use crate::{Isa, Kernels};

/// Defines a module `$name` with one test per ISA (`portable`, `avx2`, `avx512`), each
/// running `$body` (a `fn(&Kernels)`) on that ISA's table. On a CPU without the ISA the
/// test passes after printing that it could not run.
#[macro_export]
#[doc(hidden)]
macro_rules! isa_tests {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn portable() {
                $crate::testing::run_on($crate::Isa::Portable, $body);
            }
            #[test]
            fn avx2() {
                $crate::testing::run_on($crate::Isa::Avx2, $body);
            }
            #[test]
            fn avx512() {
                $crate::testing::run_on($crate::Isa::Avx512, $body);
            }
        }
    };
}

/// Runs `f` on `isa`'s table, or notes that this CPU cannot.
pub fn run_on(isa: Isa, f: impl Fn(&Kernels)) {
    match Kernels::for_isa(isa) {
        Some(k) => f(k),
        None => eprintln!("note: this CPU has no {isa}; its kernels were not run"),
    }
}

/// A seeded stream of small random choices (a 64-bit LCG), for random test programs.
pub struct Picker(pub u64);

impl Picker {
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

/// `n` floats in [-1, 1) from a splitmix64 stream.
pub fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x1234_5678;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

/// The median of 40 timings of `f`, in milliseconds (the `--ignored` timing tests).
pub fn median_ms(f: &mut dyn FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..40)
        .map(|_| {
            let t0 = std::time::Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[20]
}

/// The least of 200 timings of `f`, in milliseconds: steadier than the median on a host
/// whose speed drifts, for kernels of a few milliseconds (the `--ignored` timing tests).
pub fn min_ms(f: &mut dyn FnMut()) -> f64 {
    (0..200)
        .map(|_| {
            let t0 = std::time::Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::MAX, f64::min)
}

/// A plain convolution of `batches` contiguous NCHW images `x` with `co x taps` weights
/// `wt` (zero outside the input), summed in f64: element `((b * co + o) * oh + y) * ow + x`.
pub fn conv_plain(
    g: &crate::conv::Conv2d,
    batches: usize,
    co: usize,
    x: &[f32],
    wt: &[f32],
) -> Vec<f64> {
    let (h, w) = (g.h as isize, g.w as isize);
    let mut out = vec![0f64; batches * co * g.oh * g.ow];
    for b in 0..batches {
        for o in 0..co {
            for y in 0..g.oh {
                for xo in 0..g.ow {
                    let mut sum = 0f64;
                    for ci in 0..g.c {
                        for i in 0..g.kh {
                            for j in 0..g.kw {
                                let iy = (y * g.sh + i * g.dh) as isize - g.ph as isize;
                                let ix = (xo * g.sw + j * g.dw) as isize - g.pw as isize;
                                if iy >= 0 && ix >= 0 && iy < h && ix < w {
                                    let at = (((b * g.c + ci) as isize * h + iy) * w + ix) as usize;
                                    sum += wt[((o * g.c + ci) * g.kh + i) * g.kw + j] as f64
                                        * x[at] as f64;
                                }
                            }
                        }
                    }
                    out[((b * co + o) * g.oh + y) * g.ow + xo] = sum;
                }
            }
        }
    }
    out
}

/// The geometry of a square-kernel convolution over an `h x w` image of `c` channels:
/// kernel `k`, stride `s`, dilation `d` and pad `p` on both axes.
pub fn square_conv(
    c: usize,
    h: usize,
    w: usize,
    k: usize,
    s: usize,
    d: usize,
    p: usize,
) -> crate::conv::Conv2d {
    crate::conv::Conv2d {
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
        oh: (h + 2 * p - d * (k - 1) - 1) / s + 1,
        ow: (w + 2 * p - d * (k - 1) - 1) / s + 1,
    }
}
