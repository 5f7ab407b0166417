//! 2-D convolution anchors: weights packed once per group, the input read through an im2col
//! view packed straight into GEMM panels (a plain strided operand for pointwise
//! convolutions), depthwise convolutions by a direct kernel per channel, and the bias and
//! epilogue applied to each block as it is produced.

use super::epilogue::{Epilogue, EpilogueSink, Layout};
use super::fast_epilogue::{BiasSrc, FastEpilogue, Narrowed};
use super::{Exec, Mem};
use half::slice::HalfFloatSliceExt;
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::{Anchor, BufferKind, ConvAlgorithm, TensorRef};
use smelt_ir::op::{AutoPad, NnOp};
use smelt_ir::{DType, Op, Tensor};
use smelt_kernels::amx::{amx_gemm_weights, AmxA, AmxRhs};
use smelt_kernels::amx_conv::{amx_conv, AmxConvWeights};
use smelt_kernels::buf::with_scratch;
use smelt_kernels::conv::Conv2d;
use smelt_kernels::direct::{
    direct_conv, with_padded_im2col, with_subsampled, DirectInput, DirectWeights,
};
use smelt_kernels::epilogue::FusedSink;
use smelt_kernels::gemm::{
    gemm, Batches, Gemm, Lhs, MatRef, Micro, PackedA, PackedB, Rhs, TileSink, Transposed,
};
use smelt_kernels::half::{Half, HalfPanels};
use smelt_kernels::implicit::implicit_conv;
use smelt_kernels::winograd::{self, winograd_conv, WinogradWeights};
use smelt_kernels::Kernels;
use std::borrow::Cow;

/// Output channels (per group) from which a bf16 convolution runs on AMX tiles.
const AMX_MIN_CHANNELS: usize = 64;

/// A group's weights as the GEMM's A: packed f32, half precision widened per run, or bf16
/// for AMX tiles (the input then rounded to bf16 as it is packed).
enum GemmWeights {
    F32(PackedA),
    Half(HalfPanels),
    Amx(AmxA),
}

enum Method {
    /// One GEMM per group: packed weights times the input's im2col view.
    Gemm(Vec<GemmWeights>),
    /// One implicit GEMM per group: packed weights times the im2col rows read in place
    /// from a phase-split padded copy of the input.
    Implicit(Vec<PackedA>),
    /// One GEMM per group computed transposed, output pixels as its rows: the im2col view's
    /// transpose times the transposed weights (packed once), each tile handed on transposed.
    GemmPixelRows(Vec<PackedB>),
    /// Direct convolution per group (no im2col).
    Direct(Vec<DirectWeights>),
    /// Winograd F(4x4, 3x3) per group.
    Winograd(Vec<WinogradWeights>),
    /// Per channel, a direct kernel; taps per channel.
    Depthwise(Vec<f32>),
    /// Stride 1 on AMX tiles, read in place from a bf16 copy of the input (per group).
    AmxConv(Vec<AmxConvWeights>),
}

/// A planned convolution.
pub(crate) struct ConvPlan {
    geom: Conv2d,
    images: usize,
    groups: usize,
    /// Output channels per group.
    mg: usize,
    x_slot: usize,
    x_offset: isize,
    /// Input steps: image, channel, row, column.
    xs: [isize; 4],
    bias: Option<Vec<f32>>,
    method: Method,
    epi: Epilogue,
    /// The epilogue (with the bias) in the form the GEMM finishes in registers, if it has it.
    fast: Option<FastEpilogue>,
    /// The kernel's name, for `explain`.
    pub name: String,
}

/// Half-precision values as f32s (F16C where the CPU has it).
fn widened<T>(v: &[T]) -> Vec<f32>
where
    [T]: HalfFloatSliceExt,
{
    let mut out = vec![0f32; v.len()];
    v.convert_to_f32_slice(&mut out);
    out
}

/// The dense f32 contents of a window over a weight buffer (half-precision weights widened:
/// the kernels that transform their weights keep them in f32).
pub(crate) fn weight_values<'w>(
    c: &Checker,
    weights: &'w [Tensor],
    r: &TensorRef,
) -> Option<Cow<'w, [f32]>> {
    let b = c.plan.buffer(r.buffer);
    let BufferKind::Weight(i) = b.kind else {
        return None;
    };
    let data: Cow<'w, [f32]> = match weights.get(i)?.data() {
        smelt_ir::Data::F32(v) => Cow::Borrowed(v.as_slice()),
        smelt_ir::Data::BF16(v) => Cow::Owned(widened(v.as_slice())),
        smelt_ir::Data::F16(v) => Cow::Owned(widened(v.as_slice())),
        _ => return None,
    };
    let n: usize = smelt_ir::dims_product(&r.shape);
    if r.is_contiguous() {
        // The usual case, a whole weight: borrowed, not copied (the packers read it only
        // when a pack is not replayed from an artifact, so a load touches no raw weight).
        let range = r.offset..r.offset.checked_add(n)?;
        return match data {
            Cow::Borrowed(d) => Some(Cow::Borrowed(d.get(range)?)),
            Cow::Owned(d) => Some(Cow::Owned(d.get(range)?.to_vec())),
        };
    }
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; r.shape.len()];
    for _ in 0..n {
        let off = r.offset as isize
            + idx
                .iter()
                .zip(&r.strides)
                .map(|(&i, &s)| i as isize * s)
                .sum::<isize>();
        out.push(*data.get(usize::try_from(off).ok()?)?);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < r.shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Some(Cow::Owned(out))
}

/// A 2-D convolution's geometry from its attributes (strides, dilations, pads, each two
/// spatial axes), channels per group and sizes; None when a stride or dilation is not
/// positive or the pads do not resolve.
pub(crate) fn geometry(
    auto_pad: &AutoPad,
    [strides, dilations, pads]: [&[i64]; 3],
    c: usize,
    [h, w]: [usize; 2],
    [kh, kw]: [usize; 2],
    [oh, ow]: [usize; 2],
) -> Option<Conv2d> {
    let at = |v: &[i64], i: usize| {
        usize::try_from(v.get(i).copied().unwrap_or(1))
            .ok()
            .filter(|&x| x > 0)
    };
    let (sh, sw, dh, dw) = (
        at(strides, 0)?,
        at(strides, 1)?,
        at(dilations, 0)?,
        at(dilations, 1)?,
    );
    Some(Conv2d {
        c,
        h,
        w,
        kh,
        kw,
        sh,
        sw,
        dh,
        dw,
        ph: lead_pad(auto_pad, pads, 0, h, kh, sh, dh, oh)?,
        pw: lead_pad(auto_pad, pads, 1, w, kw, sw, dw, ow)?,
        oh,
        ow,
    })
}

/// The anchor's constant bias of `m` values (input 2), `Some(None)` when it has none, None
/// when it is not a constant of that length.
pub(crate) fn bias_values(
    c: &Checker,
    weights: &[Tensor],
    a: &Anchor,
    m: usize,
) -> Option<Option<Vec<f32>>> {
    match a.inputs.get(2).cloned().flatten() {
        None => Some(None),
        Some(br) => {
            let b = weight_values(c, weights, &br)?.into_owned();
            (b.len() == m).then_some(Some(b))
        }
    }
}

/// Leading pads of one spatial axis, from the attributes and the sizes.
#[allow(clippy::too_many_arguments)]
fn lead_pad(
    auto: &AutoPad,
    pads: &[i64],
    axis: usize,
    input: usize,
    k: usize,
    s: usize,
    d: usize,
    out: usize,
) -> Option<usize> {
    match auto {
        AutoPad::NotSet => Some(pads.get(axis).copied().unwrap_or(0).max(0) as usize),
        AutoPad::Valid => Some(0),
        AutoPad::SameUpper | AutoPad::SameLower => {
            let need = ((out.checked_sub(1)? * s + (k - 1) * d + 1) as isize - input as isize)
                .max(0) as usize;
            Some(if matches!(auto, AutoPad::SameUpper) {
                need / 2
            } else {
                need - need / 2
            })
        }
    }
}

/// Taps x input channels from which a strided convolution takes the im2col GEMM.
const STRIDED_DIRECT_K: usize = 256;

/// Depth (taps x input channels) from which a GEMM convolution may run with its output pixels
/// as the product's rows: below it, transposing each tile costs more than the lanes saved.
const PIXEL_ROWS_MIN_K: usize = 256;

/// Whether a GEMM convolution of `m` output channels over `px` output pixels (depth `k`)
/// wastes clearly fewer multiply-adds with the pixels as the product's rows: a product's
/// columns come in whole `nr`-wide panels, while a short last row panel costs only its own
/// rows (at least 4, below which its FMA chains wait on their latency). Small images (7x7,
/// 10x10, 14x14) leave most of a last column panel empty when pixels are the columns.
fn pixels_as_rows(micro: &Micro, m: usize, px: usize, k: usize) -> bool {
    let use_of = |rows: usize, cols: usize| {
        let rem = rows % micro.mr;
        let row_cost = rows - rem + if rem > 0 { rem.max(4).min(micro.mr) } else { 0 };
        (rows * cols) as f64 / (row_cost * cols.div_ceil(micro.nr) * micro.nr) as f64
    };
    // The transposed A (pixels x taps) must stay in L2 while the weights stream past it
    // once (see the GEMM's grid), else they are read once per row block. Only the 32-wide
    // AVX-512 tile gains: measured on an Emerald Rapids Xeon, ResNet-50's 7x7 layers and
    // YOLOv8n's 10x10 ones ran 8-20% faster on AVX-512 and 0-10% slower on AVX2 (16 wide).
    micro.nr >= 32
        && k >= PIXEL_ROWS_MIN_K
        && px * k * 4 <= 2 * smelt_kernels::gemm::a_block_bytes()
        && use_of(px, m) >= 1.15 * use_of(m, px)
}

impl ConvPlan {
    /// Plans an f32 1-D or 2-D Conv anchor whose weights (and bias) are constants, or None.
    pub(crate) fn new(
        c: &Checker,
        weights: &[Tensor],
        a: &Anchor,
        kern: &Kernels,
        choice: Option<ConvAlgorithm>,
    ) -> Option<ConvPlan> {
        let Op::Nn(NnOp::Conv {
            auto_pad,
            dilations,
            group,
            kernel_shape: _,
            pads,
            strides,
        }) = &a.op
        else {
            return None;
        };
        let xr = a.inputs.first()?.as_ref()?;
        let wr = a.inputs.get(1)?.as_ref()?;
        let rank = xr.shape.len();
        if c.plan.buffer(xr.buffer).dtype != DType::F32
            || !(rank == 3 || rank == 4)
            || wr.shape.len() != rank
            || a.shape.len() != rank
        {
            return None;
        }
        // A 1-D convolution is a 2-D one over a single row.
        let lift = |s: &[usize]| -> Vec<usize> {
            match s.len() {
                3 => vec![s[0], s[1], 1, s[2]],
                _ => s.to_vec(),
            }
        };
        let lift_attr = |v: &[i64], fill: i64| -> Vec<i64> {
            match (rank, v.len()) {
                (3, 0) => Vec::new(),
                (3, 1) => vec![fill, v[0]],
                (3, 2) => vec![0, v[0], 0, v[1]],
                (3, _) => vec![fill; 4],
                _ => v.to_vec(),
            }
        };
        let (strides, dilations, pads) = (
            &lift_attr(strides, 1),
            &lift_attr(dilations, 1),
            &lift_attr(pads, 0),
        );
        let [n, ch, h, w] = <[usize; 4]>::try_from(lift(&xr.shape)).ok()?;
        let [m, cg, kh, kw] = <[usize; 4]>::try_from(lift(&wr.shape)).ok()?;
        let [_, _, oh, ow] = <[usize; 4]>::try_from(lift(&a.shape)).ok()?;
        let groups = usize::try_from(*group).ok()?;
        if groups == 0 || ch != cg * groups || m % groups != 0 || kh == 0 || kw == 0 {
            return None;
        }
        let geom = geometry(
            auto_pad,
            [strides, dilations, pads],
            cg,
            [h, w],
            [kh, kw],
            [oh, ow],
        )?;
        let mg = m / groups;
        // The filters as f32, asked for only by the kernels that take them so (half-precision
        // ones widened): the AMX and half-precision GEMM paths pack the narrow bits.
        let f32_weights = std::cell::OnceCell::new();
        let wv = || {
            f32_weights
                .get_or_init(|| weight_values(c, weights, wr))
                .as_deref()
        };
        let bias = bias_values(c, weights, a, m)?;
        // The epilogue sees batches (image, group), rows the group's channels, columns pixels.
        let layout = Layout {
            batch_base: (0..n * groups)
                .map(|b| [b / groups, (b % groups) * mg, 0, 0][..rank].to_vec())
                .collect(),
            row: vec![(1, mg)],
            col: match rank {
                3 => vec![(2, ow)],
                _ => vec![(2, oh), (3, ow)],
            },
        };
        let epi = Epilogue::new(c, &a.epilogue, &layout).ok().flatten()?;
        let mut fast = FastEpilogue::recognize(c, &a.epilogue, &layout);
        if let (Some(f), Some(b)) = (fast.as_mut(), &bias) {
            if f.row_bias.is_none() && f.col_bias.is_none() {
                let batch = (0..n * groups)
                    .map(|i| ((i % groups) * mg) as isize)
                    .collect();
                f.row_bias = Some(BiasSrc::Owned {
                    values: b.clone(),
                    batch,
                    step: 1,
                });
            } else {
                fast = None;
            }
        }
        let depthwise = cg == 1 && mg == 1;
        let k = geom.k();
        // Direct convolution works on tiles of one output row: it wastes lanes on narrow
        // rows, where the im2col GEMM (tiles across rows) does better.
        let nr = kern.micro.nr;
        let row_use = ow as f64 / (ow.div_ceil(nr) * nr) as f64;
        // A strided direct convolution re-reads its input rows per output channel panel;
        // past a few taps x channels the im2col GEMM is faster (timed by `--autotune` on
        // ResNet-50's and YOLOv8n's stride-2 layers with AVX2: 7-50%; with AVX-512 on an
        // Emerald Rapids Xeon, ResNet-50's 1x1 stride-2 layer 28x28x512 took 0.68x the
        // time, its 3x3 stride-2 one 28x28x128 0.92x).
        let strided = geom.sh > 1 || geom.sw > 1;
        // Column stride 2 has a direct kernel reading the input in place where the ISA has
        // one (AVX-512): no copy, and tiles that span rows fill lanes on narrow images.
        // Isolated YOLOv8n and ResNet-50 stride-2 3x3 layers on Zen 5 (smelt bench, one
        // thread, against the im2col GEMM): 1.3-2x faster.
        let in_place_s2 =
            smelt_kernels::strided::applies(kern, &geom, xr.strides.last().copied().unwrap_or(1));
        let direct = !geom.is_pointwise()
            && (in_place_s2 || (row_use >= 0.75 && !(strided && k >= STRIDED_DIRECT_K)));
        // Winograd by the fixed cost model the blocked layout shares (`winograd::variant`).
        let by_cost = winograd::variant(kern, &geom, cg, mg);
        let (winograd, wino_m) = (by_cost.is_some(), by_cost.unwrap_or(4));
        // A tuned choice (timed on a machine) overrides the cost model where it applies.
        let chosen = choice.filter(|c| match c {
            ConvAlgorithm::Gemm => true,
            ConvAlgorithm::Direct => !geom.is_pointwise(),
            ConvAlgorithm::Winograd | ConvAlgorithm::WinogradF2 => winograd::applies(&geom),
        });
        // bf16 weights on a CPU with AMX: the im2col GEMM on AMX tiles (its products
        // several times the FMA rate; a tuned choice still overrides), where the filters
        // are enough to amortize packing each 32 pixels' input to bf16 (two blocks of 32
        // output channels: PP-OCRv4 det's 16- and 24-channel layers at 160x160 took 2-3x
        // their f32 time on the tiles, packing-bound).
        let half = super::matmul::half_weight(c, weights, wr).filter(|_| wr.is_contiguous());
        let amx = matches!(half, Some((_, Half::Bf16)))
            && kern.isa == smelt_kernels::Isa::Avx512
            && !depthwise
            && mg >= AMX_MIN_CHANNELS
            && k >= 16
            && chosen.is_none()
            && smelt_kernels::amx::available();
        let (winograd, direct, wino_m) = match chosen {
            Some(ConvAlgorithm::Winograd) => (true, false, 4),
            Some(ConvAlgorithm::WinogradF2) => (true, false, 2),
            Some(c) => (false, c == ConvAlgorithm::Direct, wino_m),
            None if amx => (false, false, wino_m),
            None => (winograd, direct, wino_m),
        };
        let method = if depthwise {
            Method::Depthwise(wv()?.to_vec())
        } else if winograd {
            let wv = wv()?;
            Method::Winograd(
                (0..groups)
                    .map(|g| {
                        let w = &wv[g * mg * k..(g + 1) * mg * k];
                        WinogradWeights::new(
                            kern,
                            wino_m,
                            mg,
                            cg,
                            w,
                            winograd::tiles(&geom, wino_m),
                        )
                    })
                    .collect(),
            )
        } else if direct {
            let wv = wv()?;
            Method::Direct(
                (0..groups)
                    .map(|g| DirectWeights::new(kern, mg, k, &wv[g * mg * k..(g + 1) * mg * k]))
                    .collect(),
            )
        } else if let (true, true, Some((bits, _))) =
            (amx, smelt_kernels::amx_conv::applies(&geom), half)
        {
            Method::AmxConv(
                (0..groups)
                    .map(|g| {
                        let w = &bits[g * mg * k..(g + 1) * mg * k];
                        AmxConvWeights::new(mg, cg, geom.kh, geom.kw, w)
                    })
                    .collect(),
            )
        } else if let (true, Some((bits, _))) = (amx, half) {
            Method::Gemm(
                (0..groups)
                    .map(|g| {
                        GemmWeights::Amx(AmxA::new(
                            mg,
                            k,
                            &bits[g * mg * k..(g + 1) * mg * k],
                            k,
                            1,
                        ))
                    })
                    .collect(),
            )
        } else if smelt_kernels::implicit::applies(&kern.micro, &geom, mg) {
            let wv = wv()?;
            Method::Implicit(
                (0..groups)
                    .map(|g| {
                        PackedA::new(&kern.micro, mg, k, &wv[g * mg * k..(g + 1) * mg * k], k, 1)
                    })
                    .collect(),
            )
        } else if pixels_as_rows(&kern.micro, mg, geom.pixels(), k) {
            // B = W^T: element (p, o) of the k x mg matrix at o * k + p.
            let wv = wv()?;
            Method::GemmPixelRows(
                (0..groups)
                    .map(|g| {
                        PackedB::new(&kern.micro, k, mg, &wv[g * mg * k..(g + 1) * mg * k], 1, k)
                    })
                    .collect(),
            )
        } else {
            // Half-precision weights stay so (no f32 copy is made of them).
            let wv = if half.is_some() { &[][..] } else { wv()? };
            Method::Gemm(
                (0..groups)
                    .map(|g| match half {
                        Some((bits, kind)) => GemmWeights::Half(HalfPanels::new(
                            kern,
                            kind,
                            kern.micro.mr,
                            k,
                            mg,
                            &bits[g * mg * k..(g + 1) * mg * k],
                            1,
                            k,
                        )),
                        None => GemmWeights::F32(PackedA::new(
                            &kern.micro,
                            mg,
                            k,
                            &wv[g * mg * k..(g + 1) * mg * k],
                            k,
                            1,
                        )),
                    })
                    .collect(),
            )
        };
        // The padded copy the chosen kernel makes of the input: sized by the model's pads,
        // so checked against the memory limits here (past them, the reference kernel runs
        // the node) rather than allocated, or aborting, in a run.
        let padded = !(geom.kh == 1 && geom.kw == 1 && geom.ph == 0 && geom.pw == 0);
        let copy = match &method {
            Method::Implicit(_) => smelt_kernels::implicit::copy_floats(&geom),
            Method::AmxConv(_) => smelt_kernels::amx_conv::copy_bytes(&geom).div_ceil(4),
            Method::Winograd(_) => winograd::padded_floats(&geom, wino_m),
            Method::Direct(_) if !in_place_s2 => {
                smelt_kernels::direct::padded_copy_floats(&geom, kern.micro.nr)
            }
            Method::Gemm(_) | Method::GemmPixelRows(_) if padded => {
                smelt_kernels::direct::padded_copy_floats(&geom, 1)
            }
            _ => 0,
        };
        let copy_bytes = u64::try_from(copy * 4 * n as u128).unwrap_or(u64::MAX);
        smelt_ir::limits::check_alloc(copy_bytes, &|| "a convolution's padded input".into())
            .ok()?;
        let xs: [isize; 4] = match xr.strides.as_slice() {
            &[a, b, d] => [a, b, 0, d],
            s => <[isize; 4]>::try_from(s).ok()?,
        };
        let base = match &method {
            Method::Depthwise(_) => kern.name("conv.depthwise"),
            Method::AmxConv(_) => "conv.amx-bf16-direct".to_string(),
            Method::Direct(_) => kern.name("conv.direct"),
            Method::Winograd(_) if wino_m == 2 => kern.name("conv.winograd-f2x2"),
            Method::Winograd(_) => kern.name("conv.winograd-f4x4"),
            Method::Gemm(w) if matches!(w.first(), Some(GemmWeights::Amx(_))) => {
                "conv.amx-bf16".to_string()
            }
            Method::Gemm(_) if geom.is_pointwise() => kern.name("conv.pointwise-gemm"),
            Method::Gemm(_) => kern.name("conv.im2col-gemm"),
            Method::Implicit(_) => kern.name("conv.implicit-gemm"),
            Method::GemmPixelRows(_) if geom.is_pointwise() => {
                kern.name("conv.pointwise-gemm-pixel-rows")
            }
            Method::GemmPixelRows(_) => kern.name("conv.im2col-gemm-pixel-rows"),
        };
        // Weights the plan keeps narrow, or widened to f32 at plan time.
        let base = match (&method, c.plan.buffer(wr.buffer).dtype) {
            (_, DType::F32) => base,
            (Method::Gemm(w), _) if matches!(w.first(), Some(GemmWeights::Amx(_))) => {
                format!("{base} (bf16 weights and activations)")
            }
            (Method::AmxConv(_), _) => format!("{base} (bf16 weights and activations)"),
            (Method::Gemm(w), d) if matches!(w.first(), Some(GemmWeights::Half(_))) => {
                format!("{base} ({d} weights)")
            }
            (_, d) => format!("{base} ({d} weights widened)"),
        };
        let name = match &fast {
            Some(f) => format!("{base}, epilogue fused {}", f.describe()),
            None => format!("{base}, epilogue interpreted"),
        };
        Some(ConvPlan {
            geom,
            images: n,
            groups,
            mg,
            x_slot: xr.buffer.0 as usize,
            x_offset: xr.offset as isize,
            xs,
            bias,
            method,
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
        let [sn, sc, sh, sw] = self.xs;
        let g = &self.geom;
        let threads = if self.epi.parallel { ex.threads } else { 1 };
        // Where each image's block of group gi's input channels starts.
        let group_offsets = |gi: usize| -> Vec<isize> {
            (0..self.images)
                .map(|i| i as isize * sn + (gi * g.c) as isize * sc)
                .collect()
        };
        match &self.method {
            Method::Depthwise(taps) => {
                let planes = self.images * self.groups;
                let ntaps = g.kh * g.kw;
                let px = g.pixels();
                ex.pool.run(threads, planes, &|p| {
                    let (img, ch) = (p / self.groups, p % self.groups);
                    let x = (mem.ptrs[self.x_slot] as *const f32).offset(self.x_offset);
                    let src = x.offset(img as isize * sn + ch as isize * sc);
                    with_scratch(px, |plane| {
                        (ex.kern.depthwise)(
                            g,
                            src,
                            [sh, sw],
                            &taps[ch * ntaps..(ch + 1) * ntaps],
                            plane,
                        );
                        if let Some(f) = &self.fast {
                            // The fused epilogue adds the bias; each channel is a batch of one row.
                            let epi = f.bind(mem);
                            (ex.kern.finish)(&epi, p, 0, 0, 1, px, plane, px);
                            return;
                        }
                        if let Some(b) = &self.bias {
                            plane.iter_mut().for_each(|v| *v += b[ch]);
                        }
                        // Depthwise: each channel is its own group (batch), of one row.
                        self.epi
                            .apply(ex.kern, mem, p, 0, 1, 0, px, plane.as_ptr(), px);
                    });
                });
            }
            Method::Winograd(weights) => {
                for (gi, ww) in weights.iter().enumerate() {
                    let offsets = group_offsets(gi);
                    let input = DirectInput {
                        x,
                        batch: &offsets,
                        strides: [sc, sh, sw],
                    };
                    self.finish_with(mem, ex, gi, |sink| {
                        winograd_conv(ex.kern, ex.pool, threads, g, self.images, &input, ww, sink)
                    });
                }
            }
            Method::AmxConv(weights) => {
                for (gi, w) in weights.iter().enumerate() {
                    let offsets = group_offsets(gi);
                    self.finish_with(mem, ex, gi, |sink| {
                        amx_conv(
                            ex.pool,
                            threads,
                            g,
                            self.images,
                            x,
                            &offsets,
                            [sc, sh, sw],
                            w,
                            sink,
                        )
                    });
                }
            }
            Method::Direct(weights) => {
                for (gi, dw) in weights.iter().enumerate() {
                    let offsets = group_offsets(gi);
                    let input = DirectInput {
                        x,
                        batch: &offsets,
                        strides: [sc, sh, sw],
                    };
                    self.finish_with(mem, ex, gi, |sink| {
                        direct_conv(ex.kern, ex.pool, threads, g, self.images, &input, dw, sink)
                    });
                }
            }
            Method::Implicit(packed) => {
                for (gi, pa) in packed.iter().enumerate() {
                    let offsets = group_offsets(gi);
                    let input = DirectInput {
                        x,
                        batch: &offsets,
                        strides: [sc, sh, sw],
                    };
                    self.finish_with(mem, ex, gi, |sink| {
                        implicit_conv(ex.kern, ex.pool, threads, g, self.images, &input, pa, sink)
                    });
                }
            }
            Method::Gemm(packed) => {
                let pointwise = g.is_pointwise() && sh == sw * g.w as isize;
                // A strided 1x1 convolution without padding (a downsample) multiplies a
                // compact copy of its input's samples, read in place like a pointwise one.
                let subsampled = g.kh == 1 && g.kw == 1 && g.ph == 0 && g.pw == 0 && !pointwise;
                for (gi, pa) in packed.iter().enumerate() {
                    let offsets = group_offsets(gi);
                    let product = |rhs: Rhs| {
                        let a = match pa {
                            GemmWeights::F32(p) => Lhs::Packed(p),
                            GemmWeights::Half(h) => Lhs::Half(h),
                            GemmWeights::Amx(w) => {
                                let b = match rhs {
                                    Rhs::Strided(m, bs) => AmxRhs::Strided(m, bs),
                                    Rhs::Panels(src) => AmxRhs::Panels(src),
                                    // (The convolution's B is never packed ahead.)
                                    Rhs::Packed(_) | Rhs::PackedEach(_) => return,
                                };
                                let n = g.pixels();
                                self.finish_with(mem, ex, gi, |sink| {
                                    amx_gemm_weights(ex.pool, threads, self.images, n, w, b, sink)
                                });
                                return;
                            }
                        };
                        let gm = Gemm {
                            batch: self.images,
                            m: self.mg,
                            n: g.pixels(),
                            k: g.k(),
                            a,
                            b: rhs,
                        };
                        self.finish_with(mem, ex, gi, |sink| {
                            gemm(ex.kern, ex.pool, threads, &gm, sink)
                        });
                    };
                    if pointwise {
                        product(Rhs::Strided(
                            MatRef {
                                ptr: x,
                                rs: sc,
                                cs: sw,
                            },
                            Batches::Table(&offsets),
                        ));
                    } else {
                        let input = DirectInput {
                            x,
                            batch: &offsets,
                            strides: [sc, sh, sw],
                        };
                        let (kern, pool) = (ex.kern, ex.pool);
                        if subsampled {
                            with_subsampled(
                                kern,
                                pool,
                                threads,
                                g,
                                self.images,
                                &input,
                                |m, bs| product(Rhs::Strided(m, Batches::Stride(bs))),
                            );
                        } else {
                            with_padded_im2col(
                                kern,
                                pool,
                                threads,
                                g,
                                self.images,
                                &input,
                                |src| product(Rhs::Panels(src)),
                            );
                        }
                    }
                }
            }
            Method::GemmPixelRows(packed) => {
                let pointwise = g.is_pointwise() && sh == sw * g.w as isize;
                // A strided 1x1 convolution without padding (a downsample) multiplies a
                // compact copy of its input's samples, read in place like a pointwise one.
                let subsampled = g.kh == 1 && g.kw == 1 && g.ph == 0 && g.pw == 0 && !pointwise;
                for (gi, pb) in packed.iter().enumerate() {
                    let offsets = group_offsets(gi);
                    // A = the im2col view transposed (pixels x taps): a pointwise input is
                    // that matrix already, read with the pixel step along its rows.
                    let product = |lhs: Lhs| {
                        let gm = Gemm {
                            batch: self.images,
                            m: g.pixels(),
                            n: self.mg,
                            k: g.k(),
                            a: lhs,
                            b: Rhs::Packed(pb),
                        };
                        self.finish_with(mem, ex, gi, |sink| {
                            gemm(ex.kern, ex.pool, threads, &gm, &Transposed(sink))
                        });
                    };
                    if pointwise {
                        product(Lhs::Strided(
                            MatRef {
                                ptr: x,
                                rs: sw,
                                cs: sc,
                            },
                            Batches::Table(&offsets),
                        ));
                    } else {
                        let input = DirectInput {
                            x,
                            batch: &offsets,
                            strides: [sc, sh, sw],
                        };
                        let (kern, pool) = (ex.kern, ex.pool);
                        if subsampled {
                            // A = the compact copy transposed: pixels x channels.
                            with_subsampled(
                                kern,
                                pool,
                                threads,
                                g,
                                self.images,
                                &input,
                                |m, bs| {
                                    let at = MatRef {
                                        ptr: m.ptr,
                                        rs: 1,
                                        cs: m.rs,
                                    };
                                    product(Lhs::Strided(at, Batches::Stride(bs)))
                                },
                            );
                        } else {
                            with_padded_im2col(
                                kern,
                                pool,
                                threads,
                                g,
                                self.images,
                                &input,
                                |src| product(Lhs::Panels(src)),
                            );
                        }
                    }
                }
            }
        }
    }

    /// Runs `compute` (one group's product over the images) with the sink that finishes
    /// its tiles: the fused epilogue with its batch tables narrowed to this group, or the
    /// general epilogue after the bias.
    ///
    /// # Safety
    /// As for [`ConvPlan::run`].
    unsafe fn finish_with(
        &self,
        mem: &Mem,
        ex: &Exec,
        gi: usize,
        compute: impl FnOnce(&dyn TileSink),
    ) {
        let groups = self.groups;
        let images = self.images;
        if let Some(f) = &self.fast {
            let mut epi = f.bind(mem);
            let tables = Narrowed::new(&epi, images, |i| i * groups + gi);
            tables.apply(&mut epi);
            compute(&FusedSink {
                epi,
                finish: ex.kern.finish,
            });
            return;
        }
        let map = move |b: usize| (b * groups + gi, 0);
        let mg = self.mg;
        let bias = self.bias.as_deref();
        let pre = |_eb: usize,
                   i0: usize,
                   _j0: usize,
                   rows: usize,
                   cols: usize,
                   t: &mut [f32],
                   ld: usize| {
            if let Some(b) = bias {
                for r in 0..rows {
                    let bv = b[gi * mg + i0 + r];
                    t[r * ld..r * ld + cols].iter_mut().for_each(|v| *v += bv);
                }
            }
        };
        compute(&EpilogueSink {
            epi: &self.epi,
            kern: ex.kern,
            mem,
            map: &map,
            pre,
        });
    }
}
