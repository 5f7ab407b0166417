//! Matrix-multiply loops: f32, f64 and wrapping-i64 products in the plain row-times-rows
//! order (the oracle for the fast GEMM in smelt-kernels, which shares nothing with them).

/// `C[m x n] (+)= A[m x k] * B[k x n]`, all row-major with leading dimensions `lda`, `ldb`, `ldc`:
/// the plain loop (row of A times rows of B, accumulated in f32 in order of k), no SIMD
/// and no threads. When `accumulate` is false C is overwritten.
#[allow(clippy::too_many_arguments)]
pub fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
) {
    for i in 0..m {
        let crow = &mut c[i * ldc..i * ldc + n];
        if !accumulate {
            crow.fill(0.0);
        }
        for p in 0..k {
            let aip = a[i * lda + p];
            for (cv, bv) in crow.iter_mut().zip(&b[p * ldb..p * ldb + n]) {
                *cv += aip * bv;
            }
        }
    }
}

/// `C[m x n] += A[m x k] * B[k x n]` in f64, row-major contiguous.
pub fn dgemm(m: usize, n: usize, k: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
    for i in 0..m {
        let crow = &mut c[i * n..(i + 1) * n];
        for p in 0..k {
            let aip = a[i * k + p];
            for (cv, bv) in crow.iter_mut().zip(&b[p * n..(p + 1) * n]) {
                *cv += aip * bv;
            }
        }
    }
}

/// `C[m x n] += A[m x k] * B[k x n]` with wrapping i64 arithmetic, row-major contiguous.
pub fn igemm(m: usize, n: usize, k: usize, a: &[i64], b: &[i64], c: &mut [i64]) {
    for i in 0..m {
        let crow = &mut c[i * n..(i + 1) * n];
        for p in 0..k {
            let aip = a[i * k + p];
            for (cv, bv) in crow.iter_mut().zip(&b[p * n..(p + 1) * n]) {
                *cv = cv.wrapping_add(aip.wrapping_mul(*bv));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sgemm_matches_naive() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (2, 40, 7),
            (1, 5000, 1000),
            (7, 17, 5),
            (13, 33, 300),
            (40, 20, 10),
            (200, 300, 100),
            (8, 3000, 300),
        ] {
            let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 13) as f32 - 6.0).collect();
            let mut c = vec![1f32; m * n];
            sgemm(m, n, k, &a, k, &b, n, &mut c, n, false);
            for i in 0..m {
                for j in 0..n {
                    let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
                    assert_eq!(c[i * n + j], want, "{m}x{n}x{k} at {i},{j}");
                }
            }
        }
    }
}
