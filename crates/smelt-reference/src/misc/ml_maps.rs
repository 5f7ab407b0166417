//! `ai.onnx.ml` ops around maps and feature vectors: ZipMap (scores to a sequence of maps),
//! DictVectorizer and CastMap (a map to a row), OneHotEncoder and FeatureVectorizer.
//! Where the spec leaves a choice, onnxruntime's behavior is followed (it is the reference
//! the conformance cases compare with).

use super::super::{one, Inputs};
use smelt_ir::op::misc::CastMapTo;
use smelt_ir::{bail, ensure, err, DType, Data, Map, Result, Sequence, Tensor, Value, ValueType};
use std::collections::HashMap;

/// Rows of a `[N, C]` (or `[C]`) input: (rows, columns).
fn rows_cols(t: &Tensor, what: &str) -> Result<(usize, usize)> {
    match t.shape() {
        [c] => Ok((1, *c)),
        [n, c] => Ok((*n, *c)),
        s => bail!(
            InvalidInput,
            "{what}: input must be [N, C] or [C], got {s:?}"
        ),
    }
}

/// A key of a map or vocabulary.
#[derive(Hash, PartialEq, Eq, PartialOrd, Ord, Clone)]
enum Key {
    I(i64),
    S(String),
}

fn keys_of(t: &Tensor) -> Result<Vec<Key>> {
    Ok(match t.data() {
        Data::Str(v) => v.iter().cloned().map(Key::S).collect(),
        _ => t.to_i64()?.into_iter().map(Key::I).collect(),
    })
}

/// ZipMap: row `n` of the scores becomes the map `labels[j] -> x[n, j]` (f32 values).
pub fn zip_map(x: &Inputs, labels: &Tensor) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let (n, c) = rows_cols(t, "ZipMap")?;
    ensure!(
        c == labels.len(),
        InvalidInput,
        "ZipMap: {c} scores per row for {} labels",
        labels.len()
    );
    let v = t.to_f64()?;
    let items = (0..n)
        .map(|r| {
            let row: Vec<f32> = v[r * c..(r + 1) * c].iter().map(|&x| x as f32).collect();
            Ok(Value::Map(Map::new(
                labels.clone(),
                Tensor::from_f32(vec![c], row)?,
            )?))
        })
        .collect::<Result<Vec<_>>>()?;
    let elem = ValueType::Map(
        labels.dtype(),
        Box::new(ValueType::Tensor {
            dtype: DType::F32,
            shape: None,
        }),
    );
    Ok(vec![Value::Sequence(Sequence {
        elem: Some(elem),
        items,
    })])
}

/// The map input of DictVectorizer or CastMap.
fn map_input<'a>(x: &Inputs<'a>, what: &str) -> Result<&'a Map> {
    match x.value(0) {
        Some(Value::Map(m)) => Ok(m),
        Some(v) => bail!(InvalidInput, "{what}: input 0 is a {}, not a map", v.kind()),
        None => bail!(InvalidInput, "{what}: input 0 is required"),
    }
}

/// DictVectorizer: `[1, V]`, the value of each vocabulary word, 0 (or "") where the map
/// has no such key.
pub fn dict_vectorizer(x: &Inputs, vocabulary: &Tensor) -> Result<Vec<Value>> {
    let m = map_input(x, "DictVectorizer")?;
    ensure!(
        (m.keys().dtype() == DType::Str) == (vocabulary.dtype() == DType::Str),
        InvalidInput,
        "DictVectorizer: map keys are {}, the vocabulary {}",
        m.keys().dtype(),
        vocabulary.dtype()
    );
    let index: HashMap<Key, usize> = keys_of(m.keys())?
        .into_iter()
        .enumerate()
        .map(|(i, k)| (k, i))
        .collect();
    let picks: Vec<Option<usize>> = keys_of(vocabulary)?
        .iter()
        .map(|k| index.get(k).copied())
        .collect();
    let v = picks.len();
    let values = m.values();
    let out = match values.data() {
        Data::Str(s) => Tensor::from_strings(
            vec![1, v],
            picks
                .iter()
                .map(|p| p.map(|i| s[i].clone()).unwrap_or_default())
                .collect(),
        )?,
        _ => {
            let f = values.to_f64()?;
            let row: Vec<f64> = picks.iter().map(|p| p.map_or(0.0, |i| f[i])).collect();
            Tensor::from_f64(values.dtype(), vec![1, v], &row)?
        }
    };
    one(out)
}

/// CastMap: a map from integers as `[1, K]` values in key order, cast; dense (one column
/// per entry) or sparse (column k holds key k, up to `max_map`, padded).
pub fn cast_map(x: &Inputs, to: CastMapTo, dense: bool, max_map: usize) -> Result<Vec<Value>> {
    let m = map_input(x, "CastMap")?;
    ensure!(
        m.keys().dtype().is_int(),
        InvalidInput,
        "CastMap: keys must be integers, not {}",
        m.keys().dtype()
    );
    let mut entries: Vec<(i64, usize)> = m
        .keys()
        .to_i64()?
        .into_iter()
        .enumerate()
        .map(|(i, k)| (k, i))
        .collect();
    entries.sort_unstable();
    let columns: Vec<Option<usize>> = if dense {
        entries.iter().map(|&(_, i)| Some(i)).collect()
    } else {
        if let Some(&(k, _)) = entries.first() {
            ensure!(k >= 0, InvalidInput, "CastMap: negative key {k}");
        }
        let by_key: HashMap<i64, usize> = entries.iter().copied().collect();
        (0..max_map as i64)
            .map(|k| by_key.get(&k).copied())
            .collect()
    };
    let values = m.values();
    let strings: Option<&[String]> = match values.data() {
        Data::Str(s) => Some(s),
        _ => None,
    };
    let floats = if strings.is_none() {
        values.to_f64()?
    } else {
        Vec::new()
    };
    let w = columns.len();
    let out = match to {
        CastMapTo::String => {
            let cells = columns
                .iter()
                .map(|c| match (c, strings) {
                    (None, _) => "0.f".to_string(),
                    (Some(i), Some(s)) => s[*i].clone(),
                    (Some(i), None) => format!("{:.6}", floats[*i] as f32),
                })
                .collect();
            Tensor::from_strings(vec![1, w], cells)?
        }
        CastMapTo::Float | CastMapTo::Int64 => {
            let cells = columns
                .iter()
                .map(|c| -> Result<f64> {
                    Ok(match (c, strings) {
                        (None, _) => 0.0,
                        (Some(i), Some(s)) => {
                            let t = s[*i].trim();
                            if to == CastMapTo::Int64 {
                                t.parse::<i64>().map_err(|_| {
                                    err!(InvalidInput, "CastMap: '{t}' is not an integer")
                                })? as f64
                            } else {
                                t.parse::<f32>().map_err(|_| {
                                    err!(InvalidInput, "CastMap: '{t}' is not a number")
                                })? as f64
                            }
                        }
                        (Some(i), None) if to == CastMapTo::Int64 => {
                            (floats[*i] as f32).trunc() as f64
                        }
                        (Some(i), None) => floats[*i] as f32 as f64,
                    })
                })
                .collect::<Result<Vec<f64>>>()?;
            let dt = if to == CastMapTo::Int64 {
                DType::I64
            } else {
                DType::F32
            };
            Tensor::from_f64(dt, vec![1, w], &cells)?
        }
    };
    one(out)
}

/// OneHotEncoder: `[..., C]` floats with 1 at each value's category (numbers truncate to
/// integers); an unknown value gives zeros, or an error without `zeros`.
pub fn one_hot_encoder(x: &Inputs, categories: &Tensor, zeros: bool) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    ensure!(
        t.rank() <= 2,
        InvalidInput,
        "OneHotEncoder: input of rank {} (at most 2)",
        t.rank()
    );
    let c = categories.len();
    // A later duplicate category wins, as onnxruntime's map does.
    let index: HashMap<Key, usize> = keys_of(categories)?
        .into_iter()
        .enumerate()
        .map(|(i, k)| (k, i))
        .collect();
    let keys: Vec<Option<Key>> = match t.data() {
        Data::Str(v) => v.iter().cloned().map(|s| Some(Key::S(s))).collect(),
        _ => t
            .to_f64()?
            .into_iter()
            .map(|f| f.is_finite().then(|| Key::I(f.trunc() as i64)))
            .collect(),
    };
    let mut out = vec![0f32; keys.len() * c];
    for (i, k) in keys.iter().enumerate() {
        match k.as_ref().and_then(|k| index.get(k)) {
            Some(&j) => out[i * c + j] = 1.0,
            None if zeros => {}
            None => bail!(
                InvalidInput,
                "OneHotEncoder: value {i} is no known category (and zeros is 0)"
            ),
        }
    }
    let mut shape = t.shape().to_vec();
    shape.push(c);
    one(Tensor::from_f32(shape, out)?)
}

/// FeatureVectorizer: the inputs' rows side by side as f32, each input taking its width
/// (extra values dropped, missing ones zero).
pub fn feature_vectorizer(x: &Inputs, widths: &[usize]) -> Result<Vec<Value>> {
    let inputs: Vec<&Tensor> = (0..x.len()).map(|i| x.tensor(i)).collect::<Result<_>>()?;
    ensure!(
        inputs.len() == widths.len(),
        InvalidInput,
        "FeatureVectorizer: {} inputs for {} widths",
        inputs.len(),
        widths.len()
    );
    let rows_of = |t: &Tensor| if t.rank() <= 1 { 1 } else { t.shape()[0] };
    let n = inputs.first().map_or(0, |t| rows_of(t));
    let total: usize = widths.iter().sum();
    let mut out = vec![0f32; super::out_numel(&[n, total])?];
    let mut offset = 0;
    for (k, (t, &w)) in inputs.iter().zip(widths).enumerate() {
        ensure!(
            rows_of(t) == n,
            InvalidInput,
            "FeatureVectorizer: input {k} has {} rows, input 0 has {n}",
            rows_of(t)
        );
        let row = t.len().checked_div(n).unwrap_or(0);
        let v = t.to_f64()?;
        for r in 0..n {
            for j in 0..row.min(w) {
                out[r * total + offset + j] = v[r * row + j] as f32;
            }
        }
        offset += w;
    }
    one(Tensor::from_f32(vec![n, total], out)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(f: impl Fn(&Inputs) -> Result<Vec<Value>>, inputs: &[Value]) -> Result<Tensor> {
        let x = Inputs::new(inputs.iter().map(Some).collect());
        f(&x)?.remove(0).into_tensor()
    }

    fn strings(v: &[&str]) -> Tensor {
        Tensor::from_strings(vec![v.len()], v.iter().map(|s| s.to_string()).collect()).unwrap()
    }

    #[test]
    fn one_hot_encoder_truncates_numbers_and_refuses_unknowns_without_zeros() {
        let cats = Tensor::from_i64_vec(vec![3], vec![1, 2, 5]).unwrap();
        let x = Value::Tensor(Tensor::from_f32(vec![1, 2], vec![1.7, 5.0]).unwrap());
        let y = run(|x| one_hot_encoder(x, &cats, true), &[x]).unwrap();
        assert_eq!(y.shape(), &[1, 2, 3]);
        assert_eq!(y.to_f64().unwrap(), vec![1.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
        let unknown = Value::Tensor(Tensor::from_f32(vec![1], vec![3.0]).unwrap());
        let e = run(|x| one_hot_encoder(x, &cats, false), &[unknown]).unwrap_err();
        assert_eq!(e.kind(), smelt_ir::ErrorKind::InvalidInput);
        let s = Value::Tensor(strings(&["b", "z"]));
        let y = run(|x| one_hot_encoder(x, &strings(&["a", "b"]), true), &[s]).unwrap();
        assert_eq!(y.to_f64().unwrap(), vec![0.0, 1.0, 0.0, 0.0]);
    }

    #[test]
    fn dict_vectorizer_and_cast_map_read_maps() {
        let m = Value::Map(
            Map::new(
                strings(&["b", "a"]),
                Tensor::from_f32(vec![2], vec![2.0, 1.0]).unwrap(),
            )
            .unwrap(),
        );
        let y = run(|x| dict_vectorizer(x, &strings(&["a", "c", "b"])), &[m]).unwrap();
        assert_eq!(y.shape(), &[1, 3]);
        assert_eq!(y.to_f64().unwrap(), vec![1.0, 0.0, 2.0]);
        let m = Value::Map(
            Map::new(
                Tensor::from_i64_vec(vec![2], vec![2, 0]).unwrap(),
                strings(&["1.5", "3"]),
            )
            .unwrap(),
        );
        let dense = run(
            |x| cast_map(x, CastMapTo::Float, true, 1),
            std::slice::from_ref(&m),
        )
        .unwrap();
        assert_eq!(dense.to_f64().unwrap(), vec![3.0, 1.5]);
        let sparse = run(
            |x| cast_map(x, CastMapTo::Float, false, 3),
            std::slice::from_ref(&m),
        )
        .unwrap();
        assert_eq!(sparse.to_f64().unwrap(), vec![3.0, 0.0, 1.5]);
        let text = run(|x| cast_map(x, CastMapTo::String, false, 2), &[m]).unwrap();
        assert_eq!(
            text,
            Tensor::from_strings(vec![1, 2], vec!["3".into(), "0.f".into()]).unwrap()
        );
    }

    #[test]
    fn feature_vectorizer_cuts_and_pads_each_input() {
        let a = Value::Tensor(Tensor::from_f32(vec![2, 1], vec![1.0, 2.0]).unwrap());
        let b = Value::Tensor(Tensor::from_i64_vec(vec![2, 3], vec![3, 4, 5, 6, 7, 8]).unwrap());
        let y = run(|x| feature_vectorizer(x, &[2, 2]), &[a, b]).unwrap();
        assert_eq!(y.shape(), &[2, 4]);
        assert_eq!(
            y.to_f64().unwrap(),
            vec![1.0, 0.0, 3.0, 4.0, 2.0, 0.0, 6.0, 7.0]
        );
    }
}
