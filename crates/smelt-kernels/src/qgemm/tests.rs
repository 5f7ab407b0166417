//! Each integer micro-kernel the CPU runs against plain loops, on odd sizes (row and
//! column remainders, depths not a multiple of four, padding, strides, zero points at the
//! range's ends).

use super::*;
use crate::gemm::StoreC;
use crate::pool::ThreadPool;
use crate::testing::square_conv;

/// Every integer micro-kernel this CPU can run.
fn micros() -> Vec<QMicro> {
    let mut v = vec![micro::portable_micro()];
    #[cfg(target_arch = "x86_64")]
    {
        if Isa::Avx2.is_supported() {
            v.push(micro::x86::avx2_micro());
        }
        if micro::x86::has_vnni() {
            v.push(micro::x86::vnni_micro());
        }
        if micro::x86::has_avx_vnni() {
            v.push(micro::x86::avx_vnni_micro());
        }
    }
    v
}

/// Deterministic bytes.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

/// (With AMX-INT8, full blocks of 32 rows of depth a multiple of 64 run on the tiles:
/// the 33- and 97-row cases.)
#[test]
fn matmul_matches_plain_loops() {
    let pool = ThreadPool::new(2, std::time::Duration::from_micros(50));
    for mi in micros() {
        for &(m, k, n, za) in &[
            (1, 4, 1, 0u8),
            (13, 36, 45, 128),
            (33, 64, 70, 255),
            (8, 384, 33, 3),
            (97, 128, 65, 17),
        ] {
            let a = bytes(m * k, 1);
            // Full-range weights, and reduced-range ones (the narrow kernels), with the
            // extremes of both present.
            for narrow in [false, true] {
                let mut b: Vec<i8> = bytes(k * n, 2)
                    .into_iter()
                    .map(|v| if narrow { (v as i8) >> 1 } else { v as i8 })
                    .collect();
                b[0] = if narrow { -64 } else { -128 };
                let packed = QPackedCols::new(&b, k, n, mi.nr);
                assert_eq!(packed.narrow, narrow);
                let mut got = vec![f32::NAN; m * n];
                let sink = StoreC {
                    c: got.as_mut_ptr(),
                    ldc: n,
                    batch_stride: 0,
                };
                let mut corr = Vec::new();
                // SAFETY: a holds m rows of k.
                unsafe {
                    qmatmul(
                        &mi,
                        &pool,
                        2,
                        a.as_ptr(),
                        m,
                        k,
                        za,
                        &packed,
                        &mut corr,
                        0,
                        &sink,
                    )
                };
                for i in 0..m {
                    for j in 0..n {
                        let want: i32 = (0..k)
                            .map(|t| (a[i * k + t] as i32 - za as i32) * b[t * n + j] as i32)
                            .sum();
                        assert_eq!(
                            got[i * n + j],
                            want as f32,
                            "{} m{m} k{k} n{n} narrow {narrow} at ({i},{j})",
                            mi.name
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn conv_matches_plain_loops() {
    let pool = ThreadPool::new(2, std::time::Duration::from_micros(50));
    let geoms = [
        // (c, h, w, kh, kw, stride, dilation, pad, m)
        (3, 9, 11, 3, 3, 1, 1, 1, 10),
        (5, 8, 8, 1, 1, 1, 1, 0, 17),
        (4, 13, 10, 3, 3, 2, 1, 1, 9),
        (2, 12, 12, 7, 7, 2, 1, 3, 8),
        (6, 9, 9, 3, 3, 1, 2, 2, 33),
        (7, 6, 5, 1, 1, 2, 1, 0, 5),
        // Stride-2 phases wide enough for the vector copy.
        (3, 7, 75, 3, 3, 2, 1, 1, 6),
    ];
    for mi in micros() {
        for &(c, h, w, kh, kw, s, d, p, m) in &geoms {
            assert_eq!(kh, kw, "square kernels only");
            let g = square_conv(c, h, w, kh, s, d, p);
            let (oh, ow) = (g.oh, g.ow);
            let x = bytes(c * h * w, 3);
            for narrow in [false, true] {
                let wt: Vec<i8> = bytes(m * g.k(), 4)
                    .into_iter()
                    .map(|v| if narrow { (v as i8) >> 1 } else { v as i8 })
                    .collect();
                let zx = 77u8;
                let packed = QPackedRows::new(&wt, m, g.k(), &mi);
                assert_eq!(packed.narrow, narrow);
                let px = g.pixels();
                let mut got = vec![f32::NAN; m * px];
                let sink = StoreC {
                    c: got.as_mut_ptr(),
                    ldc: px,
                    batch_stride: 0,
                };
                let mut scratch = vec![0u8; qconv_scratch_bytes(&g, mi.nr, packed.groups())];
                let input = QConvInput {
                    x: x.as_ptr(),
                    strides: [(h * w) as isize, w as isize, 1],
                    zero_point: zx,
                };
                let mut corr = Vec::new();
                // SAFETY: x holds c planes of h x w.
                unsafe {
                    qconv(
                        &mi,
                        &pool,
                        2,
                        &g,
                        &input,
                        &packed,
                        &mut scratch,
                        &mut corr,
                        0,
                        &sink,
                    )
                };
                for o in 0..m {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let mut want = 0i32;
                            for ci in 0..c {
                                for ky in 0..kh {
                                    for kx in 0..kw {
                                        let iy = (oy * s + ky * d) as isize - p as isize;
                                        let ix = (ox * s + kx * d) as isize - p as isize;
                                        let inside = iy >= 0
                                            && ix >= 0
                                            && (iy as usize) < h
                                            && (ix as usize) < w;
                                        let xv = if inside {
                                            x[ci * h * w + iy as usize * w + ix as usize] as i32
                                        } else {
                                            zx as i32
                                        };
                                        want += (xv - zx as i32)
                                            * wt[((o * c + ci) * kh + ky) * kw + kx] as i32;
                                    }
                                }
                            }
                            let at = o * px + oy * ow + ox;
                            assert_eq!(
                                got[at],
                                want as f32,
                                "{} geom {:?} narrow {narrow} at ({o},{oy},{ox})",
                                mi.name,
                                (c, h, w, kh, kw, s, d, p, m)
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Timing of one ResNet-50 3x3 layer (run by hand: `cargo test --release -p smelt-kernels
/// qconv_timing -- --ignored --nocapture`).
#[test]
#[ignore]
fn qconv_timing() {
    struct Drop_;
    impl TileSink for Drop_ {
        fn tile(&self, _: usize, _: usize, _: usize, _: usize, _: usize, _: &mut [f32], _: usize) {}
    }
    let pool = ThreadPool::new(1, std::time::Duration::from_micros(50));
    let mi = micro_for(Isa::detect());
    for &(c, hw, kk, m) in &[
        (64usize, 56usize, 3usize, 64usize),
        (64, 56, 1, 256),
        (256, 14, 3, 256),
        (512, 7, 3, 512),
    ] {
        let g = square_conv(c, hw, hw, kk, 1, 1, kk / 2);
        let x = bytes(c * hw * hw, 3);
        let wt: Vec<i8> = bytes(m * g.k(), 4).into_iter().map(|v| v as i8).collect();
        let packed = QPackedRows::new(&wt, m, g.k(), &mi);
        let mut scratch = vec![0u8; qconv_scratch_bytes(&g, mi.nr, packed.groups())];
        let input = QConvInput {
            x: x.as_ptr(),
            strides: [(hw * hw) as isize, hw as isize, 1],
            zero_point: 3,
        };
        let mut corr = Vec::new();
        let reps = 50;
        let t = std::time::Instant::now();
        for _ in 0..reps {
            unsafe {
                qconv(
                    &mi,
                    &pool,
                    1,
                    &g,
                    &input,
                    &packed,
                    &mut scratch,
                    &mut corr,
                    0,
                    &Drop_,
                )
            };
        }
        let total = t.elapsed().as_secs_f64() / reps as f64;
        let t = std::time::Instant::now();
        for _ in 0..reps {
            unsafe {
                pack_im2col(
                    &pool,
                    1,
                    &g,
                    &input,
                    (mi.nr, packed.groups()),
                    scratch.as_mut_ptr(),
                )
            };
        }
        let pack = t.elapsed().as_secs_f64() / reps as f64;
        let macs = (m * g.k() * g.pixels()) as f64;
        println!(
            "{} c{c} {hw}x{hw} k{kk} m{m}: total {:.3} ms ({:.0} GMAC/s), packing {:.3} ms",
            mi.name,
            total * 1e3,
            macs / total / 1e9,
            pack * 1e3
        );
    }
}

/// Timing of MiniLM's products (run by hand: `cargo test --release -p smelt-kernels
/// qmatmul_timing -- --ignored --nocapture`).
#[test]
#[ignore]
fn qmatmul_timing() {
    struct Drop_;
    impl TileSink for Drop_ {
        fn tile(&self, _: usize, _: usize, _: usize, _: usize, _: usize, _: &mut [f32], _: usize) {}
    }
    let pool = ThreadPool::new(1, std::time::Duration::from_micros(50));
    let mi = micro_for(Isa::detect());
    for &(m, k, n) in &[
        (1024usize, 384usize, 1536usize),
        (1024, 1536, 384),
        (1024, 384, 384),
    ] {
        let a = bytes(m * k, 1);
        let b: Vec<i8> = bytes(k * n, 2).into_iter().map(|v| v as i8).collect();
        let packed = QPackedCols::new(&b, k, n, mi.nr);
        let mut corr = Vec::new();
        let reps = 20;
        let t = std::time::Instant::now();
        for _ in 0..reps {
            unsafe {
                qmatmul(
                    &mi,
                    &pool,
                    1,
                    a.as_ptr(),
                    m,
                    k,
                    3,
                    &packed,
                    &mut corr,
                    0,
                    &Drop_,
                )
            };
        }
        let s = t.elapsed().as_secs_f64() / reps as f64;
        println!(
            "{} {m}x{k}x{n}: {:.3} ms ({:.0} GMAC/s)",
            mi.name,
            s * 1e3,
            (m * k * n) as f64 / s / 1e9
        );
    }
}

#[test]
fn strided_copies_pick_every_step_th_byte() {
    let src = bytes(200, 7);
    for step in [1isize, 2, 3] {
        for n in 0..=60 {
            // The last byte read is (n - 1) * step: give it exactly that much.
            let avail = if n == 0 {
                0
            } else {
                (n - 1) * step as usize + 1
            };
            let mut out = vec![0u8; n];
            unsafe { copy_strided(src[..avail].as_ptr(), step, &mut out) };
            let want: Vec<u8> = (0..n).map(|k| src[k * step as usize]).collect();
            assert_eq!(out, want, "step {step}, {n} bytes");
        }
    }
}
