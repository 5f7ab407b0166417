//! Vectorizable f32 math: branch-free scalar functions that the compiler turns into SIMD
//! when inlined into a loop compiled for an ISA (see `program`). `F` says whether the ISA
//! has fused multiply-add (without it, `mul_add` would be a slow library call).
//!
//! Coefficients come from `scripts/fit_vmath.py` (weighted least squares toward minimax).
//! Error bounds, measured against f64 by this module's tests over dense sweeps and
//! documented per function, hold for every ISA:
//! - `exp`: 1.5 ulp; 0 below -87.336 (where the result would be subnormal, < 1.2e-38), inf
//!   above 88.722, NaN for NaN.
//! - `erf`: 7 ulp on |x| >= 1e-3 (the most near ±1), 4e-7 absolute everywhere; ±1
//!   beyond ±4.
//! - `tanh`: 6 ulp on |x| >= 1e-3 (the most near ±1), 4e-7 absolute everywhere; ±1
//!   beyond ±9.
//! - `sigmoid`: 3 ulp where the result is >= 1e-30; 1e-37 absolute below.
//! - `log`: 2 ulp for positive normal and subnormal x; -inf at 0, NaN below 0 and for NaN.

// The coefficients keep the digits the fit printed; the clamps are written as selects that
// let NaN through and vectorize.
#![allow(clippy::excessive_precision, clippy::manual_clamp)]

/// `a * b + c`, fused when the ISA has FMA.
#[inline(always)]
pub fn madd<const F: bool>(a: f32, b: f32, c: f32) -> f32 {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Horner's rule over coefficients in ascending order.
#[inline(always)]
fn horner<const F: bool, const N: usize>(x: f32, c: &[f32; N]) -> f32 {
    let mut p = c[N - 1];
    for i in (0..N - 1).rev() {
        p = madd::<F>(p, x, c[i]);
    }
    p
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

/// e^x.
#[inline(always)]
pub fn exp<const F: bool>(x: f32) -> f32 {
    const HI: f32 = 88.722_84;
    const LO: f32 = -87.336_55;
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let xc = if x > HI {
        HI
    } else if x < LO {
        LO
    } else {
        x
    };
    let t = madd::<F>(xc, LOG2E, MAGIC);
    let n = t - MAGIC;
    let r = madd::<F>(n, -LN2_HI, xc);
    let r = madd::<F>(n, -LN2_LO, r);
    let p = horner::<F, 7>(r, &EXP_C);
    // 2^n from the exponent bits; n = 128 (just below the overflow) is split as 2^127 * 2.
    let ni = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let big = (ni > 127) as i32;
    let scale = f32::from_bits(((ni - big + 127) << 23) as u32);
    let y = p * scale * (1 + big) as f32;
    if x > HI {
        f32::INFINITY
    } else if x < LO {
        0.0
    } else {
        y
    }
}

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

/// erf x, as x P(x^2) / Q(x^2) on [-4, 4].
#[inline(always)]
pub fn erf<const F: bool>(x: f32) -> f32 {
    let xc = if x > 4.0 {
        4.0
    } else if x < -4.0 {
        -4.0
    } else {
        x
    };
    let t = xc * xc;
    let y = xc * horner::<F, 7>(t, &ERF_P) / horner::<F, 6>(t, &ERF_Q);
    if y > 1.0 {
        1.0
    } else if y < -1.0 {
        -1.0
    } else {
        y
    }
}

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

/// tanh x, as x P(x^2) / Q(x^2) on [-9, 9].
#[inline(always)]
pub fn tanh<const F: bool>(x: f32) -> f32 {
    let xc = if x > 9.0 {
        9.0
    } else if x < -9.0 {
        -9.0
    } else {
        x
    };
    let t = xc * xc;
    let y = xc * horner::<F, 5>(t, &TANH_P) / horner::<F, 5>(t, &TANH_Q);
    if y > 1.0 {
        1.0
    } else if y < -1.0 {
        -1.0
    } else {
        y
    }
}

/// 1 / (1 + e^-x).
#[inline(always)]
pub fn sigmoid<const F: bool>(x: f32) -> f32 {
    1.0 / (1.0 + exp::<F>(-x))
}

/// x / 2 * (1 + erf(x / sqrt 2)).
#[inline(always)]
pub fn gelu<const F: bool>(x: f32) -> f32 {
    let h = 0.5 * x;
    madd::<F>(h, erf::<F>(x * std::f32::consts::FRAC_1_SQRT_2), h)
}

/// x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))).
#[inline(always)]
pub fn gelu_tanh<const F: bool>(x: f32) -> f32 {
    const K: f32 = 0.797_884_6;
    let inner = K * madd::<F>(0.044_715 * x * x, x, x);
    let h = 0.5 * x;
    madd::<F>(h, tanh::<F>(inner), h)
}

/// x / (1 + e^-x).
#[inline(always)]
pub fn silu<const F: bool>(x: f32) -> f32 {
    x * sigmoid::<F>(x)
}

/// x * clamp(x / 6 + 1/2, 0, 1).
#[inline(always)]
pub fn hard_swish<const F: bool>(x: f32) -> f32 {
    let s = madd::<F>(x, 1.0 / 6.0, 0.5);
    let s = if s < 0.0 {
        0.0
    } else if s > 1.0 {
        1.0
    } else {
        s
    };
    x * s
}

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

/// ln x.
#[inline(always)]
pub fn log<const F: bool>(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Subnormals are scaled into the normal range first.
    let sub = x < f32::MIN_POSITIVE;
    let xs = if sub { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits() as i32;
    let mut e = ((bits >> 23) & 0xff) - 127 - if sub { 23 } else { 0 };
    let mut m = f32::from_bits(((bits & 0x007f_ffff) | 0x3f80_0000) as u32);
    // m in [1, 2); move it to [sqrt(1/2), sqrt(2)).
    let hi = m > std::f32::consts::SQRT_2;
    m = if hi { m * 0.5 } else { m };
    e += hi as i32;
    let f = m - 1.0;
    let ef = e as f32;
    let y = madd::<F>(
        ef,
        LN2_HI,
        madd::<F>(f, horner::<F, 10>(f, &LOG_C), ef * LN2_LO),
    );
    if x == 0.0 {
        f32::NEG_INFINITY
    } else if x < 0.0 || x.is_nan() {
        f32::NAN
    } else if x == f32::INFINITY {
        f32::INFINITY
    } else {
        y
    }
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

    fn sweep(lo: f32, hi: f32, n: usize) -> impl Iterator<Item = f32> {
        (0..=n).map(move |i| lo + (hi - lo) * i as f32 / n as f32)
    }

    fn check<const F: bool>() {
        let mut worst = [0f64; 5];
        let mut abs = [0f64; 2];
        for x in sweep(-87.3, 88.7, 400_000) {
            worst[0] = worst[0].max(ulps(exp::<F>(x), (x as f64).exp()));
        }
        for x in sweep(-5.0, 5.0, 400_000) {
            let want = erf_f64(x as f64);
            if x.abs() >= 1e-3 {
                worst[1] = worst[1].max(ulps(erf::<F>(x), want));
            }
            abs[0] = abs[0].max((erf::<F>(x) as f64 - want).abs());
        }
        for x in sweep(-10.0, 10.0, 400_000) {
            let want = (x as f64).tanh();
            if x.abs() >= 1e-3 {
                worst[2] = worst[2].max(ulps(tanh::<F>(x), want));
            }
            abs[1] = abs[1].max((tanh::<F>(x) as f64 - want).abs());
            let s = 1.0 / (1.0 + (-x as f64).exp());
            worst[3] = worst[3].max(ulps(sigmoid::<F>(x), s));
        }
        for i in 0..400_000 {
            let x = f32::from_bits(1 + i * 5_345);
            worst[4] = worst[4].max(ulps(log::<F>(x), (x as f64).ln()));
        }
        eprintln!("fma {F}: ulp {worst:?}, abs erf/tanh {abs:?}");
        assert!(abs[0] < 4e-7 && abs[1] < 4e-7, "absolute error {abs:?}");
        let bound = [1.5, 7.0, 6.0, 3.0, 2.0];
        let names = ["exp", "erf", "tanh", "sigmoid", "log"];
        for i in 0..5 {
            assert!(
                worst[i] <= bound[i],
                "{} (fma {F}): {} ulp",
                names[i],
                worst[i]
            );
        }
    }

    /// erf in f64 by its series / continued fraction (for testing only).
    fn erf_f64(x: f64) -> f64 {
        if x.abs() < 3.0 {
            // Maclaurin series, plenty of terms.
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
            // erfc by a continued fraction.
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
    fn error_bounds_hold_with_and_without_fma() {
        check::<true>();
        check::<false>();
    }

    #[test]
    fn composites_match_their_formulas() {
        for x in sweep(-12.0, 12.0, 100_000) {
            let xd = x as f64;
            let gelu_want = 0.5 * xd * (1.0 + erf_f64(xd / std::f64::consts::SQRT_2));
            let t = (0.797_884_560_802_865_4 * (xd + 0.044715 * xd * xd * xd)).tanh();
            let gelu_tanh_want = 0.5 * xd * (1.0 + t);
            let silu_want = xd / (1.0 + (-xd).exp());
            let hs_want = xd * (xd / 6.0 + 0.5).clamp(0.0, 1.0);
            for (got, want) in [
                (gelu::<true>(x), gelu_want),
                (gelu::<false>(x), gelu_want),
                (gelu_tanh::<true>(x), gelu_tanh_want),
                (silu::<true>(x), silu_want),
                (silu::<false>(x), silu_want),
                (hard_swish::<true>(x), hs_want),
            ] {
                assert!(
                    (got as f64 - want).abs() <= 1e-6 * (1.0 + want.abs()),
                    "{x}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn special_values() {
        assert_eq!(exp::<false>(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp::<false>(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp::<false>(89.0), f32::INFINITY);
        assert!(exp::<false>(88.72).is_finite());
        assert!(exp::<false>(f32::NAN).is_nan());
        assert_eq!(exp::<false>(0.0), 1.0);
        assert!(erf::<false>(10.0) >= 0.999_999_9 && erf::<false>(10.0) <= 1.0);
        assert!(erf::<false>(-10.0) <= -0.999_999_9 && erf::<false>(-10.0) >= -1.0);
        assert!(erf::<false>(f32::NAN).is_nan());
        assert!(tanh::<false>(-20.0) <= -0.999_999_9 && tanh::<false>(-20.0) >= -1.0);
        assert!(tanh::<false>(f32::NAN).is_nan());
        assert_eq!(sigmoid::<false>(-200.0), 0.0);
        assert_eq!(sigmoid::<false>(200.0), 1.0);
        assert_eq!(log::<false>(0.0), f32::NEG_INFINITY);
        assert!(log::<false>(-1.0).is_nan());
        assert_eq!(log::<false>(1.0), 0.0);
        assert_eq!(log::<false>(f32::INFINITY), f32::INFINITY);
    }
}
