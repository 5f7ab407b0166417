//! The common epilogue of an integer product, run without the interpreter: per output
//! channel (a convolution's rows, a matrix product's columns) `v = acc * scale + bias`,
//! then optionally a fake quantization (`QuantizeLinear` then `DequantizeLinear`, as
//! onnxruntime's QDQ models put after every product), `+ residual` (an f32 tensor of the
//! result's shape) and Relu or GELU; `v` stored as f32 (or fake-quantized, as f32) and/or
//! quantized, `clamp(round_half_even(v / s) + zp)` stored as 8-bit integers. That is a QDQ
//! model's rescale, bias, residual Add, activation and next `QuantizeLinear`. The same f32
//! operations in the same order as the scalar program (GELU by the kernels' vector math), so
//! on AVX-512 the result is the interpreter's bit for bit.

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
    residual: Option<Rows>,
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

    /// An f32 tensor loaded element by element (a residual).
    fn elementwise(&self, i: usize) -> Option<Rows> {
        let S::Load(k) = self.op(i)? else {
            return None;
        };
        let r = self.l.loads.get(k)?;
        if self.c.plan.buffer(r.buffer).dtype != DType::F32 {
            return None;
        }
        Rows::of(self.layout.window(r)?)
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
        if self.residual.is_some() {
            s.push_str("+residual");
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
    let res = q.residual.as_ref().map(|w| w.at::<f32>(mem, b, i, j0));
    let fo = q.float_out.as_ref().map(|w| w.at::<f32>(mem, b, i, j0));
    let (scale, bias) = (q.scale.ptr(mem), q.bias.ptr(mem));
    for (j, &v) in src.iter().enumerate().take(cols).skip(from) {
        let mut x = v * scale.at(i, j0 + j) + bias.at(i, j0 + j);
        if let Some(f) = &q.fq {
            x = f.dequantize(f.quantize(x));
        }
        if let Some(p) = res {
            x += *p.add(j);
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

/// One tile in AVX2 registers, 8 columns at a time (the last few in plain Rust).
///
/// # Safety
/// As for [`tile_portable`], on a CPU with AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_avx2(
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
    use smelt_kernels::simd::Y8;
    use std::arch::x86_64::*;
    let whole = cols / 8 * 8;
    let (scale, bias) = (q.scale.ptr(mem), q.bias.ptr(mem));
    for r in 0..rows {
        let i = i0 + r;
        let src = &t[r * ld..r * ld + cols];
        let res = q.residual.as_ref().map(|w| w.at::<f32>(mem, b, i, j0));
        let fo = q.float_out.as_ref().map(|w| w.at::<f32>(mem, b, i, j0));
        let chan = |c: ChanPtr, j: usize| match c {
            ChanPtr::Row(p) => _mm256_set1_ps(*p.add(i)),
            ChanPtr::Col(p) => _mm256_loadu_ps(p.add(j0 + j)),
        };
        for j in (0..whole).step_by(8) {
            let mut x = _mm256_add_ps(
                _mm256_mul_ps(_mm256_loadu_ps(src.as_ptr().add(j)), chan(scale, j)),
                chan(bias, j),
            );
            if let Some(f) = &q.fq {
                x = dequantize8(quantize8(x, f), f);
            }
            if let Some(p) = res {
                x = _mm256_add_ps(x, _mm256_loadu_ps(p.add(j)));
            }
            match q.act {
                Act::Relu => x = smelt_kernels::vmath::relu(Y8(x)).0,
                Act::Gelu => x = smelt_kernels::vmath::gelu(Y8(x)).0,
                Act::None => {}
            }
            if let Some(p) = fo {
                let out = match &q.float_fq {
                    Some(f) => dequantize8(quantize8(x, f), f),
                    None => x,
                };
                _mm256_storeu_ps(p.add(j), out);
            }
            if let Some(qo) = &q.quant {
                let y = quantize8(x, &qo.p);
                // In range and integral: pack to 16 then 8 bits without saturating.
                let v = _mm256_cvtps_epi32(y);
                let w =
                    _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
                let bytes = if qo.signed {
                    _mm_packs_epi16(w, w)
                } else {
                    _mm_packus_epi16(w, w)
                };
                _mm_storel_epi64(qo.dst.at::<u8>(mem, b, i, j0).add(j) as *mut __m128i, bytes);
            }
        }
        row_scalar(q, mem, b, i, j0, whole, cols, src);
    }
}

/// One tile in AVX-512 registers, 16 columns at a time (`roundscale` to nearest even is
/// `round_ties_even`; the clamped values convert exactly).
///
/// # Safety
/// As for [`tile_portable`], on a CPU with AVX-512F/BW/VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_avx512(
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
    use std::arch::x86_64::*;
    let (scale, bias) = (q.scale.ptr(mem), q.bias.ptr(mem));
    for r in 0..rows {
        let i = i0 + r;
        // Per row: one value splat; per column: loaded with the columns.
        let chan = |c: ChanPtr, j: usize, mask: __mmask16| match c {
            ChanPtr::Row(p) => _mm512_set1_ps(*p.add(i)),
            ChanPtr::Col(p) => _mm512_maskz_loadu_ps(mask, p.add(j0 + j)),
        };
        let src = t.as_ptr().add(r * ld);
        let res = q.residual.as_ref().map(|w| w.at::<f32>(mem, b, i, j0));
        let fo = q.float_out.as_ref().map(|w| w.at::<f32>(mem, b, i, j0));
        let mut j = 0;
        while j < cols {
            let n = (cols - j).min(16);
            let mask: __mmask16 = if n == 16 { !0 } else { (1u16 << n) - 1 };
            let (sc, bi) = (chan(scale, j, mask), chan(bias, j, mask));
            let mut x = _mm512_add_ps(
                _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, src.add(j)), sc),
                bi,
            );
            if let Some(f) = &q.fq {
                x = dequantize16(quantize16(x, f), f);
            }
            if let Some(p) = res {
                x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask, p.add(j)));
            }
            match q.act {
                Act::Relu => x = smelt_kernels::vmath::relu(smelt_kernels::simd::Z16(x)).0,
                Act::Gelu => x = smelt_kernels::vmath::gelu(smelt_kernels::simd::Z16(x)).0,
                Act::None => {}
            }
            // The quantization, once for both stores when they share it.
            let y = q.quant.as_ref().map(|qo| quantize16(x, &qo.p));
            if let Some(p) = fo {
                let out = match (&q.float_fq, &q.quant, y) {
                    (Some(f), Some(qo), Some(y)) if qo.p == *f => dequantize16(y, f),
                    (Some(f), ..) => dequantize16(quantize16(x, f), f),
                    _ => x,
                };
                _mm512_mask_storeu_ps(p.add(j), mask, out);
            }
            if let (Some(qo), Some(y)) = (&q.quant, y) {
                let iv = _mm512_cvtps_epi32(y);
                let bytes = if qo.signed {
                    _mm512_cvtsepi32_epi8(iv)
                } else {
                    _mm512_cvtusepi32_epi8(iv)
                };
                _mm_mask_storeu_epi8(qo.dst.at::<i8>(mem, b, i, j0).add(j), mask, bytes);
            }
            j += 16;
        }
    }
}

/// [`Fq::quantize`] of 8 lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn quantize8(x: std::arch::x86_64::__m256, f: &Fq) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    let y = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_div_ps(
        x,
        _mm256_set1_ps(f.s),
    ));
    let y = _mm256_add_ps(y, _mm256_set1_ps(f.zp));
    _mm256_max_ps(_mm256_min_ps(y, _mm256_set1_ps(f.hi)), _mm256_set1_ps(f.lo))
}

/// [`Fq::dequantize`] of 8 lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dequantize8(y: std::arch::x86_64::__m256, f: &Fq) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    _mm256_mul_ps(_mm256_sub_ps(y, _mm256_set1_ps(f.zp)), _mm256_set1_ps(f.s))
}

/// [`Fq::quantize`] of 16 lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn quantize16(x: std::arch::x86_64::__m512, f: &Fq) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let y = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_div_ps(x, _mm512_set1_ps(f.s)),
    );
    let y = _mm512_add_ps(y, _mm512_set1_ps(f.zp));
    _mm512_max_ps(_mm512_min_ps(y, _mm512_set1_ps(f.hi)), _mm512_set1_ps(f.lo))
}

/// [`Fq::dequantize`] of 16 lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dequantize16(y: std::arch::x86_64::__m512, f: &Fq) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    _mm512_mul_ps(_mm512_sub_ps(y, _mm512_set1_ps(f.zp)), _mm512_set1_ps(f.s))
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
                    return tile_avx512(self.q, self.mem, b, i0, rows, j0, cols, t, ld)
                }
                smelt_kernels::Isa::Avx2 => {
                    return tile_avx2(self.q, self.mem, b, i0, rows, j0, cols, t, ld)
                }
                smelt_kernels::Isa::Portable => {}
            }
            tile_portable(self.q, self.mem, b, i0, rows, j0, cols, t, ld)
        }
    }
}
