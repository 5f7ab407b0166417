//! 2-D transposed convolution anchors: per (image, group) one GEMM of the transposed,
//! packed weights with the input (`cols[(m, ky, kx), pixel]`), then per output plane a
//! scatter-add of the columns into place (col2im), the bias and the epilogue.

use super::epilogue::{Epilogue, Layout};
use super::fast_epilogue::FastEpilogue;
use super::{Exec, Mem};
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::{Anchor, BufferKind, TensorRef};
use smelt_ir::op::{AutoPad, NnOp};
use smelt_ir::{DType, Op, Tensor};
use smelt_kernels::buf::with_scratch;
use smelt_kernels::gemm::{gemm, Batches, Gemm, Lhs, MatRef, PackedA, Rhs, StoreC};
use smelt_kernels::Kernels;

/// A planned transposed convolution.
pub(crate) struct ConvTransposePlan {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    m: usize,
    groups: usize,
    kh: usize,
    kw: usize,
    s: [usize; 2],
    d: [usize; 2],
    p: [usize; 2],
    oh: usize,
    ow: usize,
    x_slot: usize,
    x_offset: isize,
    xs: [isize; 4],
    /// Per group: the weights as a `(m/g * kh * kw) x (c/g)` left operand.
    wt: Vec<PackedA>,
    bias: Option<Vec<f32>>,
    epi: Epilogue,
    /// The epilogue compiled to the kernel table's fused finish, when it has that form.
    fast: Option<FastEpilogue>,
    /// The kernel's name, for `explain`.
    pub name: String,
}

fn weight_data<'w>(c: &Checker, weights: &'w [Tensor], r: &TensorRef) -> Option<&'w [f32]> {
    let b = c.plan.buffer(r.buffer);
    let BufferKind::Weight(i) = b.kind else {
        return None;
    };
    // Only whole, dense weights (the layout is read as [c][m][ky][kx]).
    if r.offset != 0 || !r.is_contiguous() || r.shape != b.shape {
        return None;
    }
    weights.get(i)?.as_f32()
}

impl ConvTransposePlan {
    /// Plans an f32 2-D ConvTranspose with constant weights (and bias), explicit pads and
    /// no `output_shape`, or None.
    pub(crate) fn new(
        c: &Checker,
        weights: &[Tensor],
        a: &Anchor,
        kern: &Kernels,
    ) -> Option<ConvTransposePlan> {
        let Op::Nn(NnOp::ConvTranspose {
            auto_pad: AutoPad::NotSet,
            dilations,
            group,
            output_shape,
            pads,
            strides,
            ..
        }) = &a.op
        else {
            return None;
        };
        if !output_shape.is_empty() {
            return None;
        }
        let xr = a.inputs.first()?.as_ref()?;
        let wr = a.inputs.get(1)?.as_ref()?;
        if c.plan.buffer(xr.buffer).dtype != DType::F32
            || xr.shape.len() != 4
            || wr.shape.len() != 4
            || a.shape.len() != 4
        {
            return None;
        }
        let [n, ch, h, w] = <[usize; 4]>::try_from(xr.shape.as_slice()).ok()?;
        let [wc, mg, kh, kw] = <[usize; 4]>::try_from(wr.shape.as_slice()).ok()?;
        let [_, m, oh, ow] = <[usize; 4]>::try_from(a.shape.as_slice()).ok()?;
        let groups = usize::try_from(*group).ok().filter(|&g| g > 0)?;
        if wc != ch || ch % groups != 0 || m != mg * groups {
            return None;
        }
        let at = |v: &[i64], i: usize| {
            usize::try_from(v.get(i).copied().unwrap_or(1))
                .ok()
                .filter(|&x| x > 0)
        };
        let s = [at(strides, 0)?, at(strides, 1)?];
        let d = [at(dilations, 0)?, at(dilations, 1)?];
        let pad = |i: usize| usize::try_from(pads.get(i).copied().unwrap_or(0)).ok();
        let p = [pad(0)?, pad(1)?];
        let wv = weight_data(c, weights, wr)?;
        let bias = match a.inputs.get(2).cloned().flatten() {
            None => None,
            Some(br) => Some(weight_data(c, weights, &br)?.to_vec()).filter(|b| b.len() == m),
        };
        if a.inputs.get(2).cloned().flatten().is_some() && bias.is_none() {
            return None;
        }
        let cg = ch / groups;
        let rows = mg * kh * kw;
        // W is [c][mg][kh][kw]: for group g, rows (m, ky, kx) are contiguous per input channel.
        let wt = (0..groups)
            .map(|g| {
                PackedA::new(
                    &kern.micro,
                    rows,
                    cg,
                    &wv[g * cg * rows..(g + 1) * cg * rows],
                    1,
                    rows,
                )
            })
            .collect();
        let layout = Layout {
            batch_base: (0..n).map(|b| vec![b, 0, 0, 0]).collect(),
            row: vec![(1, m)],
            col: vec![(2, oh), (3, ow)],
        };
        let epi = Epilogue::new(c, &a.epilogue, &layout).ok().flatten()?;
        let fast = FastEpilogue::recognize(c, &a.epilogue, &layout);
        Some(ConvTransposePlan {
            n,
            c: ch,
            h,
            w,
            m,
            groups,
            kh,
            kw,
            s,
            d,
            p,
            oh,
            ow,
            x_slot: xr.buffer.0 as usize,
            x_offset: xr.offset as isize,
            xs: <[isize; 4]>::try_from(xr.strides.as_slice()).ok()?,
            wt,
            bias,
            name: format!(
                "{}, epilogue {}",
                kern.name("conv-transpose.gemm-col2im"),
                fast.as_ref().map_or("interpreted".to_string(), |f| format!(
                    "fused {}",
                    f.describe()
                ))
            ),
            epi,
            fast,
        })
    }

    /// Whether the kernel tiles the output exactly: stride = kernel, no dilation, padding
    /// or extra output (each output element then comes from one column entry).
    fn tiles_exactly(&self) -> bool {
        self.s == [self.kh, self.kw]
            && self.d == [1, 1]
            && self.p.iter().all(|&p| p == 0)
            && self.oh == self.h * self.kh
            && self.ow == self.w * self.kw
    }

    /// Output channel `o` of image `b`, summed in `plane`, through the epilogue.
    ///
    /// # Safety
    /// As for [`ConvTransposePlan::run`].
    unsafe fn finish(&self, ex: &Exec, mem: &Mem, b: usize, o: usize, plane: &mut [f32]) {
        let opx = plane.len();
        match &self.fast {
            // The plane is row `o` of batch `b` in the epilogue's layout.
            Some(f) => (ex.kern.finish)(&f.bind(mem), b, o, 0, 1, opx, plane, opx),
            None => self
                .epi
                .apply(ex.kern, mem, b, o, 1, 0, opx, plane.as_ptr(), opx),
        }
    }

    /// Runs the transposed convolution and its epilogue.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    pub(crate) unsafe fn run(&self, mem: &Mem, ex: &Exec) {
        let [sn, sc, sh, sw] = self.xs;
        let (cg, mg) = (self.c / self.groups, self.m / self.groups);
        let rows = mg * self.kh * self.kw;
        let px = self.h * self.w;
        let opx = self.oh * self.ow;
        let threads = if self.epi.parallel { ex.threads } else { 1 };
        let x = (mem.ptrs[self.x_slot] as *const f32).offset(self.x_offset);
        let dense = sh == sw * self.w as isize;
        let cols_len = self.n * self.groups * rows * px;
        with_scratch(
            cols_len + if dense { 0 } else { self.n * self.c * px },
            |buf| {
                let (cols, xcopy) = buf.split_at_mut(cols_len);
                // The input as rows of pixels (copied when its rows are not contiguous).
                let (xbase, rs_c, bstride) = if dense {
                    (x, sc, sn)
                } else {
                    for b in 0..self.n {
                        for ci in 0..self.c {
                            for y in 0..self.h {
                                for xx in 0..self.w {
                                    xcopy[(b * self.c + ci) * px + y * self.w + xx] = *x.offset(
                                        b as isize * sn
                                            + ci as isize * sc
                                            + y as isize * sh
                                            + xx as isize * sw,
                                    );
                                }
                            }
                        }
                    }
                    (xcopy.as_ptr(), px as isize, (self.c * px) as isize)
                };
                for (gi, wt) in self.wt.iter().enumerate() {
                    let g = Gemm {
                        batch: self.n,
                        m: rows,
                        n: px,
                        k: cg,
                        a: Lhs::Packed(wt),
                        b: Rhs::Strided(
                            MatRef {
                                ptr: xbase.offset((gi * cg) as isize * rs_c),
                                rs: rs_c,
                                cs: 1,
                            },
                            Batches::Stride(bstride),
                        ),
                    };
                    let store = StoreC {
                        c: cols.as_mut_ptr().add(gi * rows * px),
                        ldc: px,
                        batch_stride: self.groups * rows * px,
                    };
                    gemm(ex.kern, ex.pool, threads, &g, &store);
                }
                let cols: &[f32] = cols;
                ex.pool.run(threads, self.n * self.m, &|t| {
                    let (b, o) = (t / self.m, t % self.m);
                    let (gi, om) = (o / mg, o % mg);
                    with_scratch(opx, |plane| {
                        let bias = self.bias.as_ref().map_or(0.0, |v| v[o]);
                        let base = ((b * self.groups + gi) * rows + om * self.kh * self.kw) * px;
                        if self.tiles_exactly() {
                            // Stride = kernel, no padding: every output element is one
                            // product, its column (om, ky, kx) at input pixel (y, x).
                            let (kh, kw) = (self.kh, self.kw);
                            for y in 0..self.h {
                                for ky in 0..kh {
                                    let dst = &mut plane[(y * kh + ky) * self.ow..][..self.ow];
                                    let src = |kx: usize| {
                                        &cols[base + (ky * kw + kx) * px + y * self.w..][..self.w]
                                    };
                                    if kw == 2 {
                                        let (s0, s1) = (src(0), src(1));
                                        for (d, (&a, &c)) in
                                            dst.chunks_exact_mut(2).zip(s0.iter().zip(s1))
                                        {
                                            d[0] = a + bias;
                                            d[1] = c + bias;
                                        }
                                    } else {
                                        for kx in 0..kw {
                                            let s = src(kx);
                                            for (d, &v) in dst[kx..].iter_mut().step_by(kw).zip(s) {
                                                *d = v + bias;
                                            }
                                        }
                                    }
                                }
                            }
                            self.finish(ex, mem, b, o, plane);
                            return;
                        }
                        plane.fill(bias);
                        let sx = self.s[1];
                        for ky in 0..self.kh {
                            for kx in 0..self.kw {
                                let r = (om * self.kh + ky) * self.kw + kx;
                                let src = &cols[((b * self.groups + gi) * rows + r) * px..][..px];
                                // Input columns xx whose output column xx * sx + off lies in
                                // the row: [x_lo, x_hi).
                                let off = (kx * self.d[1]) as isize - self.p[1] as isize;
                                let (x_lo, x_hi) =
                                    smelt_kernels::conv::in_row(off, sx, self.ow, self.w);
                                if x_lo >= x_hi {
                                    continue;
                                }
                                let ox0 = (x_lo as isize * sx as isize + off) as usize;
                                for y in 0..self.h {
                                    let oy = (y * self.s[0] + ky * self.d[0]) as isize
                                        - self.p[0] as isize;
                                    if oy < 0 || oy >= self.oh as isize {
                                        continue;
                                    }
                                    let dst = &mut plane[oy as usize * self.ow..][..self.ow];
                                    let srow = &src[y * self.w + x_lo..y * self.w + x_hi];
                                    let dst = dst[ox0..].iter_mut().step_by(sx);
                                    for (d, &v) in dst.zip(srow) {
                                        *d += v;
                                    }
                                }
                            }
                        }
                        self.finish(ex, mem, b, o, plane);
                    });
                });
            },
        );
    }
}
