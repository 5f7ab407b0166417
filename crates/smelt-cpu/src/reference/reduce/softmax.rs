//! Softmax, LogSoftmax and Hardmax.

use super::split_at_axis;
use smelt_ir::{bail, Result, Tensor};

/// Which member of the family.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kind {
    Softmax,
    LogSoftmax,
    Hardmax,
}

/// Runs one op; with `coerce_2d` the dimensions from `axis` on form one flattened axis.
pub(super) fn run(kind: Kind, t: &Tensor, axis: i64, coerce_2d: bool) -> Result<Tensor> {
    let dtype = t.dtype();
    if !dtype.is_float() {
        bail!("expected floating-point elements, got {dtype}");
    }
    let shape = t.shape();
    let r = shape.len() as i64;
    let (outer, dim, inner) = if coerce_2d {
        if axis < -r || axis > r {
            bail!("axis {axis} is out of range for rank {r}");
        }
        let a = if axis < 0 { axis + r } else { axis } as usize;
        (shape[..a].iter().product(), shape[a..].iter().product(), 1)
    } else {
        if r == 0 {
            bail!("the input must have at least one dimension");
        }
        split_at_axis(shape, super::norm_axis(axis, shape.len())?)
    };
    let v = t.to_f64()?;
    let mut out = vec![0.0f64; v.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * dim + k) * inner + i;
            if dim == 0 {
                continue;
            }
            let mut max = f64::NEG_INFINITY;
            let mut arg = 0;
            for k in 0..dim {
                let x = v[at(k)];
                if x > max || (x.is_nan() && !max.is_nan()) {
                    max = x;
                    arg = k;
                }
            }
            match kind {
                Kind::Hardmax => out[at(arg)] = 1.0,
                Kind::Softmax | Kind::LogSoftmax => {
                    let m = if max.is_finite() { max } else { 0.0 };
                    let sum: f64 = (0..dim).map(|k| (v[at(k)] - m).exp()).sum();
                    for k in 0..dim {
                        let x = v[at(k)] - m;
                        out[at(k)] = if kind == Kind::Softmax {
                            x.exp() / sum
                        } else {
                            x - sum.ln()
                        };
                    }
                }
            }
        }
    }
    Tensor::from_f64(dtype, shape.to_vec(), &out)
}
