//! Elementwise ops written as scalar-op programs (the body of fused loops).

use smelt_ir::kernel::{Binary, ScalarOp, Unary};
use smelt_ir::op::elementwise::GeluApprox;
use smelt_ir::op::{ElementwiseOp, NnOp, QuantOp};
use smelt_ir::{DType, Graph, Node, Op};

/// A scalar program under construction.
#[derive(Debug, Clone, Default)]
pub struct Body {
    /// The instructions.
    pub ops: Vec<ScalarOp>,
}

impl Body {
    /// Appends an instruction; returns its index.
    pub fn push(&mut self, op: ScalarOp) -> usize {
        self.ops.push(op);
        self.ops.len() - 1
    }
    fn k(&mut self, c: f32) -> usize {
        self.push(ScalarOp::Const(c))
    }
    fn u(&mut self, f: Unary, a: usize) -> usize {
        self.push(ScalarOp::Unary(f, a))
    }
    fn b(&mut self, f: Binary, a: usize, b: usize) -> usize {
        self.push(ScalarOp::Binary(f, a, b))
    }
    fn sel(&mut self, c: usize, a: usize, b: usize) -> usize {
        self.push(ScalarOp::Select(c, a, b))
    }
    /// e^x - 1 scaled by alpha.
    fn exp_m1_scaled(&mut self, x: usize, alpha: f32) -> usize {
        let e = self.u(Unary::Exp, x);
        let one = self.k(1.0);
        let d = self.b(Binary::Sub, e, one);
        let a = self.k(alpha);
        self.b(Binary::Mul, a, d)
    }
    /// max(lo, min(hi, x)).
    fn clamp(&mut self, x: usize, lo: f32, hi: f32) -> usize {
        let h = self.k(hi);
        let m = self.b(Binary::Min, x, h);
        let l = self.k(lo);
        self.b(Binary::Max, m, l)
    }
}

/// Why a node cannot join a fused loop, or None when it can.
pub fn unfusible_reason(g: &Graph, n: &Node) -> Option<String> {
    let dt = |v: Option<smelt_ir::ValueId>| v.and_then(|v| super::dtype_of(g, v));
    if n.outputs.len() != 1 || n.outputs[0].is_none() {
        return Some("has more than one output".into());
    }
    let out = dt(n.outputs[0]);
    let ins: Vec<Option<DType>> = n.inputs.iter().map(|&i| dt(i)).collect();
    let f32_in = |i: usize| ins.get(i).copied().flatten() == Some(DType::F32);
    let all_f32 = n
        .inputs
        .iter()
        .enumerate()
        .all(|(i, v)| v.is_none() || f32_in(i));
    // Every input must broadcast numpy-style onto the output (older opsets had other rules).
    let out_shape = n.outputs[0].and_then(|o| super::shape_of_value(g, o));
    let bn = matches!(n.op, Op::Nn(NnOp::BatchNormalization { .. }));
    for (k, v) in n.inputs.iter().enumerate() {
        let (Some(v), Some(os)) = (v, &out_shape) else {
            continue;
        };
        let Some(s) = super::shape_of_value(g, *v) else {
            return Some("an input has no known shape".into());
        };
        let fits = if bn && k > 0 {
            s.len() == 1 && os.len() >= 2 && s[0] == os[1]
        } else {
            s.len() <= os.len()
                && s.iter()
                    .rev()
                    .zip(os.iter().rev())
                    .all(|(&a, &b)| a == b || a == 1)
        };
        if !fits {
            return Some(format!(
                "input {k} of shape {s:?} does not broadcast to {os:?}"
            ));
        }
    }
    let ok = match &n.op {
        Op::Elementwise(e) => match e {
            ElementwiseOp::Cast { to: DType::F32, .. } => {
                matches!(ins.first().copied().flatten(), Some(d) if d.is_int() || d == DType::F32 || d == DType::Bool || d == DType::F16 || d == DType::BF16)
            }
            ElementwiseOp::Equal
            | ElementwiseOp::Less
            | ElementwiseOp::LessOrEqual
            | ElementwiseOp::Greater
            | ElementwiseOp::GreaterOrEqual => all_f32 && out == Some(DType::Bool),
            ElementwiseOp::And | ElementwiseOp::Or | ElementwiseOp::Not => {
                out == Some(DType::Bool) && ins.iter().all(|d| *d == Some(DType::Bool))
            }
            ElementwiseOp::Where => {
                ins.first().copied().flatten() == Some(DType::Bool)
                    && f32_in(1)
                    && f32_in(2)
                    && out == Some(DType::F32)
            }
            ElementwiseOp::IsNaN => f32_in(0) && out == Some(DType::Bool),
            other => all_f32 && out == Some(DType::F32) && supported(other),
        },
        Op::Nn(NnOp::BatchNormalization {
            training_mode: false,
            ..
        }) => all_f32 && out == Some(DType::F32) && n.inputs.len() == 5,
        Op::Quant(q) => return quant_unfusible_reason(g, n, q, &ins, out),
        _ => return Some(format!("{} is not elementwise", n.op.name())),
    };
    (!ok).then(|| {
        format!(
            "{} on these types ({}) has no fused form",
            n.op.name(),
            ins.iter()
                .map(|d| d.map_or("?".to_string(), |d| d.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Why a QuantizeLinear or DequantizeLinear cannot join a fused loop: it can with 8-bit
/// integers, f32 values, and a scale and zero point per tensor or along the last axis
/// (which broadcast like any elementwise input).
fn quant_unfusible_reason(
    g: &Graph,
    n: &Node,
    q: &QuantOp,
    ins: &[Option<DType>],
    out: Option<DType>,
) -> Option<String> {
    let int8 = |d: Option<DType>| matches!(d, Some(DType::U8 | DType::I8));
    let f32_or_absent = |i: usize| matches!(ins.get(i).copied().flatten(), None | Some(DType::F32));
    let (axis, ok) = match q {
        QuantOp::QuantizeLinear {
            axis,
            block_size: 0,
            precision: None | Some(DType::F32),
            ..
        } => (
            *axis,
            ins.first().copied().flatten() == Some(DType::F32)
                && f32_or_absent(1)
                && int8(out)
                && (n.inputs.get(2).copied().flatten().is_none()
                    || ins.get(2).copied().flatten() == out),
        ),
        QuantOp::DequantizeLinear {
            axis,
            block_size: 0,
            output_dtype: None | Some(DType::F32),
        } => (
            *axis,
            int8(ins.first().copied().flatten())
                && f32_or_absent(1)
                && out == Some(DType::F32)
                && (n.inputs.get(2).copied().flatten().is_none()
                    || ins.get(2).copied().flatten() == ins.first().copied().flatten()),
        ),
        _ => return Some(format!("{} is not elementwise", n.op.name())),
    };
    // A per-axis scale broadcasts numpy-style only along the last axis.
    let rank = n.outputs[0]
        .and_then(|o| super::shape_of_value(g, o))
        .map_or(0, |s| s.len()) as i64;
    let per_axis = n.inputs[1..]
        .iter()
        .flatten()
        .any(|v| super::shape_of_value(g, *v).is_none_or(|s| s.iter().product::<usize>() > 1));
    let last = axis == rank - 1 || axis == -1;
    if !ok {
        return Some(format!(
            "{} on these types has no fused form (8-bit integers and f32 only)",
            n.op.name()
        ));
    }
    (per_axis && !last).then(|| {
        format!(
            "{} along axis {axis} (not the last) has no fused form",
            n.op.name()
        )
    })
}

fn supported(op: &ElementwiseOp) -> bool {
    use ElementwiseOp::*;
    matches!(
        op,
        Abs | Neg
            | Exp
            | Log
            | Sqrt
            | Reciprocal
            | Floor
            | Ceil
            | Round
            | Sign
            | Erf
            | Sin
            | Cos
            | Relu
            | LeakyRelu { .. }
            | PRelu
            | Elu { .. }
            | Selu { .. }
            | Celu { .. }
            | Sigmoid
            | HardSigmoid { .. }
            | HardSwish
            | Tanh
            | Softplus
            | Softsign
            | Mish
            | Swish { .. }
            | Gelu { .. }
            | Add
            | Sub
            | Mul
            | Div
            | Pow
            | Sum
            | Mean
            | Max
            | Min
            | Clip { .. }
    )
}

/// Emits `op` on the operand instructions `a` (None for an absent optional input);
/// returns the result's instruction.
pub fn emit(op: &Op, a: &[Option<usize>], b: &mut Body) -> Option<usize> {
    use ElementwiseOp as E;
    let x = (*a.first()?)?;
    let arg = |i: usize| a.get(i).copied().flatten();
    if let Op::Nn(NnOp::BatchNormalization { epsilon, .. }) = op {
        // (x - mean) / sqrt(var + eps) * scale + bias, inputs x, scale, bias, mean, var.
        let (s, bias, m, v) = (arg(1)?, arg(2)?, arg(3)?, arg(4)?);
        let eps = b.k(*epsilon);
        let ve = b.b(Binary::Add, v, eps);
        let sd = b.u(Unary::Sqrt, ve);
        let d = b.b(Binary::Sub, x, m);
        let n = b.b(Binary::Div, d, sd);
        let sc = b.b(Binary::Mul, n, s);
        return Some(b.b(Binary::Add, sc, bias));
    }
    match op {
        Op::Quant(QuantOp::QuantizeLinear { output_dtype, .. }) => {
            // saturate(round_half_even(x / scale) + zero_point), zero point's range.
            let s = arg(1)?;
            let v = b.b(Binary::Div, x, s);
            let mut r = b.u(Unary::Round, v);
            if let Some(z) = arg(2) {
                r = b.b(Binary::Add, r, z);
            }
            let (lo, hi) = match output_dtype {
                Some(DType::I8) => (-128.0, 127.0),
                _ => (0.0, 255.0),
            };
            return Some(b.clamp(r, lo, hi));
        }
        Op::Quant(QuantOp::DequantizeLinear { .. }) => {
            let d = match arg(2) {
                Some(z) => b.b(Binary::Sub, x, z),
                None => x,
            };
            return Some(b.b(Binary::Mul, d, arg(1)?));
        }
        _ => {}
    }
    let Op::Elementwise(e) = op else {
        return None;
    };
    let un = |b: &mut Body, f| Some(b.u(f, x));
    let bin = |b: &mut Body, f| Some(b.b(f, x, arg(1)?));
    match e {
        E::Abs => un(b, Unary::Abs),
        E::Neg => un(b, Unary::Neg),
        E::Exp => un(b, Unary::Exp),
        E::Log => un(b, Unary::Log),
        E::Sqrt => un(b, Unary::Sqrt),
        E::Reciprocal => un(b, Unary::Recip),
        E::Floor => un(b, Unary::Floor),
        E::Ceil => un(b, Unary::Ceil),
        E::Round => un(b, Unary::Round),
        E::Sign => un(b, Unary::Sign),
        E::Erf => un(b, Unary::Erf),
        E::Sin => un(b, Unary::Sin),
        E::Cos => un(b, Unary::Cos),
        E::Relu => un(b, Unary::Relu),
        E::Sigmoid => un(b, Unary::Sigmoid),
        E::Tanh => un(b, Unary::Tanh),
        E::Softplus => un(b, Unary::Softplus),
        E::Not => un(b, Unary::Not),
        E::IsNaN => un(b, Unary::IsNan),
        E::Add => bin(b, Binary::Add),
        E::Sub => bin(b, Binary::Sub),
        E::Mul => bin(b, Binary::Mul),
        E::Div => bin(b, Binary::Div),
        E::Pow => bin(b, Binary::Pow),
        E::Equal => bin(b, Binary::Eq),
        E::Less => bin(b, Binary::Lt),
        E::LessOrEqual => bin(b, Binary::Le),
        E::Greater => bin(b, Binary::Gt),
        E::GreaterOrEqual => bin(b, Binary::Ge),
        E::And => bin(b, Binary::And),
        E::Or => bin(b, Binary::Or),
        E::Sum | E::Mean | E::Max | E::Min => {
            let f = match e {
                E::Max => Binary::Max,
                E::Min => Binary::Min,
                _ => Binary::Add,
            };
            let mut acc = x;
            for v in a[1..].iter() {
                acc = b.b(f, acc, (*v)?);
            }
            if matches!(e, E::Mean) {
                let inv = b.k(a.len() as f32);
                acc = b.b(Binary::Div, acc, inv);
            }
            Some(acc)
        }
        E::Where => Some(b.sel(x, arg(1)?, arg(2)?)),
        E::Cast { .. } => Some(x),
        E::LeakyRelu { alpha } => {
            let z = b.k(0.0);
            let neg = b.b(Binary::Lt, x, z);
            let al = b.k(*alpha);
            let s = b.b(Binary::Mul, x, al);
            Some(b.sel(neg, s, x))
        }
        E::PRelu => {
            let z = b.k(0.0);
            let neg = b.b(Binary::Lt, x, z);
            let s = b.b(Binary::Mul, x, arg(1)?);
            Some(b.sel(neg, s, x))
        }
        E::Elu { alpha } => {
            let z = b.k(0.0);
            let neg = b.b(Binary::Lt, x, z);
            let e = b.exp_m1_scaled(x, *alpha);
            Some(b.sel(neg, e, x))
        }
        E::Selu { alpha, gamma } => {
            let z = b.k(0.0);
            let pos = b.b(Binary::Gt, x, z);
            let e = b.exp_m1_scaled(x, *alpha);
            let v = b.sel(pos, x, e);
            let g = b.k(*gamma);
            Some(b.b(Binary::Mul, v, g))
        }
        E::Celu { alpha } => {
            let inv = b.k(1.0 / alpha);
            let xs = b.b(Binary::Mul, x, inv);
            let e = b.exp_m1_scaled(xs, *alpha);
            let z = b.k(0.0);
            let neg = b.b(Binary::Min, e, z);
            let pos = b.u(Unary::Relu, x);
            Some(b.b(Binary::Add, pos, neg))
        }
        E::HardSigmoid { alpha, beta } => {
            let al = b.k(*alpha);
            let m = b.b(Binary::Mul, x, al);
            let be = b.k(*beta);
            let s = b.b(Binary::Add, m, be);
            Some(b.clamp(s, 0.0, 1.0))
        }
        E::HardSwish => Some(b.u(Unary::HardSwish, x)),
        E::Softsign => {
            let ab = b.u(Unary::Abs, x);
            let one = b.k(1.0);
            let d = b.b(Binary::Add, ab, one);
            Some(b.b(Binary::Div, x, d))
        }
        E::Mish => {
            let sp = b.u(Unary::Softplus, x);
            let t = b.u(Unary::Tanh, sp);
            Some(b.b(Binary::Mul, x, t))
        }
        E::Swish { alpha } if *alpha == 1.0 => Some(b.u(Unary::Silu, x)),
        E::Swish { alpha } => {
            let al = b.k(*alpha);
            let ax = b.b(Binary::Mul, x, al);
            let s = b.u(Unary::Sigmoid, ax);
            Some(b.b(Binary::Mul, x, s))
        }
        E::Gelu {
            approximate: GeluApprox::None,
        } => Some(b.u(Unary::Gelu, x)),
        E::Gelu {
            approximate: GeluApprox::Tanh,
        } => Some(b.u(Unary::GeluTanh, x)),
        E::Clip { min, max } => {
            let mut v = x;
            let lo = match min {
                Some(m) => Some(b.k(*m)),
                None => arg(1),
            };
            let hi = match max {
                Some(m) => Some(b.k(*m)),
                None => arg(2),
            };
            if let Some(lo) = lo {
                v = b.b(Binary::Max, v, lo);
            }
            if let Some(hi) = hi {
                v = b.b(Binary::Min, v, hi);
            }
            Some(v)
        }
        _ => None,
    }
}
