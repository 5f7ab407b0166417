//! `ai.onnx.ml` ops (LabelEncoder, ArrayFeatureExtractor, Binarizer, TreeEnsemble) and the
//! `ai.onnx.preview.training` optimizers (Adagrad, Adam, Momentum).

use super::super::{one, Ctx, Inputs};
use smelt_ir::op::misc::{TreeEnsembleSpec, TreeNodeMode};
use smelt_ir::op::MiscOp;
use smelt_ir::{bail, ensure, Data, Result, Tensor, Value};
use std::collections::HashMap;

#[derive(Hash, PartialEq, Eq)]
enum Key {
    S(String),
    I(i64),
    F(u64),
}

fn keys_of(t: &Tensor) -> Result<Vec<Key>> {
    Ok(match t.data() {
        Data::Str(v) => v.iter().cloned().map(Key::S).collect(),
        _ if t.dtype().is_float() => t
            .to_f64()?
            .into_iter()
            .map(|f| {
                Key::F(if f.is_nan() {
                    u64::MAX
                } else {
                    (f + 0.0).to_bits()
                })
            })
            .collect(),
        _ => t.to_i64()?.into_iter().map(Key::I).collect(),
    })
}

/// LabelEncoder: value of each key, the default for unknown keys.
pub fn label_encoder(
    x: &Inputs,
    keys: &Tensor,
    values: &Tensor,
    default: &Tensor,
) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    ensure!(
        (t.dtype() == smelt_ir::DType::Str) == (keys.dtype() == smelt_ir::DType::Str),
        "LabelEncoder: input of type {} does not match keys of type {}",
        t.dtype(),
        keys.dtype()
    );
    let mut map = HashMap::new();
    for (i, k) in keys_of(keys)?.into_iter().enumerate() {
        map.entry(k).or_insert(i);
    }
    let n = values.len();
    let idx: Vec<usize> = keys_of(t)?
        .iter()
        .map(|k| map.get(k).copied().unwrap_or(n))
        .collect();
    let pool = Data::concat(&[values.data(), default.data()])?;
    one(Tensor::new(
        values.dtype(),
        t.shape().to_vec(),
        pool.take(&idx),
    )?)
}

/// ArrayFeatureExtractor: X[..., indices]; a 1-D X gives [1, k].
pub fn array_feature_extractor(x: &Inputs) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let ind = x.tensor(1)?.to_i64()?;
    ensure!(
        t.rank() >= 1,
        "ArrayFeatureExtractor: X must have rank >= 1"
    );
    let last = t.shape()[t.rank() - 1];
    let outer = t.len() / last.max(1);
    for &i in &ind {
        ensure!(
            i >= 0 && (i as usize) < last,
            "ArrayFeatureExtractor: index {i} out of range [0, {last})"
        );
    }
    let mut idx = Vec::with_capacity(outer * ind.len());
    for o in 0..outer {
        idx.extend(ind.iter().map(|&i| o * last + i as usize));
    }
    let shape = if t.rank() == 1 {
        vec![1, ind.len()]
    } else {
        let mut s = t.shape()[..t.rank() - 1].to_vec();
        s.push(ind.len());
        s
    };
    one(t.take(shape, &idx)?)
}

/// Binarizer: 1 where x > threshold, else 0.
pub fn binarizer(x: &Inputs, threshold: f32) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let v: Vec<f64> = t
        .to_f64()?
        .into_iter()
        .map(|a| if a > threshold as f64 { 1.0 } else { 0.0 })
        .collect();
    one(Tensor::from_f64(t.dtype(), t.shape().to_vec(), &v)?)
}

/// TreeEnsemble (ai.onnx.ml opset 5) over X [N, F] -> [N, n_targets].
pub fn tree_ensemble(x: &Inputs, s: &TreeEnsembleSpec) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    ensure!(
        t.rank() == 2,
        "TreeEnsemble: X must be [N, F], got {:?}",
        t.shape()
    );
    let (n, f) = (t.shape()[0], t.shape()[1]);
    let xv = t.to_f64()?;
    let nodes = s.feature_ids.len();
    let lens = [
        s.modes.len(),
        s.splits.len(),
        s.true_ids.len(),
        s.false_ids.len(),
        s.true_leafs.len(),
        s.false_leafs.len(),
        s.missing_tracks_true.len(),
    ];
    ensure!(
        lens.iter().all(|&l| l == nodes),
        "TreeEnsemble: node attributes differ in length"
    );
    ensure!(
        s.leaf_targets.len() == s.leaf_weights.len(),
        "TreeEnsemble: leaf attributes differ in length"
    );
    ensure!(
        s.n_targets >= 1 && s.leaf_targets.iter().all(|&t| t >= 0 && t < s.n_targets),
        "TreeEnsemble: leaf targets must lie in [0, n_targets)"
    );
    // Membership sets, one per Member node in node order.
    let mut sets: Vec<Vec<f64>> = vec![Vec::new(); nodes];
    let mut it = s.membership.iter();
    for (i, m) in s.modes.iter().enumerate() {
        if *m == TreeNodeMode::Member {
            for &v in it.by_ref() {
                if v.is_nan() {
                    break;
                }
                sets[i].push(v);
            }
        }
    }
    let nt = s.n_targets as usize;
    let init = match s.aggregate {
        2 => f64::MAX,
        3 => f64::MIN,
        _ => 0.0,
    };
    let mut out = vec![init; n * nt];
    let leaf = |i: i64| -> Result<(usize, f64)> {
        let i = usize::try_from(i)
            .ok()
            .filter(|&i| i < s.leaf_weights.len());
        let Some(i) = i else {
            bail!("TreeEnsemble: leaf index out of range")
        };
        Ok((s.leaf_targets[i] as usize, s.leaf_weights[i]))
    };
    for r in 0..n {
        let row = &xv[r * f..(r + 1) * f];
        for &root in &s.roots {
            let ri = usize::try_from(root).ok().filter(|&i| i < nodes);
            let Some(ri) = ri else {
                bail!("TreeEnsemble: root {root} out of range")
            };
            let (target, w) = if s.true_leafs[ri]
                && s.false_leafs[ri]
                && s.true_ids[ri] == s.false_ids[ri]
            {
                leaf(s.true_ids[ri])?
            } else {
                let mut cur = ri;
                let mut steps = 0;
                loop {
                    steps += 1;
                    ensure!(
                        steps <= nodes + 1,
                        "TreeEnsemble: the trees contain a cycle"
                    );
                    let fi = s.feature_ids[cur];
                    ensure!(
                        fi >= 0 && (fi as usize) < f,
                        "TreeEnsemble: feature {fi} out of range [0, {f})"
                    );
                    let v = row[fi as usize];
                    let sp = s.splits[cur];
                    let go = (s.missing_tracks_true[cur] && v.is_nan())
                        || match s.modes[cur] {
                            TreeNodeMode::Leq => v <= sp,
                            TreeNodeMode::Lt => v < sp,
                            TreeNodeMode::Gte => v >= sp,
                            TreeNodeMode::Gt => v > sp,
                            TreeNodeMode::Eq => v == sp,
                            TreeNodeMode::Neq => v != sp,
                            TreeNodeMode::Member => sets[cur].contains(&v),
                        };
                    let (next, is_leaf) = if go {
                        (s.true_ids[cur], s.true_leafs[cur])
                    } else {
                        (s.false_ids[cur], s.false_leafs[cur])
                    };
                    if is_leaf {
                        break leaf(next)?;
                    }
                    cur = usize::try_from(next)
                        .ok()
                        .filter(|&i| i < nodes)
                        .ok_or_else(|| smelt_ir::err!("TreeEnsemble: node {next} out of range"))?;
                }
            };
            let o = &mut out[r * nt + target];
            *o = match s.aggregate {
                0 => *o + w / s.roots.len() as f64,
                2 => o.min(w),
                3 => o.max(w),
                _ => *o + w,
            };
        }
    }
    for row in out.chunks_mut(nt.max(1)) {
        match s.post_transform {
            0 => {}
            1 | 3 => {
                let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = row.iter().map(|v| (v - m).exp()).sum();
                row.iter_mut().for_each(|v| *v = (*v - m).exp() / sum);
            }
            2 => row.iter_mut().for_each(|v| *v = 1.0 / (1.0 + (-*v).exp())),
            p => bail!("TreeEnsemble: post_transform {p} is not supported"),
        }
    }
    one(Tensor::from_f64(t.dtype(), vec![n, nt], &out)?)
}

/// Adagrad, Adam and Momentum: inputs R, T, then groups of tensors; outputs grouped likewise.
pub fn optimizer(op: &MiscOp, x: &Inputs, _cx: &Ctx) -> Result<Vec<Value>> {
    let r = super::scalar_f64(x, 0, "learning rate R")?;
    let step = super::scalar_i64(x, 1, "step T")?;
    let groups = match op {
        MiscOp::Adagrad { .. } | MiscOp::Momentum { .. } => 3,
        _ => 4,
    };
    let rest = x.len().saturating_sub(2);
    ensure!(
        rest > 0 && rest.is_multiple_of(groups),
        "{}: expected R, T and {groups} groups of tensors, got {} inputs",
        op.name(),
        x.len()
    );
    let k = rest / groups;
    let get = |g: usize, i: usize| -> Result<(&Tensor, Vec<f64>)> {
        let t = x.tensor(2 + g * k + i)?;
        Ok((t, t.to_f64()?))
    };
    let mut outs: Vec<Vec<Value>> = vec![Vec::new(); groups - 1];
    for i in 0..k {
        let (xt, xv) = get(0, i)?;
        let (_, gv) = get(1, i)?;
        ensure!(
            gv.len() == xv.len(),
            "{}: gradient {i} does not match its tensor",
            op.name()
        );
        let mk = |v: &[f64], like: &Tensor| {
            Tensor::from_f64(like.dtype(), like.shape().to_vec(), v).map(Value::Tensor)
        };
        match op {
            MiscOp::Adagrad {
                decay_factor,
                epsilon,
                norm_coefficient,
            } => {
                let (ht, hv) = get(2, i)?;
                ensure!(
                    hv.len() == xv.len(),
                    "{}: state tensor {i} does not match its tensor",
                    op.name()
                );
                let lr = r / (1.0 + step as f64 * *decay_factor as f64);
                let mut xn = Vec::with_capacity(xv.len());
                let mut hn = Vec::with_capacity(xv.len());
                for j in 0..xv.len() {
                    let g = *norm_coefficient as f64 * xv[j] + gv[j];
                    let h = hv[j] + g * g;
                    hn.push(h);
                    xn.push(xv[j] - lr * g / (h.sqrt() + *epsilon as f64));
                }
                outs[0].push(mk(&xn, xt)?);
                outs[1].push(mk(&hn, ht)?);
            }
            MiscOp::Momentum {
                alpha,
                beta,
                nesterov,
                norm_coefficient,
            } => {
                let (vt, vv) = get(2, i)?;
                ensure!(
                    vv.len() == xv.len(),
                    "{}: state tensor {i} does not match its tensor",
                    op.name()
                );
                let b = if step > 0 { *beta as f64 } else { 1.0 };
                let mut xn = Vec::with_capacity(xv.len());
                let mut vn = Vec::with_capacity(xv.len());
                for j in 0..xv.len() {
                    let g = *norm_coefficient as f64 * xv[j] + gv[j];
                    let v = *alpha as f64 * vv[j] + b * g;
                    vn.push(v);
                    xn.push(if *nesterov {
                        xv[j] - r * (g + *alpha as f64 * v)
                    } else {
                        xv[j] - r * v
                    });
                }
                outs[0].push(mk(&xn, xt)?);
                outs[1].push(mk(&vn, vt)?);
            }
            MiscOp::Adam {
                alpha,
                beta,
                epsilon,
                norm_coefficient,
                norm_coefficient_post,
            } => {
                let (vt, vv) = get(2, i)?;
                ensure!(
                    vv.len() == xv.len(),
                    "{}: state tensor {i} does not match its tensor",
                    op.name()
                );
                let (ht, hv) = get(3, i)?;
                ensure!(
                    hv.len() == xv.len(),
                    "{}: state tensor {i} does not match its tensor",
                    op.name()
                );
                let (a, b) = (*alpha as f64, *beta as f64);
                let lr = if step > 0 {
                    r * (1.0 - b.powi(step as i32)).sqrt() / (1.0 - a.powi(step as i32))
                } else {
                    r
                };
                let (mut xn, mut vn, mut hn) = (Vec::new(), Vec::new(), Vec::new());
                for j in 0..xv.len() {
                    let g = *norm_coefficient as f64 * xv[j] + gv[j];
                    let v = a * vv[j] + (1.0 - a) * g;
                    let h = b * hv[j] + (1.0 - b) * g * g;
                    vn.push(v);
                    hn.push(h);
                    let xnew = xv[j] - lr * (v / (h.sqrt() + *epsilon as f64));
                    xn.push((1.0 - *norm_coefficient_post as f64) * xnew);
                }
                outs[0].push(mk(&xn, xt)?);
                outs[1].push(mk(&vn, vt)?);
                outs[2].push(mk(&hn, ht)?);
            }
            _ => bail!("{} is not an optimizer", op.name()),
        }
    }
    Ok(outs.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_encoder_maps_and_defaults() {
        let keys = Tensor::from_strings(vec![2], vec!["a".into(), "b".into()]).unwrap();
        let values = Tensor::from_i64_vec(vec![2], vec![1, 2]).unwrap();
        let default = Tensor::scalar_i64(-1);
        let x = Value::Tensor(
            Tensor::from_strings(vec![3], vec!["b".into(), "z".into(), "a".into()]).unwrap(),
        );
        let out = label_encoder(&Inputs::new(vec![Some(&x)]), &keys, &values, &default).unwrap();
        assert_eq!(out[0].tensor().unwrap().to_i64().unwrap(), vec![2, -1, 1]);
    }
}
