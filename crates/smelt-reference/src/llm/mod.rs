//! Reference kernels of the llm op family. Float math goes through f64; where the ONNX
//! reference rounds intermediates to the input's type (SwiGLU, convolution before the
//! activation) the kernels round there too, so half-precision results match.

mod attention;

use super::{Ctx, Inputs};
use smelt_ir::op::llm::{CacheWriteMode, ConvActivation};
use smelt_ir::op::LlmOp;
use smelt_ir::{bail, DType, Result, Tensor, Value};

/// Runs one op of the family.
pub fn run(op: &LlmOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    match op {
        LlmOp::SwiGLU { alpha } => swiglu(x.tensor(0)?, x.tensor(1)?, *alpha as f64),
        LlmOp::TensorScatter { mode, axis } => {
            let past = x.tensor(0)?;
            let update = x.tensor(1)?;
            let idx = x.opt_ints(2)?;
            super::one(tensor_scatter(past, update, idx.as_deref(), *mode, *axis)?)
        }
        LlmOp::CausalConvWithState { activation } => causal_conv(x, *activation),
        LlmOp::LinearAttention { .. } => attention::linear_attention(op, x),
        LlmOp::FlexAttention { .. } => attention::flex_attention(op, x, cx),
    }
}

/// Rounds an f64 to the precision of a float type (identity for f64 and non-floats).
pub(crate) fn round_to(dt: DType, v: f64) -> f64 {
    match dt {
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::BF16 => half::bf16::from_f64(v).to_f64(),
        _ => v,
    }
}

/// Checks that a tensor has a float element type.
pub(crate) fn float_input<'a>(t: &'a Tensor, what: &str) -> Result<&'a Tensor> {
    if !t.dtype().is_float() {
        bail!(
            Unsupported,
            "{what} must be a float tensor, got {}",
            t.dtype()
        );
    }
    Ok(t)
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

fn swiglu(a: &Tensor, b: &Tensor, alpha: f64) -> Result<Vec<Value>> {
    float_input(a, "A")?;
    if a.shape() != b.shape() || a.dtype() != b.dtype() {
        bail!(
            InvalidModel,
            "A and B must have the same shape and type (no broadcasting): {} {:?} vs {} {:?}",
            a.dtype(),
            a.shape(),
            b.dtype(),
            b.shape()
        );
    }
    let dt = a.dtype();
    let (av, bv) = (a.to_f64()?, b.to_f64()?);
    let y: Vec<f64> = av
        .iter()
        .zip(&bv)
        .map(|(&a, &b)| {
            let gate = round_to(dt, a * round_to(dt, sigmoid(alpha * a)));
            gate * b
        })
        .collect();
    super::one(Tensor::from_f64(dt, a.shape().to_vec(), &y)?)
}

/// Copies `update` into a copy of `past` along `axis`, from each batch's write index on.
fn tensor_scatter(
    past: &Tensor,
    update: &Tensor,
    write_indices: Option<&[i64]>,
    mode: CacheWriteMode,
    axis: i64,
) -> Result<Tensor> {
    let (ps, us) = (past.shape(), update.shape());
    let rank = ps.len();
    if past.dtype() != update.dtype() {
        bail!(
            InvalidModel,
            "past_cache ({}) and update ({}) must have the same type",
            past.dtype(),
            update.dtype()
        );
    }
    let ax = if axis < 0 { axis + rank as i64 } else { axis };
    if ax <= 0 || ax >= rank as i64 {
        bail!(
            InvalidModel,
            "axis {axis} is out of range for past_cache of rank {rank} (axis 0 is the batch)"
        );
    }
    let ax = ax as usize;
    if us.len() != rank {
        bail!(
            InvalidModel,
            "update has rank {}, past_cache has rank {rank}",
            us.len()
        );
    }
    for i in 0..rank {
        if i != ax && ps[i] != us[i] {
            bail!(
                InvalidModel,
                "past_cache {ps:?} and update {us:?} differ in dimension {i}"
            );
        }
    }
    let (max_seq, seq) = (ps[ax], us[ax]);
    if seq > max_seq {
        bail!(
            InvalidInput,
            "update's sequence length {seq} exceeds the cache's {max_seq}"
        );
    }
    let batch = ps[0];
    if let Some(w) = write_indices {
        if w.len() != batch {
            bail!(
                InvalidModel,
                "write_indices has {} entries; batch size is {batch}",
                w.len()
            );
        }
    }
    let per_batch: usize = smelt_ir::dims_product(&ps[1..ax]);
    let prefix = batch * per_batch;
    let inner: usize = smelt_ir::dims_product(&ps[ax + 1..]);
    let mut idx = Vec::with_capacity(update.len());
    for p in 0..prefix {
        let b = p / per_batch.max(1);
        let start = write_indices.map_or(0, |w| w[b]);
        for s in 0..seq {
            let pos = start + s as i64;
            let pos = match mode {
                CacheWriteMode::Circular => pos.rem_euclid(max_seq as i64),
                CacheWriteMode::Linear => {
                    if pos < 0 || pos >= max_seq as i64 {
                        bail!(
                            InvalidInput,
                            "write index {start} for batch {b} with {seq} new positions runs \
                             outside the cache of length {max_seq} (linear mode)"
                        );
                    }
                    pos
                }
            } as usize;
            let base = (p * max_seq + pos) * inner;
            idx.extend(base..base + inner);
        }
    }
    let mut data = past.data().clone();
    data.scatter(&idx, update.data())?;
    Tensor::new(past.dtype(), ps.to_vec(), data)
}

fn causal_conv(x: &Inputs, activation: ConvActivation) -> Result<Vec<Value>> {
    let input = float_input(x.tensor(0)?, "input")?;
    let weight = x.tensor(1)?;
    let dt = input.dtype();
    let &[b, c, l] = input.shape() else {
        bail!(
            InvalidModel,
            "input must have shape (batch, channels, length), got {:?}",
            input.shape()
        )
    };
    let &[wc, 1, k] = weight.shape() else {
        bail!(
            InvalidModel,
            "weight must have shape (channels, 1, k), got {:?}",
            weight.shape()
        )
    };
    if wc != c || k == 0 {
        bail!(
            InvalidModel,
            "weight shape {:?} does not fit {c} channels",
            weight.shape()
        );
    }
    let w = weight.to_f64()?;
    let bias = match x.opt_tensor(2)? {
        Some(t) if t.shape() == [c] => Some(t.to_f64()?),
        Some(t) => bail!(
            InvalidModel,
            "bias must have shape [{c}], got {:?}",
            t.shape()
        ),
        None => None,
    };
    let past = match x.opt_tensor(3)? {
        Some(t) if t.shape() == [b, c, k - 1] => Some(t.to_f64()?),
        Some(t) => bail!(
            InvalidModel,
            "past_state must have shape [{b}, {c}, {}], got {:?}",
            k - 1,
            t.shape()
        ),
        None => None,
    };
    let xv = input.to_f64()?;
    let plen = l.saturating_add(k - 1);
    let mut out: Vec<f64> = crate::zeroed(&[b, c, l], "the convolution's output")?;
    let mut state: Vec<f64> = crate::zeroed(&[b, c, k - 1], "the convolution's state")?;
    let mut padded: Vec<f64> = crate::zeroed(&[plen], "the padded row")?;
    for bc in 0..b * c {
        let ch = bc % c;
        if let Some(p) = &past {
            padded[..k - 1].copy_from_slice(&p[bc * (k - 1)..(bc + 1) * (k - 1)]);
        } else {
            padded[..k - 1].fill(0.0);
        }
        padded[k - 1..].copy_from_slice(&xv[bc * l..(bc + 1) * l]);
        let wk = &w[ch * k..(ch + 1) * k];
        let b0 = bias.as_ref().map_or(0.0, |v| v[ch]);
        for t in 0..l {
            let acc: f64 = wk.iter().zip(&padded[t..t + k]).map(|(a, b)| a * b).sum();
            let y = round_to(dt, acc + b0);
            out[bc * l + t] = match activation {
                ConvActivation::None => y,
                ConvActivation::Silu => y * sigmoid(y),
            };
        }
        state[bc * (k - 1)..(bc + 1) * (k - 1)].copy_from_slice(&padded[l..]);
    }
    Ok(vec![
        Value::Tensor(Tensor::from_f64(dt, vec![b, c, l], &out)?),
        Value::Tensor(Tensor::from_f64(dt, vec![b, c, k - 1], &state)?),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_linear_and_circular() {
        let past = Tensor::from_f32(vec![1, 3, 1], vec![0.0; 3]).unwrap();
        let up = Tensor::from_f32(vec![1, 2, 1], vec![1.0, 2.0]).unwrap();
        let t = tensor_scatter(&past, &up, Some(&[1]), CacheWriteMode::Linear, 1).unwrap();
        assert_eq!(t.to_f64().unwrap(), vec![0.0, 1.0, 2.0]);
        let t = tensor_scatter(&past, &up, Some(&[2]), CacheWriteMode::Circular, -2).unwrap();
        assert_eq!(t.to_f64().unwrap(), vec![2.0, 0.0, 1.0]);
        assert!(tensor_scatter(&past, &up, Some(&[2]), CacheWriteMode::Linear, 1).is_err());
    }

    #[test]
    fn swiglu_matches_formula() {
        let a = Tensor::from_f32(vec![2], vec![1.0, -2.0]).unwrap();
        let b = Tensor::from_f32(vec![2], vec![3.0, 0.5]).unwrap();
        let y = swiglu(&a, &b, 1.0).unwrap();
        let y = y[0].tensor().unwrap().to_f64().unwrap();
        let want = [3.0 * sigmoid(1.0), -2.0 * sigmoid(-2.0) * 0.5];
        for (g, w) in y.iter().zip(want) {
            assert!((g - w).abs() < 1e-6);
        }
    }
}
