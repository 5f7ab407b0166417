//! The scalar-op program of a fused group ([`ScalarOp`]) evaluated over chunks of up to
//! [`CHUNK`] elements, one op at a time, each op a loop over whole vectors (the body is
//! compiled once per ISA, so the loops use that ISA's registers and its math from
//! [`crate::vmath`]). Loads and the anchor's result are filled by the caller; constants
//! once per buffer.

use smelt_ir::kernel::{Binary, Combine, ScalarOp, Unary};

/// Most elements one evaluation handles.
pub const CHUNK: usize = 256;

/// Evaluates `ops[i]` for each `i` in `order` (ascending, operands first) over `len`
/// elements of `vals` (op `i` owns `vals[i * CHUNK ..][.. len]`), skipping `Load`, `Acc`
/// and `Const` (already there); `Reduced(k)` reads `reduced[k]`.
pub type EvalFn = fn(&[ScalarOp], &[usize], usize, &mut [f32], &[f32]);

/// `row = softmax(row * scale + mask)` in place (`mask` empty: none, else one per element);
/// a row that is -inf everywhere becomes zeros.
pub type SoftmaxFn = fn(&mut [f32], f32, &[f32]);

/// Combines `x` into a running partial of a reduction stage (see [`Partial`]).
pub type ReduceFn = fn(Combine, &[f32], &mut Partial);

/// A stage's running combination: sums in f64 over f32 lanes, products in f64, NaN-aware
/// max and min.
#[derive(Debug, Clone, Copy)]
pub struct Partial {
    /// Sum or product so far.
    pub wide: f64,
    /// Max or min so far.
    pub narrow: f32,
    /// Whether a NaN was seen (max and min).
    pub nan: bool,
}

impl Partial {
    /// The identity of `c`.
    pub fn new(c: Combine) -> Partial {
        Partial {
            wide: if c == Combine::Prod { 1.0 } else { 0.0 },
            narrow: match c {
                Combine::Max => f32::NEG_INFINITY,
                Combine::Min => f32::INFINITY,
                _ => 0.0,
            },
            nan: false,
        }
    }

    /// The combined value.
    pub fn finish(&self, c: Combine) -> f32 {
        match c {
            Combine::Sum | Combine::Prod => self.wide as f32,
            _ if self.nan => f32::NAN,
            _ => self.narrow,
        }
    }
}

/// Fills a value buffer's constants (`vals` holds `ops.len() * CHUNK` floats).
pub fn fill_consts(ops: &[ScalarOp], vals: &mut [f32]) {
    for (i, op) in ops.iter().enumerate() {
        if let ScalarOp::Const(c) = op {
            vals[i * CHUNK..(i + 1) * CHUNK].fill(*c);
        }
    }
}

macro_rules! body {
    ($fma:expr) => {
        #[inline(always)]
        fn eval_body(
            ops: &[ScalarOp],
            order: &[usize],
            len: usize,
            vals: &mut [f32],
            reduced: &[f32],
        ) {
            use $crate::vmath;
            const F: bool = $fma;
            let len = len.min(CHUNK);
            for &i in order {
                let (before, rest) = vals.split_at_mut(i * CHUNK);
                let out = &mut rest[..len];
                let arg = |k: usize| &before[k * CHUNK..k * CHUNK + len];
                match ops[i] {
                    ScalarOp::Load(_) | ScalarOp::Const(_) | ScalarOp::Acc => {}
                    ScalarOp::Reduced(k) => out.fill(reduced[k]),
                    ScalarOp::Unary(u, a) => {
                        let a = arg(a);
                        match u {
                            Unary::Neg => map(a, out, |x| -x),
                            Unary::Abs => map(a, out, f32::abs),
                            Unary::Exp => map(a, out, vmath::exp::<F>),
                            Unary::Log => map(a, out, vmath::log::<F>),
                            Unary::Sqrt => map(a, out, f32::sqrt),
                            Unary::Rsqrt => map(a, out, |x| 1.0 / x.sqrt()),
                            Unary::Recip => map(a, out, |x| 1.0 / x),
                            Unary::Tanh => map(a, out, vmath::tanh::<F>),
                            Unary::Erf => map(a, out, vmath::erf::<F>),
                            Unary::Sigmoid => map(a, out, vmath::sigmoid::<F>),
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
                            Unary::Gelu => map(a, out, vmath::gelu::<F>),
                            Unary::GeluTanh => map(a, out, vmath::gelu_tanh::<F>),
                            Unary::Silu => map(a, out, vmath::silu::<F>),
                            Unary::HardSwish => map(a, out, vmath::hard_swish::<F>),
                        }
                    }
                    ScalarOp::Binary(b, x, y) => {
                        let (x, y) = (arg(x), arg(y));
                        let flag = |c: bool| c as u8 as f32;
                        match b {
                            Binary::Add => zip(x, y, out, |a, b| a + b),
                            Binary::Sub => zip(x, y, out, |a, b| a - b),
                            Binary::Mul => zip(x, y, out, |a, b| a * b),
                            Binary::Div => zip(x, y, out, |a, b| a / b),
                            Binary::Max => zip(x, y, out, |a, b| {
                                if a.is_nan() || b.is_nan() {
                                    f32::NAN
                                } else if a > b {
                                    a
                                } else {
                                    b
                                }
                            }),
                            Binary::Min => zip(x, y, out, |a, b| {
                                if a.is_nan() || b.is_nan() {
                                    f32::NAN
                                } else if a < b {
                                    a
                                } else {
                                    b
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
                    ScalarOp::Select(c, x, y) => {
                        let (c, x, y) = (arg(c), arg(x), arg(y));
                        for j in 0..len {
                            out[j] = if c[j] != 0.0 { x[j] } else { y[j] };
                        }
                    }
                }
            }
        }

        #[inline(always)]
        fn softmax_body(row: &mut [f32], scale: f32, mask: &[f32]) {
            const F: bool = $fma;
            if mask.len() == row.len() {
                for (x, &m) in row.iter_mut().zip(mask) {
                    *x = $crate::vmath::madd::<F>(*x, scale, m);
                }
            } else if scale != 1.0 {
                row.iter_mut().for_each(|x| *x *= scale);
            }
            let mut mx = f32::NEG_INFINITY;
            for &x in row.iter() {
                mx = if x > mx { x } else { mx };
            }
            if mx == f32::NEG_INFINITY {
                row.fill(0.0);
                return;
            }
            let mut lanes = [0.0f32; 16];
            let mut it = row.chunks_exact_mut(16);
            for ch in &mut it {
                for (l, x) in lanes.iter_mut().zip(ch.iter_mut()) {
                    *x = $crate::vmath::exp::<F>(*x - mx);
                    *l += *x;
                }
            }
            let mut sum: f32 = lanes.iter().sum();
            for x in it.into_remainder() {
                *x = $crate::vmath::exp::<F>(*x - mx);
                sum += *x;
            }
            let inv = 1.0 / sum;
            row.iter_mut().for_each(|x| *x *= inv);
        }

        #[inline(always)]
        fn reduce_body(c: Combine, x: &[f32], p: &mut Partial) {
            match c {
                Combine::Sum => {
                    // Sixteen f32 lanes (at most CHUNK / 16 terms each), then f64.
                    let mut lanes = [0.0f32; 16];
                    let mut it = x.chunks_exact(16);
                    for ch in &mut it {
                        for (l, &a) in lanes.iter_mut().zip(ch) {
                            *l += a;
                        }
                    }
                    let mut s: f64 = lanes.iter().map(|&l| l as f64).sum();
                    for &a in it.remainder() {
                        s += a as f64;
                    }
                    p.wide += s;
                }
                Combine::Prod => {
                    for &a in x {
                        p.wide *= a as f64;
                    }
                }
                Combine::Max => {
                    let mut m = p.narrow;
                    let mut nan = false;
                    for &a in x {
                        nan |= a.is_nan();
                        m = if a > m { a } else { m };
                    }
                    p.narrow = m;
                    p.nan |= nan;
                }
                Combine::Min => {
                    let mut m = p.narrow;
                    let mut nan = false;
                    for &a in x {
                        nan |= a.is_nan();
                        m = if a < m { a } else { m };
                    }
                    p.narrow = m;
                    p.nan |= nan;
                }
            }
        }
    };
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

/// ln(1 + e^x) in f64, as the reference computes it.
fn softplus(x: f32) -> f32 {
    let x = x as f64;
    let r = if x > 0.0 {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    };
    r as f32
}

/// The portable build (the target's baseline vector width, no FMA).
pub mod portable {
    use super::*;
    body!(false);

    /// See [`EvalFn`].
    pub fn eval(ops: &[ScalarOp], order: &[usize], len: usize, vals: &mut [f32], reduced: &[f32]) {
        eval_body(ops, order, len, vals, reduced)
    }

    /// See [`ReduceFn`].
    pub fn reduce(c: Combine, x: &[f32], p: &mut Partial) {
        reduce_body(c, x, p)
    }

    /// See [`SoftmaxFn`].
    pub fn softmax(row: &mut [f32], scale: f32, mask: &[f32]) {
        softmax_body(row, scale, mask)
    }
}

/// AVX2+FMA and AVX-512 builds.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::*;
    body!(true);

    #[target_feature(enable = "avx2,fma")]
    unsafe fn eval_avx2(
        ops: &[ScalarOp],
        order: &[usize],
        len: usize,
        vals: &mut [f32],
        reduced: &[f32],
    ) {
        eval_body(ops, order, len, vals, reduced)
    }

    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    unsafe fn eval_avx512(
        ops: &[ScalarOp],
        order: &[usize],
        len: usize,
        vals: &mut [f32],
        reduced: &[f32],
    ) {
        eval_body(ops, order, len, vals, reduced)
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn reduce_avx2(c: Combine, x: &[f32], p: &mut Partial) {
        reduce_body(c, x, p)
    }

    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    unsafe fn reduce_avx512(c: Combine, x: &[f32], p: &mut Partial) {
        reduce_body(c, x, p)
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn softmax_avx2(row: &mut [f32], scale: f32, mask: &[f32]) {
        softmax_body(row, scale, mask)
    }

    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    unsafe fn softmax_avx512(row: &mut [f32], scale: f32, mask: &[f32]) {
        softmax_body(row, scale, mask)
    }

    /// See [`SoftmaxFn`]; only in the AVX2 table.
    pub fn avx2_softmax(row: &mut [f32], scale: f32, mask: &[f32]) {
        // SAFETY: only reachable through the AVX2 table (CPU checked).
        unsafe { softmax_avx2(row, scale, mask) }
    }

    /// See [`SoftmaxFn`]; only in the AVX-512 table.
    pub fn avx512_softmax(row: &mut [f32], scale: f32, mask: &[f32]) {
        // SAFETY: only reachable through the AVX-512 table (CPU checked).
        unsafe { softmax_avx512(row, scale, mask) }
    }

    /// See [`EvalFn`]; only in the AVX2 table (the CPU was checked when it was built).
    pub fn avx2_eval(
        ops: &[ScalarOp],
        order: &[usize],
        len: usize,
        vals: &mut [f32],
        reduced: &[f32],
    ) {
        // SAFETY: this function is only reachable through the AVX2 kernel table, which
        // exists only on CPUs with AVX2 and FMA.
        unsafe { eval_avx2(ops, order, len, vals, reduced) }
    }

    /// See [`EvalFn`]; only in the AVX-512 table.
    pub fn avx512_eval(
        ops: &[ScalarOp],
        order: &[usize],
        len: usize,
        vals: &mut [f32],
        reduced: &[f32],
    ) {
        // SAFETY: only reachable through the AVX-512 table (CPU checked).
        unsafe { eval_avx512(ops, order, len, vals, reduced) }
    }

    /// See [`ReduceFn`]; only in the AVX2 table.
    pub fn avx2_reduce(c: Combine, x: &[f32], p: &mut Partial) {
        // SAFETY: as for avx2_eval.
        unsafe { reduce_avx2(c, x, p) }
    }

    /// See [`ReduceFn`]; only in the AVX-512 table.
    pub fn avx512_reduce(c: Combine, x: &[f32], p: &mut Partial) {
        // SAFETY: as for avx512_eval.
        unsafe { reduce_avx512(c, x, p) }
    }
}

#[cfg(test)]
mod tests {
    use crate::isa_tests;
    use crate::Kernels;
    use smelt_ir::kernel::{Binary, Combine, ScalarOp, Unary};

    /// Every op on odd lengths against a plain f64 evaluation.
    fn check(kern: &Kernels) {
        use smelt_ir::kernel::ScalarOp::{Binary as B, Unary as U};
        use ScalarOp::{Const, Load, Reduced, Select};
        let ops = vec![
            Load(0),
            Load(1),
            B(Binary::Mul, 0, 1),
            U(Unary::Exp, 0),
            U(Unary::Erf, 2),
            U(Unary::Tanh, 1),
            U(Unary::Sigmoid, 3),
            B(Binary::Max, 4, 5),
            Const(0.5),
            B(Binary::Gt, 0, 8),
            Select(9, 6, 7),
            U(Unary::Log, 3),
            Reduced(0),
            B(Binary::Add, 11, 12),
        ];
        let order: Vec<usize> = (0..ops.len()).collect();
        for len in [1, 3, 17, 63, 256] {
            let a = crate::testing::rand_vec(len, 1 + len as u64);
            let b = crate::testing::rand_vec(len, 2 + len as u64);
            let mut vals = vec![0f32; ops.len() * super::CHUNK];
            super::fill_consts(&ops, &mut vals);
            vals[..len].copy_from_slice(&a);
            vals[super::CHUNK..super::CHUNK + len].copy_from_slice(&b);
            (kern.eval)(&ops, &order, len, &mut vals, &[0.25]);
            for j in 0..len {
                let (x, y) = (a[j] as f64, b[j] as f64);
                let e = x.exp();
                let want = if x > 0.5 {
                    1.0 / (1.0 + (-e).exp())
                } else {
                    crate::vmath::erf::<false>((x * y) as f32).max(y.tanh() as f32) as f64
                };
                let got = vals[10 * super::CHUNK + j] as f64;
                assert!((got - want).abs() < 1e-6, "{} len {len} at {j}", kern.isa);
                let got = vals[13 * super::CHUNK + j] as f64;
                assert!((got - (x + 0.25)).abs() < 1e-6, "{} log/exp", kern.isa);
            }
            for c in [Combine::Sum, Combine::Max, Combine::Min, Combine::Prod] {
                let mut p = super::Partial::new(c);
                (kern.reduce)(c, &a, &mut p);
                let want = match c {
                    Combine::Sum => a.iter().map(|&v| v as f64).sum::<f64>(),
                    Combine::Prod => a.iter().map(|&v| v as f64).product::<f64>(),
                    Combine::Max => a.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64,
                    Combine::Min => a.iter().fold(f32::INFINITY, |m, &v| m.min(v)) as f64,
                };
                let got = p.finish(c) as f64;
                assert!(
                    (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "{c:?} {len}"
                );
            }
        }
        let mut p = super::Partial::new(Combine::Max);
        (kern.reduce)(Combine::Max, &[1.0, f32::NAN, 2.0], &mut p);
        assert!(p.finish(Combine::Max).is_nan());
    }

    isa_tests!(ops_match_plain_math, check);

    fn softmax_matches(kern: &Kernels) {
        for n in [1, 3, 17, 63, 1000] {
            let x = crate::testing::rand_vec(n, n as u64);
            let mut mask = crate::testing::rand_vec(n, 9);
            mask[0] = f32::NEG_INFINITY;
            let mut row = x.clone();
            (kern.softmax)(&mut row, 0.7, &mask);
            let z: Vec<f64> = x
                .iter()
                .zip(&mask)
                .map(|(&a, &m)| a as f64 * 0.7 + m as f64)
                .collect();
            let mx = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = z.iter().map(|v| (v - mx).exp()).sum();
            for (j, &got) in row.iter().enumerate() {
                let want = if mx == f64::NEG_INFINITY {
                    0.0
                } else {
                    (z[j] - mx).exp() / sum
                };
                assert!(
                    (got as f64 - want).abs() < 1e-6,
                    "{} n {n} at {j}",
                    kern.isa
                );
            }
        }
        let mut row = vec![f32::NEG_INFINITY; 5];
        (kern.softmax)(&mut row, 1.0, &[]);
        assert_eq!(row, vec![0.0; 5]);
    }

    isa_tests!(softmax_rows, softmax_matches);
}
