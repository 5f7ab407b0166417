//! ArgMax/ArgMin and TopK: selections along an axis, exact for every element type.

use super::{norm_axis, split_at_axis, Keys};
use smelt_ir::{bail, Result, Tensor};
use std::cmp::Ordering;

/// Orders floats with NaN above everything (as numpy sorts), integers exactly.
trait Key: Copy {
    fn cmp_key(&self, other: &Self) -> Ordering;
}

impl Key for f64 {
    fn cmp_key(&self, other: &Self) -> Ordering {
        match (self.is_nan(), other.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => self.partial_cmp(other).unwrap_or(Ordering::Equal),
        }
    }
}

impl Key for i128 {
    fn cmp_key(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
}

/// ArgMax (`max`) or ArgMin along `axis`, as i64 indices.
pub(super) fn arg(t: &Tensor, axis: i64, keepdims: bool, last: bool, max: bool) -> Result<Tensor> {
    let ax = norm_axis(axis, t.rank())?;
    let (outer, dim, inner) = split_at_axis(t.shape(), ax);
    if dim == 0 {
        bail!(
            InvalidModel,
            "cannot take the arg{} of an empty axis",
            if max { "max" } else { "min" }
        );
    }
    fn go<T: Key>(
        v: &[T],
        outer: usize,
        dim: usize,
        inner: usize,
        last: bool,
        max: bool,
    ) -> Vec<i64> {
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| &v[(o * dim + k) * inner + i];
                let mut best = 0;
                for k in 1..dim {
                    let c = at(k).cmp_key(at(best));
                    let c = if max { c } else { c.reverse() };
                    if c == Ordering::Greater || (last && c == Ordering::Equal) {
                        best = k;
                    }
                }
                out.push(best as i64);
            }
        }
        out
    }
    let idx = match Keys::of(t)? {
        Keys::F(v) => go(&v, outer, dim, inner, last, max),
        Keys::I(v) => go(&v, outer, dim, inner, last, max),
    };
    let mut shape = t.shape().to_vec();
    if keepdims {
        shape[ax] = 1;
    } else {
        shape.remove(ax);
    }
    Tensor::from_i64_vec(shape, idx)
}

/// The `k` largest (or smallest) elements along `axis`, sorted, ties to the lower index;
/// returns (values, i64 indices).
pub(super) fn top_k(t: &Tensor, k: i64, axis: i64, largest: bool) -> Result<(Tensor, Tensor)> {
    let ax = norm_axis(axis, t.rank())?;
    let (outer, dim, inner) = split_at_axis(t.shape(), ax);
    if k < 0 || k as usize > dim {
        bail!(
            InvalidModel,
            "TopK: k = {k} is out of range for an axis of size {dim}"
        );
    }
    let k = k as usize;
    fn go<T: Key>(
        v: &[T],
        outer: usize,
        dim: usize,
        inner: usize,
        k: usize,
        largest: bool,
    ) -> Vec<usize> {
        // Positions (along the axis) of the selected elements, laid out as the output.
        let mut pos = vec![0usize; outer * k * inner];
        let mut order: Vec<usize> = Vec::with_capacity(dim);
        for o in 0..outer {
            for i in 0..inner {
                let at = |j: usize| &v[(o * dim + j) * inner + i];
                order.clear();
                order.extend(0..dim);
                // Stable: equal keys keep the lower index first.
                order.sort_by(|&a, &b| {
                    if largest {
                        at(b).cmp_key(at(a))
                    } else {
                        at(a).cmp_key(at(b))
                    }
                });
                for (j, &p) in order.iter().take(k).enumerate() {
                    pos[(o * k + j) * inner + i] = p;
                }
            }
        }
        pos
    }
    let pos = match Keys::of(t)? {
        Keys::F(v) => go(&v, outer, dim, inner, k, largest),
        Keys::I(v) => go(&v, outer, dim, inner, k, largest),
    };
    let mut shape = t.shape().to_vec();
    shape[ax] = k;
    let flat: Vec<usize> = pos
        .iter()
        .enumerate()
        .map(|(n, &p)| {
            let i = n % inner;
            let o = n / (k * inner);
            (o * dim + p) * inner + i
        })
        .collect();
    let values = t.take(shape.clone(), &flat)?;
    let indices = Tensor::from_i64_vec(shape, pos.iter().map(|&p| p as i64).collect())?;
    Ok((values, indices))
}
