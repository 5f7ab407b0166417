//! Vision ops: NonMaxSuppression, RoiAlign, GridSample, AffineGrid (Resize is in `resize.rs`).

use super::super::{one, Inputs};
use super::out_numel;
use smelt_ir::op::misc::{GridPadding, InterpMode};
use smelt_ir::op::MiscOp;
use smelt_ir::{bail, ensure, strides, Result, Tensor, Value};

// ---------------------------------------------------------------- NonMaxSuppression

/// NonMaxSuppression: boxes [B, N, 4], scores [B, C, N] -> selected [K, 3] (batch, class, box).
pub fn nms(x: &Inputs, center: bool) -> Result<Vec<Value>> {
    let boxes = x.tensor(0)?;
    let scores = x.tensor(1)?;
    ensure!(
        boxes.rank() == 3 && boxes.shape()[2] == 4,
        InvalidModel,
        "NonMaxSuppression: boxes must be [B, N, 4], got {:?}",
        boxes.shape()
    );
    ensure!(
        scores.rank() == 3,
        InvalidModel,
        "NonMaxSuppression: scores must be [B, C, N], got {:?}",
        scores.shape()
    );
    let (b, nb) = (boxes.shape()[0], boxes.shape()[1]);
    let nc = scores.shape()[1];
    ensure!(
        scores.shape()[0] == b && scores.shape()[2] == nb,
        InvalidModel,
        "NonMaxSuppression: scores {:?} do not match boxes {:?}",
        scores.shape(),
        boxes.shape()
    );
    let first_i = |i: usize| -> Result<Option<i64>> {
        Ok(match x.opt_tensor(i)? {
            Some(t) if !t.is_empty() => Some(t.to_i64()?[0]),
            _ => None,
        })
    };
    let first_f = |i: usize| -> Result<Option<f64>> {
        Ok(match x.opt_tensor(i)? {
            Some(t) if !t.is_empty() => Some(t.to_f64()?[0]),
            _ => None,
        })
    };
    let max_out = first_i(2)?.unwrap_or(0).max(0) as usize;
    let iou_th = first_f(3)?.unwrap_or(0.0);
    let score_th = first_f(4)?;
    let bv = boxes.to_f64()?;
    let sv = scores.to_f64()?;
    let corners = |bi: usize, i: usize| -> [f64; 4] {
        let p = &bv[(bi * nb + i) * 4..(bi * nb + i) * 4 + 4];
        if center {
            let (hw, hh) = (p[2] / 2.0, p[3] / 2.0);
            [p[1] - hh, p[0] - hw, p[1] + hh, p[0] + hw]
        } else {
            [
                p[0].min(p[2]),
                p[1].min(p[3]),
                p[0].max(p[2]),
                p[1].max(p[3]),
            ]
        }
    };
    let suppress = |a: [f64; 4], c: [f64; 4]| -> bool {
        let ix0 = a[1].max(c[1]);
        let ix1 = a[3].min(c[3]);
        if ix1 <= ix0 {
            return false;
        }
        let iy0 = a[0].max(c[0]);
        let iy1 = a[2].min(c[2]);
        if iy1 <= iy0 {
            return false;
        }
        let inter = (ix1 - ix0) * (iy1 - iy0);
        let a1 = (a[2] - a[0]) * (a[3] - a[1]);
        let a2 = (c[2] - c[0]) * (c[3] - c[1]);
        let uni = a1 + a2 - inter;
        if inter <= 0.0 || a1 <= 0.0 || a2 <= 0.0 || uni <= 0.0 {
            return false;
        }
        inter / uni > iou_th
    };
    let mut sel: Vec<i64> = Vec::new();
    for bi in 0..b {
        for ci in 0..nc {
            let s = &sv[(bi * nc + ci) * nb..(bi * nc + ci + 1) * nb];
            let mut cand: Vec<usize> = (0..nb)
                .filter(|&i| score_th.is_none_or(|th| s[i] > th))
                .collect();
            // Highest score first; ties keep the lower box index first.
            cand.sort_by(|&i, &j| s[j].total_cmp(&s[i]).then(i.cmp(&j)));
            let mut kept: Vec<[f64; 4]> = Vec::new();
            for i in cand {
                if kept.len() >= max_out {
                    break;
                }
                let bx = corners(bi, i);
                if kept.iter().all(|&k| !suppress(bx, k)) {
                    kept.push(bx);
                    sel.extend_from_slice(&[bi as i64, ci as i64, i as i64]);
                }
            }
        }
    }
    let k = sel.len() / 3;
    one(Tensor::from_i64_vec(vec![k, 3], sel)?)
}

// ---------------------------------------------------------------- RoiAlign

/// RoiAlign over X [N, C, H, W], rois [R, 4], batch_indices [R].
pub fn roi_align(op: &MiscOp, x: &Inputs) -> Result<Vec<Value>> {
    let MiscOp::RoiAlign {
        max_mode,
        half_pixel,
        output_height,
        output_width,
        sampling_ratio,
        spatial_scale,
    } = op
    else {
        bail!(Internal, "not a RoiAlign")
    };
    let xt = x.tensor(0)?;
    let rois = x.tensor(1)?;
    let bidx = x.tensor(2)?.to_i64()?;
    ensure!(
        xt.rank() == 4,
        InvalidModel,
        "RoiAlign: X must be 4-D, got {:?}",
        xt.shape()
    );
    ensure!(
        rois.rank() == 2 && rois.shape()[1] == 4,
        InvalidModel,
        "RoiAlign: rois must be [R, 4], got {:?}",
        rois.shape()
    );
    let nr = rois.shape()[0];
    ensure!(
        bidx.len() == nr,
        InvalidModel,
        "RoiAlign: {} batch indices for {nr} rois",
        bidx.len()
    );
    let (n, c, h, w) = (xt.shape()[0], xt.shape()[1], xt.shape()[2], xt.shape()[3]);
    ensure!(
        h > 0 && w > 0,
        InvalidModel,
        "RoiAlign: X has an empty spatial size {:?}",
        xt.shape()
    );
    let (ph, pw) = (*output_height as usize, *output_width as usize);
    let xv = xt.to_f64()?;
    let rv = rois.to_f64()?;
    let mut out = vec![0f64; out_numel(&[nr, c, ph, pw])?];
    let sc = *spatial_scale as f64;
    for ri in 0..nr {
        let b = bidx[ri];
        ensure!(
            b >= 0 && (b as usize) < n,
            InvalidInput,
            "RoiAlign: batch index {b} out of range for batch {n}"
        );
        let b = b as usize;
        let off = if *half_pixel { 0.5 } else { 0.0 };
        let r = &rv[ri * 4..ri * 4 + 4];
        let (x0, y0, x1, y1) = (
            r[0] * sc - off,
            r[1] * sc - off,
            r[2] * sc - off,
            r[3] * sc - off,
        );
        let (mut rw, mut rh) = (x1 - x0, y1 - y0);
        if !*half_pixel {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let (bh, bw) = (rh / ph as f64, rw / pw as f64);
        let gh = if *sampling_ratio > 0 {
            *sampling_ratio as usize
        } else {
            (rh / ph as f64).ceil().max(0.0) as usize
        };
        let gw = if *sampling_ratio > 0 {
            *sampling_ratio as usize
        } else {
            (rw / pw as f64).ceil().max(0.0) as usize
        };
        // Every bin visits at least one sample slot: the loops below take this many steps.
        let samples = [ph, pw, gh.max(1), gw.max(1)]
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d));
        ensure!(
            samples.is_some_and(|s| s <= 1 << 28),
            ResourceExhausted,
            "RoiAlign: roi {ri} needs too many samples ({ph}x{pw} bins of {gh}x{gw})"
        );
        let count = (gh * gw).max(1) as f64;
        // Precompute the bilinear taps of every sample: (4 positions, 4 weights).
        let mut pre: Vec<([usize; 4], [f64; 4])> = Vec::with_capacity(ph * pw * gh * gw);
        for py in 0..ph {
            for px in 0..pw {
                for iy in 0..gh {
                    let yy = y0 + py as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                    for ix in 0..gw {
                        let xx = x0 + px as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                        if yy < -1.0 || yy > h as f64 || xx < -1.0 || xx > w as f64 {
                            pre.push(([0; 4], [0.0; 4]));
                            continue;
                        }
                        let (mut y, mut xq) = (yy.max(0.0), xx.max(0.0));
                        let (mut yl, mut xl) = (y as usize, xq as usize);
                        let (yh, xh);
                        if yl + 1 >= h {
                            yl = h - 1;
                            yh = yl;
                            y = yl as f64;
                        } else {
                            yh = yl + 1;
                        }
                        if xl + 1 >= w {
                            xl = w - 1;
                            xh = xl;
                            xq = xl as f64;
                        } else {
                            xh = xl + 1;
                        }
                        let (ly, lx) = (y - yl as f64, xq - xl as f64);
                        let (hy, hx) = (1.0 - ly, 1.0 - lx);
                        pre.push((
                            [yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh],
                            [hy * hx, hy * lx, ly * hx, ly * lx],
                        ));
                    }
                }
            }
        }
        for ci in 0..c {
            let img = &xv[(b * c + ci) * h * w..(b * c + ci + 1) * h * w];
            let dst = &mut out[(ri * c + ci) * ph * pw..(ri * c + ci + 1) * ph * pw];
            let mut k = 0;
            for d in dst.iter_mut() {
                let mut acc = 0.0;
                let mut first = true;
                for _ in 0..gh * gw {
                    let (p, wt) = &pre[k];
                    k += 1;
                    if *max_mode {
                        let v = (0..4)
                            .map(|j| wt[j] * img[p[j]])
                            .fold(f64::NEG_INFINITY, f64::max);
                        acc = if first { v } else { acc.max(v) };
                        first = false;
                    } else {
                        acc += (0..4).map(|j| wt[j] * img[p[j]]).sum::<f64>();
                    }
                }
                *d = if *max_mode { acc } else { acc / count };
            }
        }
    }
    one(Tensor::from_f64(xt.dtype(), vec![nr, c, ph, pw], &out)?)
}

// ---------------------------------------------------------------- GridSample

fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let rng = hi - lo;
    if rng <= 0.0 {
        return lo;
    }
    if x < lo {
        let dx = lo - x;
        let n = (dx / rng).trunc();
        let r = dx - n * rng;
        if n as i64 % 2 == 0 {
            lo + r
        } else {
            hi - r
        }
    } else if x > hi {
        let dx = x - hi;
        let n = (dx / rng).trunc();
        let r = dx - n * rng;
        if n as i64 % 2 == 0 {
            hi - r
        } else {
            lo + r
        }
    } else {
        x
    }
}

fn cubic_a75(x: f64) -> [f64; 4] {
    let a = -0.75;
    let x = x.abs();
    [
        ((a * (x + 1.0) - 5.0 * a) * (x + 1.0) + 8.0 * a) * (x + 1.0) - 4.0 * a,
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0,
        ((a + 2.0) * (1.0 - x) - (a + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0,
        ((a * (2.0 - x) - 5.0 * a) * (2.0 - x) + 8.0 * a) * (2.0 - x) - 4.0 * a,
    ]
}

/// GridSample over X [N, C, D1..Dk] with grid [N, O1..Ok, k].
pub fn grid_sample(
    x: &Inputs,
    mode: InterpMode,
    padding: GridPadding,
    align: bool,
) -> Result<Vec<Value>> {
    let xt = x.tensor(0)?;
    let gt = x.tensor(1)?;
    ensure!(
        xt.rank() >= 3,
        InvalidModel,
        "GridSample: X must have rank >= 3, got {:?}",
        xt.shape()
    );
    let k = xt.rank() - 2;
    ensure!(
        gt.rank() == k + 2 && gt.shape()[k + 1] == k && gt.shape()[0] == xt.shape()[0],
        InvalidModel,
        "GridSample: grid {:?} does not fit X {:?}",
        gt.shape(),
        xt.shape()
    );
    let (n, c) = (xt.shape()[0], xt.shape()[1]);
    let dims: Vec<usize> = xt.shape()[2..].to_vec();
    ensure!(
        dims.iter().all(|&d| d > 0),
        InvalidModel,
        "GridSample: X has an empty spatial size {:?}",
        xt.shape()
    );
    ensure!(
        k <= 8,
        Unsupported,
        "GridSample: at most 8 spatial dimensions are supported"
    );
    let odims: Vec<usize> = gt.shape()[1..=k].to_vec();
    let mut oshape = vec![n, c];
    oshape.extend_from_slice(&odims);
    let npts: usize = smelt_ir::dims_product(&odims);
    let isz: usize = smelt_ir::dims_product(&dims);
    let mut out = vec![0f64; out_numel(&oshape)?];
    if out.is_empty() {
        return one(Tensor::zeros(xt.dtype(), oshape)?);
    }
    let xv = xt.to_f64()?;
    let gv = gt.to_f64()?;
    let ist = strides(&dims);
    let border: Vec<(f64, f64)> = dims
        .iter()
        .map(|&d| {
            if align {
                (0.0, d as f64 - 1.0)
            } else {
                (-0.5, d as f64 - 0.5)
            }
        })
        .collect();
    let taps = match mode {
        InterpMode::Nearest => 1,
        InterpMode::Linear => 2,
        InterpMode::Cubic => 4,
    };
    // Per point and dim: tap indices (None = zero) and weights.
    let mut tidx: Vec<Option<usize>> = vec![None; k * taps];
    let mut tw = vec![0f64; k * taps];
    let combos = taps.pow(k as u32);
    // Each point costs every channel its combinations of taps: a large output stops at the
    // run's deadline or cancel.
    let mut pacer = smelt_ir::WorkPacer::new();
    let per_point = (c as u64).saturating_mul(combos as u64);
    for ni in 0..n {
        for p in 0..npts {
            pacer.done(per_point)?;
            let g = &gv[(ni * npts + p) * k..(ni * npts + p + 1) * k];
            for d in 0..k {
                let len = dims[d];
                let gn = g[k - 1 - d] as f32;
                let lf = len as f32;
                let mut v = if align {
                    (gn + 1.0) / 2.0 * (lf - 1.0)
                } else {
                    ((gn + 1.0) * lf - 1.0) / 2.0
                } as f64;
                // Far outside coordinates all behave alike; keep the integer casts exact.
                v = v.clamp(-1e9, 1e9);
                if mode == InterpMode::Nearest {
                    v = v.round_ties_even();
                }
                let (lo, hi) = border[d];
                if v < lo || v > hi {
                    match padding {
                        // Cubic clamps each tap instead (as PyTorch and onnxruntime do).
                        GridPadding::Border if mode != InterpMode::Cubic => {
                            v = v.clamp(0.0, len as f64 - 1.0)
                        }
                        GridPadding::Border => {}
                        GridPadding::Reflection => v = reflect(v, lo, hi),
                        GridPadding::Zeros => {}
                    }
                }
                let fix = |i: i64| -> Option<usize> {
                    let li = len as i64;
                    match padding {
                        GridPadding::Zeros => (i >= 0 && i < li).then_some(i as usize),
                        GridPadding::Border => Some(i.clamp(0, li - 1) as usize),
                        GridPadding::Reflection => {
                            Some((reflect(i as f64, lo, hi) as i64).clamp(0, li - 1) as usize)
                        }
                    }
                };
                match mode {
                    InterpMode::Nearest => {
                        tidx[d] = fix(v as i64);
                        tw[d] = 1.0;
                    }
                    InterpMode::Linear => {
                        let f = v.floor();
                        let r = v - f;
                        tidx[d * 2] = fix(f as i64);
                        tidx[d * 2 + 1] = fix(f as i64 + 1);
                        tw[d * 2] = 1.0 - r;
                        tw[d * 2 + 1] = r;
                    }
                    InterpMode::Cubic => {
                        let f = v.floor();
                        let cf = cubic_a75(v - f);
                        for j in 0..4 {
                            tidx[d * 4 + j] = fix(f as i64 - 1 + j as i64);
                            tw[d * 4 + j] = cf[j];
                        }
                    }
                }
            }
            for ci in 0..c {
                let img = &xv[(ni * c + ci) * isz..(ni * c + ci + 1) * isz];
                let mut acc = 0.0;
                'combo: for mut cmb in 0..combos {
                    let mut off = 0;
                    let mut wgt = 1.0;
                    for d in (0..k).rev() {
                        let j = cmb % taps;
                        cmb /= taps;
                        match tidx[d * taps + j] {
                            Some(i) => off += i * ist[d],
                            None => continue 'combo,
                        }
                        wgt *= tw[d * taps + j];
                    }
                    acc += wgt * img[off];
                }
                out[(ni * c + ci) * npts + p] = acc;
            }
        }
    }
    one(Tensor::from_f64(xt.dtype(), oshape, &out)?)
}

// ---------------------------------------------------------------- AffineGrid

/// AffineGrid: theta [N, 2, 3] / [N, 3, 4] and size [N, C, H, W] / [N, C, D, H, W].
pub fn affine_grid(x: &Inputs, align: bool) -> Result<Vec<Value>> {
    let theta = x.tensor(0)?;
    let size = x.tensor(1)?.to_i64()?;
    ensure!(
        size.len() == 4 || size.len() == 5,
        InvalidModel,
        "AffineGrid: size must have 4 or 5 values, got {size:?}"
    );
    ensure!(
        size.iter().all(|&s| s >= 0),
        InvalidModel,
        "AffineGrid: negative size {size:?}"
    );
    let k = size.len() - 2;
    let n = size[0] as usize;
    ensure!(
        theta.shape() == [n, k, k + 1],
        InvalidModel,
        "AffineGrid: theta must be [{n}, {k}, {}], got {:?}",
        k + 1,
        theta.shape()
    );
    let sp: Vec<usize> = size[2..].iter().map(|&s| s as usize).collect();
    let base = |i: usize, len: usize| -> f64 {
        if align {
            if len <= 1 {
                -1.0
            } else {
                -1.0 + 2.0 * i as f64 / (len - 1) as f64
            }
        } else {
            (2 * i + 1) as f64 / len as f64 - 1.0
        }
    };
    let th = theta.to_f64()?;
    let mut shape = vec![n];
    shape.extend_from_slice(&sp);
    shape.push(k);
    let total = out_numel(&shape)?;
    let npts: usize = smelt_ir::dims_product(&sp);
    let mut out = Vec::with_capacity(total);
    let st = strides(&sp);
    for ni in 0..n {
        let m = &th[ni * k * (k + 1)..(ni + 1) * k * (k + 1)];
        for p in 0..npts {
            // Homogeneous point (x, y[, z], 1): x runs along the last spatial dim.
            let mut h = vec![1.0; k + 1];
            for d in 0..k {
                let i = (p / st[d]) % sp[d];
                h[k - 1 - d] = base(i, sp[d]);
            }
            for row in 0..k {
                out.push((0..=k).map(|j| m[row * (k + 1) + j] * h[j]).sum::<f64>());
            }
        }
    }
    one(Tensor::from_f64(theta.dtype(), shape, &out)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect_folds_back() {
        assert_eq!(reflect(-1.5, -0.5, 3.5), 0.5);
        assert_eq!(reflect(4.0, -0.5, 3.5), 3.0);
        assert_eq!(reflect(1.0, 0.0, 0.0), 0.0);
    }
}
