//! Language-model blocks: SwiGLU and TensorScatter keep their first input's type;
//! CausalConvWithState gives `[b, c, l]` and its state `[b, c, k - 1]`; LinearAttention
//! `[b, t, q_heads * d_v]` and its state `[b, kv_heads, d_k, d_v]`.

use super::dims::div_int;
use super::{typed, In, Outs};
use smelt_ir::op::LlmOp;
use smelt_ir::{Dim, Result};

/// Output types of a language-model block.
pub(super) fn infer(op: &LlmOp, x: &In) -> Result<Option<Outs>> {
    use LlmOp::*;
    let dt = x.dtype(0);
    Ok(match op {
        SwiGLU { .. } | TensorScatter { .. } => Some(vec![typed(dt, x.shape(0))]),
        CausalConvWithState { .. } => {
            let state = match (x.shape(0), x.shape(1)) {
                (Some(s), Some(w)) if s.len() == 3 && w.len() == 3 => match &w[2] {
                    Dim::Known(k) if *k >= 1 => {
                        Some(vec![s[0].clone(), s[1].clone(), Dim::Known(k - 1)])
                    }
                    _ => None,
                },
                _ => None,
            };
            Some(vec![typed(dt, x.shape(0)), typed(dt, state)])
        }
        LinearAttention {
            q_num_heads,
            kv_num_heads,
            ..
        } => {
            let (hq, hkv) = (*q_num_heads, *kv_num_heads);
            if hq <= 0 || hkv <= 0 {
                return Ok(None);
            }
            let (out, state) = match (x.shape(0), x.shape(2)) {
                (Some(q), Some(v)) if q.len() == 3 && v.len() == 3 => {
                    let dk = div_int(&q[2], hq, false);
                    let dv = div_int(&v[2], hkv, false);
                    let hd = match &dv {
                        Dim::Known(d) => d.checked_mul(hq as u64).map_or(Dim::Unknown, Dim::Known),
                        _ => Dim::Unknown,
                    };
                    (
                        Some(vec![q[0].clone(), q[1].clone(), hd]),
                        Some(vec![q[0].clone(), Dim::Known(hkv as u64), dk, dv]),
                    )
                }
                _ => (None, None),
            };
            let state_dt = if x.has(3) { x.dtype(3) } else { dt };
            Some(vec![typed(dt, out), typed(state_dt, state)])
        }
        _ => None,
    })
}
