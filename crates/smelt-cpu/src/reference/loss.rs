//! Reference kernels of the loss op family: NegativeLogLikelihoodLoss and
//! SoftmaxCrossEntropyLoss, computed through f64 and rounded to the input's type.

use super::{Ctx, Inputs};
use smelt_ir::op::loss::LossReduction;
use smelt_ir::op::LossOp;
use smelt_ir::{bail, Result, Tensor, Value};

/// Runs one op of the family.
pub fn run(op: &LossOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    match op {
        LossOp::NegativeLogLikelihoodLoss {
            reduction,
            ignore_index,
        } => {
            let input = x.tensor(0)?;
            let (n, c, d) = dims(input)?;
            let logp = input.to_f64()?;
            let loss = nll(&logp, (n, c, d), input, x, *reduction, *ignore_index)?;
            Ok(vec![Value::Tensor(loss)])
        }
        LossOp::SoftmaxCrossEntropyLoss {
            reduction,
            ignore_index,
        } => {
            let scores = x.tensor(0)?;
            let (n, c, d) = dims(scores)?;
            let logp = log_softmax(&scores.to_f64()?, n, c, d);
            let loss = nll(&logp, (n, c, d), scores, x, *reduction, *ignore_index)?;
            let mut out = vec![Value::Tensor(loss)];
            if cx.n_outputs > 1 {
                let lp = Tensor::from_f64(scores.dtype(), scores.shape().to_vec(), &logp)?;
                out.push(Value::Tensor(lp));
            }
            Ok(out)
        }
    }
}

/// `(N, C, D)` of an input `[N, C, d1..dk]`, D being the product of the trailing dims.
fn dims(t: &Tensor) -> Result<(usize, usize, usize)> {
    if !t.dtype().is_float() {
        bail!("the input must be a float tensor, got {}", t.dtype());
    }
    let s = t.shape();
    if s.len() < 2 {
        bail!("the input must have rank 2 or more (N, C, ...), got shape {s:?}");
    }
    Ok((s[0], s[1], s[2..].iter().product()))
}

/// Log-softmax over axis 1 of an `(N, C, D)` array.
fn log_softmax(x: &[f64], n: usize, c: usize, d: usize) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    for i in 0..n {
        for k in 0..d {
            let at = |j: usize| (i * c + j) * d + k;
            let max = (0..c).map(|j| x[at(j)]).fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..c).map(|j| (x[at(j)] - max).exp()).sum();
            let lse = max + sum.ln();
            for j in 0..c {
                out[at(j)] = x[at(j)] - lse;
            }
        }
    }
    out
}

/// Negative log-likelihood of log-probabilities `logp` (N, C, D) at the targets (input 1),
/// weighted by input 2 when present, then reduced.
fn nll(
    logp: &[f64],
    (n, c, d): (usize, usize, usize),
    input: &Tensor,
    x: &Inputs,
    reduction: LossReduction,
    ignore_index: Option<i64>,
) -> Result<Tensor> {
    let target = x.tensor(1)?;
    if !target.dtype().is_int() {
        bail!(
            "the target must be an integer tensor, got {}",
            target.dtype()
        );
    }
    let mut want = vec![n];
    want.extend_from_slice(&input.shape()[2..]);
    if target.shape() != want.as_slice() {
        bail!(
            "the target has shape {:?}; expected {want:?} for an input of shape {:?}",
            target.shape(),
            input.shape()
        );
    }
    let weight = match x.opt_tensor(2)? {
        Some(w) => {
            if w.shape() != [c] {
                bail!("the weight must have shape [{c}], got {:?}", w.shape());
            }
            Some(w.to_f64()?)
        }
        None => None,
    };
    let tg = target.to_i64()?;
    let mut losses = vec![0.0; n * d];
    let mut wsum = 0.0;
    for i in 0..n {
        for k in 0..d {
            let t = tg[i * d + k];
            if ignore_index == Some(t) {
                continue;
            }
            if t < 0 || t as usize >= c {
                bail!("target value {t} is out of range [0, {c})");
            }
            let t = t as usize;
            let w = weight.as_ref().map_or(1.0, |w| w[t]);
            losses[i * d + k] = -logp[(i * c + t) * d + k] * w;
            wsum += w;
        }
    }
    let dt = input.dtype();
    match reduction {
        LossReduction::None => Tensor::from_f64(dt, want, &losses),
        LossReduction::Sum => Tensor::from_f64(dt, vec![], &[losses.iter().sum::<f64>()]),
        LossReduction::Mean => Tensor::from_f64(dt, vec![], &[losses.iter().sum::<f64>() / wsum]),
    }
}
