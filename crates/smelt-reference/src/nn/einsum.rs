//! Einsum by index loops (f64 for floats, wrapping i64 for integers), with ellipsis broadcasting.

use super::gemm::{dgemm, sgemm};
use super::matmul::{kind_of, Kind};
use crate::{one, Inputs};
use smelt_ir::{bail, ensure, numel, Result, Tensor, Value};

/// Labels: letters are their char code; ellipsis dimensions are 1000 + position from the right.
type Label = u32;

fn parse_term(term: &str, rank: Option<usize>, ell_rank: &mut usize) -> Result<Vec<Label>> {
    let term = term.trim();
    let letters = term.chars().filter(|c| c.is_ascii_alphabetic()).count();
    let has_ell = term.contains("...");
    ensure!(
        term.matches("...").count() <= 1,
        InvalidModel,
        "einsum term '{term}' has several ellipses"
    );
    let ell = if has_ell {
        match rank {
            Some(r) => {
                ensure!(
                    r >= letters,
                    InvalidModel,
                    "einsum term '{term}' has more labels than the operand's rank {r}"
                );
                r - letters
            }
            None => *ell_rank,
        }
    } else {
        0
    };
    if rank.is_some() {
        *ell_rank = (*ell_rank).max(ell);
        if !has_ell {
            ensure!(
                rank == Some(letters),
                InvalidModel,
                "einsum term '{term}' does not match the operand's rank {}",
                rank.unwrap_or(0)
            );
        }
    }
    let mut out = Vec::new();
    let mut rest = term;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("...") {
            for i in (0..ell).rev() {
                out.push(1000 + i as u32);
            }
            rest = r;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        ensure!(
            c.is_ascii_alphabetic() || c == ' ',
            InvalidModel,
            "invalid character '{c}' in einsum equation"
        );
        if c != ' ' {
            out.push(c as u32);
        }
        rest = &rest[c.len_utf8()..];
    }
    Ok(out)
}

/// Einsum.
pub fn einsum(equation: &str, x: &Inputs) -> Result<Vec<Value>> {
    let ops: Vec<&Tensor> = (0..x.len()).map(|i| x.tensor(i)).collect::<Result<_>>()?;
    ensure!(
        !ops.is_empty(),
        InvalidModel,
        "Einsum needs at least one input"
    );
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    ensure!(
        terms.len() == ops.len(),
        InvalidModel,
        "Einsum equation has {} operands, got {} inputs",
        terms.len(),
        ops.len()
    );
    let mut ell_rank = 0;
    let mut labels = Vec::new();
    for (t, o) in terms.iter().zip(&ops) {
        labels.push(parse_term(t, Some(o.rank()), &mut ell_rank)?);
    }
    // Sizes per label (ellipsis dims broadcast).
    let mut sizes: std::collections::BTreeMap<Label, usize> = Default::default();
    for (ls, o) in labels.iter().zip(&ops) {
        for (&l, &d) in ls.iter().zip(o.shape()) {
            let e = sizes.entry(l).or_insert(d);
            if *e != d {
                if *e == 1 && l >= 1000 {
                    *e = d;
                } else if !(d == 1 && l >= 1000) {
                    bail!(
                        InvalidModel,
                        "Einsum label dimension mismatch: {} vs {d}",
                        *e
                    );
                }
            }
        }
    }
    let out_labels: Vec<Label> = match rhs {
        Some(r) => parse_term(r, None, &mut ell_rank)?,
        None => {
            let mut v: Vec<Label> = (0..ell_rank).rev().map(|i| 1000 + i as u32).collect();
            let mut letters: Vec<Label> = Vec::new();
            for ls in &labels {
                for &l in ls.iter().filter(|&&l| l < 1000) {
                    letters.push(l);
                }
            }
            let mut once: Vec<Label> = letters
                .iter()
                .copied()
                .filter(|l| letters.iter().filter(|m| *m == l).count() == 1)
                .collect();
            once.sort();
            v.extend(once);
            v
        }
    };
    for (i, l) in out_labels.iter().enumerate() {
        ensure!(
            !out_labels[..i].contains(l),
            InvalidModel,
            "Einsum output repeats a label"
        );
        ensure!(
            sizes.contains_key(l),
            InvalidModel,
            "Einsum output label '{}' is not in any input",
            char::from_u32(*l).unwrap_or('?')
        );
    }
    if let Some(t) = as_matmul(&ops, &labels, &out_labels, &sizes)? {
        return one(t);
    }
    let sum_labels: Vec<Label> = sizes
        .keys()
        .copied()
        .filter(|l| !out_labels.contains(l))
        .collect();
    let all: Vec<Label> = out_labels.iter().chain(&sum_labels).copied().collect();
    let dims: Vec<usize> = all.iter().map(|l| sizes[l]).collect();
    // Stride of each loop label in each operand (0 when broadcast or absent).
    let strides: Vec<Vec<usize>> = labels
        .iter()
        .zip(&ops)
        .map(|(ls, o)| {
            let st = smelt_ir::strides(o.shape());
            all.iter()
                .map(|l| {
                    ls.iter()
                        .enumerate()
                        .filter(|(_, m)| *m == l)
                        .map(|(i, _)| if o.shape()[i] == 1 { 0 } else { st[i] })
                        .sum()
                })
                .collect()
        })
        .collect();
    let out_shape: Vec<usize> = out_labels.iter().map(|l| sizes[l]).collect();
    let n_out = numel(&out_shape)?;
    let n_sum = numel(&dims[out_labels.len()..])?;
    let kind = kind_of(ops[0].dtype())?;
    let nl = all.len();
    let mut idx = vec![0usize; nl];
    let mut offs = vec![0usize; ops.len()];
    if kind == Kind::I64 {
        let vals: Vec<Vec<i64>> = ops.iter().map(|o| o.to_i64()).collect::<Result<_>>()?;
        let mut out: Vec<i64> = crate::zeroed(&[n_out], "Einsum's output")?;
        for o in out.iter_mut() {
            for _ in 0..n_sum {
                let mut p = 1i64;
                for (k, v) in vals.iter().enumerate() {
                    p = p.wrapping_mul(v[offs[k]]);
                }
                *o = o.wrapping_add(p);
                step(&mut idx, &dims, &strides, &mut offs);
            }
        }
        one(Tensor::from_i64(ops[0].dtype(), out_shape, &out)?)
    } else {
        let vals: Vec<Vec<f64>> = ops.iter().map(|o| o.to_f64()).collect::<Result<_>>()?;
        let mut out: Vec<f64> = crate::zeroed(&[n_out], "Einsum's output")?;
        for o in out.iter_mut() {
            for _ in 0..n_sum {
                let mut p = 1f64;
                for (k, v) in vals.iter().enumerate() {
                    p *= v[offs[k]];
                }
                *o += p;
                step(&mut idx, &dims, &strides, &mut offs);
            }
        }
        one(Tensor::from_f64(ops[0].dtype(), out_shape, &out)?)
    }
}

/// Advances the loop counter (last label fastest) and the operand offsets.
fn step(idx: &mut [usize], dims: &[usize], strides: &[Vec<usize>], offs: &mut [usize]) {
    for d in (0..idx.len()).rev() {
        idx[d] += 1;
        for (o, st) in offs.iter_mut().zip(strides) {
            *o += st[d];
        }
        if idx[d] < dims[d] {
            return;
        }
        for (o, st) in offs.iter_mut().zip(strides) {
            *o -= st[d] * idx[d];
        }
        idx[d] = 0;
    }
}

/// Two float operands with distinct labels per term, no broadcasting and every summed label
/// in both operands: a batched matrix product of permuted copies. None when not that shape.
fn as_matmul(
    ops: &[&Tensor],
    labels: &[Vec<Label>],
    out: &[Label],
    sizes: &std::collections::BTreeMap<Label, usize>,
) -> Result<Option<Tensor>> {
    if ops.len() != 2 || kind_of(ops[0].dtype())? == Kind::I64 || ops[0].dtype() != ops[1].dtype() {
        return Ok(None);
    }
    let (la, lb) = (&labels[0], &labels[1]);
    for (ls, o) in labels.iter().zip(ops) {
        for (i, l) in ls.iter().enumerate() {
            if ls[..i].contains(l) || o.shape()[i] != sizes[l] {
                return Ok(None);
            }
        }
    }
    let batch: Vec<Label> = out
        .iter()
        .copied()
        .filter(|l| la.contains(l) && lb.contains(l))
        .collect();
    let ml: Vec<Label> = out
        .iter()
        .copied()
        .filter(|l| la.contains(l) && !lb.contains(l))
        .collect();
    let nl: Vec<Label> = out
        .iter()
        .copied()
        .filter(|l| lb.contains(l) && !la.contains(l))
        .collect();
    let kl: Vec<Label> = la
        .iter()
        .copied()
        .filter(|l| lb.contains(l) && !out.contains(l))
        .collect();
    if batch.len() + ml.len() + kl.len() != la.len()
        || batch.len() + nl.len() + kl.len() != lb.len()
    {
        return Ok(None);
    }
    let size = |ls: &[Label]| ls.iter().map(|l| sizes[l]).product::<usize>();
    let (nb, m, n, k) = (size(&batch), size(&ml), size(&nl), size(&kl));
    let order_a: Vec<Label> = batch.iter().chain(&ml).chain(&kl).copied().collect();
    let order_b: Vec<Label> = batch.iter().chain(&kl).chain(&nl).copied().collect();
    let mid: Vec<Label> = batch.iter().chain(&ml).chain(&nl).copied().collect();
    let perm_of = |from: &[Label], to: &[Label]| -> Vec<usize> {
        to.iter()
            .map(|l| from.iter().position(|m| m == l).unwrap_or(0))
            .collect()
    };
    let mid_shape: Vec<usize> = mid.iter().map(|l| sizes[l]).collect();
    let out_shape: Vec<usize> = out.iter().map(|l| sizes[l]).collect();
    let dt = ops[0].dtype();
    if dt == smelt_ir::DType::F32 {
        let (Some(av), Some(bv)) = (ops[0].as_f32(), ops[1].as_f32()) else {
            return Ok(None);
        };
        let a = permute(av, ops[0].shape(), &perm_of(la, &order_a));
        let b = permute(bv, ops[1].shape(), &perm_of(lb, &order_b));
        let mut c: Vec<f32> = crate::zeroed(&[nb, m, n], "Einsum's product")?;
        for i in 0..nb {
            let (ai, bi) = (
                &a[i * m * k..(i + 1) * m * k],
                &b[i * k * n..(i + 1) * k * n],
            );
            sgemm(
                m,
                n,
                k,
                ai,
                k,
                bi,
                n,
                &mut c[i * m * n..(i + 1) * m * n],
                n,
                false,
            );
        }
        let y = permute(&c, &mid_shape, &perm_of(&mid, out));
        return Ok(Some(Tensor::from_f32(out_shape, y)?));
    }
    let a = permute(&ops[0].to_f64()?, ops[0].shape(), &perm_of(la, &order_a));
    let b = permute(&ops[1].to_f64()?, ops[1].shape(), &perm_of(lb, &order_b));
    let mut c: Vec<f64> = crate::zeroed(&[nb, m, n], "Einsum's product")?;
    for i in 0..nb {
        let (ai, bi) = (
            &a[i * m * k..(i + 1) * m * k],
            &b[i * k * n..(i + 1) * k * n],
        );
        dgemm(m, n, k, ai, bi, &mut c[i * m * n..(i + 1) * m * n]);
    }
    let y = permute(&c, &mid_shape, &perm_of(&mid, out));
    Ok(Some(Tensor::from_f64(dt, out_shape, &y)?))
}

/// Copies `v` (of `shape`) into the axis order `perm` (target axis i reads source axis perm[i]).
fn permute<T: Copy>(v: &[T], shape: &[usize], perm: &[usize]) -> Vec<T> {
    let st = smelt_ir::strides(shape);
    let dims: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let src_st: Vec<Vec<usize>> = vec![perm.iter().map(|&p| st[p]).collect()];
    let n: usize = smelt_ir::dims_product(&dims);
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; dims.len()];
    let mut off = vec![0usize];
    for _ in 0..n {
        out.push(v[off[0]]);
        step(&mut idx, &dims, &src_st, &mut off);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_transposes() {
        // [[0, 1, 2], [3, 4, 5]] transposed.
        let v: Vec<i32> = (0..6).collect();
        assert_eq!(permute(&v, &[2, 3], &[1, 0]), vec![0, 3, 1, 4, 2, 5]);
    }
}
