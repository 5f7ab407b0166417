//! Convolution anchors in the blocked channel layout (NCHW16c, made by the
//! `blocked-layout` pass): the weights packed once, 3x3 stride-1 layers through the
//! blocked Winograd kernels where the cost model takes them
//! (`smelt_kernels::winograd_blocked`), every other geometry through
//! `smelt_kernels::blocked`, and the bias and epilogue applied to each tile of output
//! pixels x block lanes as it is produced.

use super::conv::{bias_values, geometry, weight_values};
use super::epilogue::{Epilogue, EpilogueSink, Layout};
use super::fast_epilogue::{BiasSrc, FastEpilogue};
use super::{Exec, Mem};
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::Anchor;
use smelt_ir::op::nn::CHANNEL_BLOCK;
use smelt_ir::op::NnOp;
use smelt_ir::{DType, Op, Tensor};
use smelt_kernels::blocked::{self, blocked_conv, BlockedInput, BlockedWeights, BLOCK};
use smelt_kernels::conv::Conv2d;
use smelt_kernels::epilogue::FusedSink;
use smelt_kernels::gemm::TileSink;
use smelt_kernels::winograd::{self, WinogradWeights};
use smelt_kernels::winograd_blocked::{self, winograd_blocked_conv};
use smelt_kernels::Kernels;

const _: () = assert!(CHANNEL_BLOCK == BLOCK);

/// How a blocked convolution computes.
enum Method {
    /// The blocked direct kernel (any geometry).
    Direct(BlockedWeights),
    /// Winograd F(m x m, 3x3), `m` the weights' tile.
    Winograd(WinogradWeights),
}

/// A planned blocked convolution.
pub(crate) struct BlockedConvPlan {
    geom: Conv2d,
    images: usize,
    /// Output channel blocks.
    blocks: usize,
    x_slot: usize,
    x_offset: isize,
    /// Each image's first input element, past `x_offset`.
    batch: Vec<isize>,
    /// Input steps: block, row, pixel, lane.
    xs: [isize; 4],
    bias: Option<Vec<f32>>,
    method: Method,
    epi: Epilogue,
    /// The epilogue (with the bias) in the form the kernel table finishes, if it has it.
    fast: Option<FastEpilogue>,
    /// The kernel's name, for `explain`.
    pub name: String,
}

impl BlockedConvPlan {
    /// Plans an f32 ConvBlocked anchor whose weights (and bias) are constants, or None.
    pub(crate) fn new(
        c: &Checker,
        weights: &[Tensor],
        a: &Anchor,
        kern: &Kernels,
    ) -> Option<BlockedConvPlan> {
        let Op::Nn(op @ NnOp::ConvBlocked { .. }) = &a.op else {
            return None;
        };
        let Some(NnOp::Conv {
            auto_pad,
            dilations,
            pads,
            strides,
            ..
        }) = op.unblocked_conv()
        else {
            return None;
        };
        let xr = a.inputs.first()?.as_ref()?;
        let wr = a.inputs.get(1)?.as_ref()?;
        if c.plan.buffer(xr.buffer).dtype != DType::F32 {
            return None;
        }
        let [n, cb, h, w, lanes] = <[usize; 5]>::try_from(xr.shape.as_slice()).ok()?;
        let [m, ch, kh, kw] = <[usize; 4]>::try_from(wr.shape.as_slice()).ok()?;
        let [_, mb, oh, ow, out_lanes] = <[usize; 5]>::try_from(a.shape.as_slice()).ok()?;
        if lanes != BLOCK || out_lanes != BLOCK || ch != cb * BLOCK || m != mb * BLOCK {
            return None;
        }
        if kh == 0 || kw == 0 {
            return None;
        }
        let geom = geometry(
            &auto_pad,
            [&strides, &dilations, &pads],
            ch,
            [h, w],
            [kh, kw],
            [oh, ow],
        )?;
        if !blocked::applies(&geom) {
            return None;
        }
        let wv = weight_values(c, weights, wr)?;
        let bias = bias_values(c, weights, a, m)?;
        // The epilogue sees batches (image, block), rows the pixels, columns the lanes.
        let layout = Layout {
            batch_base: (0..n * mb).map(|b| vec![b / mb, b % mb, 0, 0, 0]).collect(),
            row: vec![(2, oh), (3, ow)],
            col: vec![(4, BLOCK)],
        };
        let epi = Epilogue::new(c, &a.epilogue, &layout).ok().flatten()?;
        let mut fast = FastEpilogue::recognize(c, &a.epilogue, &layout);
        if let (Some(f), Some(b)) = (fast.as_mut(), &bias) {
            if f.row_bias.is_none() && f.col_bias.is_none() {
                f.col_bias = Some(BiasSrc::Owned {
                    values: b.clone(),
                    batch: (0..n * mb).map(|i| ((i % mb) * BLOCK) as isize).collect(),
                    step: 1,
                });
            } else {
                fast = None;
            }
        }
        let copy = blocked::copy_floats(&geom, n);
        let copy_bytes = u64::try_from(copy * 4).unwrap_or(u64::MAX);
        smelt_ir::limits::check_alloc(copy_bytes, &|| "a convolution's padded input".into())
            .ok()?;
        let &[sn, sb, sh, sw, sl] = xr.strides.as_slice() else {
            return None;
        };
        // Winograd where the plain layout would take it (F(2x2) for small images), reading
        // whole lanes.
        let wino =
            winograd::variant(kern, &geom, ch, m).filter(|_| winograd_blocked::applies(&geom, sl));
        let (method, base) = if let Some(wm) = wino {
            // Its scratch per band and its transformed weights (up to 4x the filters).
            let (band, packed) = winograd_blocked::scratch_floats(&geom, wm, ch, m);
            for (floats, what) in [(band, "scratch"), (packed, "transformed weights")] {
                let bytes = u64::try_from(floats * 4).unwrap_or(u64::MAX);
                smelt_ir::limits::check_alloc(bytes, &|| {
                    format!("a convolution's Winograd {what}")
                })
                .ok()?;
            }
            let w = WinogradWeights::tiles_as_rows(kern, wm, m, ch, &wv);
            let base = kern.name(&format!("conv.blocked-winograd-f{wm}x{wm}"));
            (Method::Winograd(w), base)
        } else {
            let w = BlockedWeights::new(&kern.micro, &geom, m, &wv);
            (Method::Direct(w), kern.name("conv.blocked"))
        };
        let name = match &fast {
            Some(f) => format!("{base}, epilogue fused {}", f.describe()),
            None => format!("{base}, epilogue interpreted"),
        };
        Some(BlockedConvPlan {
            method,
            geom,
            images: n,
            blocks: mb,
            x_slot: xr.buffer.0 as usize,
            x_offset: xr.offset as isize,
            batch: (0..n).map(|i| i as isize * sn).collect(),
            xs: [sb, sh, sw, sl],
            bias,
            epi,
            fast,
            name,
        })
    }

    /// Runs the convolution and its epilogue.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    pub(crate) unsafe fn run(&self, mem: &Mem, ex: &Exec) {
        let x = (mem.ptrs[self.x_slot] as *const f32).offset(self.x_offset);
        let input = BlockedInput {
            x,
            batch: &self.batch,
            strides: self.xs,
        };
        let threads = if self.epi.parallel { ex.threads } else { 1 };
        let (g, images) = (&self.geom, self.images);
        let conv = |sink: &dyn TileSink| match &self.method {
            Method::Direct(w) => {
                blocked_conv(ex.kern, ex.pool, threads, g, images, &input, w, sink)
            }
            Method::Winograd(w) => {
                winograd_blocked_conv(ex.kern, ex.pool, threads, g, images, &input, w, sink)
            }
        };
        if let Some(f) = &self.fast {
            let sink = FusedSink {
                epi: f.bind(mem),
                finish: ex.kern.finish,
            };
            conv(&sink);
            return;
        }
        let blocks = self.blocks;
        let bias = self.bias.as_deref();
        // Product batch b is (image, block): the bias of lane j0 + c of block b % blocks.
        let pre = |eb: usize,
                   _i0: usize,
                   j0: usize,
                   rows: usize,
                   cols: usize,
                   t: &mut [f32],
                   ld: usize| {
            if let Some(b) = bias {
                let first = (eb % blocks) * BLOCK + j0;
                for r in 0..rows {
                    let row = &mut t[r * ld..r * ld + cols];
                    row.iter_mut()
                        .zip(&b[first..first + cols])
                        .for_each(|(v, bv)| *v += bv);
                }
            }
        };
        let sink = EpilogueSink {
            epi: &self.epi,
            kern: ex.kern,
            mem,
            map: &|b| (b, 0),
            pre,
        };
        conv(&sink);
    }
}
