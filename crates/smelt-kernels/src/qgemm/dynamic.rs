//! DynamicQuantizeLinear: a float tensor to u8 with the scale and zero point of its own
//! range, `[min(0, lo), max(0, hi)]` over 255 steps, in two passes (the range, then the
//! quantized bytes). The same f32 operations as the plain oracle's: NaN is left out of the
//! range and quantizes to 0; an all-zero range gets scale 1.

use crate::isa::Isa;
use crate::pool::ThreadPool;
use std::sync::Mutex;

/// Values per task of the threaded form (below two of them it runs on one thread).
const PER_TASK: usize = 1 << 16;

/// [`dynamic_quantize`] spread over up to `threads` threads of `pool`: each task takes the
/// range of one contiguous piece, the ranges combine by the same strict comparisons (so the
/// result does not depend on the split), then each task quantizes its piece.
///
/// # Panics
/// When `y` is shorter than `x`.
pub fn dynamic_quantize_threaded(
    isa: Isa,
    pool: &ThreadPool,
    threads: usize,
    x: &[f32],
    y: Option<&mut [u8]>,
) -> (f32, u8) {
    let tasks = threads.min(x.len() / PER_TASK);
    if tasks < 2 {
        return dynamic_quantize(isa, x, y);
    }
    let piece = x.len().div_ceil(tasks);
    let ranges = Mutex::new(vec![(0f32, 0f32); tasks]);
    pool.run(threads, tasks, &|t| {
        let r = range(
            isa,
            &x[(t * piece).min(x.len())..((t + 1) * piece).min(x.len())],
        );
        ranges.lock().unwrap_or_else(|e| e.into_inner())[t] = r;
    });
    let parts = ranges.into_inner().unwrap_or_else(|e| e.into_inner());
    let (lo, _) = range_scalar(&parts.iter().map(|p| p.0).collect::<Vec<_>>(), 0.0, 0.0);
    let (_, hi) = range_scalar(&parts.iter().map(|p| p.1).collect::<Vec<_>>(), 0.0, 0.0);
    let (scale, zp) = params(lo, hi);
    if let Some(y) = y {
        let y = &mut y[..x.len()];
        let out = super::Shared(y.as_mut_ptr() as *const u8);
        pool.run(threads, tasks, &|t| {
            let (a, b) = ((t * piece).min(x.len()), ((t + 1) * piece).min(x.len()));
            // SAFETY: the tasks' pieces of y are disjoint and inside it.
            let yt =
                unsafe { std::slice::from_raw_parts_mut((out.get() as *mut u8).add(a), b - a) };
            quantize(isa, &x[a..b], scale, zp, yt);
        });
    }
    (scale, zp as u8)
}

/// The scale and zero point (as f32) of the range `[lo, hi]` (which holds 0).
fn params(lo: f32, hi: f32) -> (f32, f32) {
    let scale = if hi == lo {
        1.0f32
    } else {
        (hi - lo) / 255.0f32
    };
    (
        scale,
        (0.0f32 - lo / scale).clamp(0.0, 255.0).round_ties_even(),
    )
}

/// The quantized bytes of `x` on `isa`.
fn quantize(isa: Isa, x: &[f32], scale: f32, zp: f32, y: &mut [u8]) {
    match isa {
        // SAFETY: the table's ISA is one this CPU has; x and y are as long.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { x86::quantize_avx512(x, scale, zp, y) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::quantize_avx2(x, scale, zp, y) },
        _ => quantize_scalar(x, scale, zp, y),
    }
}

/// The quantization of `x`: (scale, zero point), and `y[i]` the quantized `x[i]` when `y`
/// is given (as long as `x`).
///
/// # Panics
/// When `y` is shorter than `x`.
pub fn dynamic_quantize(isa: Isa, x: &[f32], y: Option<&mut [u8]>) -> (f32, u8) {
    let (lo, hi) = range(isa, x);
    let (scale, zp) = params(lo, hi);
    if let Some(y) = y {
        quantize(isa, x, scale, zp, &mut y[..x.len()]);
    }
    (scale, zp as u8)
}

/// `(min(0, lo), max(0, hi))` of the values that are not NaN.
fn range(isa: Isa, x: &[f32]) -> (f32, f32) {
    match isa {
        // SAFETY: the table's ISA is one this CPU has.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { x86::range_avx512(x) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::range_avx2(x) },
        _ => range_scalar(x, 0.0, 0.0),
    }
}

/// The range as the oracle takes it: a value lowers `lo` (raises `hi`) only when strictly
/// below (above), so NaN never does and -0 does not replace 0.
fn range_scalar(x: &[f32], mut lo: f32, mut hi: f32) -> (f32, f32) {
    for &v in x {
        if v < lo {
            lo = v;
        }
        if v > hi {
            hi = v;
        }
    }
    (lo, hi)
}

/// `clamp(round_half_even(v / scale) + zp, 0, 255)`, NaN to 0.
fn quantize_scalar(x: &[f32], scale: f32, zp: f32, y: &mut [u8]) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0) as u8;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// The range in 16 lanes: `min(v, acc)` keeps `acc` for NaN and for -0 against 0, as
    /// the scalar rule does; the lanes are then folded by that rule.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn range_avx512(x: &[f32]) -> (f32, f32) {
        let (mut lo, mut hi) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        let whole = x.len() / 16 * 16;
        for j in (0..whole).step_by(16) {
            let v = _mm512_loadu_ps(x.as_ptr().add(j));
            lo = _mm512_min_ps(v, lo);
            hi = _mm512_max_ps(v, hi);
        }
        let (mut l, mut h) = ([0f32; 16], [0f32; 16]);
        _mm512_storeu_ps(l.as_mut_ptr(), lo);
        _mm512_storeu_ps(h.as_mut_ptr(), hi);
        let (a, _) = super::range_scalar(&l, 0.0, 0.0);
        let (_, b) = super::range_scalar(&h, 0.0, 0.0);
        super::range_scalar(&x[whole..], a, b)
    }

    /// [`range_avx512`] in 8 lanes.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn range_avx2(x: &[f32]) -> (f32, f32) {
        let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let whole = x.len() / 8 * 8;
        for j in (0..whole).step_by(8) {
            let v = _mm256_loadu_ps(x.as_ptr().add(j));
            lo = _mm256_min_ps(v, lo);
            hi = _mm256_max_ps(v, hi);
        }
        let (mut l, mut h) = ([0f32; 8], [0f32; 8]);
        _mm256_storeu_ps(l.as_mut_ptr(), lo);
        _mm256_storeu_ps(h.as_mut_ptr(), hi);
        let (a, _) = super::range_scalar(&l, 0.0, 0.0);
        let (_, b) = super::range_scalar(&h, 0.0, 0.0);
        super::range_scalar(&x[whole..], a, b)
    }

    /// The quantized bytes, 16 at a time: `max(q, 0)` turns NaN into 0 before the
    /// saturating conversion.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn quantize_avx512(x: &[f32], scale: f32, zp: f32, y: &mut [u8]) {
        let (s, z) = (_mm512_set1_ps(scale), _mm512_set1_ps(zp));
        let (zero, top) = (_mm512_setzero_ps(), _mm512_set1_ps(255.0));
        let whole = x.len() / 16 * 16;
        for j in (0..whole).step_by(16) {
            let v = _mm512_div_ps(_mm512_loadu_ps(x.as_ptr().add(j)), s);
            let q = _mm512_add_ps(
                _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v),
                z,
            );
            let q = _mm512_min_ps(_mm512_max_ps(q, zero), top);
            let b = _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(q));
            _mm_storeu_si128(y.as_mut_ptr().add(j) as *mut __m128i, b);
        }
        super::quantize_scalar(&x[whole..], scale, zp, &mut y[whole..]);
    }

    /// [`quantize_avx512`] 8 at a time.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quantize_avx2(x: &[f32], scale: f32, zp: f32, y: &mut [u8]) {
        let (s, z) = (_mm256_set1_ps(scale), _mm256_set1_ps(zp));
        let (zero, top) = (_mm256_setzero_ps(), _mm256_set1_ps(255.0));
        let whole = x.len() / 8 * 8;
        for j in (0..whole).step_by(8) {
            let v = _mm256_div_ps(_mm256_loadu_ps(x.as_ptr().add(j)), s);
            let q = _mm256_add_ps(
                _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v),
                z,
            );
            let q = _mm256_min_ps(_mm256_max_ps(q, zero), top);
            let i = _mm256_cvtps_epi32(q);
            let w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256::<1>(i));
            _mm_storel_epi64(
                y.as_mut_ptr().add(j) as *mut __m128i,
                _mm_packus_epi16(w, w),
            );
        }
        super::quantize_scalar(&x[whole..], scale, zp, &mut y[whole..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oracle's rule, written out.
    fn plain(x: &[f32]) -> (f32, u8, Vec<u8>) {
        let (lo, hi) = range_scalar(x, 0.0, 0.0);
        let scale = if hi == lo { 1.0 } else { (hi - lo) / 255.0 };
        let zp = (0.0f32 - lo / scale).clamp(0.0, 255.0).round_ties_even();
        let y = x
            .iter()
            .map(|&v| ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0) as u8)
            .collect();
        (scale, zp as u8, y)
    }

    #[test]
    fn every_isa_matches_the_plain_rule() {
        let mut cases: Vec<Vec<f32>> = vec![
            vec![],
            vec![0.0; 37],
            vec![-0.0, 0.0, -0.0],
            vec![f32::NAN, 1.0, -2.0, f32::NAN],
            crate::testing::rand_vec(1001, 3),
            crate::testing::rand_vec(64, 4)
                .iter()
                .map(|v| v.abs() + 0.5)
                .collect(),
            crate::testing::rand_vec(77, 5)
                .iter()
                .map(|v| -v.abs() - 0.5)
                .collect(),
        ];
        // Values exactly on rounding ties of their own scale.
        cases.push((0..300).map(|i| i as f32 * 0.5 - 20.0).collect());
        for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
            if !isa.is_supported() {
                continue;
            }
            for x in &cases {
                let (s, z, want) = plain(x);
                let mut y = vec![7u8; x.len()];
                assert_eq!(
                    dynamic_quantize(isa, x, Some(&mut y)),
                    (s, z),
                    "{isa:?} {x:?}"
                );
                assert_eq!(y, want, "{isa:?}");
                assert_eq!(dynamic_quantize(isa, x, None), (s, z));
            }
        }
    }

    #[test]
    fn threads_give_the_one_thread_result() {
        let pool = crate::pool::global();
        let mut x: Vec<f32> = crate::testing::rand_vec(5 * PER_TASK + 77, 8);
        x[3 * PER_TASK + 5] = -1.5;
        x[PER_TASK + 9] = f32::NAN;
        for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
            if !isa.is_supported() {
                continue;
            }
            let mut one = vec![0u8; x.len()];
            let want = dynamic_quantize(isa, &x, Some(&mut one));
            for threads in [2, 3, 8] {
                let mut y = vec![0u8; x.len()];
                let got = dynamic_quantize_threaded(isa, pool, threads, &x, Some(&mut y));
                assert_eq!(got, want, "{isa:?} {threads}");
                assert!(y == one, "{isa:?} {threads}");
            }
        }
    }
}
