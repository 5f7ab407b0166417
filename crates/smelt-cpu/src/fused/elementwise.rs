//! Elementwise loops (and anchor epilogues): the body evaluated chunk by chunk over the
//! iteration space, loads converted to f32, stores converted back.

use super::interp::{eval, store, with_values, Windows};
use super::nest::{for_parts, walk_chunks, Nest, PARALLEL_MIN};
use super::{Exec, Mem};
use smelt_ir::kernel::check::{self as validate, Checker, Use};
use smelt_ir::kernel::{BufferId, Loop, ScalarOp, TensorRef};
use smelt_ir::{ensure, Result};
use smelt_kernels::Kernels;

/// A validated loop, coalesced; windows are the loads (then the anchor's result) then the stores.
pub(crate) struct LoopPlan {
    ops: Vec<ScalarOp>,
    nest: Nest,
    inner: Vec<isize>,
    bufs: Vec<usize>,
    offsets: Vec<isize>,
    order: Vec<usize>,
    /// Which ops' values `order` must leave in memory (the stores' and those read later).
    keep: Vec<bool>,
    stores: Vec<(usize, usize)>,
    parallel: bool,
}

impl LoopPlan {
    /// Validates a loop; `acc` is the buffer slot of an anchor's result (epilogues only),
    /// which `ScalarOp::Acc` reads row-major over the loop shape.
    pub(crate) fn new(c: &Checker, l: &Loop, acc: Option<usize>) -> Result<LoopPlan> {
        let n_loads = l.loads.len();
        smelt_ir::numel(&l.shape)?;
        validate::body(&l.ops, n_loads, acc.is_some(), 0)?;
        let mut windows: Vec<TensorRef> = Vec::new();
        for (k, r) in l.loads.iter().enumerate() {
            let what = format!("load {k}");
            c.window(r, Use::Load, &what)?;
            ensure!(
                r.shape == l.shape,
                Internal,
                "{what}: shape {:?} is not the loop's {:?}",
                r.shape,
                l.shape
            );
            windows.push(r.clone());
        }
        let mut bufs: Vec<usize> = l.loads.iter().map(|r| r.buffer.0 as usize).collect();
        let mut ops = l.ops.clone();
        if let Some(slot) = acc {
            for op in ops.iter_mut() {
                if *op == ScalarOp::Acc {
                    *op = ScalarOp::Load(n_loads);
                }
            }
            windows.push(TensorRef::dense(BufferId(u32::MAX), &l.shape));
            bufs.push(slot);
        }
        let mut stores = Vec::new();
        for (k, s) in l.stores.iter().enumerate() {
            let what = format!("store {k}");
            validate::op_index(&l.ops, s.value, &what)?;
            ensure!(
                !s.per_row,
                Internal,
                "{what}: per-row store outside a reduction"
            );
            c.window(&s.dst, Use::Store, &what)?;
            ensure!(
                s.dst.shape == l.shape,
                Internal,
                "{what}: shape {:?} is not the loop's {:?}",
                s.dst.shape,
                l.shape
            );
            stores.push((s.value, windows.len()));
            windows.push(s.dst.clone());
            bufs.push(s.dst.buffer.0 as usize);
        }
        let roots: Vec<usize> = l.stores.iter().map(|s| s.value).collect();
        let order = validate::deps(&ops, &roots);
        let keep = smelt_kernels::program::kept_values(&ops, &order, &roots);
        let loads: Vec<&TensorRef> = l.loads.iter().collect();
        let dsts: Vec<&TensorRef> = l.stores.iter().map(|s| &s.dst).collect();
        let parallel = validate::race_free(&loads, &dsts);
        let offsets = windows.iter().map(|w| w.offset as isize).collect();
        let nest = Nest::coalesced(&l.shape, windows.into_iter().map(|w| w.strides).collect());
        Ok(LoopPlan {
            inner: nest.inner(),
            ops,
            nest,
            bufs,
            offsets,
            order,
            keep,
            stores,
            parallel,
        })
    }

    /// Runs the loop, split between threads when large and race free.
    ///
    /// # Safety
    /// `mem` must hold the storages the plan was validated against (and the anchor result).
    pub(crate) unsafe fn run(&self, mem: &Mem, ex: &Exec) {
        let n = self.nest.len();
        if n == 0 {
            return;
        }
        let ex = if self.parallel && n >= PARALLEL_MIN {
            *ex
        } else {
            ex.serial()
        };
        for_parts(
            &ex,
            &self.nest.shape,
            &self.nest.strides,
            &self.offsets,
            |shape, base| {
                // SAFETY: the slice is part of the validated nest.
                unsafe { self.run_part(ex.kern, mem, shape, base) }
            },
        );
    }

    unsafe fn run_part(&self, kern: &Kernels, mem: &Mem, shape: &[usize], base: &[isize]) {
        with_values(&self.ops, |v| {
            walk_chunks(shape, &self.nest.strides, &self.inner, base, |offs, len| {
                let w = Windows {
                    bufs: &self.bufs,
                    offs,
                    inner: &self.inner,
                };
                eval(
                    kern,
                    &self.ops,
                    &self.order,
                    &self.keep,
                    mem,
                    &w,
                    len,
                    v,
                    &[],
                );
                for &(value, k) in &self.stores {
                    store(mem, &w, k, v.get(value, len));
                }
            })
        });
    }
}
