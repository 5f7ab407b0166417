//! Integer product anchors (ConvInteger, MatMulInteger): 8-bit operands on the integer
//! kernels (`smelt_kernels::qgemm`), exact i32 sums handed to the epilogue as f32 (the
//! `Cast`, rescale, bias, activation and next `QuantizeLinear` of a QDQ chain run there).
//! Weights are constant i8 with zero points absent or 0; activations u8 with a constant
//! zero point. Other forms run on the reference kernel.

use super::epilogue::{Epilogue, EpilogueSink, Layout};
use super::requant::{Requant, RequantSink};
use super::{Exec, Mem};
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::{Anchor, BufferKind, TensorRef};
use smelt_ir::op::QuantOp;
use smelt_ir::{DType, Op, Tensor};
use smelt_kernels::conv::Conv2d;
use smelt_kernels::gemm::TileSink;
use smelt_kernels::qgemm::{self, QConvInput, QPackedCols, QPackedRows};
use smelt_kernels::Kernels;

/// The whole constant tensor a window reads, if it reads one whole and in order.
fn whole_weight<'w>(c: &Checker, weights: &'w [Tensor], r: &TensorRef) -> Option<&'w Tensor> {
    let BufferKind::Weight(i) = c.plan.buffer(r.buffer).kind else {
        return None;
    };
    let t = weights.get(i)?;
    (r.offset == 0 && r.is_contiguous() && t.shape() == r.shape.as_slice()).then_some(t)
}

/// An activation's zero point: a constant, or one u8 computed at run time (by a
/// DynamicQuantizeLinear), at (buffer slot, element offset).
#[derive(Clone, Copy)]
enum ZeroPoint {
    Const(u8),
    At(usize, isize),
}

impl ZeroPoint {
    /// The constant or run-time zero point `r` (absent: 0), or None.
    fn plan(c: &Checker, weights: &[Tensor], r: Option<&TensorRef>) -> Option<ZeroPoint> {
        if let Some(z) = u8_zero_point(c, weights, r) {
            return Some(ZeroPoint::Const(z));
        }
        let r = r?;
        let b = c.plan.buffer(r.buffer);
        (b.dtype == DType::U8 && smelt_ir::dims_product(&r.shape) == 1)
            .then_some(ZeroPoint::At(r.buffer.0 as usize, r.offset as isize))
    }

    /// Its value in this run.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    unsafe fn get(self, mem: &Mem) -> u8 {
        match self {
            ZeroPoint::Const(z) => z,
            ZeroPoint::At(slot, off) => *mem.ptrs[slot].offset(off),
        }
    }
}

/// An activation's zero point: a constant u8 scalar (absent: 0).
fn u8_zero_point(c: &Checker, weights: &[Tensor], r: Option<&TensorRef>) -> Option<u8> {
    let Some(r) = r else {
        return Some(0);
    };
    let t = whole_weight(c, weights, r)?;
    match t.data() {
        smelt_ir::Data::U8(v) if t.dtype() == DType::U8 && v.len() == 1 => Some(v[0]),
        _ => None,
    }
}

/// Whether a weight's zero point is absent or all zeros.
fn zero_or_absent(c: &Checker, weights: &[Tensor], r: Option<&TensorRef>) -> bool {
    r.is_none_or(|r| {
        whole_weight(c, weights, r)
            .and_then(|t| t.to_i64().ok())
            .is_some_and(|v| v.iter().all(|&z| z == 0))
    })
}

/// Constant i8 weights, whole.
fn i8_weights<'w>(c: &Checker, weights: &'w [Tensor], r: &TensorRef) -> Option<&'w [i8]> {
    match whole_weight(c, weights, r)?.data() {
        smelt_ir::Data::I8(v) if c.plan.buffer(r.buffer).dtype == DType::I8 => Some(v.as_slice()),
        _ => None,
    }
}

/// How an integer product's epilogue runs, for its kernel name.
fn epilogue_name(requant: Option<&Requant>) -> String {
    match requant {
        Some(q) => format!("fused {}", q.describe()),
        None => "interpreted".to_string(),
    }
}

/// Runs `f` with the sink that finishes an integer product's tiles: its recognized
/// epilogue in registers, or the general one.
fn with_sink(
    epi: &Epilogue,
    requant: Option<&Requant>,
    mem: &Mem,
    ex: &Exec,
    f: impl FnOnce(&dyn TileSink),
) {
    if let Some(q) = requant {
        return f(&RequantSink {
            q,
            mem,
            isa: ex.kern.isa,
        });
    }
    let map = |b: usize| (b, 0);
    f(&EpilogueSink {
        epi,
        kern: ex.kern,
        mem,
        map: &map,
        pre: |_, _, _, _, _, _: &mut [f32], _| {},
    })
}

/// A planned integer convolution (2-D, one group).
pub(crate) struct QConvPlan {
    geom: Conv2d,
    images: usize,
    x_slot: usize,
    x_offset: isize,
    /// Input steps: image, channel, row, column.
    xs: [isize; 4],
    zero_point: u8,
    weights: QPackedRows,
    epi: Epilogue,
    /// The epilogue as a plain requantization, when it is one.
    requant: Option<Requant>,
    /// The kernel's name, for `explain`.
    pub name: String,
}

impl QConvPlan {
    /// Plans a ConvInteger anchor of the fast form, or None.
    pub(crate) fn new(
        c: &Checker,
        weights: &[Tensor],
        a: &Anchor,
        kern: &Kernels,
    ) -> Option<QConvPlan> {
        let Op::Quant(QuantOp::ConvInteger { conv }) = &a.op else {
            return None;
        };
        let xr = a.inputs.first()?.as_ref()?;
        let wr = a.inputs.get(1)?.as_ref()?;
        if c.plan.buffer(xr.buffer).dtype != DType::U8
            || xr.shape.len() != 4
            || wr.shape.len() != 4
            || a.shape.len() != 4
            || conv.group != 1
            || !zero_or_absent(c, weights, a.inputs.get(3).and_then(|r| r.as_ref()))
        {
            return None;
        }
        let zero_point = u8_zero_point(c, weights, a.inputs.get(2).and_then(|r| r.as_ref()))?;
        let w = i8_weights(c, weights, wr)?;
        let [n, ch, h, wd] = <[usize; 4]>::try_from(xr.shape.as_slice()).ok()?;
        let [m, cg, kh, kw] = <[usize; 4]>::try_from(wr.shape.as_slice()).ok()?;
        let [_, _, oh, ow] = <[usize; 4]>::try_from(a.shape.as_slice()).ok()?;
        if ch != cg || kh == 0 || kw == 0 {
            return None;
        }
        let ones = [1i64, 1];
        let geom = super::conv::geometry(
            &conv.auto_pad,
            [
                conv.strides.as_deref().unwrap_or(&ones),
                conv.dilations.as_deref().unwrap_or(&ones),
                conv.pads.as_deref().unwrap_or(&[]),
            ],
            cg,
            [h, wd],
            [kh, kw],
            [oh, ow],
        )?;
        if geom.k() > qgemm::MAX_DEPTH || xr.strides.iter().any(|&s| s < 0) {
            return None;
        }
        let layout = Layout {
            batch_base: (0..n).map(|b| vec![b, 0, 0, 0]).collect(),
            row: vec![(1, m)],
            col: vec![(2, oh), (3, ow)],
        };
        let epi = Epilogue::new(c, &a.epilogue, &layout).ok().flatten()?;
        let requant = Requant::recognize(c, weights, &a.epilogue, &layout, [m, oh * ow]);
        // (The packed input's bytes checked before the weights are packed.)
        let groups_bound = qgemm::k4(geom.k()).next_multiple_of(qgemm::amx::STEP_GROUPS);
        let scratch = qgemm::qconv_scratch_bytes(&geom, kern.qgemm.nr, groups_bound) as u64;
        smelt_ir::limits::check_alloc(scratch, &|| "an integer convolution's packed input".into())
            .ok()?;
        let xs = <[isize; 4]>::try_from(xr.strides.as_slice()).ok()?;
        let packed = QPackedRows::new(w, m, geom.k(), &kern.qgemm);
        let tiles = match (packed.has_amx(), packed.narrow) {
            (true, _) => " (amx-int8 tiles)",
            (false, true) => " (7-bit weights)",
            (false, false) => "",
        };
        Some(QConvPlan {
            geom,
            images: n,
            x_slot: xr.buffer.0 as usize,
            x_offset: xr.offset as isize,
            xs,
            zero_point,
            weights: packed,
            epi,
            name: format!(
                "conv.{}{}, epilogue {}",
                kern.qgemm.name,
                tiles,
                epilogue_name(requant.as_ref())
            ),
            requant,
        })
    }

    /// Runs the convolution and its epilogue.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    pub(crate) unsafe fn run(&self, mem: &Mem, ex: &Exec) {
        let threads = if self.epi.parallel { ex.threads } else { 1 };
        let micro = &ex.kern.qgemm;
        let bytes = qgemm::qconv_scratch_bytes(&self.geom, micro.nr, self.weights.groups());
        // This thread's packing buffer, kept between calls (grown, never shrunk): sizes
        // differ per layer, and fresh pages cost more than the packing.
        let mut scratch = PACKED.with(|p| std::mem::take(&mut *p.borrow_mut()));
        if scratch.len() < bytes {
            scratch.resize(bytes, 0);
        }
        let packed = &mut scratch[..bytes];
        let mut corr = Vec::new();
        let x = (mem.ptrs[self.x_slot] as *const u8).offset(self.x_offset);
        let [sn, sc, sh, sw] = self.xs;
        with_sink(&self.epi, self.requant.as_ref(), mem, ex, |sink| {
            for img in 0..self.images {
                let input = QConvInput {
                    x: x.offset(img as isize * sn),
                    strides: [sc, sh, sw],
                    zero_point: self.zero_point,
                };
                qgemm::qconv(
                    micro,
                    ex.pool,
                    threads,
                    &self.geom,
                    &input,
                    &self.weights,
                    packed,
                    &mut corr,
                    img,
                    sink,
                );
            }
        });
        PACKED.with(|p| *p.borrow_mut() = scratch);
    }
}

thread_local! {
    /// Each thread's buffer for a convolution's packed input.
    static PACKED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A planned integer matrix product: u8 activations (rows in place) times constant i8
/// weights `K x N`.
pub(crate) struct QMatMulPlan {
    rows: usize,
    lda: usize,
    a_slot: usize,
    a_offset: isize,
    zero_point: ZeroPoint,
    weights: QPackedCols,
    epi: Epilogue,
    /// The epilogue as a plain requantization, when it is one.
    requant: Option<Requant>,
    /// The kernel's name, for `explain`.
    pub name: String,
}

impl QMatMulPlan {
    /// Plans a MatMulInteger anchor of the fast form, or None.
    pub(crate) fn new(
        c: &Checker,
        weights: &[Tensor],
        a: &Anchor,
        kern: &Kernels,
    ) -> Option<QMatMulPlan> {
        if !matches!(a.op, Op::Quant(QuantOp::MatMulInteger)) {
            return None;
        }
        let ar = a.inputs.first()?.as_ref()?;
        let br = a.inputs.get(1)?.as_ref()?;
        let rank = ar.shape.len();
        if c.plan.buffer(ar.buffer).dtype != DType::U8
            || rank < 2
            || br.shape.len() != 2
            || a.shape.len() != rank
            || !zero_or_absent(c, weights, a.inputs.get(3).and_then(|r| r.as_ref()))
        {
            return None;
        }
        let zero_point = ZeroPoint::plan(c, weights, a.inputs.get(2).and_then(|r| r.as_ref()))?;
        let b = i8_weights(c, weights, br)?;
        let (k, n) = (br.shape[0], br.shape[1]);
        // Rows read in place four bytes at a time: a depth of whole groups, unit column
        // steps, and rows (all leading dims) at one stride.
        if ar.shape[rank - 1] != k || k % 4 != 0 || k == 0 || k > qgemm::MAX_DEPTH {
            return None;
        }
        if ar.strides[rank - 1] != 1 || ar.strides.iter().any(|&s| s < 0) {
            return None;
        }
        let lda = usize::try_from(ar.strides[rank - 2]).ok()?;
        for d in 0..rank - 2 {
            if ar.shape[d] > 1 && ar.strides[d] != ar.strides[d + 1] * ar.shape[d + 1] as isize {
                return None;
            }
        }
        let rows: usize = ar.shape[..rank - 1].iter().product();
        let layout = Layout {
            batch_base: vec![vec![0; rank]],
            row: (0..rank - 1).map(|d| (d, a.shape[d])).collect(),
            col: vec![(rank - 1, n)],
        };
        let epi = Epilogue::new(c, &a.epilogue, &layout).ok().flatten()?;
        let requant = Requant::recognize(c, weights, &a.epilogue, &layout, [rows, n]);
        let packed = QPackedCols::new(b, k, n, kern.qgemm.nr);
        let narrow = packed.narrow;
        Some(QMatMulPlan {
            rows,
            lda,
            a_slot: ar.buffer.0 as usize,
            a_offset: ar.offset as isize,
            zero_point,
            weights: packed,
            epi,
            name: format!(
                "matmul.{}{}, epilogue {}",
                kern.qgemm.name,
                if qgemm::use_amx(&kern.qgemm, qgemm::k4(k)) {
                    " (amx-int8 tiles)"
                } else if narrow {
                    " (7-bit weights)"
                } else {
                    ""
                },
                epilogue_name(requant.as_ref())
            ),
            requant,
        })
    }

    /// Runs the product and its epilogue.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    pub(crate) unsafe fn run(&self, mem: &Mem, ex: &Exec) {
        let threads = if self.epi.parallel { ex.threads } else { 1 };
        let a = (mem.ptrs[self.a_slot] as *const u8).offset(self.a_offset);
        with_sink(&self.epi, self.requant.as_ref(), mem, ex, |sink| {
            let mut corr = Vec::new();
            qgemm::qmatmul(
                &ex.kern.qgemm,
                ex.pool,
                threads,
                a,
                self.rows,
                self.lda,
                self.zero_point.get(mem),
                &self.weights,
                &mut corr,
                0,
                sink,
            );
        });
    }
}
