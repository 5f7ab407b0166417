//! Anchors: MatMul/Gemm, 2-D Conv and plain attention run on the fast kernels with the
//! epilogue fused into them; any other anchor (or form) runs through the reference kernel
//! on its gathered inputs, then the epilogue loop reads its result through `ScalarOp::Acc`.

use super::access::Elem;
use super::conv::ConvPlan;
use super::conv_blocked::BlockedConvPlan;
use super::conv_transpose::ConvTransposePlan;
use super::elementwise::LoopPlan;
use super::integer::{QConvPlan, QMatMulPlan};
use super::matmul::MatMulPlan;
use super::pool::PoolPlan;
use super::resize::ResizePlan;
use super::sdpa::SdpaPlan;
use super::single::{gather_args, Arg};
use super::{Exec, RunCx};
use smelt_ir::kernel::check::{Checker, Use};
use smelt_ir::kernel::{Anchor, KernelChoice};
use smelt_ir::op::NnOp;
use smelt_ir::{ensure, err, DType, Op, Result, Tensor, Value};
use smelt_kernels::Kernels;
use smelt_reference::eval_values;

/// Widens a product's half-precision weights (a widening cast lowering read as a view, see
/// `smelt_passes::precision`) to f32, the type of its other operands.
fn widen_weights(op: &Op, args: &mut [Arg]) -> Result<()> {
    if !matches!(
        op,
        Op::Nn(NnOp::MatMul | NnOp::Gemm { .. } | NnOp::Conv { .. } | NnOp::ConvBlocked { .. })
    ) {
        return Ok(());
    }
    for arg in args.iter_mut() {
        let narrow = arg.value().and_then(|v| match v {
            Value::Tensor(t) if matches!(t.dtype(), DType::BF16 | DType::F16) => Some(t),
            _ => None,
        });
        if let Some(t) = narrow {
            let wide = smelt_reference::elementwise::cast(
                t,
                DType::F32,
                true,
                smelt_ir::op::elementwise::E8M0Rounding::Up,
            )?;
            *arg = Arg::Owned(Value::Tensor(wide));
        }
    }
    Ok(())
}

/// How an anchor runs.
enum Path {
    MatMul(MatMulPlan),
    Conv(ConvPlan),
    ConvBlocked(BlockedConvPlan),
    Sdpa(SdpaPlan),
    Pool(PoolPlan),
    ConvTranspose(ConvTransposePlan),
    Resize(ResizePlan),
    QConv(QConvPlan),
    QMatMul(QMatMulPlan),
    /// The reference kernel, and why.
    Reference(String),
}

/// A validated anchor: its epilogue (for the reference path) reads the result from the
/// extra buffer slot `acc`.
pub(crate) struct AnchorPlan {
    epilogue: LoopPlan,
    acc: usize,
    path: Path,
}

impl AnchorPlan {
    /// Validates an anchor and picks its kernel; `acc` is the run's buffer slot for the
    /// anchor result of the reference path.
    pub(crate) fn new(
        c: &Checker,
        weights: &[Tensor],
        a: &Anchor,
        acc: usize,
        kern: &Kernels,
        choice: &KernelChoice,
    ) -> Result<AnchorPlan> {
        for (i, r) in a.inputs.iter().enumerate() {
            if let Some(r) = r {
                c.window(r, Use::OpInput, &format!("anchor input {i}"))?;
                let d = c.plan.buffer(r.buffer).dtype;
                ensure!(
                    Elem::of(d) != Elem::Opaque,
                    Internal,
                    "anchor input {i}: {d} elements"
                );
            }
        }
        ensure!(
            a.epilogue.shape == a.shape,
            Internal,
            "epilogue shape {:?} is not the anchor's {:?}",
            a.epilogue.shape,
            a.shape
        );
        let epilogue =
            LoopPlan::new(c, &a.epilogue, Some(acc), kern).map_err(|e| e.context("epilogue"))?;
        let path = match &a.op {
            Op::Nn(NnOp::MatMul | NnOp::Gemm { .. }) => match MatMulPlan::new(c, weights, a, kern) {
                Some(p) => Path::MatMul(p),
                None => Path::Reference(format!(
                    "{}: not a product of f32 operands the GEMM reads in place",
                    a.op.name()
                )),
            },
            Op::Nn(NnOp::Conv { .. }) => match ConvPlan::new(c, weights, a, kern, choice.conv) {
                Some(p) => Path::Conv(p),
                None => Path::Reference(
                    "Conv: not a 2-D f32 convolution with constant weights and bias, or its padded input is past the memory limits".into(),
                ),
            },
            Op::Nn(NnOp::ConvBlocked { .. }) => match BlockedConvPlan::new(c, weights, a, kern) {
                Some(p) => Path::ConvBlocked(p),
                None => Path::Reference(
                    "ConvBlocked: not an f32 one with constant weights and bias of a width stride the kernels have, or its padded input is past the memory limits".into(),
                ),
            },
            Op::Nn(NnOp::Attention { .. }) => match SdpaPlan::new(c, a, kern) {
                Some(p) => Path::Sdpa(p),
                None => Path::Reference(
                    "Attention: not the plain f32 form (causal, softcap, windows, cache or 3-D inputs)"
                        .into(),
                ),
            },
            Op::Nn(NnOp::ConvTranspose { .. }) => match ConvTransposePlan::new(c, weights, a, kern) {
                Some(p) => Path::ConvTranspose(p),
                None => Path::Reference(
                    "ConvTranspose: not a 2-D f32 one with constant weights, explicit pads and no output_shape"
                        .into(),
                ),
            },
            Op::Nn(NnOp::MaxPool { .. } | NnOp::AveragePool { .. }) => match PoolPlan::new(c, a, kern) {
                Some(p) => Path::Pool(p),
                None => Path::Reference(format!("{}: not a 2-D f32 pooling", a.op.name())),
            },
            Op::Misc(smelt_ir::op::MiscOp::Resize { .. }) => match ResizePlan::new(c, weights, a, kern) {
                Some(p) => Path::Resize(p),
                None => Path::Reference(
                    "Resize: not a 2-D f32 nearest (integer factor) or bilinear resize of the spatial axes"
                        .into(),
                ),
            },
            Op::Quant(smelt_ir::op::QuantOp::ConvInteger { .. }) => match QConvPlan::new(c, weights, a, kern) {
                Some(p) => Path::QConv(p),
                None => Path::Reference(
                    "ConvInteger: not a 2-D one-group convolution of u8 activations (constant zero point) by constant i8 weights (zero points 0)".into(),
                ),
            },
            Op::Quant(smelt_ir::op::QuantOp::MatMulInteger) => match QMatMulPlan::new(c, weights, a, kern) {
                Some(p) => Path::QMatMul(p),
                None => Path::Reference(
                    "MatMulInteger: not u8 activations (rows in place, depth a multiple of 4, one zero point) times constant 2-D i8 weights (zero points 0)".into(),
                ),
            },
            op => Path::Reference(format!("{}: no fast kernel yet", op.name())),
        };
        Ok(AnchorPlan {
            epilogue,
            acc,
            path,
        })
    }

    /// The kernel that runs the anchor, or the reference kernel with the reason.
    pub(crate) fn kernel_name(&self) -> String {
        match &self.path {
            Path::MatMul(p) => p.name.clone(),
            Path::Conv(p) => p.name.clone(),
            Path::ConvBlocked(p) => p.name.clone(),
            Path::Sdpa(p) => p.name.clone(),
            Path::Pool(p) => p.name.clone(),
            Path::ConvTranspose(p) => p.name.clone(),
            Path::Resize(p) => p.name.clone(),
            Path::QConv(p) => p.name.clone(),
            Path::QMatMul(p) => p.name.clone(),
            Path::Reference(why) => format!("reference ({why})"),
        }
    }

    /// Runs the anchor op, then its epilogue.
    pub(crate) fn run(&self, cx: &mut RunCx, a: &Anchor) -> Result<()> {
        // SAFETY (fast paths): validated by CpuPlan::new against these buffers.
        match &self.path {
            Path::MatMul(p) => unsafe { p.run(&cx.mem, &cx.ex) },
            Path::Conv(p) => unsafe { p.run(&cx.mem, &cx.ex) },
            Path::ConvBlocked(p) => unsafe { p.run(&cx.mem, &cx.ex) },
            Path::Sdpa(p) => unsafe { p.run(&cx.mem, &cx.ex) },
            Path::Pool(p) => unsafe { p.run(&cx.mem, &cx.ex) },
            Path::ConvTranspose(p) => unsafe { p.run(&cx.mem, &cx.ex) },
            Path::Resize(p) => unsafe { p.run(&cx.mem, &cx.ex) },
            Path::QConv(p) => unsafe { p.run(&cx.mem, &cx.ex) },
            Path::QMatMul(p) => unsafe { p.run(&cx.mem, &cx.ex) },
            Path::Reference(_) => return self.run_reference(cx, a),
        }
        Ok(())
    }

    fn run_reference(&self, cx: &mut RunCx, a: &Anchor) -> Result<()> {
        let name = a.op.name();
        let result = {
            let mut args = gather_args(cx, &a.inputs)?;
            widen_weights(&a.op, &mut args)?;
            let vals: Vec<Option<&Value>> = args.iter().map(Arg::value).collect();
            eval_values(&a.op, &vals, 1)?
        };
        let t = result
            .first()
            .ok_or_else(|| err!(Internal, "{name} gave no result"))?
            .tensor()?;
        ensure!(
            t.shape() == a.shape.as_slice(),
            Internal,
            "{name} result has shape {:?}, the plan expects {:?}",
            t.shape(),
            a.shape
        );
        let elem = Elem::of(t.dtype());
        ensure!(
            elem != Elem::Opaque,
            Internal,
            "{name} result of {} elements",
            t.dtype()
        );
        cx.mem.ptrs[self.acc] = super::data_ptr(t) as *mut u8;
        cx.mem.elems[self.acc] = elem;
        let ex: Exec = cx.ex;
        // SAFETY: the epilogue was validated; the result is dense of the loop shape and
        // outlives the call (it is only read).
        unsafe { self.epilogue.run(&cx.mem, &ex) };
        cx.mem.ptrs[self.acc] = std::ptr::null_mut();
        Ok(())
    }
}
