//! Two-input ops (arithmetic, comparisons, logic, bitwise), the variadic Sum/Mean/Max/Min, and Where.

use super::bcast::{map2, map2_ref, select, Plan};
use super::{float_to_int, from_ints, ints, is_intlike, Inputs};
use smelt_ir::op::elementwise::ShiftDirection;
use smelt_ir::op::ElementwiseOp as E;
use smelt_ir::{bail, ensure, DType, Data, Result, Tensor};

/// Applies a two-input op with numpy broadcasting.
pub fn binary(op: &E, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if let E::PRelu = op {
        return prelu(a, b);
    }
    let p = Plan::new(&[a.shape(), b.shape()])?;
    let (da, db) = (a.dtype(), b.dtype());
    let shape = p.shape.clone();
    match op {
        E::Equal | E::Less | E::LessOrEqual | E::Greater | E::GreaterOrEqual => {
            ensure!(
                da == db,
                InvalidModel,
                "{} needs inputs of one type, got {da} and {db}",
                op.name()
            );
            let v = compare(op, &p, a, b)?;
            Tensor::from_bools(shape, v)
        }
        E::And | E::Or | E::Xor => {
            ensure!(
                da == DType::Bool && db == DType::Bool,
                InvalidModel,
                "{} expects bool inputs, got {da} and {db}",
                op.name()
            );
            let (x, y) = (a.to_bool()?, b.to_bool()?);
            let v = match op {
                E::And => map2(&p, &x, &y, |x, y| x & y),
                E::Or => map2(&p, &x, &y, |x, y| x | y),
                _ => map2(&p, &x, &y, |x, y| x ^ y),
            };
            Tensor::from_bools(shape, v)
        }
        E::Pow => pow(&p, a, b),
        _ => {
            ensure!(
                da == db,
                InvalidModel,
                "{} needs inputs of one type, got {da} and {db}",
                op.name()
            );
            arith(op, &p, a, b)
        }
    }
}

fn compare(op: &E, p: &Plan, a: &Tensor, b: &Tensor) -> Result<Vec<bool>> {
    macro_rules! cmp {
        ($x:expr, $y:expr, $m:ident) => {
            match op {
                E::Equal => $m(p, $x, $y, |x, y| x == y),
                E::Less => $m(p, $x, $y, |x, y| x < y),
                E::LessOrEqual => $m(p, $x, $y, |x, y| x <= y),
                E::Greater => $m(p, $x, $y, |x, y| x > y),
                _ => $m(p, $x, $y, |x, y| x >= y),
            }
        };
    }
    Ok(match (a.data(), b.data()) {
        (Data::Str(x), Data::Str(y)) => cmp!(x, y, map2_ref),
        (Data::F32(x), Data::F32(y)) => cmp!(x, y, map2),
        _ if is_intlike(a.dtype()) => cmp!(&ints(a)?, &ints(b)?, map2),
        _ if a.dtype().is_float() => cmp!(&a.to_f64()?, &b.to_f64()?, map2),
        _ => bail!(
            Unsupported,
            "{} is not defined for {} elements",
            op.name(),
            a.dtype()
        ),
    })
}

/// Arithmetic, remainder, shifts and bitwise ops on inputs of one type.
fn arith(op: &E, p: &Plan, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let d = a.dtype();
    let shape = p.shape.clone();
    if d.is_int() {
        let (x, y) = (ints(a)?, ints(b)?);
        let bits = d.bits() as i128;
        let signed = d.is_signed_int();
        let v = match op {
            E::Add => map2(p, &x, &y, |x, y| x + y),
            E::Sub => map2(p, &x, &y, |x, y| x - y),
            E::Mul => map2(p, &x, &y, |x, y| x.wrapping_mul(y)),
            E::Div => map2(p, &x, &y, |x, y| if y == 0 { 0 } else { x / y }),
            E::Mod { fmod: true } => map2(p, &x, &y, |x, y| if y == 0 { 0 } else { x % y }),
            E::Mod { fmod: false } => map2(p, &x, &y, |x, y| {
                if y == 0 {
                    return 0;
                }
                let r = x % y;
                if r != 0 && ((r < 0) != (y < 0)) {
                    r + y
                } else {
                    r
                }
            }),
            E::Max => map2(p, &x, &y, |x, y| x.max(y)),
            E::Min => map2(p, &x, &y, |x, y| x.min(y)),
            E::BitwiseAnd => map2(p, &x, &y, |x, y| x & y),
            E::BitwiseOr => map2(p, &x, &y, |x, y| x | y),
            E::BitwiseXor => map2(p, &x, &y, |x, y| x ^ y),
            // Shifts by a negative amount or by the width or more shift every bit out.
            E::BitShift {
                direction: ShiftDirection::Left,
            } => map2(
                p,
                &x,
                &y,
                |x, s| if s < 0 || s >= bits { 0 } else { x << s },
            ),
            E::BitShift {
                direction: ShiftDirection::Right,
            } => map2(p, &x, &y, |x, s| {
                if s < 0 || s >= bits {
                    if signed && x < 0 {
                        -1
                    } else {
                        0
                    }
                } else {
                    x >> s
                }
            }),
            _ => bail!(Unsupported, "{} is not defined for {d} elements", op.name()),
        };
        return from_ints(d, shape, &v);
    }
    if d == DType::Bool {
        let (x, y) = (ints(a)?, ints(b)?);
        let v = match op {
            E::Max => map2(p, &x, &y, |x, y| x.max(y)),
            E::Min => map2(p, &x, &y, |x, y| x.min(y)),
            E::BitwiseAnd => map2(p, &x, &y, |x, y| x & y),
            E::BitwiseOr => map2(p, &x, &y, |x, y| x | y),
            E::BitwiseXor => map2(p, &x, &y, |x, y| x ^ y),
            _ => bail!(
                Unsupported,
                "{} is not defined for bool elements",
                op.name()
            ),
        };
        return from_ints(d, shape, &v);
    }
    if !d.is_float() {
        bail!(Unsupported, "{} is not defined for {d} elements", op.name());
    }
    if let (Data::F32(x), Data::F32(y)) = (a.data(), b.data()) {
        let v = match op {
            E::Add => map2(p, x, y, |x, y| x + y),
            E::Sub => map2(p, x, y, |x, y| x - y),
            E::Mul => map2(p, x, y, |x, y| x * y),
            E::Div => map2(p, x, y, |x, y| x / y),
            E::Max => map2(p, x, y, fmax),
            E::Min => map2(p, x, y, fmin),
            _ => map2(p, x, y, |x, y| float_arith(op, x as f64, y as f64) as f32),
        };
        return Tensor::from_f32(shape, v);
    }
    let (x, y) = (a.to_f64()?, b.to_f64()?);
    ensure!(
        matches!(
            op,
            E::Add | E::Sub | E::Mul | E::Div | E::Max | E::Min | E::Mod { .. }
        ),
        Unsupported,
        "{} is not defined for {d} elements",
        op.name()
    );
    let v = map2(p, &x, &y, |x, y| float_arith(op, x, y));
    Tensor::from_f64(d, shape, &v)
}

fn fmax<T: PartialOrd + Copy>(x: T, y: T) -> T {
    // NaN propagates like numpy's maximum (x != x only for NaN).
    #[allow(clippy::eq_op)]
    let x_nan = x != x;
    if x_nan || x >= y {
        x
    } else {
        y
    }
}

fn fmin<T: PartialOrd + Copy>(x: T, y: T) -> T {
    #[allow(clippy::eq_op)]
    let x_nan = x != x;
    if x_nan || x <= y {
        x
    } else {
        y
    }
}

fn float_arith(op: &E, x: f64, y: f64) -> f64 {
    match op {
        E::Add => x + y,
        E::Sub => x - y,
        E::Mul => x * y,
        E::Div => x / y,
        E::Max => fmax(x, y),
        E::Min => fmin(x, y),
        E::Mod { fmod: true } => x % y,
        E::Mod { fmod: false } => {
            // numpy's mod: the result takes the divisor's sign.
            let r = x % y;
            if r != 0.0 {
                if (y < 0.0) != (r < 0.0) {
                    r + y
                } else {
                    r
                }
            } else {
                0f64.copysign(y)
            }
        }
        _ => f64::NAN,
    }
}

/// Pow: the output has the base's type; any real exponent type.
fn pow(p: &Plan, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let d = a.dtype();
    let shape = p.shape.clone();
    if d.is_float() {
        if let (Data::F32(x), Data::F32(y)) = (a.data(), b.data()) {
            return Tensor::from_f32(
                shape,
                map2(p, x, y, |x, y| (x as f64).powf(y as f64) as f32),
            );
        }
        let (x, y) = (a.to_f64()?, b.to_f64()?);
        return Tensor::from_f64(d, shape, &map2(p, &x, &y, f64::powf));
    }
    ensure!(
        d.is_int(),
        Unsupported,
        "Pow is not defined for {d} elements"
    );
    let x = ints(a)?;
    let v = if is_intlike(b.dtype()) {
        let y = ints(b)?;
        map2(p, &x, &y, int_pow)
    } else {
        let y = b.to_f64()?;
        map2(p, &x, &y, |x, y| float_to_int(d, (x as f64).powf(y)))
    };
    from_ints(d, shape, &v)
}

/// x^e with wrapping at 64 bits (enough for every integer type up to 64 bits).
fn int_pow(x: i128, e: i128) -> i128 {
    if e < 0 {
        return match x {
            1 => 1,
            -1 => {
                if e % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut base, mut e, mut acc) = (x as i64, e, 1i64);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    acc as i128
}

/// PRelu: the slope broadcasts to x; a 1-D slope of x's channel count (opsets before 7)
/// applies per channel (dimension 1).
fn prelu(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let mut slope = b.clone();
    if Plan::new(&[a.shape(), b.shape()]).is_err()
        && b.rank() == 1
        && a.rank() >= 2
        && a.shape()[1] == b.len()
    {
        let mut s = vec![b.len()];
        s.resize(a.rank() - 1, 1);
        slope = slope.reshape(s)?;
    }
    let p = Plan::new(&[a.shape(), slope.shape()])?;
    ensure!(
        p.shape == a.shape(),
        InvalidModel,
        "PRelu slope of shape {:?} does not broadcast to {:?}",
        b.shape(),
        a.shape()
    );
    let d = a.dtype();
    if let (Data::F32(x), Data::F32(s)) = (a.data(), slope.data()) {
        return Tensor::from_f32(
            p.shape.clone(),
            map2(&p, x, s, |x, s| if x < 0.0 { x * s } else { x }),
        );
    }
    if d.is_int() {
        let (x, s) = (ints(a)?, ints(&slope)?);
        return from_ints(
            d,
            p.shape.clone(),
            &map2(&p, &x, &s, |x, s| if x < 0 { x * s } else { x }),
        );
    }
    ensure!(
        d.is_float(),
        Unsupported,
        "PRelu is not defined for {d} elements"
    );
    let (x, s) = (a.to_f64()?, slope.to_f64()?);
    Tensor::from_f64(
        d,
        p.shape.clone(),
        &map2(&p, &x, &s, |x, s| if x < 0.0 { x * s } else { x }),
    )
}

/// Sum, Mean, Max and Min over one or more broadcast inputs.
pub fn variadic(op: &E, x: &Inputs) -> Result<Tensor> {
    let ts: Vec<&Tensor> = x.present().map(|v| v.tensor()).collect::<Result<_>>()?;
    let Some((first, rest)) = ts.split_first() else {
        bail!(InvalidModel, "{} needs at least one input", op.name())
    };
    let pair = match op {
        E::Max => E::Max,
        E::Min => E::Min,
        _ => E::Add,
    };
    let d = first.dtype();
    ensure!(
        d.is_int() || d.is_float(),
        Unsupported,
        "{} is not defined for {d} elements",
        op.name()
    );
    let mut acc = (*first).clone();
    for t in rest {
        acc = binary(&pair, &acc, t)?;
    }
    if matches!(op, E::Mean) {
        let n = ts.len();
        acc = match acc.data() {
            Data::F32(v) => Tensor::from_f32(
                acc.shape().to_vec(),
                v.iter().map(|&x| x / n as f32).collect(),
            )?,
            _ if d.is_int() => {
                let v: Vec<i128> = ints(&acc)?.into_iter().map(|x| x / n as i128).collect();
                from_ints(d, acc.shape().to_vec(), &v)?
            }
            _ => {
                let v: Vec<f64> = acc.to_f64()?.into_iter().map(|x| x / n as f64).collect();
                Tensor::from_f64(d, acc.shape().to_vec(), &v)?
            }
        };
    }
    Ok(acc)
}

/// Where: `c ? x : y` with broadcasting over all three; any element type.
pub fn where_(c: &Tensor, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    ensure!(
        x.dtype() == y.dtype(),
        InvalidModel,
        "Where needs X and Y of one type, got {} and {}",
        x.dtype(),
        y.dtype()
    );
    let p = Plan::new(&[c.shape(), x.shape(), y.shape()])?;
    let cond = match c.data() {
        Data::Bool(v) => std::borrow::Cow::Borrowed(v.as_slice()),
        _ => std::borrow::Cow::Owned(c.to_bool()?),
    };
    macro_rules! sel {
        ($($var:ident),*) => {
            match (x.data(), y.data()) {
                $((Data::$var(a), Data::$var(b)) => Data::$var(select(&p, &cond, a, b).into()),)*
                _ => bail!(Internal, "Where: X and Y storages differ"),
            }
        };
    }
    let data =
        sel!(F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool, Str, C64, C128);
    Tensor::new(x.dtype(), p.shape, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_semantics() {
        let a = Tensor::from_i64(DType::I8, vec![4], &[-7, 7, 127, -128]).unwrap();
        let b = Tensor::from_i64(DType::I8, vec![4], &[2, -2, 1, -1]).unwrap();
        let div = binary(&E::Div, &a, &b).unwrap();
        assert_eq!(div.to_i64().unwrap(), vec![-3, -3, 127, -128]);
        let m = binary(&E::Mod { fmod: false }, &a, &b).unwrap();
        assert_eq!(m.to_i64().unwrap(), vec![1, -1, 0, 0]);
        let s = binary(&E::Add, &a, &b).unwrap();
        assert_eq!(s.to_i64().unwrap(), vec![-5, 5, -128, 127]);
    }

    #[test]
    fn where_strings_broadcast() {
        let c = Tensor::from_bools(vec![2, 1], vec![true, false]).unwrap();
        let x = Tensor::from_strings(vec![2], vec!["a".into(), "b".into()]).unwrap();
        let y = Tensor::from_strings(vec![], vec!["z".into()]).unwrap();
        let w = where_(&c, &x, &y).unwrap();
        assert_eq!(w.shape(), &[2, 2]);
        assert_eq!(
            w.data(),
            &Data::Str(smelt_ir::Buf::from_vec(vec![
                "a".into(),
                "b".into(),
                "z".into(),
                "z".into()
            ]))
        );
    }

    #[test]
    fn float_broadcast() {
        let a = Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let b = Tensor::from_f32(vec![2], vec![10.0, 20.0]).unwrap();
        let s = binary(&E::Add, &a, &b).unwrap();
        assert_eq!(s.as_f32().unwrap(), &[11.0, 22.0, 13.0, 24.0]);
        let m = binary(
            &E::Mod { fmod: false },
            &Tensor::scalar_f32(-3.0),
            &Tensor::scalar_f32(2.0),
        )
        .unwrap();
        assert_eq!(m.as_f32().unwrap(), &[1.0]);
    }
}
