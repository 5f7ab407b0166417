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
    let threads = thread_count(m, n, k);
    if threads <= 1 || m == 0 || n == 0 || k == 0 {
        sgemm_st(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
        return;
    }
    clear_unless(accumulate, m, n, c, ldc);
    if m >= threads * MR * 2 {
        // Split the rows of C into contiguous chunks, one per thread (multiples of MR).
        let per = m.div_ceil(threads).div_ceil(MR) * MR;
        std::thread::scope(|s| {
            let mut rest: &mut [f32] = c;
            let mut row = 0;
            while row < m {
                let rows = per.min(m - row);
                let take = if row + rows >= m {
                    rest.len()
                } else {
                    rows * ldc
                };
                let (mine, tail) = rest.split_at_mut(take);
                rest = tail;
                let a_part = &a[row * lda..];
                s.spawn(move || sgemm_serial(rows, n, k, a_part, lda, b, ldb, mine, ldc));
                row += rows;
            }
        });
        return;
    }
    // Few rows: split the columns; each thread fills its own block, then it is added into C.
    let per = n.div_ceil(threads).div_ceil(NR) * NR;
    let parts: Vec<(usize, usize, Vec<f32>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(per)
            .map(|j0| {
                let cols = per.min(n - j0);
                s.spawn(move || {
                    let mut buf = vec![0f32; m * cols];
                    sgemm_serial(m, cols, k, a, lda, &b[j0..], ldb, &mut buf, cols);
                    (j0, cols, buf)
                })
            })
            .collect();
        // A worker that panicked re-raises here rather than leaving its block of C unwritten.
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    for (j0, cols, buf) in parts {
        for i in 0..m {
            let dst = &mut c[i * ldc + j0..i * ldc + j0 + cols];
            for (d, v) in dst.iter_mut().zip(&buf[i * cols..(i + 1) * cols]) {
                *d += v;
            }
        }
    }
}

/// Zeroes the `m x n` block of C unless the product accumulates into it.
fn clear_unless(accumulate: bool, m: usize, n: usize, c: &mut [f32], ldc: usize) {
    if !accumulate {
        for i in 0..m {
            c[i * ldc..i * ldc + n].fill(0.0);
        }
    }
}

/// Like [`sgemm`] but never starts threads (for callers that parallelize around it).
#[allow(clippy::too_many_arguments)]
pub fn sgemm_st(
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
    if m == 0 || n == 0 {
        return;
    }
    clear_unless(accumulate, m, n, c, ldc);
    if k > 0 {
        sgemm_serial(m, n, k, a, lda, b, ldb, c, ldc);
    }
}

/// Worker threads worth using for `work` multiply-adds.
pub fn threads_for(work: f64) -> usize {
    if work < 4.0e6 {
        return 1;
    }
    let hw = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    hw.min((work / 2.0e6) as usize).clamp(1, 64)
}

/// Runs `f(task, chunk)` for each `chunk`-sized piece of `out` (task = piece index), spreading
/// contiguous runs of tasks over up to `threads` threads.
pub fn par_chunks<T: Send>(
    out: &mut [T],
    chunk: usize,
    threads: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    let chunk = chunk.max(1);
    let tasks = out.len().div_ceil(chunk);
    let threads = threads.min(tasks).max(1);
    if threads <= 1 {
        for (i, c) in out.chunks_mut(chunk).enumerate() {
            f(i, c);
        }
        return;
    }
    let per = tasks.div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        for (t, part) in out.chunks_mut(per * chunk).enumerate() {
            s.spawn(move || {
                for (i, c) in part.chunks_mut(chunk).enumerate() {
                    f(t * per + i, c);
                }
            });
        }
    });
}

fn thread_count(m: usize, n: usize, k: usize) -> usize {
    let t = threads_for(m as f64 * n as f64 * k as f64);
    // Each thread needs at least a register tile's worth of rows or columns.
    t.min((m / MR).max(n / NR)).max(1)
}

#[allow(clippy::too_many_arguments)]
fn sgemm_serial(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    ldc: usize,
) {
    if m <= 2 {
        // Matrix-vector shapes: stream B once with an axpy loop instead of packing.
        for i in 0..m {
            let crow = &mut c[i * ldc..i * ldc + n];
            for p in 0..k {
                let aip = a[i * lda + p];
                for (cv, bv) in crow.iter_mut().zip(&b[p * ldb..p * ldb + n]) {
                    *cv += aip * bv;
                }
            }
        }
        return;
    }
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

/// The portable register tile (auto-vectorized).
fn micro_body(kc: usize, ap: &[f32], bp: &[f32], acc: &mut [[f32; NR]; MR]) {
    let ap = &ap[..kc * MR];
    let bp = &bp[..kc * NR];
    for (a, b) in ap.chunks_exact(MR).zip(bp.chunks_exact(NR)) {
        for r in 0..MR {
            let ar = a[r];
            for j in 0..NR {
                acc[r][j] += ar * b[j];
            }
        }
    }
}

/// The 6x16 register tile with AVX2 FMA intrinsics: 12 accumulators stay in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn micro_avx2(kc: usize, ap: &[f32], bp: &[f32], acc: &mut [[f32; NR]; MR]) {
    use std::arch::x86_64::*;
    assert!(ap.len() >= kc * MR && bp.len() >= kc * NR);
    let (a, b) = (ap.as_ptr(), bp.as_ptr());
    let mut c = [_mm256_setzero_ps(); 12];
    for p in 0..kc {
        // SAFETY: p < kc and the asserts above bound every read.
        let (b0, b1) = unsafe {
            (
                _mm256_loadu_ps(b.add(p * NR)),
                _mm256_loadu_ps(b.add(p * NR + 8)),
            )
        };
        macro_rules! row {
            ($r:expr) => {{
                let ar = _mm256_set1_ps(unsafe { *a.add(p * MR + $r) });
                c[2 * $r] = _mm256_fmadd_ps(ar, b0, c[2 * $r]);
                c[2 * $r + 1] = _mm256_fmadd_ps(ar, b1, c[2 * $r + 1]);
            }};
        }
        row!(0);
        row!(1);
        row!(2);
        row!(3);
        row!(4);
        row!(5);
    }
    for r in 0..MR {
        // SAFETY: each row of `acc` holds NR = 16 floats.
        unsafe {
            _mm256_storeu_ps(acc[r].as_mut_ptr(), c[2 * r]);
            _mm256_storeu_ps(acc[r].as_mut_ptr().add(8), c[2 * r + 1]);
        }
    }
}

fn micro(fma: bool, kc: usize, ap: &[f32], bp: &[f32], acc: &mut [[f32; NR]; MR]) {
    #[cfg(target_arch = "x86_64")]
    if fma {
        // SAFETY: `has_fma` checked that the CPU supports AVX2 and FMA.
        unsafe { micro_avx2(kc, ap, bp, acc) };
        return;
    }
    let _ = fma;
    micro_body(kc, ap, bp, acc)
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
        // The last two shapes take the threaded row and column splits.
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

#[cfg(test)]
mod par_tests {
    use super::*;

    #[test]
    fn par_chunks_visits_every_task_once() {
        let mut v = vec![0usize; 103];
        par_chunks(&mut v, 10, 4, |t, c| c.iter_mut().for_each(|x| *x += t + 1));
        for (i, x) in v.iter().enumerate() {
            assert_eq!(*x, i / 10 + 1);
        }
    }
}

#[cfg(test)]
mod bench {
    use super::*;

    /// `cargo test --release -p smelt-cpu sgemm_speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn sgemm_speed() {
        for &(m, n, k) in &[
            (64, 3136, 576),
            (256, 784, 1152),
            (512, 196, 4608),
            (1024, 1536, 384),
            (2048, 49, 512),
        ] {
            let a = vec![0.5f32; m * k];
            let b = vec![0.25f32; k * n];
            let mut c = vec![0f32; m * n];
            let t = std::time::Instant::now();
            let reps = 5;
            for _ in 0..reps {
                sgemm(m, n, k, &a, k, &b, n, &mut c, n, false);
            }
            let s = t.elapsed().as_secs_f64() / reps as f64;
            println!(
                "{m}x{n}x{k}: {:.2} ms, {:.1} GFLOP/s",
                s * 1e3,
                2.0 * (m * n * k) as f64 / s / 1e9
            );
        }
    }
}
