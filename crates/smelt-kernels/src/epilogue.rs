//! The fused GEMM epilogue as data:
//! `out = act2((act1(alpha * acc + bias) * scale + shift) + residual)`,
//! applied to each finished tile while it is still in L1 (a few register passes per row),
//! and stored straight into the destination. Bias is per row (a convolution's output
//! channel) or per column (a linear layer's output feature).

use crate::gemm::TileSink;
use crate::simd::Vf;
use crate::vmath;

/// An activation of the fused epilogue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Act {
    /// None.
    None,
    /// max(x, 0).
    Relu,
    /// GELU, erf form.
    Gelu,
    /// GELU, tanh form.
    GeluTanh,
    /// x * sigmoid(x).
    Silu,
    /// x * clamp(x / 6 + 1/2, 0, 1).
    HardSwish,
    /// 1 / (1 + e^-x).
    Sigmoid,
    /// tanh x.
    Tanh,
    /// min(max(x, lo), hi).
    Clip(f32, f32),
}

/// A matrix of f32 in batches: element `(b, i, j)` of batch `b` at
/// `ptr + batch[b] + i * rs + j` (unit column step).
#[derive(Debug, Clone, Copy)]
pub struct RowMajor<'a> {
    /// Element (0, 0) of batch 0, before the batch offset.
    pub ptr: *mut f32,
    /// Where each batch starts (one entry: shared by every batch).
    pub batch: &'a [isize],
    /// Step between rows.
    pub rs: isize,
    /// Step between columns: 1, or (an output written transposed, as a blocked product's
    /// lanes stored to the plain layout's channel planes) the step between them.
    pub cs: isize,
}

impl RowMajor<'_> {
    #[inline(always)]
    fn row(&self, b: usize, i: usize) -> *mut f32 {
        let off = self.batch[if self.batch.len() == 1 { 0 } else { b }];
        // SAFETY (callers): the creator guarantees every (b, i, j) of the product exists.
        unsafe { self.ptr.offset(off + i as isize * self.rs) }
    }
}

/// A vector per batch: element `i` of batch `b` at `ptr + batch[b] + i * step`.
#[derive(Debug, Clone, Copy)]
pub struct Vector<'a> {
    /// Element 0 of batch 0, before the batch offset.
    pub ptr: *const f32,
    /// Where each batch starts (one entry: shared by every batch).
    pub batch: &'a [isize],
    /// Step between elements (1 for column biases).
    pub step: isize,
}

impl Vector<'_> {
    #[inline(always)]
    fn start(&self, b: usize) -> *const f32 {
        let off = self.batch[if self.batch.len() == 1 { 0 } else { b }];
        // SAFETY (callers): the creator guarantees every element of the product exists.
        unsafe { self.ptr.offset(off) }
    }
}

/// The fused epilogue of one product.
#[derive(Debug, Clone, Copy)]
pub struct Fused<'a> {
    /// Scale of the product.
    pub alpha: f32,
    /// Bias per row.
    pub row_bias: Option<Vector<'a>>,
    /// Bias per column (unit step).
    pub col_bias: Option<Vector<'a>>,
    /// Activation after the bias.
    pub act1: Act,
    /// After `act1`, a product and a sum per row or per column (an affine step such as a
    /// batch norm that could not fold): `(vector, per_row)`.
    pub scale: Option<(Vector<'a>, bool)>,
    /// See `scale`.
    pub shift: Option<(Vector<'a>, bool)>,
    /// Added after `act1` and the affine step.
    pub residual: Option<RowMajor<'a>>,
    /// Activation after the residual (None or Relu).
    pub act2: Act,
    /// Where the result goes.
    pub out: RowMajor<'a>,
}

// SAFETY: the pointers are read (biases, residual) or written at disjoint tiles (out); the
// creator guarantees they outlive the product.
unsafe impl Sync for Fused<'_> {}
unsafe impl Send for Fused<'_> {}

/// Applies `epi` to a tile (rows `i0..`, columns `j0..` of batch `b`, row stride `ld`).
pub type FinishFn = unsafe fn(&Fused, usize, usize, usize, usize, usize, &[f32], usize);

/// A tile sink that finishes tiles with the kernel table's fused epilogue.
pub struct FusedSink<'a> {
    /// The epilogue.
    pub epi: Fused<'a>,
    /// The ISA's finishing kernel.
    pub finish: FinishFn,
}

impl TileSink for FusedSink<'_> {
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
        // SAFETY: the creator of the sink guarantees the epilogue's pointers cover the product.
        unsafe { (self.finish)(&self.epi, b, i0, j0, rows, cols, t, ld) }
    }

    fn in_place(&self, b: usize, i0: usize, j0: usize) -> Option<(*mut f32, usize)> {
        let e = &self.epi;
        let store_only = e.alpha == 1.0
            && e.row_bias.is_none()
            && e.col_bias.is_none()
            && matches!(e.act1, Act::None)
            && e.scale.is_none()
            && e.shift.is_none()
            && e.residual.is_none()
            && matches!(e.act2, Act::None)
            && e.out.rs > 0
            && e.out.cs == 1;
        // SAFETY (of the pointer's use): the creator guarantees `out` covers the product.
        store_only.then(|| (e.out.row(b, i0).wrapping_add(j0), e.out.rs as usize))
    }

    fn fused(&self, b: usize, i0: usize, j0: usize) -> Option<TileEpi> {
        self.epi.tile_epi(b, i0, j0)
    }
}

/// A full tile's epilogue with its pointers resolved to the tile: what a fused
/// micro-kernel applies to its accumulators in registers before storing them, so the tile
/// never passes through scratch. The same operations in the same order as [`FinishFn`],
/// so both give the same bits. Null pointers mark absent operands.
#[derive(Clone, Copy, Debug)]
pub struct TileEpi {
    /// The tile's first output element.
    pub out: *mut f32,
    /// Output row stride.
    pub ldo: isize,
    /// Scale of the product.
    pub alpha: f32,
    /// The tile's first row bias (null: none), rows `row_bias_step` apart.
    pub row_bias: *const f32,
    /// Step between row biases.
    pub row_bias_step: isize,
    /// The tile's first column bias (null: none), unit step.
    pub col_bias: *const f32,
    /// Activation after the bias.
    pub act1: Act,
    /// The affine step after `act1`: the tile's first scale (null: none), per row
    /// (`scale_step` apart) or, where `scale_cols`, per column (unit step).
    pub scale: *const f32,
    /// See `scale`.
    pub scale_step: isize,
    /// See `scale`.
    pub scale_cols: bool,
    /// Likewise the shift after the scale.
    pub shift: *const f32,
    /// See `shift`.
    pub shift_step: isize,
    /// See `shift`.
    pub shift_cols: bool,
    /// The tile's first residual element (null: none).
    pub residual: *const f32,
    /// Residual row stride.
    pub ldr: isize,
    /// Activation after the residual.
    pub act2: Act,
}

impl Fused<'_> {
    /// The epilogue of the full tile at `(b, i0, j0)` for a fused micro-kernel.
    pub fn tile_epi(&self, b: usize, i0: usize, j0: usize) -> Option<TileEpi> {
        if self.out.cs != 1 {
            // The fused micro-kernels store whole rows; a transposed output goes through
            // `finish`.
            return None;
        }
        // A per-row affine operand steps along the rows; a per-column one starts at the
        // tile's column (unit step, as `finish` reads it).
        let affine = |v: &Option<(Vector, bool)>| match v {
            Some((v, true)) => (
                v.start(b).wrapping_offset(i0 as isize * v.step),
                v.step,
                false,
            ),
            Some((v, false)) => (v.start(b).wrapping_offset(j0 as isize * v.step), 0, true),
            None => (std::ptr::null(), 0, false),
        };
        let (scale, scale_step, scale_cols) = affine(&self.scale);
        let (shift, shift_step, shift_cols) = affine(&self.shift);
        // SAFETY (of the pointers' later use): the creator guarantees they cover the
        // product; here they are only offset, with wrapping arithmetic.
        let (row_bias, row_bias_step) = match &self.row_bias {
            Some(v) => (v.start(b).wrapping_offset(i0 as isize * v.step), v.step),
            None => (std::ptr::null(), 0),
        };
        let col_bias = self
            .col_bias
            .map_or(std::ptr::null(), |v| v.start(b).wrapping_add(j0));
        let (residual, ldr) = match &self.residual {
            Some(m) => (m.row(b, i0).wrapping_add(j0) as *const f32, m.rs),
            None => (std::ptr::null(), 0),
        };
        Some(TileEpi {
            out: self.out.row(b, i0).wrapping_add(j0),
            ldo: self.out.rs,
            alpha: self.alpha,
            row_bias,
            row_bias_step,
            col_bias,
            act1: self.act1,
            scale,
            scale_step,
            scale_cols,
            shift,
            shift_step,
            shift_cols,
            residual,
            ldr,
            act2: self.act2,
        })
    }
}

impl TileEpi {
    /// Finishes `V::LANES` accumulated values of tile row `r` from tile column `j`.
    ///
    /// # Safety
    /// The epilogue's pointers cover the tile's row `r`, columns `j .. j + V::LANES`.
    #[inline(always)]
    pub unsafe fn apply<V: Vf>(&self, r: usize, j: usize, acc: V) {
        let r = r as isize;
        let rb = if self.row_bias.is_null() {
            0.0
        } else {
            *self.row_bias.offset(r * self.row_bias_step)
        };
        let mut v = acc.fma(V::splat(self.alpha), V::splat(rb));
        if !self.col_bias.is_null() {
            v = v.add(V::load(self.col_bias.add(j)));
        }
        v = act(self.act1, v);
        if !self.scale.is_null() {
            v = v.mul(affine_operand(
                self.scale,
                self.scale_step,
                self.scale_cols,
                r,
                j,
            ));
        }
        if !self.shift.is_null() {
            v = v.add(affine_operand(
                self.shift,
                self.shift_step,
                self.shift_cols,
                r,
                j,
            ));
        }
        if !self.residual.is_null() {
            v = v.add(V::load(self.residual.offset(r * self.ldr).add(j)));
        }
        v = act(self.act2, v);
        v.store(self.out.offset(r * self.ldo).add(j));
    }

    /// Finishes a whole tile of `R` rows, each two vectors (`c0` from column 0, `c1` from
    /// column `V::LANES`), row by row: each row's two vectors go through every operation
    /// and are stored, the column operands loaded once per tile. (Operation by operation
    /// over the whole tile, LLVM kept the 2R accumulators in a stack array, since the
    /// activations' loops were not unrolled, and passed over it once per operation with a
    /// jump table per vector for the rarer activations: on a 2-vCPU Xeon, four ABBA rounds,
    /// YOLOv8n 15.19 -> 14.67 ms at one thread, ResNet-50 32.17 -> 31.46 at two.) Per
    /// element, the operations and their order are those of [`TileEpi::apply`], so the
    /// bits are too.
    ///
    /// # Safety
    /// The epilogue's pointers cover the tile's `R` rows and `2 * V::LANES` columns.
    #[inline(always)]
    pub unsafe fn apply_tile<V: Vf, const R: usize>(&self, c0: [V; R], c1: [V; R]) {
        let l = V::LANES;
        let alpha = V::splat(self.alpha);
        let (b0, b1) = if self.col_bias.is_null() {
            (V::splat(0.0), V::splat(0.0))
        } else {
            (V::load(self.col_bias), V::load(self.col_bias.add(l)))
        };
        for r in 0..R {
            let ri = r as isize;
            let rb = if self.row_bias.is_null() {
                V::splat(0.0)
            } else {
                V::splat(*self.row_bias.offset(ri * self.row_bias_step))
            };
            let mut x0 = c0[r].fma(alpha, rb);
            let mut x1 = c1[r].fma(alpha, rb);
            if !self.col_bias.is_null() {
                x0 = x0.add(b0);
                x1 = x1.add(b1);
            }
            (x0, x1) = act_pair(self.act1, x0, x1);
            if !self.scale.is_null() {
                x0 = x0.mul(affine_operand(
                    self.scale,
                    self.scale_step,
                    self.scale_cols,
                    ri,
                    0,
                ));
                x1 = x1.mul(affine_operand(
                    self.scale,
                    self.scale_step,
                    self.scale_cols,
                    ri,
                    l,
                ));
            }
            if !self.shift.is_null() {
                x0 = x0.add(affine_operand(
                    self.shift,
                    self.shift_step,
                    self.shift_cols,
                    ri,
                    0,
                ));
                x1 = x1.add(affine_operand(
                    self.shift,
                    self.shift_step,
                    self.shift_cols,
                    ri,
                    l,
                ));
            }
            if !self.residual.is_null() {
                let row = self.residual.offset(ri * self.ldr);
                x0 = x0.add(V::load(row));
                x1 = x1.add(V::load(row.add(l)));
            }
            (x0, x1) = act_pair(self.act2, x0, x1);
            let row = self.out.offset(ri * self.ldo);
            x0.store(row);
            x1.store(row.add(l));
        }
    }

    /// Asks for the lines of a `rows x cols` tile's output (for writing) and residual, so
    /// they arrive while the tile's k loop runs.
    #[inline(always)]
    pub fn prefetch(&self, rows: usize, cols: usize) {
        const LINE: usize = 16;
        for r in 0..rows as isize {
            let mut j = 0;
            while j < cols {
                crate::simd::prefetch_write(self.out.wrapping_offset(r * self.ldo).wrapping_add(j));
                if !self.residual.is_null() {
                    crate::simd::prefetch_read(
                        self.residual.wrapping_offset(r * self.ldr).wrapping_add(j),
                    );
                }
                j += LINE;
            }
        }
    }
}

/// Row `r`'s affine operand from tile column `j`: the columns' own (`cols`, unit step), or
/// one value per row (`step` apart).
#[inline(always)]
unsafe fn affine_operand<V: Vf>(p: *const f32, step: isize, cols: bool, r: isize, j: usize) -> V {
    if cols {
        V::load(p.add(j))
    } else {
        V::splat(*p.offset(r * step))
    }
}

/// An activation over lanes `V`.
#[inline(always)]
unsafe fn act<V: Vf>(a: Act, x: V) -> V {
    match a {
        Act::None => x,
        Act::Relu => vmath::relu(x),
        Act::Gelu => vmath::gelu(x),
        Act::GeluTanh => vmath::gelu_tanh(x),
        Act::Silu => vmath::silu(x),
        Act::HardSwish => vmath::hard_swish(x),
        Act::Sigmoid => vmath::sigmoid(x),
        Act::Tanh => vmath::tanh(x),
        Act::Clip(lo, hi) => vmath::clamp(x, lo, hi),
    }
}

/// An activation over a row's two vectors, its kind matched once.
#[inline(always)]
unsafe fn act_pair<V: Vf>(a: Act, x0: V, x1: V) -> (V, V) {
    match a {
        Act::None => (x0, x1),
        Act::Relu => (vmath::relu(x0), vmath::relu(x1)),
        Act::Gelu => (vmath::gelu(x0), vmath::gelu(x1)),
        Act::Silu => (vmath::silu(x0), vmath::silu(x1)),
        Act::Clip(lo, hi) => (vmath::clamp(x0, lo, hi), vmath::clamp(x1, lo, hi)),
        other => (act(other, x0), act(other, x1)),
    }
}

/// An activation known at compile time by its [`code`] (other codes: `given`, at run time).
#[inline(always)]
unsafe fn act_c<V: Vf, const A: u8>(x: V, given: Act) -> V {
    match A {
        0 => x,
        1 => vmath::relu(x),
        2 => vmath::gelu(x),
        3 => vmath::gelu_tanh(x),
        4 => vmath::silu(x),
        5 => vmath::hard_swish(x),
        6 => vmath::sigmoid(x),
        7 => vmath::tanh(x),
        _ => act(given, x),
    }
}

/// One row of `n` columns, `V::LANES` at a time in registers, the activations fixed at
/// compile time (codes of [`code`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn row<V: Vf, const A1: u8, const A2: u8>(
    e: &Fused,
    src: *const f32,
    n: usize,
    dst: *mut f32,
    rb: f32,
    cb: Option<*const f32>,
    post: &Post,
    res: Option<*const f32>,
) {
    let alpha = V::splat(e.alpha);
    let rbv = V::splat(rb);
    let mut j = 0;
    while j < n {
        let w = (n - j).min(V::LANES);
        let full = w == V::LANES;
        let ld = |p: *const f32| if full { V::load(p) } else { V::load_part(p, w) };
        let mut v = ld(src.add(j)).fma(alpha, rbv);
        if let Some(c) = cb {
            v = v.add(ld(c.add(j)));
        }
        v = act_c::<V, A1>(v, e.act1);
        match post.scale {
            Some(Side::Row(x)) => v = v.mul(V::splat(x)),
            Some(Side::Col(p)) => v = v.mul(ld(p.add(j))),
            None => {}
        }
        match post.shift {
            Some(Side::Row(x)) => v = v.add(V::splat(x)),
            Some(Side::Col(p)) => v = v.add(ld(p.add(j))),
            None => {}
        }
        if let Some(r) = res {
            v = v.add(ld(r.add(j)));
        }
        v = act_c::<V, A2>(v, e.act2);
        if full {
            v.store(dst.add(j));
        } else {
            v.store_part(dst.add(j), w);
        }
        j += w;
    }
}

/// One row's affine step after `act1`: a value for the row, or a pointer to its columns.
#[derive(Clone, Copy)]
enum Side {
    Row(f32),
    Col(*const f32),
}

/// The affine step of one row.
struct Post {
    scale: Option<Side>,
    shift: Option<Side>,
}

/// The affine operand of row `i` of batch `b` from column `j0` on.
#[inline(always)]
unsafe fn side(v: &Option<(Vector, bool)>, b: usize, i: usize, j0: usize) -> Option<Side> {
    v.as_ref().map(|(v, per_row)| {
        if *per_row {
            Side::Row(*v.start(b).offset(i as isize * v.step))
        } else {
            Side::Col(v.start(b).offset(j0 as isize * v.step))
        }
    })
}

/// Columns a transposed output's row is finished in at a time (see [`RowMajor::cs`]).
const TRANSPOSED_COLS: usize = 64;

/// See [`FinishFn`], over lanes `V`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn finish_body<V: Vf>(
    e: &Fused,
    b: usize,
    i0: usize,
    j0: usize,
    rows: usize,
    cols: usize,
    t: &[f32],
    ld: usize,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    let transposed = e.out.cs != 1;
    if !transposed {
        prefetch_next_tile(e, b, i0 + rows, j0, rows, cols);
    }
    // A transposed output's rows are finished into `line`, then stored column by column.
    let mut line = [0f32; TRANSPOSED_COLS];
    for r in 0..rows {
        let i = i0 + r;
        let src = t[r * ld..r * ld + cols].as_ptr();
        if !transposed {
            finish_row::<V>(e, b, i, j0, src, cols, e.out.row(b, i).add(j0));
            continue;
        }
        let out = e.out.row(b, i).offset(j0 as isize * e.out.cs);
        for c0 in (0..cols).step_by(TRANSPOSED_COLS) {
            let n = TRANSPOSED_COLS.min(cols - c0);
            finish_row::<V>(e, b, i, j0 + c0, src.add(c0), n, line.as_mut_ptr());
            for (c, &v) in line[..n].iter().enumerate() {
                *out.offset((c0 + c) as isize * e.out.cs) = v;
            }
        }
    }
}

/// Finishes columns `j0 .. j0 + cols` of row `i` of batch `b` from `src` into `dst`
/// (contiguous).
#[inline(always)]
unsafe fn finish_row<V: Vf>(
    e: &Fused,
    b: usize,
    i: usize,
    j0: usize,
    src: *const f32,
    cols: usize,
    dst: *mut f32,
) {
    let (a1, a2) = (code(e.act1), code(e.act2));
    let rb = match &e.row_bias {
        Some(v) => *v.start(b).offset(i as isize * v.step),
        None => 0.0,
    };
    let cb = e.col_bias.map(|v| v.start(b).add(j0));
    let res = e.residual.map(|m| m.row(b, i).add(j0) as *const f32);
    let post = Post {
        scale: side(&e.scale, b, i, j0),
        shift: side(&e.shift, b, i, j0),
    };
    match (a1, a2) {
        (0, 0) => row::<V, 0, 0>(e, src, cols, dst, rb, cb, &post, res),
        (0, 1) => row::<V, 0, 1>(e, src, cols, dst, rb, cb, &post, res),
        (1, 0) => row::<V, 1, 0>(e, src, cols, dst, rb, cb, &post, res),
        (1, 1) => row::<V, 1, 1>(e, src, cols, dst, rb, cb, &post, res),
        (2, 0) => row::<V, 2, 0>(e, src, cols, dst, rb, cb, &post, res),
        (2, 1) => row::<V, 2, 1>(e, src, cols, dst, rb, cb, &post, res),
        (3, 0) => row::<V, 3, 0>(e, src, cols, dst, rb, cb, &post, res),
        (3, 1) => row::<V, 3, 1>(e, src, cols, dst, rb, cb, &post, res),
        (4, 0) => row::<V, 4, 0>(e, src, cols, dst, rb, cb, &post, res),
        (4, 1) => row::<V, 4, 1>(e, src, cols, dst, rb, cb, &post, res),
        (5, 0) => row::<V, 5, 0>(e, src, cols, dst, rb, cb, &post, res),
        (5, 1) => row::<V, 5, 1>(e, src, cols, dst, rb, cb, &post, res),
        (6, 0) => row::<V, 6, 0>(e, src, cols, dst, rb, cb, &post, res),
        (6, 1) => row::<V, 6, 1>(e, src, cols, dst, rb, cb, &post, res),
        (7, 0) => row::<V, 7, 0>(e, src, cols, dst, rb, cb, &post, res),
        (7, 1) => row::<V, 7, 1>(e, src, cols, dst, rb, cb, &post, res),
        (8, 0) => row::<V, 8, 0>(e, src, cols, dst, rb, cb, &post, res),
        (8, 1) => row::<V, 8, 1>(e, src, cols, dst, rb, cb, &post, res),
        _ => row::<V, 255, 255>(e, src, cols, dst, rb, cb, &post, res),
    }
}

/// Prefetches the residual and destination lines of the tile below this one (rows
/// `i0 .. i0 + rows`), the tile the GEMM finishes next: both are usually far from the
/// core (written by earlier kernels, or never read), and the tile's compute hides the wait.
/// Addresses past the product's end are only hints, never touched.
#[inline(always)]
fn prefetch_next_tile(e: &Fused, b: usize, i0: usize, j0: usize, rows: usize, cols: usize) {
    const LINE: usize = 16;
    let at = |m: &RowMajor, r: usize, j: usize| {
        let off = m.batch[if m.batch.len() == 1 { 0 } else { b }];
        m.ptr
            .wrapping_offset(off + (i0 + r) as isize * m.rs)
            .wrapping_add(j0 + j) as *const f32
    };
    for r in 0..rows {
        let mut j = 0;
        while j < cols {
            if let Some(m) = &e.residual {
                crate::simd::prefetch_read(at(m, r, j));
            }
            crate::simd::prefetch_write(at(&e.out, r, j));
            j += LINE;
        }
        // The last element's line, when the row is not line-aligned.
        if let Some(m) = &e.residual {
            crate::simd::prefetch_read(at(m, r, cols - 1));
        }
        crate::simd::prefetch_write(at(&e.out, r, cols - 1));
    }
}

/// The compile-time code of an activation (255: decided at run time).
fn code(a: Act) -> u8 {
    match a {
        Act::None => 0,
        Act::Relu => 1,
        Act::Gelu => 2,
        Act::GeluTanh => 3,
        Act::Silu => 4,
        Act::HardSwish => 5,
        Act::Sigmoid => 6,
        Act::Tanh => 7,
        Act::Clip(..) => 8,
    }
}

/// The portable build.
pub mod portable {
    use super::*;

    /// See [`FinishFn`].
    ///
    /// # Safety
    /// The epilogue's pointers cover the tile.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn finish(
        e: &Fused,
        b: usize,
        i0: usize,
        j0: usize,
        rows: usize,
        cols: usize,
        t: &[f32],
        ld: usize,
    ) {
        finish_body::<f32>(e, b, i0, j0, rows, cols, t, ld)
    }
}

/// The AVX2 and AVX-512 builds.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::*;
    use crate::simd::{Y8, Z16};

    /// See [`FinishFn`] (AVX2+FMA CPUs only).
    ///
    /// # Safety
    /// The epilogue's pointers cover the tile; the CPU has AVX2 and FMA.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn finish_avx2(
        e: &Fused,
        b: usize,
        i0: usize,
        j0: usize,
        rows: usize,
        cols: usize,
        t: &[f32],
        ld: usize,
    ) {
        finish_body::<Y8>(e, b, i0, j0, rows, cols, t, ld)
    }

    /// See [`FinishFn`] (AVX-512 CPUs only).
    ///
    /// # Safety
    /// The epilogue's pointers cover the tile; the CPU has AVX-512.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    pub unsafe fn finish_avx512(
        e: &Fused,
        b: usize,
        i0: usize,
        j0: usize,
        rows: usize,
        cols: usize,
        t: &[f32],
        ld: usize,
    ) {
        finish_body::<Z16>(e, b, i0, j0, rows, cols, t, ld)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::{gemm, Batches, Gemm, Lhs, MatRef, PackedB, Rhs};
    use crate::testing::rand_vec;
    use crate::{isa_tests, Kernels};

    fn check(kern: &Kernels) {
        let (m, n, k) = (13, 37, 29);
        let a = rand_vec(m * k, 1);
        let bm = rand_vec(k * n, 2);
        let cb = rand_vec(n, 3);
        let rb = rand_vec(m, 4);
        let res = rand_vec(m * n, 5);
        let pb = PackedB::new(&kern.micro, k, n, &bm, n, 1);
        for (act1, act2) in [
            (Act::None, Act::None),
            (Act::Relu, Act::None),
            (Act::Gelu, Act::None),
            (Act::GeluTanh, Act::Relu),
            (Act::Silu, Act::None),
            (Act::HardSwish, Act::None),
            (Act::Sigmoid, Act::Relu),
            (Act::Tanh, Act::None),
            (Act::Clip(-0.5, 0.25), Act::None),
        ] {
            let mut out = vec![f32::NAN; m * n];
            let epi = Fused {
                alpha: 0.5,
                row_bias: Some(Vector {
                    ptr: rb.as_ptr(),
                    batch: &[0],
                    step: 1,
                }),
                col_bias: Some(Vector {
                    ptr: cb.as_ptr(),
                    batch: &[0],
                    step: 1,
                }),
                act1,
                scale: Some((
                    Vector {
                        ptr: rb.as_ptr(),
                        batch: &[0],
                        step: 1,
                    },
                    true,
                )),
                shift: Some((
                    Vector {
                        ptr: cb.as_ptr(),
                        batch: &[0],
                        step: 1,
                    },
                    false,
                )),
                residual: Some(RowMajor {
                    ptr: res.as_ptr() as *mut f32,
                    batch: &[0],
                    rs: n as isize,
                    cs: 1,
                }),
                act2,
                out: RowMajor {
                    ptr: out.as_mut_ptr(),
                    batch: &[0],
                    rs: n as isize,
                    cs: 1,
                },
            };
            let sink = FusedSink {
                epi,
                finish: kern.finish,
            };
            let g = Gemm {
                batch: 1,
                m,
                n,
                k,
                a: Lhs::Strided(MatRef::rows(a.as_ptr(), k), Batches::Stride(0)),
                b: Rhs::Packed(&pb),
            };
            unsafe { gemm(kern, crate::pool::global(), 2, &g, &sink) };
            let f = |a: Act, x: f64| -> f64 {
                match a {
                    Act::None => x,
                    Act::Relu => x.max(0.0),
                    Act::Gelu => unsafe { crate::vmath::gelu(x as f32) as f64 },
                    Act::GeluTanh => unsafe { crate::vmath::gelu_tanh(x as f32) as f64 },
                    Act::Silu => x / (1.0 + (-x).exp()),
                    Act::HardSwish => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
                    Act::Sigmoid => 1.0 / (1.0 + (-x).exp()),
                    Act::Tanh => x.tanh(),
                    Act::Clip(lo, hi) => x.clamp(lo as f64, hi as f64),
                }
            };
            for i in 0..m {
                for j in 0..n {
                    let dot: f64 = (0..k)
                        .map(|p| a[i * k + p] as f64 * bm[p * n + j] as f64)
                        .sum();
                    let v = f(act1, 0.5 * dot + rb[i] as f64 + cb[j] as f64) * rb[i] as f64
                        + cb[j] as f64
                        + res[i * n + j] as f64;
                    let want = f(act2, v);
                    let got = out[i * n + j] as f64;
                    assert!(
                        (got - want).abs() < 1e-5 * (1.0 + want.abs()),
                        "{} {act1:?} ({i},{j}): {got} vs {want}",
                        kern.isa
                    );
                }
            }
            // The same epilogue storing C transposed (columns `m` apart) gives the same bits.
            let mut out_t = vec![f32::NAN; m * n];
            let mut epi_t = sink.epi;
            epi_t.out = RowMajor {
                ptr: out_t.as_mut_ptr(),
                batch: &[0],
                rs: 1,
                cs: m as isize,
            };
            let sink_t = FusedSink {
                epi: epi_t,
                finish: kern.finish,
            };
            unsafe { gemm(kern, crate::pool::global(), 2, &g, &sink_t) };
            for i in 0..m {
                for j in 0..n {
                    assert_eq!(
                        out_t[j * m + i].to_bits(),
                        out[i * n + j].to_bits(),
                        "{} {act1:?} transposed ({i},{j})",
                        kern.isa
                    );
                }
            }
        }
    }

    isa_tests!(fused_epilogue, check);

    /// Delegates tiles to a sink but never offers the fused micro-kernel its epilogue.
    struct ScratchOnly<'a>(&'a FusedSink<'a>);

    impl TileSink for ScratchOnly<'_> {
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
            self.0.tile(b, i0, j0, rows, cols, t, ld)
        }
    }

    /// Full tiles finished in registers by the fused micro-kernel give the same bits as
    /// tiles finished from scratch, with B packed or read in place, every activation, with
    /// and without an affine step.
    fn register_epilogue_matches_scratch(kern: &Kernels) {
        let (mr, nr) = (kern.micro.mr, kern.micro.nr);
        let (m, n, k) = (2 * mr + 3, 2 * nr + 5, 29);
        let a = rand_vec(m * k, 11);
        let bm = rand_vec(k * n, 12);
        let cb = rand_vec(n, 13);
        let rb = rand_vec(m, 14);
        let res = rand_vec(m * n, 15);
        let pb = PackedB::new(&kern.micro, k, n, &bm, n, 1);
        let vector = |v: &[f32]| Vector {
            ptr: v.as_ptr(),
            batch: &[0],
            step: 1,
        };
        for act1 in [
            Act::None,
            Act::Relu,
            Act::Gelu,
            Act::Silu,
            Act::Clip(-0.5, 0.25),
        ] {
            for (act2, with_res, row) in [(Act::None, false, true), (Act::Relu, true, false)] {
                for (packed, affine) in [(true, 0), (false, 0), (true, 1), (false, 2)] {
                    // No affine step; a per-row scale and a per-column shift; the reverse.
                    let side = |per_row: bool| {
                        Some((if per_row { vector(&rb) } else { vector(&cb) }, per_row))
                    };
                    let (scale, shift) = match affine {
                        0 => (None, None),
                        1 => (side(true), side(false)),
                        _ => (side(false), side(true)),
                    };
                    let run = |fused: bool| {
                        let mut out = vec![f32::NAN; m * n];
                        let sink = FusedSink {
                            epi: Fused {
                                alpha: 0.75,
                                row_bias: row.then(|| vector(&rb)),
                                col_bias: (!row).then(|| vector(&cb)),
                                act1,
                                scale,
                                shift,
                                residual: with_res.then_some(RowMajor {
                                    ptr: res.as_ptr() as *mut f32,
                                    batch: &[0],
                                    rs: n as isize,
                                    cs: 1,
                                }),
                                act2,
                                out: RowMajor {
                                    ptr: out.as_mut_ptr(),
                                    batch: &[0],
                                    rs: n as isize,
                                    cs: 1,
                                },
                            },
                            finish: kern.finish,
                        };
                        let g = Gemm {
                            batch: 1,
                            m,
                            n,
                            k,
                            a: Lhs::Strided(MatRef::rows(a.as_ptr(), k), Batches::Stride(0)),
                            b: if packed {
                                Rhs::Packed(&pb)
                            } else {
                                Rhs::Strided(MatRef::rows(bm.as_ptr(), n), Batches::Stride(0))
                            },
                        };
                        let pool = crate::pool::global();
                        if fused {
                            unsafe { gemm(kern, pool, 1, &g, &sink) };
                        } else {
                            unsafe { gemm(kern, pool, 1, &g, &ScratchOnly(&sink)) };
                        }
                        out
                    };
                    let (got, want) = (run(true), run(false));
                    for (i, (x, w)) in got.iter().zip(&want).enumerate() {
                        assert_eq!(
                            x.to_bits(),
                            w.to_bits(),
                            "{} {act1:?}/{act2:?} packed={packed} affine={affine} C[{i}]: {x} vs {w}",
                            kern.isa
                        );
                    }
                }
            }
        }
    }

    isa_tests!(
        register_epilogue_same_bits,
        register_epilogue_matches_scratch
    );
}
