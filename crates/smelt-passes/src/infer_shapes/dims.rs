//! Symbolic dimension arithmetic: expressions over symbols are built, simplified (constants
//! folded, like terms of sums combined, `floor`/`ceil` of integers dropped) and become
//! `Dim::Known` as soon as no symbol remains.

use smelt_ir::{Dim, DimExpr};
use std::collections::HashMap;

/// The expression of a dim; None for an unknown dim.
pub fn expr(d: &Dim) -> Option<DimExpr> {
    match d {
        Dim::Known(n) => Some(DimExpr::Num(*n as f64)),
        Dim::Sym(e) => Some(e.clone()),
        Dim::Unknown => None,
    }
}

/// A simplified expression as a dim: Known when it is a non-negative integer, Unknown when
/// it is some other number (an invalid size).
pub fn to_dim(e: DimExpr) -> Dim {
    match simplify(e) {
        DimExpr::Num(n) if n >= 0.0 && n.fract() == 0.0 && n < 1e18 => Dim::Known(n as u64),
        DimExpr::Num(_) => Dim::Unknown,
        e => Dim::Sym(e),
    }
}

fn num(n: f64) -> DimExpr {
    DimExpr::Num(n)
}

fn bin(op: char, a: DimExpr, b: DimExpr) -> DimExpr {
    DimExpr::Bin(op, Box::new(a), Box::new(b))
}

fn call(f: &str, args: Vec<DimExpr>) -> DimExpr {
    DimExpr::Call(f.to_string(), args)
}

/// Combines two dims with an arithmetic operator (exact integer arithmetic when both are
/// known); Unknown if either is.
fn combine(op: char, a: &Dim, b: &Dim) -> Dim {
    if let (Dim::Known(x), Dim::Known(y)) = (a, b) {
        let r = match op {
            '+' => x.checked_add(*y),
            '-' => x.checked_sub(*y),
            '*' => x.checked_mul(*y),
            _ => None,
        };
        return r.map_or(Dim::Unknown, Dim::Known);
    }
    match (expr(a), expr(b)) {
        (Some(x), Some(y)) => to_dim(bin(op, x, y)),
        _ => Dim::Unknown,
    }
}

/// a + b.
pub fn add(a: &Dim, b: &Dim) -> Dim {
    combine('+', a, b)
}

/// a - b.
pub fn sub(a: &Dim, b: &Dim) -> Dim {
    combine('-', a, b)
}

/// a * b.
pub fn mul(a: &Dim, b: &Dim) -> Dim {
    combine('*', a, b)
}

/// a + k for a possibly negative number k.
pub fn add_int(a: &Dim, k: i64) -> Dim {
    match a {
        Dim::Known(n) => (*n as i64)
            .checked_add(k)
            .filter(|v| *v >= 0)
            .map_or(Dim::Unknown, |v| Dim::Known(v as u64)),
        _ => expr(a).map_or(Dim::Unknown, |e| to_dim(bin('+', e, num(k as f64)))),
    }
}

/// floor(a / k) or ceil(a / k) for a positive number k.
pub fn div_int(a: &Dim, k: i64, ceil: bool) -> Dim {
    if k <= 0 {
        return Dim::Unknown;
    }
    match a {
        Dim::Known(n) => Dim::Known(if ceil {
            n.div_ceil(k as u64)
        } else {
            n / k as u64
        }),
        _ => expr(a).map_or(Dim::Unknown, |e| {
            to_dim(call(
                if ceil { "ceil" } else { "floor" },
                vec![bin('/', e, num(k as f64))],
            ))
        }),
    }
}

/// The product of dims (1 for none).
pub fn product(dims: &[Dim]) -> Dim {
    dims.iter().fold(Dim::Known(1), |acc, d| mul(&acc, d))
}

/// A product split into a known coefficient and symbolic factors; None if a dim is unknown.
fn factors(dims: &[Dim]) -> Option<(u64, Vec<DimExpr>)> {
    let mut coef = 1u64;
    let mut syms = Vec::new();
    for d in dims {
        match d {
            Dim::Known(n) => coef = coef.checked_mul(*n)?,
            Dim::Sym(e) => syms.push(e.clone()),
            Dim::Unknown => return None,
        }
    }
    Some((coef, syms))
}

/// product(total) / product(parts), cancelling common symbolic factors; Unknown when a dim
/// is unknown or the known parts do not divide.
pub fn quotient(total: &[Dim], parts: &[Dim]) -> Dim {
    let (Some((tc, mut ts)), Some((pc, ps))) = (factors(total), factors(parts)) else {
        return Dim::Unknown;
    };
    let mut rest = Vec::new();
    for p in ps {
        match ts.iter().position(|t| *t == p) {
            Some(i) => {
                ts.remove(i);
            }
            None => rest.push(p),
        }
    }
    if pc == 0 {
        return Dim::Unknown;
    }
    let mut num_e = if tc % pc == 0 {
        num((tc / pc) as f64)
    } else if ts.is_empty() && rest.is_empty() {
        return Dim::Unknown;
    } else {
        bin('/', num(tc as f64), num(pc as f64))
    };
    for t in ts {
        num_e = bin('*', num_e, t);
    }
    for r in rest {
        num_e = bin('/', num_e, r);
    }
    to_dim(num_e)
}

/// The larger of two dims (numpy broadcasting of two dims that are equal or 1).
pub fn max(a: &Dim, b: &Dim) -> Dim {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => Dim::Known(*x.max(y)),
        _ => match (expr(a), expr(b)) {
            (Some(x), Some(y)) => to_dim(call("max", vec![x, y])),
            _ => Dim::Unknown,
        },
    }
}

/// Replaces bound symbols by their values.
pub fn substitute(d: &Dim, env: &HashMap<String, i64>) -> Dim {
    match d {
        Dim::Sym(e) => to_dim(subst_expr(e, env)),
        other => other.clone(),
    }
}

fn subst_expr(e: &DimExpr, env: &HashMap<String, i64>) -> DimExpr {
    match e {
        DimExpr::Sym(s) => env.get(s).map_or_else(|| e.clone(), |v| num(*v as f64)),
        DimExpr::Num(_) => e.clone(),
        DimExpr::Neg(a) => DimExpr::Neg(Box::new(subst_expr(a, env))),
        DimExpr::Bin(op, a, b) => bin(*op, subst_expr(a, env), subst_expr(b, env)),
        DimExpr::Call(f, args) => call(f, args.iter().map(|a| subst_expr(a, env)).collect()),
    }
}

/// True when the expression is an integer for integer symbols.
fn is_int(e: &DimExpr) -> bool {
    match e {
        DimExpr::Num(n) => n.fract() == 0.0,
        DimExpr::Sym(_) => true,
        DimExpr::Neg(a) => is_int(a),
        DimExpr::Bin('+' | '-' | '*' | '%', a, b) => is_int(a) && is_int(b),
        DimExpr::Bin(..) => false,
        DimExpr::Call(f, args) => match f.as_str() {
            "floor" | "ceil" => true,
            _ => args.iter().all(is_int),
        },
    }
}

/// Folds constants, combines like terms of sums and drops floor/ceil of integers.
pub fn simplify(e: DimExpr) -> DimExpr {
    use DimExpr::*;
    match e {
        Num(_) | Sym(_) => e,
        Neg(a) => match simplify(*a) {
            Num(n) => Num(-n),
            Neg(b) => *b,
            a => linear(&Neg(Box::new(a))),
        },
        Bin(op @ ('+' | '-'), a, b) => linear(&bin(op, simplify(*a), simplify(*b))),
        Bin('*', a, b) => match (simplify(*a), simplify(*b)) {
            (Num(x), Num(y)) => Num(x * y),
            (Num(z), _) | (_, Num(z)) if z == 0.0 => Num(0.0),
            (Num(o), x) | (x, Num(o)) if o == 1.0 => x,
            (x, Num(k)) => bin('*', Num(k), x),
            (x, y) => bin('*', x, y),
        },
        Bin('/', a, b) => match (simplify(*a), simplify(*b)) {
            (Num(x), Num(y)) if y != 0.0 => Num(x / y),
            (x, Num(1.0)) => x,
            (x, y) if x == y => Num(1.0),
            (x, y) => bin('/', x, y),
        },
        Bin(op, a, b) => match (simplify(*a), simplify(*b)) {
            (Num(x), Num(y)) if op == '%' && y != 0.0 => Num(x.rem_euclid(y)),
            (x, y) => bin(op, x, y),
        },
        Call(f, args) => {
            let args: Vec<DimExpr> = args.into_iter().map(simplify).collect();
            let all_num = args.iter().all(|a| matches!(a, Num(_)));
            let c = Call(f.clone(), args.clone());
            if all_num {
                if let Some(v) = c.eval(&HashMap::new()) {
                    return Num(v);
                }
            }
            match (f.as_str(), args.as_slice()) {
                ("floor" | "ceil", [x]) if is_int(x) => x.clone(),
                ("max" | "min", [x, y]) if x == y => x.clone(),
                _ => c,
            }
        }
    }
}

/// Rewrites a sum as `terms + constant` with like terms combined.
fn linear(e: &DimExpr) -> DimExpr {
    let mut terms: Vec<(DimExpr, f64)> = Vec::new();
    let mut c = 0.0;
    collect(e, 1.0, &mut terms, &mut c);
    let mut out: Option<DimExpr> = None;
    for (t, k) in terms.into_iter().filter(|(_, k)| *k != 0.0) {
        let mag = if k.abs() == 1.0 {
            t
        } else {
            bin('*', num(k.abs()), t)
        };
        out = Some(match out {
            None if k < 0.0 => DimExpr::Neg(Box::new(mag)),
            None => mag,
            Some(acc) => bin(if k < 0.0 { '-' } else { '+' }, acc, mag),
        });
    }
    match out {
        None => num(c),
        Some(acc) if c > 0.0 => bin('+', acc, num(c)),
        Some(acc) if c < 0.0 => bin('-', acc, num(-c)),
        Some(acc) => acc,
    }
}

fn collect(e: &DimExpr, sign: f64, terms: &mut Vec<(DimExpr, f64)>, c: &mut f64) {
    match e {
        DimExpr::Num(n) => *c += sign * n,
        DimExpr::Bin('+', a, b) => {
            collect(a, sign, terms, c);
            collect(b, sign, terms, c);
        }
        DimExpr::Bin('-', a, b) => {
            collect(a, sign, terms, c);
            collect(b, -sign, terms, c);
        }
        DimExpr::Neg(a) => collect(a, -sign, terms, c),
        DimExpr::Bin('*', k, x) if matches!(**k, DimExpr::Num(_)) => {
            if let DimExpr::Num(k) = **k {
                add_term(terms, x, sign * k);
            }
        }
        other => add_term(terms, other, sign),
    }
}

fn add_term(terms: &mut Vec<(DimExpr, f64)>, t: &DimExpr, k: f64) {
    match terms.iter_mut().find(|(u, _)| u == t) {
        Some((_, c)) => *c += k,
        None => terms.push((t.clone(), k)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dim {
        Dim::parse(s)
    }

    #[test]
    fn sums_cancel_and_fold() {
        let h = d("h");
        // Conv with kernel 3, pad 1, stride 1: (h + 2 - 3) / 1 + 1 = h.
        let o = add_int(&div_int(&add_int(&h, -1), 1, false), 1);
        assert_eq!(o, h);
        assert_eq!(sub(&add(&h, &Dim::Known(4)), &h), Dim::Known(4));
        let half = add_int(&div_int(&add_int(&h, -1), 2, false), 1);
        assert_eq!(half.to_string(), "{floor((h - 1) / 2) + 1}");
        let env = HashMap::from([("h".to_string(), 320)]);
        assert_eq!(substitute(&half, &env), Dim::Known(160));
    }

    #[test]
    fn quotients_cancel_symbols() {
        let (b, s) = (d("b"), d("s"));
        let total = [b.clone(), s.clone(), Dim::Known(384)];
        assert_eq!(
            quotient(&total, &[b.clone(), Dim::Known(32)]),
            mul(&Dim::Known(12), &s)
        );
        assert_eq!(quotient(&[Dim::Known(6)], &[Dim::Known(4)]), Dim::Unknown);
        assert_eq!(max(&b, &b), b);
    }
}
