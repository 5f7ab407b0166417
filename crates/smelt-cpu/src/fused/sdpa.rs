//! Plain scaled dot-product attention on f32, the form composite recognition produces:
//! 4-D Q/K/V (grouped heads allowed), an additive f32 mask or none, no cache, not causal,
//! no softcap or window. Per (batch, head): S = Q K^T (packed GEMM), scale and mask, a
//! row softmax in f32, O = P V. Anything else goes to the reference kernel.

use smelt_ir::op::NnOp;
use smelt_ir::{DType, Op, Result, Tensor, Value};
use smelt_reference::nn::gemm::{par_chunks, sgemm_st, threads_for};

/// The attention result, or None when the op or its inputs are outside this fast path.
pub(crate) fn try_sdpa(op: &Op, args: &[Option<&Value>]) -> Option<Result<Tensor>> {
    let Op::Nn(NnOp::Attention {
        is_causal: false,
        kv_num_heads: None,
        q_num_heads: None,
        scale,
        softcap,
        softmax_precision,
        left_window_size,
        right_window_size,
        ..
    }) = op
    else {
        return None;
    };
    let plain = *softcap == 0.0
        && *left_window_size < 0
        && *right_window_size < 0
        && matches!(softmax_precision, None | Some(DType::F32))
        && args.iter().skip(4).all(|a| a.is_none());
    if !plain {
        return None;
    }
    let t = |i: usize| -> Option<&Tensor> {
        args.get(i)
            .copied()
            .flatten()?
            .as_tensor()
            .filter(|t| t.dtype() == DType::F32 && t.rank() == 4)
    };
    let (q, k, v) = (t(0)?, t(1)?, t(2)?);
    let [b, h, sq, d] = <[usize; 4]>::try_from(q.shape()).ok()?;
    let [kb, hk, sk, kd] = <[usize; 4]>::try_from(k.shape()).ok()?;
    let [vb, vh, vs, dv] = <[usize; 4]>::try_from(v.shape()).ok()?;
    if kb != b || vb != b || kd != d || vh != hk || vs != sk || hk == 0 || h % hk != 0 {
        return None;
    }
    let mask = match args.get(3).copied().flatten() {
        None => None,
        Some(m) => {
            let m = m.as_tensor().filter(|m| m.dtype() == DType::F32)?;
            let ms = m.shape();
            let target = [b, h, sq, sk];
            if ms.is_empty() || ms.len() > 4 || ms[ms.len() - 1] != sk {
                return None;
            }
            // Element strides of the mask broadcast to (b, h, sq, sk).
            let mut strides = [0usize; 4];
            let mut acc = 1usize;
            for i in (0..ms.len()).rev() {
                let td = 4 - ms.len() + i;
                if ms[i] == target[td] {
                    strides[td] = acc;
                } else if ms[i] != 1 {
                    return None;
                }
                acc *= ms[i];
            }
            Some((m.as_f32()?, strides))
        }
    };
    let (qv, kv, vv) = (q.as_f32()?, k.as_f32()?, v.as_f32()?);
    let scale = scale.unwrap_or(1.0 / (d as f32).sqrt());
    let mut out = vec![0f32; b * h * sq * dv];
    let work = (b * h * sq * sk * (d + dv)) as f64;
    par_chunks(&mut out, sq * dv, threads_for(work), |task, o| {
        let (bi, hi) = (task / h, task % h);
        let kh = hi / (h / hk);
        let qs = &qv[(bi * h + hi) * sq * d..][..sq * d];
        let ks = &kv[(bi * hk + kh) * sk * d..][..sk * d];
        let vs = &vv[(bi * hk + kh) * sk * dv..][..sk * dv];
        // K^T, row-major [d, sk].
        let mut kt = vec![0f32; d * sk];
        for j in 0..sk {
            for c in 0..d {
                kt[c * sk + j] = ks[j * d + c];
            }
        }
        let mut s = vec![0f32; sq * sk];
        sgemm_st(sq, sk, d, qs, d, &kt, sk, &mut s, sk, false);
        for i in 0..sq {
            let row = &mut s[i * sk..(i + 1) * sk];
            for (j, x) in row.iter_mut().enumerate() {
                *x *= scale;
                if let Some((m, st)) = &mask {
                    *x += m[bi * st[0] + hi * st[1] + i * st[2] + j * st[3]];
                }
            }
            softmax_row(row);
        }
        sgemm_st(sq, dv, sk, &s, sk, vs, dv, o, dv, false);
    });
    Some(Tensor::from_f32(vec![b, h, sq, dv], out))
}

/// Softmax in place; a row masked out entirely (all -inf) gives zeros, as the reference does.
fn softmax_row(row: &mut [f32]) {
    if row.iter().all(|&x| x == f32::NEG_INFINITY) {
        row.fill(0.0);
        return;
    }
    let mx = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f64;
    for x in row.iter_mut() {
        *x = (*x - mx).exp();
        sum += *x as f64;
    }
    let inv = if sum == 0.0 { 1.0 } else { (1.0 / sum) as f32 };
    row.iter_mut().for_each(|x| *x *= inv);
}

#[cfg(test)]
mod tests {
    use super::*;
    use smelt_reference::eval_values;

    fn floats(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn matches_the_reference_with_masks_and_grouped_heads() {
        let op = Op::Nn(NnOp::Attention {
            is_causal: false,
            kv_num_heads: None,
            q_num_heads: None,
            qk_matmul_output_mode: 0,
            scale: Some(0.3),
            softcap: 0.0,
            softmax_precision: None,
            left_window_size: -1,
            right_window_size: -1,
        });
        let (b, h, hk, sq, sk, d, dv) = (2, 4, 2, 5, 7, 8, 3);
        let q = Tensor::from_f32(vec![b, h, sq, d], floats(b * h * sq * d, 1)).unwrap();
        let k = Tensor::from_f32(vec![b, hk, sk, d], floats(b * hk * sk * d, 2)).unwrap();
        let v = Tensor::from_f32(vec![b, hk, sk, dv], floats(b * hk * sk * dv, 3)).unwrap();
        let mut mvals = floats(b * sk, 4);
        mvals[3] = f32::NEG_INFINITY;
        let masks = [
            None,
            Some(Tensor::from_f32(vec![b, 1, 1, sk], mvals).unwrap()),
            Some(Tensor::from_f32(vec![sq, sk], floats(sq * sk, 5)).unwrap()),
        ];
        for m in &masks {
            let vals: Vec<Value> = [&q, &k, &v]
                .iter()
                .map(|t| Value::Tensor((*t).clone()))
                .collect();
            let mv = m.clone().map(Value::Tensor);
            let mut args: Vec<Option<&Value>> = vals.iter().map(Some).collect();
            args.push(mv.as_ref());
            let fast = try_sdpa(&op, &args).expect("fast path applies").unwrap();
            let want = eval_values(&op, &args, 1).unwrap()[0]
                .tensor()
                .unwrap()
                .clone();
            assert_eq!(fast.shape(), want.shape());
            for (a, r) in fast.as_f32().unwrap().iter().zip(want.as_f32().unwrap()) {
                assert!((a - r).abs() <= 1e-5 + 1e-4 * r.abs(), "{a} vs {r}");
            }
        }
        // Causal attention is not this path's.
        let causal = Op::Nn(NnOp::Attention {
            is_causal: true,
            kv_num_heads: None,
            q_num_heads: None,
            qk_matmul_output_mode: 0,
            scale: None,
            softcap: 0.0,
            softmax_precision: None,
            left_window_size: -1,
            right_window_size: -1,
        });
        let vals: Vec<Value> = [&q, &k, &v]
            .iter()
            .map(|t| Value::Tensor((*t).clone()))
            .collect();
        let args: Vec<Option<&Value>> = vals.iter().map(Some).collect();
        assert!(try_sdpa(&causal, &args).is_none());
    }
}
