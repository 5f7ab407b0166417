//! 2-D Resize anchors on NCHW f32: nearest (integer up- or down-scaling) and linear
//! (bilinear, any scale) with the common coordinate modes, from per-axis tables made at plan
//! time; one plane per task, then the epilogue on the plane. Other forms (cubic,
//! antialias, crop-and-resize, a region of interest, non-spatial axes) take the reference.

use super::epilogue::{Epilogue, Layout};
use super::fast_epilogue::FastEpilogue;
use super::{Exec, Mem};
use smelt_ir::kernel::check::Checker;
use smelt_ir::kernel::{Anchor, BufferKind};
use smelt_ir::op::misc::{CoordMode, InterpMode, NearestMode};
use smelt_ir::op::MiscOp;
use smelt_ir::{DType, Op, Tensor};
use smelt_kernels::buf::with_scratch;
use smelt_kernels::Kernels;

/// One axis: the source index per output index, or two sources and the second's weight.
enum Axis {
    Nearest(Vec<usize>),
    Linear(Vec<(usize, usize, f32)>),
}

/// A planned Resize.
pub(crate) struct ResizePlan {
    planes: usize,
    channels: usize,
    ow: usize,
    x_slot: usize,
    x_offset: isize,
    xs: [isize; 4],
    rows: Axis,
    cols: Axis,
    /// Nearest columns by an integer factor `f` (output column `i` reads input column
    /// `i / f`, every input column used): rows are then written `f` copies at a time.
    col_factor: Option<usize>,
    epi: Epilogue,
    /// The epilogue compiled to the kernel table's fused finish, when it has that form.
    fast: Option<FastEpilogue>,
    /// The kernel's name, for `explain`.
    pub name: String,
}

/// The input coordinate of output index `y` (f64). As the reference does, the resized
/// length in align_corners and pytorch_half_pixel is the unrounded `scale * n_in`.
fn coord(c: CoordMode, y: usize, n_in: usize, _n_out: usize, scale: f64) -> Option<f64> {
    let yf = y as f64;
    let n_out = scale * n_in as f64;
    Some(match c {
        CoordMode::HalfPixel => (yf + 0.5) / scale - 0.5,
        CoordMode::PytorchHalfPixel => {
            if n_out == 1.0 {
                -0.5
            } else {
                (yf + 0.5) / scale - 0.5
            }
        }
        CoordMode::AlignCorners => {
            if n_out == 1.0 {
                0.0
            } else {
                yf * (n_in as f64 - 1.0) / (n_out - 1.0)
            }
        }
        CoordMode::Asymmetric => yf / scale,
        CoordMode::TfHalfPixelForNn => (yf + 0.5) / scale,
        CoordMode::HalfPixelSymmetric | CoordMode::TfCropAndResize => return None,
    })
}

fn axis(
    mode: InterpMode,
    c: CoordMode,
    nearest: NearestMode,
    n_in: usize,
    n_out: usize,
    scale: f64,
) -> Option<Axis> {
    let last = n_in.checked_sub(1)? as f64;
    match mode {
        InterpMode::Nearest => {
            // Integer factors only: there the rounding cannot depend on float width.
            let up = scale >= 1.0 && scale.fract() == 0.0;
            let down = scale < 1.0 && (1.0 / scale).fract() == 0.0;
            if !(up || down) {
                return None;
            }
            let mut v = Vec::with_capacity(n_out);
            for y in 0..n_out {
                let x = coord(c, y, n_in, n_out, scale)?;
                let fl = x.floor();
                let r = x - fl;
                let up = x != fl
                    && match nearest {
                        NearestMode::RoundPreferFloor => r > 0.5,
                        NearestMode::RoundPreferCeil => r >= 0.5,
                        NearestMode::Floor => false,
                        NearestMode::Ceil => true,
                        NearestMode::Simple => scale < 1.0,
                    };
                let i = if up { fl + 1.0 } else { fl };
                v.push(i.clamp(0.0, last) as usize);
            }
            Some(Axis::Nearest(v))
        }
        InterpMode::Linear => {
            let mut v = Vec::with_capacity(n_out);
            for y in 0..n_out {
                let x = coord(c, y, n_in, n_out, scale)?.clamp(0.0, last);
                let i0 = x.floor();
                let i1 = (i0 + 1.0).min(last);
                v.push((i0 as usize, i1 as usize, (x - i0) as f32));
            }
            Some(Axis::Linear(v))
        }
        InterpMode::Cubic => None,
    }
}

/// A constant 1-D input of the anchor (scales or sizes), as f64.
fn constant(
    c: &Checker,
    weights: &[Tensor],
    a: &Anchor,
    slot: Option<usize>,
) -> Option<Option<Vec<f64>>> {
    let Some(slot) = slot else {
        return Some(None);
    };
    let Some(r) = a.inputs.get(slot).cloned().flatten() else {
        return Some(None);
    };
    let b = c.plan.buffer(r.buffer);
    let BufferKind::Weight(i) = b.kind else {
        return None;
    };
    let t = weights.get(i)?;
    if t.is_empty() {
        return Some(None);
    }
    Some(Some(t.to_f64().ok()?))
}

impl ResizePlan {
    /// Plans a 4-D f32 Resize of the two spatial axes, or None.
    pub(crate) fn new(
        c: &Checker,
        weights: &[Tensor],
        a: &Anchor,
        kern: &Kernels,
    ) -> Option<ResizePlan> {
        let Op::Misc(MiscOp::Resize {
            mode,
            coord: cm,
            nearest,
            antialias,
            axes,
            scales,
            roi_input,
            scales_input,
            sizes_input,
            ..
        }) = &a.op
        else {
            return None;
        };
        let xr = a.inputs.first()?.as_ref()?;
        if c.plan.buffer(xr.buffer).dtype != DType::F32 || xr.shape.len() != 4 || a.shape.len() != 4
        {
            return None;
        }
        if axes.is_some() || constant(c, weights, a, *roi_input)?.is_some_and(|r| !r.is_empty()) {
            return None;
        }
        let [n, ch, h, w] = <[usize; 4]>::try_from(xr.shape.as_slice()).ok()?;
        let [n2, ch2, oh, ow] = <[usize; 4]>::try_from(a.shape.as_slice()).ok()?;
        if n2 != n || ch2 != ch || h == 0 || w == 0 {
            return None;
        }
        let given = match scales {
            Some(s) => Some(s.iter().map(|&v| v as f64).collect::<Vec<_>>()),
            None => constant(c, weights, a, *scales_input)?,
        };
        let (sy, sx) = match given {
            Some(s) if s.len() == 4 && s[0] == 1.0 && s[1] == 1.0 => (s[2], s[3]),
            Some(_) => return None,
            None => {
                constant(c, weights, a, *sizes_input)??;
                (oh as f64 / h as f64, ow as f64 / w as f64)
            }
        };
        // Downscaling linear with antialias widens the filter: not this path.
        if *antialias && (sy < 1.0 || sx < 1.0) && *mode != InterpMode::Nearest {
            return None;
        }
        let rows = axis(*mode, *cm, *nearest, h, oh, sy)?;
        let cols = axis(*mode, *cm, *nearest, w, ow, sx)?;
        let layout = Layout {
            batch_base: (0..n).map(|b| vec![b, 0, 0, 0]).collect(),
            row: vec![(1, ch)],
            col: vec![(2, oh), (3, ow)],
        };
        let epi = Epilogue::new(c, &a.epilogue, &layout).ok().flatten()?;
        let fast = FastEpilogue::recognize(c, &a.epilogue, &layout);
        let col_factor = match &cols {
            Axis::Nearest(rx) if w > 0 && ow % w == 0 => {
                let f = ow / w;
                rx.iter().enumerate().all(|(i, &x)| x == i / f).then_some(f)
            }
            _ => None,
        };
        Some(ResizePlan {
            col_factor,
            planes: n * ch,
            channels: ch,
            ow,
            x_slot: xr.buffer.0 as usize,
            x_offset: xr.offset as isize,
            xs: <[isize; 4]>::try_from(xr.strides.as_slice()).ok()?,
            rows,
            cols,
            epi,
            name: format!(
                "{}, epilogue {}",
                kern.name(match mode {
                    InterpMode::Nearest => "resize.nearest",
                    _ => "resize.bilinear",
                }),
                fast.as_ref().map_or("interpreted".to_string(), |f| format!(
                    "fused {}",
                    f.describe()
                ))
            ),
            fast,
        })
    }

    /// Runs the resize and its epilogue.
    ///
    /// # Safety
    /// `mem` holds the storages the plan was validated against.
    pub(crate) unsafe fn run(&self, mem: &Mem, ex: &Exec) {
        let [sn, sc, sh, sw] = self.xs;
        let oh = match &self.rows {
            Axis::Nearest(v) => v.len(),
            Axis::Linear(v) => v.len(),
        };
        let (ow, px) = (self.ow, oh * self.ow);
        let threads = if self.epi.parallel { ex.threads } else { 1 };
        ex.pool.run(threads, self.planes, &|p| {
            let (img, ch) = (p / self.channels, p % self.channels);
            let x = (mem.ptrs[self.x_slot] as *const f32)
                .offset(self.x_offset + img as isize * sn + ch as isize * sc);
            let at = |y: usize, xx: usize| *x.offset(y as isize * sh + xx as isize * sw);
            with_scratch(px, |plane| {
                for oy in 0..oh {
                    let out = &mut plane[oy * ow..(oy + 1) * ow];
                    match (&self.rows, &self.cols) {
                        (Axis::Nearest(ry), _) if oy > 0 && ry[oy] == ry[oy - 1] => {
                            // The same source row as the row above: a copy.
                            plane.copy_within((oy - 1) * ow..oy * ow, oy * ow);
                        }
                        (Axis::Nearest(ry), Axis::Nearest(rx)) => {
                            let y = ry[oy];
                            match self.col_factor {
                                Some(2) if sw == 1 => {
                                    // Each source float twice: one 8-byte store per pair.
                                    let src = x.offset(y as isize * sh);
                                    for (i, o) in out.chunks_exact_mut(2).enumerate() {
                                        let v = *src.add(i);
                                        o.copy_from_slice(&[v, v]);
                                    }
                                }
                                Some(f) => {
                                    for (i, o) in out.chunks_exact_mut(f).enumerate() {
                                        o.fill(at(y, i));
                                    }
                                }
                                None => {
                                    for (o, &xx) in out.iter_mut().zip(rx) {
                                        *o = at(y, xx);
                                    }
                                }
                            }
                        }
                        (Axis::Linear(ry), Axis::Linear(rx)) => {
                            let (y0, y1, wy) = ry[oy];
                            for (o, &(x0, x1, wx)) in out.iter_mut().zip(rx) {
                                let a = at(y0, x0) + (at(y0, x1) - at(y0, x0)) * wx;
                                let b = at(y1, x0) + (at(y1, x1) - at(y1, x0)) * wx;
                                *o = a + (b - a) * wy;
                            }
                        }
                        _ => unreachable!("both axes share the mode"),
                    }
                }
                match &self.fast {
                    // The plane is row `ch` of batch `img` in the epilogue's layout.
                    Some(f) => (ex.kern.finish)(&f.bind(mem), img, ch, 0, 1, px, plane, px),
                    None => self
                        .epi
                        .apply(ex.kern, mem, img, ch, 1, 0, px, plane.as_ptr(), px),
                }
            });
        });
    }
}
