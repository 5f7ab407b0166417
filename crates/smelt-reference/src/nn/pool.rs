//! Pooling: MaxPool (with Indices), AveragePool, LpPool, the global pools, MaxUnpool, MaxRoiPool.

use super::{check_float, resolve_pads, spatial};
use crate::{one, Ctx, Inputs};
use smelt_ir::op::{AutoPad, NnOp};
use smelt_ir::{bail, ensure, numel, Result, Tensor, Value};

/// One kernel tap of one output position along one axis.
#[derive(Clone, Copy)]
enum Tap {
    /// Reads this input coordinate.
    Real(usize),
    /// Falls in the explicit padding.
    Pad,
    /// Falls past the padded input (ceil mode).
    Skip,
}

enum Kind {
    Max { storage_order: i64 },
    Avg { count_include_pad: bool },
    Lp { p: f64 },
}

/// MaxPool, AveragePool and LpPool.
pub fn pool(op: &NnOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    let (kind, auto_pad, ceil_mode, dilations, kernel_shape, pads, strides) = match op {
        NnOp::MaxPool {
            auto_pad,
            ceil_mode,
            dilations,
            kernel_shape,
            pads,
            storage_order,
            strides,
        } => (
            Kind::Max {
                storage_order: *storage_order,
            },
            auto_pad,
            *ceil_mode,
            dilations,
            kernel_shape,
            pads,
            strides,
        ),
        NnOp::AveragePool {
            auto_pad,
            ceil_mode,
            count_include_pad,
            dilations,
            kernel_shape,
            pads,
            strides,
        } => (
            Kind::Avg {
                count_include_pad: *count_include_pad,
            },
            auto_pad,
            *ceil_mode,
            dilations,
            kernel_shape,
            pads,
            strides,
        ),
        NnOp::LpPool {
            auto_pad,
            ceil_mode,
            dilations,
            kernel_shape,
            p,
            pads,
            strides,
        } => (
            Kind::Lp { p: *p as f64 },
            auto_pad,
            *ceil_mode,
            dilations,
            kernel_shape,
            pads,
            strides,
        ),
        _ => bail!(Internal, "not a pooling op"),
    };
    let xt = x.tensor(0)?;
    check_float(xt, "pooling input")?;
    ensure!(
        xt.rank() >= 3,
        InvalidModel,
        "pooling input must have rank >= 3, got {:?}",
        xt.shape()
    );
    let nd = xt.rank() - 2;
    let ks = spatial(kernel_shape, nd, 1, "kernel_shape")?;
    ensure!(
        !kernel_shape.is_empty(),
        InvalidModel,
        "kernel_shape is required"
    );
    let st = spatial(strides, nd, 1, "strides")?;
    let dil = spatial(dilations, nd, 1, "dilations")?;
    let ins = xt.shape()[2..].to_vec();
    let (pb, pe) = resolve_pads(auto_pad, pads, &ins, &ks, &st, &dil)?;
    let mut outs = Vec::with_capacity(nd);
    for i in 0..nd {
        let eff = ((ks[i] as i64 - 1) * dil[i] as i64) + 1;
        let o = match auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => ins[i].div_ceil(st[i]) as i64,
            _ => {
                let span = ins[i] as i64 + pb[i] + pe[i] - eff;
                ensure!(
                    span >= 0,
                    InvalidModel,
                    "pooling window (dilated {eff}) is larger than the padded input on axis {i}"
                );
                let s = st[i] as i64;
                if ceil_mode {
                    let mut o = (span + s - 1) / s + 1;
                    if (o - 1) * s >= ins[i] as i64 + pb[i] {
                        o -= 1;
                    }
                    o
                } else {
                    span / s + 1
                }
            }
        };
        outs.push(o.max(0) as usize);
    }
    // Taps per axis and output coordinate.
    let n_taps = (0..nd).fold(0u128, |a, d| a + outs[d] as u128 * ks[d] as u128);
    crate::layout::check_count(n_taps, 24, &|| {
        format!("pooling window taps ({outs:?} x {ks:?})")
    })?;
    let taps: Vec<Vec<Vec<Tap>>> = (0..nd)
        .map(|d| {
            (0..outs[d])
                .map(|o| {
                    (0..ks[d])
                        .map(|k| {
                            let i = (o * st[d] + k * dil[d]) as i64 - pb[d];
                            if i >= 0 && i < ins[d] as i64 {
                                Tap::Real(i as usize)
                            } else if i < ins[d] as i64 + pe[d] {
                                Tap::Pad
                            } else {
                                Tap::Skip
                            }
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let (n, c) = (xt.shape()[0], xt.shape()[1]);
    let in_sp: usize = smelt_ir::dims_product(&ins);
    let out_sp = numel(&outs)?;
    let k_sp: usize = smelt_ir::dims_product(&ks);
    let xv = xt.to_f64()?;
    let in_strides = smelt_ir::strides(&ins);
    // Column-major strides for storage_order = 1.
    let mut col_strides = vec![1usize; nd];
    for d in 1..nd {
        col_strides[d] = col_strides[d - 1] * ins[d - 1];
    }
    let total = crate::layout::check_count(n as u128 * c as u128 * out_sp as u128, 16, &|| {
        format!("pooling output ({n} x {c} x {outs:?})")
    })?;
    let mut y = vec![0f64; total];
    let want_idx = matches!(kind, Kind::Max { .. }) && cx.n_outputs > 1;
    let mut idx = if want_idx {
        vec![0i64; total]
    } else {
        Vec::new()
    };
    // Every output position's window: input offsets (row-major, column-major) and pad count.
    let mut opos = vec![0usize; nd];
    let mut windows: Vec<(usize, usize)> = Vec::with_capacity(out_sp * k_sp);
    let mut wstart = Vec::with_capacity(out_sp + 1);
    let mut pads_in = Vec::with_capacity(out_sp);
    // Per axis, the window's real taps (in kernel order) and its padded ones; a window is
    // their row-major product, so its cost is its real taps, not the kernel's size (a
    // 65536 x 2 window over a 32 x 32 image walked 2^27 kernel positions).
    let mut reals: Vec<Vec<usize>> = vec![Vec::new(); nd];
    let mut at = vec![0usize; nd];
    for o in 0..out_sp {
        unravel(o, &outs, &mut opos);
        wstart.push(windows.len());
        let (mut all, mut real) = (1usize, 1usize);
        for d in 0..nd {
            reals[d].clear();
            let mut pads = 0usize;
            for t in &taps[d][opos[d]] {
                match *t {
                    Tap::Real(i) => reals[d].push(i),
                    Tap::Pad => pads += 1,
                    Tap::Skip => {}
                }
            }
            all = all.saturating_mul(reals[d].len() + pads);
            real = real.saturating_mul(reals[d].len());
        }
        // Positions inside the padded input with at least one padded coordinate.
        pads_in.push(all - real);
        if real > 0 {
            at.fill(0);
            loop {
                let (mut off, mut coff) = (0usize, 0usize);
                for d in 0..nd {
                    let i = reals[d][at[d]];
                    off += i * in_strides[d];
                    coff += i * col_strides[d];
                }
                windows.push((off, coff));
                // Next position, row-major (the last axis fastest).
                let mut d = nd;
                loop {
                    if d == 0 {
                        break;
                    }
                    d -= 1;
                    at[d] += 1;
                    if at[d] < reals[d].len() {
                        break;
                    }
                    at[d] = 0;
                }
                if at.iter().all(|&a| a == 0) {
                    break;
                }
            }
        }
    }
    wstart.push(windows.len());
    // No planes when there are no output positions: an empty image of 2^31 channels
    // must not loop over them.
    let planes = if out_sp == 0 { 0 } else { n * c };
    for nc in 0..planes {
        let base = nc * in_sp;
        let plane = &xv[base..base + in_sp];
        for o in 0..out_sp {
            let real = &windows[wstart[o]..wstart[o + 1]];
            let out_i = nc * out_sp + o;
            match kind {
                Kind::Max { storage_order } => {
                    let mut best = f64::NEG_INFINITY;
                    let mut arg = real.first().map(|r| r.0).unwrap_or(0);
                    let mut carg = real.first().map(|r| r.1).unwrap_or(0);
                    for &(off, coff) in real {
                        let v = plane[off];
                        if v > best || (v.is_nan() && !best.is_nan()) {
                            best = v;
                            arg = off;
                            carg = coff;
                        }
                    }
                    y[out_i] = best;
                    if want_idx {
                        idx[out_i] = (base + if storage_order == 1 { carg } else { arg }) as i64;
                    }
                }
                Kind::Avg { count_include_pad } => {
                    let s: f64 = real.iter().map(|&(off, _)| plane[off]).sum();
                    let cnt = if count_include_pad {
                        real.len() + pads_in[o]
                    } else {
                        real.len()
                    };
                    y[out_i] = if cnt == 0 { f64::NAN } else { s / cnt as f64 };
                }
                Kind::Lp { p } => {
                    let s: f64 = real.iter().map(|&(off, _)| plane[off].abs().powf(p)).sum();
                    y[out_i] = s.powf(1.0 / p);
                }
            }
        }
    }
    let mut shape = vec![n, c];
    shape.extend(&outs);
    let mut res = vec![Value::Tensor(Tensor::from_f64(
        xt.dtype(),
        shape.clone(),
        &y,
    )?)];
    if cx.n_outputs > 1 {
        res.push(Value::Tensor(Tensor::from_i64_vec(shape, idx)?));
    }
    Ok(res)
}

fn unravel(mut i: usize, shape: &[usize], out: &mut [usize]) {
    for d in (0..shape.len()).rev() {
        out[d] = i % shape[d];
        i /= shape[d];
    }
}

/// GlobalAveragePool, GlobalMaxPool, GlobalLpPool.
pub fn global_pool(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let xt = x.tensor(0)?;
    check_float(xt, "pooling input")?;
    ensure!(
        xt.rank() >= 2,
        InvalidModel,
        "global pooling input must have rank >= 2, got {:?}",
        xt.shape()
    );
    let (n, c) = (xt.shape()[0], xt.shape()[1]);
    let sp: usize = smelt_ir::dims_product(&xt.shape()[2..]);
    let mut shape = vec![n, c];
    shape.extend(std::iter::repeat_n(1, xt.rank() - 2));
    if let Some(xv) = xt.as_f32() {
        if matches!(op, NnOp::GlobalAveragePool) && sp > 0 {
            let y: Vec<f32> = xv
                .chunks(sp)
                .map(|ch| (ch.iter().map(|&v| v as f64).sum::<f64>() / sp as f64) as f32)
                .collect();
            return one(Tensor::from_f32(shape, y)?);
        }
    }
    let xv = xt.to_f64()?;
    let mut y = Vec::with_capacity(n * c);
    for i in 0..n * c {
        let ch = &xv[i * sp..(i + 1) * sp];
        y.push(match op {
            NnOp::GlobalAveragePool => ch.iter().sum::<f64>() / sp as f64,
            NnOp::GlobalMaxPool => {
                ch.iter().copied().fold(
                    f64::NEG_INFINITY,
                    |a, b| if b > a || b.is_nan() { b } else { a },
                )
            }
            NnOp::GlobalLpPool { p } => {
                let p = *p as f64;
                ch.iter()
                    .map(|v| v.abs().powf(p))
                    .sum::<f64>()
                    .powf(1.0 / p)
            }
            _ => bail!(Internal, "not a global pool"),
        });
    }
    one(Tensor::from_f64(xt.dtype(), shape, &y)?)
}

/// MaxUnpool: scatters X to the flat positions in I of a zero output.
pub fn max_unpool(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let NnOp::MaxUnpool {
        kernel_shape,
        pads,
        strides,
    } = op
    else {
        bail!(Internal, "not MaxUnpool")
    };
    let (xt, it) = (x.tensor(0)?, x.tensor(1)?);
    ensure!(
        xt.rank() >= 3,
        InvalidModel,
        "MaxUnpool input must have rank >= 3"
    );
    ensure!(
        it.shape() == xt.shape(),
        InvalidModel,
        "MaxUnpool indices {:?} do not match X {:?}",
        it.shape(),
        xt.shape()
    );
    let nd = xt.rank() - 2;
    let ks = spatial(kernel_shape, nd, 1, "kernel_shape")?;
    let st = spatial(strides, nd, 1, "strides")?;
    let (pb, pe) = resolve_pads(
        &AutoPad::NotSet,
        pads,
        &xt.shape()[2..],
        &ks,
        &st,
        &vec![1; nd],
    )?;
    let mut shape = xt.shape()[..2].to_vec();
    for i in 0..nd {
        let o = (xt.shape()[i + 2] as i64 - 1) * st[i] as i64 + ks[i] as i64 - pb[i] - pe[i];
        ensure!(
            o >= 0,
            InvalidModel,
            "MaxUnpool output size on axis {i} is negative"
        );
        shape.push(o as usize);
    }
    let total = numel(&shape)?;
    let iv = it.to_i64()?;
    let mut flat = Vec::with_capacity(iv.len());
    for &i in &iv {
        ensure!(
            i >= 0 && (i as usize) < total,
            InvalidInput,
            "MaxUnpool index {i} is outside the output of {total} elements"
        );
        flat.push(i as usize);
    }
    let mut out = Tensor::zeros(xt.dtype(), shape.clone())?;
    out.data_mut().scatter(&flat, xt.data())?;
    // An explicit output_shape embeds the inferred result at its origin (as the reference does).
    if let Some(os) = x.opt_ints(2)? {
        ensure!(
            os.len() == xt.rank() && os.iter().all(|&d| d >= 0),
            InvalidModel,
            "invalid output_shape {os:?}"
        );
        let os: Vec<usize> = os.iter().map(|&d| d as usize).collect();
        ensure!(
            os.iter().zip(&shape).all(|(a, b)| a >= b),
            InvalidModel,
            "output_shape {os:?} is smaller than the unpooled shape {shape:?}"
        );
        let n_out = numel(&os)?;
        let ost = smelt_ir::strides(&os);
        let mut dst = Vec::with_capacity(total);
        let mut pos = vec![0usize; shape.len()];
        for i in 0..total {
            unravel(i, &shape, &mut pos);
            dst.push(pos.iter().zip(&ost).map(|(p, s)| p * s).sum());
        }
        let mut big = Tensor::zeros(xt.dtype(), os)?;
        debug_assert_eq!(big.len(), n_out);
        big.data_mut().scatter(&dst, out.data())?;
        return one(big);
    }
    one(out)
}

/// MaxRoiPool (Caffe semantics): max over bins of each region of interest.
pub fn max_roi_pool(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let NnOp::MaxRoiPool {
        pooled_shape,
        spatial_scale,
    } = op
    else {
        bail!(Internal, "not MaxRoiPool")
    };
    let (xt, rt) = (x.tensor(0)?, x.tensor(1)?);
    ensure!(
        xt.rank() == 4,
        InvalidModel,
        "MaxRoiPool input must be 4-D, got {:?}",
        xt.shape()
    );
    ensure!(
        rt.rank() == 2 && rt.shape()[1] == 5,
        InvalidModel,
        "rois must be (num_rois, 5), got {:?}",
        rt.shape()
    );
    let (n, c, h, w) = (xt.shape()[0], xt.shape()[1], xt.shape()[2], xt.shape()[3]);
    let (ph, pw) = (pooled_shape[0] as usize, pooled_shape[1] as usize);
    let xv = xt.to_f64()?;
    let rv = rt.to_f64()?;
    let nr = rt.shape()[0];
    let scale = *spatial_scale as f64;
    let mut y = vec![0f64; nr * c * ph * pw];
    for r in 0..nr {
        let roi = &rv[r * 5..r * 5 + 5];
        let b = roi[0] as i64;
        ensure!(
            b >= 0 && (b as usize) < n,
            InvalidInput,
            "roi batch index {b} is out of range"
        );
        let (x1, y1) = (
            (roi[1] * scale).round() as i64,
            (roi[2] * scale).round() as i64,
        );
        let (x2, y2) = (
            (roi[3] * scale).round() as i64,
            (roi[4] * scale).round() as i64,
        );
        let rh = (y2 - y1 + 1).max(1) as f64;
        let rw = (x2 - x1 + 1).max(1) as f64;
        let (bh, bw) = (rh / ph as f64, rw / pw as f64);
        for ci in 0..c {
            let plane = &xv[((b as usize) * c + ci) * h * w..((b as usize) * c + ci + 1) * h * w];
            for i in 0..ph {
                let hs = ((i as f64 * bh).floor() as i64 + y1).clamp(0, h as i64) as usize;
                let he = (((i + 1) as f64 * bh).ceil() as i64 + y1).clamp(0, h as i64) as usize;
                for j in 0..pw {
                    let ws = ((j as f64 * bw).floor() as i64 + x1).clamp(0, w as i64) as usize;
                    let we = (((j + 1) as f64 * bw).ceil() as i64 + x1).clamp(0, w as i64) as usize;
                    let mut best = f64::NEG_INFINITY;
                    for yy in hs..he {
                        for xx in ws..we {
                            best = best.max(plane[yy * w + xx]);
                        }
                    }
                    y[((r * c + ci) * ph + i) * pw + j] =
                        if he <= hs || we <= ws { 0.0 } else { best };
                }
            }
        }
    }
    one(Tensor::from_f64(xt.dtype(), vec![nr, c, ph, pw], &y)?)
}
