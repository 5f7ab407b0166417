//! One-input ops: math, activations, IsNaN/IsInf, logical and bitwise not, and Clip.

use super::{from_ints, ints, Inputs};
use smelt_ir::op::elementwise::GeluApprox;
use smelt_ir::op::ElementwiseOp as E;
use smelt_ir::{bail, err, DType, Data, Result, Tensor};

/// Applies a one-input op.
pub fn unary(op: &E, a: &Tensor) -> Result<Tensor> {
    let d = a.dtype();
    let shape = a.shape().to_vec();
    match op {
        E::Not => {
            ensure_bool(op, d)?;
            return Tensor::from_bools(shape, a.to_bool()?.into_iter().map(|b| !b).collect());
        }
        E::IsNaN => {
            return Tensor::from_bools(shape, a.to_f64()?.into_iter().map(f64::is_nan).collect())
        }
        E::IsInf {
            detect_positive,
            detect_negative,
        } => {
            let (p, n) = (*detect_positive, *detect_negative);
            let v = a.to_f64()?;
            return Tensor::from_bools(
                shape,
                v.into_iter()
                    .map(|x| (p && x == f64::INFINITY) || (n && x == f64::NEG_INFINITY))
                    .collect(),
            );
        }
        _ => {}
    }
    if d.is_int() {
        let f: fn(i128) -> i128 = match op {
            E::Abs => |x| x.abs(),
            E::Neg => |x| -x,
            E::Sign => |x| x.signum(),
            E::Relu => |x| x.max(0),
            E::BitwiseNot => |x| !x,
            E::Floor | E::Ceil | E::Round => |x| x,
            E::Shrink { .. } | E::LeakyRelu { .. } | E::ThresholdedRelu { .. } => {
                // Defined for integers by computing in floats and truncating.
                let g = float_fn(op)?;
                let v: Vec<f64> = a.to_f64()?.into_iter().map(g).collect();
                return Tensor::from_f64(d, shape, &v);
            }
            _ => bail!(Unsupported, "{} is not defined for {d} elements", op.name()),
        };
        let v: Vec<i128> = ints(a)?.into_iter().map(f).collect();
        // Unsigned values are never negative, so Abs and Sign stay exact; Neg wraps.
        return from_ints(d, shape, &v);
    }
    if !d.is_float() {
        bail!(Unsupported, "{} is not defined for {d} elements", op.name());
    }
    if let Data::F32(v) = a.data() {
        // f32 storage in and out; a few hot ops stay in f32 entirely.
        let out: Vec<f32> = match op {
            E::Relu => v.iter().map(|&x| if x < 0.0 { 0.0 } else { x }).collect(),
            E::Neg => v.iter().map(|&x| -x).collect(),
            E::Abs => v.iter().map(|&x| x.abs()).collect(),
            E::Sqrt => v.iter().map(|&x| x.sqrt()).collect(),
            E::Reciprocal => v.iter().map(|&x| 1.0 / x).collect(),
            _ => {
                let f = float_fn(op)?;
                v.iter().map(|&x| f(x as f64) as f32).collect()
            }
        };
        return Tensor::from_f32(shape, out);
    }
    let f = float_fn(op)?;
    if let Data::F64(v) = a.data() {
        return Tensor::new(
            DType::F64,
            shape,
            Data::F64(v.iter().map(|&x| f(x)).collect()),
        );
    }
    let v: Vec<f64> = a.to_f64()?.into_iter().map(f).collect();
    Tensor::from_f64(d, shape, &v)
}

fn ensure_bool(op: &E, d: DType) -> Result<()> {
    if d != DType::Bool {
        bail!(Unsupported, "{} expects bool elements, got {d}", op.name());
    }
    Ok(())
}

/// The scalar function of a one-input float op.
fn float_fn(op: &E) -> Result<Box<dyn Fn(f64) -> f64>> {
    Ok(match *op {
        E::Abs => Box::new(f64::abs),
        E::Neg => Box::new(|x: f64| -x),
        E::Exp => Box::new(f64::exp),
        E::Log => Box::new(f64::ln),
        E::Sqrt => Box::new(f64::sqrt),
        E::Reciprocal => Box::new(|x: f64| 1.0 / x),
        E::Floor => Box::new(f64::floor),
        E::Ceil => Box::new(f64::ceil),
        E::Round => Box::new(f64::round_ties_even),
        E::Sign => Box::new(|x: f64| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }),
        E::Erf => Box::new(erf),
        E::Sin => Box::new(f64::sin),
        E::Cos => Box::new(f64::cos),
        E::Tan => Box::new(f64::tan),
        E::Asin => Box::new(f64::asin),
        E::Acos => Box::new(f64::acos),
        E::Atan => Box::new(f64::atan),
        E::Sinh => Box::new(f64::sinh),
        E::Cosh => Box::new(f64::cosh),
        E::Asinh => Box::new(f64::asinh),
        E::Acosh => Box::new(f64::acosh),
        E::Atanh => Box::new(f64::atanh),
        E::Relu => Box::new(|x: f64| if x < 0.0 { 0.0 } else { x }),
        E::LeakyRelu { alpha } => {
            let a = alpha as f64;
            Box::new(move |x: f64| if x < 0.0 { a * x } else { x })
        }
        E::Elu { alpha } => {
            let a = alpha as f64;
            Box::new(move |x: f64| if x < 0.0 { a * x.exp_m1() } else { x })
        }
        E::Selu { alpha, gamma } => {
            let (a, g) = (alpha as f64, gamma as f64);
            Box::new(move |x: f64| if x <= 0.0 { g * a * x.exp_m1() } else { g * x })
        }
        E::Celu { alpha } => {
            let a = alpha as f64;
            Box::new(move |x: f64| if x > 0.0 { x } else { a * (x / a).exp_m1() })
        }
        E::Sigmoid => Box::new(sigmoid),
        E::HardSigmoid { alpha, beta } => {
            let (a, b) = (alpha as f64, beta as f64);
            Box::new(move |x: f64| (a * x + b).clamp(0.0, 1.0))
        }
        E::HardSwish => Box::new(|x: f64| x * (x / 6.0 + 0.5).clamp(0.0, 1.0)),
        E::Tanh => Box::new(f64::tanh),
        E::Softplus => Box::new(softplus),
        E::Softsign => Box::new(|x: f64| x / (1.0 + x.abs())),
        E::Mish => Box::new(|x: f64| x * softplus(x).tanh()),
        E::Swish { alpha } => {
            let a = alpha as f64;
            Box::new(move |x: f64| x / (1.0 + (-a * x).exp()))
        }
        E::ThresholdedRelu { alpha } => {
            let a = alpha as f64;
            Box::new(move |x: f64| if x > a { x } else { 0.0 })
        }
        E::Gelu {
            approximate: GeluApprox::None,
        } => Box::new(|x: f64| 0.5 * x * (1.0 + erf(x * std::f64::consts::FRAC_1_SQRT_2))),
        E::Gelu {
            approximate: GeluApprox::Tanh,
        } => Box::new(|x: f64| {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
        }),
        E::Shrink { bias, lambd } => {
            let (b, l) = (bias as f64, lambd as f64);
            Box::new(move |x: f64| {
                if x < -l {
                    x + b
                } else if x > l {
                    x - b
                } else {
                    0.0
                }
            })
        }
        _ => bail!(
            Unsupported,
            "{} is not defined for floating-point elements",
            op.name()
        ),
    })
}

fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

fn softplus(x: f64) -> f64 {
    if x > 0.0 {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    }
}

/// Taylor coefficients of erf(x)/x in powers of x^2.
const ERF_TAYLOR: [f64; 36] = {
    let mut c = [0.0; 36];
    let mut fact = 1.0; // n!
    let mut n = 0;
    while n < 36 {
        if n > 0 {
            fact *= n as f64;
        }
        let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
        c[n] = sign * std::f64::consts::FRAC_2_SQRT_PI / (fact * (2 * n + 1) as f64);
        n += 1;
    }
    c
};

/// The error function, to about 1e-15 relative: a Taylor series below 2, the continued
/// fraction of erfc above.
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 2.0 {
        // erf(a) = a * sum_n c_n a^(2n), c_n = 2/sqrt(pi) (-1)^n / (n! (2n+1)), by Horner.
        let a2 = a * a;
        let terms = if a < 0.5 {
            12
        } else if a < 1.0 {
            20
        } else {
            ERF_TAYLOR.len()
        };
        let mut sum = 0.0;
        for c in ERF_TAYLOR[..terms].iter().rev() {
            sum = sum * a2 + c;
        }
        a * sum
    } else if a < 6.5 {
        // erfc(a) = exp(-a^2)/sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...))))
        let mut t = a;
        let depth = if a < 2.5 {
            45
        } else if a < 3.0 {
            30
        } else {
            20
        };
        for k in (1..=depth).rev() {
            t = a + (k as f64 / 2.0) / t;
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / t
    } else {
        1.0
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

/// Clip: bounds from the attributes (old opsets) or optional scalar inputs 1 and 2.
pub fn clip(x: &Inputs, amin: Option<f32>, amax: Option<f32>) -> Result<Tensor> {
    let a = x.tensor(0)?;
    let d = a.dtype();
    let shape = a.shape().to_vec();
    let bound = |i: usize| -> Result<Option<&Tensor>> {
        match x.opt_tensor(i)? {
            None => Ok(None),
            Some(t) if t.len() == 1 => Ok(Some(t)),
            Some(t) => bail!(
                InvalidModel,
                "Clip bound (input {i}) must have one element, got shape {:?}",
                t.shape()
            ),
        }
    };
    let (tmin, tmax) = (bound(1)?, bound(2)?);
    if d.is_int() {
        let get = |t: Option<&Tensor>, attr: Option<f32>, dflt: i128| -> Result<i128> {
            match (t, attr) {
                (Some(t), _) => ints(t)?
                    .first()
                    .copied()
                    .ok_or_else(|| err!(InvalidModel, "empty Clip bound")),
                (None, Some(f)) if f.is_finite() => Ok(f as i128),
                _ => Ok(dflt),
            }
        };
        let (lo, hi) = (get(tmin, amin, i128::MIN)?, get(tmax, amax, i128::MAX)?);
        let v: Vec<i128> = ints(a)?.into_iter().map(|v| v.max(lo).min(hi)).collect();
        return from_ints(d, shape, &v);
    }
    if !d.is_float() {
        bail!(Unsupported, "Clip is not defined for {d} elements");
    }
    let get = |t: Option<&Tensor>, attr: Option<f32>, dflt: f64| -> Result<f64> {
        match (t, attr) {
            (Some(t), _) => t
                .to_f64()?
                .first()
                .copied()
                .ok_or_else(|| err!(InvalidModel, "empty Clip bound")),
            (None, Some(f)) => Ok(f as f64),
            _ => Ok(dflt),
        }
    };
    let (lo, hi) = (
        get(tmin, amin, f64::NEG_INFINITY)?,
        get(tmax, amax, f64::INFINITY)?,
    );
    // min(max(x, lo), hi), NaN staying NaN.
    let clamp = |v: f64| {
        let y = if v < lo { lo } else { v };
        if y > hi {
            hi
        } else {
            y
        }
    };
    if let Data::F32(v) = a.data() {
        let (l, h) = (lo as f32, hi as f32);
        let out = v
            .iter()
            .map(|&v| {
                let y = if v < l { l } else { v };
                if y > h {
                    h
                } else {
                    y
                }
            })
            .collect();
        return Tensor::from_f32(shape, out);
    }
    let v: Vec<f64> = a.to_f64()?.into_iter().map(clamp).collect();
    Tensor::from_f64(d, shape, &v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_values() {
        // From a high-precision reference.
        let cases = [
            (0.1, 0.1124629160182849),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (2.0, 0.9953222650189527),
            (2.4, 0.999311486103355),
            (2.6, 0.9997639655834707),
            (2.9, 0.9999589021219005),
            (3.1, 0.9999883513426328),
            (3.5, 0.9999992569016276),
            (4.5, 0.9999999998033839),
            (-1.5, -0.9661051464753108),
        ];
        for (x, want) in cases {
            assert!(
                (erf(x) - want).abs() < 2e-15,
                "erf({x}) = {} want {want}",
                erf(x)
            );
        }
    }
}
