//! The SGEMM benchmark: smelt's packed GEMM on one shape, with its weights packed once (as a
//! plan packs them) and an optional fused epilogue, against the machine's FMA peak.

use smelt_kernels::epilogue::{Act, Fused, FusedSink, RowMajor, Vector};
use smelt_kernels::gemm::{gemm, Batches, Gemm, Lhs, MatRef, PackedB, Rhs, StoreC, TileSink};
use smelt_kernels::{kernels, pool};
use std::time::Instant;

/// What one SGEMM measurement found.
#[derive(Debug, Clone)]
pub struct GemmRate {
    /// Threads used.
    pub threads: usize,
    /// Best and median seconds per product over the timed runs.
    pub best_s: f64,
    /// Median seconds.
    pub median_s: f64,
    /// GFLOP/s at the median (2 m n k flops per product).
    pub gflops: f64,
}

/// Measures `C = A B` for an `m x k` A read in place and a `k x n` B packed ahead, with the
/// epilogue `act(C + bias)` fused when `epilogue` is given, for about `seconds`.
pub fn measure(
    m: usize,
    n: usize,
    k: usize,
    threads: usize,
    epilogue: Option<Act>,
    seconds: f64,
) -> GemmRate {
    let kern = kernels();
    let a: Vec<f32> = (0..m * k).map(|i| ((i % 17) as f32 - 8.0) / 16.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i % 13) as f32 - 6.0) / 16.0).collect();
    let bias: Vec<f32> = (0..n).map(|i| (i % 7) as f32 / 8.0).collect();
    let mut c = vec![0f32; m * n];
    let pb = PackedB::new(&kern.micro, k, n, &b, n, 1);
    let g = Gemm {
        batch: 1,
        m,
        n,
        k,
        a: Lhs::Strided(MatRef::rows(a.as_ptr(), k), Batches::Stride(0)),
        b: Rhs::Packed(&pb),
    };
    let store = StoreC {
        c: c.as_mut_ptr(),
        ldc: n,
        batch_stride: 0,
    };
    let fused = FusedSink {
        epi: Fused {
            alpha: 1.0,
            row_bias: None,
            col_bias: Some(Vector {
                ptr: bias.as_ptr(),
                batch: &[0],
                step: 1,
            }),
            act1: epilogue.unwrap_or(Act::None),
            scale: None,
            shift: None,
            residual: None,
            act2: Act::None,
            out: RowMajor {
                ptr: c.as_mut_ptr(),
                batch: &[0],
                rs: n as isize,
                cs: 1,
            },
        },
        finish: kern.finish,
    };
    let sink: &dyn TileSink = if epilogue.is_some() { &fused } else { &store };
    let p = pool::global();
    // SAFETY: A, B and C are live vectors of the product's sizes for the whole measurement.
    let run = || unsafe { gemm(kern, p, threads, &g, sink) };
    for _ in 0..3 {
        run();
    }
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (start.elapsed().as_secs_f64() < seconds && times.len() < 10_000) {
        let t = Instant::now();
        run();
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let median_s = times[times.len() / 2];
    GemmRate {
        threads,
        best_s: times[0],
        median_s,
        gflops: 2.0 * (m * n * k) as f64 / median_s / 1e9,
    }
}
