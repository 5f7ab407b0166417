//! `ai.onnx.ml` ops (LabelEncoder, ArrayFeatureExtractor, Binarizer, TreeEnsemble) and the
//! `ai.onnx.preview.training` optimizers (Adagrad, Adam, Momentum).

use super::super::{one, Ctx, Inputs};
use smelt_ir::op::misc::{NormKind, TreeEnsembleSpec, TreeNodeMode, TreeRegressorSpec};
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
        InvalidModel,
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

/// CategoryMapper: strings to their integers, or integers to their strings.
pub fn category_mapper(
    x: &Inputs,
    strings: &[String],
    ints: &[i64],
    di: i64,
    ds: &str,
) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let shape = t.shape().to_vec();
    match t.data() {
        Data::Str(v) => {
            let map: HashMap<&str, i64> = strings
                .iter()
                .map(String::as_str)
                .zip(ints.iter().copied())
                .rev()
                .collect();
            let out = v
                .iter()
                .map(|s| map.get(s.as_str()).copied().unwrap_or(di))
                .collect();
            one(Tensor::from_i64_vec(shape, out)?)
        }
        _ => {
            let map: HashMap<i64, &String> =
                ints.iter().copied().zip(strings.iter()).rev().collect();
            let out = t
                .to_i64()?
                .iter()
                .map(|i| {
                    map.get(i)
                        .map(|s| (*s).clone())
                        .unwrap_or_else(|| ds.to_string())
                })
                .collect();
            one(Tensor::from_strings(shape, out)?)
        }
    }
}

/// ArrayFeatureExtractor: X[..., indices]; a 1-D X gives [1, k].
pub fn array_feature_extractor(x: &Inputs) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let ind = x.tensor(1)?.to_i64()?;
    ensure!(
        t.rank() >= 1,
        InvalidModel,
        "ArrayFeatureExtractor: X must have rank >= 1"
    );
    let last = t.shape()[t.rank() - 1];
    let outer = t.len() / last.max(1);
    for &i in &ind {
        ensure!(
            i >= 0 && (i as usize) < last,
            InvalidInput,
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
        InvalidModel,
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
        InvalidModel,
        "TreeEnsemble: node attributes differ in length"
    );
    ensure!(
        s.leaf_targets.len() == s.leaf_weights.len(),
        InvalidModel,
        "TreeEnsemble: leaf attributes differ in length"
    );
    ensure!(
        s.n_targets >= 1 && s.leaf_targets.iter().all(|&t| t >= 0 && t < s.n_targets),
        InvalidModel,
        "TreeEnsemble: leaf targets must lie in [0, n_targets)"
    );
    ensure!(
        s.membership.len() == nodes,
        InvalidModel,
        "TreeEnsemble: membership sets do not match the nodes"
    );
    let sets = &s.membership;
    let nt = s.n_targets as usize;
    let init = match s.aggregate {
        2 => f64::MAX,
        3 => f64::MIN,
        _ => 0.0,
    };
    let what = || format!("TreeEnsemble: output [{n}, {nt}]");
    let len = smelt_ir::limits::check_shape(t.dtype(), &[n, nt], &what)?;
    let mut out = smelt_ir::limits::try_vec(len, init, &what)?;
    let leaf = |i: i64| -> Result<(usize, f64)> {
        let i = usize::try_from(i)
            .ok()
            .filter(|&i| i < s.leaf_weights.len());
        let Some(i) = i else {
            bail!(InvalidModel, "TreeEnsemble: leaf index out of range")
        };
        Ok((s.leaf_targets[i] as usize, s.leaf_weights[i]))
    };
    for r in 0..n {
        let row = &xv[r * f..(r + 1) * f];
        for &root in &s.roots {
            let ri = usize::try_from(root).ok().filter(|&i| i < nodes);
            let Some(ri) = ri else {
                bail!(InvalidModel, "TreeEnsemble: root {root} out of range")
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
                        InvalidModel,
                        "TreeEnsemble: the trees contain a cycle"
                    );
                    let fi = s.feature_ids[cur];
                    ensure!(
                        fi >= 0 && (fi as usize) < f,
                        InvalidModel,
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
                        .ok_or_else(|| {
                            smelt_ir::err!(InvalidModel, "TreeEnsemble: node {next} out of range")
                        })?;
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
            p => bail!(
                Unsupported,
                "TreeEnsemble: post_transform {p} is not supported"
            ),
        }
    }
    one(Tensor::from_f64(t.dtype(), vec![n, nt], &out)?)
}

/// Post transforms shared by the tree ensembles: 0 none, 1 softmax, 2 logistic, 3 softmax_zero.
fn post_transform(row: &mut [f64], code: i64) -> Result<()> {
    match code {
        0 => {}
        1 => {
            let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().map(|v| (v - m).exp()).sum();
            row.iter_mut().for_each(|v| *v = (*v - m).exp() / sum);
        }
        2 => row.iter_mut().for_each(|v| *v = 1.0 / (1.0 + (-*v).exp())),
        3 => {
            // Softmax over the non-zero entries; zeros stay zero.
            let m = row
                .iter()
                .copied()
                .filter(|&v| v != 0.0)
                .fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row
                .iter()
                .filter(|&&v| v != 0.0)
                .map(|v| (v - m).exp())
                .sum();
            row.iter_mut()
                .for_each(|v| *v = if *v == 0.0 { 0.0 } else { (*v - m).exp() / sum });
        }
        p => bail!(Unsupported, "post_transform {p} is not supported"),
    }
    Ok(())
}

/// Rows of a [N, C] (or [C]) input: (rows, columns).
fn rows_cols(t: &Tensor, what: &str) -> Result<(usize, usize)> {
    match t.shape() {
        [c] => Ok((1, *c)),
        [n, c] => Ok((*n, *c)),
        s => bail!(
            InvalidModel,
            "{what}: input must be [N, C] or [C], got {s:?}"
        ),
    }
}

/// Per target of one row: the aggregated scores and whether any leaf set each.
type RowScores = (Vec<f64>, Vec<bool>);

/// Walks every tree for each row: per target, the aggregated score and whether any leaf set it.
fn tree_scores(x: &Inputs, s: &TreeRegressorSpec) -> Result<(usize, Vec<RowScores>)> {
    let t = x.tensor(0)?;
    let (n, f) = rows_cols(t, "TreeEnsembleRegressor")?;
    let xv = t.to_f64()?;
    let k = s.feature_ids.len();
    let lens = [
        s.modes.len(),
        s.values.len(),
        s.true_next.len(),
        s.false_next.len(),
        s.missing_tracks_true.len(),
        s.leaf_targets.len(),
    ];
    ensure!(
        lens.iter().all(|&l| l == k),
        InvalidModel,
        "TreeEnsembleRegressor: node attributes differ in length"
    );
    let nt = usize::try_from(s.n_targets)
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| {
            smelt_ir::err!(
                InvalidModel,
                "TreeEnsembleRegressor: n_targets must be positive"
            )
        })?;
    ensure!(
        s.leaf_targets
            .iter()
            .flatten()
            .all(|&(t, _)| t >= 0 && (t as usize) < nt),
        InvalidModel,
        "TreeEnsembleRegressor: bad leaf target"
    );
    let mut rows = Vec::with_capacity(n);
    smelt_ir::limits::check_shape(smelt_ir::DType::F32, &[n, nt], &|| {
        format!("TreeEnsembleRegressor: output [{n}, {nt}]")
    })?;
    let mut score = smelt_ir::limits::try_vec(nt, 0f64, &|| "TreeEnsembleRegressor".into())?;
    let mut has = smelt_ir::limits::try_vec(nt, false, &|| "TreeEnsembleRegressor".into())?;
    for r in 0..n {
        let row = &xv[r * f..(r + 1) * f];
        score.iter_mut().for_each(|v| *v = 0.0);
        has.iter_mut().for_each(|v| *v = false);
        for &root in &s.roots {
            ensure!(
                root < k,
                InvalidModel,
                "TreeEnsembleRegressor: root {root} out of range"
            );
            let mut cur = root;
            let mut steps = 0;
            while let Some(mode) = s.modes[cur] {
                steps += 1;
                ensure!(
                    steps <= k,
                    InvalidModel,
                    "TreeEnsembleRegressor: the trees contain a cycle"
                );
                let fi = s.feature_ids[cur];
                ensure!(
                    fi >= 0 && (fi as usize) < f,
                    InvalidModel,
                    "TreeEnsembleRegressor: feature {fi} out of range [0, {f})"
                );
                let v = row[fi as usize];
                let th = s.values[cur];
                let go = (s.missing_tracks_true[cur] && v.is_nan())
                    || match mode {
                        TreeNodeMode::Leq => v <= th,
                        TreeNodeMode::Lt => v < th,
                        TreeNodeMode::Gte => v >= th,
                        TreeNodeMode::Gt => v > th,
                        TreeNodeMode::Eq => v == th,
                        TreeNodeMode::Neq => v != th,
                        TreeNodeMode::Member => false,
                    };
                cur = if go {
                    s.true_next[cur]
                } else {
                    s.false_next[cur]
                };
                ensure!(
                    cur < k,
                    InvalidModel,
                    "TreeEnsembleRegressor: node {cur} out of range"
                );
            }
            for &(tid, w) in &s.leaf_targets[cur] {
                let (sc, h) = (&mut score[tid as usize], &mut has[tid as usize]);
                *sc = match s.aggregate {
                    2 if *h => sc.min(w),
                    3 if *h => sc.max(w),
                    2 | 3 => w,
                    _ => *sc + w,
                };
                *h = true;
            }
        }
        rows.push((score.clone(), has.clone()));
    }
    Ok((nt, rows))
}

/// TreeEnsembleRegressor (ai.onnx.ml opsets 1 and 3) over X [N, F] -> [N, n_targets] f32.
pub fn tree_regressor(x: &Inputs, s: &TreeRegressorSpec) -> Result<Vec<Value>> {
    let (nt, rows) = tree_scores(x, s)?;
    let n = rows.len();
    let mut out = Vec::with_capacity(n * nt);
    for (score, has) in rows {
        let mut fin: Vec<f64> = (0..nt)
            .map(|j| {
                let v = match s.aggregate {
                    0 => score[j] / s.roots.len().max(1) as f64,
                    2 | 3 if !has[j] => 0.0,
                    _ => score[j],
                };
                v + s.base_values.get(j).copied().unwrap_or(0.0)
            })
            .collect();
        post_transform(&mut fin, s.post_transform)?;
        out.extend(fin);
    }
    one(Tensor::from_f64(smelt_ir::DType::F32, vec![n, nt], &out)?)
}

/// TreeEnsembleClassifier: labels [N] and scores [N, classes], with onnxruntime's rules for
/// base values and the binary case (one scored class out of two labels).
pub fn tree_classifier(x: &Inputs, s: &TreeRegressorSpec, labels: &Tensor) -> Result<Vec<Value>> {
    let (nc, rows) = tree_scores(x, s)?;
    ensure!(
        nc == labels.len() && nc >= 2,
        InvalidModel,
        "TreeEnsembleClassifier: needs 2 or more class labels"
    );
    let n = rows.len();
    let mut classes: Vec<i64> = s.leaf_targets.iter().flatten().map(|&(c, _)| c).collect();
    classes.sort_unstable();
    classes.dedup();
    let binary_case = nc == 2 && classes.len() == 1;
    let all_positive = s.leaf_targets.iter().flatten().all(|&(_, w)| w >= 0.0);
    let base = &s.base_values;
    let mut label_idx = Vec::with_capacity(n);
    let mut z = Vec::with_capacity(n * nc);
    for (mut score, mut has) in rows {
        if nc > 2 {
            for (k, &b) in base.iter().enumerate() {
                if has[k] {
                    score[k] += b;
                } else {
                    score[k] = b;
                    has[k] = true;
                }
            }
            let mut best: Option<usize> = None;
            for k in 0..nc {
                if has[k] && best.is_none_or(|b| score[k] > score[b]) {
                    best = Some(k);
                }
            }
            label_idx.push(best.unwrap_or(0));
        } else {
            let mut len = 2;
            match base.len() {
                2 => {
                    if has[1] {
                        score[1] = base[1] + score[0];
                        score[0] = -score[1];
                    } else {
                        score[1] += base[1];
                        score[0] += base[0];
                    }
                }
                1 => {
                    score[0] += base[0];
                    if !has[1] {
                        len = 1;
                    }
                }
                _ => {
                    if !has[1] {
                        len = 1;
                    }
                }
            }
            let pos = if len == 2 && has[1] {
                score[1]
            } else if has[0] {
                score[0]
            } else {
                0.0
            };
            let (lab, a) = match (binary_case, all_positive) {
                (true, true) if pos > 0.5 => (1, 0),
                (true, true) => (0, 1),
                (true, false) if pos > 0.0 => (1, 2),
                (true, false) => (0, 3),
                (false, _) => ((pos > 0.0) as usize, -1),
            };
            label_idx.push(lab);
            if len == 1 {
                let s0 = score[0];
                let pair = match a {
                    0 | 1 => [1.0 - s0, s0],
                    _ if s.post_transform == 2 => {
                        [1.0 / (1.0 + s0.exp()), 1.0 / (1.0 + (-s0).exp())]
                    }
                    _ => [-s0, s0],
                };
                z.extend_from_slice(&pair);
                continue;
            }
        }
        // onnxruntime writes classes that no leaf (or base value) scored as 0.
        for (v, h) in score.iter_mut().zip(&has) {
            if !h {
                *v = 0.0;
            }
        }
        post_transform(&mut score, s.post_transform)?;
        z.extend(score);
    }
    let y = labels.take(vec![n], &label_idx)?;
    Ok(vec![
        Value::Tensor(y),
        Value::Tensor(Tensor::from_f64(smelt_ir::DType::F32, vec![n, nc], &z)?),
    ])
}

/// Per-column parameter: one value for all columns, or one per column.
fn per_col<T: Copy>(v: &[T], c: usize, default: T, what: &str) -> Result<Vec<T>> {
    match v.len() {
        0 => Ok(vec![default; c]),
        1 => Ok(vec![v[0]; c]),
        l if l == c => Ok(v.to_vec()),
        l => bail!(InvalidModel, "{what}: {l} values for {c} features"),
    }
}

/// Scaler: (x - offset) * scale per column, as f32.
pub fn scaler(x: &Inputs, offset: &[f32], scale: &[f32]) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let (_, c) = rows_cols(t, "Scaler")?;
    let (o, s) = (
        per_col(offset, c, 0.0, "Scaler offset")?,
        per_col(scale, c, 1.0, "Scaler scale")?,
    );
    let v: Vec<f32> = t
        .to_f64()?
        .iter()
        .enumerate()
        .map(|(i, &a)| ((a as f32) - o[i % c.max(1)]) * s[i % c.max(1)])
        .collect();
    one(Tensor::from_f32(t.shape().to_vec(), v)?)
}

/// Normalizer: each row divided by its max, L1 or L2 norm, as f32.
pub fn normalizer(x: &Inputs, norm: NormKind) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let (_, c) = rows_cols(t, "Normalizer")?;
    let mut v = t.to_f64()?;
    for row in v.chunks_mut(c.max(1)) {
        let d = match norm {
            NormKind::Max => row.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            NormKind::L1 => row.iter().map(|a| a.abs()).sum(),
            NormKind::L2 => row.iter().map(|a| a * a).sum::<f64>().sqrt(),
        };
        if d != 0.0 {
            row.iter_mut().for_each(|a| *a /= d);
        }
    }
    one(Tensor::from_f64(
        smelt_ir::DType::F32,
        t.shape().to_vec(),
        &v,
    )?)
}

/// LinearRegressor: X @ coefficients^T + intercepts, as f32 [N, targets].
pub fn linear_regressor(
    x: &Inputs,
    coef: &[f32],
    intercepts: &[f32],
    targets: i64,
) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let (n, c) = rows_cols(t, "LinearRegressor")?;
    let nt = usize::try_from(targets)
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| smelt_ir::err!(InvalidModel, "LinearRegressor: bad targets"))?;
    ensure!(
        coef.len() == nt * c,
        InvalidModel,
        "LinearRegressor: {} coefficients for {nt} targets x {c} features",
        coef.len()
    );
    let b = per_col(intercepts, nt, 0.0, "LinearRegressor intercepts")?;
    let xv = t.to_f64()?;
    let mut out = Vec::with_capacity(n * nt);
    for r in 0..n {
        for j in 0..nt {
            let dot: f64 = (0..c).map(|i| xv[r * c + i] * coef[j * c + i] as f64).sum();
            out.push(dot + b[j] as f64);
        }
    }
    one(Tensor::from_f64(smelt_ir::DType::F32, vec![n, nt], &out)?)
}

/// LinearClassifier: labels [N] and scores; one score column is the binary case (label by
/// sign, scores `[1 - p, p]`), as onnxruntime does.
pub fn linear_classifier(
    x: &Inputs,
    coef: &[f32],
    intercepts: &[f32],
    labels: &Tensor,
    post: i64,
) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let (n, c) = rows_cols(t, "LinearClassifier")?;
    ensure!(
        c > 0 && coef.len().is_multiple_of(c),
        InvalidModel,
        "LinearClassifier: {} coefficients for {c} features",
        coef.len()
    );
    let k = coef.len() / c;
    ensure!(k >= 1, InvalidModel, "LinearClassifier: no classes");
    let b = per_col(intercepts, k, 0.0, "LinearClassifier intercepts")?;
    let xv = t.to_f64()?;
    let nl = labels.len();
    let binary = k == 1;
    ensure!(
        binary || k == nl,
        InvalidModel,
        "LinearClassifier: {k} score columns for {nl} labels"
    );
    let width = if binary { 2 } else { k };
    let mut idx = Vec::with_capacity(n);
    let mut z = Vec::with_capacity(n * width);
    for r in 0..n {
        let mut sc: Vec<f64> = (0..k)
            .map(|j| {
                (0..c)
                    .map(|i| xv[r * c + i] * coef[j * c + i] as f64)
                    .sum::<f64>()
                    + b[j] as f64
            })
            .collect();
        if binary {
            let s0 = sc[0];
            idx.push(if nl >= 2 { (s0 > 0.0) as usize } else { 0 });
            // onnxruntime: [1 - p, p] with p the logistic of s, or s itself for other transforms.
            let p = if post == 2 {
                1.0 / (1.0 + (-s0).exp())
            } else {
                s0
            };
            z.extend([1.0 - p, p]);
        } else {
            let best = (0..k).fold(0, |b, j| if sc[j] > sc[b] { j } else { b });
            idx.push(best);
            post_transform(&mut sc, post)?;
            z.extend(sc);
        }
    }
    Ok(vec![
        Value::Tensor(labels.take(vec![n], &idx)?),
        Value::Tensor(Tensor::from_f64(smelt_ir::DType::F32, vec![n, width], &z)?),
    ])
}

/// Imputer: replaces the sentinel (NaN matches NaN) with the per-column value.
pub fn imputer(
    x: &Inputs,
    fl: &[f32],
    ints: &[i64],
    rf: Option<f32>,
    ri: i64,
) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let (_, c) = rows_cols(t, "Imputer")?;
    let c = c.max(1);
    if t.dtype().is_float() {
        let vals = per_col(fl, c, 0.0, "Imputer imputed_value_floats")?;
        let v: Vec<f64> = t
            .to_f64()?
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let hit = match rf {
                    None => a.is_nan(),
                    Some(r) => a == r as f64,
                };
                if hit {
                    vals[i % c] as f64
                } else {
                    a
                }
            })
            .collect();
        one(Tensor::from_f64(t.dtype(), t.shape().to_vec(), &v)?)
    } else {
        let vals = per_col(ints, c, 0, "Imputer imputed_value_int64s")?;
        let v: Vec<i64> = t
            .to_i64()?
            .iter()
            .enumerate()
            .map(|(i, &a)| if a == ri { vals[i % c] } else { a })
            .collect();
        one(Tensor::from_i64(t.dtype(), t.shape().to_vec(), &v)?)
    }
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
        InvalidModel,
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
            InvalidModel,
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
                    InvalidModel,
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
                    InvalidModel,
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
                    InvalidModel,
                    "{}: state tensor {i} does not match its tensor",
                    op.name()
                );
                let (ht, hv) = get(3, i)?;
                ensure!(
                    hv.len() == xv.len(),
                    InvalidModel,
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
            _ => bail!(Internal, "{} is not an optimizer", op.name()),
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
