//! CumSum and CumProd along the axis given by the second input.

use super::{from_i128, norm_axis, split_at_axis, to_i128, Inputs};
use smelt_ir::{bail, DType, Result, Tensor};

/// Runs CumSum (`prod` false) or CumProd.
pub(super) fn run(x: &Inputs, exclusive: bool, reverse: bool, prod: bool) -> Result<Tensor> {
    let t = x.tensor(0)?;
    let axis = match x.tensor(1)?.to_i64()?.as_slice() {
        [a] => *a,
        v => bail!(
            InvalidModel,
            "the axis input should hold one value, got {}",
            v.len()
        ),
    };
    let ax = norm_axis(axis, t.rank())?;
    let (outer, dim, inner) = split_at_axis(t.shape(), ax);
    fn scan<T: Copy>(
        v: &[T],
        (outer, dim, inner): (usize, usize, usize),
        exclusive: bool,
        reverse: bool,
        init: T,
        f: impl Fn(T, T) -> T,
    ) -> Vec<T> {
        let mut out = vec![init; v.len()];
        for o in 0..outer {
            for i in 0..inner {
                let mut acc = init;
                for s in 0..dim {
                    let k = if reverse { dim - 1 - s } else { s };
                    let at = (o * dim + k) * inner + i;
                    if exclusive {
                        out[at] = acc;
                        acc = f(acc, v[at]);
                    } else {
                        acc = f(acc, v[at]);
                        out[at] = acc;
                    }
                }
            }
        }
        out
    }
    let dims = (outer, dim, inner);
    let dtype = t.dtype();
    if dtype.is_int() {
        let v = to_i128(t)?;
        let out = if prod {
            scan(&v, dims, exclusive, reverse, 1, i128::wrapping_mul)
        } else {
            scan(&v, dims, exclusive, reverse, 0, i128::wrapping_add)
        };
        return from_i128(dtype, t.shape().to_vec(), &out);
    }
    if !dtype.is_float() || dtype == DType::Bool {
        bail!(Unsupported, "expected numeric elements, got {dtype}");
    }
    let v = t.to_f64()?;
    let out = if prod {
        scan(&v, dims, exclusive, reverse, 1.0, |a, b| a * b)
    } else {
        scan(&v, dims, exclusive, reverse, 0.0, |a, b| a + b)
    };
    Tensor::from_f64(dtype, t.shape().to_vec(), &out)
}
