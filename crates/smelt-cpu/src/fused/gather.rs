//! Gather of whole rows (axis 0) from a dense table by integer indices computed at run time
//! (embedding lookups): each index checked, its row copied straight into the output window.

use super::access::{copy_chunk, Elem};
use super::Mem;
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::{BufferKind, Single};
use smelt_ir::op::LayoutOp;
use smelt_ir::{bail, DType, Op, Result};

/// A planned row gather.
pub(crate) struct GatherPlan {
    table_slot: usize,
    rows: usize,
    row_len: usize,
    elem_size: usize,
    idx_slot: usize,
    idx_offset: isize,
    idx_elem: Elem,
    count: usize,
    out_slot: usize,
    out_offset: isize,
}

impl GatherPlan {
    /// Plans `Gather(axis 0)` of a whole, dense table by a dense index window into a dense
    /// output window, or None.
    pub(crate) fn new(c: &Checker, s: &Single) -> Option<GatherPlan> {
        let Op::Layout(LayoutOp::Gather { axis: 0 }) = &s.op else {
            return None;
        };
        let data = s.inputs.first()?.as_ref()?;
        let idx = s.inputs.get(1)?.as_ref()?;
        let out = s.outputs.first()?.as_ref()?;
        if s.outputs.iter().skip(1).any(Option::is_some) {
            return None;
        }
        let db = c.plan.buffer(data.buffer);
        let ib = c.plan.buffer(idx.buffer);
        let ob = c.plan.buffer(out.buffer);
        let dense = |r: &smelt_ir::kernel::TensorRef| r.is_contiguous();
        if !matches!(db.kind, BufferKind::Weight(_) | BufferKind::Input(_))
            || !c.whole(data)
            || data.shape.is_empty()
            || !dense(idx)
            || !dense(out)
            || !matches!(ib.dtype, DType::I64 | DType::I32)
            || db.dtype != ob.dtype
            || db.dtype == DType::Str
            || db.dtype.storage_size() == 0
        {
            return None;
        }
        let rows = data.shape[0];
        let row_len: usize = smelt_ir::dims_product(&data.shape[1..]);
        let count: usize = smelt_ir::dims_product(&idx.shape);
        let mut want = idx.shape.clone();
        want.extend(&data.shape[1..]);
        if out.shape != want {
            return None;
        }
        Some(GatherPlan {
            table_slot: data.buffer.0 as usize,
            rows,
            row_len,
            elem_size: db.dtype.storage_size(),
            idx_slot: idx.buffer.0 as usize,
            idx_offset: idx.offset as isize,
            idx_elem: Elem::of(ib.dtype),
            count,
            out_slot: out.buffer.0 as usize,
            out_offset: out.offset as isize,
        })
    }

    /// Copies the rows; an index outside `[-rows, rows)` is an error naming it.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    pub(crate) unsafe fn run(&self, mem: &Mem) -> Result<()> {
        /// Rows fetched ahead of the copy: table rows are scattered and usually far from the
        /// core, so several are requested at once instead of one after another.
        const AHEAD: usize = 8;
        let ip = mem.ptrs[self.idx_slot];
        let index = |i: usize| -> i64 {
            match self.idx_elem {
                Elem::I64 => *(ip as *const i64).offset(self.idx_offset + i as isize),
                _ => *(ip as *const i32).offset(self.idx_offset + i as isize) as i64,
            }
        };
        // Index `i` as a row, when in range (negative indices count from the end).
        let row_of = |raw: i64| {
            let r = if raw < 0 { raw + self.rows as i64 } else { raw };
            (0..self.rows as i64).contains(&r).then_some(r as usize)
        };
        let row_bytes = self.row_len * self.elem_size;
        let table = mem.ptrs[self.table_slot] as *const u8;
        let prefetch = |i: usize| {
            if let Some(r) = row_of(index(i)) {
                let row = table.wrapping_add(r * row_bytes);
                for off in (0..row_bytes).step_by(64) {
                    smelt_kernels::simd::prefetch_read(row.wrapping_add(off) as *const f32);
                }
            }
        };
        for i in 0..AHEAD.min(self.count) {
            prefetch(i);
        }
        for i in 0..self.count {
            if i + AHEAD < self.count {
                prefetch(i + AHEAD);
            }
            let raw = index(i);
            let Some(r) = row_of(raw) else {
                bail!(
                    InvalidInput,
                    "Gather: index {raw} at position {i} is out of range for {} rows",
                    self.rows
                );
            };
            let n = self.row_len;
            copy_chunk(
                self.elem_size,
                false,
                mem.ptrs[self.table_slot],
                r as isize * n as isize,
                1,
                mem.ptrs[self.out_slot],
                self.out_offset + (i * n) as isize,
                1,
                n,
            );
        }
        Ok(())
    }
}
