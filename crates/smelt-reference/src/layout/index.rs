//! Ops driven by index or mask tensors: Gather, GatherElements, GatherND, ScatterElements,
//! ScatterND, OneHot, Compress, NonZero.

use super::super::{one, Inputs};
use super::{for_each_index, norm_axis, wrap_index};
use smelt_ir::op::layout::ScatterReduction;
use smelt_ir::{bail, ensure, numel, strides, Data, Result, Tensor, Value};

/// Integer indices from an index tensor (any integer type).
fn indices(t: &Tensor) -> Result<Vec<i64>> {
    ensure!(
        t.dtype().is_int(),
        InvalidModel,
        "indices must be integers, got {}",
        t.dtype()
    );
    t.to_i64().map_err(|e| e.context("indices"))
}

pub(super) fn gather(x: &Inputs, axis: i64) -> Result<Vec<Value>> {
    let (t, it) = (x.tensor(0)?, x.tensor(1)?);
    ensure!(t.rank() > 0, InvalidModel, "Gather needs data of rank >= 1");
    let a = norm_axis(axis, t.rank())?;
    let dim = t.shape()[a];
    let ids = indices(it)?
        .into_iter()
        .map(|i| wrap_index(i, dim))
        .collect::<Result<Vec<_>>>()?;
    let outer = numel(&t.shape()[..a])?;
    let inner = numel(&t.shape()[a + 1..])?;
    let mut shape = t.shape()[..a].to_vec();
    shape.extend(it.shape());
    shape.extend(&t.shape()[a + 1..]);
    let mut idx = Vec::with_capacity(super::check_size(&shape)?);
    for o in 0..outer {
        for &k in &ids {
            let base = (o * dim + k) * inner;
            idx.extend(base..base + inner);
        }
    }
    one(t.take(shape, &idx)?)
}

/// For every element of an index tensor shaped like `ishape` (same rank as `dshape`), the
/// flat position in data of shape `dshape` it addresses along `a`.
fn element_targets(
    dshape: &[usize],
    ishape: &[usize],
    a: usize,
    ids: &[i64],
) -> Result<Vec<usize>> {
    ensure!(
        dshape.len() == ishape.len(),
        InvalidModel,
        "indices rank {} differs from data rank {}",
        ishape.len(),
        dshape.len()
    );
    for d in 0..dshape.len() {
        ensure!(
            d == a || ishape[d] <= dshape[d],
            InvalidModel,
            "indices shape {ishape:?} exceeds data shape {dshape:?} off the axis"
        );
    }
    let st = strides(dshape);
    let mut out = Vec::with_capacity(ids.len());
    let mut k = 0;
    for_each_index(ishape, |m| {
        let i = wrap_index(ids[k], dshape[a])?;
        k += 1;
        out.push(
            m.iter()
                .zip(&st)
                .enumerate()
                .map(|(d, (&v, &s))| if d == a { i * s } else { v * s })
                .sum(),
        );
        Ok(())
    })?;
    Ok(out)
}

pub(super) fn gather_elements(x: &Inputs, axis: i64) -> Result<Vec<Value>> {
    let (t, it) = (x.tensor(0)?, x.tensor(1)?);
    let a = norm_axis(axis, t.rank())?;
    let idx = element_targets(t.shape(), it.shape(), a, &indices(it)?)?;
    one(t.take(it.shape().to_vec(), &idx)?)
}

/// Flat offsets of the slices addressed by GatherND/ScatterND index tuples, and the slice size.
fn nd_targets(dshape: &[usize], it: &Tensor, batch_dims: usize) -> Result<(Vec<usize>, usize)> {
    let ishape = it.shape();
    let (r, q, b) = (dshape.len(), ishape.len(), batch_dims);
    ensure!(q >= 1, InvalidModel, "indices must have rank >= 1");
    ensure!(
        b < q && b <= r,
        InvalidModel,
        "batch_dims {b} is too large for ranks {r} and {q}"
    );
    ensure!(
        dshape[..b] == ishape[..b],
        InvalidModel,
        "batch dims of data {dshape:?} and indices {ishape:?} differ"
    );
    let k = ishape[q - 1];
    ensure!(
        b + k <= r,
        InvalidModel,
        "index tuples of length {k} are too long for data of rank {r} with {b} batch dims"
    );
    let ids = indices(it)?;
    let st = strides(dshape);
    let slice = numel(&dshape[b + k..])?;
    let per_batch = numel(&ishape[b..q - 1])?;
    let batch_stride = numel(&dshape[b..])?;
    let ntuples = numel(&ishape[..q - 1])?;
    let mut out = Vec::with_capacity(ntuples);
    for p in 0..ntuples {
        let batch = p.checked_div(per_batch).unwrap_or(0);
        let mut off = batch * batch_stride;
        for j in 0..k {
            off += wrap_index(ids[p * k + j], dshape[b + j])? * st[b + j];
        }
        out.push(off);
    }
    Ok((out, slice))
}

pub(super) fn gather_nd(x: &Inputs, batch_dims: i64) -> Result<Vec<Value>> {
    let (t, it) = (x.tensor(0)?, x.tensor(1)?);
    ensure!(
        batch_dims >= 0,
        InvalidModel,
        "batch_dims must be non-negative"
    );
    let (offs, slice) = nd_targets(t.shape(), it, batch_dims as usize)?;
    let q = it.rank();
    let mut shape = it.shape()[..q - 1].to_vec();
    shape.extend(&t.shape()[batch_dims as usize + it.shape()[q - 1]..]);
    let idx: Vec<usize> = offs.iter().flat_map(|&o| o..o + slice).collect();
    one(t.take(shape, &idx)?)
}

fn combine<T: Copy + PartialOrd>(
    a: &mut [T],
    idx: &[usize],
    b: &[T],
    red: ScatterReduction,
    add: fn(T, T) -> T,
    mul: fn(T, T) -> T,
) {
    for (&i, &u) in idx.iter().zip(b) {
        let v = a[i];
        a[i] = match red {
            ScatterReduction::None => u,
            ScatterReduction::Add => add(v, u),
            ScatterReduction::Mul => mul(v, u),
            ScatterReduction::Max => {
                if u > v {
                    u
                } else {
                    v
                }
            }
            ScatterReduction::Min => {
                if u < v {
                    u
                } else {
                    v
                }
            }
        };
    }
}

/// Writes `upd[k]` into flat position `idx[k]` of `out`, combining by `red`.
fn scatter_into(
    out: &mut Tensor,
    idx: &[usize],
    upd: &Tensor,
    red: ScatterReduction,
) -> Result<()> {
    ensure!(
        out.dtype() == upd.dtype(),
        InvalidModel,
        "updates are {}, data is {}",
        upd.dtype(),
        out.dtype()
    );
    ensure!(
        idx.len() == upd.len(),
        InvalidModel,
        "{} updates for {} positions",
        upd.len(),
        idx.len()
    );
    if red == ScatterReduction::None {
        return out.data_mut().scatter(idx, upd.data());
    }
    let dt = out.dtype();
    match (out.data_mut(), upd.data()) {
        (Data::F32(a), Data::F32(b)) => combine(a, idx, b, red, |x, y| x + y, |x, y| x * y),
        (Data::F64(a), Data::F64(b)) => combine(a, idx, b, red, |x, y| x + y, |x, y| x * y),
        (Data::Bool(a), Data::Bool(b)) => combine(a, idx, b, red, |x, y| x | y, |x, y| x & y),
        _ if dt.is_int() => {
            let mut a = out.to_i64()?;
            combine(
                &mut a,
                idx,
                &upd.to_i64()?,
                red,
                i64::wrapping_add,
                i64::wrapping_mul,
            );
            *out = Tensor::from_i64(dt, out.shape().to_vec(), &a)?;
        }
        _ if dt.is_float() => {
            let mut a = out.to_f64()?;
            combine(&mut a, idx, &upd.to_f64()?, red, |x, y| x + y, |x, y| x * y);
            *out = Tensor::from_f64(dt, out.shape().to_vec(), &a)?;
        }
        _ => bail!(
            Unsupported,
            "scatter reduction {red:?} does not support {dt} elements"
        ),
    }
    Ok(())
}

pub(super) fn scatter_elements(x: &Inputs, axis: i64, red: ScatterReduction) -> Result<Vec<Value>> {
    let (t, it, upd) = (x.tensor(0)?, x.tensor(1)?, x.tensor(2)?);
    ensure!(
        it.shape() == upd.shape(),
        InvalidModel,
        "indices {:?} and updates {:?} differ in shape",
        it.shape(),
        upd.shape()
    );
    let a = norm_axis(axis, t.rank())?;
    let idx = element_targets(t.shape(), it.shape(), a, &indices(it)?)?;
    let mut out = t.clone();
    scatter_into(&mut out, &idx, upd, red)?;
    one(out)
}

pub(super) fn scatter_nd(x: &Inputs, red: ScatterReduction) -> Result<Vec<Value>> {
    let (t, it, upd) = (x.tensor(0)?, x.tensor(1)?, x.tensor(2)?);
    let (offs, slice) = nd_targets(t.shape(), it, 0)?;
    let q = it.rank();
    let mut want = it.shape()[..q - 1].to_vec();
    want.extend(&t.shape()[it.shape()[q - 1]..]);
    ensure!(
        upd.shape() == want.as_slice(),
        InvalidModel,
        "updates shape {:?} should be {want:?}",
        upd.shape()
    );
    let idx: Vec<usize> = offs.iter().flat_map(|&o| o..o + slice).collect();
    let mut out = t.clone();
    scatter_into(&mut out, &idx, upd, red)?;
    one(out)
}

pub(super) fn one_hot(x: &Inputs, axis: i64) -> Result<Vec<Value>> {
    let (it, dt, vals) = (x.tensor(0)?, x.tensor(1)?, x.tensor(2)?);
    ensure!(
        vals.len() == 2,
        InvalidModel,
        "OneHot values must have 2 elements [off, on], got {}",
        vals.len()
    );
    ensure!(dt.len() == 1, InvalidModel, "OneHot depth must be a scalar");
    let depth = dt.to_f64()?[0];
    ensure!(
        depth >= 1.0 && depth <= (1u64 << 32) as f64,
        InvalidModel,
        "OneHot depth {depth} is invalid"
    );
    let depth = depth as i64;
    let ids: Vec<i64> = it.to_f64()?.into_iter().map(|v| v as i64).collect();
    let r = it.rank() as i64;
    ensure!(
        (-r - 1..=r).contains(&axis),
        InvalidModel,
        "OneHot axis {axis} is out of range for rank {}",
        r + 1
    );
    let a = if axis < 0 { axis + r + 1 } else { axis } as usize;
    let mut shape = it.shape().to_vec();
    shape.insert(a, depth as usize);
    super::check_size(&shape)?;
    let outer = numel(&it.shape()[..a])?;
    let inner = numel(&it.shape()[a..])?;
    let mut idx = Vec::with_capacity(super::check_size(&shape)?);
    for o in 0..outer {
        for d in 0..depth {
            for i in 0..inner {
                let v = ids[o * inner + i];
                let v = if v < 0 { v + depth } else { v };
                idx.push(usize::from(v == d));
            }
        }
    }
    one(vals.take(shape, &idx)?)
}

pub(super) fn compress(x: &Inputs, axis: Option<i64>) -> Result<Vec<Value>> {
    let (t, ct) = (x.tensor(0)?, x.tensor(1)?);
    ensure!(
        ct.rank() == 1,
        InvalidModel,
        "Compress condition must be 1-D, got {:?}",
        ct.shape()
    );
    let cond = ct.to_bool()?;
    let (shape, a) = match axis {
        None => (vec![t.len()], 0),
        Some(ax) => (t.shape().to_vec(), norm_axis(ax, t.rank())?),
    };
    let dim = shape[a];
    let keep: Vec<usize> = cond
        .iter()
        .enumerate()
        .filter(|(_, &c)| c)
        .map(|(i, _)| i)
        .collect();
    if let Some(&last) = keep.last() {
        ensure!(
            last < dim,
            InvalidInput,
            "Compress condition selects index {last} beyond the dim {dim}"
        );
    }
    let outer = numel(&shape[..a])?;
    let inner = numel(&shape[a + 1..])?;
    let mut out_shape = shape.clone();
    out_shape[a] = keep.len();
    let mut idx = Vec::with_capacity(super::check_size(&out_shape)?);
    for o in 0..outer {
        for &k in &keep {
            let base = (o * dim + k) * inner;
            idx.extend(base..base + inner);
        }
    }
    one(t.take(out_shape, &idx)?)
}

pub(super) fn non_zero(x: &Inputs) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let nz: Vec<bool> = match t.data() {
        Data::Str(v) => v.iter().map(|s| !s.is_empty()).collect(),
        Data::C64(v) => v.iter().map(|c| c[0] != 0.0 || c[1] != 0.0).collect(),
        Data::C128(v) => v.iter().map(|c| c[0] != 0.0 || c[1] != 0.0).collect(),
        _ => t.to_bool()?,
    };
    let shape: Vec<usize> = if t.rank() == 0 {
        vec![1]
    } else {
        t.shape().to_vec()
    };
    let r = shape.len();
    let mut coords: Vec<Vec<i64>> = vec![Vec::new(); r];
    let mut k = 0;
    for_each_index(&shape, |m| {
        if nz[k] {
            for (c, &i) in coords.iter_mut().zip(m) {
                c.push(i as i64);
            }
        }
        k += 1;
        Ok(())
    })?;
    let n = nz.iter().filter(|&&b| b).count();
    let flat: Vec<i64> = coords.into_iter().flatten().collect();
    one(Tensor::from_i64_vec(vec![r, n], flat)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_targets_wrap_and_check() {
        let t = element_targets(&[2, 3], &[2, 1], 1, &[-1, 0]).unwrap();
        assert_eq!(t, vec![2, 3]);
        assert!(element_targets(&[2, 3], &[2, 1], 1, &[3, 0]).is_err());
    }

    #[test]
    fn scatter_add_ints() {
        let mut t = Tensor::from_i64_vec(vec![3], vec![1, 2, 3]).unwrap();
        let u = Tensor::from_i64_vec(vec![2], vec![10, 20]).unwrap();
        scatter_into(&mut t, &[0, 0], &u, ScatterReduction::Add).unwrap();
        assert_eq!(t.to_i64().unwrap(), vec![31, 2, 3]);
    }
}
