//! Reductions: per row, each stage combines its value over the reduced dims (later stages
//! may read earlier results), then per-element and per-row stores are written.

use super::access::Elem;
use super::interp::{eval, store, with_values, Windows};
use super::nest::{for_parts, walk_chunks, walk_points, Nest, PARALLEL_MIN};
use super::row_kernel::RowKernel;
use super::{Exec, Mem};
use smelt_ir::kernel::check::{self as validate, Checker, Use};
use smelt_ir::kernel::{Binary, Combine, Reduction, ScalarOp, TensorRef};
use smelt_ir::{ensure, Result};
use smelt_kernels::buf::with_scratch;
use smelt_kernels::program::Partial;
use smelt_kernels::Kernels;

/// One validated stage: how it combines, its value op, the ops it evaluates.
struct StagePlan {
    combine: Combine,
    value: usize,
    /// Ops that vary along the row, evaluated per chunk.
    order: Vec<usize>,
    /// Ops constant along the row (constants, earlier stages, loads that broadcast along
    /// the reduced dims, and what follows from them), evaluated once per row.
    uniform: Vec<usize>,
}

/// Splits an evaluation order into the ops that vary along a row and those that do not.
/// Constants are left out of the second list: their chunk arrays are filled once.
fn split_uniform(ops: &[ScalarOp], order: &[usize], uniform: &[bool]) -> (Vec<usize>, Vec<usize>) {
    let (varying, rowwise): (Vec<usize>, Vec<usize>) = order.iter().partition(|&&i| !uniform[i]);
    let rowwise = rowwise
        .into_iter()
        .filter(|&i| !matches!(ops[i], ScalarOp::Const(_)))
        .collect();
    (varying, rowwise)
}

/// A softmax run down columns: window `x` read, window `y` written, their steps along the
/// reduced dim, its length, and each window's element span (to check overlap at run time).
struct ColumnSoftmax {
    x: usize,
    y: usize,
    xs: isize,
    ys: isize,
    n: usize,
    spans: [(isize, isize); 2],
}

/// The evaluation orders of a reduction run by columns: the stage's ops (varying and
/// uniform along the row together), the per-row stores' `Reduced` ops (filled with each
/// column's result) and their other ops, and every window's step along the innermost kept
/// dim.
struct Columns {
    order: Vec<usize>,
    reduced_ops: Vec<usize>,
    row_order: Vec<usize>,
    inner: Vec<isize>,
}

/// A row kernel's windows when it reads and writes memory in place: its inputs' load
/// windows (as [`RowKernel::inputs`] lists them), the store's, and a window added to the
/// first input first (a layer norm of a sum).
struct Direct {
    ins: Vec<usize>,
    store: usize,
    plus: Option<usize>,
}

/// A validated reduction. Windows: loads, per-element stores, then per-row stores.
pub(crate) struct ReductionPlan {
    ops: Vec<ScalarOp>,
    bufs: Vec<usize>,
    offsets: Vec<isize>,
    /// The kept dims, with every window's steps.
    rows: Nest,
    /// The reduced dims, with the steps of the loads and per-element stores.
    row: Nest,
    row_inner: Vec<isize>,
    stages: Vec<StagePlan>,
    elem_stores: Vec<(usize, usize)>,
    elem_order: Vec<usize>,
    elem_uniform: Vec<usize>,
    /// A whole-row kernel for the body, with the evaluation order of its inputs and the
    /// inputs (as [`RowKernel::inputs`] lists them).
    row_kernel: Option<(RowKernel, Vec<usize>, Vec<usize>)>,
    /// With a row kernel: each kernel input's load window and the store's window, when
    /// they are all plain loads and one store stepping by one element along a one-dim row,
    /// so the kernel reads and writes memory in place (when every buffer is f32).
    direct: Option<Direct>,
    /// A softmax over a reduced dim that is not the innermost, whose input is a plain load
    /// and whose kept dims end in a unit step: it runs down whole columns at a time.
    cols: Option<ColumnSoftmax>,
    /// One sum, max or min over reduced dims that are not contiguous while the innermost
    /// kept dim is: evaluated a chunk of kept columns at a time (see [`ReductionPlan::columns`]).
    colwise: Option<Columns>,
    row_stores: Vec<(usize, usize)>,
    row_order: Vec<usize>,
    parallel: bool,
}

impl ReductionPlan {
    /// Validates a reduction.
    pub(crate) fn new(c: &Checker, r: &Reduction) -> Result<ReductionPlan> {
        let l = &r.body;
        let k = r.reduce_from;
        ensure!(
            k <= l.shape.len(),
            Internal,
            "reduce_from {k} exceeds rank {}",
            l.shape.len()
        );
        smelt_ir::numel(&l.shape)?;
        validate::body(&l.ops, l.loads.len(), false, r.stages.len())?;
        for (i, ld) in l.loads.iter().enumerate() {
            let what = format!("load {i}");
            c.window(ld, Use::Load, &what)?;
            ensure!(
                ld.shape == l.shape,
                Internal,
                "{what}: shape {:?} is not the loop's {:?}",
                ld.shape,
                l.shape
            );
        }
        // Which ops are constant along a row.
        let mut uniform = vec![false; l.ops.len()];
        for (i, op) in l.ops.iter().enumerate() {
            uniform[i] = match *op {
                ScalarOp::Const(_) | ScalarOp::Reduced(_) => true,
                ScalarOp::Load(j) => l.loads[j].strides[k..].iter().all(|&st| st == 0),
                ScalarOp::Acc => false,
                ScalarOp::Unary(_, a) => uniform[a],
                ScalarOp::Binary(_, a, b) => uniform[a] && uniform[b],
                ScalarOp::Select(c, a, b) => uniform[c] && uniform[a] && uniform[b],
            };
        }
        let mut stages = Vec::new();
        for (s, st) in r.stages.iter().enumerate() {
            validate::op_index(&l.ops, st.value, &format!("stage {s}"))?;
            let order = validate::deps(&l.ops, &[st.value]);
            for &i in &order {
                if let ScalarOp::Reduced(j) = l.ops[i] {
                    ensure!(
                        j < s,
                        Internal,
                        "stage {s} reads stage {j}, which is not earlier"
                    );
                }
            }
            let (order, uniform_ops) = split_uniform(&l.ops, &order, &uniform);
            stages.push(StagePlan {
                combine: st.combine,
                value: st.value,
                order,
                uniform: uniform_ops,
            });
        }
        let mut windows: Vec<&TensorRef> = l.loads.iter().collect();
        let (mut elem, mut row) = (Vec::new(), Vec::new());
        for (i, s) in l.stores.iter().enumerate() {
            let what = format!("store {i}");
            validate::op_index(&l.ops, s.value, &what)?;
            c.window(&s.dst, Use::Store, &what)?;
            let want = if s.per_row {
                &l.shape[..k]
            } else {
                &l.shape[..]
            };
            ensure!(
                s.dst.shape == want,
                Internal,
                "{what}: shape {:?}, expected {want:?}",
                s.dst.shape
            );
            if s.per_row { &mut row } else { &mut elem }.push(s);
        }
        let n_row = windows.len() + elem.len();
        let mut elem_stores = Vec::new();
        for s in &elem {
            elem_stores.push((s.value, windows.len()));
            windows.push(&s.dst);
        }
        let mut row_stores = Vec::new();
        for s in &row {
            row_stores.push((s.value, windows.len()));
            windows.push(&s.dst);
        }
        let kept: Vec<Vec<isize>> = windows.iter().map(|w| w.strides[..k].to_vec()).collect();
        let reduced: Vec<Vec<isize>> = windows[..n_row]
            .iter()
            .map(|w| w.strides[k..].to_vec())
            .collect();
        let row_nest = Nest::coalesced(&l.shape[k..], reduced);
        let elem_roots: Vec<usize> = elem.iter().map(|s| s.value).collect();
        let row_roots: Vec<usize> = row.iter().map(|s| s.value).collect();
        let row_order = validate::deps(&l.ops, &row_roots);
        // Per-row values read loads at the row's first element, which must exist.
        ensure!(
            row_nest.len() > 0
                || !row_order
                    .iter()
                    .any(|&i| matches!(l.ops[i], ScalarOp::Load(_))),
            Internal,
            "per-row stores read loads of empty rows"
        );
        let loads: Vec<&TensorRef> = l.loads.iter().collect();
        let row_len = row_nest.len();
        let row_kernel = (row_len <= ROW_KERNEL_MAX && row.is_empty())
            .then(|| super::row_kernel::recognize(r, row_len))
            .flatten()
            .map(|k| {
                let ins = k.inputs();
                let order = validate::deps(&l.ops, &ins);
                (k, order, ins)
            });
        let direct = row_kernel.as_ref().and_then(|(_, _, rk_ins)| {
            let [(_, st)] = elem_stores.as_slice() else {
                return None;
            };
            let unit = |w: usize| row_nest.shape.len() == 1 && row_nest.strides[w][0] == 1;
            let unit_load = |i: usize| match l.ops[i] {
                ScalarOp::Load(j) if unit(j) => Some(j),
                _ => None,
            };
            // A layer norm's input may be the sum of two rows (a residual or embedding add).
            let sum = match (&row_kernel.as_ref()?.0, rk_ins.first().map(|&x| l.ops[x])) {
                (RowKernel::LayerNorm { .. }, Some(ScalarOp::Binary(Binary::Add, a, b))) => {
                    Some((unit_load(a)?, unit_load(b)?))
                }
                _ => None,
            };
            let ins: Option<Vec<usize>> = rk_ins
                .iter()
                .enumerate()
                .map(|(n, &i)| match sum {
                    Some((a, _)) if n == 0 => Some(a),
                    _ => unit_load(i),
                })
                .collect();
            ins.filter(|_| unit(*st)).map(|ins| Direct {
                ins,
                store: *st,
                plus: sum.map(|(_, b)| b),
            })
        });
        let rows = Nest::coalesced(&l.shape[..k], kept);
        let cols = match (&row_kernel, elem_stores.as_slice()) {
            (Some((RowKernel::Softmax { x }, ..)), [(_, st)]) if row_nest.shape.len() == 1 => {
                match l.ops[*x] {
                    ScalarOp::Load(j)
                        if rows.strides[j].last() == Some(&1)
                            && rows.strides[*st].last() == Some(&1)
                            && row_nest.strides[j][0] != 1 =>
                    {
                        windows[j]
                            .span()
                            .zip(windows[*st].span())
                            .map(|(a, b)| ColumnSoftmax {
                                x: j,
                                y: *st,
                                xs: row_nest.strides[j][0],
                                ys: row_nest.strides[*st][0],
                                n: row_nest.len(),
                                spans: [a, b],
                            })
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let colwise = (column_reduction(&l.ops, &stages, &rows, &row_nest, l.loads.len())
            && row_kernel.is_none()
            && elem_stores.is_empty()
            && !row_stores.is_empty()
            && row_stores
                .iter()
                .all(|&(_, k)| rows.strides[k].last() == Some(&1)))
        .then(|| {
            let st = &stages[0];
            let mut order: Vec<usize> = st.order.iter().chain(&st.uniform).copied().collect();
            order.sort_unstable();
            let (reduced_ops, row_order): (Vec<usize>, Vec<usize>) = row_order
                .iter()
                .partition(|&&i| matches!(l.ops[i], ScalarOp::Reduced(_)));
            Columns {
                order,
                reduced_ops,
                row_order,
                inner: rows.inner(),
            }
        });
        Ok(ReductionPlan {
            direct,
            cols,
            colwise,
            row_kernel,
            bufs: windows.iter().map(|w| w.buffer.0 as usize).collect(),
            offsets: windows.iter().map(|w| w.offset as isize).collect(),
            parallel: validate::race_free(&loads, &windows[l.loads.len()..]),
            rows,
            row_inner: row_nest.inner(),
            row: row_nest,
            stages,
            elem_order: split_uniform(&l.ops, &validate::deps(&l.ops, &elem_roots), &uniform).0,
            elem_uniform: split_uniform(&l.ops, &validate::deps(&l.ops, &elem_roots), &uniform).1,
            row_order,
            elem_stores,
            row_stores,
            ops: l.ops.clone(),
        })
    }

    /// Runs the reduction, rows split between threads when large and race free.
    ///
    /// # Safety
    /// `mem` must hold the storages the plan was validated against.
    pub(crate) unsafe fn run(&self, mem: &Mem, ex: &Exec) {
        // Empty rows with nothing stored per row write nothing: not one call per row (a
        // LogSoftmax over [1, 2^31 - 1, 0] walked its 2^31 empty rows, 24 s under the fuzzer).
        if self.row.shape.contains(&0) && self.row_stores.is_empty() {
            return;
        }
        let n = self.rows.len() * self.row.len();
        let ex = if self.parallel && n >= PARALLEL_MIN {
            *ex
        } else {
            ex.serial()
        };
        for_parts(
            &ex,
            &self.rows.shape,
            &self.rows.strides,
            &self.offsets,
            |shape, base| {
                // SAFETY: the slice is part of the validated nest.
                unsafe { self.run_rows(ex.kern, mem, shape, base) }
            },
        );
    }

    unsafe fn run_rows(&self, kern: &Kernels, mem: &Mem, shape: &[usize], base: &[isize]) {
        with_values(&self.ops, |v| self.rows_with(kern, mem, shape, base, v))
    }

    unsafe fn rows_with(
        &self,
        kern: &Kernels,
        mem: &Mem,
        shape: &[usize],
        base: &[isize],
        v: &mut super::interp::Values,
    ) {
        // Small fixed arrays cover real plans; larger ones are allocated once per part.
        let (mut small_r, mut big_r) = ([0.0f32; 16], Vec::new());
        let reduced: &mut [f32] = if self.stages.len() <= 16 {
            &mut small_r[..self.stages.len()]
        } else {
            big_r.resize(self.stages.len(), 0.0);
            &mut big_r
        };
        let (small_z, mut big_z) = ([0isize; 64], Vec::new());
        let zeros: &[isize] = if self.bufs.len() <= 64 {
            &small_z[..self.bufs.len()]
        } else {
            big_z.resize(self.bufs.len(), 0);
            &big_z
        };
        if let Some(c) = self.cols.as_ref().filter(|c| self.columns_apply(mem, c)) {
            // Whole columns: the innermost kept dim, one call per point of the others.
            let last = shape.len() - 1;
            walk_points(&shape[..last], &self.rows.strides, base, |roffs| {
                let x = (mem.ptrs[self.bufs[c.x]] as *const f32).offset(roffs[c.x]);
                let y = (mem.ptrs[self.bufs[c.y]] as *mut f32).offset(roffs[c.y]);
                (kern.softmax_cols)(x, c.xs, y, c.ys, c.n, shape[last]);
            });
            return;
        }
        if let Some(c) = &self.colwise {
            return self.columns(kern, mem, c, shape, base, v);
        }
        let n_row = self.row_inner.len();
        walk_points(shape, &self.rows.strides, base, |roffs| {
            if let Some(rk) = &self.row_kernel {
                return self.row_with_kernel(kern, mem, rk, roffs, v);
            }
            for (s, st) in self.stages.iter().enumerate() {
                self.fill_uniform(kern, mem, &st.uniform, roffs, zeros, v, reduced);
                let mut acc = Partial::new(st.combine);
                walk_chunks(
                    &self.row.shape,
                    &self.row.strides,
                    &self.row_inner,
                    &roffs[..n_row],
                    |offs, len| {
                        let w = Windows {
                            bufs: &self.bufs,
                            offs,
                            inner: &self.row_inner,
                        };
                        // A stage of a plain contiguous f32 load reduces memory in place.
                        if let ScalarOp::Load(j) = self.ops[st.value] {
                            let b = self.bufs[j];
                            if st.order == [st.value]
                                && self.row_inner[j] == 1
                                && mem.elems[b] == Elem::F32
                            {
                                let p = (mem.ptrs[b] as *const f32).offset(offs[j]);
                                let x = std::slice::from_raw_parts(p, len);
                                return (kern.reduce)(st.combine, x, &mut acc);
                            }
                        }
                        eval(kern, &self.ops, &st.order, &[], mem, &w, len, v, reduced);
                        (kern.reduce)(st.combine, v.get(st.value, len), &mut acc);
                    },
                );
                reduced[s] = acc.finish(st.combine);
            }
            if !self.elem_stores.is_empty() {
                self.fill_uniform(kern, mem, &self.elem_uniform, roffs, zeros, v, reduced);
                walk_chunks(
                    &self.row.shape,
                    &self.row.strides,
                    &self.row_inner,
                    &roffs[..n_row],
                    |offs, len| {
                        let w = Windows {
                            bufs: &self.bufs,
                            offs,
                            inner: &self.row_inner,
                        };
                        eval(
                            kern,
                            &self.ops,
                            &self.elem_order,
                            &[],
                            mem,
                            &w,
                            len,
                            v,
                            reduced,
                        );
                        for &(value, k) in &self.elem_stores {
                            store(mem, &w, k, v.get(value, len));
                        }
                    },
                );
            }
            if !self.row_stores.is_empty() {
                // Per-row values read loads at the row's first element.
                let w = Windows {
                    bufs: &self.bufs,
                    offs: roffs,
                    inner: zeros,
                };
                eval(
                    kern,
                    &self.ops,
                    &self.row_order,
                    &[],
                    mem,
                    &w,
                    1,
                    v,
                    reduced,
                );
                for &(value, k) in &self.row_stores {
                    store(mem, &w, k, v.get(value, 1));
                }
            }
        });
    }
}

/// Whether a reduction suits [`ReductionPlan::columns`]: one sum, max or min stage with no
/// `Acc`, every load stepping by 0 or 1 along the innermost kept dim, and none that steps
/// by 1 there also contiguous along the reduced dims (those rows are better summed along).
fn column_reduction(
    ops: &[ScalarOp],
    stages: &[StagePlan],
    rows: &Nest,
    row: &Nest,
    loads: usize,
) -> bool {
    let [st] = stages else {
        return false;
    };
    if !matches!(st.combine, Combine::Sum | Combine::Max | Combine::Min)
        || ops.iter().any(|op| matches!(op, ScalarOp::Acc))
        || rows.shape.last().is_none_or(|&n| n < 2)
    {
        return false;
    }
    let kept_inner = |w: usize| rows.strides[w].last().copied().unwrap_or(0);
    let row_inner = |w: usize| row.strides[w].last().copied().unwrap_or(0);
    (0..loads).all(|w| match kept_inner(w) {
        0 => true,
        1 => row_inner(w) != 1,
        _ => false,
    })
}

impl ReductionPlan {
    /// The reduction a chunk of kept columns at a time: the stage's ops are evaluated along
    /// the innermost kept dim at each point of the reduced dims and combined column by
    /// column (sums in f64, as along rows), then the per-row stores are evaluated over the
    /// chunk with each column's result.
    ///
    /// # Safety
    /// As for [`ReductionPlan::run`]; `shape` and `base` are a validated part of the rows.
    unsafe fn columns(
        &self,
        kern: &Kernels,
        mem: &Mem,
        c: &Columns,
        shape: &[usize],
        base: &[isize],
        v: &mut super::interp::Values,
    ) {
        use smelt_kernels::program::CHUNK;
        let st = &self.stages[0];
        let (order, reduced_ops, row_order, inner) = (
            &c.order[..],
            &c.reduced_ops[..],
            &c.row_order[..],
            &c.inner[..],
        );
        let Some((&cols, outer)) = shape.split_last() else {
            return;
        };
        let n_row = self.row_inner.len();
        let max = st.combine == Combine::Max;
        let mut wide = [0f64; CHUNK];
        let mut narrow = [0f32; CHUNK];
        let mut nan = [false; CHUNK];
        let mut offs = vec![0isize; self.bufs.len()];
        walk_points(outer, &self.rows.strides, base, |roffs| {
            let mut c0 = 0;
            while c0 < cols {
                let len = CHUNK.min(cols - c0);
                for (o, (&r, &i)) in offs.iter_mut().zip(roffs.iter().zip(inner)) {
                    *o = r + c0 as isize * i;
                }
                wide[..len].fill(0.0);
                narrow[..len].fill(if max {
                    f32::NEG_INFINITY
                } else {
                    f32::INFINITY
                });
                nan[..len].fill(false);
                walk_points(&self.row.shape, &self.row.strides, &offs[..n_row], |p| {
                    let w = Windows {
                        bufs: &self.bufs,
                        offs: p,
                        inner,
                    };
                    eval(kern, &self.ops, order, &[], mem, &w, len, v, &[]);
                    let x = v.get(st.value, len);
                    match st.combine {
                        Combine::Sum => {
                            for (a, &x) in wide[..len].iter_mut().zip(x) {
                                *a += x as f64;
                            }
                        }
                        _ => {
                            for ((a, n), &x) in narrow[..len].iter_mut().zip(&mut nan[..len]).zip(x)
                            {
                                *n |= x.is_nan();
                                if (max && x > *a) || (!max && x < *a) {
                                    *a = x;
                                }
                            }
                        }
                    }
                });
                for &r in reduced_ops {
                    let slot = &mut v.slot(r)[..len];
                    for (j, y) in slot.iter_mut().enumerate() {
                        *y = match st.combine {
                            Combine::Sum => wide[j] as f32,
                            _ if nan[j] => f32::NAN,
                            _ => narrow[j],
                        };
                    }
                }
                let w = Windows {
                    bufs: &self.bufs,
                    offs: &offs,
                    inner,
                };
                eval(kern, &self.ops, row_order, &[], mem, &w, len, v, &[]);
                for &(value, k) in &self.row_stores {
                    store(mem, &w, k, v.get(value, len));
                }
                c0 += len;
            }
        });
    }

    /// Whether the column softmax may run on these storages: both f32, and the output
    /// either is the input exactly (same start and steps) or shares none of its bytes.
    fn columns_apply(&self, mem: &Mem, c: &ColumnSoftmax) -> bool {
        let (bx, by) = (self.bufs[c.x], self.bufs[c.y]);
        if mem.elems[bx] != Elem::F32 || mem.elems[by] != Elem::F32 {
            return false;
        }
        let at = |b: usize, e: isize| (mem.ptrs[b] as usize).wrapping_add_signed(4 * e);
        let (x0, x1) = (at(bx, c.spans[0].0), at(bx, c.spans[0].1));
        let (y0, y1) = (at(by, c.spans[1].0), at(by, c.spans[1].1));
        let same = at(bx, self.offsets[c.x]) == at(by, self.offsets[c.y])
            && c.xs == c.ys
            && self.rows.strides[c.x] == self.rows.strides[c.y];
        same || x1 <= y0 || y1 <= x0
    }
}

/// Longest row a row kernel takes (its buffers are four rows).
const ROW_KERNEL_MAX: usize = 1 << 16;

impl ReductionPlan {
    /// The kernel's name, for `explain`.
    pub(crate) fn kernel_name(&self, kern: &Kernels) -> String {
        match &self.row_kernel {
            Some((RowKernel::LayerNorm { .. }, ..)) => kern.name("layer-norm"),
            Some((RowKernel::Softmax { .. }, ..)) if self.cols.is_some() => {
                kern.name("softmax-columns")
            }
            Some((RowKernel::Softmax { .. }, ..)) => kern.name("softmax"),
            None => kern.name("reduction"),
        }
    }

    /// One row through its row kernel: inputs evaluated into row buffers, the kernel, the
    /// result stored.
    ///
    /// # Safety
    /// As for [`ReductionPlan::run`]; `roffs` are the row's window offsets.
    unsafe fn row_with_kernel(
        &self,
        kern: &Kernels,
        mem: &Mem,
        rk: &(RowKernel, Vec<usize>, Vec<usize>),
        roffs: &[isize],
        v: &mut super::interp::Values,
    ) {
        let n = self.row.len();
        let n_row = self.row_inner.len();
        if let Some(d) = &self.direct {
            if self.row_in_place(kern, mem, &rk.0, d, roffs) {
                return;
            }
        }
        with_scratch(4 * n, |buf| {
            let (xr, rest) = buf.split_at_mut(n);
            let (gr, rest) = rest.split_at_mut(n);
            let (br, out) = rest.split_at_mut(n);
            let (kernel, order, ins) = rk;
            let mut pos = 0;
            walk_chunks(
                &self.row.shape,
                &self.row.strides,
                &self.row_inner,
                &roffs[..n_row],
                |offs, len| {
                    let w = Windows {
                        bufs: &self.bufs,
                        offs,
                        inner: &self.row_inner,
                    };
                    eval(kern, &self.ops, order, &[], mem, &w, len, v, &[]);
                    for (dst, &op) in [&mut *xr, &mut *gr, &mut *br].into_iter().zip(ins) {
                        dst[pos..pos + len].copy_from_slice(v.get(op, len));
                    }
                    pos += len;
                },
            );
            match kernel {
                RowKernel::LayerNorm { g, b, eps, .. } => {
                    let g: &[f32] = if g.is_some() { gr } else { &[] };
                    let b: &[f32] = match (g.is_empty(), b.is_some()) {
                        (_, false) => &[],
                        (true, true) => gr,
                        (false, true) => br,
                    };
                    (kern.layer_norm)(xr, g, b, *eps, out)
                }
                RowKernel::Softmax { .. } => {
                    out.copy_from_slice(xr);
                    (kern.softmax)(out, 1.0, &[]);
                }
            }
            let mut pos = 0;
            walk_chunks(
                &self.row.shape,
                &self.row.strides,
                &self.row_inner,
                &roffs[..n_row],
                |offs, len| {
                    let w = Windows {
                        bufs: &self.bufs,
                        offs,
                        inner: &self.row_inner,
                    };
                    for &(_, k) in &self.elem_stores {
                        store(mem, &w, k, &out[pos..pos + len]);
                    }
                    pos += len;
                },
            );
        });
    }

    /// One row through its row kernel straight from and to memory, when every window is
    /// f32 and the output's buffer is none of the inputs' (else false, nothing done).
    ///
    /// # Safety
    /// As for [`ReductionPlan::run`]; `roffs` are the row's window offsets.
    unsafe fn row_in_place(
        &self,
        kern: &Kernels,
        mem: &Mem,
        rk: &RowKernel,
        d: &Direct,
        roffs: &[isize],
    ) -> bool {
        let (ins, st) = (&d.ins, d.store);
        let n = self.row.len();
        let f32_buf = |w: usize| mem.elems[self.bufs[w]] == Elem::F32;
        if n == 0 || !f32_buf(st) || ins.iter().chain(&d.plus).any(|&j| !f32_buf(j)) {
            return false;
        }
        let start = |w: usize| (mem.ptrs[self.bufs[w]] as *const f32).wrapping_offset(roffs[w]);
        let out_ptr = start(st) as *mut f32;
        // The output row must be aligned and overlap none of the input rows (buffers of
        // different values may share arena bytes).
        let disjoint = |p: *const f32| {
            let (a, b) = (p as usize, out_ptr as usize);
            a + 4 * n <= b || b + 4 * n <= a
        };
        if !(out_ptr as usize).is_multiple_of(4) {
            return false;
        }
        // The memory plan may give the output its main input's bytes (exactly). A summed
        // input is added into scratch before anything is written, so its rows may be
        // anywhere.
        let x_in_place = std::ptr::eq(start(ins[0]), out_ptr);
        let summed = d.plus.is_some();
        if d.plus
            .is_some_and(|j| !(start(j) as usize).is_multiple_of(4))
        {
            return false;
        }
        if ins.iter().enumerate().any(|(i, &j)| {
            !(start(j) as usize).is_multiple_of(4)
                || !(disjoint(start(j)) || i == 0 && (x_in_place || summed))
        }) {
            return false;
        }
        // SAFETY: the validated windows hold `n` f32 elements at unit step from each
        // row's offset; the pointers are aligned and the output row overlaps no input row
        // but, exactly, the main one when `x_in_place` (which is then read first), or the
        // summed ones (read into scratch first).
        let row = |w: usize| unsafe { std::slice::from_raw_parts(start(w), n) };
        match rk {
            RowKernel::LayerNorm { g, b, eps, .. } => {
                let gr = g.map(|_| row(ins[1])).unwrap_or(&[]);
                let br = b
                    .map(|_| row(ins[if g.is_some() { 2 } else { 1 }]))
                    .unwrap_or(&[]);
                if let Some(p) = d.plus {
                    with_scratch(n, |x| {
                        for ((x, &a), &b) in x.iter_mut().zip(row(ins[0])).zip(row(p)) {
                            *x = a + b;
                        }
                        let out = std::slice::from_raw_parts_mut(out_ptr, n);
                        (kern.layer_norm)(x, gr, br, *eps, out)
                    });
                } else if x_in_place {
                    with_scratch(n, |x| {
                        x.copy_from_slice(row(ins[0]));
                        let out = std::slice::from_raw_parts_mut(out_ptr, n);
                        (kern.layer_norm)(x, gr, br, *eps, out)
                    });
                } else {
                    let out = std::slice::from_raw_parts_mut(out_ptr, n);
                    (kern.layer_norm)(row(ins[0]), gr, br, *eps, out);
                }
            }
            RowKernel::Softmax { .. } => {
                if !x_in_place {
                    let out = std::slice::from_raw_parts_mut(out_ptr, n);
                    out.copy_from_slice(row(ins[0]));
                }
                (kern.softmax)(std::slice::from_raw_parts_mut(out_ptr, n), 1.0, &[]);
            }
        }
        true
    }

    /// Evaluates the row-constant ops `ops` once (at the row's first element) and spreads
    /// each value over its whole chunk array.
    ///
    /// # Safety
    /// As for [`ReductionPlan::run`]; `roffs` are a row's window offsets.
    #[allow(clippy::too_many_arguments)]
    unsafe fn fill_uniform(
        &self,
        kern: &Kernels,
        mem: &Mem,
        ops: &[usize],
        roffs: &[isize],
        zeros: &[isize],
        v: &mut super::interp::Values,
        reduced: &[f32],
    ) {
        if ops.is_empty() {
            return;
        }
        let w = Windows {
            bufs: &self.bufs,
            offs: roffs,
            inner: zeros,
        };
        eval(kern, &self.ops, ops, &[], mem, &w, 1, v, reduced);
        for &i in ops {
            let x = v.get(i, 1)[0];
            v.slot(i).fill(x);
        }
    }
}
