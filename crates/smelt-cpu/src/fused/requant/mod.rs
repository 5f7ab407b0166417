//! The common epilogue of an integer product, run without the interpreter: per output
//! channel (a convolution's rows, a matrix product's columns) `v = acc * scale + bias`,
//! then optionally a fake quantization (`QuantizeLinear` then `DequantizeLinear`, as
//! onnxruntime's QDQ models put after every product), `+ residual` (a tensor of the
//! result's shape: f32, or 8-bit dequantized as it is read) and Relu or GELU; `v` stored
//! as f32 (or fake-quantized, as f32) and/or quantized, `clamp(round_half_even(v / s) +
//! zp)` stored as 8-bit integers. That is a QDQ model's rescale, bias, residual Add,
//! activation and next `QuantizeLinear`. The same f32 operations in the same order as the
//! scalar program (GELU by the kernels' vector math), so on AVX-512 the result is the
//! interpreter's bit for bit; the vector forms are in [`vector`].

mod vector;

use super::epilogue::{Layout, Win};
use super::Mem;
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::{Binary, BufferKind, Loop, ScalarOp as S, Unary};
use smelt_ir::{DType, Tensor};
use smelt_kernels::gemm::TileSink;

/// A window stepping by rows, its columns contiguous: element `(b, i, j)` at
/// `batch[b] + i * rs + j` of buffer `slot`.
struct Rows {
    slot: usize,
    batch: Vec<isize>,
    rs: isize,
}

impl Rows {
    fn of(w: Win) -> Option<Rows> {
        (w.cs == 1).then_some(Rows {
            slot: w.slot,
            batch: w.batch,
            rs: w.rs,
        })
    }

    /// Where row `i` of batch `b` starts, at column `j0`.
    ///
    /// # Safety
    /// `mem` holds the buffers the window was validated against.
    unsafe fn at<T>(&self, mem: &Mem, b: usize, i: usize, j0: usize) -> *mut T {
        (mem.ptrs[self.slot] as *mut T).offset(self.batch[b] + i as isize * self.rs + j0 as isize)
    }
}

/// A quantization's parameters: `clamp(round_half_even(v / s) + zp, lo, hi)`, and back
/// `(q - zp) * s`.
#[derive(Clone, Copy, PartialEq)]
struct Fq {
    s: f32,
    zp: f32,
    lo: f32,
    hi: f32,
}

impl Fq {
    /// The quantized value, as f32.
    #[inline(always)]
    fn quantize(&self, v: f32) -> f32 {
        ((v / self.s).round_ties_even() + self.zp)
            .min(self.hi)
            .max(self.lo)
    }

    /// A quantized value's f32 value.
    #[inline(always)]
    fn dequantize(&self, q: f32) -> f32 {
        (q - self.zp) * self.s
    }
}

/// The residual operand: an f32 tensor, or 8-bit values dequantized as they are read
/// (`(q - zp) * s`, a QDQ model's `DequantizeLinear` of a quantized skip connection).
struct Residual {
    rows: Rows,
    /// The dequantization and whether the bytes are signed; None for f32.
    dq: Option<(Fq, bool)>,
}

impl Residual {
    /// Row `i` of batch `b` from column `j0`.
    ///
    /// # Safety
    /// `mem` holds the buffers the window was validated against.
    unsafe fn row(&self, mem: &Mem, b: usize, i: usize, j0: usize) -> ResidualRow {
        match self.dq {
            None => ResidualRow::F32(self.rows.at::<f32>(mem, b, i, j0)),
            Some((f, signed)) => ResidualRow::Bytes(self.rows.at::<u8>(mem, b, i, j0), f, signed),
        }
    }
}

/// A residual row resolved for one run.
#[derive(Clone, Copy)]
enum ResidualRow {
    F32(*const f32),
    Bytes(*const u8, Fq, bool),
}

impl ResidualRow {
    /// Element `j`, as f32.
    ///
    /// # Safety
    /// `j` lies inside the row.
    #[inline(always)]
    unsafe fn get(self, j: usize) -> f32 {
        match self {
            ResidualRow::F32(p) => *p.add(j),
            ResidualRow::Bytes(p, f, signed) => {
                let q = if signed {
                    *p.add(j) as i8 as f32
                } else {
                    *p.add(j) as f32
                };
                f.dequantize(q)
            }
        }
    }
}

/// The quantizing store.
struct Quant {
    p: Fq,
    signed: bool,
    dst: Rows,
}

/// One value per output channel: per row of the result or per column, constant, or per
/// column computed at run time (a dynamic quantization's scale times the weights'), read
/// from its buffer at (slot, element offset).
enum Chan {
    Row(Vec<f32>),
    Col(Vec<f32>),
    ColAt(usize, isize),
}

/// A [`Chan`] resolved for one run: the value of row `i` at `Row(p)[i]`, of column `j` at
/// `Col(p)[j]`.
#[derive(Clone, Copy)]
enum ChanPtr {
    Row(*const f32),
    Col(*const f32),
}

impl Chan {
    /// Where its values are in this run.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    unsafe fn ptr(&self, mem: &Mem) -> ChanPtr {
        match self {
            Chan::Row(v) => ChanPtr::Row(v.as_ptr()),
            Chan::Col(v) => ChanPtr::Col(v.as_ptr()),
            Chan::ColAt(slot, off) => ChanPtr::Col((mem.ptrs[*slot] as *const f32).offset(*off)),
        }
    }
}

impl ChanPtr {
    /// The value of row `i`, column `j`.
    ///
    /// # Safety
    /// `i` and `j` lie inside the result.
    #[inline(always)]
    unsafe fn at(self, i: usize, j: usize) -> f32 {
        match self {
            ChanPtr::Row(p) => *p.add(i),
            ChanPtr::Col(p) => *p.add(j),
        }
    }
}

/// The activation applied before the stores.
#[derive(Clone, Copy, PartialEq)]
enum Act {
    None,
    Relu,
    Gelu,
}

/// A recognized epilogue.
pub(crate) struct Requant {
    scale: Chan,
    /// Zeros when the product has no bias (adding 0 changes only -0 to +0).
    bias: Chan,
    /// Fake quantization of `acc * scale + bias`, before the residual.
    fq: Option<Fq>,
    residual: Option<Residual>,
    act: Act,
    float_out: Option<Rows>,
    /// The f32 store holds the value fake-quantized with these parameters.
    float_fq: Option<Fq>,
    quant: Option<Quant>,
}

/// Reads the epilogue program `l`.
struct Reader<'a> {
    c: &'a Checker<'a>,
    weights: &'a [Tensor],
    l: &'a Loop,
    layout: &'a Layout,
}

impl Reader<'_> {
    fn op(&self, i: usize) -> Option<S> {
        self.l.ops.get(i).copied()
    }

    /// An immediate, or a constant loaded whole-broadcast (an integer zero point).
    fn konst(&self, i: usize) -> Option<f32> {
        match self.op(i)? {
            S::Const(v) => Some(v),
            S::Load(k) => {
                let r = self.l.loads.get(k)?;
                let BufferKind::Weight(wi) = self.c.plan.buffer(r.buffer).kind else {
                    return None;
                };
                if r.strides.iter().any(|&st| st != 0) {
                    return None;
                }
                let v = self.weights.get(wi)?.to_f64().ok()?;
                v.get(r.offset).map(|&x| x as f32)
            }
            _ => None,
        }
    }

    /// A per-channel value: a weight loaded with column step 0 (one value per row of `m`)
    /// or row step 0 and column step 1 (one per column of `n`); or an f32 tensor computed
    /// at run time, one per column.
    fn per_chan(&self, i: usize, m: usize, n: usize) -> Option<Chan> {
        let S::Load(k) = self.op(i)? else {
            return None;
        };
        let r = self.l.loads.get(k)?;
        let w = self.layout.window(r)?;
        let b0 = *w.batch.first()?;
        if w.batch.iter().any(|&b| b != b0) {
            return None;
        }
        let buf = self.c.plan.buffer(r.buffer);
        let BufferKind::Weight(wi) = buf.kind else {
            return (buf.dtype == DType::F32 && (w.rs, w.cs) == (0, 1))
                .then_some(Chan::ColAt(w.slot, b0));
        };
        let data = self.weights.get(wi)?.as_f32()?;
        let pick = |count: usize, step: isize| -> Option<Vec<f32>> {
            (0..count)
                .map(|x| {
                    data.get(usize::try_from(b0 + x as isize * step).ok()?)
                        .copied()
                })
                .collect()
        };
        match (w.rs, w.cs) {
            (rs, 0) => Some(Chan::Row(pick(m, rs)?)),
            (0, 1) => Some(Chan::Col(pick(n, 1)?)),
            _ => None,
        }
    }

    /// A tensor loaded element by element (a residual): f32, or 8-bit values
    /// dequantized, `Mul(Sub(q, zp), s)` or `Mul(q, s)` with constant parameters.
    fn elementwise(&self, i: usize) -> Option<Residual> {
        let load = |i: usize| -> Option<(Rows, DType)> {
            let S::Load(k) = self.op(i)? else {
                return None;
            };
            let r = self.l.loads.get(k)?;
            Some((
                Rows::of(self.layout.window(r)?)?,
                self.c.plan.buffer(r.buffer).dtype,
            ))
        };
        if let Some((rows, DType::F32)) = load(i) {
            return Some(Residual { rows, dq: None });
        }
        let S::Binary(Binary::Mul, x, y) = self.op(i)? else {
            return None;
        };
        let (q, s) = if matches!(self.op(x)?, S::Binary(Binary::Sub, ..) | S::Load(_)) {
            (x, y)
        } else {
            (y, x)
        };
        let (q, zp) = match self.op(q)? {
            S::Binary(Binary::Sub, q, zp) => (q, self.konst(zp)?),
            _ => (q, 0.0),
        };
        let (rows, dtype) = load(q)?;
        let signed = match dtype {
            DType::U8 => false,
            DType::I8 => true,
            _ => return None,
        };
        let (lo, hi) = if signed {
            (-128.0, 127.0)
        } else {
            (0.0, 255.0)
        };
        let f = Fq {
            s: self.konst(s)?,
            zp,
            lo,
            hi,
        };
        Some(Residual {
            rows,
            dq: Some((f, signed)),
        })
    }

    /// `Mul(Sub(q, zp), s)` of a quantization `q` (see [`Reader::quantized`]): (v, its
    /// parameters), `v` the value quantized.
    fn fake_quantized(&self, i: usize) -> Option<(usize, Fq)> {
        let S::Binary(Binary::Mul, x, y) = self.op(i)? else {
            return None;
        };
        let (sub, s) = match self.op(x)? {
            S::Binary(Binary::Sub, ..) => (x, y),
            _ => (y, x),
        };
        let S::Binary(Binary::Sub, q, zp) = self.op(sub)? else {
            return None;
        };
        let (v, p) = self.quantized(q)?;
        (p.s == self.konst(s)? && p.zp == self.konst(zp)?).then_some((v, p))
    }

    /// `Max(Min(Add(Round(Div(v, s)), zp), hi), lo)`: (v, its parameters).
    fn quantized(&self, i: usize) -> Option<(usize, Fq)> {
        let S::Binary(Binary::Max, mn, lo) = self.op(i)? else {
            return None;
        };
        let S::Binary(Binary::Min, t, hi) = self.op(mn)? else {
            return None;
        };
        let (r, zp) = match self.op(t)? {
            S::Binary(Binary::Add, r, z) => (r, self.konst(z)?),
            _ => (t, 0.0),
        };
        let S::Unary(Unary::Round, d) = self.op(r)? else {
            return None;
        };
        let S::Binary(Binary::Div, v, s) = self.op(d)? else {
            return None;
        };
        let p = Fq {
            s: self.konst(s)?,
            zp,
            lo: self.konst(lo)?,
            hi: self.konst(hi)?,
        };
        Some((v, p))
    }
}

impl Requant {
    /// Recognizes the epilogue `l` of an anchor of `m` rows and `n` columns in `layout`,
    /// or None.
    pub(crate) fn recognize(
        c: &Checker,
        weights: &[Tensor],
        l: &Loop,
        layout: &Layout,
        [m, n]: [usize; 2],
    ) -> Option<Requant> {
        let rd = Reader {
            c,
            weights,
            l,
            layout,
        };
        // One or two stores: the value v (f32, or fake-quantized) and/or v quantized.
        let (mut v, mut float_out, mut float_fq, mut quant) = (None, None, None, None);
        if l.stores.is_empty() || l.stores.len() > 2 {
            return None;
        }
        for st in &l.stores {
            let dtype = c.plan.buffer(st.dst.buffer).dtype;
            let dst = Rows::of(layout.window(&st.dst)?)?;
            let val = match dtype {
                DType::F32 if float_out.is_none() => {
                    float_out = Some(dst);
                    match rd.fake_quantized(st.value) {
                        Some((w, p)) => {
                            float_fq = Some(p);
                            w
                        }
                        None => st.value,
                    }
                }
                DType::U8 | DType::I8 if quant.is_none() => {
                    let (val, p) = rd.quantized(st.value)?;
                    quant = Some(Quant {
                        p,
                        signed: dtype == DType::I8,
                        dst,
                    });
                    val
                }
                _ => return None,
            };
            if v.is_some_and(|x| x != val) {
                return None;
            }
            v = Some(val);
        }
        let v = v?;
        let (w, act) = match rd.op(v)? {
            S::Unary(Unary::Relu, w) => (w, Act::Relu),
            S::Unary(Unary::Gelu, w) => (w, Act::Gelu),
            _ => (v, Act::None),
        };
        let is_mul = |i: usize| matches!(rd.op(i), Some(S::Binary(Binary::Mul, ..)));
        // Back from the activation's input: [+ residual] [fake quantization] [+ bias]
        // product * scale (the residual may also come after the bias without a fake
        // quantization between).
        let mut at = w;
        let (mut residual, mut bias, mut fq) = (None, None, None);
        for _ in 0..3 {
            if let Some((inner, p)) = rd.fake_quantized(at) {
                if fq.is_some() || bias.is_some() {
                    return None;
                }
                fq = Some(p);
                at = inner;
                continue;
            }
            let S::Binary(Binary::Add, x, y) = rd.op(at)? else {
                break;
            };
            // The side that leads back to the product.
            let (inner, other) =
                if is_mul(x) || matches!(rd.op(x), Some(S::Binary(Binary::Add, ..))) {
                    (x, y)
                } else {
                    (y, x)
                };
            if bias.is_none() && is_mul(inner) && rd.fake_quantized(inner).is_none() {
                if let Some(b) = rd.per_chan(other, m, n) {
                    bias = Some(b);
                    at = inner;
                    continue;
                }
            }
            if residual.is_none() && fq.is_none() {
                residual = Some(rd.elementwise(other)?);
                at = inner;
                continue;
            }
            return None;
        }
        let S::Binary(Binary::Mul, a, sc) = rd.op(at)? else {
            return None;
        };
        let (a, sc) = if rd.op(a)? == S::Acc {
            (a, sc)
        } else {
            (sc, a)
        };
        if rd.op(a)? != S::Acc {
            return None;
        }
        let scale = rd.per_chan(sc, m, n)?;
        Some(Requant {
            bias: bias.unwrap_or_else(|| match &scale {
                Chan::Row(_) => Chan::Row(vec![0.0; m]),
                Chan::Col(_) | Chan::ColAt(..) => Chan::Col(vec![0.0; n]),
            }),
            scale,
            fq,
            residual,
            act,
            float_out,
            float_fq,
            quant,
        })
    }

    /// What it computes, for `explain`.
    pub(crate) fn describe(&self) -> String {
        let mut s = String::from("rescale");
        if self.fq.is_some() {
            s.push_str("+fakequant");
        }
        match &self.residual {
            Some(Residual { dq: Some(_), .. }) => s.push_str("+residual(8-bit)"),
            Some(_) => s.push_str("+residual"),
            None => {}
        }
        match self.act {
            Act::Relu => s.push_str("+relu"),
            Act::Gelu => s.push_str("+gelu"),
            Act::None => {}
        }
        if self.quant.is_some() {
            s.push_str("+requantize");
        }
        if self.float_fq.is_some() {
            s.push_str("+fakequant store");
        }
        s
    }
}

/// The sink applying a [`Requant`] to f32 tiles of exact integer sums.
pub(crate) struct RequantSink<'a> {
    pub q: &'a Requant,
    pub mem: &'a Mem,
    /// The kernel table's ISA (which form of the tile runs).
    pub isa: smelt_kernels::Isa,
}

/// Columns `from..cols` of row `i` (its tile row `src`) in plain Rust.
///
/// # Safety
/// The plan validated the windows against `mem`; the row lies inside the result.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn row_scalar(
    q: &Requant,
    mem: &Mem,
    b: usize,
    i: usize,
    j0: usize,
    from: usize,
    cols: usize,
    src: &[f32],
) {
    let res = q.residual.as_ref().map(|w| w.row(mem, b, i, j0));
    let fo = q.float_out.as_ref().map(|w| w.at::<f32>(mem, b, i, j0));
    let (scale, bias) = (q.scale.ptr(mem), q.bias.ptr(mem));
    for (j, &v) in src.iter().enumerate().take(cols).skip(from) {
        let mut x = v * scale.at(i, j0 + j) + bias.at(i, j0 + j);
        if let Some(f) = &q.fq {
            x = f.dequantize(f.quantize(x));
        }
        if let Some(p) = res {
            x += p.get(j);
        }
        match q.act {
            Act::Relu => x = smelt_kernels::vmath::relu(x),
            Act::Gelu => x = smelt_kernels::vmath::gelu(x),
            Act::None => {}
        }
        if let Some(p) = fo {
            *p.add(j) = match &q.float_fq {
                Some(f) => f.dequantize(f.quantize(x)),
                None => x,
            };
        }
        if let Some(qo) = &q.quant {
            let y = qo.p.quantize(x);
            if qo.signed {
                *qo.dst.at::<i8>(mem, b, i, j0).add(j) = y as i8;
            } else {
                *qo.dst.at::<u8>(mem, b, i, j0).add(j) = y as u8;
            }
        }
    }
}

/// One tile in plain Rust.
///
/// # Safety
/// The plan validated the windows against `mem`; the tile lies inside the result.
#[allow(clippy::too_many_arguments)]
unsafe fn tile_portable(
    q: &Requant,
    mem: &Mem,
    b: usize,
    i0: usize,
    rows: usize,
    j0: usize,
    cols: usize,
    t: &[f32],
    ld: usize,
) {
    for r in 0..rows {
        row_scalar(q, mem, b, i0 + r, j0, 0, cols, &t[r * ld..r * ld + cols]);
    }
}

impl TileSink for RequantSink<'_> {
    fn tile(
        &self,
        b: usize,
        i0: usize,
        j0: usize,
        rows: usize,
        cols: usize,
        t: &mut [f32],
        ld: usize,
    ) {
        // SAFETY: the plan validated the windows against the buffers; the tile lies inside
        // the anchor's result.
        unsafe {
            #[cfg(target_arch = "x86_64")]
            match self.isa {
                smelt_kernels::Isa::Avx512 => {
                    return vector::tile_avx512(self.q, self.mem, b, i0, rows, j0, cols, t, ld)
                }
                smelt_kernels::Isa::Avx2 => {
                    return vector::tile_avx2(self.q, self.mem, b, i0, rows, j0, cols, t, ld)
                }
                smelt_kernels::Isa::Portable => {}
            }
            tile_portable(self.q, self.mem, b, i0, rows, j0, cols, t, ld)
        }
    }
}
