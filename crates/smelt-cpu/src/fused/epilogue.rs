//! Anchor epilogues applied to blocks of the anchor's result as the fast kernels produce
//! them (GEMM tiles, convolution rows), while the block is still in cache: loads gathered
//! for the block, the body evaluated by the kernel table, stores scattered.
//!
//! A fast anchor computes its result as `batch` matrices of `rows x cols` (a MatMul's
//! batch, M and N; a convolution's image and group, output channels and output pixels), so
//! each window of the epilogue is mapped once to an offset per batch, a row step and a
//! column step ([`Win`]).

use super::access::{load_chunk, store_chunk, Elem};
use super::interp::with_values;
use super::Mem;
use smelt_ir::kernel::check::{self as validate, Checker, Use};
use smelt_ir::kernel::{Loop, ScalarOp, TensorRef};
use smelt_ir::{ensure, Result};
use smelt_kernels::gemm::TileSink;
use smelt_kernels::program::CHUNK;
use smelt_kernels::Kernels;

/// A window in anchor coordinates: element `(b, i, j)` is at `batch[b] + i * rs + j * cs`
/// of buffer slot `slot`.
#[derive(Debug, Clone)]
pub(crate) struct Win {
    pub slot: usize,
    pub batch: Vec<isize>,
    pub rs: isize,
    pub cs: isize,
}

/// How an anchor's result maps to `(batch, row, col)`: batch `b` starts at result index
/// `batch_base[b]`; a row index runs over the dimensions `row` (row-major, with their
/// extents), a column index over `col`.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// The result index of element `(b, 0, 0)`, per batch.
    pub batch_base: Vec<Vec<usize>>,
    /// The dimensions a row index runs over, outermost first, with extents.
    pub row: Vec<(usize, usize)>,
    /// The dimensions a column index runs over, outermost first, with extents.
    pub col: Vec<(usize, usize)>,
}

/// The uniform step of a flat index over `dims` (row-major) in a window, if it has one.
fn flat_step(r: &TensorRef, dims: &[(usize, usize)]) -> Option<isize> {
    let mut unit: Option<isize> = None;
    let mut inner = 1isize;
    // Checked: an empty window's other dims may multiply past any integer (no step then).
    for &(d, n) in dims.iter().rev() {
        if n > 1 {
            let s = r.strides[d];
            match unit {
                None if s.checked_rem(inner)? == 0 => unit = Some(s / inner),
                None => return None,
                Some(u) if Some(s) != u.checked_mul(inner) => return None,
                Some(_) => {}
            }
        }
        inner = inner.checked_mul(isize::try_from(n).ok()?)?;
    }
    Some(unit.unwrap_or(0))
}

impl Layout {
    /// The window of `r` (indexed like the result) in these coordinates, or None when its
    /// rows or columns do not step uniformly.
    pub(crate) fn window(&self, r: &TensorRef) -> Option<Win> {
        let rs = flat_step(r, &self.row)?;
        let cs = flat_step(r, &self.col)?;
        let batch = self
            .batch_base
            .iter()
            .map(|idx| {
                idx.iter()
                    .zip(&r.strides)
                    .map(|(&i, &s)| i as isize * s)
                    .sum::<isize>()
                    + r.offset as isize
            })
            .collect();
        Some(Win {
            slot: r.buffer.0 as usize,
            batch,
            rs,
            cs,
        })
    }
}

/// A validated epilogue in anchor coordinates.
pub(crate) struct Epilogue {
    ops: Vec<ScalarOp>,
    order: Vec<usize>,
    loads: Vec<(usize, Win)>,
    accs: Vec<usize>,
    stores: Vec<(usize, Win)>,
    /// Whether blocks may be processed on several threads at once.
    pub parallel: bool,
}

impl Epilogue {
    /// Maps an anchor's epilogue loop (validated by the caller's LoopPlan) to `layout`;
    /// None when a window does not map.
    pub(crate) fn new(c: &Checker, l: &Loop, layout: &Layout) -> Result<Option<Epilogue>> {
        validate::body(&l.ops, l.loads.len(), true, 0)?;
        let mut loads = Vec::new();
        let roots: Vec<usize> = l.stores.iter().map(|s| s.value).collect();
        let order = validate::deps(&l.ops, &roots);
        for &i in &order {
            if let ScalarOp::Load(k) = l.ops[i] {
                let r = &l.loads[k];
                c.window(r, Use::Load, &format!("load {k}"))?;
                let Some(w) = layout.window(r) else {
                    return Ok(None);
                };
                loads.push((i, w));
            }
        }
        let mut stores = Vec::new();
        for (k, s) in l.stores.iter().enumerate() {
            validate::op_index(&l.ops, s.value, &format!("store {k}"))?;
            ensure!(
                !s.per_row,
                Internal,
                "store {k}: per-row store in an epilogue"
            );
            c.window(&s.dst, Use::Store, &format!("store {k}"))?;
            let Some(w) = layout.window(&s.dst) else {
                return Ok(None);
            };
            stores.push((s.value, w));
        }
        let accs = order
            .iter()
            .copied()
            .filter(|&i| l.ops[i] == ScalarOp::Acc)
            .collect();
        let load_refs: Vec<&TensorRef> = l.loads.iter().collect();
        let dsts: Vec<&TensorRef> = l.stores.iter().map(|s| &s.dst).collect();
        Ok(Some(Epilogue {
            ops: l.ops.clone(),
            order,
            loads,
            accs,
            stores,
            parallel: validate::race_free(&load_refs, &dsts),
        }))
    }

    /// The rows the anchor's values land in when the epilogue only stores them, once, into
    /// an f32 window whose columns are contiguous: a kernel may then write each row there
    /// itself instead of handing it to [`Epilogue::apply`].
    pub(crate) fn plain_rows(&self, mem: &Mem) -> Option<PlainRows<'_>> {
        let only_stores = self.order.iter().all(|&o| self.ops[o] == ScalarOp::Acc);
        match self.stores.as_slice() {
            [(_, w)] if only_stores && w.cs == 1 && matches!(mem.elems[w.slot], Elem::F32) => {
                Some(PlainRows {
                    base: mem.ptrs[w.slot] as *mut f32,
                    win: w,
                })
            }
            _ => None,
        }
    }

    /// Applies the epilogue to rows `i0 .. i0 + rows`, columns `j0 .. j0 + cols` of batch
    /// `b`, whose anchor values are at `acc[r * ld + j]`.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against; the block is inside the
    /// anchor's result; `acc` holds the block.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn apply(
        &self,
        kern: &Kernels,
        mem: &Mem,
        b: usize,
        i0: usize,
        rows: usize,
        j0: usize,
        cols: usize,
        acc: *const f32,
        ld: usize,
    ) {
        let only_stores = self.order.iter().all(|&i| self.ops[i] == ScalarOp::Acc);
        if only_stores {
            for r in 0..rows {
                let src = std::slice::from_raw_parts(acc.add(r * ld), cols);
                for (_, w) in &self.stores {
                    store_row(mem, w, b, i0 + r, j0, src);
                }
            }
            return;
        }
        with_values(&self.ops, |v| {
            let piece = cols.min(CHUNK);
            let per_chunk = (CHUNK / piece).max(1);
            for jj in (0..cols).step_by(piece) {
                let w = piece.min(cols - jj);
                for r0 in (0..rows).step_by(per_chunk) {
                    let nr = per_chunk.min(rows - r0);
                    let len = nr * w;
                    for &a in &self.accs {
                        let dst = v.slot(a);
                        for r in 0..nr {
                            let src = acc.add((r0 + r) * ld + jj);
                            std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr().add(r * w), w);
                        }
                    }
                    for (op, win) in &self.loads {
                        let dst = v.slot(*op);
                        for r in 0..nr {
                            let off = win.batch[b]
                                + (i0 + r0 + r) as isize * win.rs
                                + (j0 + jj) as isize * win.cs;
                            load_chunk(
                                mem.elems[win.slot],
                                mem.ptrs[win.slot],
                                off,
                                win.cs,
                                &mut dst[r * w..(r + 1) * w],
                            );
                        }
                    }
                    v.eval(kern, &self.ops, &self.order, len);
                    for (value, win) in &self.stores {
                        let vals = v.get(*value, len);
                        for r in 0..nr {
                            store_row(mem, win, b, i0 + r0 + r, j0 + jj, &vals[r * w..(r + 1) * w]);
                        }
                    }
                }
            }
        });
    }
}

/// The rows of an anchor's result in the one f32 window a store-only epilogue writes (see
/// [`Epilogue::plain_rows`]).
pub(crate) struct PlainRows<'a> {
    base: *mut f32,
    win: &'a Win,
}

// SAFETY: as for `Mem`: threads share the rows only to write disjoint ones.
unsafe impl Sync for PlainRows<'_> {}

impl PlainRows<'_> {
    /// Where row `i` of batch `b` starts (its columns contiguous after it).
    pub(crate) fn row(&self, b: usize, i: usize) -> *mut f32 {
        let off = self.win.batch[b] + i as isize * self.win.rs;
        self.base.wrapping_offset(off)
    }
}

/// Writes one row piece of a block through a window.
///
/// # Safety
/// As for [`Epilogue::apply`].
unsafe fn store_row(mem: &Mem, w: &Win, b: usize, i: usize, j: usize, src: &[f32]) {
    let off = w.batch[b] + i as isize * w.rs + j as isize * w.cs;
    store_chunk(mem.elems[w.slot], mem.ptrs[w.slot], off, w.cs, src);
}

/// A GEMM tile sink that runs an epilogue on each tile (after an optional transform of the
/// anchor values, e.g. Gemm's alpha and C).
pub(crate) struct EpilogueSink<
    'a,
    F: Fn(usize, usize, usize, usize, usize, &mut [f32], usize) + Sync,
> {
    pub epi: &'a Epilogue,
    pub kern: &'a Kernels,
    pub mem: &'a Mem,
    /// Maps a GEMM batch to the epilogue's batch and row offset.
    pub map: &'a (dyn Fn(usize) -> (usize, usize) + Sync),
    pub pre: F,
}

impl<F: Fn(usize, usize, usize, usize, usize, &mut [f32], usize) + Sync> TileSink
    for EpilogueSink<'_, F>
{
    fn tile(
        &self,
        b: usize,
        i0: usize,
        j0: usize,
        rows: usize,
        cols: usize,
        t: &mut [f32],
        ld: usize,
    ) {
        let (eb, row_off) = (self.map)(b);
        (self.pre)(eb, row_off + i0, j0, rows, cols, t, ld);
        // SAFETY: the anchor validated the epilogue against the plan's buffers and the
        // GEMM covers exactly the anchor's result.
        unsafe {
            self.epi.apply(
                self.kern,
                self.mem,
                eb,
                row_off + i0,
                rows,
                j0,
                cols,
                t.as_ptr(),
                ld,
            )
        };
    }
}
