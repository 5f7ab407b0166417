//! Vector math written once over [`Vf`] lanes (`f32`, AVX2's `Y8`, AVX-512's `Z16`):
//! branch-free selects, so every lane follows the same instructions.
//!
//! Coefficients come from `scripts/fit_vmath.py` (weighted least squares toward minimax).
//! Error bounds, measured against f64 by this module's tests over dense sweeps for every
//! lane type the CPU has (fused and unfused multiply-add):
//! - `exp`: 1.5 ulp; 0 below -87.336 (where the result would be subnormal, < 1.2e-38), inf
//!   above 88.722, NaN for NaN.
//! - `erf`: 7 ulp on |x| >= 1e-3 (the most near ±1), 4e-7 absolute everywhere; ±1
//!   beyond ±4.
//! - `tanh`: 6 ulp on |x| >= 1e-3 (the most near ±1), 4e-7 absolute everywhere; ±1
//!   beyond ±9.
//! - `sigmoid`: 3 ulp where the result is >= 1e-30; 1e-37 absolute below.
//! - `log`: 2 ulp for positive normal and subnormal x; -inf at 0, NaN below 0 and for NaN.
//! - `gelu`, `gelu_tanh`, `silu`, `hard_swish`: 1e-6 relative (plus 1e-6 absolute) of
//!   their formulas in f64.
//!
//! # Safety
//! Every function is `unsafe` only because `V`'s methods are: call them for a lane type
//! inside code compiled for its ISA, on a CPU that has it (`f32` is always fine).

// The coefficients keep the digits the fit printed.
#![allow(clippy::excessive_precision, clippy::missing_safety_doc)]

use crate::simd::Vf;

/// Horner's rule over coefficients in ascending order.
#[inline(always)]
unsafe fn horner<V: Vf, const N: usize>(x: V, c: &[f32; N]) -> V {
    let mut p = V::splat(c[N - 1]);
    for i in (0..N - 1).rev() {
        p = p.fma(x, V::splat(c[i]));
    }
    p
}

/// `x` clamped to `[lo, hi]`, NaN kept.
#[inline(always)]
pub unsafe fn clamp<V: Vf>(x: V, lo: f32, hi: f32) -> V {
    V::splat(hi).min_or(V::splat(lo).max_or(x))
}

/// 1.5 * 2^23: adding it rounds a float of magnitude < 2^22 to an integer in the low bits.
const MAGIC: f32 = 12_582_912.0;

const EXP_C: [f32; 7] = [
    1.0,
    1.000_000_036_3,
    0.499_999_920_79,
    0.166_664_201_71,
    0.041_668_225_855,
    0.008_374_815_714_9,
    0.001_383_683_001_8,
];

const ERF_P: [f32; 7] = [
    1.128_379_169_4,
    0.185_203_411_73,
    0.054_316_904_769,
    0.003_849_615_641_1,
    3.796_076_477_3e-4,
    4.684_738_757_6e-6,
    -1.320_203_995_2e-8,
];

const ERF_Q: [f32; 6] = [
    1.0,
    0.497_465_663_9,
    0.113_958_466_69,
    0.015_462_092_881,
    0.001_307_569_150_8,
    6.311_021_897_9e-5,
];

const TANH_P: [f32; 5] = [
    0.999_999_979_55,
    0.133_810_343_21,
    0.003_495_598_145_1,
    2.060_923_633_2e-5,
    1.335_485_468_3e-8,
];

const TANH_Q: [f32; 5] = [
    1.0,
    0.467_143_499_38,
    0.025_877_021_045,
    3.285_650_729_4e-4,
    7.776_641_657_7e-7,
];

const LOG_C: [f32; 10] = [
    1.0,
    -0.499_999_882_9,
    0.333_333_260_39,
    -0.250_015_865_82,
    0.200_019_661_37,
    -0.166_090_103_01,
    0.141_818_755_06,
    -0.132_435_208_7,
    0.129_044_410_82,
    -0.076_207_147_851,
];

/// e^x.
#[inline(always)]
pub unsafe fn exp<V: Vf>(x: V) -> V {
    const HI: f32 = 88.722_84;
    const LO: f32 = -87.336_55;
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let xc = clamp(x, LO, HI);
    let m = V::splat(MAGIC);
    let n = xc.fma(V::splat(LOG2E), m).sub(m);
    let r = n.fma(V::splat(-LN2_HI), xc);
    let r = n.fma(V::splat(-LN2_LO), r);
    let p = horner(r, &EXP_C);
    // 2^n from the exponent bits; n = 128 (just below the overflow) is 2^127 * 2.
    let big = n.gt(V::splat(127.0));
    let nc = V::select(big, V::splat(127.0), n);
    let ni = V::isub(nc.add(m).bits(), V::isplat(MAGIC.to_bits() as i32));
    let scale = V::from_bits(V::ishl23(V::iadd(ni, V::isplat(127))));
    let y = p
        .mul(scale)
        .mul(V::select(big, V::splat(2.0), V::splat(1.0)));
    V::select(
        x.gt(V::splat(HI)),
        V::splat(f32::INFINITY),
        V::select(x.lt(V::splat(LO)), V::splat(0.0), y),
    )
}

/// Lowest input whose e^x is a normal float (2^-126 after the reduction).
const EXP_LO: f32 = -87.336_55;

/// e^x for `xc` already in [EXP_LO, 88]: the reduction and the polynomial of [`exp`]
/// without its special cases (2^n, n in [-126, 127], is built from exponent bits).
#[inline(always)]
unsafe fn exp_core<V: Vf>(xc: V) -> V {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let m = V::splat(MAGIC);
    let t = xc.fma(V::splat(LOG2E), m);
    let n = t.sub(m);
    let r = n.fma(V::splat(-LN2_HI), xc);
    let r = n.fma(V::splat(-LN2_LO), r);
    horner(r, &EXP_C).mul_pow2(n, t)
}

/// e^x for x <= 0, as softmax needs it once the row's maximum is subtracted: [`exp`]
/// without the overflow handling (below the underflow it gives 0; NaN stays NaN). The
/// same polynomial, so the same error on that range.
#[inline(always)]
pub unsafe fn exp_nonpos<V: Vf>(x: V) -> V {
    let lo = V::splat(EXP_LO);
    let under = x.lt(lo);
    V::select(under, V::splat(0.0), exp_core(lo.max_or(x)))
}

/// e^x with x clamped to [EXP_LO, 88] first: finite for every input (NaN kept), for
/// functions that saturate there anyway (sigmoid, SiLU), with [`exp`]'s error inside.
#[inline(always)]
unsafe fn exp_clamped<V: Vf>(x: V) -> V {
    exp_core(clamp(x, EXP_LO, 88.0))
}

/// erf x, as x P(x^2) / Q(x^2) on [-4, 4].
#[inline(always)]
pub unsafe fn erf<V: Vf>(x: V) -> V {
    let xc = clamp(x, -4.0, 4.0);
    let t = xc.mul(xc);
    // Q(t) >= 1 on the range: the reciprocal estimate needs no special cases.
    clamp(
        xc.mul(horner(t, &ERF_P)).div_fast(horner(t, &ERF_Q)),
        -1.0,
        1.0,
    )
}

/// tanh x, as x P(x^2) / Q(x^2) on [-9, 9].
#[inline(always)]
pub unsafe fn tanh<V: Vf>(x: V) -> V {
    let xc = clamp(x, -9.0, 9.0);
    let t = xc.mul(xc);
    // Q(t) >= 1 on the range: the reciprocal estimate needs no special cases.
    clamp(
        xc.mul(horner(t, &TANH_P)).div_fast(horner(t, &TANH_Q)),
        -1.0,
        1.0,
    )
}

/// 1 / (1 + e^-x).
#[inline(always)]
pub unsafe fn sigmoid<V: Vf>(x: V) -> V {
    // e^-x saturates harmlessly: past |x| = 87 the result is 1, or below 1e-38.
    let one = V::splat(1.0);
    one.div(one.add(exp_clamped(x.mul(V::splat(-1.0)))))
}

/// ln x.
#[inline(always)]
pub unsafe fn log<V: Vf>(x: V) -> V {
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Subnormals are scaled into the normal range first.
    let sub = x.lt(V::splat(f32::MIN_POSITIVE));
    let xs = V::select(sub, x.mul(V::splat(8_388_608.0)), x);
    let bits = xs.bits();
    let e = V::isub(V::iand(V::isra23(bits), V::isplat(0xff)), V::isplat(127));
    let mut ef = V::itof(e).sub(V::select(sub, V::splat(23.0), V::splat(0.0)));
    let mut m = V::from_bits(V::ior(
        V::iand(bits, V::isplat(0x007f_ffff)),
        V::isplat(0x3f80_0000),
    ));
    // m in [1, 2); move it to [sqrt(1/2), sqrt(2)).
    let hi = m.gt(V::splat(std::f32::consts::SQRT_2));
    m = V::select(hi, m.mul(V::splat(0.5)), m);
    ef = ef.add(V::select(hi, V::splat(1.0), V::splat(0.0)));
    let f = m.sub(V::splat(1.0));
    let y = ef.fma(
        V::splat(LN2_HI),
        f.fma(horner(f, &LOG_C), ef.mul(V::splat(LN2_LO))),
    );
    let y = V::select(x.eq(V::splat(f32::INFINITY)), x, y);
    let y = V::select(x.lt(V::splat(0.0)), V::splat(f32::NAN), y);
    let y = V::select(x.nan(), x, y);
    V::select(x.eq(V::splat(0.0)), V::splat(f32::NEG_INFINITY), y)
}

/// x / 2 * (1 + erf(x / sqrt 2)).
#[inline(always)]
pub unsafe fn gelu<V: Vf>(x: V) -> V {
    let h = x.mul(V::splat(0.5));
    h.fma(erf(x.mul(V::splat(std::f32::consts::FRAC_1_SQRT_2))), h)
}

/// x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))).
#[inline(always)]
pub unsafe fn gelu_tanh<V: Vf>(x: V) -> V {
    let inner = V::splat(0.797_884_6).mul(V::splat(0.044_715).mul(x).mul(x).fma(x, x));
    let h = x.mul(V::splat(0.5));
    h.fma(tanh(inner), h)
}

/// x / (1 + e^-x).
#[inline(always)]
pub unsafe fn silu<V: Vf>(x: V) -> V {
    x.mul(sigmoid(x))
}

/// x * clamp(x / 6 + 1/2, 0, 1).
#[inline(always)]
pub unsafe fn hard_swish<V: Vf>(x: V) -> V {
    x.mul(clamp(x.fma(V::splat(1.0 / 6.0), V::splat(0.5)), 0.0, 1.0))
}

/// max(x, 0), NaN kept.
#[inline(always)]
pub unsafe fn relu<V: Vf>(x: V) -> V {
    let z = V::splat(0.0);
    V::select(x.lt(z), z, x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place between f32 `a` and the f64 `want`.
    fn ulps(a: f32, want: f64) -> f64 {
        let w = want as f32;
        if a == w || (a.is_nan() && w.is_nan()) {
            return 0.0;
        }
        let ulp = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()) as f64;
        (a as f64 - want).abs() / ulp
    }

    fn sweep(lo: f32, hi: f32, n: usize) -> Vec<f32> {
        (0..=n)
            .map(move |i| lo + (hi - lo) * i as f32 / n as f32)
            .collect()
    }

    /// The functions under test, for one lane type.
    type Fns<V> = [unsafe fn(V) -> V; 9];
    fn fns<V: Vf>() -> Fns<V> {
        [
            exp, erf, tanh, sigmoid, log, gelu, gelu_tanh, silu, hard_swish,
        ]
    }

    /// Applies function `which` to `xs`, `V::LANES` at a time.
    fn apply<V: Vf>(which: usize, xs: &[f32]) -> Vec<f32> {
        let f = fns::<V>()[which];
        let mut out = vec![0f32; xs.len()];
        let n = V::LANES;
        for (c, o) in xs.chunks(n).zip(out.chunks_mut(n)) {
            // SAFETY: callers pass only lane types this CPU supports.
            unsafe {
                if c.len() == n {
                    f(V::load(c.as_ptr())).store(o.as_mut_ptr());
                } else {
                    f(V::load_part(c.as_ptr(), c.len())).store_part(o.as_mut_ptr(), c.len());
                }
            }
        }
        out
    }

    fn check<V: Vf>() {
        let mut worst = [0f64; 5];
        let mut abs = [0f64; 2];
        let xs = sweep(-87.3, 88.7, 400_000);
        for (&x, y) in xs.iter().zip(apply::<V>(0, &xs)) {
            worst[0] = worst[0].max(ulps(y, (x as f64).exp()));
        }
        let xs = sweep(-5.0, 5.0, 400_000);
        for (&x, y) in xs.iter().zip(apply::<V>(1, &xs)) {
            let want = erf_f64(x as f64);
            if x.abs() >= 1e-3 {
                worst[1] = worst[1].max(ulps(y, want));
            }
            abs[0] = abs[0].max((y as f64 - want).abs());
        }
        let xs = sweep(-10.0, 10.0, 400_000);
        for ((&x, t), s) in xs.iter().zip(apply::<V>(2, &xs)).zip(apply::<V>(3, &xs)) {
            let want = (x as f64).tanh();
            if x.abs() >= 1e-3 {
                worst[2] = worst[2].max(ulps(t, want));
            }
            abs[1] = abs[1].max((t as f64 - want).abs());
            worst[3] = worst[3].max(ulps(s, 1.0 / (1.0 + (-x as f64).exp())));
        }
        let xs: Vec<f32> = (0..400_000)
            .map(|i| f32::from_bits(1 + i * 5_345))
            .collect();
        for (&x, y) in xs.iter().zip(apply::<V>(4, &xs)) {
            worst[4] = worst[4].max(ulps(y, (x as f64).ln()));
        }
        assert!(abs[0] < 4e-7 && abs[1] < 4e-7, "absolute error {abs:?}");
        let bound = [1.5, 7.0, 6.0, 3.0, 2.0];
        let names = ["exp", "erf", "tanh", "sigmoid", "log"];
        for i in 0..5 {
            assert!(
                worst[i] <= bound[i],
                "{} ({} lanes): {} ulp",
                names[i],
                V::LANES,
                worst[i]
            );
        }
        composites::<V>();
        specials::<V>();
        nonpos::<V>();
    }

    /// exp_nonpos agrees with exp on [-100, 0] within exp's bound, and keeps its specials.
    fn nonpos<V: Vf>() {
        let mut xs = sweep(-100.0, 0.0, 400_000);
        xs.extend([f32::NEG_INFINITY, -0.0, f32::NAN, -87.34, -87.33]);
        let mut ys = vec![0f32; xs.len()];
        for (c, o) in xs.chunks(V::LANES).zip(ys.chunks_mut(V::LANES)) {
            // SAFETY: callers pass only lane types this CPU supports.
            unsafe {
                if c.len() == V::LANES {
                    exp_nonpos(V::load(c.as_ptr())).store(o.as_mut_ptr());
                } else {
                    exp_nonpos(V::load_part(c.as_ptr(), c.len()))
                        .store_part(o.as_mut_ptr(), c.len());
                }
            }
        }
        for (&x, &y) in xs.iter().zip(&ys) {
            if x.is_nan() {
                assert!(y.is_nan());
            } else if x < -87.336_55 {
                assert_eq!(y, 0.0, "exp_nonpos({x})");
            } else {
                assert!(ulps(y, (x as f64).exp()) <= 1.5, "exp_nonpos({x}) = {y}");
            }
        }
    }

    fn composites<V: Vf>() {
        let xs = sweep(-12.0, 12.0, 100_000);
        let outs: Vec<Vec<f32>> = (5..9).map(|w| apply::<V>(w, &xs)).collect();
        for (i, &x) in xs.iter().enumerate() {
            let xd = x as f64;
            let want = [
                0.5 * xd * (1.0 + erf_f64(xd / std::f64::consts::SQRT_2)),
                0.5 * xd
                    * (1.0 + (0.797_884_560_802_865_4 * (xd + 0.044715 * xd * xd * xd)).tanh()),
                xd / (1.0 + (-xd).exp()),
                xd * (xd / 6.0 + 0.5).clamp(0.0, 1.0),
            ];
            for (o, w) in outs.iter().zip(want) {
                let got = o[i] as f64;
                assert!(
                    (got - w).abs() <= 1e-6 * (1.0 + w.abs()),
                    "{x}: {got} vs {w}"
                );
            }
        }
    }

    fn specials<V: Vf>() {
        let one = |w: usize, x: f32| apply::<V>(w, &[x])[0];
        assert_eq!(one(0, f32::NEG_INFINITY), 0.0);
        assert_eq!(one(0, f32::INFINITY), f32::INFINITY);
        assert_eq!(one(0, 89.0), f32::INFINITY);
        assert!(one(0, 88.72).is_finite());
        assert!(one(0, f32::NAN).is_nan());
        assert_eq!(one(0, 0.0), 1.0);
        assert!(one(1, 10.0) >= 0.999_999_9 && one(1, 10.0) <= 1.0);
        assert!(one(1, f32::NAN).is_nan());
        assert!(one(2, -20.0) <= -0.999_999_9 && one(2, -20.0) >= -1.0);
        assert!(one(2, f32::NAN).is_nan());
        // Sigmoid saturates: at most 1e-38 far left (e^-x is clamped at e^88), exactly 1 far right.
        assert!((0.0..=1e-38).contains(&one(3, -200.0)));
        assert_eq!(one(3, 200.0), 1.0);
        assert_eq!(one(4, 0.0), f32::NEG_INFINITY);
        assert!(one(4, -1.0).is_nan());
        assert!(one(4, f32::NAN).is_nan());
        assert_eq!(one(4, 1.0), 0.0);
        assert_eq!(one(4, f32::INFINITY), f32::INFINITY);
    }

    /// erf in f64 by its series / continued fraction (for testing only).
    fn erf_f64(x: f64) -> f64 {
        if x.abs() < 3.0 {
            let mut sum = 0.0f64;
            let mut term = x;
            let mut n = 0.0;
            while term.abs() > 1e-20 * sum.abs().max(1e-300) || n < 3.0 {
                sum += term / (2.0 * n + 1.0);
                n += 1.0;
                term *= -x * x / n;
                if n > 200.0 {
                    break;
                }
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            let a = x.abs();
            let mut f = 0.0;
            for k in (1..60).rev() {
                f = (k as f64 / 2.0) / (a + f);
            }
            let erfc = (-a * a).exp() / std::f64::consts::PI.sqrt() / (a + f);
            (1.0 - erfc).copysign(x)
        }
    }

    #[test]
    fn error_bounds_hold_for_every_lane_type() {
        check::<f32>();
        #[cfg(target_arch = "x86_64")]
        {
            if crate::Isa::Avx2.is_supported() {
                check::<crate::simd::Y8>();
            } else {
                eprintln!("note: no AVX2 here; the 8-lane math was not tested");
            }
            if crate::Isa::Avx512.is_supported() {
                check::<crate::simd::Z16>();
            } else {
                eprintln!("note: no AVX-512 here; the 16-lane math was not tested");
            }
        }
    }
}
