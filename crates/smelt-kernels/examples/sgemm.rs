//! SGEMM rate check: `cargo run --release -p smelt-kernels --example sgemm -- M N K THREADS [packed|gelu|bias]`.
use smelt_kernels::epilogue::{Act, Fused, FusedSink, RowMajor, Vector};
use smelt_kernels::gemm::*;
use smelt_kernels::{kernels, pool};
use std::time::Instant;

fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .take(4)
        .map(|s| s.parse().unwrap())
        .collect();
    let mode = std::env::args().nth(5).unwrap_or_default();
    let (m, n, k, t) = (a[0], a[1], a[2], a[3]);
    let kern = kernels();
    let av = vec![0.5f32; m * k];
    let bv = vec![0.25f32; k * n];
    let bias = vec![0.1f32; n];
    let mut c = vec![0f32; m * n];
    let pb = PackedB::new(&kern.micro, k, n, &bv, n, 1);
    let pa = PackedA::new(&kern.micro, m, k, &av, k, 1);
    let packed = mode == "packed";
    let g = Gemm {
        batch: 1,
        m,
        n,
        k,
        a: if packed {
            Lhs::Packed(&pa)
        } else {
            Lhs::Strided(MatRef::rows(av.as_ptr(), k), Batches::Stride(0))
        },
        b: if mode.is_empty() {
            Rhs::Strided(MatRef::rows(bv.as_ptr(), n), Batches::Stride(0))
        } else {
            Rhs::Packed(&pb)
        },
    };
    let store = StoreC {
        c: c.as_mut_ptr(),
        ldc: n,
        batch_stride: 0,
    };
    let act = if mode == "gelu" { Act::Gelu } else { Act::None };
    let fused = FusedSink {
        epi: Fused {
            alpha: 1.0,
            row_bias: None,
            col_bias: Some(Vector {
                ptr: bias.as_ptr(),
                batch: &[0],
                step: 1,
            }),
            act1: act,
            scale: None,
            shift: None,
            residual: None,
            act2: Act::None,
            out: RowMajor {
                ptr: c.as_mut_ptr(),
                batch: &[0],
                rs: n as isize,
            },
        },
        finish: kern.finish,
    };
    let sink: &dyn TileSink = if mode == "gelu" || mode == "bias" {
        &fused
    } else {
        &store
    };
    let p = pool::global();
    for _ in 0..3 {
        unsafe { gemm(kern, p, t, &g, sink) };
    }
    let mut best = f64::MAX;
    for _ in 0..20 {
        let s = Instant::now();
        unsafe { gemm(kern, p, t, &g, sink) };
        best = best.min(s.elapsed().as_secs_f64());
    }
    println!(
        "{} {m}x{n}x{k} t{t} {mode}: {:.3} ms, {:.1} GFLOP/s",
        kern.isa,
        best * 1e3,
        2.0 * (m * n * k) as f64 / best / 1e9
    );
}
