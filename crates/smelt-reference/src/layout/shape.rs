//! Shape-only ops and tensor makers: Reshape, Flatten, Squeeze, Unsqueeze, Shape,
//! ConstantOfShape, Range, EyeLike.

use super::super::{one, Inputs};
use super::{norm_axes, to_dim};
use smelt_ir::{bail, ensure, err, numel, DType, Result, Tensor, Value};

/// Most elements a generated tensor (Range, ConstantOfShape) may have.
pub(crate) const MAX_ELEMENTS: usize = 1 << 32;

fn with_shape(t: &Tensor, shape: Vec<usize>) -> Result<Vec<Value>> {
    one(t.clone().reshape(shape)?)
}

/// The output shape of Reshape.
pub(crate) fn reshape_dims(input: &[usize], spec: &[i64], allowzero: bool) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            -1 => {
                ensure!(
                    infer.is_none(),
                    InvalidModel,
                    "shape {spec:?} has more than one -1"
                );
                infer = Some(i);
                out.push(1);
            }
            0 if !allowzero => {
                let d = *input.get(i).ok_or_else(|| {
                    err!(
                        InvalidModel,
                        "shape {spec:?} copies dim {i}, but the input has rank {}",
                        input.len()
                    )
                })?;
                out.push(d);
            }
            d if d >= 0 => out.push(d as usize),
            d => bail!(InvalidModel, "invalid dimension {d} in shape {spec:?}"),
        }
    }
    let n = numel(input)?;
    if let Some(i) = infer {
        ensure!(
            !(allowzero && spec.contains(&0)),
            InvalidModel,
            "shape {spec:?} has both -1 and 0 with allowzero"
        );
        // An overflowing product matches no input: the shape cannot apply.
        let rest = numel(&out).unwrap_or(0);
        ensure!(
            rest != 0 && n % rest == 0,
            InvalidModel,
            "cannot reshape {input:?} to {spec:?}"
        );
        out[i] = n / rest;
    }
    ensure!(
        numel(&out).ok() == Some(n),
        InvalidModel,
        "cannot reshape {input:?} ({n} elements) to {spec:?}"
    );
    Ok(out)
}

pub(super) fn reshape(x: &Inputs, attr: Option<&[i64]>, allowzero: bool) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let spec = match attr {
        Some(s) => s.to_vec(),
        None => x
            .opt_ints(1)?
            .ok_or_else(|| err!(InvalidModel, "Reshape needs the shape input"))?,
    };
    with_shape(t, reshape_dims(t.shape(), &spec, allowzero)?)
}

pub(super) fn flatten(x: &Inputs, axis: i64) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let r = t.rank() as i64;
    ensure!(
        (-r..=r).contains(&axis),
        InvalidModel,
        "Flatten axis {axis} is out of range for rank {r}"
    );
    let a = if axis < 0 { axis + r } else { axis } as usize;
    let outer = numel(&t.shape()[..a])?;
    let inner = numel(&t.shape()[a..])?;
    with_shape(t, vec![outer, inner])
}

pub(super) fn squeeze(x: &Inputs, attr: Option<&[i64]>) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let axes = match attr {
        Some(a) => Some(a.to_vec()),
        None => x.opt_ints(1)?,
    };
    let shape = t.shape();
    let out: Vec<usize> = match axes.filter(|a| !a.is_empty()) {
        None => shape.iter().copied().filter(|&d| d != 1).collect(),
        Some(a) => {
            let a = norm_axes(&a, shape.len())?;
            for &i in &a {
                ensure!(
                    shape[i] == 1,
                    InvalidModel,
                    "cannot squeeze axis {i} of size {} (shape {shape:?})",
                    shape[i]
                );
            }
            shape
                .iter()
                .enumerate()
                .filter(|(i, _)| !a.contains(i))
                .map(|(_, &d)| d)
                .collect()
        }
    };
    with_shape(t, out)
}

pub(super) fn unsqueeze(x: &Inputs, attr: Option<&[i64]>) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let axes = match attr {
        Some(a) => a.to_vec(),
        None => x
            .opt_ints(1)?
            .ok_or_else(|| err!(InvalidModel, "Unsqueeze needs the axes input"))?,
    };
    let rank = t.rank() + axes.len();
    let a = norm_axes(&axes, rank)?;
    let mut src = t.shape().iter();
    let out: Vec<usize> = (0..rank)
        .map(|i| {
            if a.contains(&i) {
                1
            } else {
                src.next().copied().unwrap_or(1)
            }
        })
        .collect();
    with_shape(t, out)
}

pub(super) fn shape(x: &Inputs, start: i64, end: Option<i64>) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let r = t.rank() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let s = clamp(start);
    let e = clamp(end.unwrap_or(r));
    let dims: Vec<i64> = if s < e {
        t.shape()[s..e].iter().map(|&d| d as i64).collect()
    } else {
        Vec::new()
    };
    one(Tensor::from_i64_vec(vec![dims.len()], dims)?)
}

pub(super) fn constant_of_shape(x: &Inputs, value: Option<&Tensor>) -> Result<Vec<Value>> {
    let spec = x
        .opt_ints(0)?
        .ok_or_else(|| err!(InvalidModel, "ConstantOfShape needs the shape input"))?;
    let shape = spec
        .iter()
        .map(|&d| to_dim(d, "ConstantOfShape dims"))
        .collect::<Result<Vec<_>>>()?;
    let n = numel(&shape)?;
    super::check_count(n as u128, 8, &|| format!("ConstantOfShape of {shape:?}"))?;
    let zero = Tensor::scalar_f32(0.0);
    let v = value.unwrap_or(&zero);
    ensure!(
        v.len() == 1,
        InvalidModel,
        "ConstantOfShape value must have one element"
    );
    let data = smelt_ir::map_data!(v.data(), d => d.iter().cycle().take(n).cloned().collect());
    one(Tensor::new(v.dtype(), shape, data)?)
}

pub(super) fn range(x: &Inputs) -> Result<Vec<Value>> {
    let (s, l, d) = (x.tensor(0)?, x.tensor(1)?, x.tensor(2)?);
    let dt = s.dtype();
    ensure!(
        l.dtype() == dt && d.dtype() == dt,
        InvalidModel,
        "Range inputs must share one type ({}, {}, {})",
        dt,
        l.dtype(),
        d.dtype()
    );
    for t in [s, l, d] {
        ensure!(
            t.len() == 1,
            InvalidModel,
            "Range inputs must be scalars, got shape {:?}",
            t.shape()
        );
    }
    if dt.is_int() {
        let (s, l, d) = (
            s.to_i64()?[0] as i128,
            l.to_i64()?[0] as i128,
            d.to_i64()?[0] as i128,
        );
        ensure!(d != 0, InvalidModel, "Range delta must not be zero");
        let span = l - s;
        // ceil(span / d) for either sign of d.
        let q = span / d;
        let n = if span % d != 0 && ((span > 0) == (d > 0)) {
            q + 1
        } else {
            q
        }
        .max(0);
        super::check_count(n as u128, 16, &|| format!("Range of {n} elements"))?;
        let v: Vec<i64> = (0..n).map(|i| (s + i * d) as i64).collect();
        one(Tensor::from_i64(dt, vec![v.len()], &v)?)
    } else if dt.is_float() {
        let (s, l, d) = (s.to_f64()?[0], l.to_f64()?[0], d.to_f64()?[0]);
        ensure!(d != 0.0, InvalidModel, "Range delta must not be zero");
        let n = ((l - s) / d).ceil();
        ensure!(
            !n.is_nan() && n != f64::INFINITY,
            InvalidModel,
            "Range with start {s}, limit {l}, delta {d} is not finite"
        );
        let n = n.max(0.0);
        ensure!(
            n <= MAX_ELEMENTS as f64,
            ResourceExhausted,
            "Range would produce {n} elements"
        );
        super::check_count(n as u128, 16, &|| format!("Range of {n} elements"))?;
        let v: Vec<f64> = (0..n as usize).map(|i| s + i as f64 * d).collect();
        one(Tensor::from_f64(dt, vec![v.len()], &v)?)
    } else {
        bail!(Unsupported, "Range does not support {dt} elements")
    }
}

pub(super) fn eye_like(x: &Inputs, dtype: Option<DType>, k: i64) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    ensure!(
        t.rank() == 2,
        InvalidModel,
        "EyeLike needs a 2-D input, got shape {:?}",
        t.shape()
    );
    let (rows, cols) = (t.shape()[0], t.shape()[1]);
    let dt = dtype.unwrap_or(t.dtype());
    ensure!(
        dt != DType::Str && !dt.is_complex(),
        Unsupported,
        "EyeLike does not support {dt} elements"
    );
    let n = super::check_count(rows as u128 * cols as u128, 8, &|| {
        format!("EyeLike of shape {:?}", t.shape())
    })?;
    let mut v = vec![0i64; n];
    // Only the rows whose diagonal column i + k lies in [0, cols) are visited: an empty
    // input may still have a huge dim.
    let (k, cols_i) = (k as i128, cols as i128);
    let (lo, hi) = ((-k).max(0), (rows as i128).min(cols_i - k));
    for i in lo..hi {
        v[(i * cols_i + i + k) as usize] = 1;
    }
    one(Tensor::from_i64(dt, vec![rows, cols], &v)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_rules() {
        assert_eq!(
            reshape_dims(&[2, 3, 4], &[0, -1], false).unwrap(),
            vec![2, 12]
        );
        assert_eq!(reshape_dims(&[0, 3], &[3, 0], true).unwrap(), vec![3, 0]);
        assert!(reshape_dims(&[2, 3], &[-1, -1], false).is_err());
        assert!(reshape_dims(&[2, 3], &[4, -1], false).is_err());
        assert!(reshape_dims(&[2, 3], &[0, 0, 0], false).is_err());
    }
}
