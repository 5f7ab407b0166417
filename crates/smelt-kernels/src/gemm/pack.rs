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
        for p in 0..k {
            let src = b.ptr.offset(p as isize * b.rs + j0 as isize);
            let dst = out.as_mut_ptr().add(p * nr);
            std::ptr::copy_nonoverlapping(src, dst, cols);
            std::ptr::write_bytes(dst.add(cols), 0, nr - cols);
        }
    } else {
        if cols < nr {
            out.fill(0.0);
        }
        for j in 0..cols {
            let col = b.ptr.offset((j0 + j) as isize * b.cs);
            for p in 0..k {
                *out.get_unchecked_mut(p * nr + j) = *col.offset(p as isize * b.rs);
            }
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
}
