//! Miscellaneous ops: Resize (scales or sizes from constants) and the random generators.

use super::dims::mul;
use super::{axis, typed, In, Outs};
use smelt_ir::op::misc::{AspectPolicy, MiscOp};
use smelt_ir::{Dim, Result};

/// Output types of a misc-family op.
pub(super) fn infer(op: &MiscOp, x: &In) -> Result<Option<Outs>> {
    use MiscOp::*;
    let dt = x.dtype(0);
    Ok(match op {
        Resize {
            axes,
            keep_aspect_ratio_policy,
            scales,
            scales_input,
            sizes_input,
            ..
        } => Some(vec![typed(
            dt,
            resize(
                x,
                axes,
                *keep_aspect_ratio_policy,
                scales,
                *scales_input,
                *sizes_input,
            ),
        )]),
        RandomUniform { dtype, shape, .. } | RandomNormal { dtype, shape, .. } => {
            let s = shape
                .iter()
                .map(|&d| u64::try_from(d).ok().map(Dim::Known))
                .collect();
            Some(vec![typed(Some(*dtype), s)])
        }
        RandomUniformLike { dtype, .. }
        | RandomNormalLike { dtype, .. }
        | Bernoulli { dtype, .. } => Some(vec![typed(dtype.or(dt), x.shape(0))]),
        _ => return super::signal::infer(op, x),
    })
}

/// A constant input that is present and not empty (empty means absent for Resize).
fn nonempty(x: &In, slot: Option<usize>) -> Option<Option<Vec<f64>>> {
    let Some(i) = slot.filter(|&i| x.has(i)) else {
        return Some(None);
    };
    let v = x.floats(i)?;
    Some((!v.is_empty()).then_some(v))
}

fn resize(
    x: &In,
    axes: &Option<Vec<i64>>,
    policy: AspectPolicy,
    scales_attr: &Option<Vec<f32>>,
    scales_input: Option<usize>,
    sizes_input: Option<usize>,
) -> Option<Vec<Dim>> {
    let s = x.shape(0)?;
    let r = s.len();
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&a| axis(a, r)).collect::<Option<_>>()?,
        None => (0..r).collect(),
    };
    // Both operands asked for before either is required, so both are recorded.
    let scales = match scales_attr {
        Some(v) => Some(Some(v.iter().map(|&f| f as f64).collect())),
        None => nonempty(x, scales_input),
    };
    let sizes = nonempty(x, sizes_input);
    let (scales, sizes) = (scales?, sizes?);
    // Scales that are not positive and finite, or negative sizes, have no output shape:
    // the kernel rejects them (the run's input is at fault, not a shape to plan).
    let invalid = scales
        .as_ref()
        .is_some_and(|sc: &Vec<f64>| sc.iter().any(|&v| !(v > 0.0 && v.is_finite())))
        || sizes.as_ref().is_some_and(|z| z.iter().any(|&v| v < 0.0));
    if invalid {
        return None;
    }
    let mut out = s.clone();
    match (scales, sizes) {
        (Some(sc), None) if sc.len() == axes.len() => {
            for (k, &a) in axes.iter().enumerate() {
                out[a] = match &s[a] {
                    _ if sc[k] == 1.0 => s[a].clone(),
                    Dim::Known(n) => Dim::Known((sc[k] * *n as f64).floor().max(0.0) as u64),
                    d if sc[k] >= 1.0 && sc[k].fract() == 0.0 => mul(d, &Dim::Known(sc[k] as u64)),
                    _ => Dim::Unknown,
                };
            }
        }
        (None, Some(z)) if z.len() == axes.len() => {
            let z: Vec<u64> = z.iter().map(|&v| v.max(0.0) as u64).collect();
            if policy == AspectPolicy::Stretch {
                for (k, &a) in axes.iter().enumerate() {
                    out[a] = Dim::Known(z[k]);
                }
            } else {
                let ins: Vec<u64> = axes
                    .iter()
                    .map(|&a| match s[a] {
                        Dim::Known(n) => Some(n),
                        _ => None,
                    })
                    .collect::<Option<_>>()?;
                let ratios = z.iter().zip(&ins).map(|(&o, &i)| o as f64 / i as f64);
                let sc = if policy == AspectPolicy::NotLarger {
                    ratios.fold(f64::INFINITY, f64::min)
                } else {
                    ratios.fold(f64::NEG_INFINITY, f64::max)
                };
                for (k, &a) in axes.iter().enumerate() {
                    out[a] = Dim::Known((sc * ins[k] as f64 + 0.5).floor() as u64);
                }
            }
        }
        _ => return None,
    }
    Some(out)
}
