//! A body over one chunk: loads converted to f32 here, the math by the kernel table's
//! vectorized program evaluator (`smelt_kernels::program`), stores converted back.

use super::access::{load_chunk, store_chunk};
use super::Mem;
use smelt_ir::kernel::ScalarOp;
use smelt_kernels::program::{fill_consts, CHUNK, SLOT};
use smelt_kernels::{buf::with_scratch, Kernels};

/// Where a body's loads read: buffer slot per window, the chunk's offsets and steps.
pub(crate) struct Windows<'a> {
    /// Buffer slot of each window (loads first, indexed like `ScalarOp::Load`).
    pub bufs: &'a [usize],
    /// Each window's element offset at the chunk start.
    pub offs: &'a [isize],
    /// Each window's step along the chunk.
    pub inner: &'a [isize],
}

/// Scratch values of a body: one chunk array per op (this thread's reused scratch).
pub(crate) struct Values<'a> {
    vals: &'a mut [f32],
}

impl Values<'_> {
    /// The first `len` values of op `i`.
    pub(crate) fn get(&self, i: usize, len: usize) -> &[f32] {
        &self.vals[i * SLOT..i * SLOT + len]
    }

    /// Evaluates `order` over `len` elements whose loads and anchor values are filled.
    pub(crate) fn eval(&mut self, kern: &Kernels, ops: &[ScalarOp], order: &[usize], len: usize) {
        (kern.eval)(ops, order, &[], len, self.vals, &[]);
    }

    /// The chunk array of op `i`, for filling.
    pub(crate) fn slot(&mut self, i: usize) -> &mut [f32] {
        &mut self.vals[i * SLOT..i * SLOT + CHUNK]
    }
}

/// Runs `f` with value scratch for `ops`, constants filled.
pub(crate) fn with_values<R>(ops: &[ScalarOp], f: impl FnOnce(&mut Values) -> R) -> R {
    with_scratch(ops.len().max(1) * SLOT, |vals| {
        fill_consts(ops, vals);
        f(&mut Values { vals })
    })
}

/// Evaluates the ops listed in `order` (ascending; operands listed before use) over a
/// chunk of `len` elements, leaving in memory the values `keep` names (all when empty, see
/// [`smelt_kernels::program::kept_values`]). `reduced` holds the finished reduction stages.
///
/// # Safety
/// The windows' offsets must be in bounds of their buffers for `len` steps (validated).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn eval(
    kern: &Kernels,
    ops: &[ScalarOp],
    order: &[usize],
    keep: &[bool],
    mem: &Mem,
    w: &Windows,
    len: usize,
    v: &mut Values,
    reduced: &[f32],
) {
    for &i in order {
        if let ScalarOp::Load(k) = ops[i] {
            let b = w.bufs[k];
            let out = &mut v.vals[i * SLOT..i * SLOT + len];
            load_chunk(mem.elems[b], mem.ptrs[b], w.offs[k], w.inner[k], out);
        }
    }
    (kern.eval)(ops, order, keep, len, v.vals, reduced);
}

/// Writes op `value`'s chunk to window `k`.
///
/// # Safety
/// As for [`eval`]; the window must be writable.
pub(crate) unsafe fn store(mem: &Mem, w: &Windows, k: usize, value: &[f32]) {
    let b = w.bufs[k];
    store_chunk(mem.elems[b], mem.ptrs[b], w.offs[k], w.inner[k], value);
}
