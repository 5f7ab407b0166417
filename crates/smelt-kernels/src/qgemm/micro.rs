//! Integer micro-kernels: an `mr x nr` tile of i32 sums over `k4` groups of four 8-bit
//! products. Operand A is broadcast (row `r`, group `g` at `a + r * a_rs + g * a_ks`, four
//! bytes), operand B is a packed panel (`[k4][nr][4]` bytes). `A_SIGNED` says which operand
//! holds the signed (i8) values; the other holds u8. Sums are exact (no saturation): each
//! product fits 16 bits and a 4-way dot product adds into i32.

/// One tile: `(k4, a, a_rs, a_ks, rows, b, c, ldc)`. Rows past `rows` (at most `mr`) read
/// row `rows - 1` and are not written.
pub type QMicroFn = unsafe fn(usize, *const u8, usize, usize, usize, *const u8, *mut i32, usize);

/// An integer micro-kernel with its tile.
#[derive(Clone, Copy)]
pub struct QMicro {
    /// Rows of the tile.
    pub mr: usize,
    /// Columns of the tile (the packed panel's width).
    pub nr: usize,
    /// The kernel for a signed A and unsigned B (weights times activations).
    pub signed_a: QMicroFn,
    /// The kernel for an unsigned A and signed B (activations times weights).
    pub unsigned_a: QMicroFn,
    /// The same two for signed values within [-64, 63] (reduced-range weights), where
    /// the ISA has a faster form for them.
    pub narrow: (QMicroFn, QMicroFn),
    /// The kernel's name, e.g. `qgemm.avx512-vnni`.
    pub name: &'static str,
    /// The instruction set its code needs (the rest of the product follows it).
    pub isa: crate::Isa,
}

/// The portable tile's rows and columns.
pub const PORTABLE_TILE: (usize, usize) = (4, 8);

/// The portable kernel (plain loops).
///
/// # Safety
/// The operands hold the bytes the signature describes; `c` has `mr` rows of `ldc`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn portable<const A_SIGNED: bool>(
    k4: usize,
    a: *const u8,
    a_rs: usize,
    a_ks: usize,
    rows: usize,
    b: *const u8,
    c: *mut i32,
    ldc: usize,
) {
    let (mr, nr) = PORTABLE_TILE;
    let wide = |v: u8, signed: bool| if signed { v as i8 as i32 } else { v as i32 };
    for r in 0..rows.min(mr) {
        let mut acc = [0i32; 8];
        let ar = a.add(r * a_rs);
        for g in 0..k4 {
            let ap = ar.add(g * a_ks);
            let bp = b.add(g * nr * 4);
            for (j, s) in acc.iter_mut().enumerate() {
                for t in 0..4 {
                    *s += wide(*ap.add(t), A_SIGNED) * wide(*bp.add(j * 4 + t), !A_SIGNED);
                }
            }
        }
        std::ptr::copy_nonoverlapping(acc.as_ptr(), c.add(r * ldc), nr);
    }
}

/// The portable micro-kernel.
pub fn portable_micro() -> QMicro {
    QMicro {
        mr: PORTABLE_TILE.0,
        nr: PORTABLE_TILE.1,
        signed_a: portable::<true>,
        unsigned_a: portable::<false>,
        narrow: (portable::<true>, portable::<false>),
        name: "qgemm.portable",
        isa: crate::Isa::Portable,
    }
}

#[cfg(target_arch = "x86_64")]
pub mod x86 {
    //! AVX2 (exact: bytes widened to 16 bits, then `vpmaddwd`) and AVX-512 VNNI
    //! (`vpdpbusd`) tiles.

    use super::QMicro;
    use std::arch::x86_64::*;

    /// AVX2 tile: 4 rows x 16 columns.
    pub const AVX2_TILE: (usize, usize) = (4, 16);
    /// AVX-512 VNNI tile: 8 rows x 32 columns.
    pub const VNNI_TILE: (usize, usize) = (8, 32);
    /// AVX-VNNI tile: 6 rows x 16 columns (twelve accumulators hide `vpdpbusd`'s latency
    /// at two a cycle; with the two panel halves and the broadcast, fifteen registers).
    pub const AVX_VNNI_TILE: (usize, usize) = (6, 16);

    /// Four bytes of A widened to four i16s, repeated across a register (the dword
    /// broadcast, then widened: two instructions).
    #[inline(always)]
    unsafe fn a_pairs(p: *const u8, signed: bool) -> __m256i {
        widen(_mm_set1_epi32((p as *const i32).read_unaligned()), signed)
    }

    /// 16 bytes (four columns of four) widened to i16s.
    #[inline(always)]
    unsafe fn widen(v: __m128i, signed: bool) -> __m256i {
        if signed {
            _mm256_cvtepi8_epi16(v)
        } else {
            _mm256_cvtepu8_epi16(v)
        }
    }

    /// The AVX2 kernel.
    ///
    /// # Safety
    /// As for [`super::portable`], on a CPU with AVX2.
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn avx2<const A_SIGNED: bool>(
        k4: usize,
        a: *const u8,
        a_rs: usize,
        a_ks: usize,
        rows: usize,
        b: *const u8,
        c: *mut i32,
        ldc: usize,
    ) {
        let last = rows.clamp(1, 4) - 1;
        let rp = [0, 1, 2, 3].map(|r: usize| a.add(r.min(last) * a_rs));
        // The panel's 16 columns in two halves of 8 (A is read once per half).
        for half in 0..2 {
            // acc[r][h]: row r, columns 4h..4h+4 of the half, each column's sum split over
            // two lanes.
            let mut acc = [[_mm256_setzero_si256(); 2]; 4];
            for g in 0..k4 {
                let bv = _mm256_loadu_si256(b.add(g * 64 + half * 32) as *const __m256i);
                let lo = widen(_mm256_castsi256_si128(bv), !A_SIGNED);
                let hi = widen(_mm256_extracti128_si256::<1>(bv), !A_SIGNED);
                for r in 0..4 {
                    let av = a_pairs(rp[r].add(g * a_ks), A_SIGNED);
                    acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(lo, av));
                    acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(hi, av));
                }
            }
            for (r, row) in acc.iter().enumerate().take(last + 1) {
                // hadd: [c0 c1 c4 c5 | c2 c3 c6 c7]; the permute restores column order.
                let s = _mm256_hadd_epi32(row[0], row[1]);
                let s = _mm256_permute4x64_epi64::<0b11_01_10_00>(s);
                _mm256_storeu_si256(c.add(r * ldc + half * 8) as *mut __m256i, s);
            }
        }
    }

    /// The AVX2 kernel for signed values within [-64, 63]: `vpmaddubsw` (u8 times i8,
    /// pairs summed to 16 bits, at most 2 * 255 * 64 = 32640: no saturation) then
    /// `vpmaddwd` by ones, giving each column's four-depth sum in one i32 lane; twice the
    /// products per instruction of the widening kernel.
    ///
    /// # Safety
    /// As for [`super::portable`], on a CPU with AVX2, the signed operand within [-64, 63].
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn avx2_narrow<const A_SIGNED: bool>(
        k4: usize,
        a: *const u8,
        a_rs: usize,
        a_ks: usize,
        rows: usize,
        b: *const u8,
        c: *mut i32,
        ldc: usize,
    ) {
        let last = rows.clamp(1, 4) - 1;
        let rp = [0, 1, 2, 3].map(|r: usize| a.add(r.min(last) * a_rs));
        let ones = _mm256_set1_epi16(1);
        // acc[r][h]: row r, columns 8h..8h+8.
        let mut acc = [[_mm256_setzero_si256(); 2]; 4];
        for g in 0..k4 {
            let bv = [0, 32].map(|o| _mm256_loadu_si256(b.add(g * 64 + o) as *const __m256i));
            for r in 0..4 {
                let av = _mm256_set1_epi32((rp[r].add(g * a_ks) as *const i32).read_unaligned());
                for h in 0..2 {
                    // vpmaddubsw multiplies its first operand's u8s by its second's i8s.
                    let pairs = if A_SIGNED {
                        _mm256_maddubs_epi16(bv[h], av)
                    } else {
                        _mm256_maddubs_epi16(av, bv[h])
                    };
                    acc[r][h] = _mm256_add_epi32(acc[r][h], _mm256_madd_epi16(pairs, ones));
                }
            }
        }
        for (r, v) in acc.iter().enumerate().take(last + 1) {
            _mm256_storeu_si256(c.add(r * ldc) as *mut __m256i, v[0]);
            _mm256_storeu_si256(c.add(r * ldc + 8) as *mut __m256i, v[1]);
        }
    }

    /// The AVX2 micro-kernel.
    pub fn avx2_micro() -> QMicro {
        QMicro {
            mr: AVX2_TILE.0,
            nr: AVX2_TILE.1,
            signed_a: avx2::<true>,
            unsigned_a: avx2::<false>,
            narrow: (avx2_narrow::<true>, avx2_narrow::<false>),
            name: "qgemm.avx2",
            isa: crate::Isa::Avx2,
        }
    }

    /// The AVX-512 VNNI kernel.
    ///
    /// # Safety
    /// As for [`super::portable`], on a CPU with AVX-512F/BW and VNNI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn vnni<const A_SIGNED: bool>(
        k4: usize,
        a: *const u8,
        a_rs: usize,
        a_ks: usize,
        rows: usize,
        b: *const u8,
        c: *mut i32,
        ldc: usize,
    ) {
        let last = rows.clamp(1, 8) - 1;
        let rp = [0, 1, 2, 3, 4, 5, 6, 7].map(|r: usize| a.add(r.min(last) * a_rs));
        let mut acc = [[_mm512_setzero_si512(); 2]; 8];
        for g in 0..k4 {
            let b0 = _mm512_loadu_si512(b.add(g * 128) as *const __m512i);
            let b1 = _mm512_loadu_si512(b.add(g * 128 + 64) as *const __m512i);
            for r in 0..8 {
                let av = _mm512_set1_epi32((rp[r].add(g * a_ks) as *const i32).read_unaligned());
                // vpdpbusd multiplies its first source's u8s by its second's i8s.
                if A_SIGNED {
                    acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], b0, av);
                    acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], b1, av);
                } else {
                    acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], av, b0);
                    acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], av, b1);
                }
            }
        }
        for (r, row) in acc.iter().enumerate().take(last + 1) {
            _mm512_storeu_si512(c.add(r * ldc) as *mut __m512i, row[0]);
            _mm512_storeu_si512(c.add(r * ldc + 16) as *mut __m512i, row[1]);
        }
    }

    /// The AVX-VNNI kernel (the VEX-encoded 256-bit `vpdpbusd` of CPUs with AVX2 and no
    /// AVX-512: Intel's since Alder Lake, AMD's since Zen 5): exact for full-range weights,
    /// a quarter of the instructions of the AVX2 kernels per product.
    ///
    /// # Safety
    /// As for [`super::portable`], on a CPU with AVX2 and AVX-VNNI.
    #[target_feature(enable = "avx2,avxvnni")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn avx_vnni<const A_SIGNED: bool>(
        k4: usize,
        a: *const u8,
        a_rs: usize,
        a_ks: usize,
        rows: usize,
        b: *const u8,
        c: *mut i32,
        ldc: usize,
    ) {
        let last = rows.clamp(1, 6) - 1;
        let rp = [0, 1, 2, 3, 4, 5].map(|r: usize| a.add(r.min(last) * a_rs));
        let mut acc = [[_mm256_setzero_si256(); 2]; 6];
        for g in 0..k4 {
            let b0 = _mm256_loadu_si256(b.add(g * 64) as *const __m256i);
            let b1 = _mm256_loadu_si256(b.add(g * 64 + 32) as *const __m256i);
            for r in 0..6 {
                let av = _mm256_set1_epi32((rp[r].add(g * a_ks) as *const i32).read_unaligned());
                // vpdpbusd multiplies its first source's u8s by its second's i8s.
                if A_SIGNED {
                    acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], b0, av);
                    acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], b1, av);
                } else {
                    acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], av, b0);
                    acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], av, b1);
                }
            }
        }
        for (r, row) in acc.iter().enumerate().take(last + 1) {
            _mm256_storeu_si256(c.add(r * ldc) as *mut __m256i, row[0]);
            _mm256_storeu_si256(c.add(r * ldc + 8) as *mut __m256i, row[1]);
        }
    }

    /// Whether this CPU has AVX-VNNI, unless `SMELT_AVX_VNNI=0` turns it off (to measure
    /// the plain AVX2 kernels of CPUs without it).
    pub fn has_avx_vnni() -> bool {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *ON.get_or_init(|| {
            std::env::var("SMELT_AVX_VNNI").as_deref() != Ok("0")
                && is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("avxvnni")
        })
    }

    /// The AVX-VNNI micro-kernel.
    pub fn avx_vnni_micro() -> QMicro {
        QMicro {
            mr: AVX_VNNI_TILE.0,
            nr: AVX_VNNI_TILE.1,
            signed_a: avx_vnni::<true>,
            unsigned_a: avx_vnni::<false>,
            narrow: (avx_vnni::<true>, avx_vnni::<false>),
            name: "qgemm.avx-vnni",
            isa: crate::Isa::Avx2,
        }
    }

    /// Whether this CPU has AVX-512 VNNI (with the F and BW it builds on).
    pub fn has_vnni() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vnni")
    }

    /// The AVX-512 VNNI micro-kernel.
    pub fn vnni_micro() -> QMicro {
        QMicro {
            mr: VNNI_TILE.0,
            nr: VNNI_TILE.1,
            signed_a: vnni::<true>,
            unsigned_a: vnni::<false>,
            narrow: (vnni::<true>, vnni::<false>),
            name: "qgemm.avx512-vnni",
            isa: crate::Isa::Avx512,
        }
    }
}
