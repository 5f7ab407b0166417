//! Recognizes the anchor epilogues the GEMM finishes in registers: one f32 store of
//! `act2(act1(alpha * acc + bias) + residual)` with a unit column step, where the bias is per
//! row or per column, `act1` one of the kernel table's activations and `act2` none or ReLU
//! (`smelt_kernels::epilogue`). Anything else takes the general epilogue.

use super::epilogue::{Layout, Win};
use super::Mem;
use smelt_ir::kernel::check::{self as validate, Checker, Use};
use smelt_ir::kernel::{Binary, Loop, ScalarOp, Unary};
use smelt_ir::DType;
use smelt_kernels::epilogue::{Act, Fused, RowMajor, Vector};

/// A bias whose storage the plan owns (a convolution's bias input) or a window.
pub(crate) enum BiasSrc {
    Window(Win),
    /// Values owned by the plan: element `i` of batch `b` at `batch[b] + i * step`.
    Owned {
        values: Vec<f32>,
        batch: Vec<isize>,
        step: isize,
    },
}

impl BiasSrc {
    /// A constant for every row.
    fn constant(c: f32) -> BiasSrc {
        BiasSrc::Owned {
            values: vec![c],
            batch: vec![0],
            step: 0,
        }
    }

    /// The kernel table's form, over one run's storage (`per_row`: indexed by rows, else
    /// by columns).
    fn bind<'a>(&'a self, mem: &Mem, per_row: bool) -> Vector<'a> {
        match self {
            BiasSrc::Window(w) => Vector {
                ptr: mem.ptrs[w.slot] as *const f32,
                batch: &w.batch,
                step: if per_row { w.rs } else { w.cs },
            },
            BiasSrc::Owned {
                values,
                batch,
                step,
            } => Vector {
                ptr: values.as_ptr(),
                batch,
                step: *step,
            },
        }
    }
}

/// A recognized epilogue in anchor coordinates.
pub(crate) struct FastEpilogue {
    pub alpha: f32,
    pub row_bias: Option<BiasSrc>,
    pub col_bias: Option<BiasSrc>,
    pub act1: Act,
    /// The affine step after `act1`: a window and whether it is per row (else per column).
    pub scale: Option<(BiasSrc, bool)>,
    pub shift: Option<(BiasSrc, bool)>,
    pub residual: Option<Win>,
    pub act2: Act,
    pub out: Win,
}

/// Where in `alpha -> bias -> act1 -> residual -> act2` the chain has got to.
#[derive(PartialEq, PartialOrd, Clone, Copy)]
enum Stage {
    Start,
    Scaled,
    Biased,
    Act1,
    Scaled2,
    Shifted,
    Residual,
    Act2,
}

fn act_of(u: Unary) -> Option<Act> {
    Some(match u {
        Unary::Relu => Act::Relu,
        Unary::Gelu => Act::Gelu,
        Unary::GeluTanh => Act::GeluTanh,
        Unary::Silu => Act::Silu,
        Unary::HardSwish => Act::HardSwish,
        Unary::Sigmoid => Act::Sigmoid,
        Unary::Tanh => Act::Tanh,
        _ => return None,
    })
}

impl FastEpilogue {
    /// The epilogue `l` in this form, or None.
    pub(crate) fn recognize(c: &Checker, l: &Loop, layout: &Layout) -> Option<FastEpilogue> {
        let [store] = l.stores.as_slice() else {
            return None;
        };
        let f32_buf = |b: smelt_ir::kernel::BufferId| c.plan.buffer(b).dtype == DType::F32;
        if store.per_row || !f32_buf(store.dst.buffer) {
            return None;
        }
        c.window(&store.dst, Use::Store, "store").ok()?;
        let out = layout.window(&store.dst)?;
        // A transposed output (columns not contiguous, as a blocked convolution storing
        // the plain layout at a region's edge) is stored column by column after its rows
        // are finished.
        if out.cs == 0 && layout_cols(layout) > 1 {
            return None;
        }
        let order = validate::deps(&l.ops, &[store.value]);
        let mut e = FastEpilogue {
            alpha: 1.0,
            row_bias: None,
            col_bias: None,
            act1: Act::None,
            scale: None,
            shift: None,
            residual: None,
            act2: Act::None,
            out,
        };
        let mut stage = Stage::Start;
        let mut chain: Option<usize> = None;
        let leaf = |i: usize| matches!(l.ops[i], ScalarOp::Load(_) | ScalarOp::Const(_));
        for &i in &order {
            match l.ops[i] {
                ScalarOp::Acc => {
                    if chain.is_some() {
                        return None;
                    }
                    chain = Some(i);
                }
                ScalarOp::Load(_) | ScalarOp::Const(_) => {}
                ScalarOp::Unary(u, a) if Some(a) == chain => {
                    let act = act_of(u)?;
                    if stage < Stage::Act1 {
                        e.act1 = act;
                        stage = Stage::Act1;
                    } else if stage == Stage::Residual && act == Act::Relu {
                        e.act2 = act;
                        stage = Stage::Act2;
                    } else {
                        return None;
                    }
                    chain = Some(i);
                }
                ScalarOp::Binary(op, a, b) if Some(a) == chain || Some(b) == chain => {
                    let other = if Some(a) == chain { b } else { a };
                    if !leaf(other) || a == b {
                        return None;
                    }
                    match (op, l.ops[other]) {
                        (Binary::Mul, ScalarOp::Const(k)) if stage == Stage::Start => {
                            e.alpha *= k;
                            stage = Stage::Scaled;
                        }
                        (Binary::Mul, ScalarOp::Const(k))
                            if stage >= Stage::Act1 && stage < Stage::Scaled2 =>
                        {
                            e.scale = Some((BiasSrc::constant(k), true));
                            stage = Stage::Scaled2;
                        }
                        (Binary::Add, ScalarOp::Const(k))
                            if stage >= Stage::Act1 && stage < Stage::Shifted =>
                        {
                            e.shift = Some((BiasSrc::constant(k), true));
                            stage = Stage::Shifted;
                        }
                        (Binary::Max, ScalarOp::Const(lo)) if stage < Stage::Act1 => {
                            e.act1 = if lo == 0.0 {
                                Act::Relu
                            } else {
                                Act::Clip(lo, f32::INFINITY)
                            };
                            stage = Stage::Act1;
                        }
                        (Binary::Min, ScalarOp::Const(hi)) if stage == Stage::Act1 => {
                            match e.act1 {
                                Act::Relu => e.act1 = Act::Clip(0.0, hi),
                                Act::Clip(lo, f32::INFINITY) => e.act1 = Act::Clip(lo, hi),
                                _ => return None,
                            }
                        }
                        (Binary::Mul, ScalarOp::Load(k))
                            if stage >= Stage::Act1 && stage < Stage::Scaled2 =>
                        {
                            let r = &l.loads[k];
                            if !f32_buf(r.buffer) {
                                return None;
                            }
                            c.window(r, Use::Load, "load").ok()?;
                            let w = layout.window(r)?;
                            let per_row = w.cs == 0;
                            if !per_row && (w.rs != 0 || w.cs != 1) {
                                return None;
                            }
                            e.scale = Some((BiasSrc::Window(w), per_row));
                            stage = Stage::Scaled2;
                        }
                        (Binary::Add, ScalarOp::Load(k))
                            if stage >= Stage::Act1 && stage < Stage::Shifted && {
                                let w = layout.window(&l.loads[k]);
                                w.is_some_and(|w| w.cs == 0 || (w.rs == 0 && w.cs == 1))
                            } =>
                        {
                            let r = &l.loads[k];
                            if !f32_buf(r.buffer) {
                                return None;
                            }
                            c.window(r, Use::Load, "load").ok()?;
                            let w = layout.window(r)?;
                            let per_row = w.cs == 0;
                            e.shift = Some((BiasSrc::Window(w), per_row));
                            stage = Stage::Shifted;
                        }
                        (Binary::Add, ScalarOp::Load(k)) => {
                            let r = &l.loads[k];
                            if !f32_buf(r.buffer) {
                                return None;
                            }
                            c.window(r, Use::Load, "load").ok()?;
                            let w = layout.window(r)?;
                            let by_row = w.cs == 0 && w.rs != 0;
                            let by_col = w.rs == 0 && w.cs == 1;
                            if stage < Stage::Biased && by_row && e.row_bias.is_none() {
                                e.row_bias = Some(BiasSrc::Window(w));
                                stage = Stage::Biased;
                            } else if stage < Stage::Biased && by_col && e.col_bias.is_none() {
                                e.col_bias = Some(BiasSrc::Window(w));
                                stage = Stage::Biased;
                            } else if stage < Stage::Residual && w.cs == 1 && w.rs != 0 {
                                e.residual = Some(w);
                                stage = Stage::Residual;
                            } else {
                                return None;
                            }
                        }
                        _ => return None,
                    }
                    chain = Some(i);
                }
                _ => return None,
            }
        }
        (chain == Some(store.value)).then_some(e)
    }

    /// The kernel table's form over one run's storage.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against; the result borrows `self`.
    pub(crate) unsafe fn bind<'a>(&'a self, mem: &Mem) -> Fused<'a> {
        let ptr = |w: &Win| mem.ptrs[w.slot] as *mut f32;
        Fused {
            alpha: self.alpha,
            row_bias: self.row_bias.as_ref().map(|b| b.bind(mem, true)),
            col_bias: self.col_bias.as_ref().map(|b| b.bind(mem, false)),
            act1: self.act1,
            scale: self.scale.as_ref().map(|(v, r)| (v.bind(mem, *r), *r)),
            shift: self.shift.as_ref().map(|(v, r)| (v.bind(mem, *r), *r)),
            residual: self.residual.as_ref().map(|w| RowMajor {
                ptr: ptr(w),
                batch: &w.batch,
                rs: w.rs,
                cs: 1,
            }),
            act2: self.act2,
            out: RowMajor {
                ptr: ptr(&self.out),
                batch: &self.out.batch,
                rs: self.out.rs,
                cs: self.out.cs,
            },
        }
    }

    /// A short description for `explain` (`bias+gelu`, `residual+relu`...).
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.alpha != 1.0 {
            parts.push("scale".to_string());
        }
        if self.row_bias.is_some() || self.col_bias.is_some() {
            parts.push("bias".into());
        }
        if self.act1 != Act::None {
            parts.push(format!("{:?}", self.act1).to_lowercase());
        }
        if self.scale.is_some() || self.shift.is_some() {
            parts.push("affine".into());
        }
        if self.residual.is_some() {
            parts.push("residual".into());
        }
        if self.act2 != Act::None {
            parts.push(format!("{:?}", self.act2).to_lowercase());
        }
        if parts.is_empty() {
            "store".into()
        } else {
            parts.join("+")
        }
    }
}

/// Columns per row of a layout.
fn layout_cols(l: &Layout) -> usize {
    l.col.iter().map(|&(_, n)| n).product()
}

/// A bound epilogue's per-batch tables re-indexed for a product over a subset of the
/// epilogue's batches: product batch `b` is epilogue batch `pick(b)`.
pub(crate) struct Narrowed {
    out: Vec<isize>,
    res: Option<Vec<isize>>,
    rb: Option<Vec<isize>>,
    cb: Option<Vec<isize>>,
    sc: Option<Vec<isize>>,
    sh: Option<Vec<isize>>,
}

impl Narrowed {
    /// The tables of `e` for `n` product batches.
    pub(crate) fn new(e: &Fused, n: usize, pick: impl Fn(usize) -> usize) -> Narrowed {
        let narrow = |t: &[isize]| -> Vec<isize> {
            if t.len() == 1 {
                t.to_vec()
            } else {
                (0..n).map(|b| t[pick(b)]).collect()
            }
        };
        Narrowed {
            out: narrow(e.out.batch),
            res: e.residual.map(|r| narrow(r.batch)),
            rb: e.row_bias.map(|v| narrow(v.batch)),
            cb: e.col_bias.map(|v| narrow(v.batch)),
            sc: e.scale.map(|(v, _)| narrow(v.batch)),
            sh: e.shift.map(|(v, _)| narrow(v.batch)),
        }
    }

    /// Points `e`'s tables at these.
    pub(crate) fn apply<'a>(&'a self, e: &mut Fused<'a>) {
        e.out.batch = &self.out;
        if let (Some(r), Some(t)) = (e.residual.as_mut(), self.res.as_ref()) {
            r.batch = t;
        }
        if let (Some(v), Some(t)) = (e.row_bias.as_mut(), self.rb.as_ref()) {
            v.batch = t;
        }
        if let (Some(v), Some(t)) = (e.col_bias.as_mut(), self.cb.as_ref()) {
            v.batch = t;
        }
        if let (Some((v, _)), Some(t)) = (e.scale.as_mut(), self.sc.as_ref()) {
            v.batch = t;
        }
        if let (Some((v, _)), Some(t)) = (e.shift.as_mut(), self.sh.as_ref()) {
            v.batch = t;
        }
    }
}
