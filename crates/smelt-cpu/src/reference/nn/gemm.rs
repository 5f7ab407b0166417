//! Matrix-multiply kernels: a packed, register-blocked f32 GEMM (AVX2+FMA when the CPU has it,
//! threads over rows for big products), and plain f64 / wrapping-i64 loops for other types.

/// Rows of the register tile.
const MR: usize = 6;
/// Columns of the register tile.
const NR: usize = 16;
/// Depth of one packed block.
const KC: usize = 256;
/// Rows of one packed A block.
const MC: usize = 96;
/// Columns of one packed B block.
const NC: usize = 2048;

/// `C[m x n] (+)= A[m x k] * B[k x n]`, all row-major with leading dimensions `lda`, `ldb`, `ldc`.
/// When `accumulate` is false C is overwritten.
#[allow(clippy::too_many_arguments)]
pub fn sgemm(m: usize, n: usize, k: usize, a: &[f32], lda: usize, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize, accumulate: bool) {
    if m == 0 || n == 0 {
        return;
    }
    if !accumulate {
        for i in 0..m {
            c[i * ldc..i * ldc + n].fill(0.0);
        }
    }
    if k == 0 {
        return;
    }
    let threads = thread_count(m, n, k);
    if threads <= 1 {
        sgemm_serial(m, n, k, a, lda, b, ldb, c, ldc);
        return;
    }
    // Split the rows of C into contiguous chunks, one per thread (multiples of MR).
    let per = m.div_ceil(threads).div_ceil(MR) * MR;
    std::thread::scope(|s| {
        let mut rest: &mut [f32] = c;
        let mut row = 0;
        while row < m {
            let rows = per.min(m - row);
            let take = if row + rows >= m { rest.len() } else { rows * ldc };
            let (mine, tail) = rest.split_at_mut(take);
            rest = tail;
            let a_part = &a[row * lda..];
            s.spawn(move || sgemm_serial(rows, n, k, a_part, lda, b, ldb, mine, ldc));
            row += rows;
        }
    });
}

fn thread_count(m: usize, n: usize, k: usize) -> usize {
    let work = m as f64 * n as f64 * k as f64;
    if work < 4.0e6 || m < 2 * MR {
        return 1;
    }
    let hw = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    hw.min(m / MR).min((work / 2.0e6) as usize).clamp(1, 64)
}

#[allow(clippy::too_many_arguments)]
fn sgemm_serial(m: usize, n: usize, k: usize, a: &[f32], lda: usize, b: &[f32], ldb: usize, c: &mut [f32], ldc: usize) {
    let fma = has_fma();
    let mut bpack = vec![0f32; KC * NC.min(n.div_ceil(NR) * NR)];
    let mut apack = vec![0f32; MC.min(m.div_ceil(MR) * MR) * KC];
    for jc in (0..n).step_by(NC) {
        let nc = NC.min(n - jc);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            pack_b(&b[pc * ldb + jc..], ldb, kc, nc, &mut bpack);
            for ic in (0..m).step_by(MC) {
                let mc = MC.min(m - ic);
                pack_a(&a[ic * lda + pc..], lda, mc, kc, &mut apack);
                for jr in (0..nc).step_by(NR) {
                    let nr = NR.min(nc - jr);
                    let bp = &bpack[jr * kc..jr * kc + NR * kc];
                    for ir in (0..mc).step_by(MR) {
                        let mr = MR.min(mc - ir);
                        let ap = &apack[ir * kc..ir * kc + MR * kc];
                        let mut acc = [[0f32; NR]; MR];
                        micro(fma, kc, ap, bp, &mut acc);
                        for (r, row) in acc.iter().enumerate().take(mr) {
                            let off = (ic + ir + r) * ldc + jc + jr;
                            for (dst, v) in c[off..off + nr].iter_mut().zip(row) {
                                *dst += v;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Packs `kc x nc` of B into column panels of NR (zero-padded), panel-major then k-major.
fn pack_b(b: &[f32], ldb: usize, kc: usize, nc: usize, out: &mut [f32]) {
    for jr in (0..nc).step_by(NR) {
        let nr = NR.min(nc - jr);
        let panel = &mut out[jr * kc..jr * kc + NR * kc];
        for p in 0..kc {
            let src = &b[p * ldb + jr..p * ldb + jr + nr];
            let dst = &mut panel[p * NR..p * NR + NR];
            dst[..nr].copy_from_slice(src);
            dst[nr..].fill(0.0);
        }
    }
}

/// Packs `mc x kc` of A into row panels of MR (zero-padded), panel-major then k-major.
fn pack_a(a: &[f32], lda: usize, mc: usize, kc: usize, out: &mut [f32]) {
    for ir in (0..mc).step_by(MR) {
        let mr = MR.min(mc - ir);
        let panel = &mut out[ir * kc..ir * kc + MR * kc];
        for p in 0..kc {
            for r in 0..MR {
                panel[p * MR + r] = if r < mr { a[(ir + r) * lda + p] } else { 0.0 };
            }
        }
    }
}

#[inline(always)]
fn micro_body<const FMA: bool>(kc: usize, ap: &[f32], bp: &[f32], acc: &mut [[f32; NR]; MR]) {
    let ap = &ap[..kc * MR];
    let bp = &bp[..kc * NR];
    for (a, b) in ap.chunks_exact(MR).zip(bp.chunks_exact(NR)) {
        for r in 0..MR {
            let ar = a[r];
            for j in 0..NR {
                acc[r][j] = if FMA { ar.mul_add(b[j], acc[r][j]) } else { acc[r][j] + ar * b[j] };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn micro_avx2(kc: usize, ap: &[f32], bp: &[f32], acc: &mut [[f32; NR]; MR]) {
    micro_body::<true>(kc, ap, bp, acc)
}

fn micro(fma: bool, kc: usize, ap: &[f32], bp: &[f32], acc: &mut [[f32; NR]; MR]) {
    #[cfg(target_arch = "x86_64")]
    if fma {
        // SAFETY: `has_fma` checked that the CPU supports AVX2 and FMA.
        unsafe { micro_avx2(kc, ap, bp, acc) };
        return;
    }
    let _ = fma;
    micro_body::<false>(kc, ap, bp, acc)
}

fn has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
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
        for &(m, n, k) in &[(1, 1, 1), (7, 17, 5), (13, 33, 300), (40, 20, 10)] {
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
