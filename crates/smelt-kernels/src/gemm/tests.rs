use super::*;
use crate::isa_tests;
use crate::testing::rand_vec;

/// The plain product in f64, for checking.
fn naive(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f64> {
    let mut c = vec![0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = a[i * k + p] as f64;
            for j in 0..n {
                c[i * n + j] += x * b[p * n + j] as f64;
            }
        }
    }
    c
}

fn check(kern: &Kernels, m: usize, n: usize, k: usize, packed: bool, threads: usize) {
    let a = rand_vec(m * k, 1 + m as u64);
    let b = rand_vec(k * n, 2 + n as u64);
    let want = naive(m, n, k, &a, &b);
    let pool = crate::pool::global();
    let pa;
    let pb;
    let (lhs, rhs) = if packed {
        pa = PackedA::new(&kern.micro, m, k, &a, k, 1);
        pb = PackedB::new(&kern.micro, k, n, &b, n, 1);
        (Lhs::Packed(&pa), Rhs::Packed(&pb))
    } else {
        (
            Lhs::Strided(MatRef::rows(a.as_ptr(), k), Batches::Stride(0)),
            Rhs::Strided(MatRef::rows(b.as_ptr(), n), Batches::Stride(0)),
        )
    };
    let mut c = vec![f32::NAN; m * n];
    let sink = StoreC {
        c: c.as_mut_ptr(),
        ldc: n,
        batch_stride: 0,
    };
    let g = Gemm {
        batch: 1,
        m,
        n,
        k,
        a: lhs,
        b: rhs,
    };
    unsafe { gemm(kern, pool, threads, &g, &sink) };
    for (i, (&x, &w)) in c.iter().zip(&want).enumerate() {
        let tol = 1e-5 * (k as f64).sqrt() * (1.0 + w.abs());
        assert!(
            (x as f64 - w).abs() <= tol,
            "{} {m}x{n}x{k} packed={packed} t={threads}: C[{i}] = {x}, want {w}",
            kern.isa
        );
    }
}

isa_tests!(every_edge_row_count, |kern: &Kernels| {
    // A last row panel of every height the micro-kernel family has, full tiles before it.
    let mr = kern.micro.mr;
    for rows in 1..=mr {
        check(kern, 2 * mr + rows, 37, 29, true, 1);
        check(kern, 2 * mr + rows, 37, 29, false, 2);
    }
});

isa_tests!(every_edge_column_count, |kern: &Kernels| {
    // A last column panel of every width (half-width kernels up to nr / 2), beside full and
    // short row panels.
    let (mr, nr) = (kern.micro.mr, kern.micro.nr);
    for cols in 1..=nr {
        check(kern, 2 * mr + 1 + cols % mr, 2 * nr + cols, 31, true, 1);
        check(kern, mr, nr + cols, 17, false, 2);
    }
});

isa_tests!(shallow_rows_outer, |kern: &Kernels| {
    // k <= SHALLOW_K, n >= SHALLOW_MIN_N with B read in place: row panels outer within
    // chunks of column panels, several chunks (past a_block_bytes of B) and a short last
    // one, a partial last panel.
    let (mr, nr) = (kern.micro.mr, kern.micro.nr);
    let k = 16;
    let chunk_cols = a_block_bytes() / (k * nr * 4) * nr;
    let n = (2 * chunk_cols).max(SHALLOW_MIN_N) + 3 * nr + 7;
    for threads in [1, 2] {
        check(kern, 3 * mr + 5, n, k, false, threads);
        check(kern, 2 * mr, SHALLOW_MIN_N + 1, SHALLOW_K, false, threads);
    }
});

isa_tests!(odd_sizes, |kern: &Kernels| {
    for &(m, n, k) in &[
        (1, 1, 1),
        (1, 3, 17),
        (3, 17, 1),
        (17, 63, 3),
        (63, 17, 63),
        (7, 1000, 13),
        (1000, 3, 17),
        (64, 64, 0),
        (100, 130, 257),
    ] {
        for packed in [false, true] {
            for threads in [1, 2, 3] {
                check(kern, m, n, k, packed, threads);
            }
        }
    }
});

isa_tests!(strided_and_batched, |kern: &Kernels| {
    // A read transposed from a k x m buffer, B transposed from n x k, 3 batches.
    let (batch, m, n, k) = (3, 5, 19, 11);
    let at = rand_vec(batch * k * m, 7);
    let bt = rand_vec(batch * n * k, 8);
    let mut c = vec![0f32; batch * m * n];
    let g = Gemm {
        batch,
        m,
        n,
        k,
        a: Lhs::Strided(
            MatRef {
                ptr: at.as_ptr(),
                rs: 1,
                cs: m as isize,
            },
            Batches::Stride((k * m) as isize),
        ),
        b: Rhs::Strided(
            MatRef {
                ptr: bt.as_ptr(),
                rs: 1,
                cs: k as isize,
            },
            Batches::Stride((n * k) as isize),
        ),
    };
    let sink = StoreC {
        c: c.as_mut_ptr(),
        ldc: n,
        batch_stride: m * n,
    };
    unsafe { gemm(kern, crate::pool::global(), 2, &g, &sink) };
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k)
                    .map(|p| at[bi * k * m + p * m + i] as f64 * bt[bi * n * k + j * k + p] as f64)
                    .sum();
                let got = c[bi * m * n + i * n + j] as f64;
                assert!(
                    (got - want).abs() < 1e-4,
                    "{} batch {bi} ({i},{j})",
                    kern.isa
                );
            }
        }
    }
});

/// One product of batch 1 into a fresh row-major C (NaN where nothing was stored).
fn product(kern: &Kernels, threads: usize, g: &Gemm) -> Vec<f32> {
    let mut c = vec![f32::NAN; g.m * g.n];
    let sink = StoreC {
        c: c.as_mut_ptr(),
        ldc: g.n,
        batch_stride: 0,
    };
    unsafe { gemm(kern, crate::pool::global(), threads, g, &sink) };
    c
}

isa_tests!(sliver_row_panels_spread_evenly, |kern: &Kernels| {
    // A packed at run time (read transposed) whose last row panel would hold 1 to 3 rows:
    // the rows are spread over the same panels (49 pixel rows: 10, 10, 10, 10, 9 on
    // AVX-512), and every element still matches the plain sum, at 1 and 2 threads.
    let mr = kern.micro.mr;
    for m in [mr + 1, 2 * mr + 2, 4 * mr + 1, 4 * mr + 3, 8 * mr + 1] {
        assert!(even_row_panels(m, mr) || m.div_ceil(mr) > 8, "{m} rows");
        let (n, k) = (45, 37);
        let at = rand_vec(k * m, 11 + m as u64);
        let b = rand_vec(k * n, 12);
        for threads in [1, 2] {
            let g = Gemm {
                batch: 1,
                m,
                n,
                k,
                a: Lhs::Strided(
                    MatRef {
                        ptr: at.as_ptr(),
                        rs: 1,
                        cs: m as isize,
                    },
                    Batches::Stride(0),
                ),
                b: Rhs::Strided(MatRef::rows(b.as_ptr(), n), Batches::Stride(0)),
            };
            let c = product(kern, threads, &g);
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k)
                        .map(|p| at[p * m + i] as f64 * b[p * n + j] as f64)
                        .sum();
                    let got = c[i * n + j] as f64;
                    assert!(
                        (got - want).abs() <= 1e-5 * (1.0 + want.abs()) * 8.0,
                        "{} {m} rows, t={threads}: C[{i},{j}] = {got}, want {want}",
                        kern.isa
                    );
                }
            }
        }
    }
});

isa_tests!(same_result_for_any_thread_count, |kern: &Kernels| {
    let (m, n, k) = (77, 301, 129);
    let a = rand_vec(m * k, 3);
    let b = rand_vec(k * n, 4);
    let run = |threads: usize| {
        let g = Gemm {
            batch: 1,
            m,
            n,
            k,
            a: Lhs::Strided(MatRef::rows(a.as_ptr(), k), Batches::Stride(0)),
            b: Rhs::Strided(MatRef::rows(b.as_ptr(), n), Batches::Stride(0)),
        };
        product(kern, threads, &g)
    };
    let one = run(1);
    for t in [2, 3, 8] {
        assert!(one
            .iter()
            .zip(run(t))
            .all(|(x, y)| x.to_bits() == y.to_bits()));
    }
});

isa_tests!(aliasing_row_stride_copies_a, |kern: &Kernels| {
    // k = 1024: A's rows sit 4 KiB apart. Where they crowd an L1 set (rows_alias), or when
    // forced here, tasks copy their row blocks to a spread stride; either way the result
    // must match the oracle and, bit for bit, the pre-packed A's at any thread count.
    let (m, n, k) = (25 * kern.micro.mr + 5, 5 * kern.micro.nr + 7, 1024);
    let a = rand_vec(m * k, 5);
    let b = rand_vec(k * n, 6);
    let pa = PackedA::new(&kern.micro, m, k, &a, k, 1);
    let pb = PackedB::new(&kern.micro, k, n, &b, n, 1);
    let run = |lhs: Lhs, threads: usize| {
        let mut c = vec![0f32; m * n];
        let g = Gemm {
            batch: 1,
            m,
            n,
            k,
            a: lhs,
            b: Rhs::Packed(&pb),
        };
        let sink = StoreC {
            c: c.as_mut_ptr(),
            ldc: n,
            batch_stride: 0,
        };
        unsafe { gemm(kern, crate::pool::global(), threads, &g, &sink) };
        c
    };
    let want = run(Lhs::Packed(&pa), 1);
    for force in [false, true] {
        super::FORCE_A_COPY.with(|f| f.set(force));
        for threads in [1, 2] {
            check(kern, m, n, k, false, threads);
        }
        for t in [1, 2, 3] {
            let got = run(
                Lhs::Strided(MatRef::rows(a.as_ptr(), k), Batches::Stride(0)),
                t,
            );
            assert!(want
                .iter()
                .zip(&got)
                .all(|(x, y)| x.to_bits() == y.to_bits()));
        }
    }
    super::FORCE_A_COPY.with(|f| f.set(false));
});

#[test]
fn row_strides_that_alias() {
    // 12 rows, sets every 4 KiB: 4 and 8 KiB strides put all on one set; 2, 1.5 and 6 KiB
    // spread them over 2, 8 and 2 sets.
    assert_eq!(rows_per_set(1024, 12, 4096), 12);
    assert_eq!(rows_per_set(2048, 12, 4096), 12);
    assert_eq!(rows_per_set(512, 12, 4096), 6);
    assert_eq!(rows_per_set(384, 12, 4096), 2);
    assert_eq!(rows_per_set(1536, 12, 4096), 6);
    assert_eq!(rows_per_set(100, 12, 4096), 1);
    let (period, ways) = crate::isa::l1d_geometry();
    assert_eq!(rows_alias(1024, 12), rows_per_set(1024, 12, period) > ways);
    assert!(!rows_alias(unaliased_stride(1024, 12) as isize, 12));
    assert!(unaliased_stride(1000, 12) >= 1000);
}

isa_tests!(warm_kernels_match_the_plain_ones, |kern: &Kernels| {
    // A warm kernel (no B prefetches) computes every row count bit for bit like the plain
    // one, on a packed A and B and on a row-major B read in place, storing and accumulating.
    let (mr, nr) = (kern.micro.mr, kern.micro.nr);
    let k = 37;
    let a = rand_vec(k * mr, 21);
    let b = rand_vec(k * nr * 2, 22);
    for rows in 1..=mr {
        for (bs, acc) in [(nr, false), (2 * nr, false), (nr, true)] {
            let run = |f: micro::MicroFn| {
                let mut t = rand_vec(mr * nr, 23);
                // SAFETY: A holds k steps of mr floats, B k rows `bs` apart of nr floats,
                // the tile mr rows of nr.
                unsafe {
                    f(
                        k,
                        a.as_ptr(),
                        1,
                        mr as isize,
                        b.as_ptr(),
                        bs as isize,
                        t.as_mut_ptr(),
                        nr,
                        acc,
                    )
                };
                t
            };
            let want = run(kern.micro.for_rows(rows));
            let got = run(kern.micro.warm[rows - 1]);
            assert_eq!(
                got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                "{} rows={rows} bs={bs} acc={acc}",
                kern.isa
            );
        }
    }
});

/// A product of half-precision weights (A, B or both) against the plain product of the
/// widened values.
fn check_half(
    kern: &Kernels,
    m: usize,
    n: usize,
    k: usize,
    kind: crate::half::Half,
    threads: usize,
) {
    use crate::half::{Half, HalfPanels};
    let bits = |v: &[f32]| -> Vec<u16> {
        v.iter()
            .map(|&x| match kind {
                Half::Bf16 => ::half::bf16::from_f32(x).to_bits(),
                Half::F16 => ::half::f16::from_f32(x).to_bits(),
            })
            .collect()
    };
    let wide = |h: &[u16]| -> Vec<f32> {
        let mut o = vec![0f32; h.len()];
        unsafe { crate::half::widen_portable(kind, h.as_ptr(), o.as_mut_ptr(), h.len()) };
        o
    };
    let (ah, bh) = (
        bits(&rand_vec(m * k, 5 + m as u64)),
        bits(&rand_vec(k * n, 6 + n as u64)),
    );
    let want = naive(m, n, k, &wide(&ah), &wide(&bh));
    // A row-major m x k: as panels it is the k x m matrix read with strides (1, k).
    let pa = HalfPanels::new(kern, kind, kern.micro.mr, k, m, &ah, 1, k);
    let pb = HalfPanels::new(kern, kind, kern.micro.nr, k, n, &bh, n, 1);
    let af = wide(&ah);
    for (half_a, half_b) in [(true, true), (true, false), (false, true)] {
        let bf = wide(&bh);
        let lhs = if half_a {
            Lhs::Half(&pa)
        } else {
            Lhs::Strided(MatRef::rows(af.as_ptr(), k), Batches::Stride(0))
        };
        let rhs = if half_b {
            Rhs::Panels(&pb)
        } else {
            Rhs::Strided(MatRef::rows(bf.as_ptr(), n), Batches::Stride(0))
        };
        let mut c = vec![f32::NAN; m * n];
        let sink = StoreC {
            c: c.as_mut_ptr(),
            ldc: n,
            batch_stride: 0,
        };
        let g = Gemm {
            batch: 1,
            m,
            n,
            k,
            a: lhs,
            b: rhs,
        };
        unsafe { gemm(kern, crate::pool::global(), threads, &g, &sink) };
        for (i, (&x, &w)) in c.iter().zip(&want).enumerate() {
            let tol = 1e-5 * (k as f64).sqrt() * (1.0 + w.abs());
            assert!(
                (x as f64 - w).abs() <= tol,
                "{} {kind:?} {m}x{n}x{k} a={half_a} b={half_b} t={threads}: C[{i}] = {x}, want {w}",
                kern.isa
            );
        }
    }
}

isa_tests!(half_weights, |kern: &Kernels| {
    use crate::half::Half;
    let (mr, nr) = (kern.micro.mr, kern.micro.nr);
    for kind in [Half::Bf16, Half::F16] {
        check_half(kern, 3 * mr + 1, 2 * nr + 3, 37, kind, 1);
        check_half(kern, mr - 1, nr + 1, 300, kind, 2);
        check_half(kern, 7 * mr, 5 * nr, 64, kind, 2);
    }
});
