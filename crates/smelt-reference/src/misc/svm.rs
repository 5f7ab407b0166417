//! `ai.onnx.ml` support vector machines: SVMClassifier and SVMRegressor. The spec leaves
//! the details to libsvm; these follow onnxruntime (the conformance reference) step by
//! step, in f32 as it computes: one-vs-one votes, Platt scaling with pairwise coupling
//! (Wu, Lin and Weng 2004, stopped as onnxruntime stops), and its binary special cases.

use super::super::{one, Inputs};
use smelt_ir::op::misc::{SvmClassifierSpec, SvmKernel, SvmSpec};
use smelt_ir::{ensure, Result, Tensor, Value};

/// The input as f32 rows: (rows, values), checked against the model's feature count.
fn rows(x: &Inputs, s: &SvmSpec, what: &str) -> Result<(usize, Vec<f32>)> {
    let t = x.tensor(0)?;
    let (n, f) = match t.shape() {
        [f] => (1, *f),
        [n, f] => (*n, *f),
        sh => smelt_ir::bail!(
            InvalidInput,
            "{what}: input must be [N, F] or [F], got {sh:?}"
        ),
    };
    ensure!(
        f == s.features,
        InvalidInput,
        "{what}: rows of {f} features, the model has {}",
        s.features
    );
    Ok((n, t.to_f64()?.into_iter().map(|v| v as f32).collect()))
}

/// The kernel of `a` and `b`; `c` is the constant a linear kernel adds.
fn kernel(s: &SvmSpec, a: &[f32], b: &[f32], c: f32) -> f32 {
    let dot = || a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    match s.kernel {
        SvmKernel::Rbf => {
            let d: f32 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
            (-s.gamma * d).exp()
        }
        SvmKernel::Linear => dot() + c,
        SvmKernel::Poly => {
            let v = s.gamma * dot() + s.coef0;
            if s.degree == 2.0 {
                v * v
            } else if s.degree == 3.0 {
                v * v * v
            } else {
                v.powf(s.degree)
            }
        }
        SvmKernel::Sigmoid => (s.gamma * dot() + s.coef0).tanh(),
    }
}

/// `1 / (1 + e^-x)`, computed on |x| for stability.
fn logistic(x: f32) -> f32 {
    let v = 1.0 / (1.0 + (-x.abs()).exp());
    if x < 0.0 {
        1.0 - v
    } else {
        v
    }
}

/// The approximation of erf⁻¹ onnxruntime uses for the probit transform.
fn erf_inv(x: f32) -> f32 {
    let sgn = if x < 0.0 { -1.0 } else { 1.0 };
    let l = ((1.0 - x) * (1.0 + x)).ln();
    let v = 2.0 / (std::f32::consts::PI * 0.147) + 0.5 * l;
    let v2 = 1.0 / 0.147 * l;
    sgn * (-v + (v * v - v2).sqrt()).sqrt()
}

fn probit(x: f32) -> f32 {
    std::f32::consts::SQRT_2 * erf_inv(2.0 * x - 1.0)
}

/// A post transform over one row of scores (two or more).
fn transform(row: &mut [f32], post: i64) {
    match post {
        1 => {
            let m = row.iter().copied().fold(f32::MIN, f32::max);
            let sum: f32 = row
                .iter_mut()
                .map(|v| {
                    *v = (*v - m).exp();
                    *v
                })
                .sum();
            row.iter_mut().for_each(|v| *v /= sum);
        }
        2 => row.iter_mut().for_each(|v| *v = logistic(*v)),
        3 => {
            let m = row.iter().copied().fold(f32::MIN, f32::max);
            let scale = (-m).exp();
            let mut sum = 0.0;
            for v in row.iter_mut() {
                if v.abs() > 1e-7 {
                    *v = (*v - m).exp();
                    sum += *v;
                } else {
                    *v *= scale;
                }
            }
            row.iter_mut().for_each(|v| *v /= sum);
        }
        4 => row.iter_mut().for_each(|v| *v = probit(*v)),
        _ => {}
    }
}

/// Class probabilities from pairwise ones `r[i * k + j]` (P(i | i or j)), by the fixed-point
/// method of Wu, Lin and Weng, at most 100 steps, stopping at error 0.005 / k.
fn coupled(k: usize, r: &[f32]) -> Vec<f32> {
    let mut q = vec![0f32; k * k];
    let mut p = vec![1.0 / k as f32; k];
    for i in 0..k {
        for j in 0..i {
            q[i * k + i] += r[j * k + i] * r[j * k + i];
            q[i * k + j] = q[j * k + i];
        }
        for j in i + 1..k {
            q[i * k + i] += r[j * k + i] * r[j * k + i];
            q[i * k + j] = -r[j * k + i] * r[i * k + j];
        }
    }
    let eps = 0.005 / k as f32;
    let mut qp = vec![0f32; k];
    for _ in 0..100 {
        let mut pqp = 0.0;
        for i in 0..k {
            qp[i] = (0..k).map(|j| q[i * k + j] * p[j]).sum();
            pqp += p[i] * qp[i];
        }
        let err = qp.iter().map(|&v| (v - pqp).abs()).fold(0.0, f32::max);
        if err < eps {
            break;
        }
        for i in 0..k {
            let diff = (-qp[i] + pqp) / q[i * k + i];
            p[i] += diff;
            pqp = (pqp + diff * (diff * q[i * k + i] + 2.0 * qp[i])) / (1.0 + diff) / (1.0 + diff);
            for j in 0..k {
                qp[j] = (qp[j] + diff * q[i * k + j]) / (1.0 + diff);
                p[j] /= 1.0 + diff;
            }
        }
    }
    p
}

/// SVMClassifier: labels `[N]` and scores `[N, S]` (S: one per class, or one per class
/// pair for a multi-class SVC without probabilities, or 2 for a binary one).
pub fn svm_classifier(x: &Inputs, spec: &SvmClassifierSpec) -> Result<Vec<Value>> {
    let s = &spec.svm;
    let (n, xv) = rows(x, s, "SVMClassifier")?;
    let f = s.features;
    let k = spec.labels.len();
    let svc = s.vectors > 0;
    let pairs = k * k.saturating_sub(1) / 2;
    let proba = !spec.prob_a.is_empty();
    let width = match (svc, proba) {
        (true, false) if k > 2 => pairs,
        (true, false) => 2,
        _ => k,
    };
    // A binary SVC without probabilities writes its decision value and derives a second.
    let second = (svc && !proba && k <= 2).then_some(if spec.post_transform == 0 { 2 } else { 0 });
    let positive = s.coefficients.iter().all(|&c| c >= 0.0);
    let mut starts = Vec::with_capacity(k);
    let mut acc = 0;
    for &v in &spec.vectors_per_class {
        starts.push(acc);
        acc += v;
    }
    let mut labels = Vec::with_capacity(n);
    let mut z = Vec::with_capacity(n * width);
    for r in 0..n {
        let row = &xv[r * f..(r + 1) * f];
        let mut scores: Vec<f32>;
        let mut votes = vec![0i64; if svc { k } else { 0 }];
        if !svc {
            // liblinear: one row of coefficients per class, the first rho added to each.
            scores = (0..k)
                .map(|j| kernel(s, row, &s.coefficients[j * f..(j + 1) * f], s.rho[0]))
                .collect();
        } else {
            let kv: Vec<f32> = (0..s.vectors)
                .map(|v| kernel(s, row, &s.support_vectors[v * f..(v + 1) * f], 0.0))
                .collect();
            let nv = s.vectors;
            let mut pair_scores = Vec::with_capacity(pairs);
            let mut idx = 0;
            for i in 0..k.saturating_sub(1) {
                for j in i + 1..k {
                    let mut sum = 0f64;
                    for m in 0..spec.vectors_per_class[i] {
                        let c = s.coefficients[(j - 1) * nv + starts[i] + m];
                        sum += (c * kv[starts[i] + m]) as f64;
                    }
                    for m in 0..spec.vectors_per_class[j] {
                        let c = s.coefficients[i * nv + starts[j] + m];
                        sum += (c * kv[starts[j] + m]) as f64;
                    }
                    sum += s.rho[idx] as f64;
                    idx += 1;
                    let sum = sum as f32;
                    pair_scores.push(sum);
                    votes[if sum > 0.0 { i } else { j }] += 1;
                }
            }
            scores = if proba {
                let mut pr = vec![0f32; k * k];
                let mut idx = 0;
                for i in 0..k - 1 {
                    for j in i + 1..k {
                        let v =
                            1.0 - logistic(pair_scores[idx] * spec.prob_a[idx] + spec.prob_b[idx]);
                        let v = v.clamp(1e-7, 1.0 - 1e-7);
                        pr[i * k + j] = v;
                        pr[j * k + i] = 1.0 - v;
                        idx += 1;
                    }
                }
                coupled(k, &pr)
            } else {
                pair_scores
            };
        }
        // The winner: most votes (SVC), else the highest score; the first on ties.
        let (best, max_weight) = if svc {
            let m = votes.iter().copied().max().unwrap_or(0);
            (votes.iter().position(|&v| v == m).unwrap_or(0), 0.0)
        } else {
            let mut b = 0;
            for j in 1..scores.len() {
                if scores[j] > scores[b] {
                    b = j;
                }
            }
            (b, scores.get(b).copied().unwrap_or(0.0))
        };
        labels.push(if pairs == 1 && !proba {
            // onnxruntime's binary rule.
            if (positive && max_weight >= 0.5) || (!positive && max_weight > 0.0) {
                1
            } else {
                best
            }
        } else {
            best
        });
        match (scores.len(), second) {
            (1, Some(mode)) => {
                let v = scores[0];
                z.extend(match mode {
                    2 => [-v, v],
                    _ => [1.0 - v, v],
                });
            }
            (1, None) => {
                if spec.post_transform == 4 {
                    scores[0] = probit(scores[0]);
                }
                z.extend(scores);
            }
            _ => {
                transform(&mut scores, spec.post_transform);
                z.extend(scores);
            }
        }
    }
    ensure!(
        z.len() == n * width,
        InvalidModel,
        "SVMClassifier: {} scores for {n} rows of {width}",
        z.len()
    );
    Ok(vec![
        Value::Tensor(spec.labels.take(vec![n], &labels)?),
        Value::Tensor(Tensor::from_f32(vec![n, width], z)?),
    ])
}

/// SVMRegressor: `[N, 1]` values, `sum_v coef[v] K(x, sv[v]) + rho` (liblinear: `x . coef
/// + rho`); a one-class SVM gives the sign (1 or -1).
pub fn svm_regressor(x: &Inputs, s: &SvmSpec, one_class: bool) -> Result<Vec<Value>> {
    let (n, xv) = rows(x, s, "SVMRegressor")?;
    let f = s.features;
    ensure!(
        s.vectors == 0 || s.coefficients.len() >= s.vectors,
        InvalidModel,
        "SVMRegressor: {} coefficients for {} support vectors",
        s.coefficients.len(),
        s.vectors
    );
    let out: Vec<f32> = (0..n)
        .map(|r| {
            let row = &xv[r * f..(r + 1) * f];
            let y = if s.vectors > 0 {
                (0..s.vectors)
                    .map(|v| {
                        s.coefficients[v]
                            * kernel(s, row, &s.support_vectors[v * f..(v + 1) * f], 0.0)
                    })
                    .sum::<f32>()
                    + s.rho[0]
            } else {
                kernel(s, row, &s.coefficients[..f], s.rho[0])
            };
            if one_class {
                if y > 0.0 {
                    1.0
                } else {
                    -1.0
                }
            } else {
                y
            }
        })
        .collect();
    one(Tensor::from_f32(vec![n, 1], out)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(
        kernel: SvmKernel,
        sv: Vec<f32>,
        vectors: usize,
        coef: Vec<f32>,
        rho: Vec<f32>,
    ) -> SvmSpec {
        let features = sv.len().checked_div(vectors).unwrap_or(coef.len());
        SvmSpec {
            kernel,
            gamma: 0.5,
            coef0: 0.0,
            degree: 3.0,
            support_vectors: sv,
            vectors,
            features,
            coefficients: coef,
            rho,
        }
    }

    fn x(rows: usize, v: Vec<f32>) -> Value {
        Value::Tensor(Tensor::from_f32(vec![rows, v.len() / rows], v).unwrap())
    }

    #[test]
    fn binary_svc_votes_and_writes_two_scores() {
        let c = SvmClassifierSpec {
            svm: spec(
                SvmKernel::Linear,
                vec![1.0, 0.0, 0.0, 1.0],
                2,
                vec![1.0, -1.0],
                vec![0.5],
            ),
            vectors_per_class: vec![1, 1],
            prob_a: vec![],
            prob_b: vec![],
            post_transform: 0,
            labels: Tensor::from_i64_vec(vec![2], vec![10, 20]).unwrap(),
        };
        // Decision value 2 - 1 + 0.5 = 1.5 > 0: a vote for the first class.
        let xs = x(1, vec![2.0, 1.0]);
        let out = svm_classifier(&Inputs::new(vec![Some(&xs)]), &c).unwrap();
        assert_eq!(out[0].tensor().unwrap().to_i64().unwrap(), vec![10]);
        assert_eq!(out[1].tensor().unwrap().to_f64().unwrap(), vec![-1.5, 1.5]);
    }

    #[test]
    fn pairwise_coupling_of_even_odds_is_uniform() {
        let p = coupled(3, &[0.5; 9]);
        for v in p {
            assert!((v - 1.0 / 3.0).abs() < 1e-6, "{v}");
        }
    }

    #[test]
    fn regressors_liblinear_rbf_and_one_class() {
        let xs = x(1, vec![1.0, 1.0]);
        let lin = spec(SvmKernel::Linear, vec![], 0, vec![1.0, 2.0], vec![0.5]);
        let y = svm_regressor(&Inputs::new(vec![Some(&xs)]), &lin, false).unwrap();
        assert_eq!(y[0].tensor().unwrap().to_f64().unwrap(), vec![3.5]);
        // RBF: exp(-0.5 * |x - sv|^2) with sv = x, so 2 * 1 - 0.5.
        let rbf = spec(SvmKernel::Rbf, vec![1.0, 1.0], 1, vec![2.0], vec![-0.5]);
        let y = svm_regressor(&Inputs::new(vec![Some(&xs)]), &rbf, false).unwrap();
        assert_eq!(y[0].tensor().unwrap().to_f64().unwrap(), vec![1.5]);
        let y = svm_regressor(&Inputs::new(vec![Some(&xs)]), &rbf, true).unwrap();
        assert_eq!(y[0].tensor().unwrap().to_f64().unwrap(), vec![1.0]);
        let bad = x(1, vec![1.0, 1.0, 1.0]);
        let e = svm_regressor(&Inputs::new(vec![Some(&bad)]), &rbf, false).unwrap_err();
        assert_eq!(e.kind(), smelt_ir::ErrorKind::InvalidInput);
    }
}
