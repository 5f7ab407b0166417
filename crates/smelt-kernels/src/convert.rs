//! f32 to 8-bit conversions with Rust's `as` semantics (truncation toward zero, saturation
//! at the type's ends, NaN to 0), optionally rounding half to even first: the stores of
//! quantized values (a fused `QuantizeLinear`'s result is already integral and in range,
//! but the store cannot know it). Compiled without AVX2, LLVM converts these one element
//! at a time (a fused QuantizeLinear spent half its time in the store); the AVX2 form
//! converts 32 per step.

/// Writes `src[j] as u8` (or `as i8` with `signed`), each first rounded half to even when
/// `round`, to `dst[j]`.
///
/// # Safety
/// `dst` has room for `src.len()` bytes.
pub unsafe fn f32_to_bytes(src: &[f32], dst: *mut u8, signed: bool, round: bool) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return x86::f32_to_bytes_avx2(src, dst, signed, round);
    }
    f32_to_bytes_portable(src, dst, signed, round)
}

/// [`f32_to_bytes`] one element at a time.
///
/// # Safety
/// As for [`f32_to_bytes`].
pub unsafe fn f32_to_bytes_portable(src: &[f32], dst: *mut u8, signed: bool, round: bool) {
    for (j, &x) in src.iter().enumerate() {
        let x = if round { x.round_ties_even() } else { x };
        *dst.add(j) = if signed { x as i8 as u8 } else { x as u8 };
    }
}

#[cfg(target_arch = "x86_64")]
pub mod x86 {
    //! The AVX2 conversion.

    use std::arch::x86_64::*;

    /// Eight values rounded (when asked), NaN zeroed, clamped and truncated to i32.
    #[inline(always)]
    unsafe fn ints(p: *const f32, lo: __m256, hi: __m256, round: bool) -> __m256i {
        let mut x = _mm256_loadu_ps(p);
        if round {
            x = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
        }
        // NaN compares unordered with itself: the mask clears it to +0.
        x = _mm256_and_ps(x, _mm256_cmp_ps::<_CMP_ORD_Q>(x, x));
        _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(x, lo), hi))
    }

    /// [`super::f32_to_bytes`] 32 values a step, the rest one at a time.
    ///
    /// # Safety
    /// As for [`super::f32_to_bytes`], on a CPU with AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn f32_to_bytes_avx2(src: &[f32], dst: *mut u8, signed: bool, round: bool) {
        let (lo, hi) = if signed {
            (_mm256_set1_ps(-128.0), _mm256_set1_ps(127.0))
        } else {
            (_mm256_set1_ps(0.0), _mm256_set1_ps(255.0))
        };
        // The packs interleave 128-bit lanes; this restores the order of the dwords.
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let n = src.len();
        let p = src.as_ptr();
        let mut j = 0;
        while j + 32 <= n {
            let v = [0, 8, 16, 24].map(|o| ints(p.add(j + o), lo, hi, round));
            // Values are in range, so the saturating packs are exact.
            let w01 = _mm256_packs_epi32(v[0], v[1]);
            let w23 = _mm256_packs_epi32(v[2], v[3]);
            let b = if signed {
                _mm256_packs_epi16(w01, w23)
            } else {
                _mm256_packus_epi16(w01, w23)
            };
            let b = _mm256_permutevar8x32_epi32(b, order);
            _mm256_storeu_si256(dst.add(j) as *mut __m256i, b);
            j += 32;
        }
        super::f32_to_bytes_portable(&src[j..], dst.add(j), signed, round);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_matches_rust_casts() {
        let mut src: Vec<f32> = (0..301).map(|i| (i as f32 - 150.0) * 1.37).collect();
        src.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.5,
            0.5,
            1.5,
            2.5,
            -1.5,
            254.5,
            255.5,
            -128.5,
            127.5,
            1e10,
            -1e10,
            0.999,
            -0.999,
        ]);
        for signed in [false, true] {
            for round in [false, true] {
                let want: Vec<u8> = src
                    .iter()
                    .map(|&x| {
                        let x = if round { x.round_ties_even() } else { x };
                        if signed {
                            x as i8 as u8
                        } else {
                            x as u8
                        }
                    })
                    .collect();
                let mut got = vec![0u8; src.len()];
                unsafe { f32_to_bytes_portable(&src, got.as_mut_ptr(), signed, round) };
                assert_eq!(got, want, "portable signed={signed} round={round}");
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    // Every offset, so each value passes through every lane.
                    for start in 0..40 {
                        let mut got = vec![0u8; src.len() - start];
                        unsafe {
                            x86::f32_to_bytes_avx2(&src[start..], got.as_mut_ptr(), signed, round)
                        };
                        assert_eq!(got, want[start..], "avx2 signed={signed} round={round}");
                    }
                }
            }
        }
    }
}
