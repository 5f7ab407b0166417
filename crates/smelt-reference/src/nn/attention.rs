//! Attention (opset 23+: masks, GQA, causal, softcap, windows, past key/values) and RotaryEmbedding.

use crate::broadcast::index_map;
use crate::{one, Ctx, Inputs};
use smelt_ir::op::NnOp;
use smelt_ir::{bail, ensure, DType, Result, Tensor, Value};

/// Rounds values to `dtype`'s precision (a no-op for f64).
fn round_to(dtype: DType, v: &mut [f64]) -> Result<()> {
    if dtype == DType::F64 {
        return Ok(());
    }
    if dtype == DType::F32 {
        v.iter_mut().for_each(|x| *x = *x as f32 as f64);
        return Ok(());
    }
    let t = Tensor::from_f64(dtype, vec![v.len()], v)?;
    v.copy_from_slice(&t.to_f64()?);
    Ok(())
}

/// Q, K or V as (batch, heads, seq, head_size) f64 values.
struct Heads {
    v: Vec<f64>,
    b: usize,
    h: usize,
    s: usize,
    d: usize,
}

impl Heads {
    fn from(t: &Tensor, heads: Option<i64>, what: &str) -> Result<Heads> {
        let v = t.to_f64()?;
        match t.rank() {
            4 => {
                let s = t.shape();
                Ok(Heads {
                    v,
                    b: s[0],
                    h: s[1],
                    s: s[2],
                    d: s[3],
                })
            }
            3 => {
                let sh = t.shape();
                let h = heads.ok_or_else(|| {
                    smelt_ir::err!(InvalidModel, "3-D {what} needs the num_heads attributes")
                })?;
                ensure!(
                    h > 0 && (h as u64) <= sh[2].max(1) as u64 && sh[2].is_multiple_of(h as usize),
                    InvalidModel,
                    "{what} hidden size {} is not divisible by {h} heads",
                    sh[2]
                );
                let (b, s, h) = (sh[0], sh[1], h as usize);
                let d = sh[2] / h;
                let mut out = vec![0f64; v.len()];
                for bi in 0..b {
                    for si in 0..s {
                        for hi in 0..h {
                            let src = ((bi * s + si) * h + hi) * d;
                            let dst = ((bi * h + hi) * s + si) * d;
                            out[dst..dst + d].copy_from_slice(&v[src..src + d]);
                        }
                    }
                }
                Ok(Heads { v: out, b, h, s, d })
            }
            r => bail!(InvalidModel, "{what} must be 3-D or 4-D, got rank {r}"),
        }
    }

    fn concat_past(self, past: &Tensor, what: &str) -> Result<Heads> {
        let p = past.shape();
        ensure!(
            past.rank() == 4 && p[0] == self.b && p[1] == self.h && p[3] == self.d,
            InvalidModel,
            "{what} shape {p:?} does not match"
        );
        let pv = past.to_f64()?;
        let s = p[2] + self.s;
        let mut v = Vec::with_capacity(self.b * self.h * s * self.d);
        for bh in 0..self.b * self.h {
            v.extend_from_slice(&pv[bh * p[2] * self.d..(bh + 1) * p[2] * self.d]);
            v.extend_from_slice(&self.v[bh * self.s * self.d..(bh + 1) * self.s * self.d]);
        }
        Ok(Heads {
            v,
            b: self.b,
            h: self.h,
            s,
            d: self.d,
        })
    }

    fn row(&self, b: usize, h: usize, s: usize) -> &[f64] {
        let o = ((b * self.h + h) * self.s + s) * self.d;
        &self.v[o..o + self.d]
    }
}

/// The Attention operator.
pub fn attention(op: &NnOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    let NnOp::Attention {
        is_causal,
        kv_num_heads,
        q_num_heads,
        qk_matmul_output_mode,
        scale,
        softcap,
        softmax_precision,
        left_window_size,
        right_window_size,
    } = op
    else {
        bail!(Internal, "not Attention")
    };
    let (qt, kt, vt) = (x.tensor(0)?, x.tensor(1)?, x.tensor(2)?);
    let dt = qt.dtype();
    ensure!(
        dt.is_float(),
        Unsupported,
        "Attention needs float inputs, got {dt}"
    );
    ensure!(
        qt.rank() == kt.rank() && kt.rank() == vt.rank(),
        InvalidModel,
        "Q, K and V must have the same rank"
    );
    let three_d = qt.rank() == 3;
    let q = Heads::from(qt, *q_num_heads, "Q")?;
    let mut k = Heads::from(kt, *kv_num_heads, "K")?;
    let mut v = Heads::from(vt, *kv_num_heads, "V")?;
    let mask = x.opt_tensor(3)?;
    let (pk, pv) = (x.opt_tensor(4)?, x.opt_tensor(5)?);
    ensure!(
        pk.is_some() == pv.is_some(),
        InvalidModel,
        "past_key and past_value must be given together"
    );
    let nonpad = x.opt_ints(6)?;
    let past_len = pk.map(|p| p.shape().get(2).copied().unwrap_or(0));
    if let (Some(pk), Some(pv)) = (pk, pv) {
        k = k.concat_past(pk, "past_key")?;
        v = v.concat_past(pv, "past_value")?;
    }
    ensure!(
        k.b == q.b && v.b == q.b && k.h == v.h && k.s == v.s && k.d == q.d,
        InvalidModel,
        "Q, K and V shapes do not match"
    );
    ensure!(
        k.h > 0 && q.h % k.h == 0,
        InvalidModel,
        "q heads {} are not a multiple of kv heads {}",
        q.h,
        k.h
    );
    let (b, hq, sq, t, d, dv) = (q.b, q.h, q.s, k.s, q.d, v.d);
    let reps = hq / k.h;
    if let Some(np) = &nonpad {
        ensure!(
            np.len() == b,
            InvalidModel,
            "nonpad_kv_seqlen has {} values, expected {b}",
            np.len()
        );
    }
    let offset = |bi: usize| -> i64 {
        match (past_len, &nonpad) {
            (Some(p), _) => p as i64,
            (None, Some(np)) => np[bi] - sq as i64,
            _ => 0,
        }
    };
    // Mask values broadcast to (b, hq, sq, tm).
    let (mvals, mmap, tm, mbool) = match mask {
        Some(m) => {
            ensure!(
                m.rank() >= 1 && m.rank() <= 4,
                InvalidModel,
                "attn_mask must have rank 1..4, got {:?}",
                m.shape()
            );
            let tm = m.shape()[m.rank() - 1];
            let target = [b, hq, sq, tm];
            let ms = m.shape();
            for (i, &dd) in ms.iter().enumerate() {
                let td = target[4 - ms.len() + i];
                ensure!(
                    dd == td || dd == 1,
                    InvalidModel,
                    "attn_mask shape {ms:?} does not broadcast to {target:?}"
                );
            }
            (
                m.to_f64()?,
                index_map(ms, &target),
                tm,
                m.dtype() == DType::Bool,
            )
        }
        None => (Vec::new(), Vec::new(), 0, false),
    };
    let sc = scale
        .map(|s| s as f64)
        .unwrap_or(1.0 / (d as f64).sqrt())
        .sqrt();
    let sc = {
        let mut s = [sc];
        round_to(dt, &mut s)?;
        s[0]
    };
    let sm_type = softmax_precision.unwrap_or(dt);
    let mut y: Vec<f64> = crate::zeroed(&[b, hq, sq, dv], "Attention's output")?;
    let mut qk_out: Vec<f64> = crate::zeroed(&[b, hq, sq, t], "Attention's scores")?;
    // Q and K scaled by sqrt(scale) and rounded to the input type, as the reference does.
    let mut qsc: Vec<f64> = q.v.iter().map(|v| v * sc).collect();
    round_to(dt, &mut qsc)?;
    let mut ksc: Vec<f64> = k.v.iter().map(|v| v * sc).collect();
    round_to(dt, &mut ksc)?;
    let mut scores = vec![0f64; t];
    let mut bias = vec![0f64; t];
    for bi in 0..b {
        let off = offset(bi);
        for hi in 0..hq {
            let kh = hi / reps;
            for i in 0..sq {
                let qo = ((bi * hq + hi) * sq + i) * d;
                let qs = &qsc[qo..qo + d];
                for j in 0..t {
                    let ko = ((bi * k.h + kh) * t + j) * d;
                    let ks = &ksc[ko..ko + d];
                    scores[j] = qs.iter().zip(ks).map(|(a, c)| a * c).sum();
                    // Additive bias: mask, causal frontier, window, padding.
                    let mut bv = 0.0;
                    if mask.is_some() {
                        if j >= tm {
                            bv = f64::NEG_INFINITY;
                        } else {
                            let mv = mvals[mmap[((bi * hq + hi) * sq + i) * tm + j]];
                            bv = if mbool {
                                if mv != 0.0 {
                                    0.0
                                } else {
                                    f64::NEG_INFINITY
                                }
                            } else {
                                mv
                            };
                        }
                    }
                    let p = i as i64 + off;
                    if *is_causal && j as i64 > p {
                        bv += f64::NEG_INFINITY;
                    }
                    let diff = p - j as i64;
                    if (*left_window_size >= 0 && diff > *left_window_size)
                        || (*right_window_size >= 0 && -diff > *right_window_size)
                    {
                        bv += f64::NEG_INFINITY;
                    }
                    if let Some(np) = &nonpad {
                        if j as i64 >= np[bi] {
                            bv += f64::NEG_INFINITY;
                        }
                    }
                    bias[j] = bv;
                }
                round_to(dt, &mut scores)?;
                if *softcap > 0.0 {
                    let c = *softcap as f64;
                    scores.iter_mut().for_each(|s| *s = c * (*s / c).tanh());
                    round_to(dt, &mut scores)?;
                }
                let qo = ((bi * hq + hi) * sq + i) * t;
                if *qk_matmul_output_mode <= 1 {
                    qk_out[qo..qo + t].copy_from_slice(&scores);
                }
                for (s, bb) in scores.iter_mut().zip(&bias) {
                    *s += bb;
                }
                if *qk_matmul_output_mode == 2 {
                    qk_out[qo..qo + t].copy_from_slice(&scores);
                }
                round_to(sm_type, &mut scores)?;
                let all_masked = bias.iter().all(|&v| v == f64::NEG_INFINITY);
                if all_masked {
                    scores.fill(0.0);
                } else {
                    let mx = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let mx = if mx == f64::NEG_INFINITY { 0.0 } else { mx };
                    // Round after each step like the reference's elementwise numpy ops.
                    scores.iter_mut().for_each(|s| *s -= mx);
                    round_to(sm_type, &mut scores)?;
                    scores.iter_mut().for_each(|s| *s = s.exp());
                    round_to(sm_type, &mut scores)?;
                    let mut sum = [0.0];
                    if sm_type == DType::BF16 {
                        // ml_dtypes' bfloat16 sum rounds after every addition.
                        for &s in &scores {
                            sum[0] += s;
                            round_to(sm_type, &mut sum)?;
                        }
                    } else {
                        sum[0] = scores.iter().sum::<f64>();
                        round_to(sm_type, &mut sum)?;
                    }
                    let sum = if sum[0] == 0.0 { 1.0 } else { sum[0] };
                    scores.iter_mut().for_each(|s| *s /= sum);
                    round_to(sm_type, &mut scores)?;
                }
                round_to(dt, &mut scores)?;
                if *qk_matmul_output_mode == 3 {
                    qk_out[qo..qo + t].copy_from_slice(&scores);
                }
                let yo = ((bi * hq + hi) * sq + i) * dv;
                for (j, &pj) in scores.iter().enumerate() {
                    if pj == 0.0 {
                        continue;
                    }
                    for (yy, vv) in y[yo..yo + dv].iter_mut().zip(v.row(bi, kh, j)) {
                        *yy += pj * vv;
                    }
                }
            }
        }
    }
    let y = if three_d {
        let mut out = vec![0f64; y.len()];
        for bi in 0..b {
            for hi in 0..hq {
                for i in 0..sq {
                    let src = ((bi * hq + hi) * sq + i) * dv;
                    let dst = ((bi * sq + i) * hq + hi) * dv;
                    out[dst..dst + dv].copy_from_slice(&y[src..src + dv]);
                }
            }
        }
        Tensor::from_f64(dt, vec![b, sq, hq * dv], &out)?
    } else {
        Tensor::from_f64(dt, vec![b, hq, sq, dv], &y)?
    };
    let mut res = vec![Value::Tensor(y)];
    if cx.n_outputs > 1 {
        res.push(Value::Tensor(Tensor::from_f64(
            kt.dtype(),
            vec![b, k.h, t, d],
            &k.v,
        )?));
    }
    if cx.n_outputs > 2 {
        res.push(Value::Tensor(Tensor::from_f64(
            vt.dtype(),
            vec![b, v.h, t, dv],
            &v.v,
        )?));
    }
    if cx.n_outputs > 3 {
        res.push(Value::Tensor(Tensor::from_f64(
            dt,
            vec![b, hq, sq, t],
            &qk_out,
        )?));
    }
    Ok(res)
}

/// RotaryEmbedding.
pub fn rotary(op: &NnOp, x: &Inputs) -> Result<Vec<Value>> {
    let NnOp::RotaryEmbedding {
        interleaved,
        num_heads,
        rotary_embedding_dim,
    } = op
    else {
        bail!(Internal, "not RotaryEmbedding")
    };
    let xt = x.tensor(0)?;
    let (cos_t, sin_t) = (x.tensor(1)?, x.tensor(2)?);
    let pos = x.opt_ints(3)?;
    let xv = xt.to_f64()?;
    let sh = xt.shape();
    // Element offset of (b, s, h, 0) and the sizes.
    let (b, s, h, d, four) = match xt.rank() {
        4 => (sh[0], sh[2], sh[1], sh[3], true),
        3 => {
            let nh = num_heads.ok_or_else(|| {
                smelt_ir::err!(InvalidModel, "3-D RotaryEmbedding input needs num_heads")
            })?;
            ensure!(
                nh > 0 && sh[2] % nh as usize == 0,
                InvalidModel,
                "hidden size {} is not divisible by num_heads {nh}",
                sh[2]
            );
            (sh[0], sh[1], nh as usize, sh[2] / nh as usize, false)
        }
        r => bail!(
            InvalidModel,
            "RotaryEmbedding input must be 3-D or 4-D, got rank {r}"
        ),
    };
    let rd = if *rotary_embedding_dim > 0 {
        *rotary_embedding_dim as usize
    } else {
        d
    };
    ensure!(
        rd <= d && rd % 2 == 0,
        InvalidModel,
        "rotary_embedding_dim {rd} is invalid for head size {d}"
    );
    let half = rd / 2;
    let (cv, sv) = (cos_t.to_f64()?, sin_t.to_f64()?);
    ensure!(
        cos_t.shape().last() == Some(&half) && sin_t.shape() == cos_t.shape(),
        InvalidModel,
        "cos/sin cache shapes {:?} do not match rotary dim {rd}",
        cos_t.shape()
    );
    let cache_row = |bi: usize, si: usize| -> Result<usize> {
        match &pos {
            Some(p) => {
                ensure!(
                    p.len() == b * s,
                    InvalidModel,
                    "position_ids must have shape [{b}, {s}]"
                );
                let id = p[bi * s + si];
                let rows = cos_t.len() / half.max(1);
                ensure!(
                    id >= 0 && (id as usize) < rows,
                    InvalidInput,
                    "position id {id} is outside the cache of {rows} rows"
                );
                Ok(id as usize)
            }
            None => {
                ensure!(
                    cos_t.len() == b * s * half,
                    InvalidModel,
                    "cos cache must have shape [{b}, {s}, {half}] without position_ids"
                );
                Ok(bi * s + si)
            }
        }
    };
    let mut y = xv.clone();
    for bi in 0..b {
        for si in 0..s {
            let r = cache_row(bi, si)?;
            let (c, sn) = (&cv[r * half..(r + 1) * half], &sv[r * half..(r + 1) * half]);
            for hi in 0..h {
                let o = if four {
                    ((bi * h + hi) * s + si) * d
                } else {
                    ((bi * s + si) * h + hi) * d
                };
                for i in 0..half {
                    let (i1, i2) = if *interleaved {
                        (o + 2 * i, o + 2 * i + 1)
                    } else {
                        (o + i, o + i + half)
                    };
                    let (x1, x2) = (xv[i1], xv[i2]);
                    y[i1] = c[i] * x1 - sn[i] * x2;
                    y[i2] = sn[i] * x1 + c[i] * x2;
                }
            }
        }
    }
    one(Tensor::from_f64(xt.dtype(), sh.to_vec(), &y)?)
}
