//! Roofline microbenchmarks: peak fp32 FMA rate (one core, all cores) and STREAM-triad
//! memory bandwidth (one thread, all threads).

use std::hint::black_box;
use std::time::Instant;

/// Which FMA microkernel ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// 512-bit, 16 independent zmm accumulators.
    Avx512,
    /// 256-bit with FMA3, 12 independent ymm accumulators.
    Avx2Fma,
    /// Portable scalar multiply-add, 8 accumulators.
    Scalar,
}

impl Kernel {
    /// The best kernel this CPU supports (runtime detection); `SMELT_ROOFLINE_KERNEL` =
    /// `avx2` or `scalar` picks a narrower one for comparison.
    pub fn detect() -> Kernel {
        let want = std::env::var("SMELT_ROOFLINE_KERNEL").unwrap_or_default();
        if want == "scalar" {
            return Kernel::Scalar;
        }
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f") && want != "avx2" {
                return Kernel::Avx512;
            }
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                return Kernel::Avx2Fma;
            }
        }
        Kernel::Scalar
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Avx512 => "avx512f",
            Kernel::Avx2Fma => "avx2+fma",
            Kernel::Scalar => "scalar",
        }
    }

    /// Floating-point operations done by one call with `iters` iterations.
    fn flops(self, iters: u64) -> f64 {
        let per_iter = match self {
            Kernel::Avx512 => 16 * 16 * 2,
            Kernel::Avx2Fma => 12 * 8 * 2,
            Kernel::Scalar => 8 * 2,
        };
        iters as f64 * per_iter as f64
    }

    /// Runs the kernel for `iters` iterations; returns a value to keep the work alive.
    fn run(self, iters: u64) -> f32 {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Kernel::Avx512 is only produced by detect() after avx512f was detected
            // at run time, so the target-feature function runs on a CPU that has it.
            Kernel::Avx512 => unsafe { x86::fma_avx512(iters) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Kernel::Avx2Fma is only produced after avx2 and fma were detected.
            Kernel::Avx2Fma => unsafe { x86::fma_avx2(iters) },
            _ => fma_scalar(iters),
        }
    }
}

fn fma_scalar(iters: u64) -> f32 {
    let mut acc = [1.0f32, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7];
    let (a, b) = (black_box(0.999_999f32), black_box(1e-7f32));
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = *x * a + b;
        }
    }
    acc.iter().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// 16 independent FMA chains on zmm registers: enough to cover 4-cycle latency on two
    /// FMA pipes, with registers to spare (32 zmm).
    #[target_feature(enable = "avx512f")]
    pub unsafe fn fma_avx512(iters: u64) -> f32 {
        let a = _mm512_set1_ps(std::hint::black_box(0.999_999));
        let b = _mm512_set1_ps(std::hint::black_box(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); 16];
        for _ in 0..iters {
            for x in acc.iter_mut() {
                *x = _mm512_fmadd_ps(*x, a, b);
            }
        }
        let mut s = acc[0];
        for x in &acc[1..] {
            s = _mm512_add_ps(s, *x);
        }
        _mm512_reduce_add_ps(s)
    }

    /// `iters` iterations of ten dependent one-cycle adds (the loop counter runs alongside).
    pub fn add_chain(iters: u64) {
        let mut x: u64 = 1;
        // SAFETY: plain integer arithmetic on two registers we own; no memory, no stack,
        // flags clobbered as declared by default.
        unsafe {
            std::arch::asm!(
                "2:",
                "add {x}, {x}", "add {x}, {x}", "add {x}, {x}", "add {x}, {x}", "add {x}, {x}",
                "add {x}, {x}", "add {x}, {x}", "add {x}, {x}", "add {x}, {x}", "add {x}, {x}",
                "dec {n}",
                "jnz 2b",
                x = inout(reg) x,
                n = inout(reg) iters => _,
                options(nomem, nostack),
            );
        }
        std::hint::black_box(x);
    }

    /// 12 independent FMA chains on ymm registers (16 available).
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn fma_avx2(iters: u64) -> f32 {
        let a = _mm256_set1_ps(std::hint::black_box(0.999_999));
        let b = _mm256_set1_ps(std::hint::black_box(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); 12];
        for _ in 0..iters {
            for x in acc.iter_mut() {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        let mut s = acc[0];
        for x in &acc[1..] {
            s = _mm256_add_ps(s, *x);
        }
        let mut out = [0f32; 8];
        _mm256_storeu_ps(out.as_mut_ptr(), s);
        out.iter().sum()
    }

    /// Triad with non-temporal 512-bit stores; a scalar head until `a` is 64-byte aligned
    /// and a scalar tail.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn triad_avx512_stream(a: &mut [f64], b: &[f64], c: &[f64], s: f64) {
        let n = a.len().min(b.len()).min(c.len());
        let mut i = 0;
        while i < n && (a.as_ptr().wrapping_add(i) as usize) & 63 != 0 {
            a[i] = b[i] + s * c[i];
            i += 1;
        }
        let vs = _mm512_set1_pd(s);
        while i + 8 <= n {
            // SAFETY: i + 8 <= n bounds all three 8-element accesses; loads are unaligned
            // loads; the store address is 64-byte aligned by the head loop above.
            unsafe {
                let vb = _mm512_loadu_pd(b.as_ptr().add(i));
                let vc = _mm512_loadu_pd(c.as_ptr().add(i));
                _mm512_stream_pd(a.as_mut_ptr().add(i), _mm512_fmadd_pd(vs, vc, vb));
            }
            i += 8;
        }
        _mm_sfence();
        while i < n {
            a[i] = b[i] + s * c[i];
            i += 1;
        }
    }
}

/// The core clock in GHz estimated from a chain of dependent integer adds (one cycle each),
/// best of 50 runs of about 1 ms; `None` off x86-64.
pub fn clock_ghz() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let iters: u64 = 100_000; // 10 adds each: about 1e6 cycles
        let mut best = 0.0f64;
        for _ in 0..50 {
            let t = Instant::now();
            x86::add_chain(iters);
            let dt = t.elapsed().as_secs_f64().max(1e-9);
            best = best.max(10.0 * iters as f64 / dt / 1e9);
        }
        Some(best)
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// Peak fp32 FMA throughput in GFLOP/s with `threads` threads (best of `reps` runs of
/// about `seconds` each).
pub fn fma_gflops(kernel: Kernel, threads: usize, seconds: f64, reps: usize) -> f64 {
    // Calibrate: how many iterations take about `seconds` on one thread.
    let mut iters = 1u64 << 16;
    loop {
        let t = Instant::now();
        black_box(kernel.run(black_box(iters)));
        let dt = t.elapsed().as_secs_f64();
        if dt > 0.05 || iters > 1 << 40 {
            iters = ((iters as f64) * seconds / dt.max(1e-9)).max(1.0) as u64;
            break;
        }
        iters *= 4;
    }
    let threads = threads.max(1);
    let mut best = 0.0f64;
    for _ in 0..reps.max(1) {
        // Each thread times itself; the wall time is first start to last end.
        let barrier = std::sync::Barrier::new(threads);
        let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        let t = Instant::now();
                        black_box(kernel.run(black_box(iters)));
                        (t, Instant::now())
                    })
                })
                .collect();
            hs.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        if let Some(dt) = wall(&spans) {
            best = best.max(kernel.flops(iters) * spans.len() as f64 / dt / 1e9);
        }
    }
    best
}

/// Seconds from the first start to the last end of a set of timed spans.
fn wall(spans: &[(Instant, Instant)]) -> Option<f64> {
    let start = spans.iter().map(|s| s.0).min()?;
    let end = spans.iter().map(|s| s.1).max()?;
    Some((end - start).as_secs_f64().max(1e-9))
}

/// Elements per timed piece of the one-thread triad (1 MiB of each array).
const PIECE: usize = 1 << 17;

/// One-thread STREAM-triad bandwidth in GB/s over arrays of `n` f64: each of `reps` passes
/// is timed in pieces of 1 MiB per array (still streaming from memory, the arrays being far
/// larger than the caches) and the median piece rate is kept, so that time slices lost to
/// other processes on a shared machine do not count against the memory system.
pub fn triad_gbps_one(n: usize, reps: usize) -> f64 {
    let mut a = vec![0.0f64; n];
    let b = vec![1.0f64; n];
    let c = vec![2.0f64; n];
    let scalar = black_box(3.0f64);
    let kind = Triad::detect();
    kind.run(&mut a, &b, &c, scalar); // first touch of `a`
    let mut rates = Vec::new();
    for _ in 0..reps.max(1) {
        for ((a, b), c) in a
            .chunks_mut(PIECE)
            .zip(b.chunks(PIECE))
            .zip(c.chunks(PIECE))
        {
            let t = Instant::now();
            kind.run(a, b, c, scalar);
            let dt = t.elapsed().as_secs_f64().max(1e-9);
            rates.push(24.0 * a.len() as f64 / dt / 1e9);
        }
    }
    black_box(&a);
    crate::stats::median(&rates)
}

/// STREAM-triad bandwidth `a[i] = b[i] + s * c[i]` in GB/s (24 bytes counted per element,
/// as STREAM does) over arrays of `n` f64 with `threads` threads, each on its own chunk;
/// best of `reps` passes, each timed from the first thread's start to the last one's end.
pub fn triad_gbps(n: usize, threads: usize, reps: usize) -> f64 {
    let threads = threads.max(1);
    let mut a = vec![0.0f64; n];
    let mut b = vec![0.0f64; n];
    let mut c = vec![0.0f64; n];
    let chunk = n.div_ceil(threads);
    // First touch from the threads that will use each chunk (NUMA placement).
    std::thread::scope(|s| {
        for ((a, b), c) in a
            .chunks_mut(chunk)
            .zip(b.chunks_mut(chunk))
            .zip(c.chunks_mut(chunk))
        {
            s.spawn(move || {
                a.fill(0.0);
                b.fill(1.0);
                c.fill(2.0);
            });
        }
    });
    let scalar = black_box(3.0f64);
    let mut best = 0.0f64;
    let nt = Triad::detect();
    for _ in 0..reps.max(1) {
        let barrier = std::sync::Barrier::new(a.chunks(chunk).len());
        let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
            let hs: Vec<_> = a
                .chunks_mut(chunk)
                .zip(b.chunks(chunk))
                .zip(c.chunks(chunk))
                .map(|((a, b), c)| {
                    let barrier = &barrier;
                    s.spawn(move || {
                        barrier.wait();
                        let t = Instant::now();
                        nt.run(a, b, c, scalar);
                        (t, Instant::now())
                    })
                })
                .collect();
            hs.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        if let Some(dt) = wall(&spans) {
            best = best.max(24.0 * n as f64 / dt / 1e9);
        }
    }
    black_box(&a);
    best
}

/// The triad loop used: streaming (non-temporal) AVX-512 stores where available, which
/// skip the read-for-ownership of `a` (so the 24 bytes counted are the bytes moved), or
/// plain stores.
#[derive(Debug, Clone, Copy)]
enum Triad {
    Avx512Stream,
    Plain,
}

impl Triad {
    /// Streaming stores where available; `SMELT_ROOFLINE_TRIAD=plain` forces plain stores.
    fn detect() -> Triad {
        if std::env::var("SMELT_ROOFLINE_TRIAD").is_ok_and(|v| v == "plain") {
            return Triad::Plain;
        }
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx512f") {
            return Triad::Avx512Stream;
        }
        Triad::Plain
    }

    fn run(self, a: &mut [f64], b: &[f64], c: &[f64], s: f64) {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Avx512Stream is only chosen after avx512f was detected at run time.
            Triad::Avx512Stream => unsafe { x86::triad_avx512_stream(a, b, c, s) },
            _ => {
                for ((x, y), z) in a.iter_mut().zip(b).zip(c) {
                    *x = y + s * z;
                }
            }
        }
    }
}

/// The roofline: compute peak and memory bandwidth, one core and all cores.
#[derive(Debug, Clone)]
pub struct Roofline {
    /// The FMA kernel used.
    pub kernel: Kernel,
    /// Threads used for the all-core figures.
    pub threads: usize,
    /// fp32 GFLOP/s on one core.
    pub gflops_1: f64,
    /// fp32 GFLOP/s on all cores.
    pub gflops_all: f64,
    /// Triad GB/s on one thread.
    pub triad_gbps_1: f64,
    /// Triad GB/s on all threads.
    pub triad_gbps_all: f64,
    /// Elements per triad array.
    pub triad_elems: usize,
    /// Core clock estimated from dependent adds, GHz.
    pub clock_ghz: Option<f64>,
}

impl Roofline {
    /// Measures the machine with `threads` threads for the all-core figures.
    pub fn measure(threads: usize) -> Roofline {
        let kernel = Kernel::detect();
        let n = 1 << 25; // 3 arrays x 256 MiB: far larger than any cache.
        Roofline {
            kernel,
            threads,
            // Many short runs, best kept: a peak is what the hardware can do when nothing
            // else is scheduled, and short runs often fit between other work's time slices.
            gflops_1: fma_gflops(kernel, 1, 0.001, 300),
            gflops_all: fma_gflops(kernel, threads, 0.002, 150),
            triad_gbps_1: triad_gbps_one(n, 5),
            triad_gbps_all: triad_gbps(n, threads, 20),
            triad_elems: n,
            clock_ghz: clock_ghz(),
        }
    }

    /// One core's fp32 flops per cycle at the estimated clock.
    pub fn flops_per_cycle(&self) -> Option<f64> {
        self.clock_ghz
            .filter(|c| *c > 0.0)
            .map(|c| self.gflops_1 / c)
    }

    /// The figures as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "fma_kernel": self.kernel.name(),
            "threads": self.threads,
            "fp32_gflops": {"one_core": self.gflops_1, "all_cores": self.gflops_all},
            "triad_gb_per_s": {"one_thread": self.triad_gbps_1, "all_threads": self.triad_gbps_all},
            "triad_array_bytes": self.triad_elems * 8,
            "clock_ghz_estimate": self.clock_ghz,
            "fp32_flops_per_cycle": self.flops_per_cycle(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fma_and_triad_give_positive_rates() {
        let k = Kernel::detect();
        assert!(fma_gflops(k, 1, 0.01, 1) > 0.0);
        assert!(fma_gflops(Kernel::Scalar, 2, 0.01, 1) > 0.0);
        assert!(triad_gbps(1 << 16, 2, 1) > 0.0);
        assert!(triad_gbps_one(1 << 18, 1) > 0.0);
        #[cfg(target_arch = "x86_64")]
        assert!(clock_ghz().unwrap() > 0.1);
    }
}
