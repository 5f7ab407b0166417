//! Anchors: the op runs through the reference kernels on its gathered inputs, then the
//! epilogue loop reads its result through `ScalarOp::Acc` and writes the stores.

use super::access::Elem;
use super::elementwise::LoopPlan;
use super::single::{gather_args, Arg};
use super::validate::{Checker, Use};
use super::RunCx;
use smelt_ir::kernel::Anchor;
use smelt_ir::{ensure, err, Result, Value};
use smelt_reference::eval_values;

/// A validated anchor: its epilogue reads the result from the extra buffer slot `acc`.
pub(crate) struct AnchorPlan {
    epilogue: LoopPlan,
    acc: usize,
}

impl AnchorPlan {
    /// Validates an anchor; `acc` is the run's buffer slot for the anchor result.
    pub(crate) fn new(c: &Checker, a: &Anchor, acc: usize) -> Result<AnchorPlan> {
        for (i, r) in a.inputs.iter().enumerate() {
            if let Some(r) = r {
                c.window(r, Use::OpInput, &format!("anchor input {i}"))?;
                let d = c.plan.buffer(r.buffer).dtype;
                ensure!(
                    Elem::of(d) != Elem::Opaque,
                    "anchor input {i}: {d} elements"
                );
            }
        }
        ensure!(
            a.epilogue.shape == a.shape,
            "epilogue shape {:?} is not the anchor's {:?}",
            a.epilogue.shape,
            a.shape
        );
        let epilogue =
            LoopPlan::new(c, &a.epilogue, Some(acc)).map_err(|e| e.context("epilogue"))?;
        Ok(AnchorPlan { epilogue, acc })
    }

    /// Runs the anchor op, then its epilogue.
    pub(crate) fn run(&self, cx: &mut RunCx, a: &Anchor) -> Result<()> {
        let name = a.op.name();
        let result = {
            let args = gather_args(cx, &a.inputs)?;
            let vals: Vec<Option<&Value>> = args.iter().map(Arg::value).collect();
            match super::sdpa::try_sdpa(&a.op, &vals) {
                Some(t) => vec![Value::Tensor(t?)],
                None => eval_values(&a.op, &vals, 1)?,
            }
        };
        let t = result
            .first()
            .ok_or_else(|| err!("{name} gave no result"))?
            .tensor()?;
        ensure!(
            t.shape() == a.shape.as_slice(),
            "{name} result has shape {:?}, the plan expects {:?}",
            t.shape(),
            a.shape
        );
        let elem = Elem::of(t.dtype());
        ensure!(
            elem != Elem::Opaque,
            "{name} result of {} elements",
            t.dtype()
        );
        cx.mem.ptrs[self.acc] = super::data_ptr(t) as *mut u8;
        cx.mem.elems[self.acc] = elem;
        // SAFETY: the epilogue was validated; the result is dense of the loop shape and
        // outlives the call (it is only read).
        unsafe { self.epilogue.run(&cx.mem, cx.threads) };
        cx.mem.ptrs[self.acc] = std::ptr::null_mut();
        Ok(())
    }
}
