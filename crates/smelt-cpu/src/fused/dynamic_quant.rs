//! DynamicQuantizeLinear of a dense f32 window on the kernel table (`smelt_kernels::qgemm::
//! dynamic`): the range pass and the quantizing pass write the u8 tensor, its scale and its
//! zero point straight into their windows.

use super::{Exec, Mem};
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::{Single, TensorRef};
use smelt_ir::op::QuantOp;
use smelt_ir::{DType, Op};

/// Where one output goes: (buffer slot, element offset).
type At = Option<(usize, isize)>;

/// A planned DynamicQuantizeLinear.
pub(crate) struct DynamicQuantPlan {
    x: (usize, isize),
    len: usize,
    y: At,
    scale: At,
    zero_point: At,
}

impl DynamicQuantPlan {
    /// Plans a DynamicQuantizeLinear of a dense f32 window into dense windows, or None.
    pub(crate) fn new(c: &Checker, s: &Single) -> Option<DynamicQuantPlan> {
        if !matches!(s.op, Op::Quant(QuantOp::DynamicQuantizeLinear)) {
            return None;
        }
        let x = s.inputs.first()?.as_ref()?;
        let dtype = |r: &TensorRef| c.plan.buffer(r.buffer).dtype;
        if dtype(x) != DType::F32 || !x.is_contiguous() {
            return None;
        }
        let len = smelt_ir::dims_product(&x.shape);
        let out = |i: usize, want: DType, count: usize| -> Option<At> {
            match s.outputs.get(i)? {
                None => Some(None),
                Some(r) => (dtype(r) == want
                    && r.is_contiguous()
                    && smelt_ir::dims_product(&r.shape) == count)
                    .then_some(Some((r.buffer.0 as usize, r.offset as isize))),
            }
        };
        Some(DynamicQuantPlan {
            x: (x.buffer.0 as usize, x.offset as isize),
            len,
            y: out(0, DType::U8, len)?,
            scale: out(1, DType::F32, 1)?,
            zero_point: out(2, DType::U8, 1)?,
        })
    }

    /// Quantizes, on the run's threads.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    pub(crate) unsafe fn run(&self, mem: &Mem, ex: &Exec) {
        let x = std::slice::from_raw_parts(
            (mem.ptrs[self.x.0] as *const f32).offset(self.x.1),
            self.len,
        );
        let y = self.y.map(|(slot, off)| {
            std::slice::from_raw_parts_mut(mem.ptrs[slot].offset(off), self.len)
        });
        let (scale, zp) = smelt_kernels::qgemm::dynamic::dynamic_quantize_threaded(
            ex.kern.isa,
            ex.pool,
            ex.threads,
            x,
            y,
        );
        if let Some((slot, off)) = self.scale {
            *(mem.ptrs[slot] as *mut f32).offset(off) = scale;
        }
        if let Some((slot, off)) = self.zero_point {
            *mem.ptrs[slot].offset(off) = zp;
        }
    }
}
