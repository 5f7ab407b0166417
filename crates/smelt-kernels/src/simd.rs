//! A small vector abstraction, so each piece of vector math is written once and
//! instantiated per ISA: `f32` (one lane, portable), [`Y8`] (AVX2+FMA, 8 lanes) and [`Z16`]
//! (AVX-512, 16 lanes). Every method is `#[inline(always)]` and `unsafe`: the vector types
//! may only be used inside functions compiled for their ISA (`#[target_feature]`), on CPUs
//! that have it.
//!
//! # Safety
//! Call a vector type's methods only from code compiled for its ISA on a CPU that has it;
//! pointer arguments must cover the lanes read or written.

// One contract for every function here, stated in the module docs.
#![allow(clippy::missing_safety_doc)]

/// f32 lanes with the operations vector math needs.
pub trait Vf: Copy {
    /// A lane mask.
    type M: Copy;
    /// i32 lanes.
    type I: Copy;
    /// Lanes per vector.
    const LANES: usize;
    /// Whether `fma` is fused.
    const FUSED: bool;

    /// Every lane `x`.
    unsafe fn splat(x: f32) -> Self;
    /// `LANES` floats from `p`.
    unsafe fn load(p: *const f32) -> Self;
    /// Stores `LANES` floats at `p`.
    unsafe fn store(self, p: *mut f32);
    /// `n < LANES` floats from `p`, zeros after.
    unsafe fn load_part(p: *const f32, n: usize) -> Self;
    /// Stores the first `n < LANES` lanes at `p`.
    unsafe fn store_part(self, p: *mut f32, n: usize);
    /// Lane `l` from `p + l * stride`.
    unsafe fn gather(p: *const f32, stride: isize) -> Self;
    /// Lane `l` from `p + idx[l]` (`idx` holds at least `LANES` offsets).
    unsafe fn gather_idx(p: *const f32, idx: *const i32) -> Self;
    /// a + b.
    unsafe fn add(self, b: Self) -> Self;
    /// a - b.
    unsafe fn sub(self, b: Self) -> Self;
    /// a * b.
    unsafe fn mul(self, b: Self) -> Self;
    /// a / b.
    unsafe fn div(self, b: Self) -> Self;
    /// a / b to within about 1 ulp, by a reciprocal estimate and a Newton step where the
    /// ISA has one (b finite and nonzero: no special-case handling); the exact quotient
    /// otherwise.
    unsafe fn div_fast(self, b: Self) -> Self;
    /// a * b + c (fused where the ISA has FMA).
    unsafe fn fma(self, b: Self, c: Self) -> Self;
    /// sqrt a.
    unsafe fn sqrt(self) -> Self;
    /// Rounded to the nearest integer, ties to even (`f32::round_ties_even`).
    unsafe fn round_even(self) -> Self;
    /// Rounded down (`f32::floor`).
    unsafe fn floor(self) -> Self;
    /// Rounded up (`f32::ceil`).
    unsafe fn ceil(self) -> Self;
    /// a < b (false for NaN).
    unsafe fn lt(self, b: Self) -> Self::M;
    /// a > b (false for NaN).
    unsafe fn gt(self, b: Self) -> Self::M;
    /// a == b (false for NaN).
    unsafe fn eq(self, b: Self) -> Self::M;
    /// Lanes that are NaN.
    unsafe fn nan(self) -> Self::M;
    /// `a` where `m`, else `b`.
    unsafe fn select(m: Self::M, a: Self, b: Self) -> Self;
    /// `self > x ? self : x` (x86's max): `x` where either is NaN, so with a constant
    /// `self` a NaN `x` is kept.
    unsafe fn max_or(self, x: Self) -> Self;
    /// `self < x ? self : x` (x86's min), likewise.
    unsafe fn min_or(self, x: Self) -> Self;
    /// The lanes' bits.
    unsafe fn bits(self) -> Self::I;
    /// Floats from bits.
    unsafe fn from_bits(i: Self::I) -> Self;
    /// Every lane `x`, as i32.
    unsafe fn isplat(x: i32) -> Self::I;
    /// a + b (wrapping).
    unsafe fn iadd(a: Self::I, b: Self::I) -> Self::I;
    /// a - b (wrapping).
    unsafe fn isub(a: Self::I, b: Self::I) -> Self::I;
    /// a & b.
    unsafe fn iand(a: Self::I, b: Self::I) -> Self::I;
    /// a | b.
    unsafe fn ior(a: Self::I, b: Self::I) -> Self::I;
    /// a << 23.
    unsafe fn ishl23(a: Self::I) -> Self::I;
    /// a >> 23 (arithmetic).
    unsafe fn isra23(a: Self::I) -> Self::I;
    /// Lanes converted to f32.
    unsafe fn itof(a: Self::I) -> Self;
    /// `self * 2^n` for lanes `n` holding integers in [-126, 127], `t` the same integers
    /// plus 1.5 * 2^23 (their bits in the low mantissa): a multiply by a power of two built
    /// from exponent bits, or where the ISA has it one scale instruction (the same bits).
    #[inline(always)]
    unsafe fn mul_pow2(self, n: Self, t: Self) -> Self {
        let _ = n;
        const MAGIC: f32 = 12_582_912.0;
        let ni = Self::isub(t.bits(), Self::isplat(MAGIC.to_bits() as i32));
        self.mul(Self::from_bits(Self::ishl23(Self::iadd(
            ni,
            Self::isplat(127),
        ))))
    }
    /// The sum of the lanes, in a fixed order (a tree over halves).
    unsafe fn hsum(self) -> f32;
    /// The largest lane (lanes must not be NaN).
    unsafe fn hmax(self) -> f32;
    /// `[a, b]` read as `2 * LANES` consecutive floats: (the even-indexed ones, the odd).
    unsafe fn evens_odds(a: Self, b: Self) -> (Self, Self);
}

impl Vf for f32 {
    type M = bool;
    type I = i32;
    const LANES: usize = 1;
    const FUSED: bool = false;
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        x
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        *p
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        *p = self
    }
    #[inline(always)]
    unsafe fn load_part(_: *const f32, _: usize) -> Self {
        0.0
    }
    #[inline(always)]
    unsafe fn store_part(self, _: *mut f32, _: usize) {}
    #[inline(always)]
    unsafe fn gather(p: *const f32, _: isize) -> Self {
        *p
    }
    #[inline(always)]
    unsafe fn gather_idx(p: *const f32, idx: *const i32) -> Self {
        *p.offset(*idx as isize)
    }
    #[inline(always)]
    unsafe fn add(self, b: Self) -> Self {
        self + b
    }
    #[inline(always)]
    unsafe fn sub(self, b: Self) -> Self {
        self - b
    }
    #[inline(always)]
    unsafe fn mul(self, b: Self) -> Self {
        self * b
    }
    #[inline(always)]
    unsafe fn div(self, b: Self) -> Self {
        self / b
    }
    #[inline(always)]
    unsafe fn div_fast(self, b: Self) -> Self {
        self / b
    }
    #[inline(always)]
    unsafe fn fma(self, b: Self, c: Self) -> Self {
        self * b + c
    }
    #[inline(always)]
    unsafe fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    #[inline(always)]
    unsafe fn round_even(self) -> Self {
        f32::round_ties_even(self)
    }
    #[inline(always)]
    unsafe fn floor(self) -> Self {
        f32::floor(self)
    }
    #[inline(always)]
    unsafe fn ceil(self) -> Self {
        f32::ceil(self)
    }
    #[inline(always)]
    unsafe fn lt(self, b: Self) -> bool {
        self < b
    }
    #[inline(always)]
    unsafe fn gt(self, b: Self) -> bool {
        self > b
    }
    #[inline(always)]
    unsafe fn eq(self, b: Self) -> bool {
        self == b
    }
    #[inline(always)]
    unsafe fn nan(self) -> bool {
        self.is_nan()
    }
    #[inline(always)]
    unsafe fn select(m: bool, a: Self, b: Self) -> Self {
        if m {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    unsafe fn max_or(self, x: Self) -> Self {
        if self > x {
            self
        } else {
            x
        }
    }
    #[inline(always)]
    unsafe fn min_or(self, x: Self) -> Self {
        if self < x {
            self
        } else {
            x
        }
    }
    #[inline(always)]
    unsafe fn bits(self) -> i32 {
        self.to_bits() as i32
    }
    #[inline(always)]
    unsafe fn from_bits(i: i32) -> Self {
        f32::from_bits(i as u32)
    }
    #[inline(always)]
    unsafe fn isplat(x: i32) -> i32 {
        x
    }
    #[inline(always)]
    unsafe fn iadd(a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }
    #[inline(always)]
    unsafe fn isub(a: i32, b: i32) -> i32 {
        a.wrapping_sub(b)
    }
    #[inline(always)]
    unsafe fn iand(a: i32, b: i32) -> i32 {
        a & b
    }
    #[inline(always)]
    unsafe fn ior(a: i32, b: i32) -> i32 {
        a | b
    }
    #[inline(always)]
    unsafe fn ishl23(a: i32) -> i32 {
        a.wrapping_shl(23)
    }
    #[inline(always)]
    unsafe fn isra23(a: i32) -> i32 {
        a >> 23
    }
    #[inline(always)]
    unsafe fn itof(a: i32) -> Self {
        a as f32
    }
    #[inline(always)]
    unsafe fn hsum(self) -> f32 {
        self
    }
    #[inline(always)]
    unsafe fn hmax(self) -> f32 {
        self
    }
    #[inline(always)]
    unsafe fn evens_odds(a: Self, b: Self) -> (Self, Self) {
        (a, b)
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{Y8, Z16};

/// Asks for the cache line holding `p` to be loaded for reading (a hint: any address,
/// even one outside every allocation, is allowed; a no-op off x86-64).
#[inline(always)]
pub fn prefetch_read(p: *const f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks for the cache line holding `p` to be brought into L2 (see [`prefetch_read`]): data
/// needed soon, but after what L1 holds now.
#[inline(always)]
pub fn prefetch_l2(p: *const f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        _mm_prefetch::<_MM_HINT_T1>(p as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks for the cache line holding `p` to be loaded for writing (see [`prefetch_read`]).
#[inline(always)]
pub fn prefetch_write(p: *const f32) {
    // `_mm_prefetch::<_MM_HINT_ET0>` compiles to a read prefetch (`prefetcht0`) unless the
    // whole crate is built with the `prfchw` feature, so PREFETCHW is written out: CPUs
    // without it (Intel before Broadwell) run its encoding as a NOP.
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching never faults, whatever the address, and touches no register or
    // flag.
    unsafe {
        std::arch::asm!("prefetchw [{p}]", p = in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Vf;
    use std::arch::x86_64::*;

    /// The mask of the first `n` (at most 8) of eight 32-bit lanes.
    #[inline(always)]
    unsafe fn first_lanes(n: usize) -> __m256i {
        const ONES_THEN_ZEROS: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];
        _mm256_loadu_si256(ONES_THEN_ZEROS.as_ptr().add(8 - n) as *const __m256i)
    }

    /// Eight f32 lanes (AVX2+FMA).
    #[derive(Clone, Copy)]
    pub struct Y8(pub __m256);

    /// Sixteen f32 lanes (AVX-512F).
    #[derive(Clone, Copy)]
    pub struct Z16(pub __m512);

    impl Vf for Y8 {
        type M = __m256;
        type I = __m256i;
        const LANES: usize = 8;
        const FUSED: bool = true;
        #[inline(always)]
        unsafe fn splat(x: f32) -> Self {
            Y8(_mm256_set1_ps(x))
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            Y8(_mm256_loadu_ps(p))
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            _mm256_storeu_ps(p, self.0)
        }
        #[inline(always)]
        unsafe fn load_part(p: *const f32, n: usize) -> Self {
            // Masked lanes are neither read nor faulted on.
            Y8(_mm256_maskload_ps(p, first_lanes(n)))
        }
        #[inline(always)]
        unsafe fn store_part(self, p: *mut f32, n: usize) {
            _mm256_maskstore_ps(p, first_lanes(n), self.0)
        }
        #[inline(always)]
        unsafe fn gather(p: *const f32, stride: isize) -> Self {
            let s = stride as i32;
            let idx = _mm256_setr_epi32(0, s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s, 7 * s);
            Y8(_mm256_i32gather_ps::<4>(p, idx))
        }
        #[inline(always)]
        unsafe fn gather_idx(p: *const f32, idx: *const i32) -> Self {
            Y8(_mm256_i32gather_ps::<4>(
                p,
                _mm256_loadu_si256(idx as *const __m256i),
            ))
        }
        #[inline(always)]
        unsafe fn add(self, b: Self) -> Self {
            Y8(_mm256_add_ps(self.0, b.0))
        }
        #[inline(always)]
        unsafe fn sub(self, b: Self) -> Self {
            Y8(_mm256_sub_ps(self.0, b.0))
        }
        #[inline(always)]
        unsafe fn mul(self, b: Self) -> Self {
            Y8(_mm256_mul_ps(self.0, b.0))
        }
        #[inline(always)]
        unsafe fn div(self, b: Self) -> Self {
            Y8(_mm256_div_ps(self.0, b.0))
        }
        #[inline(always)]
        unsafe fn div_fast(self, b: Self) -> Self {
            // 12-bit estimate, two Newton steps (one leaves ~22 bits).
            let mut r = _mm256_rcp_ps(b.0);
            let two = _mm256_set1_ps(2.0);
            r = _mm256_mul_ps(r, _mm256_fnmadd_ps(b.0, r, two));
            r = _mm256_mul_ps(r, _mm256_fnmadd_ps(b.0, r, two));
            Y8(_mm256_mul_ps(self.0, r))
        }
        #[inline(always)]
        unsafe fn fma(self, b: Self, c: Self) -> Self {
            Y8(_mm256_fmadd_ps(self.0, b.0, c.0))
        }
        #[inline(always)]
        unsafe fn sqrt(self) -> Self {
            Y8(_mm256_sqrt_ps(self.0))
        }
        #[inline(always)]
        unsafe fn round_even(self) -> Self {
            Y8(_mm256_round_ps::<
                { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
            >(self.0))
        }
        #[inline(always)]
        unsafe fn floor(self) -> Self {
            Y8(_mm256_round_ps::<
                { _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC },
            >(self.0))
        }
        #[inline(always)]
        unsafe fn ceil(self) -> Self {
            Y8(_mm256_round_ps::<
                { _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC },
            >(self.0))
        }
        #[inline(always)]
        unsafe fn lt(self, b: Self) -> __m256 {
            _mm256_cmp_ps::<_CMP_LT_OQ>(self.0, b.0)
        }
        #[inline(always)]
        unsafe fn gt(self, b: Self) -> __m256 {
            _mm256_cmp_ps::<_CMP_GT_OQ>(self.0, b.0)
        }
        #[inline(always)]
        unsafe fn eq(self, b: Self) -> __m256 {
            _mm256_cmp_ps::<_CMP_EQ_OQ>(self.0, b.0)
        }
        #[inline(always)]
        unsafe fn nan(self) -> __m256 {
            _mm256_cmp_ps::<_CMP_UNORD_Q>(self.0, self.0)
        }
        #[inline(always)]
        unsafe fn select(m: __m256, a: Self, b: Self) -> Self {
            Y8(_mm256_blendv_ps(b.0, a.0, m))
        }
        #[inline(always)]
        unsafe fn max_or(self, x: Self) -> Self {
            Y8(_mm256_max_ps(self.0, x.0))
        }
        #[inline(always)]
        unsafe fn min_or(self, x: Self) -> Self {
            Y8(_mm256_min_ps(self.0, x.0))
        }
        #[inline(always)]
        unsafe fn bits(self) -> __m256i {
            _mm256_castps_si256(self.0)
        }
        #[inline(always)]
        unsafe fn from_bits(i: __m256i) -> Self {
            Y8(_mm256_castsi256_ps(i))
        }
        #[inline(always)]
        unsafe fn isplat(x: i32) -> __m256i {
            _mm256_set1_epi32(x)
        }
        #[inline(always)]
        unsafe fn iadd(a: __m256i, b: __m256i) -> __m256i {
            _mm256_add_epi32(a, b)
        }
        #[inline(always)]
        unsafe fn isub(a: __m256i, b: __m256i) -> __m256i {
            _mm256_sub_epi32(a, b)
        }
        #[inline(always)]
        unsafe fn iand(a: __m256i, b: __m256i) -> __m256i {
            _mm256_and_si256(a, b)
        }
        #[inline(always)]
        unsafe fn ior(a: __m256i, b: __m256i) -> __m256i {
            _mm256_or_si256(a, b)
        }
        #[inline(always)]
        unsafe fn ishl23(a: __m256i) -> __m256i {
            _mm256_slli_epi32::<23>(a)
        }
        #[inline(always)]
        unsafe fn isra23(a: __m256i) -> __m256i {
            _mm256_srai_epi32::<23>(a)
        }
        #[inline(always)]
        unsafe fn itof(a: __m256i) -> Self {
            Y8(_mm256_cvtepi32_ps(a))
        }
        #[inline(always)]
        unsafe fn hsum(self) -> f32 {
            let h = _mm_add_ps(
                _mm256_castps256_ps128(self.0),
                _mm256_extractf128_ps(self.0, 1),
            );
            let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
            _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)))
        }
        #[inline(always)]
        unsafe fn hmax(self) -> f32 {
            let h = _mm_max_ps(
                _mm256_castps256_ps128(self.0),
                _mm256_extractf128_ps(self.0, 1),
            );
            let h = _mm_max_ps(h, _mm_movehl_ps(h, h));
            _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)))
        }
        #[inline(always)]
        unsafe fn evens_odds(a: Self, b: Self) -> (Self, Self) {
            // Within each 128-bit half: [a0 a2 b0 b2 | a4 a6 b4 b6]; then the 64-bit pairs
            // reordered to [a0 a2 a4 a6 b0 b2 b4 b6].
            let e = _mm256_shuffle_ps::<0x88>(a.0, b.0);
            let o = _mm256_shuffle_ps::<0xDD>(a.0, b.0);
            let fix =
                |v: __m256| _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(v)));
            (Y8(fix(e)), Y8(fix(o)))
        }
    }

    impl Vf for Z16 {
        type M = __mmask16;
        type I = __m512i;
        const LANES: usize = 16;
        const FUSED: bool = true;
        #[inline(always)]
        unsafe fn splat(x: f32) -> Self {
            Z16(_mm512_set1_ps(x))
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            Z16(_mm512_loadu_ps(p))
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            _mm512_storeu_ps(p, self.0)
        }
        #[inline(always)]
        unsafe fn load_part(p: *const f32, n: usize) -> Self {
            let m: __mmask16 = ((1u32 << n) - 1) as u16;
            Z16(_mm512_maskz_loadu_ps(m, p))
        }
        #[inline(always)]
        unsafe fn store_part(self, p: *mut f32, n: usize) {
            let m: __mmask16 = ((1u32 << n) - 1) as u16;
            _mm512_mask_storeu_ps(p, m, self.0)
        }
        #[inline(always)]
        unsafe fn gather(p: *const f32, stride: isize) -> Self {
            let idx = _mm512_mullo_epi32(
                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                _mm512_set1_epi32(stride as i32),
            );
            Z16(_mm512_i32gather_ps::<4>(idx, p))
        }
        #[inline(always)]
        unsafe fn gather_idx(p: *const f32, idx: *const i32) -> Self {
            Z16(_mm512_i32gather_ps::<4>(
                _mm512_loadu_si512(idx as *const _),
                p,
            ))
        }
        #[inline(always)]
        unsafe fn add(self, b: Self) -> Self {
            Z16(_mm512_add_ps(self.0, b.0))
        }
        #[inline(always)]
        unsafe fn sub(self, b: Self) -> Self {
            Z16(_mm512_sub_ps(self.0, b.0))
        }
        #[inline(always)]
        unsafe fn mul(self, b: Self) -> Self {
            Z16(_mm512_mul_ps(self.0, b.0))
        }
        #[inline(always)]
        unsafe fn div(self, b: Self) -> Self {
            Z16(_mm512_div_ps(self.0, b.0))
        }
        #[inline(always)]
        unsafe fn div_fast(self, b: Self) -> Self {
            // 14-bit estimate, one Newton step (~28 bits before rounding).
            let r = _mm512_rcp14_ps(b.0);
            let r = _mm512_mul_ps(r, _mm512_fnmadd_ps(b.0, r, _mm512_set1_ps(2.0)));
            Z16(_mm512_mul_ps(self.0, r))
        }
        #[inline(always)]
        unsafe fn fma(self, b: Self, c: Self) -> Self {
            Z16(_mm512_fmadd_ps(self.0, b.0, c.0))
        }
        #[inline(always)]
        unsafe fn sqrt(self) -> Self {
            Z16(_mm512_sqrt_ps(self.0))
        }
        #[inline(always)]
        unsafe fn round_even(self) -> Self {
            Z16(_mm512_roundscale_ps::<
                { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
            >(self.0))
        }
        #[inline(always)]
        unsafe fn floor(self) -> Self {
            Z16(_mm512_roundscale_ps::<
                { _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC },
            >(self.0))
        }
        #[inline(always)]
        unsafe fn ceil(self) -> Self {
            Z16(_mm512_roundscale_ps::<
                { _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC },
            >(self.0))
        }
        #[inline(always)]
        unsafe fn lt(self, b: Self) -> __mmask16 {
            _mm512_cmp_ps_mask::<_CMP_LT_OQ>(self.0, b.0)
        }
        #[inline(always)]
        unsafe fn gt(self, b: Self) -> __mmask16 {
            _mm512_cmp_ps_mask::<_CMP_GT_OQ>(self.0, b.0)
        }
        #[inline(always)]
        unsafe fn eq(self, b: Self) -> __mmask16 {
            _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(self.0, b.0)
        }
        #[inline(always)]
        unsafe fn nan(self) -> __mmask16 {
            _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(self.0, self.0)
        }
        #[inline(always)]
        unsafe fn select(m: __mmask16, a: Self, b: Self) -> Self {
            Z16(_mm512_mask_blend_ps(m, b.0, a.0))
        }
        #[inline(always)]
        unsafe fn max_or(self, x: Self) -> Self {
            Z16(_mm512_max_ps(self.0, x.0))
        }
        #[inline(always)]
        unsafe fn min_or(self, x: Self) -> Self {
            Z16(_mm512_min_ps(self.0, x.0))
        }
        #[inline(always)]
        unsafe fn bits(self) -> __m512i {
            _mm512_castps_si512(self.0)
        }
        #[inline(always)]
        unsafe fn from_bits(i: __m512i) -> Self {
            Z16(_mm512_castsi512_ps(i))
        }
        #[inline(always)]
        unsafe fn isplat(x: i32) -> __m512i {
            _mm512_set1_epi32(x)
        }
        #[inline(always)]
        unsafe fn iadd(a: __m512i, b: __m512i) -> __m512i {
            _mm512_add_epi32(a, b)
        }
        #[inline(always)]
        unsafe fn isub(a: __m512i, b: __m512i) -> __m512i {
            _mm512_sub_epi32(a, b)
        }
        #[inline(always)]
        unsafe fn iand(a: __m512i, b: __m512i) -> __m512i {
            _mm512_and_si512(a, b)
        }
        #[inline(always)]
        unsafe fn ior(a: __m512i, b: __m512i) -> __m512i {
            _mm512_or_si512(a, b)
        }
        #[inline(always)]
        unsafe fn ishl23(a: __m512i) -> __m512i {
            _mm512_slli_epi32::<23>(a)
        }
        #[inline(always)]
        unsafe fn isra23(a: __m512i) -> __m512i {
            _mm512_srai_epi32::<23>(a)
        }
        #[inline(always)]
        unsafe fn itof(a: __m512i) -> Self {
            Z16(_mm512_cvtepi32_ps(a))
        }
        #[inline(always)]
        unsafe fn mul_pow2(self, n: Self, _t: Self) -> Self {
            // vscalefps: self * 2^floor(n), one instruction for the four of the default.
            Z16(_mm512_scalef_ps(self.0, n.0))
        }
        #[inline(always)]
        unsafe fn hsum(self) -> f32 {
            let lo = _mm512_castps512_ps256(self.0);
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(self.0), 1));
            Y8(_mm256_add_ps(lo, hi)).hsum()
        }
        #[inline(always)]
        unsafe fn hmax(self) -> f32 {
            let lo = _mm512_castps512_ps256(self.0);
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(self.0), 1));
            Y8(_mm256_max_ps(lo, hi)).hmax()
        }
        #[inline(always)]
        unsafe fn evens_odds(a: Self, b: Self) -> (Self, Self) {
            let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
            (
                Z16(_mm512_permutex2var_ps(a.0, even, b.0)),
                Z16(_mm512_permutex2var_ps(a.0, odd, b.0)),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `p * 2^n` for every n in [-126, 127] and mantissas across [0.5, 2), lane by lane,
    /// against the exact product in f64 (the scale instruction and the exponent-bits
    /// multiply must agree bit for bit).
    unsafe fn check_mul_pow2<V: Vf>(lanes: impl Fn(&[f32]) -> V, out: impl Fn(V) -> Vec<f32>) {
        const MAGIC: f32 = 12_582_912.0;
        for n in -126..=127i32 {
            let ps: Vec<f32> = (0..V::LANES)
                .map(|l| 0.5 + 1.5 * l as f32 / V::LANES as f32)
                .collect();
            let nf = vec![n as f32; V::LANES];
            let t: Vec<f32> = nf.iter().map(|&x| x + MAGIC).collect();
            let got = out(lanes(&ps).mul_pow2(lanes(&nf), lanes(&t)));
            for (p, g) in ps.iter().zip(got) {
                let want = (*p as f64 * 2f64.powi(n)) as f32;
                assert_eq!(g.to_bits(), want.to_bits(), "{p} * 2^{n}");
            }
        }
    }

    #[test]
    fn mul_pow2_is_exact() {
        unsafe { check_mul_pow2::<f32>(|v| v[0], |x| vec![x]) };
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            if crate::Isa::Avx2.is_supported() {
                #[target_feature(enable = "avx2,fma")]
                unsafe fn y8() {
                    check_mul_pow2::<Y8>(
                        |v| Y8(_mm256_loadu_ps(v.as_ptr())),
                        |x| {
                            let mut o = vec![0f32; 8];
                            _mm256_storeu_ps(o.as_mut_ptr(), x.0);
                            o
                        },
                    )
                }
                unsafe { y8() };
            }
            if crate::Isa::Avx512.is_supported() {
                #[target_feature(enable = "avx512f")]
                unsafe fn z16() {
                    check_mul_pow2::<Z16>(
                        |v| Z16(_mm512_loadu_ps(v.as_ptr())),
                        |x| {
                            let mut o = vec![0f32; 16];
                            _mm512_storeu_ps(o.as_mut_ptr(), x.0);
                            o
                        },
                    )
                }
                unsafe { z16() };
            }
        }
    }
}
