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
        bail!(
            Unsupported,
            "the input must be a float tensor, got {}",
            t.dtype()
        );
    }
    let s = t.shape();
    if s.len() < 2 {
        bail!(
            InvalidModel,
            "the input must have rank 2 or more (N, C, ...), got shape {s:?}"
        );
    }
    Ok((s[0], s[1], smelt_ir::dims_product(&s[2..])))
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
            Unsupported,
            "the target must be an integer tensor, got {}",
            target.dtype()
        );
    }
    let mut want = vec![n];
    want.extend_from_slice(&input.shape()[2..]);
    if target.shape() != want.as_slice() {
        bail!(
            InvalidModel,
            "the target has shape {:?}; expected {want:?} for an input of shape {:?}",
            target.shape(),
            input.shape()
        );
    }
    let weight = match x.opt_tensor(2)? {
        Some(w) => {
            if w.shape() != [c] {
                bail!(
                    InvalidModel,
                    "the weight must have shape [{c}], got {:?}",
                    w.shape()
                );
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
                bail!(InvalidInput, "target value {t} is out of range [0, {c})");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;

    fn run_loss(op: &LossOp, inputs: Vec<Option<Tensor>>, n_outputs: usize) -> Vec<Vec<f64>> {
        let vals: Vec<Option<Value>> = inputs.into_iter().map(|t| t.map(Value::Tensor)).collect();
        let env = Env::new();
        let cx = Ctx {
            n_outputs,
            outputs_used: vec![true; n_outputs],
            env: &env,
            consts: &env,
            control: crate::test_control(),
            depth: 0,
            runner: None,
        };
        let x = Inputs::new(vals.iter().map(|v| v.as_ref()).collect());
        run(op, &x, &cx)
            .unwrap()
            .iter()
            .map(|v| v.tensor().unwrap().to_f64().unwrap())
            .collect()
    }

    #[test]
    fn nll_weighted_mean_skips_ignored() {
        let input = Tensor::from_f32(vec![3, 2], vec![-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]).unwrap();
        let target = Tensor::from_i64_vec(vec![3], vec![1, 0, 7]).unwrap();
        let weight = Tensor::from_f32(vec![2], vec![0.5, 2.0]).unwrap();
        let op = LossOp::NegativeLogLikelihoodLoss {
            reduction: LossReduction::Mean,
            ignore_index: Some(7),
        };
        let out = run_loss(&op, vec![Some(input), Some(target), Some(weight)], 1);
        // (2*2 + 0.5*3) / (2 + 0.5)
        assert!((out[0][0] - 5.5 / 2.5).abs() < 1e-6);
    }

    #[test]
    fn sce_log_prob_and_range_check() {
        let scores = Tensor::from_f32(vec![1, 2], vec![0.0, 0.0]).unwrap();
        let target = Tensor::from_i64_vec(vec![1], vec![0]).unwrap();
        let op = LossOp::SoftmaxCrossEntropyLoss {
            reduction: LossReduction::None,
            ignore_index: None,
        };
        let out = run_loss(&op, vec![Some(scores.clone()), Some(target), None], 2);
        let ln2 = std::f64::consts::LN_2;
        assert!((out[0][0] - ln2).abs() < 1e-6);
        assert!((out[1][1] + ln2).abs() < 1e-6);
        let bad = Tensor::from_i64_vec(vec![1], vec![2]).unwrap();
        let vals = [Value::Tensor(scores), Value::Tensor(bad)];
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
        assert!(run(&op, &Inputs::new(vals.iter().map(Some).collect()), &cx).is_err());
    }
}
