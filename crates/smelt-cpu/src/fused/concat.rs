//! Concat on the fast path: each input window copied straight into its slice of the output
//! window (no gathered copies of the inputs, no scatter of a result).

use super::single::copy_window;
use super::Mem;
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::{Single, TensorRef};
use smelt_ir::op::LayoutOp;
use smelt_ir::{DType, Op};

/// A planned Concat: the axis and the element type.
pub(crate) struct ConcatPlan {
    axis: usize,
    dtype: DType,
}

impl ConcatPlan {
    /// Plans a Concat whose inputs and output are all present windows of one element type
    /// (not strings) that fit together along the axis, or None.
    pub(crate) fn new(c: &Checker, s: &Single) -> Option<ConcatPlan> {
        let Op::Layout(LayoutOp::Concat { axis }) = &s.op else {
            return None;
        };
        let [Some(out)] = s.outputs.as_slice() else {
            return None;
        };
        let rank = out.shape.len() as i64;
        let ax = if *axis < 0 { axis + rank } else { *axis };
        if !(0..rank).contains(&ax) {
            return None;
        }
        let ax = ax as usize;
        let dtype = c.plan.buffer(out.buffer).dtype;
        if dtype == DType::Str {
            return None;
        }
        let mut along = 0;
        for r in &s.inputs {
            let r = r.as_ref()?;
            let fits = r.shape.len() == out.shape.len()
                && (0..out.shape.len()).all(|d| d == ax || r.shape[d] == out.shape[d]);
            if c.plan.buffer(r.buffer).dtype != dtype || !fits {
                return None;
            }
            along += r.shape[ax];
        }
        (along == out.shape[ax]).then_some(ConcatPlan { axis: ax, dtype })
    }

    /// Copies the inputs into the output; false (nothing written) when a storage is not
    /// there or an input shares bytes with the output (the caller then runs the op whole).
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    pub(crate) unsafe fn run(&self, mem: &Mem, s: &Single) -> bool {
        let Some(Some(out)) = s.outputs.first() else {
            return false;
        };
        let size = self.dtype.storage_size() as isize;
        let bytes = |r: &TensorRef| {
            let p = mem.ptrs[r.buffer.0 as usize] as isize;
            r.span().map(|(lo, hi)| (p + lo * size, p + hi * size))
        };
        let dst = mem.ptrs[out.buffer.0 as usize];
        let Some((o0, o1)) = bytes(out) else {
            return true;
        };
        let ins: Vec<&TensorRef> = s.inputs.iter().flatten().collect();
        let clash = ins.iter().any(|r| {
            mem.ptrs[r.buffer.0 as usize].is_null()
                || bytes(r).is_some_and(|(a, b)| a < o1 && o0 < b)
        });
        if dst.is_null() || clash {
            return false;
        }
        let mut off = out.offset as isize;
        for r in ins {
            copy_window(
                self.dtype,
                mem.ptrs[r.buffer.0 as usize],
                r.offset as isize,
                &r.strides,
                dst,
                off,
                out.strides.clone(),
                &r.shape,
            );
            off += r.shape[self.axis] as isize * out.strides[self.axis];
        }
        true
    }
}
