//! String ops: StringNormalizer, StringConcat, StringSplit, RegexFullMatch, TfIdfVectorizer.

use super::super::broadcast::{broadcast_shapes, index_map};
use super::super::{one, Inputs};
use smelt_ir::op::misc::{CaseChange, TfIdfMode};
use smelt_ir::op::MiscOp;
use smelt_ir::{bail, ensure, err, Data, Result, Tensor, Value};
use std::collections::{HashMap, HashSet};

fn strings(t: &Tensor) -> Result<&[String]> {
    match t.data() {
        Data::Str(v) => Ok(v),
        _ => bail!(Unsupported, "expected a string tensor, got {}", t.dtype()),
    }
}

/// The most gram lookups one TfIdfVectorizer may do (rows x columns x skips x lengths).
const TFIDF_MAX_STEPS: u128 = 1 << 30;

/// StringNormalizer on [C] or [1, C]: stopword removal and case change; empty results are dropped.
pub fn string_normalizer(
    x: &Inputs,
    case: CaseChange,
    sensitive: bool,
    stopwords: &[String],
) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let s = strings(t)?;
    ensure!(
        t.rank() == 1 || t.rank() == 2,
        InvalidModel,
        "StringNormalizer: input must be [C] or [1, C], got {:?}",
        t.shape()
    );
    let change = |w: &str| match case {
        CaseChange::None => w.to_string(),
        CaseChange::Lower => w.to_lowercase(),
        CaseChange::Upper => w.to_uppercase(),
    };
    let stops: HashSet<String> = stopwords
        .iter()
        .map(|w| {
            if sensitive {
                w.clone()
            } else {
                w.to_lowercase()
            }
        })
        .collect();
    let remove = |text: &str| -> String {
        if stops.is_empty() {
            return text.to_string();
        }
        text.split(' ')
            .filter(|w| {
                let k = if sensitive {
                    (*w).to_string()
                } else {
                    w.to_lowercase()
                };
                !stops.contains(&k)
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let res: Vec<String> = s.iter().map(|w| change(&remove(w))).collect();
    let collapse = t.rank() == 1 || t.shape()[0] == 1;
    if !collapse {
        return one(Tensor::from_strings(t.shape().to_vec(), res)?);
    }
    let mut kept: Vec<String> = res.into_iter().filter(|w| !w.is_empty()).collect();
    if kept.is_empty() {
        kept.push(String::new());
    }
    let n = kept.len();
    let shape = if t.rank() == 1 { vec![n] } else { vec![1, n] };
    one(Tensor::from_strings(shape, kept)?)
}

/// StringConcat with numpy broadcasting.
pub fn string_concat(x: &Inputs) -> Result<Vec<Value>> {
    let (a, b) = (x.tensor(0)?, x.tensor(1)?);
    let (sa, sb) = (strings(a)?, strings(b)?);
    let shape = broadcast_shapes(&[a.shape(), b.shape()])?;
    let (ia, ib) = (index_map(a.shape(), &shape), index_map(b.shape(), &shape));
    let out = ia
        .iter()
        .zip(&ib)
        .map(|(&i, &j)| format!("{}{}", sa[i], sb[j]))
        .collect();
    one(Tensor::from_strings(shape, out)?)
}

/// Python's `str.split(sep, maxsplit)`.
fn py_split(s: &str, sep: Option<&str>, maxsplit: Option<i64>) -> Vec<String> {
    let max = maxsplit
        .filter(|&m| m >= 0)
        .map(|m| m as usize)
        .unwrap_or(usize::MAX);
    match sep {
        Some(sep) => {
            let mut out = Vec::new();
            let mut rest = s;
            while out.len() < max {
                match rest.find(sep) {
                    Some(p) => {
                        out.push(rest[..p].to_string());
                        rest = &rest[p + sep.len()..];
                    }
                    None => break,
                }
            }
            out.push(rest.to_string());
            out
        }
        None => {
            let mut out = Vec::new();
            let mut rest = s.trim_start();
            while !rest.is_empty() {
                if out.len() >= max {
                    out.push(rest.to_string());
                    break;
                }
                match rest.find(char::is_whitespace) {
                    Some(p) => {
                        out.push(rest[..p].to_string());
                        rest = rest[p..].trim_start();
                    }
                    None => {
                        out.push(rest.to_string());
                        break;
                    }
                }
            }
            out
        }
    }
}

/// StringSplit: substrings padded with "" to the longest split, and the split counts.
pub fn string_split(
    x: &Inputs,
    delimiter: Option<&str>,
    maxsplit: Option<i64>,
) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let s = strings(t)?;
    let parts: Vec<Vec<String>> = s.iter().map(|w| py_split(w, delimiter, maxsplit)).collect();
    let width = parts.iter().map(Vec::len).max().unwrap_or(0);
    let lens: Vec<i64> = parts.iter().map(|p| p.len() as i64).collect();
    let mut flat = Vec::with_capacity(parts.len() * width);
    for mut p in parts {
        p.resize(width, String::new());
        flat.extend(p);
    }
    let mut shape = t.shape().to_vec();
    shape.push(width);
    Ok(vec![
        Value::Tensor(Tensor::from_strings(shape, flat)?),
        Value::Tensor(Tensor::from_i64_vec(t.shape().to_vec(), lens)?),
    ])
}

/// RegexFullMatch with a small backtracking engine.
pub fn regex_full_match(x: &Inputs, pattern: &str) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let s = strings(t)?;
    let re = super::regex::Regex::new(pattern)
        .map_err(|e| err!(InvalidModel, "RegexFullMatch: pattern '{pattern}': {e}"))?;
    ensure!(
        s.iter().all(|w| w.len() <= 100_000),
        ResourceExhausted,
        "RegexFullMatch: strings longer than 100000 bytes are not supported"
    );
    // The matcher recurses once per consumed character: give it a deep stack.
    let out: std::result::Result<Vec<bool>, String> = std::thread::scope(|sc| {
        let h = std::thread::Builder::new()
            .stack_size(1 << 29)
            .spawn_scoped(sc, || s.iter().map(|w| re.full_match(w)).collect())
            .map_err(|e| {
                err!(
                    ResourceExhausted,
                    "RegexFullMatch: cannot start the matcher thread: {e}"
                )
            })?;
        h.join()
            .map_err(|_| err!(Internal, "RegexFullMatch: the matcher panicked"))
    })?;
    // The matcher gives up on a pattern that backtracks too much on an input.
    let out = out.map_err(|e| err!(ResourceExhausted, "RegexFullMatch: {e}"))?;
    one(Tensor::from_bools(t.shape().to_vec(), out)?)
}

#[derive(Hash, PartialEq, Eq, Clone)]
enum Key {
    I(i64),
    S(String),
}

/// TfIdfVectorizer over [C] or [B, C] integers or strings.
pub fn tfidf(op: &MiscOp, x: &Inputs) -> Result<Vec<Value>> {
    let MiscOp::TfIdfVectorizer {
        mode,
        min_gram_length,
        max_gram_length,
        max_skip_count,
        ngram_counts,
        ngram_indexes,
        pool_ints,
        pool_strings,
        weights,
    } = op
    else {
        bail!(Internal, "not a TfIdfVectorizer")
    };
    let t = x.tensor(0)?;
    let keys: Vec<Key> = match t.data() {
        Data::Str(v) => v.iter().cloned().map(Key::S).collect(),
        _ => t.to_i64()?.into_iter().map(Key::I).collect(),
    };
    let pool: Vec<Key> = if pool_strings.is_empty() {
        pool_ints.iter().map(|&i| Key::I(i)).collect()
    } else {
        pool_strings.iter().cloned().map(Key::S).collect()
    };
    // Checked before any arithmetic on them.
    ensure!(
        ngram_indexes.iter().all(|&i| (0..1 << 24).contains(&i)),
        InvalidModel,
        "TfIdfVectorizer: ngram indexes must lie in [0, 2^24)"
    );
    let out_size = ngram_indexes
        .iter()
        .copied()
        .max()
        .map(|m| m + 1)
        .unwrap_or(0) as usize;
    // n-gram -> output column.
    let mut map: HashMap<Vec<Key>, usize> = HashMap::new();
    let mut id = 0usize;
    for (i, &start) in ngram_counts.iter().enumerate() {
        let size = i + 1;
        let end = ngram_counts
            .get(i + 1)
            .copied()
            .unwrap_or(pool.len() as i64);
        ensure!(
            0 <= start && start <= end && end as usize <= pool.len(),
            InvalidModel,
            "TfIdfVectorizer: bad ngram_counts"
        );
        let items = (end - start) as usize;
        for g in 0..items / size {
            let s = start as usize + g * size;
            let col = *ngram_indexes
                .get(id)
                .ok_or_else(|| err!(InvalidModel, "TfIdfVectorizer: too few ngram_indexes"))?
                as usize;
            if (*min_gram_length as usize..=*max_gram_length as usize).contains(&size) {
                map.entry(pool[s..s + size].to_vec()).or_insert(col);
            }
            id += 1;
        }
    }
    let (rows, c, oshape) = match t.rank() {
        0 => (1, 1, vec![out_size]),
        1 => (1, t.shape()[0], vec![out_size]),
        2 => (t.shape()[0], t.shape()[1], vec![t.shape()[0], out_size]),
        _ => bail!(
            InvalidModel,
            "TfIdfVectorizer: input must be [C] or [B, C], got {:?}",
            t.shape()
        ),
    };
    let total = rows.checked_mul(out_size).ok_or_else(|| {
        err!(
            ResourceExhausted,
            "TfIdfVectorizer: {rows} x {out_size} outputs"
        )
    })?;
    let mut freq = smelt_ir::limits::try_vec(total, 0f32, &|| "TfIdfVectorizer output".into())?;
    // No columns or no outputs: nothing to count (rows alone may be huge).
    let rows = if c == 0 || out_size == 0 { 0 } else { rows };
    ensure!(
        *min_gram_length >= 1 && *max_gram_length >= *min_gram_length,
        InvalidModel,
        "TfIdfVectorizer: bad gram lengths {min_gram_length}..{max_gram_length}"
    );
    // No gram is longer than the pool's longest, however long max_gram_length allows.
    let longest = ngram_counts.len();
    let (mn, mx) = (
        *min_gram_length as usize,
        (*max_gram_length as usize).min(longest),
    );
    ensure!(
        *max_skip_count >= 0,
        InvalidModel,
        "TfIdfVectorizer: max_skip_count {max_skip_count} is negative"
    );
    // Skips past the row's length find no gram of two or more tokens.
    let skips = (*max_skip_count as u64)
        .saturating_add(1)
        .min(c.max(1) as u64) as usize;
    let skips = if mx >= 2 { skips } else { 1 };
    // The count walks rows x columns x skips x gram lengths: bounded, so a long row with a
    // huge skip count is an error rather than hours of work.
    let steps = rows as u128 * c as u128 * skips as u128 * (mx.saturating_sub(mn) + 1) as u128;
    ensure!(
        steps <= TFIDF_MAX_STEPS,
        ResourceExhausted,
        "TfIdfVectorizer: {rows} row(s) of {c} tokens with {skips} skip(s) and gram lengths \
         {mn}..={mx} take {steps} steps, more than {TFIDF_MAX_STEPS}"
    );
    // A long count stops at the run's deadline or cancel, like a run between nodes.
    let mut pacer = smelt_ir::WorkPacer::new();
    let per_row = (steps / rows.max(1) as u128).min(u64::MAX as u128) as u64;
    let mut gram: Vec<Key> = Vec::with_capacity(mx);
    for r in 0..rows {
        pacer.done(per_row)?;
        let row = &keys[r * c..(r + 1) * c];
        for d in 1..=skips {
            let lo = if d == 1 { mn } else { mn.max(2) };
            for start in 0..c {
                for n in lo..=mx {
                    let last = start + d * (n - 1);
                    if last >= c {
                        break;
                    }
                    gram.clear();
                    gram.extend((0..n).map(|k| row[start + k * d].clone()));
                    if let Some(&col) = map.get(gram.as_slice()) {
                        freq[r * out_size + col] += 1.0;
                    }
                }
            }
        }
    }
    for r in 0..rows {
        for i in 0..out_size {
            let f = &mut freq[r * out_size + i];
            let w = weights.get(i).copied();
            *f = match (mode, w) {
                (TfIdfMode::Tf, _) => *f,
                (TfIdfMode::Idf, Some(w)) => {
                    if *f > 0.0 {
                        w
                    } else {
                        0.0
                    }
                }
                (TfIdfMode::Idf, None) => (*f > 0.0) as u8 as f32,
                (TfIdfMode::TfIdf, Some(w)) => w * *f,
                (TfIdfMode::TfIdf, None) => *f,
            };
        }
    }
    one(Tensor::from_f32(oshape, freq)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_split() {
        assert_eq!(py_split("  a b  c ", None, None), vec!["a", "b", "c"]);
        assert_eq!(py_split("a  b c ", None, Some(1)), vec!["a", "b c "]);
        assert_eq!(py_split("a..b", Some("."), None), vec!["a", "", "b"]);
        assert_eq!(py_split("", Some("."), None), vec![""]);
        assert!(py_split("", None, None).is_empty());
    }
}
