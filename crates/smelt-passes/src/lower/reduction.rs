//! Reductions written as row stages plus per-element or per-row results: softmax,
//! log-softmax, layer and RMS normalization, Reduce* over constant axes, global pooling.

use super::pointwise::Body;
use smelt_ir::kernel::{Binary, Combine, ScalarOp, Stage, Unary};
use smelt_ir::op::{NnOp, ReduceOp};
use smelt_ir::{Graph, Node, Op, Tensor, ValueId};
use std::collections::HashMap;

/// The reduced axes of a reduction node and whether its result is per element.
pub struct Form {
    /// Reduced axes of the main input, ascending.
    pub axes: Vec<usize>,
    /// True when the output has the input's shape (softmax, normalization).
    pub per_element: bool,
}

/// Recognizes a reduction node the fused executor handles, on an input of rank `r`.
pub fn form(g: &Graph, n: &Node, consts: &HashMap<ValueId, &Tensor>, r: usize) -> Option<Form> {
    let norm = |a: i64| {
        usize::try_from(if a < 0 { a + r as i64 } else { a })
            .ok()
            .filter(|&a| a < r)
    };
    let used_outputs = n.outputs.iter().skip(1).all(|o| o.is_none());
    if !used_outputs || r == 0 {
        return None;
    }
    // The data inputs (not Reduce axes) must be f32.
    let data_inputs = match &n.op {
        Op::Reduce(_) => 1,
        _ => n.inputs.len(),
    };
    let f32_io = n
        .inputs
        .iter()
        .take(data_inputs)
        .flatten()
        .all(|&v| super::dtype_of(g, v) == Some(smelt_ir::DType::F32))
        && super::dtype_of(g, n.outputs[0]?) == Some(smelt_ir::DType::F32);
    if !f32_io {
        return None;
    }
    let (axes, per_element) = match &n.op {
        Op::Reduce(
            ReduceOp::Softmax { axis, coerce_2d } | ReduceOp::LogSoftmax { axis, coerce_2d },
        ) => {
            let a = norm(*axis)?;
            let axes = if *coerce_2d {
                (a..r).collect()
            } else {
                vec![a]
            };
            (axes, true)
        }
        Op::Nn(NnOp::LayerNormalization { axis, .. } | NnOp::RmsNormalization { axis, .. }) => {
            ((norm(*axis)?..r).collect(), true)
        }
        Op::Nn(NnOp::GlobalAveragePool | NnOp::GlobalMaxPool) if r >= 2 => {
            ((2..r).collect(), false)
        }
        Op::Reduce(op) => {
            let red = op.reduction()?;
            let axes = match &red.axes {
                Some(a) => a.clone(),
                None => match n.inputs.get(1).copied().flatten() {
                    Some(v) => consts.get(&v)?.to_i64().ok()?,
                    None => Vec::new(),
                },
            };
            let mut axes: Vec<usize> = if axes.is_empty() {
                if red.noop_with_empty_axes {
                    return None;
                }
                (0..r).collect()
            } else {
                axes.iter().map(|&a| norm(a)).collect::<Option<_>>()?
            };
            axes.sort_unstable();
            axes.dedup();
            (axes, false)
        }
        _ => return None,
    };
    Some(Form { axes, per_element })
}

/// Emits the stages and the result of a reduction node whose main input is the
/// instruction `x`; `arg(i)` loads input `i`. `n` is the number of reduced elements.
/// Returns the result instruction.
pub fn emit(
    op: &Op,
    x: usize,
    arg: &mut dyn FnMut(usize, &mut Body) -> Option<usize>,
    count: usize,
    b: &mut Body,
    stages: &mut Vec<Stage>,
) -> Option<usize> {
    let stage = |b: &mut Body, stages: &mut Vec<Stage>, combine, value| {
        stages.push(Stage { combine, value });
        b.push(ScalarOp::Reduced(stages.len() - 1))
    };
    let inv_n = b.push(ScalarOp::Const(1.0 / count as f32));
    let bin = |b: &mut Body, f, x, y| b.push(ScalarOp::Binary(f, x, y));
    let un = |b: &mut Body, f, x| b.push(ScalarOp::Unary(f, x));
    Some(match op {
        Op::Reduce(ReduceOp::Softmax { .. } | ReduceOp::LogSoftmax { .. }) => {
            let m = stage(b, stages, Combine::Max, x);
            let d = bin(b, Binary::Sub, x, m);
            let e = un(b, Unary::Exp, d);
            let s = stage(b, stages, Combine::Sum, e);
            if matches!(op, Op::Reduce(ReduceOp::Softmax { .. })) {
                bin(b, Binary::Div, e, s)
            } else {
                let l = un(b, Unary::Log, s);
                bin(b, Binary::Sub, d, l)
            }
        }
        Op::Nn(NnOp::LayerNormalization { epsilon, .. }) => {
            let s = stage(b, stages, Combine::Sum, x);
            let mean = bin(b, Binary::Mul, s, inv_n);
            let d = bin(b, Binary::Sub, x, mean);
            let d2 = bin(b, Binary::Mul, d, d);
            let v = stage(b, stages, Combine::Sum, d2);
            let var = bin(b, Binary::Mul, v, inv_n);
            let eps = b.push(ScalarOp::Const(*epsilon));
            let ve = bin(b, Binary::Add, var, eps);
            // One reciprocal square root per row, then a product per element.
            let inv = un(b, Unary::Rsqrt, ve);
            let nrm = bin(b, Binary::Mul, d, inv);
            let sc = arg(1, b)?;
            let scaled = bin(b, Binary::Mul, nrm, sc);
            match arg(2, b) {
                Some(bias) => bin(b, Binary::Add, scaled, bias),
                None => scaled,
            }
        }
        Op::Nn(NnOp::RmsNormalization { epsilon, .. }) => {
            let x2 = bin(b, Binary::Mul, x, x);
            let s = stage(b, stages, Combine::Sum, x2);
            let ms = bin(b, Binary::Mul, s, inv_n);
            let eps = b.push(ScalarOp::Const(*epsilon));
            let me = bin(b, Binary::Add, ms, eps);
            let inv = un(b, Unary::Rsqrt, me);
            let nrm = bin(b, Binary::Mul, x, inv);
            let sc = arg(1, b)?;
            bin(b, Binary::Mul, nrm, sc)
        }
        Op::Nn(NnOp::GlobalAveragePool) => {
            let s = stage(b, stages, Combine::Sum, x);
            bin(b, Binary::Mul, s, inv_n)
        }
        Op::Nn(NnOp::GlobalMaxPool) => stage(b, stages, Combine::Max, x),
        Op::Reduce(r) => match r {
            ReduceOp::ReduceSum(_) => stage(b, stages, Combine::Sum, x),
            ReduceOp::ReduceMean(_) => {
                let s = stage(b, stages, Combine::Sum, x);
                bin(b, Binary::Mul, s, inv_n)
            }
            ReduceOp::ReduceMax(_) => stage(b, stages, Combine::Max, x),
            ReduceOp::ReduceMin(_) => stage(b, stages, Combine::Min, x),
            ReduceOp::ReduceProd(_) => stage(b, stages, Combine::Prod, x),
            ReduceOp::ReduceL1(_) => {
                let a = un(b, Unary::Abs, x);
                stage(b, stages, Combine::Sum, a)
            }
            ReduceOp::ReduceL2(_) | ReduceOp::ReduceSumSquare(_) => {
                let x2 = bin(b, Binary::Mul, x, x);
                let s = stage(b, stages, Combine::Sum, x2);
                if matches!(r, ReduceOp::ReduceL2(_)) {
                    un(b, Unary::Sqrt, s)
                } else {
                    s
                }
            }
            ReduceOp::ReduceLogSum(_) => {
                let s = stage(b, stages, Combine::Sum, x);
                un(b, Unary::Log, s)
            }
            ReduceOp::ReduceLogSumExp(_) => {
                let m = stage(b, stages, Combine::Max, x);
                let d = bin(b, Binary::Sub, x, m);
                let e = un(b, Unary::Exp, d);
                let s = stage(b, stages, Combine::Sum, e);
                let l = un(b, Unary::Log, s);
                bin(b, Binary::Add, m, l)
            }
            _ => return None,
        },
        _ => return None,
    })
}
