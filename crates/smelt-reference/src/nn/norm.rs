//! Normalizations: BatchNormalization, InstanceNormalization, LayerNormalization,
//! GroupNormalization, RMSNormalization, MeanVarianceNormalization, LRN (computed in f64).

use super::check_float;
use crate::broadcast::{broadcast_shapes, index_map};
use crate::{one, Ctx, Inputs};
use smelt_ir::op::NnOp;
use smelt_ir::{bail, ensure, DType, Result, Tensor, Value};

fn per_channel(t: &Tensor, c: usize, what: &str) -> Result<Vec<f64>> {
    ensure!(
        t.len() == c,
        InvalidModel,
        "{what} has {} elements, expected {c}",
        t.len()
    );
    t.to_f64()
}

/// BatchNormalization (inference, or training mode with batch statistics).
pub fn batch_norm(op: &NnOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    let NnOp::BatchNormalization {
        epsilon,
        momentum,
        training_mode,
        spatial,
    } = op
    else {
        bail!(Internal, "not BatchNormalization")
    };
    let xt = x.tensor(0)?;
    check_float(xt, "BatchNormalization input")?;
    ensure!(
        xt.rank() >= 2,
        InvalidModel,
        "BatchNormalization input must have rank >= 2, got {:?}",
        xt.shape()
    );
    let (n, c) = (xt.shape()[0], xt.shape()[1]);
    let sp: usize = smelt_ir::dims_product(&xt.shape()[2..]);
    // Legacy per-activation statistics: the "channel" is every non-batch element.
    let (c, sp) = if *spatial { (c, sp) } else { (c * sp, 1) };
    let scale = per_channel(x.tensor(1)?, c, "scale")?;
    let bias = per_channel(x.tensor(2)?, c, "B")?;
    let mut mean = per_channel(x.tensor(3)?, c, "mean")?;
    let mut var = per_channel(x.tensor(4)?, c, "var")?;
    let eps = *epsilon as f64;
    let mut outs = Vec::new();
    if *training_mode {
        let cnt = (n * sp) as f64;
        let xv = xt.to_f64()?;
        let mut bm = vec![0f64; c];
        let mut bv = vec![0f64; c];
        for ci in 0..c {
            let vals = (0..n).flat_map(|ni| xv[(ni * c + ci) * sp..(ni * c + ci + 1) * sp].iter());
            let m: f64 = vals.clone().sum::<f64>() / cnt;
            bm[ci] = m;
            bv[ci] = vals.map(|v| (v - m) * (v - m)).sum::<f64>() / cnt;
        }
        let mom = *momentum as f64;
        let run_mean: Vec<f64> = mean
            .iter()
            .zip(&bm)
            .map(|(r, b)| r * mom + b * (1.0 - mom))
            .collect();
        let run_var: Vec<f64> = var
            .iter()
            .zip(&bv)
            .map(|(r, b)| r * mom + b * (1.0 - mom))
            .collect();
        let st = x.tensor(3)?;
        outs.push(Tensor::from_f64(
            st.dtype(),
            st.shape().to_vec(),
            &run_mean,
        )?);
        outs.push(Tensor::from_f64(st.dtype(), st.shape().to_vec(), &run_var)?);
        // Legacy opsets also output the saved batch mean and variance.
        outs.push(Tensor::from_f64(st.dtype(), st.shape().to_vec(), &bm)?);
        outs.push(Tensor::from_f64(st.dtype(), st.shape().to_vec(), &bv)?);
        mean = bm;
        var = bv;
    }
    let a: Vec<f64> = (0..c).map(|i| scale[i] / (var[i] + eps).sqrt()).collect();
    let b: Vec<f64> = (0..c).map(|i| bias[i] - mean[i] * a[i]).collect();
    let y = if let Some(xv) = xt.as_f32() {
        let mut y = xv.to_vec();
        for (i, ch) in y.chunks_mut(sp.max(1)).enumerate() {
            let (aa, bb) = (a[i % c] as f32, b[i % c] as f32);
            ch.iter_mut().for_each(|v| *v = *v * aa + bb);
        }
        Tensor::from_f32(xt.shape().to_vec(), y)?
    } else {
        let mut y = xt.to_f64()?;
        for (i, ch) in y.chunks_mut(sp.max(1)).enumerate() {
            let (aa, bb) = (a[i % c], b[i % c]);
            ch.iter_mut().for_each(|v| *v = *v * aa + bb);
        }
        Tensor::from_f64(xt.dtype(), xt.shape().to_vec(), &y)?
    };
    let mut res = vec![Value::Tensor(y)];
    for t in outs.into_iter().take(cx.n_outputs.saturating_sub(1)) {
        res.push(Value::Tensor(t));
    }
    Ok(res)
}

/// InstanceNormalization.
pub fn instance_norm(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let NnOp::InstanceNormalization { epsilon } = op else {
        bail!(Internal, "not InstanceNormalization")
    };
    let xt = x.tensor(0)?;
    check_float(xt, "InstanceNormalization input")?;
    ensure!(
        xt.rank() >= 2,
        InvalidModel,
        "InstanceNormalization input must have rank >= 2"
    );
    let c = xt.shape()[1];
    let sp: usize = smelt_ir::dims_product(&xt.shape()[2..]);
    let scale = per_channel(x.tensor(1)?, c, "scale")?;
    let bias = per_channel(x.tensor(2)?, c, "B")?;
    let mut y = xt.to_f64()?;
    for (i, ch) in y.chunks_mut(sp.max(1)).enumerate() {
        normalize(ch, *epsilon as f64, scale[i % c], bias[i % c]);
    }
    one(Tensor::from_f64(xt.dtype(), xt.shape().to_vec(), &y)?)
}

/// Normalizes a slice in place to `scale * (x - mean) / sqrt(var + eps) + bias`.
fn normalize(v: &mut [f64], eps: f64, scale: f64, bias: f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    let inv = 1.0 / (var + eps).sqrt();
    v.iter_mut()
        .for_each(|x| *x = (*x - m) * inv * scale + bias);
}

fn norm_axis(axis: i64, rank: usize) -> Result<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    ensure!(
        a >= 0 && a <= rank as i64,
        InvalidModel,
        "axis {axis} is out of range for rank {rank}"
    );
    Ok(a as usize)
}

/// Reads a tensor broadcast (unidirectionally) to `shape`.
fn bcast(t: &Tensor, shape: &[usize], what: &str) -> Result<Vec<f64>> {
    let b = broadcast_shapes(&[t.shape(), shape])?;
    ensure!(
        b == shape,
        InvalidModel,
        "{what} of shape {:?} does not broadcast to {shape:?}",
        t.shape()
    );
    let v = t.to_f64()?;
    Ok(index_map(t.shape(), shape)
        .into_iter()
        .map(|i| v[i])
        .collect())
}

/// LayerNormalization with optional Mean and InvStdDev outputs.
pub fn layer_norm(op: &NnOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    let NnOp::LayerNormalization {
        axis,
        epsilon,
        stash_type,
    } = op
    else {
        bail!(Internal, "not LayerNormalization")
    };
    let xt = x.tensor(0)?;
    check_float(xt, "LayerNormalization input")?;
    let a = norm_axis(*axis, xt.rank())?;
    let shape = xt.shape();
    let rows: usize = smelt_ir::dims_product(&shape[..a]);
    let cols: usize = smelt_ir::dims_product(&shape[a..]);
    let scale = bcast(x.tensor(1)?, &shape[a..], "Scale")?;
    let bias = match x.opt_tensor(2)? {
        Some(b) => Some(bcast(b, &shape[a..], "B")?),
        None => None,
    };
    let mut y = xt.to_f64()?;
    let mut means = Vec::with_capacity(rows);
    let mut invs = Vec::with_capacity(rows);
    let eps = *epsilon as f64;
    for row in y.chunks_mut(cols.max(1)).take(rows) {
        let n = cols as f64;
        let m = row.iter().sum::<f64>() / n;
        let var = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n;
        let inv = 1.0 / (var + eps).sqrt();
        for (j, v) in row.iter_mut().enumerate() {
            *v = (*v - m) * inv * scale[j] + bias.as_ref().map_or(0.0, |b| b[j]);
        }
        means.push(m);
        invs.push(inv);
    }
    let mut res = vec![Value::Tensor(Tensor::from_f64(
        xt.dtype(),
        shape.to_vec(),
        &y,
    )?)];
    let mut rshape = shape[..a].to_vec();
    rshape.extend(std::iter::repeat_n(1, shape.len() - a));
    let st = if stash_type.is_float() {
        *stash_type
    } else {
        DType::F32
    };
    if cx.n_outputs > 1 {
        res.push(Value::Tensor(Tensor::from_f64(st, rshape.clone(), &means)?));
    }
    if cx.n_outputs > 2 {
        res.push(Value::Tensor(Tensor::from_f64(st, rshape, &invs)?));
    }
    Ok(res)
}

/// RMSNormalization.
pub fn rms_norm(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let NnOp::RmsNormalization { axis, epsilon, .. } = op else {
        bail!(Internal, "not RMSNormalization")
    };
    let xt = x.tensor(0)?;
    check_float(xt, "RMSNormalization input")?;
    let a = norm_axis(*axis, xt.rank())?;
    let shape = xt.shape();
    let cols: usize = smelt_ir::dims_product(&shape[a..]);
    let scale = bcast(x.tensor(1)?, &shape[a..], "scale")?;
    let mut y = xt.to_f64()?;
    for row in y.chunks_mut(cols.max(1)) {
        let ms = row.iter().map(|v| v * v).sum::<f64>() / cols as f64;
        let inv = 1.0 / (ms + *epsilon as f64).sqrt();
        for (j, v) in row.iter_mut().enumerate() {
            *v = *v * inv * scale[j];
        }
    }
    one(Tensor::from_f64(xt.dtype(), shape.to_vec(), &y)?)
}

/// GroupNormalization (scale/bias per channel, or per group for opset 18).
pub fn group_norm(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let NnOp::GroupNormalization {
        epsilon,
        num_groups,
        per_group_affine,
        ..
    } = op
    else {
        bail!(Internal, "not GroupNormalization")
    };
    let xt = x.tensor(0)?;
    check_float(xt, "GroupNormalization input")?;
    ensure!(
        xt.rank() >= 2,
        InvalidModel,
        "GroupNormalization input must have rank >= 2"
    );
    let (n, c) = (xt.shape()[0], xt.shape()[1]);
    let g = *num_groups as usize;
    ensure!(
        c % g == 0,
        InvalidModel,
        "channels {c} are not divisible by num_groups {g}"
    );
    let sp: usize = smelt_ir::dims_product(&xt.shape()[2..]);
    let na = if *per_group_affine { g } else { c };
    let scale = per_channel(x.tensor(1)?, na, "scale")?;
    let bias = per_channel(x.tensor(2)?, na, "bias")?;
    let cg = c / g;
    let mut y = xt.to_f64()?;
    let eps = *epsilon as f64;
    for ni in 0..n {
        for gi in 0..g {
            let s = &mut y[(ni * c + gi * cg) * sp..(ni * c + (gi + 1) * cg) * sp];
            normalize(s, eps, 1.0, 0.0);
            for (k, v) in s.iter_mut().enumerate() {
                let ch = gi * cg + k / sp.max(1);
                let ai = if *per_group_affine { gi } else { ch };
                *v = *v * scale[ai] + bias[ai];
            }
        }
    }
    one(Tensor::from_f64(xt.dtype(), xt.shape().to_vec(), &y)?)
}

/// MeanVarianceNormalization: `(x - mean) / (std + 1e-9)` over the axes.
pub fn mvn(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let NnOp::MeanVarianceNormalization { axes } = op else {
        bail!(Internal, "not MeanVarianceNormalization")
    };
    let xt = x.tensor(0)?;
    check_float(xt, "MeanVarianceNormalization input")?;
    let rank = xt.rank();
    let mut red = vec![false; rank];
    for &a in axes {
        let a = if a < 0 { a + rank as i64 } else { a };
        ensure!(
            a >= 0 && (a as usize) < rank,
            InvalidModel,
            "axis out of range for rank {rank}"
        );
        red[a as usize] = true;
    }
    let shape = xt.shape();
    let kept: Vec<usize> = shape
        .iter()
        .zip(&red)
        .map(|(&d, &r)| if r { 1 } else { d })
        .collect();
    let map = index_map(&kept, shape);
    let nk: usize = smelt_ir::dims_product(&kept);
    let xv = xt.to_f64()?;
    let mut s = vec![0f64; nk];
    let mut s2 = vec![0f64; nk];
    let mut cnt = vec![0f64; nk];
    for (v, &k) in xv.iter().zip(&map) {
        s[k] += v;
        s2[k] += v * v;
        cnt[k] += 1.0;
    }
    let y: Vec<f64> = xv
        .iter()
        .zip(&map)
        .map(|(v, &k)| {
            let m = s[k] / cnt[k];
            let var = (s2[k] / cnt[k] - m * m).max(0.0);
            (v - m) / (var.sqrt() + 1e-9)
        })
        .collect();
    one(Tensor::from_f64(xt.dtype(), shape.to_vec(), &y)?)
}

/// LRN across channels.
pub fn lrn(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let NnOp::Lrn {
        alpha,
        beta,
        bias,
        size,
    } = op
    else {
        bail!(Internal, "not LRN")
    };
    let xt = x.tensor(0)?;
    check_float(xt, "LRN input")?;
    ensure!(
        xt.rank() >= 3,
        InvalidModel,
        "LRN input must have rank >= 3"
    );
    let (n, c) = (xt.shape()[0], xt.shape()[1]);
    let sp: usize = smelt_ir::dims_product(&xt.shape()[2..]);
    let size = *size as usize;
    let (lo, hi) = ((size - 1) / 2, (size - 1).div_ceil(2));
    let xv = xt.to_f64()?;
    let mut y = vec![0f64; xv.len()];
    let (al, be, bi) = (*alpha as f64, *beta as f64, *bias as f64);
    // Each output sums its window: a wide window over many channels stops at the run's
    // deadline or cancel.
    let mut pacer = smelt_ir::WorkPacer::new();
    for ni in 0..n {
        for ci in 0..c {
            let (b, e) = (ci.saturating_sub(lo), ci.saturating_add(hi).min(c - 1));
            pacer.done(((e - b + 1) as u64).saturating_mul(sp as u64))?;
            for p in 0..sp {
                let sq: f64 = (b..=e).map(|cc| xv[(ni * c + cc) * sp + p].powi(2)).sum();
                let i = (ni * c + ci) * sp + p;
                y[i] = xv[i] / (bi + al / size as f64 * sq).powf(be);
            }
        }
    }
    one(Tensor::from_f64(xt.dtype(), xt.shape().to_vec(), &y)?)
}

/// LpNormalization: `x / ||x||_p` along one axis, 0 where the norm is 0.
pub fn lp_norm(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let NnOp::LpNormalization { axis, p } = op else {
        bail!(Internal, "not LpNormalization")
    };
    let xt = x.tensor(0)?;
    check_float(xt, "LpNormalization input")?;
    let rank = xt.rank();
    let a = if *axis < 0 {
        *axis + rank as i64
    } else {
        *axis
    };
    ensure!(
        a >= 0 && (a as usize) < rank,
        InvalidModel,
        "axis {axis} is out of range for rank {rank}"
    );
    let a = a as usize;
    let shape = xt.shape();
    let (outer, len, inner) = (
        shape[..a].iter().product::<usize>(),
        shape[a],
        shape[a + 1..].iter().product::<usize>(),
    );
    let mut y = xt.to_f64()?;
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * len + j) * inner + i;
            let norm = if *p == 1 {
                (0..len).map(|j| y[at(j)].abs()).sum::<f64>()
            } else {
                (0..len).map(|j| y[at(j)] * y[at(j)]).sum::<f64>().sqrt()
            };
            for j in 0..len {
                let k = at(j);
                y[k] = if norm == 0.0 { 0.0 } else { y[k] / norm };
            }
        }
    }
    one(Tensor::from_f64(xt.dtype(), shape.to_vec(), &y)?)
}
