//! Conv (im2col + GEMM), ConvTranspose (GEMM + col2im) and DeformConv (bilinear sampling).

use super::gemm::{dgemm, sgemm};
use super::matmul::{kind_of, load, store, Kind, Num};
use super::{resolve_pads, spatial};
use crate::{one, Inputs};
use smelt_ir::op::{AutoPad, NnOp};
use smelt_ir::{bail, ensure, Result, Tensor, Value};

/// Geometry of one convolution: sizes per spatial axis.
struct Geom {
    ins: Vec<usize>,
    ks: Vec<usize>,
    outs: Vec<usize>,
    st: Vec<usize>,
    dil: Vec<usize>,
    pb: Vec<i64>,
}

impl Geom {
    fn in_sp(&self) -> usize {
        smelt_ir::dims_product(&self.ins)
    }
    fn k_sp(&self) -> usize {
        smelt_ir::dims_product(&self.ks)
    }
    fn out_sp(&self) -> usize {
        smelt_ir::dims_product(&self.outs)
    }
    /// True when im2col is the identity (1x1 kernel, stride 1, no padding).
    fn trivial(&self) -> bool {
        self.ks.iter().all(|&k| k == 1)
            && self.st.iter().all(|&s| s == 1)
            && self.pb.iter().all(|&p| p == 0)
            && self.ins == self.outs
    }
}

/// Multiplies a kernel position index into per-axis positions.
fn unravel(mut i: usize, shape: &[usize], out: &mut [usize]) {
    for d in (0..shape.len()).rev() {
        out[d] = i % shape[d];
        i /= shape[d];
    }
}

/// Lays out the `cg` channels of `x` as rows `(c, kernel position)` by output positions.
fn im2col<T: Copy + Default>(x: &[T], cg: usize, g: &Geom, cols: &mut [T]) {
    let nd = g.ins.len();
    let (in_sp, k_sp, out_sp) = (g.in_sp(), g.k_sp(), g.out_sp());
    let last_in = g.ins[nd - 1] as i64;
    let last_out = g.outs[nd - 1];
    let outer_out: usize = smelt_ir::dims_product(&g.outs[..nd - 1]);
    let mut kpos = vec![0usize; nd];
    let mut opos = vec![0usize; nd.saturating_sub(1)];
    let in_strides = smelt_ir::strides(&g.ins);
    for c in 0..cg {
        let xc = &x[c * in_sp..(c + 1) * in_sp];
        for kidx in 0..k_sp {
            unravel(kidx, &g.ks, &mut kpos);
            let row = &mut cols[(c * k_sp + kidx) * out_sp..(c * k_sp + kidx + 1) * out_sp];
            // Valid range of the last output axis for this kernel position.
            let s = g.st[nd - 1] as i64;
            let off = kpos[nd - 1] as i64 * g.dil[nd - 1] as i64 - g.pb[nd - 1];
            // i = o*s + off in [0, last_in)
            let lo = if off >= 0 { 0 } else { ((-off) + s - 1) / s } as usize;
            let hi = if last_in - off <= 0 {
                0
            } else {
                ((last_in - off + s - 1) / s) as usize
            };
            let (lo, hi) = (lo.min(last_out), hi.min(last_out).max(lo.min(last_out)));
            for oo in 0..outer_out {
                let dst = &mut row[oo * last_out..(oo + 1) * last_out];
                unravel(oo, &g.outs[..nd - 1], &mut opos);
                let mut base = 0i64;
                let mut valid = true;
                for d in 0..nd - 1 {
                    let i = opos[d] as i64 * g.st[d] as i64 + kpos[d] as i64 * g.dil[d] as i64
                        - g.pb[d];
                    if i < 0 || i >= g.ins[d] as i64 {
                        valid = false;
                        break;
                    }
                    base += i * in_strides[d] as i64;
                }
                if !valid || lo >= hi {
                    dst.fill(T::default());
                    continue;
                }
                dst[..lo].fill(T::default());
                dst[hi..].fill(T::default());
                let start = (base + lo as i64 * s + off) as usize;
                if s == 1 {
                    dst[lo..hi].copy_from_slice(&xc[start..start + (hi - lo)]);
                } else {
                    for (j, v) in dst[lo..hi].iter_mut().enumerate() {
                        *v = xc[start + j * s as usize];
                    }
                }
            }
        }
    }
}

/// Adds the rows `(m, kernel position)` of `cols` (by input positions) into `y` (m by output positions).
fn col2im<T: Copy + std::ops::AddAssign>(cols: &[T], mg: usize, g: &Geom, y: &mut [T]) {
    // Here `ins` are the transposed conv's input (the columns) and `outs` its output.
    let nd = g.ins.len();
    let (in_sp, k_sp, out_sp) = (g.in_sp(), g.k_sp(), g.out_sp());
    let mut kpos = vec![0usize; nd];
    let mut ipos = vec![0usize; nd.saturating_sub(1)];
    let out_strides = smelt_ir::strides(&g.outs);
    let last_in = g.ins[nd - 1];
    let last_out = g.outs[nd - 1] as i64;
    let outer_in: usize = smelt_ir::dims_product(&g.ins[..nd - 1]);
    let s = g.st[nd - 1];
    for m in 0..mg {
        let ym = &mut y[m * out_sp..(m + 1) * out_sp];
        for kidx in 0..k_sp {
            unravel(kidx, &g.ks, &mut kpos);
            let row = &cols[(m * k_sp + kidx) * in_sp..(m * k_sp + kidx + 1) * in_sp];
            // Output coordinate on the last axis: o = i*s + off, valid for i in lo..hi.
            let off = kpos[nd - 1] as i64 * g.dil[nd - 1] as i64 - g.pb[nd - 1];
            let si = s as i64;
            let lo = if off >= 0 {
                0
            } else {
                ((-off + si - 1) / si) as usize
            }
            .min(last_in);
            let hi = if last_out - off <= 0 {
                0
            } else {
                ((last_out - off + si - 1) / si) as usize
            };
            let hi = hi.min(last_in).max(lo);
            if lo == hi {
                continue;
            }
            for oi in 0..outer_in {
                unravel(oi, &g.ins[..nd - 1], &mut ipos);
                let mut base = 0i64;
                let mut valid = true;
                for d in 0..nd - 1 {
                    let o = ipos[d] as i64 * g.st[d] as i64 + kpos[d] as i64 * g.dil[d] as i64
                        - g.pb[d];
                    if o < 0 || o >= g.outs[d] as i64 {
                        valid = false;
                        break;
                    }
                    base += o * out_strides[d] as i64;
                }
                if !valid {
                    continue;
                }
                let src = &row[oi * last_in + lo..oi * last_in + hi];
                let start = (base + lo as i64 * si + off) as usize;
                for (j, &v) in src.iter().enumerate() {
                    ym[start + j * s] += v;
                }
            }
        }
    }
}

struct ConvAttrs<'a> {
    auto_pad: &'a AutoPad,
    dilations: &'a [i64],
    group: i64,
    kernel_shape: &'a [i64],
    pads: &'a [i64],
    strides: &'a [i64],
}

impl<'a> ConvAttrs<'a> {
    /// The attributes of a Conv (None for any other op).
    fn of(op: &'a NnOp) -> Option<ConvAttrs<'a>> {
        match op {
            NnOp::Conv {
                auto_pad,
                dilations,
                group,
                kernel_shape,
                pads,
                strides,
            } => Some(ConvAttrs {
                auto_pad,
                dilations,
                group: *group,
                kernel_shape,
                pads,
                strides,
            }),
            _ => None,
        }
    }
}

fn check_kernel(kernel_shape: &[i64], w: &Tensor) -> Result<Vec<usize>> {
    let ks: Vec<usize> = w.shape()[2..].to_vec();
    if !kernel_shape.is_empty() {
        ensure!(
            kernel_shape.len() == ks.len()
                && kernel_shape.iter().zip(&ks).all(|(&a, &b)| a == b as i64),
            InvalidModel,
            "kernel_shape {kernel_shape:?} does not match the weights {:?}",
            w.shape()
        );
    }
    Ok(ks)
}

/// Convolution.
pub fn conv(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let Some(a) = ConvAttrs::of(op) else {
        bail!(Internal, "not Conv")
    };
    one(conv_tensor(
        &a,
        x.tensor(0)?,
        x.tensor(1)?,
        x.opt_tensor(2)?,
    )?)
}

/// Convolution in the blocked channel layout: the plain convolution of the unblocked input,
/// blocked again.
pub fn conv_blocked(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    use smelt_ir::op::nn::CHANNEL_BLOCK as B;
    let plain_op = op.unblocked_conv();
    let Some(a) = plain_op.as_ref().and_then(ConvAttrs::of) else {
        bail!(Internal, "not ConvBlocked")
    };
    let xb = x.tensor(0)?;
    let (Some(v), &[n, cb, h, w, lanes]) = (xb.as_f32(), xb.shape()) else {
        bail!(
            InvalidModel,
            "ConvBlocked takes f32 [N, C/16, H, W, 16], not {} {:?}",
            xb.dtype(),
            xb.shape()
        );
    };
    ensure!(
        lanes == B,
        InvalidModel,
        "ConvBlocked: blocks of {lanes} lanes"
    );
    // [n][cb][p][l] -> [n][cb * 16 + l][p] and back.
    let px = h * w;
    let mut plain = vec![0f32; v.len()];
    for (i, &e) in v.iter().enumerate() {
        let (l, p, blk) = (i % B, (i / B) % px, i / (B * px));
        plain[(blk * B + l) * px + p] = e;
    }
    let plain = Tensor::from_f32(vec![n, cb * B, h, w], plain)?;
    let y = conv_tensor(&a, &plain, x.tensor(1)?, x.opt_tensor(2)?)?;
    let (Some(yv), &[_, m, oh, ow]) = (y.as_f32(), y.shape()) else {
        bail!(Internal, "ConvBlocked: output {:?}", y.shape());
    };
    ensure!(
        m % B == 0,
        InvalidModel,
        "ConvBlocked: {m} output channels are no whole blocks"
    );
    let opx = oh * ow;
    let mut out = vec![0f32; yv.len()];
    for (i, &e) in yv.iter().enumerate() {
        let (p, c, img) = (i % opx, (i / opx) % m, i / (opx * m));
        out[((img * (m / B) + c / B) * opx + p) * B + c % B] = e;
    }
    one(Tensor::from_f32(vec![n, m / B, oh, ow, B], out)?)
}

fn conv_tensor(a: &ConvAttrs, xt: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    ensure!(
        xt.rank() >= 3,
        InvalidModel,
        "Conv input must have rank >= 3, got {:?}",
        xt.shape()
    );
    ensure!(
        w.rank() == xt.rank(),
        InvalidModel,
        "Conv weights {:?} do not match the input {:?}",
        w.shape(),
        xt.shape()
    );
    let nd = xt.rank() - 2;
    let (n, c) = (xt.shape()[0], xt.shape()[1]);
    let m = w.shape()[0];
    let grp = a.group as usize;
    ensure!(
        c % grp == 0 && m.checked_rem(grp) == Some(0),
        InvalidModel,
        "channels {c} / {m} are not divisible by group {grp}"
    );
    let (cg, mg) = (c / grp, m / grp);
    ensure!(
        w.shape()[1] == cg,
        InvalidModel,
        "Conv weights {:?} need {cg} input channels per group",
        w.shape()
    );
    let ks = check_kernel(a.kernel_shape, w)?;
    let st = spatial(a.strides, nd, 1, "strides")?;
    let dil = spatial(a.dilations, nd, 1, "dilations")?;
    let ins = xt.shape()[2..].to_vec();
    let (pb, pe) = resolve_pads(a.auto_pad, a.pads, &ins, &ks, &st, &dil)?;
    let mut outs = Vec::with_capacity(nd);
    for i in 0..nd {
        let eff = ((ks[i] as i64 - 1) * dil[i] as i64) + 1;
        let span = ins[i] as i64 + pb[i] + pe[i] - eff;
        ensure!(
            span >= 0,
            InvalidModel,
            "Conv kernel (dilated {eff}) is larger than the padded input on axis {i}"
        );
        outs.push((span / st[i] as i64) as usize + 1);
    }
    let g = Geom {
        ins,
        ks,
        outs,
        st,
        dil,
        pb,
    };
    let (in_sp, k_sp, out_sp) = (g.in_sp(), g.k_sp(), g.out_sp());
    let kk = cg * k_sp;
    let mut out_shape = vec![n, m];
    out_shape.extend(&g.outs);
    let total = smelt_ir::limits::check_shape(xt.dtype(), &out_shape, &|| "Conv's output".into())?;
    if let Some(b) = b {
        ensure!(
            b.len() == m,
            InvalidModel,
            "Conv bias has {} elements, expected {m}",
            b.len()
        );
    }
    let kind = if kind_of(xt.dtype())? == Kind::F32 {
        Kind::F32
    } else {
        Kind::F64
    };
    let out = match (load(xt, kind)?, load(w, kind)?) {
        (Num::F32(xv), Num::F32(wv)) => {
            let mut y = vec![0f32; total];
            let mut cols = Vec::new();
            // One (image, group) at a time; each writes its own block of output channels.
            for (t, ys) in y.chunks_mut((mg * out_sp).max(1)).enumerate() {
                let (ni, gi) = (t / grp, t % grp);
                let xs = &xv[(ni * c + gi * cg) * in_sp..(ni * c + (gi + 1) * cg) * in_sp];
                let colv: &[f32] = if g.trivial() {
                    xs
                } else {
                    cols.resize(kk * out_sp, 0.0);
                    im2col(xs, cg, &g, &mut cols);
                    &cols
                };
                let ws = &wv[gi * mg * kk..(gi + 1) * mg * kk];
                sgemm(mg, out_sp, kk, ws, kk, colv, out_sp, ys, out_sp, false);
            }
            if let Some(b) = b {
                let Num::F32(bv) = load(b, Kind::F32)? else {
                    bail!(Internal, "an F32 operand loaded as another kind")
                };
                for (i, ych) in y.chunks_mut(out_sp.max(1)).enumerate() {
                    let bias = bv[i % m];
                    ych.iter_mut().for_each(|v| *v += bias);
                }
            }
            Num::F32(std::borrow::Cow::Owned(y))
        }
        (Num::F64(xv), Num::F64(wv)) => {
            let mut y = vec![0f64; total];
            let mut cols = vec![0f64; kk * out_sp];
            for ni in 0..n {
                for gi in 0..grp {
                    let xs = &xv[(ni * c + gi * cg) * in_sp..(ni * c + (gi + 1) * cg) * in_sp];
                    im2col(xs, cg, &g, &mut cols);
                    let ws = &wv[gi * mg * kk..(gi + 1) * mg * kk];
                    let ys = &mut y[(ni * m + gi * mg) * out_sp..(ni * m + (gi + 1) * mg) * out_sp];
                    dgemm(mg, out_sp, kk, ws, &cols, ys);
                }
            }
            if let Some(b) = b {
                let bv = b.to_f64()?;
                for (i, ych) in y.chunks_mut(out_sp.max(1)).enumerate() {
                    let bias = bv[i % m];
                    ych.iter_mut().for_each(|v| *v += bias);
                }
            }
            Num::F64(y)
        }
        _ => bail!(Internal, "mismatched operand representations"),
    };
    store(xt.dtype(), out_shape, out)
}

/// Transposed convolution.
pub fn conv_transpose(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let NnOp::ConvTranspose {
        auto_pad,
        dilations,
        group,
        kernel_shape,
        output_padding,
        output_shape,
        pads,
        strides,
    } = op
    else {
        bail!(Internal, "not ConvTranspose")
    };
    let (xt, w, b) = (x.tensor(0)?, x.tensor(1)?, x.opt_tensor(2)?);
    ensure!(
        xt.rank() >= 3,
        InvalidModel,
        "ConvTranspose input must have rank >= 3, got {:?}",
        xt.shape()
    );
    ensure!(
        w.rank() == xt.rank(),
        InvalidModel,
        "ConvTranspose weights {:?} do not match the input {:?}",
        w.shape(),
        xt.shape()
    );
    let nd = xt.rank() - 2;
    let (n, c) = (xt.shape()[0], xt.shape()[1]);
    let grp = *group as usize;
    ensure!(
        w.shape()[0] == c,
        InvalidModel,
        "ConvTranspose weights {:?} need {c} input channels",
        w.shape()
    );
    ensure!(
        c % grp == 0,
        InvalidModel,
        "channels {c} are not divisible by group {grp}"
    );
    let (cg, mg) = (c / grp, w.shape()[1]);
    let m = mg * grp;
    let ks = check_kernel(kernel_shape, w)?;
    let st = spatial(strides, nd, 1, "strides")?;
    let dil = spatial(dilations, nd, 1, "dilations")?;
    let opad: Vec<i64> = if output_padding.is_empty() {
        vec![0; nd]
    } else {
        output_padding.clone()
    };
    ensure!(
        opad.len() == nd,
        InvalidModel,
        "output_padding has {} values, expected {nd}",
        opad.len()
    );
    let ins = xt.shape()[2..].to_vec();
    // The output extent before padding, in i128: strides, dilations and output padding are
    // the model's, and their products must not overflow.
    let full = |i: usize| -> Result<i64> {
        let v = st[i] as i128 * (ins[i] as i128 - 1)
            + opad[i] as i128
            + (ks[i] as i128 - 1) * dil[i] as i128
            + 1;
        i64::try_from(v).map_err(|_| {
            smelt_ir::err!(
                InvalidModel,
                "ConvTranspose's output size on axis {i} overflows"
            )
        })
    };
    let mut pb = vec![0i64; nd];
    let mut outs = vec![0usize; nd];
    let same = matches!(auto_pad, AutoPad::SameUpper | AutoPad::SameLower);
    if !output_shape.is_empty() || (same && pads.is_empty()) {
        let target: Vec<i64> = if !output_shape.is_empty() {
            // output_shape may hold the full shape or only the spatial part.
            let sp = if output_shape.len() == nd + 2 {
                &output_shape[2..]
            } else {
                &output_shape[..]
            };
            ensure!(
                sp.len() == nd,
                InvalidModel,
                "output_shape {output_shape:?} does not have {nd} spatial sizes"
            );
            sp.to_vec()
        } else {
            (0..nd).map(|i| ins[i] as i64 * st[i] as i64).collect()
        };
        for i in 0..nd {
            ensure!(
                target[i] >= 0,
                InvalidModel,
                "negative output_shape {target:?}"
            );
            outs[i] = target[i] as usize;
            if !pads.is_empty() && !same {
                ensure!(
                    pads.len() == 2 * nd,
                    InvalidModel,
                    "pads has {} values, expected {}",
                    pads.len(),
                    2 * nd
                );
                pb[i] = pads[i];
            } else {
                let total = full(i)?.checked_sub(target[i]).ok_or_else(|| {
                    smelt_ir::err!(
                        InvalidModel,
                        "output_shape {target:?} is out of range on axis {i}"
                    )
                })?;
                let half = total.div_euclid(2);
                pb[i] = if matches!(auto_pad, AutoPad::SameUpper) {
                    half
                } else {
                    total - half
                };
            }
        }
    } else {
        let (b_, e_) = if pads.is_empty() {
            (vec![0; nd], vec![0; nd])
        } else {
            ensure!(
                pads.len() == 2 * nd,
                InvalidModel,
                "pads has {} values, expected {}",
                pads.len(),
                2 * nd
            );
            (pads[..nd].to_vec(), pads[nd..].to_vec())
        };
        for i in 0..nd {
            let o = full(i)? as i128 - b_[i] as i128 - e_[i] as i128;
            ensure!(
                o >= 0,
                InvalidModel,
                "ConvTranspose output size on axis {i} is negative"
            );
            outs[i] = usize::try_from(o).map_err(|_| {
                smelt_ir::err!(
                    InvalidModel,
                    "ConvTranspose's output size on axis {i} overflows"
                )
            })?;
        }
        pb = b_;
    }
    // The column geometry: `ins` = input (columns), `outs` = output image.
    let g = Geom {
        ins,
        ks,
        outs,
        st,
        dil,
        pb,
    };
    let (in_sp, k_sp, out_sp) = (g.in_sp(), g.k_sp(), g.out_sp());
    let rows = mg * k_sp;
    let mut out_shape_full = vec![n, m];
    out_shape_full.extend(&g.outs);
    let total = smelt_ir::limits::check_shape(xt.dtype(), &out_shape_full, &|| {
        "ConvTranspose's output".into()
    })?;
    let cols_len = rows
        .checked_mul(in_sp)
        .ok_or_else(|| smelt_ir::err!(ResourceExhausted, "ConvTranspose's columns overflow"))?;
    smelt_ir::limits::check_shape(xt.dtype(), &[cols_len], &|| {
        "ConvTranspose's column buffer".into()
    })?;
    if let Some(b) = b {
        ensure!(
            b.len() == m,
            InvalidModel,
            "ConvTranspose bias has {} elements, expected {m}",
            b.len()
        );
    }
    let kind = if kind_of(xt.dtype())? == Kind::F32 {
        Kind::F32
    } else {
        Kind::F64
    };
    let out = match (load(xt, kind)?, load(w, kind)?) {
        (Num::F32(xv), Num::F32(wv)) => {
            let mut y = vec![0f32; total];
            let mut cols = vec![0f32; cols_len];
            for gi in 0..grp {
                // W_g is [cg x rows]; the product needs its transpose [rows x cg].
                let wg = &wv[gi * cg * rows..(gi + 1) * cg * rows];
                let wt = transpose(wg, cg, rows);
                for ni in 0..n {
                    let xs = &xv[(ni * c + gi * cg) * in_sp..(ni * c + (gi + 1) * cg) * in_sp];
                    sgemm(rows, in_sp, cg, &wt, cg, xs, in_sp, &mut cols, in_sp, false);
                    let ys = &mut y[(ni * m + gi * mg) * out_sp..(ni * m + (gi + 1) * mg) * out_sp];
                    col2im(&cols, mg, &g, ys);
                }
            }
            if let Some(b) = b {
                let Num::F32(bv) = load(b, Kind::F32)? else {
                    bail!(Internal, "an F32 operand loaded as another kind")
                };
                for (i, ych) in y.chunks_mut(out_sp.max(1)).enumerate() {
                    let bias = bv[i % m];
                    ych.iter_mut().for_each(|v| *v += bias);
                }
            }
            Num::F32(std::borrow::Cow::Owned(y))
        }
        (Num::F64(xv), Num::F64(wv)) => {
            let mut y = vec![0f64; total];
            for gi in 0..grp {
                let wg = &wv[gi * cg * rows..(gi + 1) * cg * rows];
                let wt = transpose(wg, cg, rows);
                for ni in 0..n {
                    let xs = &xv[(ni * c + gi * cg) * in_sp..(ni * c + (gi + 1) * cg) * in_sp];
                    let mut cols = vec![0f64; cols_len];
                    dgemm(rows, in_sp, cg, &wt, xs, &mut cols);
                    let ys = &mut y[(ni * m + gi * mg) * out_sp..(ni * m + (gi + 1) * mg) * out_sp];
                    col2im(&cols, mg, &g, ys);
                }
            }
            if let Some(b) = b {
                let bv = b.to_f64()?;
                for (i, ych) in y.chunks_mut(out_sp.max(1)).enumerate() {
                    let bias = bv[i % m];
                    ych.iter_mut().for_each(|v| *v += bias);
                }
            }
            Num::F64(y)
        }
        _ => bail!(Internal, "mismatched operand representations"),
    };
    one(store(xt.dtype(), out_shape_full, out)?)
}

fn transpose<T: Copy>(v: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(v.len());
    for j in 0..cols {
        for i in 0..rows {
            out.push(v[i * cols + j]);
        }
    }
    out
}

/// Deformable convolution (2-D and N-D), computed in f64 with bilinear sampling (zeros outside).
pub fn deform_conv(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let NnOp::DeformConv {
        dilations,
        group,
        kernel_shape,
        offset_group,
        pads,
        strides,
    } = op
    else {
        bail!(Internal, "not DeformConv")
    };
    let (xt, w, off) = (x.tensor(0)?, x.tensor(1)?, x.tensor(2)?);
    let (b, mask) = (x.opt_tensor(3)?, x.opt_tensor(4)?);
    ensure!(
        xt.rank() >= 3 && w.rank() == xt.rank() && off.rank() == xt.rank(),
        InvalidModel,
        "DeformConv input ranks do not match"
    );
    let nd = xt.rank() - 2;
    let (n, c) = (xt.shape()[0], xt.shape()[1]);
    let m = w.shape()[0];
    let grp = *group as usize;
    let og = *offset_group as usize;
    ensure!(
        c % grp == 0 && m % grp == 0 && w.shape()[1] * grp == c,
        InvalidModel,
        "DeformConv channels do not match group {grp}"
    );
    ensure!(
        c % og == 0,
        InvalidModel,
        "channels {c} are not divisible by offset_group {og}"
    );
    let (cg, mg, cog) = (c / grp, m / grp, c / og);
    let ks = check_kernel(kernel_shape, w)?;
    let st = spatial(strides, nd, 1, "strides")?;
    let dil = spatial(dilations, nd, 1, "dilations")?;
    let (pb, pe) = resolve_pads(&AutoPad::NotSet, pads, &xt.shape()[2..], &ks, &st, &dil)?;
    let ins = xt.shape()[2..].to_vec();
    let mut outs = Vec::with_capacity(nd);
    for i in 0..nd {
        let eff = ((ks[i] as i64 - 1) * dil[i] as i64) + 1;
        let span = ins[i] as i64 + pb[i] + pe[i] - eff;
        ensure!(
            span >= 0,
            InvalidModel,
            "DeformConv kernel is larger than the padded input on axis {i}"
        );
        outs.push((span / st[i] as i64) as usize + 1);
    }
    let (k_sp, out_sp, in_sp) = (
        ks.iter().product::<usize>(),
        outs.iter().product::<usize>(),
        ins.iter().product::<usize>(),
    );
    let mut want_off = vec![n, og * k_sp * nd];
    want_off.extend(&outs);
    ensure!(
        off.shape() == want_off.as_slice(),
        InvalidModel,
        "offset shape {:?} should be {want_off:?}",
        off.shape()
    );
    let mv = match mask {
        Some(mk) => {
            ensure!(
                mk.len() == n * og * k_sp * out_sp,
                InvalidModel,
                "mask shape {:?} does not match",
                mk.shape()
            );
            Some(mk.to_f64()?)
        }
        None => None,
    };
    let (xv, wv, ov) = (xt.to_f64()?, w.to_f64()?, off.to_f64()?);
    let bv = match b {
        Some(b) => {
            ensure!(
                b.len() == m,
                InvalidModel,
                "DeformConv bias has {} elements, expected {m}",
                b.len()
            );
            Some(b.to_f64()?)
        }
        None => None,
    };
    // Sampled columns per (batch): [c * k_sp, out_sp].
    let in_strides = smelt_ir::strides(&ins);
    let what = || "DeformConv's column buffer".to_string();
    let cols_len = smelt_ir::limits::check_shape(smelt_ir::DType::F64, &[c, k_sp, out_sp], &what)?;
    let mut cols = vec![0f64; cols_len];
    let mut out_shape = vec![n, m];
    out_shape.extend(&outs);
    let total = smelt_ir::limits::check_shape(smelt_ir::DType::F64, &out_shape, &|| {
        "DeformConv's output".into()
    })?;
    let mut y = vec![0f64; total];
    let mut kpos = vec![0usize; nd];
    let mut opos = vec![0usize; nd];
    let mut coord = vec![0f64; nd];
    for ni in 0..n {
        for ci in 0..c {
            let gi = ci / cog;
            let xc = &xv[(ni * c + ci) * in_sp..(ni * c + ci + 1) * in_sp];
            for kidx in 0..k_sp {
                unravel(kidx, &ks, &mut kpos);
                for o in 0..out_sp {
                    unravel(o, &outs, &mut opos);
                    for d in 0..nd {
                        let oi = (((ni * og + gi) * k_sp + kidx) * nd + d) * out_sp + o;
                        coord[d] = (opos[d] * st[d]) as f64 - pb[d] as f64
                            + (kpos[d] * dil[d]) as f64
                            + ov[oi];
                    }
                    let mut v = sample(xc, &ins, &in_strides, &coord);
                    if let Some(mv) = &mv {
                        v *= mv[((ni * og + gi) * k_sp + kidx) * out_sp + o];
                    }
                    cols[(ci * k_sp + kidx) * out_sp + o] = v;
                }
            }
        }
        for gi in 0..grp {
            let ws = &wv[gi * mg * cg * k_sp..(gi + 1) * mg * cg * k_sp];
            let cs = &cols[gi * cg * k_sp * out_sp..(gi + 1) * cg * k_sp * out_sp];
            let ys = &mut y[(ni * m + gi * mg) * out_sp..(ni * m + (gi + 1) * mg) * out_sp];
            dgemm(mg, out_sp, cg * k_sp, ws, cs, ys);
        }
    }
    if let Some(bv) = bv {
        for (i, ych) in y.chunks_mut(out_sp.max(1)).enumerate() {
            ych.iter_mut().for_each(|v| *v += bv[i % m]);
        }
    }
    one(Tensor::from_f64(xt.dtype(), out_shape, &y)?)
}

/// N-linear interpolation at `coord` with zeros outside the input.
fn sample(x: &[f64], ins: &[usize], strides: &[usize], coord: &[f64]) -> f64 {
    let nd = ins.len();
    let mut total = 0.0;
    for corner in 0..(1usize << nd) {
        let mut w = 1.0;
        let mut off = 0usize;
        let mut valid = true;
        for d in 0..nd {
            let f = coord[d].floor();
            let hi = corner >> d & 1 == 1;
            let idx = if hi { f + 1.0 } else { f };
            let wt = if hi {
                coord[d] - f
            } else {
                1.0 - (coord[d] - f)
            };
            if !(idx >= 0.0 && idx < ins[d] as f64) {
                valid = false;
                break;
            }
            w *= wt;
            off += idx as usize * strides[d];
        }
        if valid && w != 0.0 {
            total += w * x[off];
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_3x3_pad1() {
        let a = ConvAttrs {
            auto_pad: &AutoPad::NotSet,
            dilations: &[],
            group: 1,
            kernel_shape: &[],
            pads: &[1, 1, 1, 1],
            strides: &[],
        };
        let xt = Tensor::from_f32(vec![1, 1, 3, 3], (0..9).map(|v| v as f32).collect()).unwrap();
        let w = Tensor::from_f32(vec![1, 1, 3, 3], vec![1.0; 9]).unwrap();
        let y = conv_tensor(&a, &xt, &w, None).unwrap();
        assert_eq!(
            y.as_f32().unwrap(),
            &[8., 15., 12., 21., 36., 27., 20., 33., 24.]
        );
    }
}
