//! Comparing computed values with expected ones, with tolerances for floats.

use smelt_ir::{bail, Data, Result, Tensor, Value};

/// Tolerances for float comparisons: |actual - expected| <= atol + rtol * |expected|.
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

/// Checks that `actual` matches `expected`; the error says where and by how much it differs.
pub fn compare(actual: &Value, expected: &Value, tol: Tolerance) -> Result<()> {
    match (actual, expected) {
        (Value::Tensor(a), Value::Tensor(e)) => compare_tensors(a, e, tol),
        (Value::Sequence(a), Value::Sequence(e)) => {
            if a.items.len() != e.items.len() {
                bail!(
                    "sequence has {} items, expected {}",
                    a.items.len(),
                    e.items.len()
                );
            }
            for (i, (x, y)) in a.items.iter().zip(&e.items).enumerate() {
                compare(x, y, tol).map_err(|err| err.context(format!("sequence item {i}")))?;
            }
            Ok(())
        }
        (Value::Optional(a), Value::Optional(e)) => match (&a.value, &e.value) {
            (None, None) => Ok(()),
            (Some(x), Some(y)) => compare(x, y, tol),
            (x, _) => bail!(
                "optional is {}, expected {}",
                if x.is_some() { "present" } else { "empty" },
                if x.is_some() { "empty" } else { "present" }
            ),
        },
        // An optional output may be compared with its plain contents.
        (Value::Optional(a), e) => match &a.value {
            Some(x) => compare(x, e, tol),
            None => bail!("optional is empty, expected a {}", e.kind()),
        },
        (a, e) => bail!("got a {}, expected a {}", a.kind(), e.kind()),
    }
}

fn compare_tensors(a: &Tensor, e: &Tensor, tol: Tolerance) -> Result<()> {
    if a.dtype() != e.dtype() {
        bail!("element type {} , expected {}", a.dtype(), e.dtype());
    }
    if a.shape() != e.shape() {
        bail!("shape {:?}, expected {:?}", a.shape(), e.shape());
    }
    let float = a.dtype().is_float();
    match (a.data(), e.data()) {
        (Data::Str(x), Data::Str(y)) => {
            if let Some(i) = (0..x.len()).find(|&i| x[i] != y[i]) {
                bail!("element {i} is {:?}, expected {:?}", x[i], y[i]);
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
        _ if float => close_all(a.to_f64()?, e.to_f64()?, tol),
        _ => {
            let (x, y) = (a.to_i64()?, e.to_i64()?);
            if let Some(i) = (0..x.len()).find(|&i| x[i] != y[i]) {
                bail!(
                    "element {i} is {}, expected {} (exact match required)",
                    x[i],
                    y[i]
                );
            }
            Ok(())
        }
    }
}

fn close_all(x: Vec<f64>, y: Vec<f64>, tol: Tolerance) -> Result<()> {
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
        bail!(
            "{bad} of {} elements differ; worst at {i}: got {}, expected {} (|diff| {d:.3e})",
            x.len(),
            x[i],
            y[i]
        );
    }
    Ok(())
}
