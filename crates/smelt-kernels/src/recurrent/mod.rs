//! LSTM layers: the input projection of every step as one GEMM, then per step the
//! recurrent product `H_{t-1} R^T` as a small GEMM on R^T packed once, and the gates
//! (sigmoid, tanh, peepholes, clip) fused into one vectorized pass over the batch's rows.
//! The layout is ONNX's: gates in the order i, o, f, c; peepholes i, o, f; X is
//! `[seq, batch, input]` (or `[batch, seq, input]`), Y `[seq, dirs, batch, hidden]` (or
//! `[batch, seq, dirs, hidden]`), the states `[dirs, batch, hidden]` (or `[batch, dirs,
//! hidden]`).

use crate::gemm::{gemm, pack::MatRef, Batches, Gemm, Lhs, PackedB, Rhs, StoreC};
use crate::pool::ThreadPool;
use crate::simd::Vf;
use crate::vmath::{sigmoid, tanh};
use crate::Kernels;

/// One step's gate math over `rows` batch rows (see [`Cell`]).
pub type LstmCellFn = unsafe fn(&Cell, usize);

/// The operands of one step's gate math. Row `b`'s pre-activations are
/// `xw[b * xw_rs ..] + hr[b * 4h ..] + bias`, four blocks of `hidden` (i, o, f, c).
pub struct Cell {
    /// Hidden size.
    pub hidden: usize,
    /// The input projections of this step's rows.
    pub xw: *const f32,
    /// Row stride of `xw`.
    pub xw_rs: usize,
    /// The recurrent products of this step's rows (`4 * hidden` each; used as scratch).
    pub hr: *mut f32,
    /// The summed input and recurrent biases, `4 * hidden`.
    pub bias: *const f32,
    /// Peepholes `3 * hidden` (i, o, f), or null.
    pub peep: *const f32,
    /// Pre-activations are clamped to `[-clip, clip]` (infinity: no clip).
    pub clip: f32,
    /// Cell states, `hidden` per row (read and updated).
    pub c: *mut f32,
    /// Hidden states, `hidden` per row (written).
    pub h: *mut f32,
}

#[inline(always)]
unsafe fn cell_body<V: Vf>(k: &Cell, rows: usize) {
    let h = k.hidden;
    let clip = |v: V| {
        if k.clip.is_finite() {
            crate::vmath::clamp(v, -k.clip, k.clip)
        } else {
            v
        }
    };
    let load = |p: *const f32, n: usize| {
        if n == V::LANES {
            V::load(p)
        } else {
            V::load_part(p, n)
        }
    };
    let store = |v: V, p: *mut f32, n: usize| {
        if n == V::LANES {
            v.store(p)
        } else {
            v.store_part(p, n)
        }
    };
    for b in 0..rows {
        let xw = k.xw.add(b * k.xw_rs);
        let hr = k.hr.add(b * 4 * h);
        let (c, hout) = (k.c.add(b * h), k.h.add(b * h));
        let mut j = 0;
        while j < h {
            let n = V::LANES.min(h - j);
            let pre = |g: usize| {
                let o = g * h + j;
                load(xw.add(o), n)
                    .add(load(hr.add(o), n))
                    .add(load(k.bias.add(o), n))
            };
            let cp = load(c.add(j), n);
            let (mut gi, mut go, mut gf) = (pre(0), pre(1), pre(2));
            if !k.peep.is_null() {
                gi = load(k.peep.add(j), n).fma(cp, gi);
                gf = load(k.peep.add(2 * h + j), n).fma(cp, gf);
            }
            let i = sigmoid(clip(gi));
            let f = sigmoid(clip(gf));
            let cand = tanh(clip(pre(3)));
            let cn = f.mul(cp).add(i.mul(cand));
            if !k.peep.is_null() {
                go = load(k.peep.add(h + j), n).fma(cn, go);
            }
            let o = sigmoid(clip(go));
            store(cn, c.add(j), n);
            store(o.mul(tanh(cn)), hout.add(j), n);
            j += n;
        }
    }
}

/// [`LstmCellFn`] on one lane at a time (every CPU).
///
/// # Safety
/// Every pointer of `k` must cover the rows and blocks described there.
pub unsafe fn cell_portable(k: &Cell, rows: usize) {
    cell_body::<f32>(k, rows)
}

/// x86 instances of the cell.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::{cell_body, Cell};

    /// [`super::LstmCellFn`] with AVX2+FMA.
    ///
    /// # Safety
    /// As for the portable cell, on a CPU with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn cell_avx2(k: &Cell, rows: usize) {
        cell_body::<crate::simd::Y8>(k, rows)
    }

    /// [`super::LstmCellFn`] with AVX-512.
    ///
    /// # Safety
    /// As for the portable cell, on a CPU with AVX-512.
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    pub unsafe fn cell_avx512(k: &Cell, rows: usize) {
        cell_body::<crate::simd::Z16>(k, rows)
    }
}

/// The weights of one direction, packed for the kernels.
pub struct LstmWeights {
    /// W^T, `input x 4h`.
    pub w: PackedB,
    /// R^T, `h x 4h`.
    pub r: PackedB,
    /// Wb + Rb, `4h`.
    pub bias: Vec<f32>,
    /// Peepholes `3h`, if any.
    pub peep: Option<Vec<f32>>,
}

impl LstmWeights {
    /// Packs direction `d` of W `[dirs, 4h, input]`, R `[dirs, 4h, h]`, B `[dirs, 8h]` and
    /// P `[dirs, 3h]`.
    pub fn pack(
        kern: &Kernels,
        d: usize,
        (input, h): (usize, usize),
        w: &[f32],
        r: &[f32],
        b: Option<&[f32]>,
        p: Option<&[f32]>,
    ) -> LstmWeights {
        let g = 4 * h;
        let w = &w[d * g * input..(d + 1) * g * input];
        let r = &r[d * g * h..(d + 1) * g * h];
        let bias = match b {
            Some(b) => {
                let b = &b[d * 2 * g..(d + 1) * 2 * g];
                (0..g).map(|j| b[j] + b[g + j]).collect()
            }
            None => vec![0.0; g],
        };
        LstmWeights {
            w: PackedB::new(&kern.micro, input, g, w, 1, input),
            r: PackedB::new(&kern.micro, h, g, r, 1, h),
            bias,
            peep: p.map(|p| p[d * 3 * h..(d + 1) * 3 * h].to_vec()),
        }
    }
}

/// One LSTM layer's sizes and options.
#[derive(Clone, Copy, Debug)]
pub struct Lstm {
    /// Steps.
    pub seq: usize,
    /// Batch rows.
    pub batch: usize,
    /// Input width.
    pub input: usize,
    /// Hidden size.
    pub hidden: usize,
    /// The batch-major layout.
    pub batch_major: bool,
    /// Clip threshold (infinity: none).
    pub clip: f32,
}

/// Runs direction `d` of `dirs` (`reverse`: last step first) of an LSTM over dense `x`,
/// starting from the states `h0`/`c0` (`[batch, hidden]` each, overwritten with the final
/// states), writing every step's hidden state into `y` (when given, dense in the layer's
/// output layout).
///
/// # Safety
/// `x` holds `seq * batch * input` floats, `y` (if any) `seq * dirs * batch * hidden`;
/// `w` was packed with `kern`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn lstm_direction(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    l: &Lstm,
    (d, dirs, reverse): (usize, usize, bool),
    w: &LstmWeights,
    x: &[f32],
    h0: &mut [f32],
    c0: &mut [f32],
    mut y: Option<&mut [f32]>,
) {
    let (seq, batch, h) = (l.seq, l.batch, l.hidden);
    let g = 4 * h;
    if seq == 0 || batch == 0 || h == 0 {
        return;
    }
    // The input projections of every (step, row), in x's row order.
    let mut xw = vec![0f32; seq * batch * g];
    gemm(
        kern,
        pool,
        threads,
        &Gemm {
            batch: 1,
            m: seq * batch,
            n: g,
            k: l.input,
            a: Lhs::Strided(MatRef::rows(x.as_ptr(), l.input), Batches::Stride(0)),
            b: Rhs::Packed(&w.w),
        },
        &StoreC {
            c: xw.as_mut_ptr(),
            ldc: g,
            batch_stride: 0,
        },
    );
    let mut hr = vec![0f32; batch * g];
    // A step's product below a million multiply-adds is not worth a second thread.
    let step_threads = if batch * g * h < 1 << 20 { 1 } else { threads };
    // The rows of step t: x row (t, b) is t * batch + b, or b * seq + t batch-major.
    let rows_of = |t: usize| match l.batch_major {
        false => (t * batch, 1),
        true => (t, seq),
    };
    for step in 0..seq {
        let t = if reverse { seq - 1 - step } else { step };
        recurrent_product(kern, pool, step_threads, &w.r, h0, &mut hr, (batch, h));
        let (r0, rs) = rows_of(t);
        let cell = Cell {
            hidden: h,
            xw: xw.as_ptr().add(r0 * g),
            xw_rs: rs * g,
            hr: hr.as_mut_ptr(),
            bias: w.bias.as_ptr(),
            peep: w.peep.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()),
            clip: l.clip,
            c: c0.as_mut_ptr(),
            h: h0.as_mut_ptr(),
        };
        (kern.lstm_cell)(&cell, batch);
        if let Some(y) = y.as_deref_mut() {
            for b in 0..batch {
                let at = match l.batch_major {
                    false => ((t * dirs + d) * batch + b) * h,
                    true => ((b * seq + t) * dirs + d) * h,
                };
                y[at..at + h].copy_from_slice(&h0[b * h..(b + 1) * h]);
            }
        }
    }
}

/// `hr = H R^T` for the `batch x h` states `hs`: up to a tile's rows straight through the
/// micro-kernel (a small batch is most of a recurrent layer's steps, and the GEMM driver's
/// packing and task setup would cost more than the product), else by the GEMM.
///
/// # Safety
/// `r` was packed with `kern` and is `h x 4h`; `hs` holds `batch * h`, `hr` `batch * 4h`.
unsafe fn recurrent_product(
    kern: &Kernels,
    pool: &ThreadPool,
    threads: usize,
    r: &PackedB,
    hs: &[f32],
    hr: &mut [f32],
    (batch, h): (usize, usize),
) {
    let (micro, g) = (kern.micro, 4 * h);
    let nr = micro.nr;
    if batch > micro.mr || micro.mr * nr > TILE {
        gemm(
            kern,
            pool,
            threads,
            &Gemm {
                batch: 1,
                m: batch,
                n: g,
                k: h,
                a: Lhs::Strided(MatRef::rows(hs.as_ptr(), h), Batches::Stride(0)),
                b: Rhs::Packed(r),
            },
            &StoreC {
                c: hr.as_mut_ptr(),
                ldc: g,
                batch_stride: 0,
            },
        );
        return;
    }
    let ker = micro.for_rows(batch);
    let mut tile = [0f32; TILE];
    for j in 0..g.div_ceil(nr) {
        let cols = nr.min(g - j * nr);
        // A whole panel of columns is written in place; the last, partial one via the tile.
        let (dst, ldt) = if cols == nr {
            (hr.as_mut_ptr().add(j * nr), g)
        } else {
            (tile.as_mut_ptr(), nr)
        };
        ker(
            h,
            hs.as_ptr(),
            h as isize,
            1,
            r.panel(j).as_ptr(),
            nr as isize,
            dst,
            ldt,
            false,
        );
        if cols < nr {
            for b in 0..batch {
                hr[b * g + j * nr..b * g + j * nr + cols]
                    .copy_from_slice(&tile[b * nr..b * nr + cols]);
            }
        }
    }
}

/// The largest micro-kernel tile, in floats.
const TILE: usize = 8 * 64;

#[cfg(test)]
mod tests;
