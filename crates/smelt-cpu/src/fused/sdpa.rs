//! Scaled dot-product attention on f32, the form composite recognition produces: 4-D
//! Q/K/V read in place through their windows (grouped heads allowed), an additive f32 mask
//! or none, no cache, not causal, no softcap or window, on the fused attention kernel of
//! `smelt_kernels::attention` (per head and block of query rows), with the epilogue applied
//! to O's tiles.

use super::epilogue::{Epilogue, EpilogueSink, Layout};
use super::fast_epilogue::{FastEpilogue, Narrowed};
use super::{Exec, Mem};
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::{Anchor, TensorRef};
use smelt_ir::op::NnOp;
use smelt_ir::{DType, Op};
use smelt_kernels::attention::{attention, Head, Next};
use smelt_kernels::epilogue::FusedSink;
use smelt_kernels::gemm::MatRef;
use smelt_kernels::Kernels;

/// A 4-D window: slot, offset, strides.
#[derive(Clone, Copy)]
struct View {
    slot: usize,
    offset: isize,
    st: [isize; 4],
}

impl View {
    fn of(r: &TensorRef) -> Option<View> {
        Some(View {
            slot: r.buffer.0 as usize,
            offset: r.offset as isize,
            st: <[isize; 4]>::try_from(r.strides.as_slice()).ok()?,
        })
    }

    /// Pointer to element `(b, h, 0, 0)`.
    unsafe fn at(&self, mem: &Mem, b: usize, h: usize) -> *const f32 {
        (mem.ptrs[self.slot] as *const f32)
            .offset(self.offset + b as isize * self.st[0] + h as isize * self.st[1])
    }
}

/// A planned attention.
pub(crate) struct SdpaPlan {
    dims: [usize; 7],
    q: View,
    k: View,
    v: View,
    /// The mask broadcast to (b, h, sq, sk): its view with zero strides where it broadcasts.
    mask: Option<View>,
    scale: f32,
    epi: Epilogue,
    /// The epilogue in the form the kernel table finishes in registers, if it has it.
    fast: Option<FastEpilogue>,
    /// The kernel's name, for `explain`.
    pub name: String,
}

impl SdpaPlan {
    /// Plans the attention anchor, or None when it is outside this path.
    pub(crate) fn new(c: &Checker, a: &Anchor, kern: &Kernels) -> Option<SdpaPlan> {
        let Op::Nn(NnOp::Attention {
            is_causal: false,
            kv_num_heads: None,
            q_num_heads: None,
            scale,
            softcap,
            softmax_precision,
            left_window_size,
            right_window_size,
            ..
        }) = &a.op
        else {
            return None;
        };
        let plain = *softcap == 0.0
            && *left_window_size < 0
            && *right_window_size < 0
            && matches!(softmax_precision, None | Some(DType::F32))
            && a.inputs.iter().skip(4).all(|r| r.is_none());
        if !plain {
            return None;
        }
        let f32_4d = |i: usize| -> Option<&TensorRef> {
            a.inputs
                .get(i)?
                .as_ref()
                .filter(|r| r.shape.len() == 4 && c.plan.buffer(r.buffer).dtype == DType::F32)
        };
        let (q, k, v) = (f32_4d(0)?, f32_4d(1)?, f32_4d(2)?);
        let [b, h, sq, d] = <[usize; 4]>::try_from(q.shape.as_slice()).ok()?;
        let [kb, hk, sk, kd] = <[usize; 4]>::try_from(k.shape.as_slice()).ok()?;
        let [vb, vh, vs, dv] = <[usize; 4]>::try_from(v.shape.as_slice()).ok()?;
        if kb != b || vb != b || kd != d || vh != hk || vs != sk || hk == 0 || h % hk != 0 {
            return None;
        }
        if a.shape != [b, h, sq, dv] {
            return None;
        }
        let mask = match a.inputs.get(3).cloned().flatten() {
            None => None,
            Some(m) => {
                if c.plan.buffer(m.buffer).dtype != DType::F32
                    || m.shape.is_empty()
                    || m.shape.len() > 4
                {
                    return None;
                }
                let target = [b, h, sq, sk];
                let mut st = [0isize; 4];
                let r = m.shape.len();
                for i in 0..r {
                    let td = 4 - r + i;
                    if m.shape[i] == target[td] {
                        st[td] = if target[td] == 1 { 0 } else { m.strides[i] };
                    } else if m.shape[i] != 1 {
                        return None;
                    }
                }
                Some(View {
                    slot: m.buffer.0 as usize,
                    offset: m.offset as isize,
                    st,
                })
            }
        };
        let layout = Layout {
            batch_base: (0..b * h).map(|i| vec![i / h, i % h, 0, 0]).collect(),
            row: vec![(2, sq)],
            col: vec![(3, dv)],
        };
        let epi = Epilogue::new(c, &a.epilogue, &layout).ok().flatten()?;
        let fast = FastEpilogue::recognize(c, &a.epilogue, &layout);
        let name = format!(
            "{}, epilogue {}",
            kern.name("attention"),
            fast.as_ref().map_or("interpreted".to_string(), |f| format!(
                "fused {}",
                f.describe()
            ))
        );
        Some(SdpaPlan {
            dims: [b, h, sq, d, hk, sk, dv],
            q: View::of(q)?,
            k: View::of(k)?,
            v: View::of(v)?,
            mask,
            scale: scale.unwrap_or(1.0 / (d as f32).sqrt()),
            epi,
            fast,
            name,
        })
    }

    /// Runs attention and its epilogue.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    pub(crate) unsafe fn run(&self, mem: &Mem, ex: &Exec) {
        let [b, h, sq, d, hk, sk, dv] = self.dims;
        // Query rows per task: all of a head's when that gives every thread work (K and V
        // are packed once per task), fewer when heads are scarce.
        let want_blocks = (2 * ex.threads).div_ceil(b * h).max(1);
        let rows_per = sq.div_ceil(want_blocks).max(1);
        let blocks = sq.div_ceil(rows_per);
        let threads = if self.epi.parallel { ex.threads } else { 1 };
        // Task `t`'s head and query rows.
        let task = |t: usize| {
            let (bh, blk) = (t / blocks, t % blocks);
            let (bi, hi) = (bh / h, bh % h);
            let kh = hi / (h / hk);
            let i0 = blk * rows_per;
            let i1 = (i0 + rows_per).min(sq);
            let view = |v: &View, head: usize| MatRef {
                ptr: v.at(mem, bi, head),
                rs: v.st[2],
                cs: v.st[3],
            };
            let head = Head {
                q: view(&self.q, hi),
                k: view(&self.k, kh),
                v: view(&self.v, kh),
                sq,
                sk,
                d,
                dv,
                scale: self.scale,
                mask: self.mask.as_ref().map(|m| view(m, hi)),
            };
            (bh, head, i0..i1)
        };
        let tasks = b * h * blocks;
        ex.pool.run(threads, tasks, &|t| {
            let (bh, head, rows) = task(t);
            // The pool deals each thread a contiguous range of tasks: the next one's
            // operands are fetched while this one computes.
            let ahead = (t + 1 < tasks).then(|| task(t + 1));
            let next = ahead.as_ref().map(|(_, head, rows)| Next {
                head,
                rows: rows.clone(),
            });
            let (i0, i1) = (rows.start, rows.end);
            // The fused epilogue addresses batches by (batch, head): narrow it to this one.
            if let Some(f) = &self.fast {
                let mut epi = f.bind(mem);
                let tables = Narrowed::new(&epi, 1, |_| bh);
                tables.apply(&mut epi);
                let sink = FusedSink {
                    epi,
                    finish: ex.kern.finish,
                };
                attention(ex.kern, &head, i0..i1, 0, &sink, next);
                return;
            }
            let map = |_: usize| (bh, 0);
            let sink = EpilogueSink {
                epi: &self.epi,
                kern: ex.kern,
                mem,
                map: &map,
                pre: |_, _, _, _, _, _: &mut [f32], _| {},
            };
            attention(ex.kern, &head, i0..i1, 0, &sink, next);
        });
    }
}
