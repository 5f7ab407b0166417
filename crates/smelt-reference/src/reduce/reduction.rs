//! The `Reduce*` ops.

use super::{from_i128, norm_axis, to_i128, Inputs};
use smelt_ir::op::reduce::{ReduceOp, Reduction};
use smelt_ir::{bail, strides, DType, Result, Tensor};

/// Which reduction to apply.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

/// Runs one `Reduce*` op.
pub(super) fn run(op: &ReduceOp, r: &Reduction, x: &Inputs) -> Result<Tensor> {
    let kind = match op {
        ReduceOp::ReduceSum(_) => Kind::Sum,
        ReduceOp::ReduceMean(_) => Kind::Mean,
        ReduceOp::ReduceMax(_) => Kind::Max,
        ReduceOp::ReduceMin(_) => Kind::Min,
        ReduceOp::ReduceProd(_) => Kind::Prod,
        ReduceOp::ReduceL1(_) => Kind::L1,
        ReduceOp::ReduceL2(_) => Kind::L2,
        ReduceOp::ReduceLogSum(_) => Kind::LogSum,
        ReduceOp::ReduceLogSumExp(_) => Kind::LogSumExp,
        ReduceOp::ReduceSumSquare(_) => Kind::SumSquare,
        _ => bail!(Internal, "{} is not a Reduce* op", op.name()),
    };
    let t = x.tensor(0)?;
    let axes = match &r.axes {
        Some(a) => a.clone(),
        None => x.opt_ints(1)?.unwrap_or_default(),
    };
    if axes.is_empty() && r.noop_with_empty_axes {
        return Ok(t.clone());
    }
    let rank = t.rank();
    let mut reduced = vec![axes.is_empty(); rank];
    for &a in &axes {
        let a = norm_axis(a, rank)?;
        if reduced[a] {
            bail!(InvalidModel, "axis {a} is listed twice in axes {axes:?}");
        }
        reduced[a] = true;
    }
    reduce(kind, t, &reduced, r.keepdims)
}

fn reduce(kind: Kind, t: &Tensor, reduced: &[bool], keepdims: bool) -> Result<Tensor> {
    let shape = t.shape();
    let kept: Vec<usize> = shape
        .iter()
        .zip(reduced)
        .map(|(&d, &r)| if r { 1 } else { d })
        .collect();
    let out_shape: Vec<usize> = if keepdims {
        kept.clone()
    } else {
        shape
            .iter()
            .zip(reduced)
            .filter(|(_, &r)| !r)
            .map(|(&d, _)| d)
            .collect()
    };
    // An empty input can still ask for a huge output (a zero dim reduced away, large
    // dims kept): its size is checked before anything is allocated.
    let dtype = t.dtype();
    let what = || format!("the {out_shape:?} result of a reduction");
    let out_len = smelt_ir::limits::check_shape(dtype, &kept, &what)?;
    // For each input element, the output element it folds into.
    let in_str = strides(shape);
    let out_str: Vec<usize> = strides(&kept)
        .iter()
        .zip(reduced)
        .map(|(&s, &r)| if r { 0 } else { s })
        .collect();
    let oidx: Vec<usize> = (0..t.len())
        .map(|i| {
            (0..shape.len())
                .map(|d| (i / in_str[d]) % shape[d] * out_str[d])
                .sum()
        })
        .collect();
    let exact_int = (dtype.is_int() || dtype == DType::Bool)
        && matches!(
            kind,
            Kind::Sum
                | Kind::Mean
                | Kind::Max
                | Kind::Min
                | Kind::Prod
                | Kind::L1
                | Kind::SumSquare
        );
    if exact_int {
        let v = to_i128(t)?;
        let (lo, hi) = dtype.int_range().unwrap_or((i128::MIN, i128::MAX));
        let init = match kind {
            Kind::Prod => 1,
            Kind::Max => lo,
            Kind::Min => hi,
            _ => 0,
        };
        let mut acc = smelt_ir::limits::try_vec(out_len, init, &what)?;
        let mut count = smelt_ir::limits::try_vec(out_len, 0i128, &what)?;
        for (&x, &o) in v.iter().zip(&oidx) {
            let a = &mut acc[o];
            *a = match kind {
                Kind::Sum | Kind::Mean => a.wrapping_add(x),
                Kind::Prod => a.wrapping_mul(x),
                Kind::Max => (*a).max(x),
                Kind::Min => (*a).min(x),
                Kind::L1 => a.wrapping_add(x.wrapping_abs()),
                _ => a.wrapping_add(x.wrapping_mul(x)),
            };
            count[o] += 1;
        }
        if kind == Kind::Mean {
            for (a, &c) in acc.iter_mut().zip(&count) {
                *a = if c == 0 { 0 } else { *a / c };
            }
        }
        return from_i128(dtype, out_shape, &acc);
    }
    if dtype == DType::Str || dtype.is_complex() {
        bail!(
            Unsupported,
            "reductions of {dtype} elements are not supported"
        );
    }
    let v = t.to_f64()?;
    let init = match kind {
        Kind::Prod => 1.0,
        Kind::Max | Kind::LogSumExp => f64::NEG_INFINITY,
        Kind::Min => f64::INFINITY,
        _ => 0.0,
    };
    let mut acc = smelt_ir::limits::try_vec(out_len, init, &what)?;
    let mut count = smelt_ir::limits::try_vec(out_len, 0usize, &what)?;
    for (&x, &o) in v.iter().zip(&oidx) {
        let a = &mut acc[o];
        match kind {
            Kind::Sum | Kind::Mean | Kind::LogSum => *a += x,
            Kind::Prod => *a *= x,
            // NaN propagates, as numpy's max/min do.
            Kind::Max => {
                if x.is_nan() || x > *a {
                    *a = x
                }
            }
            Kind::Min => {
                if x.is_nan() || x < *a {
                    *a = x
                }
            }
            Kind::L1 => *a += x.abs(),
            Kind::L2 | Kind::SumSquare => *a += x * x,
            Kind::LogSumExp => *a = a.max(x),
        }
        count[o] += 1;
    }
    if kind == Kind::LogSumExp {
        // Second pass: log(sum(exp(x - max))) + max.
        let mut sum = vec![0.0f64; out_len];
        for (&x, &o) in v.iter().zip(&oidx) {
            let m = acc[o];
            sum[o] += if m.is_finite() {
                (x - m).exp()
            } else {
                x.exp()
            };
        }
        for (a, s) in acc.iter_mut().zip(sum) {
            *a = if a.is_finite() { s.ln() + *a } else { s.ln() };
        }
    }
    for (a, &c) in acc.iter_mut().zip(&count) {
        match kind {
            Kind::Mean => *a /= c as f64,
            Kind::L2 => *a = a.sqrt(),
            Kind::LogSum => *a = a.ln(),
            _ => {}
        }
    }
    Tensor::from_f64(dtype, out_shape, &acc)
}
