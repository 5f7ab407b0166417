//! Elementwise loops (and anchor epilogues): the body evaluated chunk by chunk over the
//! iteration space, loads converted to f32, stores converted back.

use super::access::Elem;
use super::interp::{eval, store, with_values, Windows};
use super::nest::{for_parts, walk_chunks, walk_rows, Nest, PARALLEL_MIN};
use super::{Exec, Mem};
use smelt_ir::kernel::check::{self as validate, Checker, Use};
use smelt_ir::kernel::{BufferId, Loop, ScalarOp, TensorRef};
use smelt_ir::{ensure, DType, Result};
use smelt_kernels::isa::llc_bytes;
use smelt_kernels::jit::{Access, BodyJit};
use smelt_kernels::{Isa, Kernels};
use std::sync::OnceLock;

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
    /// How the body would be compiled (windows' access, streamed stores) where it can be
    /// and the loop is long enough to pay for it.
    jit_spec: Option<(Vec<Access>, bool)>,
    /// The body compiled for the plan's ISA at its first run (see [`LoopPlan::compiled`]).
    jit: OnceLock<Option<BodyJit>>,
    /// The ISA the plan was made for.
    isa: Isa,
}

impl LoopPlan {
    /// Validates a loop; `acc` is the buffer slot of an anchor's result (epilogues only),
    /// which `ScalarOp::Acc` reads row-major over the loop shape. The body is compiled to
    /// `kern`'s instructions where it can be.
    pub(crate) fn new(
        c: &Checker,
        l: &Loop,
        acc: Option<usize>,
        kern: &Kernels,
    ) -> Result<LoopPlan> {
        let n_loads = l.loads.len();
        let numel = smelt_ir::numel(&l.shape)?;
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
        let offsets: Vec<isize> = windows.iter().map(|w| w.offset as isize).collect();
        let nest = Nest::coalesced(&l.shape, windows.into_iter().map(|w| w.strides).collect());
        let inner = nest.inner();
        // Generated code reads and writes f32 only (an anchor's result is f32).
        let f32s = (l.loads.iter().map(|r| r.buffer))
            .chain(l.stores.iter().map(|s| s.dst.buffer))
            .all(|b| c.plan.buffer(b).dtype == DType::F32);
        let access = row_access(&inner, &bufs, &offsets, &nest, &stores).filter(|_| f32s);
        // Outputs past the last-level cache are streamed to memory.
        let stream = numel.saturating_mul(4 * stores.len()) > llc_bytes();
        let jit_spec = access
            .filter(|a| numel >= JIT_MIN && BodyJit::compiles(kern.isa, &ops, &order, a, &stores))
            .map(|a| (a, stream));
        Ok(LoopPlan {
            jit_spec,
            jit: OnceLock::new(),
            isa: kern.isa,
            inner,
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
        let jit = self.compiled(ex.kern, mem);
        for_parts(
            &ex,
            &self.nest.shape,
            &self.nest.strides,
            &self.offsets,
            |shape, base| match jit {
                // SAFETY: the slice is part of the validated nest.
                Some(jit) => unsafe { self.run_rows(jit, mem, shape, base) },
                // SAFETY: as above.
                None => unsafe { self.run_part(ex.kern, mem, shape, base) },
            },
        );
    }

    /// Runs the compiled body over a part of the nest, row by row.
    ///
    /// # Safety
    /// As [`LoopPlan::run`]; `shape` and `base` a part of the nest.
    unsafe fn run_rows(&self, jit: &BodyJit, mem: &Mem, shape: &[usize], base: &[isize]) {
        let mut ptrs = vec![std::ptr::null_mut::<f32>(); self.bufs.len()];
        walk_rows(shape, &self.nest.strides, base, |offs, len| {
            for ((p, &b), &o) in ptrs.iter_mut().zip(&self.bufs).zip(offs) {
                // SAFETY: in bounds of the validated windows.
                *p = unsafe { (mem.ptrs[b] as *mut f32).offset(o) };
            }
            // SAFETY: the windows hold the row (validated), f32 (checked), and overlap only
            // in place (`row_access`).
            unsafe { jit.run(&ptrs, len) };
        })
    }

    /// The compiled body, when the body can be compiled, `kern` is the plan's ISA and
    /// every window is f32; compiled at the first run that asks (a plan compiles only the
    /// loops it runs: most anchors' epilogue loops never run, their epilogues fused).
    fn compiled(&self, kern: &Kernels, mem: &Mem) -> Option<&BodyJit> {
        let (access, stream) = self.jit_spec.as_ref()?;
        if kern.isa != self.isa || self.bufs.iter().any(|&b| mem.elems[b] != Elem::F32) {
            return None;
        }
        self.jit
            .get_or_init(|| {
                BodyJit::compile(
                    self.isa,
                    &self.ops,
                    &self.order,
                    access,
                    &self.stores,
                    *stream,
                )
            })
            .as_ref()
    }

    /// Whether the body runs as generated code (on the ISA it was planned for).
    pub(crate) fn is_compiled(&self) -> bool {
        self.jit_spec.is_some()
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

/// Fewest elements a loop has for its body to be compiled: below, the interpreter's
/// per-run cost is less than the compile's (about 20 us, plus under a millisecond once
/// per process for the encoder's tables).
const JIT_MIN: usize = 1 << 14;

/// How each window runs along a row, where the body may be compiled: every load's
/// innermost step 0 or 1, every store's 1, and no store overlapping another window but
/// one at the same place; `None` otherwise.
fn row_access(
    inner: &[isize],
    bufs: &[usize],
    offsets: &[isize],
    nest: &Nest,
    stores: &[(usize, usize)],
) -> Option<Vec<Access>> {
    let access: Vec<Access> = inner
        .iter()
        .map(|&s| match s {
            0 => Some(Access::Broadcast),
            1 => Some(Access::Contiguous),
            _ => None,
        })
        .collect::<Option<_>>()?;
    for &(_, k) in stores {
        if access[k] != Access::Contiguous {
            return None;
        }
        for w in 0..bufs.len() {
            let same_place = offsets[w] == offsets[k] && nest.strides[w] == nest.strides[k];
            if w != k && bufs[w] == bufs[k] && !same_place {
                return None;
            }
        }
    }
    Some(access)
}
