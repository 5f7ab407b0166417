//! MatMul and Gemm anchors on the packed GEMM: operands read in place through their windows
//! (transposes and broadcasts are strides), constant operands packed once at plan time,
//! batches folded into rows when the layout allows, and the epilogue applied to each tile.

use super::epilogue::{Epilogue, EpilogueSink, Layout, Win};
use super::fast_epilogue::{BiasSrc, FastEpilogue};
use super::{Exec, Mem};
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::{Anchor, BufferKind, TensorRef};
use smelt_ir::op::NnOp;
use smelt_ir::{DType, Op, Tensor};
use smelt_kernels::amx::{amx_gemm, AmxB};
use smelt_kernels::epilogue::FusedSink;
use smelt_kernels::gemm::TileSink;
use smelt_kernels::gemm::{gemm, Batches, Gemm, Lhs, MatRef, PackedA, PackedB, Rhs};
use smelt_kernels::half::{Half, HalfPanels};
use smelt_kernels::Kernels;

/// An operand as the plan gives it: a window read each run, or packed once.
enum Operand<P> {
    Window {
        slot: usize,
        batch: Vec<isize>,
        rs: isize,
        cs: isize,
    },
    Packed(P),
    /// Half-precision weights, packed once, widened per run.
    Half(HalfPanels),
    /// bf16 weights packed for AMX tiles (B only; A then a window, rounded to bf16 as it
    /// is packed).
    Amx(AmxB),
}

/// Gemm's extra terms: `alpha * A B + beta * C`.
struct Scale {
    alpha: f32,
    beta: f32,
    c: Option<Win>,
}

/// A planned product.
pub(crate) struct MatMulPlan {
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
    a: Operand<PackedA>,
    b: Operand<PackedB>,
    epi: Epilogue,
    /// The epilogue in the form the GEMM finishes in registers, when it has that form.
    fast: Option<FastEpilogue>,
    /// Whether the batches were folded into the rows.
    fold: bool,
    scale: Option<Scale>,
    /// The kernel's name, for `explain`.
    pub name: String,
}

/// Strides of window `r` for its last two dims (rows, cols), and its batch dims' offsets
/// against the result's batch dims `out_batch` (right-aligned broadcast).
fn operand_window(r: &TensorRef, out_batch: &[usize]) -> Win {
    let rank = r.shape.len();
    let (rs, cs) = (r.strides[rank - 2], r.strides[rank - 1]);
    let nb: usize = smelt_ir::dims_product(out_batch);
    let own = &r.shape[..rank - 2];
    let skip = out_batch.len() - own.len();
    let mut batch = vec![r.offset as isize; nb];
    for (b, off) in batch.iter_mut().enumerate() {
        let mut rest = b;
        for d in (0..out_batch.len()).rev() {
            let i = rest % out_batch[d];
            rest /= out_batch[d];
            if d >= skip && own[d - skip] != 1 {
                *off += i as isize * r.strides[d - skip];
            }
        }
    }
    Win {
        slot: r.buffer.0 as usize,
        batch,
        rs,
        cs,
    }
}

/// A window viewed as at least 2-D: a vector is one row (`row_vec`) or one column.
fn as_matrix(r: &TensorRef, row_vec: bool) -> TensorRef {
    let mut r = r.clone();
    if r.shape.len() == 1 {
        if row_vec {
            r.shape.insert(0, 1);
            r.strides.insert(0, 0);
        } else {
            r.shape.push(1);
            r.strides.push(0);
        }
    }
    r
}

fn transposed(mut r: TensorRef) -> TensorRef {
    let n = r.shape.len();
    r.shape.swap(n - 2, n - 1);
    r.strides.swap(n - 2, n - 1);
    r
}

/// The weight behind a window, when the window is inside a weight buffer with strides that
/// packing can read (non-negative), and a dense f32 tensor.
fn weight_matrix<'w>(c: &Checker, weights: &'w [Tensor], r: &TensorRef) -> Option<&'w [f32]> {
    let b = c.plan.buffer(r.buffer);
    let BufferKind::Weight(i) = b.kind else {
        return None;
    };
    if r.strides.iter().any(|&s| s < 0) || b.dtype != DType::F32 {
        return None;
    }
    weights.get(i)?.as_f32()?.get(r.offset..)
}

/// The half-precision weight behind a window (see [`weight_matrix`]): its bits and format.
pub(crate) fn half_weight<'w>(
    c: &Checker,
    weights: &'w [Tensor],
    r: &TensorRef,
) -> Option<(&'w [u16], Half)> {
    use half::slice::HalfFloatSliceExt;
    let b = c.plan.buffer(r.buffer);
    let BufferKind::Weight(i) = b.kind else {
        return None;
    };
    if r.strides.iter().any(|&s| s < 0) {
        return None;
    }
    let (bits, kind): (&[u16], Half) = match weights.get(i)?.data() {
        smelt_ir::Data::BF16(v) if b.dtype == DType::BF16 => {
            (v.as_slice().reinterpret_cast(), Half::Bf16)
        }
        smelt_ir::Data::F16(v) if b.dtype == DType::F16 => {
            (v.as_slice().reinterpret_cast(), Half::F16)
        }
        _ => return None,
    };
    Some((bits.get(r.offset..)?, kind))
}

/// Whether a product with bf16 weights as B runs on AMX tiles: the CPU and OS allow it,
/// the kernels are AVX-512 (a lower ISA asked for is kept) and A is read from memory.
fn amx_applies<P>(kern: &Kernels, a: &Operand<P>) -> bool {
    kern.isa == smelt_kernels::Isa::Avx512
        && matches!(a, Operand::Window { .. })
        && smelt_kernels::amx::available()
}

/// Whether a window lies in half-precision weights.
fn is_half(c: &Checker, r: &TensorRef) -> bool {
    matches!(c.plan.buffer(r.buffer).dtype, DType::BF16 | DType::F16)
}

impl MatMulPlan {
    /// Plans a MatMul or Gemm anchor on f32, or None when it is outside this path (the
    /// reference kernel runs it then).
    pub(crate) fn new(
        c: &Checker,
        weights: &[Tensor],
        a: &Anchor,
        kern: &Kernels,
    ) -> Option<MatMulPlan> {
        let f32_in = |r: &Option<TensorRef>| {
            r.as_ref()
                .is_some_and(|r| c.plan.buffer(r.buffer).dtype == DType::F32)
        };
        // An operand may be half-precision weights (packed below, or the reference runs it).
        let f32_or_half = |r: &Option<TensorRef>| {
            f32_in(r)
                || r.as_ref()
                    .is_some_and(|r| half_weight(c, weights, r).is_some())
        };
        if a.inputs.len() < 2 || !f32_or_half(&a.inputs[0]) || !f32_or_half(&a.inputs[1]) {
            return None;
        }
        let (ar, br) = (a.inputs[0].as_ref()?, a.inputs[1].as_ref()?);
        let (ar, br, scale_terms) = match &a.op {
            Op::Nn(NnOp::MatMul) => (as_matrix(ar, true), as_matrix(br, false), None),
            Op::Nn(NnOp::Gemm {
                alpha,
                beta,
                trans_a,
                trans_b,
            }) => {
                if ar.shape.len() != 2 || br.shape.len() != 2 {
                    return None;
                }
                let ar = if *trans_a {
                    transposed(ar.clone())
                } else {
                    ar.clone()
                };
                let br = if *trans_b {
                    transposed(br.clone())
                } else {
                    br.clone()
                };
                let cr = a.inputs.get(2).cloned().flatten();
                if cr.as_ref().is_some_and(|r| !f32_in(&Some(r.clone()))) {
                    return None;
                }
                (ar, br, Some((*alpha, *beta, cr)))
            }
            _ => return None,
        };
        let (ra, rb) = (ar.shape.len(), br.shape.len());
        let (m, k) = (ar.shape[ra - 2], ar.shape[ra - 1]);
        let (k2, n) = (br.shape[rb - 2], br.shape[rb - 1]);
        if k != k2 {
            return None;
        }
        // The result's batch dims, and which of its dims are rows and columns.
        let out = &a.shape;
        let nbatch = ra.max(rb) - 2;
        let row_dim = (a.inputs[0].as_ref()?.shape.len() > 1).then_some(nbatch);
        let col_dim = (a.inputs[1].as_ref()?.shape.len() > 1).then(|| out.len() - 1);
        let out_batch: Vec<usize> = out[..nbatch.min(out.len())].to_vec();
        if out_batch.len() != nbatch {
            return None;
        }
        let batch: usize = smelt_ir::dims_product(&out_batch);
        let aw = operand_window(&ar, &out_batch);
        let bw = operand_window(&br, &out_batch);
        // Layout of the epilogue: unfolded (one batch per batch index) or folded (the batch
        // dims and M as rows, when B is shared and A and every window step uniformly).
        let row: Vec<(usize, usize)> = row_dim.map(|d| (d, m)).into_iter().collect();
        let col: Vec<(usize, usize)> = col_dim.map(|d| (d, n)).into_iter().collect();
        let bases: Vec<Vec<usize>> = (0..batch)
            .map(|b| {
                let mut idx = vec![0; out.len()];
                let mut rest = b;
                for d in (0..nbatch).rev() {
                    idx[d] = rest % out_batch[d];
                    rest /= out_batch[d];
                }
                idx
            })
            .collect();
        let unfolded = Layout {
            batch_base: bases,
            row: row.clone(),
            col: col.clone(),
        };
        let b_shared = bw.batch.iter().all(|&o| o == bw.batch[0]);
        let a_rows_uniform = batch == 1
            || (row_dim.is_some() && {
                let step = aw.rs * m as isize;
                aw.batch.windows(2).all(|w| w[1] - w[0] == step)
            });
        let mut folded_layout = None;
        if batch > 1 && b_shared && a_rows_uniform && scale_terms.is_none() {
            let mut frow: Vec<(usize, usize)> = (0..nbatch).map(|d| (d, out[d])).collect();
            frow.extend(row.iter().copied());
            let l = Layout {
                batch_base: vec![vec![0; out.len()]],
                row: frow,
                col: col.clone(),
            };
            folded_layout = Some(l);
        }
        let mut fold = false;
        let (epi, layout) = match folded_layout
            .and_then(|l| Some((Epilogue::new(c, &a.epilogue, &l).ok().flatten()?, l)))
        {
            Some(e) => {
                fold = true;
                e
            }
            None => (
                Epilogue::new(c, &a.epilogue, &unfolded).ok().flatten()?,
                unfolded,
            ),
        };
        let mut fast = FastEpilogue::recognize(c, &a.epilogue, &layout);
        let (gb, gm) = if fold { (1, batch * m) } else { (batch, m) };
        let scale = match scale_terms {
            None => None,
            Some((alpha, beta, cr)) => {
                let cwin = match cr {
                    None => None,
                    Some(r) => {
                        // C broadcasts (right-aligned) to [M, N].
                        let rank = r.shape.len();
                        if rank > 2 {
                            return None;
                        }
                        let st = |d: usize| -> isize {
                            if d + rank < 2 || r.shape[d + rank - 2] == 1 {
                                0
                            } else {
                                r.strides[d + rank - 2]
                            }
                        };
                        Some(Win {
                            slot: r.buffer.0 as usize,
                            batch: vec![r.offset as isize],
                            rs: st(0),
                            cs: st(1),
                        })
                    }
                };
                Some(Scale {
                    alpha,
                    beta,
                    c: cwin,
                })
            }
        };
        // Gemm's alpha and C join the fast epilogue when C is a bias (beta 1).
        if let (Some(f), Some(sc)) = (fast.as_mut(), scale.as_ref()) {
            let mut ok = sc.beta == 1.0 || sc.c.is_none();
            if let Some(cw) = &sc.c {
                let no_bias = f.row_bias.is_none() && f.col_bias.is_none();
                if ok && no_bias && cw.rs == 0 && cw.cs == 1 {
                    f.col_bias = Some(BiasSrc::Window(cw.clone()));
                } else if ok && no_bias && cw.cs == 0 && cw.rs != 0 {
                    f.row_bias = Some(BiasSrc::Window(cw.clone()));
                } else {
                    ok = false;
                }
            }
            if ok {
                f.alpha *= sc.alpha;
            } else {
                fast = None;
            }
        }
        // Constant operands shared by every batch are packed now.
        let a_shared = aw.batch.iter().all(|&o| o == aw.batch[0]) && !fold;
        let a_op = match weight_matrix(c, weights, &ar) {
            Some(w) if a_shared => Operand::Packed(PackedA::new(
                &kern.micro,
                m,
                k,
                w,
                aw.rs as usize,
                aw.cs as usize,
            )),
            // A's element (i, p) is panel row p, column i.
            _ if is_half(c, &ar) => {
                let (bits, kind) = half_weight(c, weights, &ar).filter(|_| a_shared)?;
                let (rs, cs) = (aw.rs as usize, aw.cs as usize);
                Operand::Half(HalfPanels::new(
                    kern,
                    kind,
                    kern.micro.mr,
                    k,
                    m,
                    bits,
                    cs,
                    rs,
                ))
            }
            _ => Operand::Window {
                slot: aw.slot,
                batch: aw.batch,
                rs: aw.rs,
                cs: aw.cs,
            },
        };
        let b_op = match weight_matrix(c, weights, &br) {
            Some(w) if b_shared => Operand::Packed(PackedB::new(
                &kern.micro,
                k,
                n,
                w,
                bw.rs as usize,
                bw.cs as usize,
            )),
            _ if is_half(c, &br) => {
                let (bits, kind) = half_weight(c, weights, &br).filter(|_| b_shared)?;
                let (rs, cs) = (bw.rs as usize, bw.cs as usize);
                if kind == Half::Bf16 && amx_applies(kern, &a_op) {
                    Operand::Amx(AmxB::new(k, n, bits, rs, cs))
                } else {
                    Operand::Half(HalfPanels::new(
                        kern,
                        kind,
                        kern.micro.nr,
                        k,
                        n,
                        bits,
                        rs,
                        cs,
                    ))
                }
            }
            _ => Operand::Window {
                slot: bw.slot,
                batch: bw.batch,
                rs: bw.rs,
                cs: bw.cs,
            },
        };
        let packed = matches!(b_op, Operand::Packed(_)) || matches!(a_op, Operand::Packed(_));
        let half = match (&a_op, &b_op) {
            (Operand::Half(h), _) | (_, Operand::Half(h)) => Some(h.kind()),
            _ => None,
        };
        let amx = matches!(b_op, Operand::Amx(_));
        let name = format!(
            "{}{}, epilogue {}",
            if amx {
                "gemm.amx-bf16".to_string()
            } else {
                kern.name("gemm")
            },
            match half {
                _ if amx => " (bf16 weights and activations)",
                Some(Half::Bf16) => " (bf16 weights)",
                Some(Half::F16) => " (f16 weights)",
                None if packed => " (packed weights)",
                None => "",
            },
            fast.as_ref()
                .map_or("interpreted".into(), |f| format!("fused {}", f.describe()))
        );
        Some(MatMulPlan {
            batch: gb,
            m: gm,
            n,
            k,
            a: a_op,
            b: b_op,
            epi,
            fast,
            fold,
            scale,
            name,
        })
    }

    /// The matrix a window operand reads this run and its batches' offsets (one folded
    /// matrix when the batches were folded into the rows); None for a packed operand.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    unsafe fn window<'a, P>(&self, op: &'a Operand<P>, mem: &Mem) -> Option<(MatRef, Batches<'a>)> {
        let Operand::Window {
            slot,
            batch,
            rs,
            cs,
        } = op
        else {
            return None;
        };
        let base = mem.ptrs[*slot] as *const f32;
        let (off, batches) = if self.fold {
            (batch[0], Batches::Stride(0))
        } else {
            (0, Batches::Table(batch))
        };
        let m = MatRef {
            ptr: base.offset(off),
            rs: *rs,
            cs: *cs,
        };
        Some((m, batches))
    }

    /// Runs the product and its epilogue.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    pub(crate) unsafe fn run(&self, mem: &Mem, ex: &Exec) {
        let a_window = self.window(&self.a, mem);
        let lhs = match &self.a {
            Operand::Packed(p) => Some(Lhs::Packed(p)),
            Operand::Half(h) => Some(Lhs::Half(h)),
            _ => a_window.map(|(m, bs)| Lhs::Strided(m, bs)),
        };
        let rhs = match &self.b {
            Operand::Packed(p) => Some(Rhs::Packed(p)),
            Operand::Half(h) => Some(Rhs::Panels(h)),
            _ => self.window(&self.b, mem).map(|(m, bs)| Rhs::Strided(m, bs)),
        };
        let map = |b: usize| (b, 0);
        let threads = if self.epi.parallel { ex.threads } else { 1 };
        let product = |sink: &dyn TileSink| match (&self.b, a_window, lhs.zip(rhs)) {
            (Operand::Amx(b), Some((a, bs)), _) => {
                amx_gemm(ex.pool, threads, self.batch, self.m, a, bs, b, sink)
            }
            (_, _, Some((a, b))) => {
                let g = Gemm {
                    batch: self.batch,
                    m: self.m,
                    n: self.n,
                    k: self.k,
                    a,
                    b,
                };
                gemm(ex.kern, ex.pool, threads, &g, sink)
            }
            // (AMX weights are planned only beside an A read from memory.)
            _ => {}
        };
        if let Some(f) = &self.fast {
            let sink = FusedSink {
                epi: f.bind(mem),
                finish: ex.kern.finish,
            };
            product(&sink);
            return;
        }
        match &self.scale {
            None => {
                let sink = EpilogueSink {
                    epi: &self.epi,
                    kern: ex.kern,
                    mem,
                    map: &map,
                    pre: |_, _, _, _, _, _: &mut [f32], _| {},
                };
                product(&sink);
            }
            Some(s) => {
                let pre = |_b: usize,
                           i0: usize,
                           j0: usize,
                           rows: usize,
                           cols: usize,
                           t: &mut [f32],
                           ld: usize| {
                    for r in 0..rows {
                        let row = &mut t[r * ld..r * ld + cols];
                        match &s.c {
                            Some(c) => {
                                let p = mem.ptrs[c.slot] as *const f32;
                                for (j, x) in row.iter_mut().enumerate() {
                                    let off = c.batch[0]
                                        + (i0 + r) as isize * c.rs
                                        + (j0 + j) as isize * c.cs;
                                    // SAFETY: C was validated as an anchor input of shape
                                    // broadcastable to the result.
                                    let cv = unsafe { *p.offset(off) };
                                    *x = s.alpha * *x + s.beta * cv;
                                }
                            }
                            None => row.iter_mut().for_each(|x| *x *= s.alpha),
                        }
                    }
                };
                let sink = EpilogueSink {
                    epi: &self.epi,
                    kern: ex.kern,
                    mem,
                    map: &map,
                    pre,
                };
                product(&sink);
            }
        }
    }
}
