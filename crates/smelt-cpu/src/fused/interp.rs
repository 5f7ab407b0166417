//! The scalar-op interpreter: evaluates a body over a chunk, one op at a time, each op
//! filling its own chunk array (dispatch once per chunk, inner loops that vectorize).

use super::access::{load_chunk, store_chunk};
use super::nest::CHUNK;
use super::Mem;
use smelt_ir::kernel::{Binary, ScalarOp, Unary};
use smelt_reference::elementwise::erf;

/// Where a body's loads read: buffer slot per window, the chunk's offsets and steps.
pub(crate) struct Windows<'a> {
    /// Buffer slot of each window (loads first, indexed like `ScalarOp::Load`).
    pub bufs: &'a [usize],
    /// Each window's element offset at the chunk start.
    pub offs: &'a [isize],
    /// Each window's step along the chunk.
    pub inner: &'a [isize],
}

/// Scratch values of a body: one chunk array per op.
pub(crate) struct Values {
    vals: Vec<f32>,
}

impl Values {
    /// Scratch for `ops`, with constants filled once.
    pub(crate) fn new(ops: &[ScalarOp]) -> Values {
        let mut vals = vec![0.0; ops.len() * CHUNK];
        for (i, op) in ops.iter().enumerate() {
            if let ScalarOp::Const(c) = op {
                vals[i * CHUNK..(i + 1) * CHUNK].fill(*c);
            }
        }
        Values { vals }
    }

    /// The first `len` values of op `i`.
    pub(crate) fn get(&self, i: usize, len: usize) -> &[f32] {
        &self.vals[i * CHUNK..i * CHUNK + len]
    }
}

/// Evaluates the ops listed in `order` (ascending; operands listed before use) over a
/// chunk of `len` elements. `reduced` holds the finished reduction stages.
///
/// # Safety
/// The windows' offsets must be in bounds of their buffers for `len` steps (validated).
pub(crate) unsafe fn eval(
    ops: &[ScalarOp],
    order: &[usize],
    mem: &Mem,
    w: &Windows,
    len: usize,
    v: &mut Values,
    reduced: &[f32],
) {
    for &i in order {
        let (before, rest) = v.vals.split_at_mut(i * CHUNK);
        let out = &mut rest[..len];
        let arg = |k: usize| &before[k * CHUNK..k * CHUNK + len];
        match ops[i] {
            ScalarOp::Load(k) => {
                let b = w.bufs[k];
                load_chunk(mem.elems[b], mem.ptrs[b], w.offs[k], w.inner[k], out);
            }
            ScalarOp::Const(_) | ScalarOp::Acc => {}
            ScalarOp::Reduced(k) => out.fill(reduced[k]),
            ScalarOp::Unary(u, a) => unary(u, arg(a), out),
            ScalarOp::Binary(b, x, y) => binary(b, arg(x), arg(y), out),
            ScalarOp::Select(c, x, y) => {
                let (c, x, y) = (arg(c), arg(x), arg(y));
                for j in 0..len {
                    out[j] = if c[j] != 0.0 { x[j] } else { y[j] };
                }
            }
        }
    }
}

/// Writes op `value`'s chunk to window `k`.
///
/// # Safety
/// As for [`eval`]; the window must be writable.
pub(crate) unsafe fn store(mem: &Mem, w: &Windows, k: usize, value: &[f32]) {
    let b = w.bufs[k];
    store_chunk(mem.elems[b], mem.ptrs[b], w.offs[k], w.inner[k], value);
}

#[inline(always)]
fn map(a: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x);
    }
}

#[inline(always)]
fn zip(a: &[f32], b: &[f32], out: &mut [f32], f: impl Fn(f32, f32) -> f32) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = f(x, y);
    }
}

fn unary(u: Unary, a: &[f32], out: &mut [f32]) {
    match u {
        Unary::Neg => map(a, out, |x| -x),
        Unary::Abs => map(a, out, f32::abs),
        Unary::Exp => map(a, out, f32::exp),
        Unary::Log => map(a, out, f32::ln),
        Unary::Sqrt => map(a, out, f32::sqrt),
        Unary::Rsqrt => map(a, out, |x| 1.0 / x.sqrt()),
        Unary::Recip => map(a, out, |x| 1.0 / x),
        Unary::Tanh => map(a, out, f32::tanh),
        Unary::Erf => map(a, out, |x| erf(x as f64) as f32),
        Unary::Sigmoid => map(a, out, sigmoid),
        Unary::Relu => map(a, out, |x| if x < 0.0 { 0.0 } else { x }),
        Unary::Floor => map(a, out, f32::floor),
        Unary::Ceil => map(a, out, f32::ceil),
        Unary::Round => map(a, out, f32::round_ties_even),
        Unary::Sign => map(a, out, |x| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }),
        Unary::Sin => map(a, out, f32::sin),
        Unary::Cos => map(a, out, f32::cos),
        Unary::Softplus => map(a, out, softplus),
        Unary::Not => map(a, out, |x| (x == 0.0) as u8 as f32),
        Unary::IsNan => map(a, out, |x| x.is_nan() as u8 as f32),
    }
}

fn binary(b: Binary, x: &[f32], y: &[f32], out: &mut [f32]) {
    let flag = |c: bool| c as u8 as f32;
    match b {
        Binary::Add => zip(x, y, out, |a, b| a + b),
        Binary::Sub => zip(x, y, out, |a, b| a - b),
        Binary::Mul => zip(x, y, out, |a, b| a * b),
        Binary::Div => zip(x, y, out, |a, b| a / b),
        Binary::Max => zip(x, y, out, |a, b| {
            if a.is_nan() || b.is_nan() {
                f32::NAN
            } else {
                a.max(b)
            }
        }),
        Binary::Min => zip(x, y, out, |a, b| {
            if a.is_nan() || b.is_nan() {
                f32::NAN
            } else {
                a.min(b)
            }
        }),
        Binary::Pow => zip(x, y, out, pow),
        Binary::Eq => zip(x, y, out, |a, b| flag(a == b)),
        Binary::Lt => zip(x, y, out, |a, b| flag(a < b)),
        Binary::Le => zip(x, y, out, |a, b| flag(a <= b)),
        Binary::Gt => zip(x, y, out, |a, b| flag(a > b)),
        Binary::Ge => zip(x, y, out, |a, b| flag(a >= b)),
        Binary::And => zip(x, y, out, |a, b| flag(a != 0.0 && b != 0.0)),
        Binary::Or => zip(x, y, out, |a, b| flag(a != 0.0 || b != 0.0)),
    }
}

/// a^b as the reference computes it (through f64), with the common squares exact.
fn pow(a: f32, b: f32) -> f32 {
    if b == 2.0 {
        a * a
    } else if b == 1.0 {
        a
    } else {
        (a as f64).powf(b as f64) as f32
    }
}

/// 1 / (1 + e^-x), without overflow for large |x|.
fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// ln(1 + e^x) computed in f64 like the reference.
fn softplus(x: f32) -> f32 {
    let x = x as f64;
    let r = if x > 0.0 {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    };
    r as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn math_matches_reference_conventions() {
        let mut out = [0.0f32; 4];
        unary(Unary::Round, &[0.5, 1.5, 2.5, -0.5], &mut out);
        assert_eq!(out, [0.0, 2.0, 2.0, -0.0]);
        binary(
            Binary::Max,
            &[1.0, f32::NAN, 2.0, 0.0],
            &[f32::NAN, 1.0, 3.0, -1.0],
            &mut out,
        );
        assert!(out[0].is_nan() && out[1].is_nan());
        assert_eq!(&out[2..], &[3.0, 0.0]);
        unary(Unary::Erf, &[0.5, -1.0, 3.0, 0.0], &mut out);
        assert!((out[0] - 0.520_499_9).abs() < 1e-6 && (out[1] + 0.842_700_8).abs() < 1e-6);
        unary(Unary::Sigmoid, &[-100.0, 100.0, 0.0, 1.0], &mut out);
        assert!(out[0] < 1e-40);
        assert_eq!(&out[1..3], &[1.0, 0.5]);
    }
}
