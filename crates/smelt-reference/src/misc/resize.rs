//! Resize (and the deprecated Upsample): separable per-axis interpolation plans with an f32
//! path, and a one-pass f32 nearest path for the trailing two axes (NCHW upsampling).

use super::super::{one, Inputs};
use super::{from_f64_rounded, out_numel};
use smelt_ir::op::misc::{AspectPolicy, CoordMode, InterpMode, NearestMode};
use smelt_ir::op::MiscOp;
use smelt_ir::{bail, ensure, map_data, Data, Result, Tensor, Value};

/// Per output position of one axis: the input indices and their weights (None: extrapolate).
struct AxisPlan {
    /// Taps per output position.
    n: usize,
    /// `out * n` clamped input indices.
    idx: Vec<usize>,
    /// `out * n` weights.
    w: Vec<f64>,
    /// Output positions that take the extrapolation value.
    extrap: Vec<bool>,
}

struct AxisParams {
    mode: InterpMode,
    coord: CoordMode,
    nearest: NearestMode,
    a: f64,
    exclude_outside: bool,
    antialias: bool,
    /// Compute nearest-mode coordinates in f32 (as onnxruntime does) rather than f64.
    f32_coords: bool,
}

fn cubic_coeffs(r: f64, a: f64) -> Vec<f64> {
    vec![
        ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
        ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
        ((a + 2.0) * (1.0 - r) - (a + 3.0)) * (1.0 - r) * (1.0 - r) + 1.0,
        ((a * ((1.0 - r) + 1.0) - 5.0 * a) * ((1.0 - r) + 1.0) + 8.0 * a) * ((1.0 - r) + 1.0)
            - 4.0 * a,
    ]
}

fn cubic_coeffs_antialias(r: f64, scale: f64, a: f64) -> Vec<f64> {
    let scale = scale.min(1.0);
    let f = |x: f64| {
        let x = x.abs();
        let (x2, x3) = (x * x, x * x * x);
        if x <= 1.0 {
            (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
        } else if x < 2.0 {
            a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
        } else {
            0.0
        }
    };
    let start = (-2.0 / scale).floor() as i64 + 1;
    let end = 2 - start;
    let c: Vec<f64> = (start..end).map(|i| f(scale * (i as f64 - r))).collect();
    let s: f64 = c.iter().sum();
    c.into_iter().map(|v| v / s).collect()
}

fn linear_coeffs_antialias(r: f64, scale: f64) -> Vec<f64> {
    let scale = scale.min(1.0);
    let start = (-1.0 / scale).floor() as i64 + 1;
    let footprint = 2 - 2 * start;
    let c: Vec<f64> = (start..start + footprint)
        .map(|i| (1.0 - ((i as f64 - r) * scale).abs()).clamp(0.0, 1.0))
        .collect();
    let s: f64 = c.iter().sum();
    c.into_iter().map(|v| v / s).collect()
}

/// Maps output coordinate `y` to an input coordinate, computing in `$t`.
macro_rules! coord_fn {
    ($name:ident, $t:ty) => {
        fn $name(
            c: CoordMode,
            y: usize,
            in_w: usize,
            out_w: usize,
            scale: f64,
            roi: (f64, f64),
        ) -> f64 {
            let (scale, inw, yf) = (scale as $t, in_w as $t, y as $t);
            let outf = scale * inw;
            let (r0, r1) = (roi.0 as $t, roi.1 as $t);
            let x = match c {
                CoordMode::AlignCorners => {
                    if outf == 1.0 {
                        0.0
                    } else {
                        yf * (inw - 1.0) / (outf - 1.0)
                    }
                }
                CoordMode::Asymmetric => yf / scale,
                CoordMode::TfCropAndResize => {
                    let v = if outf == 1.0 {
                        (r1 - r0) * (inw - 1.0) / 2.0
                    } else {
                        yf * (r1 - r0) * (inw - 1.0) / (outf - 1.0)
                    };
                    v + r0 * (inw - 1.0)
                }
                CoordMode::PytorchHalfPixel => {
                    if outf == 1.0 {
                        -0.5
                    } else {
                        (yf + 0.5) / scale - 0.5
                    }
                }
                CoordMode::HalfPixel => (yf + 0.5) / scale - 0.5,
                CoordMode::HalfPixelSymmetric => {
                    let adjustment = out_w as $t / outf;
                    let center = inw / 2.0;
                    center * (1.0 - adjustment) + (yf + 0.5) / scale - 0.5
                }
                CoordMode::TfHalfPixelForNn => (yf + 0.5) / scale,
            };
            x as f64
        }
    };
}
coord_fn!(coord_f64, f64);
coord_fn!(coord_f32, f32);

fn plan_axis(
    p: &AxisParams,
    in_w: usize,
    out_w: usize,
    scale: f64,
    roi: (f64, f64),
) -> Result<AxisPlan> {
    let inw = in_w as f64;
    let mut plan = AxisPlan {
        n: 0,
        idx: Vec::new(),
        w: Vec::new(),
        extrap: vec![false; out_w],
    };
    let last = in_w as i64 - 1;
    for y in 0..out_w {
        let x = if p.mode == InterpMode::Nearest && p.f32_coords {
            coord_f32(p.coord, y, in_w, out_w, scale, roi)
        } else {
            coord_f64(p.coord, y, in_w, out_w, scale, roi)
        };
        if p.coord == CoordMode::TfCropAndResize && (x < 0.0 || x > inw - 1.0) {
            plan.extrap[y] = true;
        }
        let fl = x.floor();
        let is_int = x == fl;
        if p.mode == InterpMode::Nearest {
            let r = x - fl;
            let up = !is_int
                && match p.nearest {
                    NearestMode::RoundPreferFloor => r > 0.5,
                    NearestMode::RoundPreferCeil => r >= 0.5,
                    NearestMode::Floor => false,
                    NearestMode::Ceil => true,
                    NearestMode::Simple => scale < 1.0,
                };
            let i = if up { fl as i64 + 1 } else { fl as i64 };
            plan.n = 1;
            plan.idx.push(i.clamp(0, last.max(0)) as usize);
            plan.w.push(1.0);
            continue;
        }
        let ratio = if is_int { 1.0 } else { x - fl };
        ensure!(
            !p.antialias || scale >= 1.0 || 4.0 / scale <= (1 << 20) as f64,
            ResourceExhausted,
            "Resize: antialias filter for scale {scale} is too wide"
        );
        let mut c = match (p.mode, p.antialias) {
            (InterpMode::Linear, false) => vec![1.0 - ratio, ratio],
            (InterpMode::Linear, true) => linear_coeffs_antialias(ratio, scale),
            (_, false) => cubic_coeffs(ratio, p.a),
            (_, true) => cubic_coeffs_antialias(ratio, scale, p.a),
        };
        let n = c.len();
        ensure!(
            n <= 1 << 20,
            ResourceExhausted,
            "Resize: filter of {n} taps is too wide"
        );
        let pad = n.div_ceil(2) as f64;
        let xp = x + pad;
        let pp = xp.floor();
        let frac = xp - pp;
        let offset = if n % 2 == 0 {
            if frac == 0.0 {
                -((n / 2) as i64)
            } else {
                -((n / 2) as i64) + 1
            }
        } else {
            let base = -(((n - 1) / 2) as i64);
            if frac <= 0.5 {
                base
            } else {
                base + 1
            }
        };
        let start = pp as i64 + offset - pad as i64;
        if p.exclude_outside {
            for (j, cj) in c.iter_mut().enumerate() {
                let i = start + j as i64;
                if i < 0 || i > last {
                    *cj = 0.0;
                }
            }
            let s: f64 = c.iter().sum();
            let s = if s == 0.0 { 1.0 } else { s };
            c.iter_mut().for_each(|v| *v /= s);
        }
        plan.n = n;
        for (j, cj) in c.into_iter().enumerate() {
            plan.idx
                .push((start + j as i64).clamp(0, last.max(0)) as usize);
            plan.w.push(cj);
        }
    }
    Ok(plan)
}

/// Gathers along one axis of a `[outer, in_len, inner]` view.
/// Nearest resize of the last two axes of an f32 tensor in one pass (the NCHW fast path):
/// rows that repeat a source row are copied from the previous output row.
fn nearest_2d_f32(
    v: &[f32],
    shape: &[usize],
    out: &[usize],
    plans: &[(usize, AxisPlan)],
) -> Vec<f32> {
    let r = shape.len();
    let (h, w, oh, ow) = (shape[r - 2], shape[r - 1], out[r - 2], out[r - 1]);
    let ident = |n: usize| (0..n).collect::<Vec<usize>>();
    let iy = plans
        .iter()
        .find(|(a, _)| *a == r - 2)
        .map(|(_, p)| p.idx.clone())
        .unwrap_or_else(|| ident(h));
    let ix = plans
        .iter()
        .find(|(a, _)| *a == r - 1)
        .map(|(_, p)| p.idx.clone())
        .unwrap_or_else(|| ident(w));
    let planes: usize = smelt_ir::dims_product(&shape[..r - 2]);
    let mut res = vec![0f32; planes * oh * ow];
    for p in 0..planes {
        let src = &v[p * h * w..(p + 1) * h * w];
        let dst = &mut res[p * oh * ow..(p + 1) * oh * ow];
        for y in 0..oh {
            if y > 0 && iy[y] == iy[y - 1] {
                dst.copy_within((y - 1) * ow..y * ow, y * ow);
                continue;
            }
            let srow = &src[iy[y] * w..(iy[y] + 1) * w];
            for (d, &i) in dst[y * ow..(y + 1) * ow].iter_mut().zip(&ix) {
                *d = srow[i];
            }
        }
    }
    res
}

fn gather_axis<T: Clone>(
    v: &[T],
    outer: usize,
    in_len: usize,
    inner: usize,
    idx: &[usize],
) -> Vec<T> {
    let mut out = Vec::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        let base = o * in_len * inner;
        for &i in idx {
            let s = base + i * inner;
            out.extend_from_slice(&v[s..s + inner]);
        }
    }
    out
}

/// Weighted sum along one axis of a `[outer, in_len, inner]` view.
fn interp_axis<T>(
    v: &[T],
    outer: usize,
    in_len: usize,
    inner: usize,
    plan: &AxisPlan,
    fill: T,
) -> Vec<T>
where
    T: Copy + Default + std::ops::Mul<Output = T> + std::ops::Add<Output = T>,
    f64: IntoT<T>,
{
    let out_len = plan.extrap.len();
    let n = plan.n;
    let w: Vec<T> = plan.w.iter().map(|&x| x.into_t()).collect();
    let mut out = vec![T::default(); outer * out_len * inner];
    for o in 0..outer {
        let src = &v[o * in_len * inner..(o + 1) * in_len * inner];
        let dst = &mut out[o * out_len * inner..(o + 1) * out_len * inner];
        for y in 0..out_len {
            let d = &mut dst[y * inner..(y + 1) * inner];
            if plan.extrap[y] {
                d.iter_mut().for_each(|e| *e = fill);
                continue;
            }
            for j in 0..n {
                let c = w[y * n + j];
                let s = &src[plan.idx[y * n + j] * inner..(plan.idx[y * n + j] + 1) * inner];
                if inner == 1 {
                    d[0] = d[0] + c * s[0];
                } else {
                    for (a, &b) in d.iter_mut().zip(s) {
                        *a = *a + c * b;
                    }
                }
            }
        }
    }
    out
}

/// Conversion from f64 into the working element type.
pub trait IntoT<T> {
    /// Converts.
    fn into_t(self) -> T;
}
impl IntoT<f32> for f64 {
    fn into_t(self) -> f32 {
        self as f32
    }
}
impl IntoT<f64> for f64 {
    fn into_t(self) -> f64 {
        self
    }
}

fn norm_axes(axes: &Option<Vec<i64>>, r: usize) -> Result<Vec<usize>> {
    let Some(axes) = axes else {
        return Ok((0..r).collect());
    };
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let b = if a < 0 { a + r as i64 } else { a };
        ensure!(
            b >= 0 && (b as usize) < r,
            InvalidModel,
            "axis {a} is out of range for rank {r}"
        );
        ensure!(
            !out.contains(&(b as usize)),
            InvalidModel,
            "axis {a} is repeated"
        );
        out.push(b as usize);
    }
    Ok(out)
}

/// Resize and Upsample.
pub fn resize(op: &MiscOp, x: &Inputs) -> Result<Vec<Value>> {
    let MiscOp::Resize {
        mode,
        coord,
        nearest,
        cubic_coeff_a,
        exclude_outside,
        extrapolation_value,
        antialias,
        axes,
        keep_aspect_ratio_policy,
        scales: scales_attr,
        roi_input,
        scales_input,
        sizes_input,
    } = op
    else {
        bail!(Internal, "not a Resize")
    };
    let t = x.tensor(0)?;
    let shape = t.shape().to_vec();
    let r = shape.len();
    let axes = norm_axes(axes, r)?;
    let nonempty = |i: Option<usize>| -> Result<Option<&Tensor>> {
        match i {
            Some(i) => Ok(x.opt_tensor(i)?.filter(|t| !t.is_empty())),
            None => Ok(None),
        }
    };
    let roi = match nonempty(*roi_input)? {
        Some(t) => Some(t.to_f64()?),
        None => None,
    };
    let scales: Option<Vec<f64>> = match scales_attr {
        Some(s) => Some(s.iter().map(|&v| v as f64).collect()),
        None => match nonempty(*scales_input)? {
            Some(t) => Some(t.to_f64()?),
            None => None,
        },
    };
    let sizes = match nonempty(*sizes_input)? {
        Some(t) => Some(t.to_i64()?),
        None => None,
    };
    let mut scale = vec![1.0f64; r];
    let mut out = shape.clone();
    match (&scales, &sizes) {
        (Some(_), Some(_)) => bail!(InvalidModel, "Resize: give scales or sizes, not both"),
        (None, None) => bail!(InvalidModel, "Resize: scales or sizes is required"),
        (Some(s), None) => {
            ensure!(
                s.len() == axes.len(),
                InvalidModel,
                "Resize: {} scales for {} axes",
                s.len(),
                axes.len()
            );
            for (k, &a) in axes.iter().enumerate() {
                ensure!(
                    s[k] > 0.0 && s[k].is_finite(),
                    InvalidInput,
                    "Resize: scales must be positive, got {}",
                    s[k]
                );
                scale[a] = s[k];
                let o = (s[k] * shape[a] as f64).floor();
                ensure!(o < 1e12, ResourceExhausted, "Resize: output too large");
                out[a] = o as usize;
            }
        }
        (None, Some(z)) => {
            ensure!(
                z.len() == axes.len(),
                InvalidModel,
                "Resize: {} sizes for {} axes",
                z.len(),
                axes.len()
            );
            for (k, &a) in axes.iter().enumerate() {
                ensure!(
                    z[k] >= 0,
                    InvalidInput,
                    "Resize: sizes must not be negative, got {}",
                    z[k]
                );
                out[a] = z[k] as usize;
                scale[a] = z[k] as f64 / shape[a] as f64;
            }
            if *keep_aspect_ratio_policy != AspectPolicy::Stretch {
                let it = axes.iter().map(|&a| scale[a]);
                let s = if *keep_aspect_ratio_policy == AspectPolicy::NotLarger {
                    it.fold(f64::INFINITY, f64::min)
                } else {
                    it.fold(f64::NEG_INFINITY, f64::max)
                };
                for &a in &axes {
                    scale[a] = s;
                    out[a] = (s * shape[a] as f64 + 0.5).floor() as usize;
                }
            }
        }
    }
    let mut roi_full: Vec<(f64, f64)> = vec![(0.0, 1.0); r];
    if *coord == CoordMode::TfCropAndResize {
        let roi = roi
            .ok_or_else(|| smelt_ir::err!(InvalidModel, "Resize: tf_crop_and_resize needs roi"))?;
        ensure!(
            roi.len() == 2 * axes.len(),
            InvalidModel,
            "Resize: roi has {} values for {} axes",
            roi.len(),
            axes.len()
        );
        for (k, &a) in axes.iter().enumerate() {
            roi_full[a] = (roi[k], roi[axes.len() + k]);
        }
    }
    let n_out = if out.contains(&0) {
        0
    } else {
        out_numel(&out)?
    };
    if n_out == 0 || t.is_empty() {
        return one(Tensor::zeros(t.dtype(), out)?);
    }
    // The output, and each axis plan (an index, a weight and a flag per output position),
    // must fit the limits before anything is planned.
    smelt_ir::limits::check_shape(t.dtype(), &out, &|| "Resize output".into())?;
    for &a in &axes {
        smelt_ir::limits::check_alloc((out[a] as u64).saturating_mul(24), &|| {
            format!("Resize plan of axis {a}")
        })?;
    }
    let params = AxisParams {
        mode: *mode,
        coord: *coord,
        nearest: *nearest,
        a: *cubic_coeff_a as f64,
        exclude_outside: *exclude_outside,
        antialias: *antialias,
        f32_coords: true,
    };
    let mut plans = Vec::new();
    for &a in &axes {
        let identity = (scale[a] - 1.0).abs() <= 1e-9 * scale[a].abs().max(1.0)
            && out[a] == shape[a]
            && roi_full[a] == (0.0, 1.0);
        if identity {
            continue;
        }
        plans.push((
            a,
            plan_axis(&params, shape[a], out[a], scale[a], roi_full[a])?,
        ));
    }
    let mut cur_shape = shape.clone();
    let views = |cur: &[usize], a: usize| -> (usize, usize, usize) {
        (
            smelt_ir::dims_product(&cur[..a]),
            cur[a],
            smelt_ir::dims_product(&cur[a + 1..]),
        )
    };
    if *mode == InterpMode::Nearest && !(*coord == CoordMode::TfCropAndResize) {
        if let (Some(v), true) = (t.as_f32(), r >= 2 && plans.iter().all(|(a, _)| *a >= r - 2)) {
            return one(Tensor::from_f32(
                out.clone(),
                nearest_2d_f32(v, &shape, &out, &plans),
            )?);
        }
        let mut plans = plans.into_iter();
        let Some((a0, p0)) = plans.next() else {
            return one(t.clone());
        };
        let (o, l, i) = views(&cur_shape, a0);
        let mut data = map_data!(t.data(), v => gather_axis(v, o, l, i, &p0.idx).into());
        cur_shape[a0] = out[a0];
        for (a, plan) in plans {
            let (a, plan) = (&a, &plan);
            let (o, l, i) = views(&cur_shape, *a);
            data = map_data!(&data, v => gather_axis(v, o, l, i, &plan.idx).into());
            cur_shape[*a] = out[*a];
        }
        return one(Tensor::new(t.dtype(), out, data)?);
    }
    if let Some(v) = t.as_f32() {
        let mut data: Option<Vec<f32>> = None;
        for (a, plan) in &plans {
            let (o, l, i) = views(&cur_shape, *a);
            data = Some(interp_axis::<f32>(
                data.as_deref().unwrap_or(v),
                o,
                l,
                i,
                plan,
                *extrapolation_value,
            ));
            cur_shape[*a] = out[*a];
        }
        let data = data.unwrap_or_else(|| v.to_vec());
        return one(Tensor::new(t.dtype(), out, Data::F32(data.into()))?);
    }
    let mut data = t.to_f64()?;
    for (a, plan) in &plans {
        let (o, l, i) = views(&cur_shape, *a);
        data = interp_axis::<f64>(&data, o, l, i, plan, *extrapolation_value as f64);
        cur_shape[*a] = out[*a];
    }
    one(from_f64_rounded(t.dtype(), out, data)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_plan_doubles() {
        let p = AxisParams {
            mode: InterpMode::Nearest,
            coord: CoordMode::Asymmetric,
            nearest: NearestMode::Floor,
            a: -0.75,
            exclude_outside: false,
            antialias: false,
            f32_coords: false,
        };
        let plan = plan_axis(&p, 2, 4, 2.0, (0.0, 1.0)).unwrap();
        assert_eq!(plan.idx, vec![0, 0, 1, 1]);
    }
}
