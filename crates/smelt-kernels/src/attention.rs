//! Scaled dot-product attention for one head, fused: K^T and V packed once, then per panel
//! of query rows the scores `S = Q K^T` by the GEMM micro-kernel, a scaled, masked softmax
//! per row, and `O = P V` by the micro-kernel again, each O tile handed to a [`TileSink`].
//! Only one panel of scores exists at a time, in L1.

use crate::buf::with_scratch;
use crate::gemm::pack::{pack_b_panel, MatRef};
use crate::gemm::TileSink;
use crate::Kernels;

/// One head's operands: `q` is `sq x d`, `k` is `sk x d`, `v` is `sk x dv`.
#[derive(Clone, Copy)]
pub struct Head {
    /// Queries.
    pub q: MatRef,
    /// Keys.
    pub k: MatRef,
    /// Values.
    pub v: MatRef,
    /// Query rows.
    pub sq: usize,
    /// Key rows.
    pub sk: usize,
    /// Query and key width.
    pub d: usize,
    /// Value width.
    pub dv: usize,
    /// Scale of the scores.
    pub scale: f32,
    /// An additive mask, `sq x sk` (zero steps where it broadcasts).
    pub mask: Option<MatRef>,
}

// SAFETY: the operands are only read; the creator guarantees they outlive the call.
unsafe impl Send for Head {}
unsafe impl Sync for Head {}

/// The operands of the work a thread likely does next (another head, usually), prefetched
/// into L2 a share at a time while this head computes: its Q rows `rows` and all of K and V.
#[derive(Clone)]
pub struct Next<'a> {
    /// The head.
    pub head: &'a Head,
    /// Its query rows.
    pub rows: std::ops::Range<usize>,
}

impl Next<'_> {
    /// Prefetches share `part` of `parts` of the operands' rows (only unit-step rows).
    fn prefetch(&self, part: usize, parts: usize) {
        let h = self.head;
        let (nq, nk) = (self.rows.len(), h.sk);
        let units = nq + 2 * nk;
        let (lo, hi) = (
            part * units / parts,
            ((part + 1) * units / parts).min(units),
        );
        for u in lo..hi {
            let (m, row, width) = if u < nq {
                (h.q, self.rows.start + u, h.d)
            } else if u < nq + nk {
                (h.k, u - nq, h.d)
            } else {
                (h.v, u - nq - nk, h.dv)
            };
            if m.cs != 1 || width == 0 {
                continue;
            }
            let p = m.ptr.wrapping_offset(row as isize * m.rs);
            let mut j = 0;
            while j < width {
                crate::simd::prefetch_l2(p.wrapping_add(j));
                j += 16;
            }
            crate::simd::prefetch_l2(p.wrapping_add(width - 1));
        }
    }
}

/// Floats of scratch asked for past the scores and the mask row, unused. Measured on a
/// Zen 1 EPYC (MiniLM-L3, two threads): without it the pool worker's tasks ran 3x slower
/// than the caller's, in the P V products reading the scores, at the same addresses (not
/// denormals, not the task's data, not the stores to O, not the next task's prefetch; a
/// guard after the last float of 1 KiB did nothing, of 4 KiB half, of 8 KiB all). With it
/// both threads run at the caller's speed: attention at batch 8 took 22 ms a run, then
/// 14.5. The cause is not pinned down; the same 8 KiB after every scratch buffer made
/// YOLOv8n's 20x20 Winograd layers 35% slower, so the slack stays here.
const SLACK: usize = 2048;

/// Attention of query rows `rows` of one head; O tiles go to `sink` as batch `batch` with
/// row indices relative to the head. `next`, when given, is prefetched meanwhile.
///
/// # Safety
/// Every element of `h`'s operands must be readable.
pub unsafe fn attention(
    kern: &Kernels,
    h: &Head,
    rows: std::ops::Range<usize>,
    batch: usize,
    sink: &dyn TileSink,
    next: Option<Next>,
) {
    let micro = kern.micro;
    let (mr, nr) = (micro.mr, micro.nr);
    let (d, sk, dv) = (h.d, h.sk, h.dv);
    let kp = sk.div_ceil(nr);
    let vp = dv.div_ceil(nr);
    let skpad = kp * nr;
    // Scratch: K^T panels (d x skpad), V panels (sk x vp*nr), the scores of one row panel
    // (mr x skpad; Q and P are read in place) and a mask row.
    let (kt_len, v_len, s_len) = (d * skpad, sk * vp * nr, mr * skpad);
    with_scratch(kt_len + v_len + s_len + skpad + SLACK, |buf| {
        let (kt, rest) = buf.split_at_mut(kt_len);
        let (vpan, rest) = rest.split_at_mut(v_len);
        let (s, mrow) = rest.split_at_mut(s_len);
        let kt_src = MatRef {
            ptr: h.k.ptr,
            rs: h.k.cs,
            cs: h.k.rs,
        };
        for j in 0..kp {
            pack_b_panel(
                kt_src,
                j * nr,
                nr.min(sk - j * nr),
                d,
                nr,
                &mut kt[j * d * nr..(j + 1) * d * nr],
            );
        }
        for j in 0..vp {
            pack_b_panel(
                h.v,
                j * nr,
                nr.min(dv - j * nr),
                sk,
                nr,
                &mut vpan[j * sk * nr..(j + 1) * sk * nr],
            );
        }
        let mut tile = [0f32; 8 * 64];
        // 1 / the softmax sum of each row of the panel, applied to its O rows.
        let mut inv = [0f32; crate::gemm::micro::MAX_MR];
        let mut i0 = rows.start;
        let panels = rows.len().div_ceil(mr);
        while i0 < rows.end {
            if let Some(n) = &next {
                n.prefetch((i0 - rows.start) / mr, panels);
            }
            let r = mr.min(rows.end - i0);
            let ker = micro.for_rows(r);
            for j in 0..kp {
                // Q's rows are read in place (the micro-kernel takes A's row and k steps);
                // the scores go straight into the panel's rows (a narrow last panel's
                // columns past `sk` are never read).
                micro.for_tile(r, nr.min(sk - j * nr))(
                    d,
                    h.q.ptr.offset(i0 as isize * h.q.rs),
                    h.q.rs,
                    h.q.cs,
                    kt.as_ptr().add(j * d * nr),
                    nr as isize,
                    s.as_mut_ptr().add(j * nr),
                    skpad,
                    false,
                );
            }
            for rr in 0..r {
                let row = &mut s[rr * skpad..rr * skpad + sk];
                let mask: &[f32] = match h.mask {
                    None => &[],
                    Some(m) if m.cs == 1 => {
                        // A contiguous mask row is read in place.
                        std::slice::from_raw_parts(m.ptr.offset((i0 + rr) as isize * m.rs), sk)
                    }
                    Some(m) => {
                        let base = m.ptr.offset((i0 + rr) as isize * m.rs);
                        for (j, x) in mrow[..sk].iter_mut().enumerate() {
                            *x = *base.offset(j as isize * m.cs);
                        }
                        &mrow[..sk]
                    }
                };
                inv[rr] = (kern.softmax_exp)(row, h.scale, mask);
            }
            for j in 0..vp {
                let cols = nr.min(dv - j * nr);
                // A full tile a plain store would copy goes straight to its place in O,
                // scaled there.
                if let Some((o, ldo)) = (r == mr && cols == nr)
                    .then(|| sink.in_place(batch, i0, j * nr))
                    .flatten()
                {
                    ker(
                        sk,
                        s.as_ptr(),
                        skpad as isize,
                        1,
                        vpan.as_ptr().add(j * sk * nr),
                        nr as isize,
                        o,
                        ldo,
                        false,
                    );
                    for (rr, &iv) in inv[..r].iter().enumerate() {
                        std::slice::from_raw_parts_mut(o.add(rr * ldo), nr)
                            .iter_mut()
                            .for_each(|x| *x *= iv);
                    }
                    continue;
                }
                // P is read in place, row-major.
                ker(
                    sk,
                    s.as_ptr(),
                    skpad as isize,
                    1,
                    vpan.as_ptr().add(j * sk * nr),
                    nr as isize,
                    tile.as_mut_ptr(),
                    nr,
                    false,
                );
                for (rr, t) in tile[..r * nr].chunks_exact_mut(nr).enumerate() {
                    let iv = inv[rr];
                    t.iter_mut().for_each(|x| *x *= iv);
                }
                sink.tile(batch, i0, j * nr, r, cols, &mut tile[..r * nr], nr);
            }
            i0 += r;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::StoreC;
    use crate::isa_tests;
    use crate::testing::rand_vec;

    fn check(kern: &Kernels) {
        // Mask steps 1 (read in place) and 2 (gathered).
        for &(sq, sk, d, dv, mstep) in &[
            (1, 1, 1, 1, 1),
            (3, 17, 5, 7, 2),
            (17, 63, 32, 33, 1),
            (17, 63, 32, 33, 2),
            (40, 100, 16, 64, 1),
        ] {
            let q = rand_vec(sq * d, 1);
            let k = rand_vec(sk * d, 2);
            let v = rand_vec(sk * dv, 3);
            let mut mask_buf = rand_vec(sk * mstep, 4);
            mask_buf[0] = f32::NEG_INFINITY;
            let mask: Vec<f32> = (0..sk).map(|j| mask_buf[j * mstep]).collect();
            let mut out = vec![f32::NAN; sq * dv];
            let h = Head {
                q: MatRef::rows(q.as_ptr(), d),
                k: MatRef::rows(k.as_ptr(), d),
                v: MatRef::rows(v.as_ptr(), dv),
                sq,
                sk,
                d,
                dv,
                scale: 0.3,
                mask: Some(MatRef {
                    ptr: mask_buf.as_ptr(),
                    rs: 0,
                    cs: mstep as isize,
                }),
            };
            let sink = StoreC {
                c: out.as_mut_ptr(),
                ldc: dv,
                batch_stride: 0,
            };
            // In two pieces, as tasks would split it.
            let mid = sq / 2;
            unsafe {
                let next = Next {
                    head: &h,
                    rows: mid..sq,
                };
                attention(kern, &h, 0..mid, 0, &sink, Some(next));
                attention(kern, &h, mid..sq, 0, &sink, None);
            }
            for i in 0..sq {
                let s: Vec<f64> = (0..sk)
                    .map(|j| {
                        (0..d)
                            .map(|p| q[i * d + p] as f64 * k[j * d + p] as f64)
                            .sum::<f64>()
                            * 0.3
                            + mask[j] as f64
                    })
                    .collect();
                let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = s
                    .iter()
                    .map(|x| {
                        if mx == f64::NEG_INFINITY {
                            0.0
                        } else {
                            (x - mx).exp()
                        }
                    })
                    .collect();
                let z: f64 = w.iter().sum();
                for c in 0..dv {
                    let want: f64 = if z == 0.0 {
                        0.0
                    } else {
                        (0..sk).map(|j| w[j] * v[j * dv + c] as f64).sum::<f64>() / z
                    };
                    let got = out[i * dv + c] as f64;
                    assert!(
                        (got - want).abs() < 1e-5,
                        "{} {sq}x{sk}x{d}x{dv} ({i},{c}): {got} vs {want}",
                        kern.isa
                    );
                }
            }
        }
    }

    isa_tests!(fused_attention, check);

    /// One thread's best time for MiniLM-L3's attention at batch 8, sequence 128 (96 heads
    /// of width 32, a padding mask) (`cargo test --release -p smelt-kernels
    /// attention_layer_time -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn attention_layer_time() {
        let kern = crate::kernels();
        let (heads, s, d) = (96, 128, 32);
        let width = 12 * d;
        let q = rand_vec(heads / 12 * s * width, 1);
        let k = rand_vec(q.len(), 2);
        let v = rand_vec(q.len(), 3);
        let mask = vec![0f32; s];
        let mut out = vec![0f32; q.len()];
        let head = |i: usize| {
            let at = (i / 12) * s * width + (i % 12) * d;
            Head {
                q: MatRef::rows(q[at..].as_ptr(), width),
                k: MatRef::rows(k[at..].as_ptr(), width),
                v: MatRef::rows(v[at..].as_ptr(), width),
                sq: s,
                sk: s,
                d,
                dv: d,
                scale: 0.17,
                mask: Some(MatRef {
                    ptr: mask.as_ptr(),
                    rs: 0,
                    cs: 1,
                }),
            }
        };
        let ms = crate::testing::min_ms(&mut || {
            for i in 0..heads {
                let at = (i / 12) * s * width + (i % 12) * d;
                let sink = StoreC {
                    c: out[at..].as_mut_ptr(),
                    ldc: width,
                    batch_stride: 0,
                };
                unsafe { attention(kern, &head(i), 0..s, 0, &sink, None) };
            }
        });
        let flops = (heads * 4 * s * s * d) as f64;
        println!(
            "{}: attention {heads} heads s{s} d{d}: {ms:.3} ms, {:.1} GFLOP/s",
            kern.isa,
            flops / ms / 1e6
        );
    }
}
