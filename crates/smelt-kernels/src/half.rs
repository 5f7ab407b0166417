//! Weights stored in half precision (bf16 or f16) and widened to f32 as a product packs
//! them: [`HalfPanels`] holds a matrix in the GEMM's panel order at two bytes an element,
//! and widens one panel at a time into the f32 panel the micro-kernels read, so a plan
//! holds and streams half the weight bytes while every product still multiplies and
//! accumulates in f32.
//!
//! Widening is exact for both formats: bf16 is f32's top half (a shift), and every f16 is
//! an f32 (F16C's `vcvtph2ps` on AVX2 and AVX-512, the `half` crate's conversion on the
//! portable path).

use crate::gemm::PanelSource;
use crate::Kernels;

/// A 16-bit float format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Half {
    /// bfloat16: f32's sign, exponent and top 7 fraction bits.
    Bf16,
    /// IEEE binary16.
    F16,
}

/// Widens `n` elements of format `Half` at `src` into f32s at `dst`.
///
/// # Safety
/// `src` is readable and `dst` writable for `n` elements; the ISA's features are present.
pub type WidenFn = unsafe fn(Half, *const u16, *mut f32, usize);

/// Portable widening.
///
/// # Safety
/// See [`WidenFn`].
pub unsafe fn widen_portable(kind: Half, src: *const u16, dst: *mut f32, n: usize) {
    let (s, d) = (
        std::slice::from_raw_parts(src, n),
        std::slice::from_raw_parts_mut(dst, n),
    );
    match kind {
        Half::Bf16 => {
            for (o, &b) in d.iter_mut().zip(s) {
                *o = f32::from_bits((b as u32) << 16);
            }
        }
        Half::F16 => {
            for (o, &b) in d.iter_mut().zip(s) {
                *o = half::f16::from_bits(b).to_f32();
            }
        }
    }
}

/// x86 widening.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::Half;
    use std::arch::x86_64::*;

    /// AVX2 + F16C widening, 8 elements a step.
    ///
    /// # Safety
    /// See [`super::WidenFn`]; AVX2 and F16C present.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn widen_avx2(kind: Half, src: *const u16, dst: *mut f32, n: usize) {
        let mut i = 0;
        while i + 8 <= n {
            let h = _mm_loadu_si128(src.add(i) as *const __m128i);
            let f = match kind {
                Half::Bf16 => _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)),
                Half::F16 => _mm256_cvtph_ps(h),
            };
            _mm256_storeu_ps(dst.add(i), f);
            i += 8;
        }
        super::widen_portable(kind, src.add(i), dst.add(i), n - i);
    }

    /// AVX-512 widening, 16 elements a step (a masked step for the tail).
    ///
    /// # Safety
    /// See [`super::WidenFn`]; AVX-512 F/BW present.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    pub unsafe fn widen_avx512(kind: Half, src: *const u16, dst: *mut f32, n: usize) {
        let mut i = 0;
        while i < n {
            let left = n - i;
            let mask: u16 = if left >= 16 { !0 } else { (1u16 << left) - 1 };
            let h = _mm256_maskz_loadu_epi16(mask, src.add(i) as *const i16);
            let f = match kind {
                Half::Bf16 => _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)),
                Half::F16 => _mm512_cvtph_ps(h),
            };
            _mm512_mask_storeu_ps(dst.add(i), mask, f);
            i += 16;
        }
    }
}

/// A `rows x cols` matrix stored in half precision, in panels of `width` columns:
/// element `(p, j)` of panel `q` (columns `q * width ..`) at `q * rows * width + p * width
/// + j - q * width`, zero past the last column. As a [`PanelSource`] it is a product's B
/// (`k = rows`, `n = cols`, `width = nr`); with its strides swapped at packing, a product's
/// A (`k = rows`, `m = cols`, `width = mr`, see `gemm::Lhs::Half`).
#[derive(Debug, Clone)]
pub struct HalfPanels {
    kind: Half,
    width: usize,
    rows: usize,
    cols: usize,
    data: Vec<u16>,
    widen: WidenFn,
}

impl HalfPanels {
    /// Packs the matrix `M[p][j] = src[p * rs + j * cs]` (`rows x cols`, bits of `kind`)
    /// in panels of `width` columns, widened later by `kern`'s kernels.
    ///
    /// # Panics
    /// When an element of the matrix lies outside `src`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kern: &Kernels,
        kind: Half,
        width: usize,
        rows: usize,
        cols: usize,
        src: &[u16],
        rs: usize,
        cs: usize,
    ) -> HalfPanels {
        if rows > 0 && cols > 0 {
            let last = (rows - 1)
                .checked_mul(rs)
                .and_then(|a| (cols - 1).checked_mul(cs).and_then(|b| a.checked_add(b)));
            assert!(
                last.is_some_and(|l| l < src.len()),
                "half matrix {rows}x{cols} (strides {rs}, {cs}) exceeds {} elements",
                src.len()
            );
        }
        let width = width.max(1);
        let panels = cols.div_ceil(width);
        let mut data = vec![0u16; panels * rows * width];
        for (q, out) in data.chunks_mut((rows * width).max(1)).enumerate() {
            let n = width.min(cols - q * width);
            for p in 0..rows {
                let row = &mut out[p * width..p * width + n];
                for (j, o) in row.iter_mut().enumerate() {
                    *o = src[p * rs + (q * width + j) * cs];
                }
            }
        }
        HalfPanels {
            kind,
            width,
            rows,
            cols,
            data,
            widen: kern.widen,
        }
    }

    /// Panel width (the micro-kernel's `nr` for a B, `mr` for an A).
    pub fn width(&self) -> usize {
        self.width
    }

    /// Rows (the product's depth).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (B's `n`, or A's `m`).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The format.
    pub fn kind(&self) -> Half {
        self.kind
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len() * 2
    }

    /// Widens panel `q` (`rows * width` floats) into `out`.
    ///
    /// # Panics
    /// When `q` is past the last panel or `out` is shorter than a panel.
    pub fn widen_panel(&self, q: usize, out: &mut [f32]) {
        let len = self.rows * self.width;
        let src = &self.data[q * len..(q + 1) * len];
        let out = &mut out[..len];
        // SAFETY: both slices hold `len` elements; the table's ISA is this CPU's.
        unsafe { (self.widen)(self.kind, src.as_ptr(), out.as_mut_ptr(), len) }
    }
}

impl PanelSource for HalfPanels {
    fn pack(&self, _batch: usize, j0: usize, _cols: usize, k: usize, nr: usize, out: &mut [f32]) {
        debug_assert!(k == self.rows && nr == self.width && j0.is_multiple_of(nr));
        self.widen_panel(j0 / self.width, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa_tests;

    fn specials() -> Vec<f32> {
        let mut v = vec![
            0.0,
            -0.0,
            1.0,
            -2.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
            65504.0,
            6.0e-8,
            1.0e-5,
            3.3e38,
            1.0e-40,
        ];
        v.extend(crate::testing::rand_vec(61, 7).iter().map(|x| x * 300.0));
        v
    }

    isa_tests!(widening_is_exact_for_every_length, |k: &crate::Kernels| {
        let v = specials();
        for kind in [Half::Bf16, Half::F16] {
            let bits: Vec<u16> = v
                .iter()
                .map(|&x| match kind {
                    Half::Bf16 => half::bf16::from_f32(x).to_bits(),
                    Half::F16 => half::f16::from_f32(x).to_bits(),
                })
                .collect();
            for n in [0, 1, 7, 8, 15, 16, 17, 33, bits.len()] {
                let mut want = vec![0f32; n];
                let mut got = vec![-9f32; n + 1];
                unsafe {
                    widen_portable(kind, bits.as_ptr(), want.as_mut_ptr(), n);
                    (k.widen)(kind, bits.as_ptr(), got.as_mut_ptr(), n);
                }
                for i in 0..n {
                    assert_eq!(got[i].to_bits(), want[i].to_bits(), "{kind:?} n {n} at {i}");
                }
                assert_eq!(got[n], -9.0, "{kind:?} n {n}: wrote past the end");
            }
            // NaN stays NaN.
            let nan = match kind {
                Half::Bf16 => half::bf16::NAN.to_bits(),
                Half::F16 => half::f16::NAN.to_bits(),
            };
            let mut o = [0f32; 1];
            unsafe { (k.widen)(kind, &nan, o.as_mut_ptr(), 1) };
            assert!(o[0].is_nan());
        }
    });

    isa_tests!(panels_hold_the_matrix, |k: &crate::Kernels| {
        // A 5 x 11 matrix read transposed (rs 1, cs 5), panels of 4.
        let src: Vec<u16> = (0..55)
            .map(|i| half::bf16::from_f32(i as f32).to_bits())
            .collect();
        let p = HalfPanels::new(k, Half::Bf16, 4, 5, 11, &src, 1, 5);
        let mut out = vec![0f32; 20];
        for q in 0..3 {
            p.widen_panel(q, &mut out);
            for r in 0..5 {
                for j in 0..4 {
                    let col = q * 4 + j;
                    let want = if col < 11 { (r + col * 5) as f32 } else { 0.0 };
                    assert_eq!(out[r * 4 + j], want);
                }
            }
        }
    });
}
