//! Comparing computed values with expected ones, with tolerances for floats.

use smelt_ir::{Data, Map, Tensor, Value};

/// How an output differs from the expected one: a test's verdict, not an error of smelt.
pub type Mismatch = String;

/// Returns early with a formatted [`Mismatch`].
macro_rules! differ {
    ($($arg:tt)+) => {
        return Err(format!($($arg)+))
    };
}

/// Tolerances for float comparisons: |actual - expected| <= atol + rtol * |expected|.
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

/// Checks that `actual` matches `expected`; the mismatch says where and by how much.
pub fn compare(actual: &Value, expected: &Value, tol: Tolerance) -> Result<(), Mismatch> {
    match (actual, expected) {
        (Value::Tensor(a), Value::Tensor(e)) => compare_tensors(a, e, tol),
        (Value::Sequence(a), Value::Sequence(e)) => {
            if a.items.len() != e.items.len() {
                differ!(
                    "sequence has {} items, expected {}",
                    a.items.len(),
                    e.items.len()
                );
            }
            for (i, (x, y)) in a.items.iter().zip(&e.items).enumerate() {
                compare(x, y, tol).map_err(|m| format!("sequence item {i}: {m}"))?;
            }
            Ok(())
        }
        (Value::Optional(a), Value::Optional(e)) => match (&a.value, &e.value) {
            (None, None) => Ok(()),
            (Some(x), Some(y)) => compare(x, y, tol),
            (x, _) => differ!(
                "optional is {}, expected {}",
                if x.is_some() { "present" } else { "empty" },
                if x.is_some() { "empty" } else { "present" }
            ),
        },
        (Value::Map(a), Value::Map(e)) => compare_maps(a, e, tol),
        // An optional output may be compared with its plain contents.
        (Value::Optional(a), e) => match &a.value {
            Some(x) => compare(x, e, tol),
            None => differ!("optional is empty, expected a {}", e.kind()),
        },
        (a, e) => differ!("got a {}, expected a {}", a.kind(), e.kind()),
    }
}

/// Maps match when they have the same keys (in any order: a map has none) and the values
/// of each key match.
fn compare_maps(a: &Map, e: &Map, tol: Tolerance) -> Result<(), Mismatch> {
    let (ak, ek) = (a.keys(), e.keys());
    if ak.dtype() != ek.dtype() || a.values().dtype() != e.values().dtype() {
        differ!(
            "map of {} -> {}, expected {} -> {}",
            ak.dtype(),
            a.values().dtype(),
            ek.dtype(),
            e.values().dtype()
        );
    }
    let key = |t: &Tensor| -> Result<Vec<String>, Mismatch> {
        Ok(match t.data() {
            Data::Str(s) => s.iter().map(|k| format!("{k:?}")).collect(),
            _ => t
                .to_i64()
                .map_err(|e| e.to_string())?
                .iter()
                .map(|k| k.to_string())
                .collect(),
        })
    };
    let (akeys, ekeys) = (key(ak)?, key(ek)?);
    if akeys.len() != ekeys.len() {
        differ!("map has {} keys, expected {}", akeys.len(), ekeys.len());
    }
    let at: std::collections::HashMap<&String, usize> =
        akeys.iter().enumerate().map(|(i, k)| (k, i)).collect();
    for (j, k) in ekeys.iter().enumerate() {
        let Some(&i) = at.get(k) else {
            differ!("map has no key {k}");
        };
        let one = |m: &Map, i: usize| m.values().take(vec![1], &[i]).map_err(|e| e.to_string());
        compare_tensors(&one(a, i)?, &one(e, j)?, tol).map_err(|m| format!("map key {k}: {m}"))?;
    }
    Ok(())
}

fn compare_tensors(a: &Tensor, e: &Tensor, tol: Tolerance) -> Result<(), Mismatch> {
    if a.dtype() != e.dtype() {
        differ!("element type {} , expected {}", a.dtype(), e.dtype());
    }
    if a.shape() != e.shape() {
        differ!("shape {:?}, expected {:?}", a.shape(), e.shape());
    }
    let float = a.dtype().is_float();
    match (a.data(), e.data()) {
        (Data::Str(x), Data::Str(y)) => {
            if let Some(i) = (0..x.len()).find(|&i| x[i] != y[i]) {
                differ!("element {i} is {:?}, expected {:?}", x[i], y[i]);
            }
            Ok(())
        }
        (Data::C64(x), Data::C64(y)) => close_all(
            x.iter().flatten().map(|&v| v as f64).collect(),
            y.iter().flatten().map(|&v| v as f64).collect(),
            tol,
        ),
        (Data::C128(x), Data::C128(y)) => close_all(
            x.iter().flatten().copied().collect(),
            y.iter().flatten().copied().collect(),
            tol,
        ),
        _ if float => close_all(values(a)?, values(e)?, tol),
        _ => {
            let (x, y) = (ints(a)?, ints(e)?);
            if let Some(i) = (0..x.len()).find(|&i| x[i] != y[i]) {
                differ!(
                    "element {i} is {}, expected {} (exact match required)",
                    x[i],
                    y[i]
                );
            }
            Ok(())
        }
    }
}

fn close_all(x: Vec<f64>, y: Vec<f64>, tol: Tolerance) -> Result<(), Mismatch> {
    let mut worst: Option<(usize, f64)> = None;
    let mut bad = 0usize;
    for (i, (&a, &e)) in x.iter().zip(&y).enumerate() {
        let ok = if a.is_nan() || e.is_nan() {
            a.is_nan() && e.is_nan()
        } else if a.is_infinite() || e.is_infinite() {
            a == e
        } else {
            (a - e).abs() <= tol.atol + tol.rtol * e.abs()
        };
        if !ok {
            bad += 1;
            let d = if (a - e).is_nan() {
                f64::INFINITY
            } else {
                (a - e).abs()
            };
            if worst.is_none_or(|(_, w)| d > w) {
                worst = Some((i, d));
            }
        }
    }
    if let Some((i, d)) = worst {
        differ!(
            "{bad} of {} elements differ; worst at {i}: got {}, expected {} (|diff| {d:.3e})",
            x.len(),
            x[i],
            y[i]
        );
    }
    Ok(())
}

fn values(t: &Tensor) -> Result<Vec<f64>, Mismatch> {
    t.to_f64().map_err(|e| e.to_string())
}

fn ints(t: &Tensor) -> Result<Vec<i64>, Mismatch> {
    t.to_i64().map_err(|e| e.to_string())
}
