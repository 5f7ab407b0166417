//! LinearAttention (recurrent state, packed heads) and FlexAttention (softmax attention with
//! score/probability modifier subgraphs).

use super::{float_input, round_to};
use crate::{Ctx, Inputs};
use smelt_ir::op::llm::LinearAttentionRule;
use smelt_ir::op::LlmOp;
use smelt_ir::{bail, err, DType, Graph, Result, Tensor, Value};

/// Shape `(B, T, last)` of a rank-3 tensor.
fn rank3(t: &Tensor, what: &str) -> Result<(usize, usize, usize)> {
    match *t.shape() {
        [b, n, l] => Ok((b, n, l)),
        _ => bail!(
            InvalidModel,
            "{what} must have rank 3 (B, T, H*D), got shape {:?}",
            t.shape()
        ),
    }
}

pub(super) fn linear_attention(op: &LlmOp, x: &Inputs) -> Result<Vec<Value>> {
    let LlmOp::LinearAttention {
        q_num_heads,
        kv_num_heads,
        scale,
        update_rule,
        ..
    } = op
    else {
        bail!(Internal, "not a LinearAttention op")
    };
    let (hq, hkv) = (*q_num_heads, *kv_num_heads);
    if hq <= 0 || hkv <= 0 || hq % hkv != 0 {
        bail!(
            InvalidModel,
            "q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})"
        );
    }
    let (hq, hkv) = (hq as usize, hkv as usize);
    let group = hq / hkv;
    let query = float_input(x.tensor(0)?, "query")?;
    let key = x.tensor(1)?;
    let value = x.tensor(2)?;
    let (b, t, ql) = rank3(query, "query")?;
    let (kb, kt, kl) = rank3(key, "key")?;
    let (vb, vt, vl) = rank3(value, "value")?;
    if (kb, kt) != (b, t) || (vb, vt) != (b, t) {
        bail!(
            InvalidModel,
            "query {:?}, key {:?} and value {:?} must agree in batch and sequence length",
            query.shape(),
            key.shape(),
            value.shape()
        );
    }
    if ql % hq != 0 || vl % hkv != 0 {
        bail!(
            InvalidModel,
            "query's last dim {ql} or value's {vl} is not divisible by its head count"
        );
    }
    let (dk, dv) = (ql / hq, vl / hkv);
    if kl != hkv * dk {
        bail!(
            InvalidModel,
            "key's last dim is {kl}; expected kv_num_heads * d_k = {}",
            hkv * dk
        );
    }
    let gating = matches!(
        update_rule,
        LinearAttentionRule::Gated | LinearAttentionRule::GatedDelta
    );
    let delta = matches!(
        update_rule,
        LinearAttentionRule::Delta | LinearAttentionRule::GatedDelta
    );
    let decay = x.opt_tensor(4)?;
    let beta = x.opt_tensor(5)?;
    if gating != decay.is_some() {
        bail!(
            InvalidModel,
            "update_rule {update_rule:?} {} the decay input",
            need(gating)
        );
    }
    if delta != beta.is_some() {
        bail!(
            InvalidModel,
            "update_rule {update_rule:?} {} the beta input",
            need(delta)
        );
    }
    // Decay per (b, t, head, key dim): stride 0 over key dims when given per head.
    let decay = match decay {
        Some(d) => {
            let (db, dt, dl) = rank3(d, "decay")?;
            if (db, dt) != (b, t) || (dl != hkv && dl != hkv * dk) {
                bail!(
                    InvalidModel,
                    "decay must have shape ({b}, {t}, {hkv}) or ({b}, {t}, {}), got {:?}",
                    hkv * dk,
                    d.shape()
                );
            }
            Some((d.to_f64()?, dl == hkv * dk))
        }
        None => None,
    };
    let beta = match beta {
        Some(d) => {
            let (bb, bt, bl) = rank3(d, "beta")?;
            if (bb, bt) != (b, t) || (bl != hkv && bl != 1) {
                bail!(
                    InvalidModel,
                    "beta must have shape ({b}, {t}, {hkv}) or ({b}, {t}, 1), got {:?}",
                    d.shape()
                );
            }
            Some((d.to_f64()?, bl))
        }
        None => None,
    };
    let (mut state, state_dt) = match x.opt_tensor(3)? {
        Some(p) => {
            if p.shape() != [b, hkv, dk, dv] {
                bail!(
                    InvalidModel,
                    "past_state must have shape [{b}, {hkv}, {dk}, {dv}], got {:?}",
                    p.shape()
                );
            }
            (float_input(p, "past_state")?.to_f64()?, p.dtype())
        }
        None => (
            crate::zeroed(&[b, hkv, dk, dv], "the attention state")?,
            query.dtype(),
        ),
    };
    let scale = scale.map_or(1.0 / (dk as f64).sqrt(), |s| s as f64);
    let (q, k, v) = (query.to_f64()?, key.to_f64()?, value.to_f64()?);
    let mut out: Vec<f64> = crate::zeroed(&[b, t, hq, dv], "the attention output")?;
    let mut vt_buf = vec![0.0; dv];
    for bi in 0..b {
        for ti in 0..t {
            let bt = bi * t + ti;
            for h in 0..hkv {
                let s = &mut state[(bi * hkv + h) * dk * dv..][..dk * dv];
                let kt = &k[(bt * hkv + h) * dk..][..dk];
                vt_buf.copy_from_slice(&v[(bt * hkv + h) * dv..][..dv]);
                if let Some((g, per_dim)) = &decay {
                    for i in 0..dk {
                        let gi = if *per_dim {
                            g[(bt * hkv + h) * dk + i]
                        } else {
                            g[bt * hkv + h]
                        };
                        let f = gi.exp();
                        s[i * dv..(i + 1) * dv].iter_mut().for_each(|e| *e *= f);
                    }
                }
                if let Some((bv, bl)) = &beta {
                    let be = if *bl == 1 { bv[bt] } else { bv[bt * hkv + h] };
                    for (m, vm) in vt_buf.iter_mut().enumerate() {
                        let retrieved: f64 = (0..dk).map(|i| s[i * dv + m] * kt[i]).sum();
                        *vm = be * (*vm - retrieved);
                    }
                }
                for i in 0..dk {
                    for m in 0..dv {
                        s[i * dv + m] += kt[i] * vt_buf[m];
                    }
                }
                for qh in h * group..(h + 1) * group {
                    let qt = &q[(bt * hq + qh) * dk..][..dk];
                    let o = &mut out[(bt * hq + qh) * dv..][..dv];
                    for (m, om) in o.iter_mut().enumerate() {
                        let acc: f64 = (0..dk).map(|i| qt[i] * s[i * dv + m]).sum();
                        *om = scale * acc;
                    }
                }
            }
        }
    }
    Ok(vec![
        Value::Tensor(Tensor::from_f64(query.dtype(), vec![b, t, hq * dv], &out)?),
        Value::Tensor(Tensor::from_f64(state_dt, vec![b, hkv, dk, dv], &state)?),
    ])
}

fn need(yes: bool) -> &'static str {
    if yes {
        "requires"
    } else {
        "does not take"
    }
}

fn rank4(t: &Tensor, what: &str) -> Result<[usize; 4]> {
    match *t.shape() {
        [a, b, c, d] => Ok([a, b, c, d]),
        _ => bail!(
            InvalidModel,
            "{what} must have rank 4, got shape {:?}",
            t.shape()
        ),
    }
}

/// Runs a modifier subgraph on a `(B, Hq, L, S)` tensor and checks its output's shape.
fn run_mod(
    cx: &Ctx,
    g: &Graph,
    name: &str,
    dt: DType,
    shape: &[usize],
    v: &[f64],
) -> Result<Vec<f64>> {
    let t = Tensor::from_f64(dt, shape.to_vec(), v)?;
    let outs = cx
        .run_subgraph(g, vec![Value::Tensor(t)])
        .map_err(|e| e.context(format!("in {name}")))?;
    let out = outs
        .first()
        .ok_or_else(|| err!(InvalidModel, "{name} produced no output"))?
        .tensor()?;
    if out.shape() != shape {
        bail!(
            InvalidModel,
            "{name} changed the shape {shape:?} to {:?}",
            out.shape()
        );
    }
    let r = out.to_f64()?;
    Ok(r.into_iter().map(|e| round_to(dt, e)).collect())
}

pub(super) fn flex_attention(op: &LlmOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    let LlmOp::FlexAttention {
        scale,
        score_mod,
        prob_mod,
        softmax_precision,
    } = op
    else {
        bail!(Internal, "not a FlexAttention op")
    };
    let q = float_input(x.tensor(0)?, "Q")?;
    let k = x.tensor(1)?;
    let v = x.tensor(2)?;
    let [b, hq, l, e] = rank4(q, "Q")?;
    let [kb, hkv, s, ke] = rank4(k, "K")?;
    let [vb, vh, vs, ev] = rank4(v, "V")?;
    if kb != b || vb != b || vh != hkv || vs != s || ke != e {
        bail!(
            InvalidModel,
            "Q {:?}, K {:?} and V {:?} do not fit (B, Hq, L, E), (B, Hkv, S, E), (B, Hkv, S, Ev)",
            q.shape(),
            k.shape(),
            v.shape()
        );
    }
    if hkv == 0 || hq % hkv != 0 {
        bail!(
            InvalidModel,
            "Q's head count {hq} must be a multiple of K's {hkv}"
        );
    }
    let group = hq / hkv;
    let dt = q.dtype();
    let cdt = softmax_precision.unwrap_or(if dt == DType::F64 {
        DType::F64
    } else {
        DType::F32
    });
    let scale = scale.map_or(1.0 / (e as f64).sqrt(), |s| s as f64);
    // As the ONNX reference: Q and K are each pre-scaled by sqrt(scale) in the input type.
    let ss = round_to(dt, (scale as f32).sqrt() as f64);
    let qv: Vec<f64> = q.to_f64()?.iter().map(|&a| round_to(dt, a * ss)).collect();
    let kv: Vec<f64> = k.to_f64()?.iter().map(|&a| round_to(dt, a * ss)).collect();
    let vv = v.to_f64()?;
    let sshape = [b, hq, l, s];
    let mut scores: Vec<f64> = crate::zeroed(&[b, hq, l, s], "the attention scores")?;
    for bi in 0..b {
        for h in 0..hq {
            let kh = bi * hkv + h / group;
            for i in 0..l {
                let qr = &qv[((bi * hq + h) * l + i) * e..][..e];
                for j in 0..s {
                    let kr = &kv[(kh * s + j) * e..][..e];
                    let dot: f64 = qr.iter().zip(kr).map(|(a, b)| a * b).sum();
                    scores[((bi * hq + h) * l + i) * s + j] = round_to(cdt, round_to(dt, dot));
                }
            }
        }
    }
    if let Some(g) = score_mod {
        scores = run_mod(cx, g, "score_mod", cdt, &sshape, &scores)?;
    }
    for row in scores.chunks_mut(s.max(1)) {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut sum = 0.0;
        for p in row.iter_mut() {
            *p = (*p - max).exp();
            sum += *p;
        }
        row.iter_mut().for_each(|p| *p = round_to(cdt, *p / sum));
    }
    if let Some(g) = prob_mod {
        scores = run_mod(cx, g, "prob_mod", cdt, &sshape, &scores)?;
    }
    let mut out: Vec<f64> = crate::zeroed(&[b, hq, l, ev], "the attention output")?;
    for bi in 0..b {
        for h in 0..hq {
            let kh = bi * hkv + h / group;
            for i in 0..l {
                let pr = &scores[((bi * hq + h) * l + i) * s..][..s];
                let o = &mut out[((bi * hq + h) * l + i) * ev..][..ev];
                for (j, &p) in pr.iter().enumerate() {
                    let vr = &vv[(kh * s + j) * ev..][..ev];
                    for (om, &vm) in o.iter_mut().zip(vr) {
                        *om += p * vm;
                    }
                }
            }
        }
    }
    super::super::one(Tensor::from_f64(v.dtype(), vec![b, hq, l, ev], &out)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;

    #[test]
    fn linear_rule_accumulates_outer_products() {
        // One head, d_k = d_v = 1, T = 2: S = k1 v1 + k2 v2; o_t = scale * q_t * S_t.
        let q = Tensor::from_f32(vec![1, 2, 1], vec![1.0, 2.0]).unwrap();
        let k = Tensor::from_f32(vec![1, 2, 1], vec![3.0, 4.0]).unwrap();
        let v = Tensor::from_f32(vec![1, 2, 1], vec![5.0, 6.0]).unwrap();
        let op = LlmOp::LinearAttention {
            q_num_heads: 1,
            kv_num_heads: 1,
            scale: Some(1.0),
            update_rule: LinearAttentionRule::Linear,
            chunk_size: 64,
        };
        let vals = [Value::Tensor(q), Value::Tensor(k), Value::Tensor(v)];
        let x = Inputs::new(vals.iter().map(Some).collect());
        let out = linear_attention(&op, &x).unwrap();
        let o = out[0].tensor().unwrap().to_f64().unwrap();
        let s = out[1].tensor().unwrap().to_f64().unwrap();
        assert_eq!(o, vec![15.0, 2.0 * 39.0]);
        assert_eq!(s, vec![39.0]);
    }

    #[test]
    fn flex_uniform_scores_average_values() {
        let q = Tensor::from_f32(vec![1, 1, 1, 1], vec![0.0]).unwrap();
        let k = Tensor::from_f32(vec![1, 1, 2, 1], vec![1.0, 2.0]).unwrap();
        let v = Tensor::from_f32(vec![1, 1, 2, 1], vec![1.0, 3.0]).unwrap();
        let op = LlmOp::FlexAttention {
            scale: None,
            score_mod: None,
            prob_mod: None,
            softmax_precision: None,
        };
        let vals = [Value::Tensor(q), Value::Tensor(k), Value::Tensor(v)];
        let env = Env::new();
        let cx = Ctx {
            n_outputs: 1,
            outputs_used: vec![true],
            env: &env,
            consts: &env,
            control: crate::test_control(),
            depth: 0,
            runner: None,
        };
        let out = flex_attention(&op, &Inputs::new(vals.iter().map(Some).collect()), &cx).unwrap();
        assert_eq!(out[0].tensor().unwrap().to_f64().unwrap(), vec![2.0]);
    }
}
