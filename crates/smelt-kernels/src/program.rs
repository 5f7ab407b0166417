//! The scalar-op program of a fused group ([`ScalarOp`]) evaluated over chunks of up to
//! [`CHUNK`] elements, one op at a time, each op a loop over whole vectors (the body is
//! compiled once per ISA, so the loops use that ISA's registers and its math from
//! [`crate::vmath`]). Loads and the anchor's result are filled by the caller; constants
//! once per buffer.

use crate::simd::Vf;
use crate::vmath;
use smelt_ir::kernel::{Binary, Combine, ScalarOp, Unary};

/// Most elements one evaluation handles.
pub const CHUNK: usize = 256;

/// Floats between consecutive ops' chunks in a value buffer: a chunk and a cache line, so
/// that no two ops' chunks lie a multiple of 4 KiB apart (a load from one chunk right
/// after stores to another at the same 4 KiB offset waits on them, 4K aliasing).
pub const SLOT: usize = CHUNK + 16;

/// Evaluates `ops[i]` for each `i` in `order` (ascending, operands first) over `len`
/// elements of `vals` (op `i` owns `vals[i * SLOT ..][.. len]`), skipping `Load`, `Acc`
/// and `Const` (already there); `Reduced(k)` reads `reduced[k]`. Op `i`'s values are left
/// in its slot where `keep[i]` (every op's when `keep` is empty; see [`kept_values`]).
pub type EvalFn = fn(&[ScalarOp], &[usize], &[bool], usize, &mut [f32], &[f32]);

/// `row = softmax(row * scale + mask)` in place (`mask` empty: none, else one per element);
/// a row that is -inf everywhere becomes zeros.
pub type SoftmaxFn = fn(&mut [f32], f32, &[f32]);

/// The unnormalized half of [`SoftmaxFn`]: `row = exp(row * scale + mask - max)` in place,
/// returning `1 / sum(row)` for the caller to apply later (attention scales its output
/// rows instead of the scores); a row that is -inf everywhere becomes zeros and gives 0.
pub type SoftmaxExpFn = fn(&mut [f32], f32, &[f32]) -> f32;

/// Softmax down columns: for each of `width` adjacent columns `c`, the `n` entries
/// `x[i * xs + c]` (steps in elements) become `y[i * ys + c]`, their softmax over `i`; a
/// column that is -inf everywhere becomes zeros. `y` may be `x` itself (same steps).
///
/// # Safety
/// Every addressed element must be valid; `y` overlaps `x` only by being it.
pub type SoftmaxColsFn = unsafe fn(*const f32, isize, *mut f32, isize, usize, usize);

/// Layer normalization of one row: `out = (x - mean) / sqrt(var + eps) * g + b`, with the
/// mean and variance over the row (`b` empty: no bias; `g` empty: no scale).
pub type LayerNormFn = fn(&[f32], &[f32], &[f32], f32, &mut [f32]);

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

/// [`EvalFn`]'s `keep` for evaluating `order`: the ops whose values must reach their
/// slots. Those in `roots` (read by the caller), those read by an op that `order` does not
/// compute right after them (a register tile holds only the last op's values; `Load`,
/// `Const` and `Acc` compute nothing), and those read by an op outside `order`.
pub fn kept_values(ops: &[ScalarOp], order: &[usize], roots: &[usize]) -> Vec<bool> {
    let mut keep = vec![false; ops.len()];
    for &r in roots {
        keep[r] = true;
    }
    let mut in_order = vec![false; ops.len()];
    let mut prev = usize::MAX;
    for &j in order {
        in_order[j] = true;
        if matches!(
            ops[j],
            ScalarOp::Load(_) | ScalarOp::Const(_) | ScalarOp::Acc
        ) {
            continue;
        }
        for k in ops[j].operands() {
            if k != prev {
                keep[k] = true;
            }
        }
        prev = j;
    }
    for (j, op) in ops.iter().enumerate() {
        if !in_order[j] {
            for k in op.operands() {
                keep[k] = true;
            }
        }
    }
    keep
}

/// Fills a value buffer's constants (`vals` holds `ops.len() * SLOT` floats).
pub fn fill_consts(ops: &[ScalarOp], vals: &mut [f32]) {
    for (i, op) in ops.iter().enumerate() {
        if let ScalarOp::Const(c) = op {
            vals[i * SLOT..i * SLOT + CHUNK].fill(*c);
        }
    }
}

/// `out[j] = f(a[j])`, `V::LANES` at a time.
#[inline(always)]
unsafe fn map<V: Vf, F: Un>(a: &[f32], out: &mut [f32]) {
    let f = |x: V| F::f::<V>(x);
    let n = a.len().min(out.len());
    let (pa, po) = (a.as_ptr(), out.as_mut_ptr());
    let mut j = 0;
    while j + V::LANES <= n {
        f(V::load(pa.add(j))).store(po.add(j));
        j += V::LANES;
    }
    if j < n {
        f(V::load_part(pa.add(j), n - j)).store_part(po.add(j), n - j);
    }
}

/// `out[j] = f(a[j], b[j])`, `V::LANES` at a time.
#[inline(always)]
unsafe fn zip<V: Vf, F: Bin>(a: &[f32], b: &[f32], out: &mut [f32]) {
    let f = |x: V, y: V| F::f::<V>(x, y);
    let n = a.len().min(b.len()).min(out.len());
    let (pa, pb, po) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
    let mut j = 0;
    while j + V::LANES <= n {
        f(V::load(pa.add(j)), V::load(pb.add(j))).store(po.add(j));
        j += V::LANES;
    }
    if j < n {
        let m = n - j;
        f(V::load_part(pa.add(j), m), V::load_part(pb.add(j), m)).store_part(po.add(j), m);
    }
}

/// `out[j] = f(a[j])` one element at a time (functions with no vector form).
#[inline(always)]
fn map_scalar(a: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x);
    }
}

/// 1.0 where `m`, else 0.0.
#[inline(always)]
unsafe fn flag<V: Vf>(m: V::M) -> V {
    V::select(m, V::splat(1.0), V::splat(0.0))
}

/// max or min with NaN propagated from either side.
#[inline(always)]
unsafe fn pick_nan<V: Vf>(a: V, b: V, take_a: V::M) -> V {
    let r = V::select(take_a, a, b);
    let r = V::select(a.nan(), a, r);
    V::select(b.nan(), b, r)
}

/// A unary vector op, statically dispatched (a closure would be compiled without the
/// ISA's features and could not inline its intrinsics).
trait Un {
    unsafe fn f<V: Vf>(x: V) -> V;
}

/// A binary vector op (see [`Un`]).
trait Bin {
    unsafe fn f<V: Vf>(a: V, b: V) -> V;
}

/// Round half to even.
struct URound;
impl Un for URound {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        x.round_even()
    }
}
/// Floor.
struct UFloor;
impl Un for UFloor {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        x.floor()
    }
}
/// Ceil.
struct UCeil;
impl Un for UCeil {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        x.ceil()
    }
}
struct UNeg;
impl Un for UNeg {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        x.mul(V::splat(-1.0))
    }
}

struct UAbs;
impl Un for UAbs {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        V::from_bits(V::iand(x.bits(), V::isplat(0x7fff_ffff)))
    }
}

struct UExp;
impl Un for UExp {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        vmath::exp(x)
    }
}

struct ULog;
impl Un for ULog {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        vmath::log(x)
    }
}

struct USqrt;
impl Un for USqrt {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        x.sqrt()
    }
}

struct URsqrt;
impl Un for URsqrt {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        V::splat(1.0).div(x.sqrt())
    }
}

struct URecip;
impl Un for URecip {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        V::splat(1.0).div(x)
    }
}

struct UTanh;
impl Un for UTanh {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        vmath::tanh(x)
    }
}

struct UErf;
impl Un for UErf {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        vmath::erf(x)
    }
}

struct USigmoid;
impl Un for USigmoid {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        vmath::sigmoid(x)
    }
}

struct URelu;
impl Un for URelu {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        vmath::relu(x)
    }
}

struct UGelu;
impl Un for UGelu {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        vmath::gelu(x)
    }
}

struct UGeluTanh;
impl Un for UGeluTanh {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        vmath::gelu_tanh(x)
    }
}

struct USilu;
impl Un for USilu {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        vmath::silu(x)
    }
}

struct UHardSwish;
impl Un for UHardSwish {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        vmath::hard_swish(x)
    }
}

struct USign;
impl Un for USign {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        {
            let (z, one) = (V::splat(0.0), V::splat(1.0));
            V::select(x.gt(z), one, V::select(x.lt(z), V::splat(-1.0), x))
        }
    }
}

struct UNot;
impl Un for UNot {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        flag::<V>(x.eq(V::splat(0.0)))
    }
}

struct UIsNan;
impl Un for UIsNan {
    #[inline(always)]
    unsafe fn f<V: Vf>(x: V) -> V {
        flag::<V>(x.nan())
    }
}

struct BAdd;
impl Bin for BAdd {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        a.add(b)
    }
}

struct BSub;
impl Bin for BSub {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        a.sub(b)
    }
}

struct BMul;
impl Bin for BMul {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        a.mul(b)
    }
}

struct BDiv;
impl Bin for BDiv {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        a.div(b)
    }
}

struct BMax;
impl Bin for BMax {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        pick_nan(a, b, a.gt(b))
    }
}

struct BMin;
impl Bin for BMin {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        pick_nan(a, b, a.lt(b))
    }
}

struct BEq;
impl Bin for BEq {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        flag::<V>(a.eq(b))
    }
}

struct BLt;
impl Bin for BLt {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        flag::<V>(a.lt(b))
    }
}

struct BGt;
impl Bin for BGt {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        flag::<V>(a.gt(b))
    }
}

struct BLe;
impl Bin for BLe {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        {
            let (z, one) = (V::splat(0.0), V::splat(1.0));
            V::select(
                a.gt(b),
                z,
                V::select(a.nan(), z, V::select(b.nan(), z, one)),
            )
        }
    }
}

struct BGe;
impl Bin for BGe {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        {
            let (z, one) = (V::splat(0.0), V::splat(1.0));
            V::select(
                a.lt(b),
                z,
                V::select(a.nan(), z, V::select(b.nan(), z, one)),
            )
        }
    }
}

struct BAnd;
impl Bin for BAnd {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        {
            let (z, one) = (V::splat(0.0), V::splat(1.0));
            V::select(a.eq(z), z, V::select(b.eq(z), z, one))
        }
    }
}

struct BOr;
impl Bin for BOr {
    #[inline(always)]
    unsafe fn f<V: Vf>(a: V, b: V) -> V {
        {
            let (z, one) = (V::splat(0.0), V::splat(1.0));
            V::select(a.eq(z), V::select(b.eq(z), z, one), one)
        }
    }
}

/// See [`EvalFn`], over lanes `V`: tiles of `R` vectors held in registers from op to op,
/// then the rest one op at a time over the remaining elements.
#[inline(always)]
unsafe fn eval_body<V: Vf, const R: usize>(
    ops: &[ScalarOp],
    order: &[usize],
    keep: &[bool],
    len: usize,
    vals: &mut [f32],
    reduced: &[f32],
    one_op: OneOpFn,
) {
    let len = len.min(CHUNK);
    let mut lo = 0;
    // Every op's slot lies inside `vals`; the tiles check each index against the op count
    // as they meet it (a loop over `order` here first cost 8% of a chain's time).
    assert!(vals.len() >= ops.len().saturating_sub(1) * SLOT + CHUNK);
    while lo + R * V::LANES <= len {
        eval_tile::<V, R>(ops, order, keep, lo, vals, reduced, one_op);
        lo += R * V::LANES;
    }
    if lo < len {
        eval_span::<V>(ops, order, lo, len, vals, reduced);
    }
}

/// One op of a body over elements `lo .. len` in memory (`ops`, op, `lo`, `len`, values,
/// reduced): the out-of-line path of a register tile for the ops whose vector code is long.
type OneOpFn = unsafe fn(&[ScalarOp], usize, usize, usize, &mut [f32], &[f32]);

/// One register tile of a body: elements `lo .. lo + R * LANES` of every op evaluated in
/// turn with the values kept in `R` vector registers, so an op reading the op before it
/// takes its operand from registers, and one dispatch per op covers `R` vectors. A value
/// reaches its slot only when `keep` says so (empty: always). The ops with long vector code
/// (exp, erf, tanh...) run out of line through `one_op` from memory: inlined, they made
/// the compiler keep the registers on the stack for every op. (One op at a time over a
/// whole chunk, each op's loads waited on the stores of the op before it, and every value
/// went through memory: a chain of 16 binary ops took 2.0 ns an element on Zen 4, in L1;
/// this way 0.93.)
///
/// # Safety
/// `vals` holds every op's slot (checked by [`eval_body`]; operands are checked here);
/// `lo + R * LANES <= CHUNK`.
#[inline(always)]
unsafe fn eval_tile<V: Vf, const R: usize>(
    ops: &[ScalarOp],
    order: &[usize],
    keep: &[bool],
    lo: usize,
    vals: &mut [f32],
    reduced: &[f32],
    one_op: OneOpFn,
) {
    let base = vals.as_mut_ptr();
    let slot = |k: usize| base.add(k * SLOT + lo);
    let mut acc = [V::splat(0.0); R];
    // The op whose values `acc` holds, and whether they are in its slot too.
    let (mut held, mut held_stored) = (usize::MAX, false);
    for &i in order {
        let op = ops[i];
        let out = slot(i);
        let opnd = |k: usize| -> Operand {
            assert!(k < ops.len(), "operand {k} of op {i} past the ops");
            (k == held, slot(k))
        };
        let light = match op {
            ScalarOp::Load(_) | ScalarOp::Const(_) | ScalarOp::Acc => continue,
            ScalarOp::Reduced(k) => {
                acc = [V::splat(reduced[k]); R];
                true
            }
            ScalarOp::Unary(u, a) => {
                let x = opnd(a);
                match u {
                    Unary::Neg => tile_map::<V, UNeg, R>(&mut acc, x),
                    Unary::Abs => tile_map::<V, UAbs, R>(&mut acc, x),
                    Unary::Sqrt => tile_map::<V, USqrt, R>(&mut acc, x),
                    Unary::Relu => tile_map::<V, URelu, R>(&mut acc, x),
                    Unary::Sign => tile_map::<V, USign, R>(&mut acc, x),
                    Unary::Not => tile_map::<V, UNot, R>(&mut acc, x),
                    Unary::IsNan => tile_map::<V, UIsNan, R>(&mut acc, x),
                    Unary::Floor => tile_map::<V, UFloor, R>(&mut acc, x),
                    Unary::Ceil => tile_map::<V, UCeil, R>(&mut acc, x),
                    // The rest run out of line.
                    _ => false,
                }
            }
            ScalarOp::Binary(b, x, y) => {
                let (x, y) = (opnd(x), opnd(y));
                match b {
                    Binary::Add => tile_zip::<V, BAdd, R>(&mut acc, x, y),
                    Binary::Sub => tile_zip::<V, BSub, R>(&mut acc, x, y),
                    Binary::Mul => tile_zip::<V, BMul, R>(&mut acc, x, y),
                    Binary::Div => tile_zip::<V, BDiv, R>(&mut acc, x, y),
                    Binary::Max => tile_zip::<V, BMax, R>(&mut acc, x, y),
                    Binary::Min => tile_zip::<V, BMin, R>(&mut acc, x, y),
                    Binary::Eq => tile_zip::<V, BEq, R>(&mut acc, x, y),
                    Binary::Lt => tile_zip::<V, BLt, R>(&mut acc, x, y),
                    Binary::Le => tile_zip::<V, BLe, R>(&mut acc, x, y),
                    Binary::Gt => tile_zip::<V, BGt, R>(&mut acc, x, y),
                    Binary::Ge => tile_zip::<V, BGe, R>(&mut acc, x, y),
                    // The rest run out of line.
                    _ => false,
                }
            }
            ScalarOp::Select(..) => false,
        };
        if light {
            held_stored = keep.get(i).copied().unwrap_or(true);
            if held_stored {
                for (r, v) in acc.iter().enumerate() {
                    v.store(out.add(r * V::LANES));
                }
            }
        } else {
            // Out of line, from memory: the held values go to their slot first if an
            // operand and not there yet.
            if !held_stored && held != usize::MAX && op.operands().any(|a| a == held) {
                for (r, v) in acc.iter().enumerate() {
                    v.store(slot(held).add(r * V::LANES));
                }
            }
            // (The slice is remade from `base` so that `base` stays valid past the call.)
            let all = std::slice::from_raw_parts_mut(base, vals.len());
            one_op(ops, i, lo, lo + R * V::LANES, all, reduced);
            acc = from_memory(slot(i));
            held_stored = true;
        }
        held = i;
    }
}

/// A register tile's values read from `p`.
#[inline(always)]
unsafe fn from_memory<V: Vf, const R: usize>(p: *const f32) -> [V; R] {
    let mut acc = [V::splat(0.0); R];
    for (r, v) in acc.iter_mut().enumerate() {
        *v = V::load(p.add(r * V::LANES));
    }
    acc
}

/// An operand of a register tile: whether it is the op whose values the registers hold,
/// and its slot.
type Operand = (bool, *const f32);

/// `acc = f(x)` over a register tile; true (the op ran in registers).
#[inline(always)]
unsafe fn tile_map<V: Vf, F: Un, const R: usize>(acc: &mut [V; R], x: Operand) -> bool {
    if x.0 {
        for v in acc.iter_mut() {
            *v = F::f::<V>(*v);
        }
    } else {
        for (r, v) in acc.iter_mut().enumerate() {
            *v = F::f::<V>(V::load(x.1.add(r * V::LANES)));
        }
    }
    true
}

/// `acc = f(x, y)` over a register tile (each case its own loop, no branch per vector);
/// true (the op ran in registers).
#[inline(always)]
unsafe fn tile_zip<V: Vf, F: Bin, const R: usize>(
    acc: &mut [V; R],
    x: Operand,
    y: Operand,
) -> bool {
    let ld = |p: *const f32, r: usize| V::load(p.add(r * V::LANES));
    match (x.0, y.0) {
        (true, false) => {
            for (r, v) in acc.iter_mut().enumerate() {
                *v = F::f::<V>(*v, ld(y.1, r));
            }
        }
        (false, true) => {
            for (r, v) in acc.iter_mut().enumerate() {
                *v = F::f::<V>(ld(x.1, r), *v);
            }
        }
        (true, true) => {
            for v in acc.iter_mut() {
                *v = F::f::<V>(*v, *v);
            }
        }
        (false, false) => {
            for (r, v) in acc.iter_mut().enumerate() {
                *v = F::f::<V>(ld(x.1, r), ld(y.1, r));
            }
        }
    }
    true
}

/// Ops one at a time over elements `lo .. len` of their chunks (see [`EvalFn`]).
#[inline(always)]
unsafe fn eval_span<V: Vf>(
    ops: &[ScalarOp],
    order: &[usize],
    lo: usize,
    len: usize,
    vals: &mut [f32],
    reduced: &[f32],
) {
    let n = len - lo;
    for &i in order {
        let (before, rest) = vals.split_at_mut(i * SLOT);
        let out = &mut rest[lo..len];
        let arg = |k: usize| &before[k * SLOT + lo..k * SLOT + len];
        let z = V::splat(0.0);
        match ops[i] {
            ScalarOp::Load(_) | ScalarOp::Const(_) | ScalarOp::Acc => {}
            ScalarOp::Reduced(k) => out.fill(reduced[k]),
            ScalarOp::Unary(u, a) => {
                let a = arg(a);
                match u {
                    Unary::Neg => map::<V, UNeg>(a, out),
                    Unary::Abs => map::<V, UAbs>(a, out),
                    Unary::Exp => map::<V, UExp>(a, out),
                    Unary::Log => map::<V, ULog>(a, out),
                    Unary::Sqrt => map::<V, USqrt>(a, out),
                    Unary::Rsqrt => map::<V, URsqrt>(a, out),
                    Unary::Recip => map::<V, URecip>(a, out),
                    Unary::Tanh => map::<V, UTanh>(a, out),
                    Unary::Erf => map::<V, UErf>(a, out),
                    Unary::Sigmoid => map::<V, USigmoid>(a, out),
                    Unary::Relu => map::<V, URelu>(a, out),
                    Unary::Gelu => map::<V, UGelu>(a, out),
                    Unary::GeluTanh => map::<V, UGeluTanh>(a, out),
                    Unary::Silu => map::<V, USilu>(a, out),
                    Unary::HardSwish => map::<V, UHardSwish>(a, out),
                    Unary::Sign => map::<V, USign>(a, out),
                    Unary::Not => map::<V, UNot>(a, out),
                    Unary::IsNan => map::<V, UIsNan>(a, out),
                    Unary::Floor => map::<V, UFloor>(a, out),
                    Unary::Ceil => map::<V, UCeil>(a, out),
                    Unary::Round => map::<V, URound>(a, out),
                    Unary::Sin => map_scalar(a, out, f32::sin),
                    Unary::Cos => map_scalar(a, out, f32::cos),
                    Unary::Softplus => map_scalar(a, out, softplus),
                }
            }
            ScalarOp::Binary(b, x, y) => {
                let (x, y) = (arg(x), arg(y));
                match b {
                    Binary::Add => zip::<V, BAdd>(x, y, out),
                    Binary::Sub => zip::<V, BSub>(x, y, out),
                    Binary::Mul => zip::<V, BMul>(x, y, out),
                    Binary::Div => zip::<V, BDiv>(x, y, out),
                    Binary::Max => zip::<V, BMax>(x, y, out),
                    Binary::Min => zip::<V, BMin>(x, y, out),
                    Binary::Eq => zip::<V, BEq>(x, y, out),
                    Binary::Lt => zip::<V, BLt>(x, y, out),
                    Binary::Le => zip::<V, BLe>(x, y, out),
                    Binary::Gt => zip::<V, BGt>(x, y, out),
                    Binary::Ge => zip::<V, BGe>(x, y, out),
                    Binary::And => zip::<V, BAnd>(x, y, out),
                    Binary::Or => zip::<V, BOr>(x, y, out),
                    Binary::Pow => {
                        for ((o, &a), &b) in out.iter_mut().zip(x).zip(y) {
                            *o = pow(a, b);
                        }
                    }
                }
            }
            ScalarOp::Select(c, x, y) => {
                let (c, x, y) = (arg(c), arg(x), arg(y));
                let mut j = 0;
                while j + V::LANES <= n {
                    let cv = V::load(c.as_ptr().add(j));
                    let r = V::select(
                        cv.eq(z),
                        V::load(y.as_ptr().add(j)),
                        V::load(x.as_ptr().add(j)),
                    );
                    r.store(out.as_mut_ptr().add(j));
                    j += V::LANES;
                }
                for t in j..n {
                    out[t] = if c[t] != 0.0 { x[t] } else { y[t] };
                }
            }
        }
    }
}

/// `sum f(x[j..j + LANES])` over the `full` (a multiple of `LANES`) elements at `p`, in four
/// interleaved accumulators, reduced in a fixed order.
#[inline(always)]
unsafe fn sum4<V: Vf>(p: *const f32, full: usize, f: impl Fn(V) -> V) -> f32 {
    let z = V::splat(0.0);
    let mut acc = [z; 4];
    let mut j = 0;
    while j + 4 * V::LANES <= full {
        for (a, acc) in acc.iter_mut().enumerate() {
            *acc = acc.add(f(V::load(p.add(j + a * V::LANES))));
        }
        j += 4 * V::LANES;
    }
    while j < full {
        acc[0] = acc[0].add(f(V::load(p.add(j))));
        j += V::LANES;
    }
    acc[0].add(acc[1]).add(acc[2].add(acc[3])).hsum()
}

/// Horizontal sum of a vector's lanes, in f64.
#[inline(always)]
unsafe fn hsum<V: Vf>(v: V) -> f64 {
    let mut b = [0f32; 16];
    v.store(b.as_mut_ptr());
    b[..V::LANES].iter().map(|&x| x as f64).sum()
}

/// See [`ReduceFn`], over lanes `V`.
#[inline(always)]
unsafe fn reduce_body<V: Vf>(c: Combine, x: &[f32], p: &mut Partial) {
    let n = x.len();
    let px = x.as_ptr();
    let mut j = 0;
    match c {
        Combine::Sum => {
            let mut acc = V::splat(0.0);
            while j + V::LANES <= n {
                acc = acc.add(V::load(px.add(j)));
                j += V::LANES;
            }
            let mut s = hsum(acc);
            for &a in &x[j..] {
                s += a as f64;
            }
            p.wide += s;
        }
        Combine::Prod => {
            for &a in x {
                p.wide *= a as f64;
            }
        }
        Combine::Max | Combine::Min => {
            let max = c == Combine::Max;
            let mut m = V::splat(p.narrow);
            let mut nans = V::splat(0.0);
            while j + V::LANES <= n {
                let v = V::load(px.add(j));
                let take = if max { v.gt(m) } else { v.lt(m) };
                m = V::select(take, v, m);
                nans = nans.add(flag::<V>(v.nan()));
                j += V::LANES;
            }
            let mut b = [0f32; 16];
            m.store(b.as_mut_ptr());
            let mut r = p.narrow;
            for &v in b[..V::LANES].iter().chain(&x[j..]) {
                p.nan |= v.is_nan();
                r = if (max && v > r) || (!max && v < r) {
                    v
                } else {
                    r
                };
            }
            p.nan |= hsum(nans) > 0.0;
            p.narrow = r;
        }
    }
}

/// See [`LayerNormFn`], over lanes `V` (two passes for the moments, one for the result).
#[inline(always)]
unsafe fn layer_norm_body<V: Vf>(x: &[f32], g: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
    let n = x.len().min(out.len());
    if n == 0 {
        return;
    }
    let px = x.as_ptr();
    let full = n - n % V::LANES;
    // Four independent sums, so the adds overlap instead of waiting on each other.
    let sum = sum4::<V>(px, full, |v| v) + x[full..n].iter().sum::<f32>();
    let mean = sum / n as f32;
    let m = V::splat(mean);
    let ss = sum4::<V>(px, full, |v| {
        let d = v.sub(m);
        d.mul(d)
    }) + x[full..n]
        .iter()
        .map(|&v| (v - mean) * (v - mean))
        .sum::<f32>();
    let var = ss / n as f32;
    let inv = V::splat(1.0 / (var + eps).sqrt());
    let (has_g, has_b) = (g.len() >= n, b.len() >= n);
    let po = out.as_mut_ptr();
    let mut j = 0;
    while j < n {
        let w = (n - j).min(V::LANES);
        let ld = |p: *const f32| {
            if w == V::LANES {
                V::load(p)
            } else {
                V::load_part(p, w)
            }
        };
        let mut y = ld(px.add(j)).sub(m).mul(inv);
        if has_g {
            y = y.mul(ld(g.as_ptr().add(j)));
        }
        if has_b {
            y = y.add(ld(b.as_ptr().add(j)));
        }
        if w == V::LANES {
            y.store(po.add(j));
        } else {
            y.store_part(po.add(j), w);
        }
        j += w;
    }
}

/// See [`SoftmaxFn`], over lanes `V`.
#[inline(always)]
unsafe fn softmax_body<V: Vf>(row: &mut [f32], scale: f32, mask: &[f32]) {
    let inv = softmax_exp_body::<V>(row, scale, mask);
    if inv == 0.0 {
        return;
    }
    let n = row.len();
    let pr = row.as_mut_ptr();
    let iv = V::splat(inv);
    let mut j = 0;
    while j + V::LANES <= n {
        V::load(pr.add(j)).mul(iv).store(pr.add(j));
        j += V::LANES;
    }
    for x in &mut row[j..] {
        *x *= inv;
    }
}

/// See [`SoftmaxColsFn`], over lanes `V`.
#[inline(always)]
unsafe fn softmax_cols_body<V: Vf>(
    x: *const f32,
    xs: isize,
    y: *mut f32,
    ys: isize,
    n: usize,
    width: usize,
) {
    let mut c = 0;
    while c < width {
        let w = (width - c).min(V::LANES);
        let ld = |p: *const f32| {
            if w == V::LANES {
                V::load(p)
            } else {
                V::load_part(p, w)
            }
        };
        let st = |v: V, p: *mut f32| {
            if w == V::LANES {
                v.store(p)
            } else {
                v.store_part(p, w)
            }
        };
        let (xc, yc) = (x.add(c), y.add(c));
        let mut mx = V::splat(f32::NEG_INFINITY);
        for i in 0..n as isize {
            let v = ld(xc.offset(i * xs));
            mx = V::select(v.gt(mx), v, mx);
        }
        // A column of -inf gives exp(-inf - 0) = 0 and a zero sum: zeros.
        let ninf = V::splat(f32::NEG_INFINITY);
        let t = V::select(mx.eq(ninf), V::splat(0.0), mx);
        let mut sum = V::splat(0.0);
        for i in 0..n as isize {
            let e = vmath::exp_nonpos(ld(xc.offset(i * xs)).sub(t));
            st(e, yc.offset(i * ys));
            sum = sum.add(e);
        }
        let inv = V::select(sum.eq(V::splat(0.0)), V::splat(0.0), V::splat(1.0).div(sum));
        for i in 0..n as isize {
            let p = yc.offset(i * ys);
            st(ld(p).mul(inv), p);
        }
        c += w;
    }
}

/// See [`SoftmaxExpFn`], over lanes `V`.
#[inline(always)]
unsafe fn softmax_exp_body<V: Vf>(row: &mut [f32], scale: f32, mask: &[f32]) -> f32 {
    let n = row.len();
    let pr = row.as_mut_ptr();
    let masked = mask.len() == n;
    let sc = V::splat(scale);
    // Two running maxima, so consecutive vectors' comparisons overlap (named, not an
    // array indexed by the step, which put them on the stack).
    let (mut m0, mut m1) = (V::splat(f32::NEG_INFINITY), V::splat(f32::NEG_INFINITY));
    let pm = mask.as_ptr();
    // The scaled (and masked) score, stored back: the exponent's argument.
    let scaled = |j: usize| {
        let x = V::load(pr.add(j));
        let y = if masked {
            x.fma(sc, V::load(pm.add(j)))
        } else {
            x.mul(sc)
        };
        y.store(pr.add(j));
        y
    };
    let mut j = 0;
    while j + 2 * V::LANES <= n {
        // y where y > max, else max (a NaN lane is skipped, as below).
        m0 = scaled(j).max_or(m0);
        m1 = scaled(j + V::LANES).max_or(m1);
        j += 2 * V::LANES;
    }
    if j + V::LANES <= n {
        m0 = scaled(j).max_or(m0);
        j += V::LANES;
    }
    if j < n {
        let w = n - j;
        let x = V::load_part(pr.add(j), w);
        let y = if masked {
            x.fma(sc, V::load_part(pm.add(j), w))
        } else {
            x.mul(sc)
        };
        y.store_part(pr.add(j), w);
    }
    let full = n - n % V::LANES;
    let top = row[full..]
        .iter()
        .fold(m0.max_or(m1).hmax(), |a, &x| if x > a { x } else { a });
    if top == f32::NEG_INFINITY {
        row.fill(0.0);
        return 0.0;
    }
    let t = V::splat(top);
    // Two sums, so consecutive vectors' exponentials overlap.
    let (mut s0, mut s1) = (V::splat(0.0), V::splat(0.0));
    let mut j = 0;
    while j + 2 * V::LANES <= n {
        let e0 = vmath::exp_nonpos(V::load(pr.add(j)).sub(t));
        let e1 = vmath::exp_nonpos(V::load(pr.add(j + V::LANES)).sub(t));
        e0.store(pr.add(j));
        e1.store(pr.add(j + V::LANES));
        s0 = s0.add(e0);
        s1 = s1.add(e1);
        j += 2 * V::LANES;
    }
    if j + V::LANES <= n {
        let e = vmath::exp_nonpos(V::load(pr.add(j)).sub(t));
        e.store(pr.add(j));
        s0 = s0.add(e);
        j += V::LANES;
    }
    let mut total = s0.add(s1).hsum();
    if j < n {
        let e = vmath::exp_nonpos(V::load_part(pr.add(j), n - j).sub(t));
        e.store_part(pr.add(j), n - j);
        for &x in &row[j..] {
            total += x;
        }
    }
    1.0 / total
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

/// The portable build (one lane at a time; the compiler may still vectorize).
pub mod portable {
    use super::*;

    /// See [`EvalFn`].
    pub fn eval(
        ops: &[ScalarOp],
        order: &[usize],
        _keep: &[bool],
        len: usize,
        vals: &mut [f32],
        reduced: &[f32],
    ) {
        // No register tiles (one lane each): every op over the chunk in turn, every value
        // stored, so `keep` has nothing to skip.
        // SAFETY: f32 lanes need no CPU feature.
        unsafe { eval_span::<f32>(ops, order, 0, len.min(CHUNK), vals, reduced) }
    }

    /// See [`ReduceFn`].
    pub fn reduce(c: Combine, x: &[f32], p: &mut Partial) {
        // SAFETY: as for eval.
        unsafe { reduce_body::<f32>(c, x, p) }
    }

    /// See [`SoftmaxFn`].
    pub fn softmax(row: &mut [f32], scale: f32, mask: &[f32]) {
        // SAFETY: as for eval.
        unsafe { softmax_body::<f32>(row, scale, mask) }
    }

    /// See [`SoftmaxColsFn`].
    ///
    /// # Safety
    /// As [`SoftmaxColsFn`] says.
    pub unsafe fn softmax_cols(
        x: *const f32,
        xs: isize,
        y: *mut f32,
        ys: isize,
        n: usize,
        w: usize,
    ) {
        softmax_cols_body::<f32>(x, xs, y, ys, n, w)
    }

    /// See [`SoftmaxExpFn`].
    pub fn softmax_exp(row: &mut [f32], scale: f32, mask: &[f32]) -> f32 {
        // SAFETY: as for eval.
        unsafe { softmax_exp_body::<f32>(row, scale, mask) }
    }

    /// See [`LayerNormFn`].
    pub fn layer_norm(x: &[f32], g: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
        // SAFETY: as for eval.
        unsafe { layer_norm_body::<f32>(x, g, b, eps, out) }
    }
}

/// AVX2+FMA and AVX-512 builds; each entry point is only reachable through its ISA's
/// kernel table, which exists only on CPUs with that ISA.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::*;
    use crate::simd::{Y8, Z16};

    /// See `OneOpFn` (AVX2).
    #[target_feature(enable = "avx2,fma")]
    #[inline(never)]
    unsafe fn one_op_avx2(
        ops: &[ScalarOp],
        i: usize,
        lo: usize,
        len: usize,
        vals: &mut [f32],
        reduced: &[f32],
    ) {
        eval_span::<Y8>(ops, &[i], lo, len, vals, reduced)
    }

    /// See `OneOpFn` (AVX-512).
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    #[inline(never)]
    unsafe fn one_op_avx512(
        ops: &[ScalarOp],
        i: usize,
        lo: usize,
        len: usize,
        vals: &mut [f32],
        reduced: &[f32],
    ) {
        eval_span::<Z16>(ops, &[i], lo, len, vals, reduced)
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn eval_avx2(
        ops: &[ScalarOp],
        order: &[usize],
        keep: &[bool],
        len: usize,
        vals: &mut [f32],
        reduced: &[f32],
    ) {
        // Tiles of 16 vectors, 128 elements as on AVX-512, though 16 ymm registers cannot
        // hold them all: the dispatch saved outweighs the spills (a 16-op chain in L2 on
        // Zen 4, `SMELT_ISA=avx2`: 0.38 ms with 8 vectors, 0.33 with 16, 0.70 with 4).
        eval_body::<Y8, 16>(ops, order, keep, len, vals, reduced, one_op_avx2)
    }

    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    unsafe fn eval_avx512(
        ops: &[ScalarOp],
        order: &[usize],
        keep: &[bool],
        len: usize,
        vals: &mut [f32],
        reduced: &[f32],
    ) {
        // (16 vectors spill here and ran slower: 0.32 against 0.29 ms on that chain.)
        eval_body::<Z16, 8>(ops, order, keep, len, vals, reduced, one_op_avx512)
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn reduce_avx2(c: Combine, x: &[f32], p: &mut Partial) {
        reduce_body::<Y8>(c, x, p)
    }

    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    unsafe fn reduce_avx512(c: Combine, x: &[f32], p: &mut Partial) {
        reduce_body::<Z16>(c, x, p)
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn softmax_avx2(row: &mut [f32], scale: f32, mask: &[f32]) {
        softmax_body::<Y8>(row, scale, mask)
    }

    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    unsafe fn softmax_avx512(row: &mut [f32], scale: f32, mask: &[f32]) {
        softmax_body::<Z16>(row, scale, mask)
    }

    /// See [`SoftmaxColsFn`] (AVX2 table).
    ///
    /// # Safety
    /// As [`SoftmaxColsFn`] says, on a CPU with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn avx2_softmax_cols(
        x: *const f32,
        xs: isize,
        y: *mut f32,
        ys: isize,
        n: usize,
        w: usize,
    ) {
        softmax_cols_body::<Y8>(x, xs, y, ys, n, w)
    }

    /// See [`SoftmaxColsFn`] (AVX-512 table).
    ///
    /// # Safety
    /// As [`SoftmaxColsFn`] says, on a CPU with AVX-512.
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    pub unsafe fn avx512_softmax_cols(
        x: *const f32,
        xs: isize,
        y: *mut f32,
        ys: isize,
        n: usize,
        w: usize,
    ) {
        softmax_cols_body::<Z16>(x, xs, y, ys, n, w)
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn softmax_exp_avx2(row: &mut [f32], scale: f32, mask: &[f32]) -> f32 {
        softmax_exp_body::<Y8>(row, scale, mask)
    }

    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    unsafe fn softmax_exp_avx512(row: &mut [f32], scale: f32, mask: &[f32]) -> f32 {
        softmax_exp_body::<Z16>(row, scale, mask)
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn layer_norm_avx2(x: &[f32], g: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
        layer_norm_body::<Y8>(x, g, b, eps, out)
    }

    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    unsafe fn layer_norm_avx512(x: &[f32], g: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
        layer_norm_body::<Z16>(x, g, b, eps, out)
    }

    /// See [`LayerNormFn`] (AVX2 table).
    pub fn avx2_layer_norm(x: &[f32], g: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
        // SAFETY: reachable only through the AVX2 table (CPU checked).
        unsafe { layer_norm_avx2(x, g, b, eps, out) }
    }

    /// See [`LayerNormFn`] (AVX-512 table).
    pub fn avx512_layer_norm(x: &[f32], g: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
        // SAFETY: reachable only through the AVX-512 table (CPU checked).
        unsafe { layer_norm_avx512(x, g, b, eps, out) }
    }

    /// See [`EvalFn`] (AVX2 table).
    pub fn avx2_eval(
        ops: &[ScalarOp],
        order: &[usize],
        keep: &[bool],
        len: usize,
        vals: &mut [f32],
        reduced: &[f32],
    ) {
        // SAFETY: reachable only through the AVX2 table (CPU checked).
        unsafe { eval_avx2(ops, order, keep, len, vals, reduced) }
    }

    /// See [`EvalFn`] (AVX-512 table).
    pub fn avx512_eval(
        ops: &[ScalarOp],
        order: &[usize],
        keep: &[bool],
        len: usize,
        vals: &mut [f32],
        reduced: &[f32],
    ) {
        // SAFETY: reachable only through the AVX-512 table (CPU checked).
        unsafe { eval_avx512(ops, order, keep, len, vals, reduced) }
    }

    /// See [`ReduceFn`] (AVX2 table).
    pub fn avx2_reduce(c: Combine, x: &[f32], p: &mut Partial) {
        // SAFETY: as for avx2_eval.
        unsafe { reduce_avx2(c, x, p) }
    }

    /// See [`ReduceFn`] (AVX-512 table).
    pub fn avx512_reduce(c: Combine, x: &[f32], p: &mut Partial) {
        // SAFETY: as for avx512_eval.
        unsafe { reduce_avx512(c, x, p) }
    }

    /// See [`SoftmaxFn`] (AVX2 table).
    pub fn avx2_softmax(row: &mut [f32], scale: f32, mask: &[f32]) {
        // SAFETY: as for avx2_eval.
        unsafe { softmax_avx2(row, scale, mask) }
    }

    /// See [`SoftmaxFn`] (AVX-512 table).
    pub fn avx512_softmax(row: &mut [f32], scale: f32, mask: &[f32]) {
        // SAFETY: as for avx512_eval.
        unsafe { softmax_avx512(row, scale, mask) }
    }

    /// See [`SoftmaxExpFn`] (AVX2 table).
    pub fn avx2_softmax_exp(row: &mut [f32], scale: f32, mask: &[f32]) -> f32 {
        // SAFETY: as for avx2_eval.
        unsafe { softmax_exp_avx2(row, scale, mask) }
    }

    /// See [`SoftmaxExpFn`] (AVX-512 table).
    pub fn avx512_softmax_exp(row: &mut [f32], scale: f32, mask: &[f32]) -> f32 {
        // SAFETY: as for avx512_eval.
        unsafe { softmax_exp_avx512(row, scale, mask) }
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
            let mut vals = vec![0f32; ops.len() * super::SLOT];
            super::fill_consts(&ops, &mut vals);
            vals[..len].copy_from_slice(&a);
            vals[super::SLOT..super::SLOT + len].copy_from_slice(&b);
            (kern.eval)(&ops, &order, &[], len, &mut vals, &[0.25]);
            for j in 0..len {
                let (x, y) = (a[j] as f64, b[j] as f64);
                let e = x.exp();
                let want = if x > 0.5 {
                    1.0 / (1.0 + (-e).exp())
                } else {
                    unsafe { crate::vmath::erf((x * y) as f32) }.max(y.tanh() as f32) as f64
                };
                let got = vals[10 * super::SLOT + j] as f64;
                assert!((got - want).abs() < 1e-6, "{} len {len} at {j}", kern.isa);
                let got = vals[13 * super::SLOT + j] as f64;
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

    /// Round (half to even), Floor and Ceil bit for bit as Rust's, ties, signed zeros,
    /// large values, infinities and NaN included.
    fn rounding(kern: &Kernels) {
        use ScalarOp::{Load, Unary as U};
        let ops = vec![
            Load(0),
            U(Unary::Round, 0),
            U(Unary::Floor, 0),
            U(Unary::Ceil, 0),
        ];
        let order: Vec<usize> = (0..ops.len()).collect();
        let mut xs: Vec<f32> = vec![
            0.5,
            1.5,
            2.5,
            -0.5,
            -1.5,
            -2.5,
            -0.0,
            0.0,
            0.49999997,
            -0.3,
            8388607.5,
            8388609.0,
            1e30,
            -1e30,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1e-40,
            -1e-40,
        ];
        xs.extend(crate::testing::rand_vec(45, 5).iter().map(|v| v * 600.0));
        let len = xs.len();
        let mut vals = vec![0f32; ops.len() * super::SLOT];
        vals[..len].copy_from_slice(&xs);
        (kern.eval)(&ops, &order, &[], len, &mut vals, &[]);
        let rust: [fn(f32) -> f32; 3] = [f32::round_ties_even, f32::floor, f32::ceil];
        for (k, f) in rust.iter().enumerate() {
            for (j, &x) in xs.iter().enumerate() {
                let (got, want) = (vals[(k + 1) * super::SLOT + j], f(x));
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "{} op {k} of {x}: {got} vs {want}",
                    kern.isa
                );
            }
        }
    }

    isa_tests!(rounding_matches_rust, rounding);

    fn softmax_matches(kern: &Kernels) {
        // Masked and not (the unmasked form only scales), odd lengths and whole vectors.
        for (n, masked) in [1, 3, 17, 63, 64, 1000]
            .into_iter()
            .flat_map(|n| [(n, true), (n, false)])
        {
            let x = crate::testing::rand_vec(n, n as u64);
            let mut mask = crate::testing::rand_vec(n, 9);
            mask[0] = f32::NEG_INFINITY;
            if !masked {
                mask.fill(0.0);
            }
            let mut row = x.clone();
            (kern.softmax)(&mut row, 0.7, if masked { &mask } else { &[] });
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

    fn softmax_cols_match(kern: &Kernels) {
        // 5 entries down 37 columns (a partial vector at the end), x with a row step of
        // 40, y of 37; one column all -inf, one with a NaN.
        let (n, width, xs) = (5usize, 37usize, 40usize);
        let mut x = crate::testing::rand_vec(n * xs, 9);
        for i in 0..n {
            x[i * xs + 3] = f32::NEG_INFINITY;
        }
        x[2 * xs + 7] = f32::NAN;
        let mut y = vec![0f32; n * width];
        unsafe {
            (kern.softmax_cols)(
                x.as_ptr(),
                xs as isize,
                y.as_mut_ptr(),
                width as isize,
                n,
                width,
            )
        };
        for c in 0..width {
            let mut col: Vec<f32> = (0..n).map(|i| x[i * xs + c]).collect();
            crate::program::portable::softmax(&mut col, 1.0, &[]);
            for i in 0..n {
                let (got, want) = (y[i * width + c], col[i]);
                assert!(
                    (got.is_nan() && want.is_nan()) || (got - want).abs() <= 1e-6,
                    "{} column {c} entry {i}: {got} vs {want}",
                    kern.isa
                );
            }
        }
        // In place.
        let mut z = x.clone();
        unsafe {
            (kern.softmax_cols)(
                z.as_ptr(),
                xs as isize,
                z.as_mut_ptr(),
                xs as isize,
                n,
                width,
            )
        };
        for i in 0..n {
            for c in [0, 5, 36] {
                assert!((z[i * xs + c] - y[i * width + c]).abs() <= 1e-7);
            }
        }
    }

    isa_tests!(softmax_columns, softmax_cols_match);

    fn layer_norm_matches(kern: &Kernels) {
        for n in [1, 3, 17, 63, 384, 1000] {
            let x: Vec<f32> = crate::testing::rand_vec(n, n as u64)
                .iter()
                .map(|v| v * 3.0 + 1.0)
                .collect();
            let g = crate::testing::rand_vec(n, 5);
            let b = crate::testing::rand_vec(n, 6);
            let mut out = vec![f32::NAN; n];
            (kern.layer_norm)(&x, &g, &b, 1e-5, &mut out);
            let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
            let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
            for j in 0..n {
                let want = (x[j] as f64 - mean) / (var + 1e-5).sqrt() * g[j] as f64 + b[j] as f64;
                assert!(
                    (out[j] as f64 - want).abs() < 2e-5 * (1.0 + want.abs()),
                    "{} n {n} at {j}",
                    kern.isa
                );
            }
            (kern.layer_norm)(&x, &[], &[], 1e-5, &mut out);
            let want0 = (x[0] as f64 - mean) / (var + 1e-5).sqrt();
            assert!((out[0] as f64 - want0).abs() < 2e-5 * (1.0 + want0.abs()));
        }
    }

    isa_tests!(layer_norm_rows, layer_norm_matches);

    /// Random programs (every op kind, operands often the op just before, so register
    /// tiles hand values on in registers) evaluated whole with stores skipped where
    /// [`super::kept_values`] allows: the values the caller reads are the same bits as
    /// when each op is evaluated alone from memory (every operand read from its slot), at
    /// lengths with and without whole tiles.
    fn check_kept(kern: &Kernels) {
        use smelt_ir::kernel::ScalarOp::{Binary as B, Const, Load, Reduced, Select, Unary as U};
        let unary = [
            Unary::Neg,
            Unary::Abs,
            Unary::Exp,
            Unary::Log,
            Unary::Sqrt,
            Unary::Rsqrt,
            Unary::Recip,
            Unary::Tanh,
            Unary::Erf,
            Unary::Sigmoid,
            Unary::Relu,
            Unary::Gelu,
            Unary::GeluTanh,
            Unary::Silu,
            Unary::HardSwish,
            Unary::Sign,
            Unary::Not,
            Unary::IsNan,
            Unary::Floor,
            Unary::Ceil,
            Unary::Round,
            Unary::Sin,
            Unary::Softplus,
        ];
        let binary = [
            Binary::Add,
            Binary::Sub,
            Binary::Mul,
            Binary::Div,
            Binary::Max,
            Binary::Min,
            Binary::Pow,
            Binary::Eq,
            Binary::Lt,
            Binary::Le,
            Binary::Gt,
            Binary::Ge,
            Binary::And,
            Binary::Or,
        ];
        let mut pick = crate::testing::Picker(7u64);
        let mut next = |n: usize| pick.below(n);
        for case in 0..200 {
            let mut ops = vec![Load(0), Load(1), Const(0.5)];
            for _ in 0..3 + next(20) {
                let last = ops.len() - 1;
                // Mostly the op just before, else any earlier one.
                let picks: Vec<usize> = (0..3)
                    .map(|_| if next(3) != 0 { last } else { next(last + 1) })
                    .collect();
                let (a, b, c) = (picks[0], picks[1], picks[2]);
                ops.push(match next(7) {
                    0..=2 => U(unary[next(unary.len())], a),
                    3..=5 => B(binary[next(binary.len())], a, b),
                    _ if next(2) == 0 => Reduced(next(2)),
                    _ => Select(a, b, c),
                });
            }
            let n = ops.len();
            let mut roots = vec![n - 1];
            roots.extend((3..n - 1).filter(|_| next(4) == 0));
            let order = smelt_ir::kernel::check::deps(&ops, &roots);
            let keep = super::kept_values(&ops, &order, &roots);
            for len in [5, 64, 200, 256] {
                let x = crate::testing::rand_vec(len, case);
                let y = crate::testing::rand_vec(len, case + 1000);
                let reduced = [0.25, -1.5];
                let filled = || {
                    let mut vals = vec![f32::NAN; n * super::SLOT];
                    super::fill_consts(&ops, &mut vals);
                    vals[..len].copy_from_slice(&x);
                    vals[super::SLOT..super::SLOT + len].copy_from_slice(&y);
                    vals
                };
                let mut all = filled();
                for &i in &order {
                    (kern.eval)(&ops, &[i], &[], len, &mut all, &reduced);
                }
                let mut some = filled();
                (kern.eval)(&ops, &order, &keep, len, &mut some, &reduced);
                for &r in &roots {
                    for j in 0..len {
                        let (a, b) = (all[r * super::SLOT + j], some[r * super::SLOT + j]);
                        assert!(
                            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                            "{} case {case} len {len} op {r} ({:?}) at {j}: {a} vs {b}",
                            kern.isa,
                            ops[r]
                        );
                    }
                }
            }
        }
    }

    isa_tests!(register_tiles_match_ops_alone, check_kept);
}
