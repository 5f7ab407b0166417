//! Packing: A into k-major panels of `mr` rows, B into k-major panels of `nr` columns,
//! zero-padded past the matrix edge, as the micro-kernels read them.

/// A strided f32 matrix: element `(i, j)` is at `ptr + i * rs + j * cs`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef {
    /// Element (0, 0).
    pub ptr: *const f32,
    /// Step between rows, in elements.
    pub rs: isize,
    /// Step between columns, in elements.
    pub cs: isize,
}

// SAFETY: a MatRef is only read; callers of the unsafe GEMM entry points guarantee the
// memory outlives the call and is not written during it.
unsafe impl Send for MatRef {}
unsafe impl Sync for MatRef {}

impl MatRef {
    /// A row-major matrix with row stride `ld`.
    pub fn rows(ptr: *const f32, ld: usize) -> MatRef {
        MatRef {
            ptr,
            rs: ld as isize,
            cs: 1,
        }
    }

    /// The same matrix shifted by `off` elements.
    ///
    /// # Safety
    /// The result must still point into the allocation.
    pub unsafe fn offset(self, off: isize) -> MatRef {
        MatRef {
            ptr: self.ptr.offset(off),
            ..self
        }
    }

    /// Element `(i, j)`.
    ///
    /// # Safety
    /// The element must be in the allocation.
    #[inline(always)]
    pub unsafe fn at(&self, i: usize, j: usize) -> f32 {
        *self.ptr.offset(i as isize * self.rs + j as isize * self.cs)
    }
}

/// Packs rows `i0 .. i0 + rows` (rows <= mr) of the `? x k` matrix `a` into one panel:
/// `out[p * mr + r] = a[i0 + r, p]`, zero for `r >= rows`.
///
/// # Safety
/// Every element read must be in `a`'s allocation; `out` holds `k * mr` floats.
pub unsafe fn pack_a_panel(
    a: MatRef,
    i0: usize,
    rows: usize,
    k: usize,
    mr: usize,
    out: &mut [f32],
) {
    let out = &mut out[..k * mr];
    if rows < mr {
        out.fill(0.0);
    }
    if a.cs == 1 && rows == mr {
        // Full panels of row-major A: walk k once, writing each step's mr floats together.
        let mut rp = [std::ptr::null::<f32>(); 16];
        for (r, p) in rp.iter_mut().enumerate().take(mr) {
            *p = a.ptr.offset((i0 + r) as isize * a.rs);
        }
        for (p, dst) in out.chunks_exact_mut(mr).enumerate() {
            for (r, d) in dst.iter_mut().enumerate() {
                *d = *rp[r].add(p);
            }
        }
        return;
    }
    if a.rs == 1 {
        // Column-major A: each k step's rows are contiguous.
        for (p, dst) in out.chunks_exact_mut(mr).enumerate() {
            let src = a.ptr.offset(i0 as isize + p as isize * a.cs);
            crate::buf::copy_short(&mut dst[..rows], std::slice::from_raw_parts(src, rows));
        }
        return;
    }
    for r in 0..rows {
        let row = a.ptr.offset((i0 + r) as isize * a.rs);
        if a.cs == 1 {
            for p in 0..k {
                *out.get_unchecked_mut(p * mr + r) = *row.add(p);
            }
        } else {
            for p in 0..k {
                *out.get_unchecked_mut(p * mr + r) = *row.offset(p as isize * a.cs);
            }
        }
    }
}

/// Packs columns `j0 .. j0 + cols` (cols <= nr) of the `k x ?` matrix `b` into one panel:
/// `out[p * nr + j] = b[p, j0 + j]`, zero for `j >= cols`.
///
/// # Safety
/// Every element read must be in `b`'s allocation; `out` holds `k * nr` floats.
pub unsafe fn pack_b_panel(
    b: MatRef,
    j0: usize,
    cols: usize,
    k: usize,
    nr: usize,
    out: &mut [f32],
) {
    let out = &mut out[..k * nr];
    if b.cs == 1 {
        // Short rows: inline moves, not a call to memcpy per row.
        for (p, dst) in out.chunks_exact_mut(nr).enumerate() {
            let src = b.ptr.offset(p as isize * b.rs + j0 as isize);
            crate::buf::copy_short(&mut dst[..cols], std::slice::from_raw_parts(src, cols));
            dst[cols..].fill(0.0);
        }
    } else {
        if cols < nr {
            out.fill(0.0);
        }
        let mut j_done = 0;
        if b.rs == 1 {
            // Column-major B (a transposed operand, e.g. attention's keys): 8 x 8 blocks
            // (AVX) or 4 x 4 blocks transposed in registers, the rest below.
            j_done = transpose_blocks(b, j0, cols, k, nr, out);
        }
        for j in j_done..cols {
            let col = b.ptr.offset((j0 + j) as isize * b.cs);
            for p in 0..k {
                *out.get_unchecked_mut(p * nr + j) = *col.offset(p as isize * b.rs);
            }
        }
    }
}

/// [`transpose_8x8_blocks`] where the CPU has AVX (attention's keys packed 4 x 4 took a
/// fifth of MiniLM's attention time on a Zen 4), else [`transpose_4x4_blocks`].
///
/// # Safety
/// As for [`pack_b_panel`].
unsafe fn transpose_blocks(
    b: MatRef,
    j0: usize,
    cols: usize,
    k: usize,
    nr: usize,
    out: &mut [f32],
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx") {
        // SAFETY: AVX is present.
        return transpose_8x8_blocks(b, j0, cols, k, nr, out);
    }
    transpose_4x4_blocks(b, j0, cols, k, nr, out)
}

/// As [`transpose_4x4_blocks`], by 8 x 8 blocks with AVX.
///
/// # Safety
/// As for [`pack_b_panel`]; the CPU has AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn transpose_8x8_blocks(
    b: MatRef,
    j0: usize,
    cols: usize,
    k: usize,
    nr: usize,
    out: &mut [f32],
) -> usize {
    use std::arch::x86_64::*;
    let jn = cols - cols % 8;
    let kn = k - k % 8;
    let col = |j: usize| b.ptr.offset((j0 + j) as isize * b.cs);
    let dst = out.as_mut_ptr();
    for j in (0..jn).step_by(8) {
        let c: [*const f32; 8] = std::array::from_fn(|jj| col(j + jj));
        for p in (0..kn).step_by(8) {
            let r: [__m256; 8] = std::array::from_fn(|jj| _mm256_loadu_ps(c[jj].add(p)));
            // Pairs, then quads, then halves: the classic 8 x 8 shuffle network.
            let t0 = _mm256_unpacklo_ps(r[0], r[1]);
            let t1 = _mm256_unpackhi_ps(r[0], r[1]);
            let t2 = _mm256_unpacklo_ps(r[2], r[3]);
            let t3 = _mm256_unpackhi_ps(r[2], r[3]);
            let t4 = _mm256_unpacklo_ps(r[4], r[5]);
            let t5 = _mm256_unpackhi_ps(r[4], r[5]);
            let t6 = _mm256_unpacklo_ps(r[6], r[7]);
            let t7 = _mm256_unpackhi_ps(r[6], r[7]);
            let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let u1 = _mm256_shuffle_ps::<0xee>(t0, t2);
            let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let u3 = _mm256_shuffle_ps::<0xee>(t1, t3);
            let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let u5 = _mm256_shuffle_ps::<0xee>(t4, t6);
            let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let u7 = _mm256_shuffle_ps::<0xee>(t5, t7);
            let rows = [
                _mm256_permute2f128_ps::<0x20>(u0, u4),
                _mm256_permute2f128_ps::<0x20>(u1, u5),
                _mm256_permute2f128_ps::<0x20>(u2, u6),
                _mm256_permute2f128_ps::<0x20>(u3, u7),
                _mm256_permute2f128_ps::<0x31>(u0, u4),
                _mm256_permute2f128_ps::<0x31>(u1, u5),
                _mm256_permute2f128_ps::<0x31>(u2, u6),
                _mm256_permute2f128_ps::<0x31>(u3, u7),
            ];
            for (q, v) in rows.into_iter().enumerate() {
                _mm256_storeu_ps(dst.add((p + q) * nr + j), v);
            }
        }
        tail_rows(&c, kn..k, dst.add(j), nr);
    }
    // The columns past the last whole block of 8, by 4 x 4 blocks.
    jn + transpose_4x4_blocks(b, j0 + jn, cols - jn, k, nr, &mut out[jn..])
}

/// `dst[p * nr + jj] = c[jj][p]` for the rows `rows` past a transpose's whole blocks.
///
/// # Safety
/// Each column holds those rows; `dst` is writable for them.
#[inline(always)]
unsafe fn tail_rows(c: &[*const f32], rows: std::ops::Range<usize>, dst: *mut f32, nr: usize) {
    for p in rows {
        for (jj, cp) in c.iter().enumerate() {
            *dst.add(p * nr + jj) = *cp.add(p);
        }
    }
}

/// Packs `out[p * nr + j] = b[p, j0 + j]` for column-major `b` (`rs == 1`) by 4 x 4 blocks:
/// every row `p < k - k % 4` of the first `cols - cols % 4` columns, plus those columns'
/// last rows one by one. Returns the columns done.
///
/// # Safety
/// As for [`pack_b_panel`].
unsafe fn transpose_4x4_blocks(
    b: MatRef,
    j0: usize,
    cols: usize,
    k: usize,
    nr: usize,
    out: &mut [f32],
) -> usize {
    let jn = cols - cols % 4;
    let kn = k - k % 4;
    let col = |j: usize| b.ptr.offset((j0 + j) as isize * b.cs);
    let dst = out.as_mut_ptr();
    for j in (0..jn).step_by(4) {
        let c = [col(j), col(j + 1), col(j + 2), col(j + 3)];
        for p in (0..kn).step_by(4) {
            transpose_4x4(c, p, dst.add(p * nr + j), nr);
        }
        tail_rows(&c, kn..k, dst.add(j), nr);
    }
    jn
}

/// `dst[q * ld + jj] = c[jj][p + q]` for `q, jj < 4`.
#[inline(always)]
unsafe fn transpose_4x4(c: [*const f32; 4], p: usize, dst: *mut f32, ld: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SSE is part of x86-64's baseline.
        let r0 = _mm_loadu_ps(c[0].add(p));
        let r1 = _mm_loadu_ps(c[1].add(p));
        let r2 = _mm_loadu_ps(c[2].add(p));
        let r3 = _mm_loadu_ps(c[3].add(p));
        let t0 = _mm_unpacklo_ps(r0, r1);
        let t1 = _mm_unpacklo_ps(r2, r3);
        let t2 = _mm_unpackhi_ps(r0, r1);
        let t3 = _mm_unpackhi_ps(r2, r3);
        _mm_storeu_ps(dst, _mm_movelh_ps(t0, t1));
        _mm_storeu_ps(dst.add(ld), _mm_movehl_ps(t1, t0));
        _mm_storeu_ps(dst.add(2 * ld), _mm_movelh_ps(t2, t3));
        _mm_storeu_ps(dst.add(3 * ld), _mm_movehl_ps(t3, t2));
    }
    #[cfg(not(target_arch = "x86_64"))]
    for q in 0..4 {
        for jj in 0..4 {
            *dst.add(q * ld + jj) = *c[jj].add(p + q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_hold_the_block_and_zeros() {
        // a is 3 x 2 row-major: [[1, 2], [3, 4], [5, 6]].
        let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut out = [9.0f32; 8];
        unsafe { pack_a_panel(MatRef::rows(a.as_ptr(), 2), 1, 2, 2, 4, &mut out) };
        assert_eq!(out, [3.0, 5.0, 0.0, 0.0, 4.0, 6.0, 0.0, 0.0]);
        // The same matrix read transposed (2 x 3) as B, columns 1..3.
        let bt = MatRef {
            ptr: a.as_ptr(),
            rs: 1,
            cs: 2,
        };
        let mut out = [9.0f32; 8];
        unsafe { pack_b_panel(bt, 1, 2, 2, 4, &mut out) };
        assert_eq!(out, [3.0, 5.0, 0.0, 0.0, 4.0, 6.0, 0.0, 0.0]);
        let mut out = [9.0f32; 6];
        unsafe { pack_b_panel(MatRef::rows(a.as_ptr(), 2), 0, 2, 3, 2, &mut out) };
        assert_eq!(out, a);
    }

    #[test]
    fn transposed_operands_pack_like_the_element_rule() {
        // Odd sizes around the 4 x 4 and 8 x 8 blocks, column-major and row-major, for A
        // and B.
        for (rows, cols) in [(1, 1), (3, 5), (4, 4), (7, 9), (17, 13), (19, 14), (35, 9)] {
            let data: Vec<f32> = (0..rows * cols).map(|v| v as f32 + 0.5).collect();
            for (rs, cs) in [(1, rows), (cols, 1)] {
                let m = MatRef {
                    ptr: data.as_ptr(),
                    rs: rs as isize,
                    cs: cs as isize,
                };
                // As B: k = rows, columns j0 = 1.. in a panel of 16.
                if cols > 1 {
                    let (nr, n) = (16, (cols - 1).min(16));
                    let mut out = vec![9.0f32; rows * nr];
                    unsafe { pack_b_panel(m, 1, n, rows, nr, &mut out) };
                    for p in 0..rows {
                        for j in 0..nr {
                            let want = if j < n {
                                unsafe { m.at(p, 1 + j) }
                            } else {
                                0.0
                            };
                            assert_eq!(
                                out[p * nr + j],
                                want,
                                "B {rows}x{cols} ({rs},{cs}) p{p} j{j}"
                            );
                        }
                    }
                }
                // As A: k = cols, rows 0.. in a panel of 6.
                let (mr, r) = (6, rows.min(6));
                let mut out = vec![9.0f32; cols * mr];
                unsafe { pack_a_panel(m, 0, r, cols, mr, &mut out) };
                for p in 0..cols {
                    for i in 0..mr {
                        let want = if i < r { unsafe { m.at(i, p) } } else { 0.0 };
                        assert_eq!(
                            out[p * mr + i],
                            want,
                            "A {rows}x{cols} ({rs},{cs}) p{p} i{i}"
                        );
                    }
                }
            }
        }
    }
}
