//! Reductions with a whole-row kernel: the body's pattern is recognized (layer
//! normalization and softmax, as lowering writes them), the row's inputs are evaluated into
//! row buffers by the interpreter (any prologue fuses as before), and the kernel table's
//! row kernel computes the result in a few passes over the row in cache.

use smelt_ir::kernel::check as validate;
use smelt_ir::kernel::{Binary, Combine, Reduction, ScalarOp, Unary};

/// A recognized row computation; the `usize`s are op indices of the body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RowKernel {
    /// `(x - mean) / sqrt(var + eps) * g + b`.
    LayerNorm {
        x: usize,
        g: Option<usize>,
        b: Option<usize>,
        eps: f32,
    },
    /// `exp(x - max) / sum`.
    Softmax { x: usize },
}

impl RowKernel {
    /// The ops whose values the kernel reads per element.
    pub(crate) fn inputs(&self) -> Vec<usize> {
        match self {
            RowKernel::LayerNorm { x, g, b, .. } => {
                let mut v = vec![*x];
                v.extend(g.iter().chain(b.iter()).copied());
                v
            }
            RowKernel::Softmax { x } => vec![*x],
        }
    }
}

/// The pattern of a reduction's body, if it is one the row kernels compute (and the
/// reduction has exactly one store, per element, of its result).
pub(crate) fn recognize(r: &Reduction, row_len: usize) -> Option<RowKernel> {
    let l = &r.body;
    let [store] = l.stores.as_slice() else {
        return None;
    };
    if store.per_row || r.stages.len() != 2 || row_len == 0 {
        return None;
    }
    let ops = &l.ops;
    let op = |i: usize| ops.get(i).copied();
    // Whether an op's value is free of reduction results (a per-element input).
    let free = |i: usize| {
        validate::deps(ops, &[i])
            .iter()
            .all(|&j| !matches!(ops[j], ScalarOp::Reduced(_)))
    };
    // `Binary(f, a, b)` in either operand order: the operand matching `pick`, then the other.
    let either = |i: usize, f: Binary, pick: &dyn Fn(usize) -> bool| -> Option<(usize, usize)> {
        match op(i)? {
            ScalarOp::Binary(g, a, b) if g == f => {
                if pick(a) {
                    Some((a, b))
                } else if pick(b) {
                    Some((b, a))
                } else {
                    None
                }
            }
            _ => None,
        }
    };
    let is_const = |i: usize, want: Option<f32>| match op(i) {
        Some(ScalarOp::Const(c)) => want.is_none_or(|w| (c - w).abs() <= 1e-6 * w.abs()),
        _ => false,
    };
    let inv_n = 1.0 / row_len as f32;
    let reduced_scaled = |i: usize, k: usize| -> bool {
        either(i, Binary::Mul, &|a| op(a) == Some(ScalarOp::Reduced(k)))
            .is_some_and(|(_, c)| is_const(c, Some(inv_n)))
    };
    let (s0, s1) = (&r.stages[0], &r.stages[1]);
    // Softmax: exp(x - Reduced(0)) / Reduced(1), stage 0 the max of x, stage 1 the sum.
    if let Some(ScalarOp::Binary(Binary::Div, e, sum)) = op(store.value) {
        if op(sum) == Some(ScalarOp::Reduced(1))
            && s0.combine == Combine::Max
            && s1.combine == Combine::Sum
            && s1.value == e
        {
            if let Some(ScalarOp::Unary(Unary::Exp, d)) = op(e) {
                if let Some(ScalarOp::Binary(Binary::Sub, x, m)) = op(d) {
                    if op(m) == Some(ScalarOp::Reduced(0)) && s0.value == x && free(x) {
                        return Some(RowKernel::Softmax { x });
                    }
                }
            }
        }
        return None;
    }
    // Layer norm: ((x - mean) * rsqrt(var + eps)) * g + b.
    if s0.combine != Combine::Sum || s1.combine != Combine::Sum {
        return None;
    }
    let is_norm = |i: usize| {
        either(i, Binary::Mul, &|a| {
            matches!(op(a), Some(ScalarOp::Unary(Unary::Rsqrt, _)))
        })
        .is_some()
    };
    let (scaled, b) = match either(store.value, Binary::Add, &|a| {
        either(a, Binary::Mul, &|m| is_norm(m)).is_some() || is_norm(a)
    }) {
        Some((s, b)) => (s, Some(b)),
        None => (store.value, None),
    };
    let (nrm, g) = match either(scaled, Binary::Mul, &|m| is_norm(m)) {
        Some((n, g)) if is_norm(n) => (n, Some(g)),
        _ if is_norm(scaled) => (scaled, None),
        _ => return None,
    };
    let (inv, d) = either(nrm, Binary::Mul, &|a| {
        matches!(op(a), Some(ScalarOp::Unary(Unary::Rsqrt, _)))
    })?;
    let Some(ScalarOp::Unary(Unary::Rsqrt, ve)) = op(inv) else {
        return None;
    };
    let (var, eps) = either(ve, Binary::Add, &|a| reduced_scaled(a, 1))?;
    let _ = var;
    let Some(ScalarOp::Const(eps)) = op(eps) else {
        return None;
    };
    let Some(ScalarOp::Binary(Binary::Sub, x, mean)) = op(d) else {
        return None;
    };
    let d2_ok =
        matches!(op(s1.value), Some(ScalarOp::Binary(Binary::Mul, a, b2)) if a == d && b2 == d);
    let ok = reduced_scaled(mean, 0)
        && s0.value == x
        && d2_ok
        && free(x)
        && g.is_none_or(free)
        && b.is_none_or(free);
    ok.then_some(RowKernel::LayerNorm { x, g, b, eps })
}

#[cfg(test)]
mod tests {
    use super::*;
    use smelt_ir::kernel::BufferId;
    use smelt_ir::kernel::{Loop, Stage, Store, TensorRef};
    use ScalarOp as S;

    fn reduction(ops: Vec<ScalarOp>, value: usize, stages: Vec<Stage>) -> Reduction {
        let t = TensorRef::dense(BufferId(0), &[2, 4]);
        Reduction {
            body: Loop {
                shape: vec![2, 4],
                loads: vec![t.clone(), t.clone(), t.clone()],
                ops,
                stores: vec![Store {
                    value,
                    dst: t,
                    per_row: false,
                }],
            },
            reduce_from: 1,
            stages,
        }
    }

    #[test]
    fn layer_norm_and_softmax_are_recognized_and_others_are_not() {
        let ln = vec![
            S::Const(0.25),
            S::Load(0),
            S::Reduced(0),
            S::Binary(Binary::Mul, 2, 0),
            S::Binary(Binary::Sub, 1, 3),
            S::Binary(Binary::Mul, 4, 4),
            S::Reduced(1),
            S::Binary(Binary::Mul, 6, 0),
            S::Const(1e-5),
            S::Binary(Binary::Add, 7, 8),
            S::Unary(Unary::Rsqrt, 9),
            S::Binary(Binary::Mul, 4, 10),
            S::Load(1),
            S::Binary(Binary::Mul, 11, 12),
            S::Load(2),
            S::Binary(Binary::Add, 13, 14),
        ];
        let stages = vec![
            Stage {
                combine: Combine::Sum,
                value: 1,
            },
            Stage {
                combine: Combine::Sum,
                value: 5,
            },
        ];
        let r = reduction(ln.clone(), 15, stages.clone());
        assert_eq!(
            recognize(&r, 4),
            Some(RowKernel::LayerNorm {
                x: 1,
                g: Some(12),
                b: Some(14),
                eps: 1e-5
            })
        );
        // Another row length (the 1/n constant no longer matches): not a layer norm.
        assert_eq!(recognize(&r, 8), None);
        // Without the bias.
        assert_eq!(
            recognize(&reduction(ln.clone(), 13, stages.clone()), 4),
            Some(RowKernel::LayerNorm {
                x: 1,
                g: Some(12),
                b: None,
                eps: 1e-5
            })
        );
        let sm = vec![
            S::Load(0),
            S::Reduced(0),
            S::Binary(Binary::Sub, 0, 1),
            S::Unary(Unary::Exp, 2),
            S::Reduced(1),
            S::Binary(Binary::Div, 3, 4),
        ];
        let st = vec![
            Stage {
                combine: Combine::Max,
                value: 0,
            },
            Stage {
                combine: Combine::Sum,
                value: 3,
            },
        ];
        assert_eq!(
            recognize(&reduction(sm.clone(), 5, st.clone()), 4),
            Some(RowKernel::Softmax { x: 0 })
        );
        // Max then product: not softmax.
        let st2 = vec![
            st[0],
            Stage {
                combine: Combine::Prod,
                value: 3,
            },
        ];
        assert_eq!(recognize(&reduction(sm, 5, st2), 4), None);
    }
}
