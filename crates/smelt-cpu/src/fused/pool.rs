//! 2-D max and average pooling anchors: one plane per task on the kernel table's pooling
//! kernel, then the epilogue on the plane while it is in cache.

use super::epilogue::{Epilogue, Layout, PlainRows};
use super::{Exec, Mem};
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::Anchor;
use smelt_ir::op::{AutoPad, NnOp};
use smelt_ir::{DType, Op};
use smelt_kernels::buf::with_scratch;
use smelt_kernels::conv::Conv2d;
use smelt_kernels::Kernels;

/// A planned pooling.
pub(crate) struct PoolPlan {
    geom: Conv2d,
    pad_end: [usize; 2],
    /// None: max; Some(count_include_pad): average.
    avg: Option<bool>,
    images: usize,
    channels: usize,
    x_slot: usize,
    x_offset: isize,
    xs: [isize; 4],
    epi: Epilogue,
    /// The kernel's name, for `explain`.
    pub name: String,
}

/// Leading and trailing pads of one axis.
#[allow(clippy::too_many_arguments)]
fn pads_of(
    auto: &AutoPad,
    pads: &[i64],
    axis: usize,
    input: usize,
    k: usize,
    s: usize,
    d: usize,
    out: usize,
) -> Option<(usize, usize)> {
    let need = |o: usize| -> Option<usize> {
        Some(((o.checked_sub(1)? * s + (k - 1) * d + 1) as isize - input as isize).max(0) as usize)
    };
    match auto {
        AutoPad::NotSet => {
            let b = usize::try_from(pads.get(axis).copied().unwrap_or(0)).ok()?;
            let e = usize::try_from(pads.get(axis + 2).copied().unwrap_or(0)).ok()?;
            Some((b, e))
        }
        AutoPad::Valid => Some((0, 0)),
        AutoPad::SameUpper => need(out).map(|t| (t / 2, t - t / 2)),
        AutoPad::SameLower => need(out).map(|t| (t - t / 2, t / 2)),
    }
}

impl PoolPlan {
    /// Plans an f32 2-D MaxPool (one output) or AveragePool, or None.
    pub(crate) fn new(c: &Checker, a: &Anchor, kern: &Kernels) -> Option<PoolPlan> {
        let (auto_pad, dilations, kernel_shape, pads, strides, avg) = match &a.op {
            Op::Nn(NnOp::MaxPool {
                auto_pad,
                dilations,
                kernel_shape,
                pads,
                strides,
                ..
            }) => (
                auto_pad,
                dilations.clone(),
                kernel_shape,
                pads,
                strides,
                None,
            ),
            Op::Nn(NnOp::AveragePool {
                auto_pad,
                count_include_pad,
                dilations,
                kernel_shape,
                pads,
                strides,
                ..
            }) => (
                auto_pad,
                dilations.clone(),
                kernel_shape,
                pads,
                strides,
                Some(*count_include_pad),
            ),
            _ => return None,
        };
        let xr = a.inputs.first()?.as_ref()?;
        if c.plan.buffer(xr.buffer).dtype != DType::F32
            || xr.shape.len() != 4
            || a.shape.len() != 4
            || kernel_shape.len() != 2
        {
            return None;
        }
        let [n, ch, h, w] = <[usize; 4]>::try_from(xr.shape.as_slice()).ok()?;
        let [n2, ch2, oh, ow] = <[usize; 4]>::try_from(a.shape.as_slice()).ok()?;
        if n2 != n || ch2 != ch {
            return None;
        }
        let at = |v: &[i64], i: usize| {
            usize::try_from(v.get(i).copied().unwrap_or(1))
                .ok()
                .filter(|&x| x > 0)
        };
        let (kh, kw) = (at(kernel_shape, 0)?, at(kernel_shape, 1)?);
        let (sh, sw, dh, dw) = (
            at(strides, 0)?,
            at(strides, 1)?,
            at(&dilations, 0)?,
            at(&dilations, 1)?,
        );
        let (ph, peh) = pads_of(auto_pad, pads, 0, h, kh, sh, dh, oh)?;
        let (pw, pew) = pads_of(auto_pad, pads, 1, w, kw, sw, dw, ow)?;
        let geom = Conv2d {
            c: 1,
            h,
            w,
            kh,
            kw,
            sh,
            sw,
            dh,
            dw,
            ph,
            pw,
            oh,
            ow,
        };
        if !smelt_kernels::pooling::fits(&geom) {
            return None;
        }
        let layout = Layout {
            batch_base: (0..n).map(|b| vec![b, 0, 0, 0]).collect(),
            row: vec![(1, ch)],
            col: vec![(2, oh), (3, ow)],
        };
        let epi = Epilogue::new(c, &a.epilogue, &layout).ok().flatten()?;
        Some(PoolPlan {
            geom,
            pad_end: [peh, pew],
            avg,
            images: n,
            channels: ch,
            x_slot: xr.buffer.0 as usize,
            x_offset: xr.offset as isize,
            xs: <[isize; 4]>::try_from(xr.strides.as_slice()).ok()?,
            epi,
            name: kern.name(if avg.is_some() { "avgpool" } else { "maxpool" }),
        })
    }

    /// Runs the pooling and its epilogue.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    pub(crate) unsafe fn run(&self, mem: &Mem, ex: &Exec) {
        let [sn, sc, sh, sw] = self.xs;
        let px = self.geom.pixels();
        let threads = if self.epi.parallel { ex.threads } else { 1 };
        // Small planes (a global pool's one pixel) go several channels to a task, so the
        // per-task setup and the epilogue's call are paid per block, not per channel.
        let per_task = (PLANE_BLOCK / px.max(1)).clamp(1, self.channels.max(1));
        let blocks = self.channels.div_ceil(per_task);
        let direct = self.direct(mem);
        ex.pool.run(threads, self.images * blocks, &|t| {
            let (img, c0) = (t / blocks, (t % blocks) * per_task);
            let chans = per_task.min(self.channels - c0);
            let x = |c: usize| {
                (mem.ptrs[self.x_slot] as *const f32)
                    .offset(self.x_offset + img as isize * sn + (c0 + c) as isize * sc)
            };
            if let Some(rows) = &direct {
                // Each plane straight into its output plane.
                for c in 0..chans {
                    let plane = std::slice::from_raw_parts_mut(rows.row(img, c0 + c), px);
                    (ex.kern.pool)(&self.geom, self.pad_end, self.avg, x(c), [sh, sw], plane);
                }
                return;
            }
            with_scratch(px * chans, |planes| {
                for (c, plane) in planes.chunks_exact_mut(px.max(1)).take(chans).enumerate() {
                    (ex.kern.pool)(&self.geom, self.pad_end, self.avg, x(c), [sh, sw], plane);
                }
                self.epi
                    .apply(ex.kern, mem, img, c0, chans, 0, px, planes.as_ptr(), px);
            });
        });
    }

    /// The output's planes, when the planes may be pooled straight into them: the epilogue
    /// only stores them, each plane contiguous, and they lie apart from the input.
    ///
    /// # Safety
    /// As for [`PoolPlan::run`].
    unsafe fn direct<'a>(&'a self, mem: &Mem) -> Option<PlainRows<'a>> {
        let px = self.geom.pixels();
        if self.xs.iter().any(|&s| s < 0) || self.images * self.channels == 0 {
            return None;
        }
        let rows = self.epi.plain_rows(mem)?;
        let (mut lo, mut hi) = (usize::MAX, 0);
        for img in 0..self.images {
            for c in 0..self.channels {
                let p = rows.row(img, c) as usize;
                lo = lo.min(p);
                hi = hi.max(p + 4 * px);
            }
        }
        let g = &self.geom;
        let extents = [self.images, self.channels, g.h, g.w];
        let span: isize = self
            .xs
            .iter()
            .zip(extents)
            .map(|(&s, e)| s * (e.max(1) as isize - 1))
            .sum();
        let x_lo = (mem.ptrs[self.x_slot] as *const f32).wrapping_offset(self.x_offset) as usize;
        let x_hi = x_lo + 4 * (span as usize + 1);
        (x_hi <= lo || hi <= x_lo).then_some(rows)
    }
}

/// Output floats a pooling task aims at when its planes are small.
const PLANE_BLOCK: usize = 4096;
