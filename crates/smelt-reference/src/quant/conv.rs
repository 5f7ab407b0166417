//! ConvInteger and QLinearConv: N-D integer convolution (im2col, wrapping i32 accumulation).

use super::super::Inputs;
use super::{int_values, round_to, saturate_to};
use smelt_ir::op::quant::QConv;
use smelt_ir::op::AutoPad;
use smelt_ir::{bail, ensure, err, DType, Result, Tensor};

/// Resolved convolution geometry.
#[derive(Debug)]
struct Geometry {
    batch: usize,
    channels: usize,
    out_channels: usize,
    group: usize,
    input: Vec<usize>,
    kernel: Vec<usize>,
    output: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads_begin: Vec<usize>,
}

fn spatial_attr(v: &Option<Vec<i64>>, nd: usize, default: i64, what: &str) -> Result<Vec<usize>> {
    match v {
        None => Ok(vec![default as usize; nd]),
        Some(v) => {
            ensure!(
                v.len() == nd,
                InvalidModel,
                "{what} has {} values for {nd} spatial axes",
                v.len()
            );
            ensure!(
                v.iter().all(|&x| x >= 0),
                InvalidModel,
                "{what} must be non-negative, got {v:?}"
            );
            Ok(v.iter().map(|&x| x as usize).collect())
        }
    }
}

fn geometry(p: &QConv, xs: &[usize], ws: &[usize]) -> Result<Geometry> {
    ensure!(
        xs.len() >= 3,
        InvalidModel,
        "convolution input must have rank >= 3, got shape {xs:?}"
    );
    ensure!(
        ws.len() == xs.len(),
        InvalidModel,
        "weights of shape {ws:?} do not match input of shape {xs:?}"
    );
    let nd = xs.len() - 2;
    let group = p.group.max(1) as usize;
    let (channels, out_channels) = (xs[1], ws[0]);
    ensure!(
        channels % group == 0 && ws[1] * group == channels && out_channels % group == 0,
        InvalidModel,
        "channels do not match groups: input {xs:?}, weights {ws:?}, group {group}"
    );
    let kernel = ws[2..].to_vec();
    if let Some(k) = &p.kernel_shape {
        ensure!(
            k.len() == nd && k.iter().zip(&kernel).all(|(&a, &b)| a as usize == b),
            InvalidModel,
            "kernel_shape {k:?} does not match weights {ws:?}"
        );
    }
    let strides = spatial_attr(&p.strides, nd, 1, "strides")?;
    let dilations = spatial_attr(&p.dilations, nd, 1, "dilations")?;
    ensure!(
        strides.iter().chain(&dilations).all(|&v| v > 0),
        InvalidModel,
        "strides and dilations must be positive"
    );
    let input = xs[2..].to_vec();
    let eff: Vec<usize> = (0..nd)
        .map(|d| {
            (kernel[d].max(1) - 1)
                .checked_mul(dilations[d])
                .and_then(|e| e.checked_add(1))
        })
        .collect::<Option<_>>()
        .ok_or_else(|| err!(InvalidModel, "the dilated kernel {kernel:?} overflows"))?;
    let (pads_begin, pads_end) = match p.auto_pad {
        AutoPad::NotSet => {
            let pads = spatial_attr(&p.pads, 2 * nd, 0, "pads")?;
            (pads[..nd].to_vec(), pads[nd..].to_vec())
        }
        AutoPad::Valid => (vec![0; nd], vec![0; nd]),
        AutoPad::SameUpper | AutoPad::SameLower => {
            let (mut b, mut e) = (vec![0; nd], vec![0; nd]);
            for d in 0..nd {
                let out = input[d].div_ceil(strides[d]);
                let total = ((out.max(1) - 1) * strides[d])
                    .saturating_add(eff[d])
                    .saturating_sub(input[d]);
                let small = total / 2;
                if p.auto_pad == AutoPad::SameUpper {
                    (b[d], e[d]) = (small, total - small);
                } else {
                    (b[d], e[d]) = (total - small, small);
                }
            }
            (b, e)
        }
    };
    let mut output = Vec::with_capacity(nd);
    for d in 0..nd {
        let padded = input[d]
            .checked_add(pads_begin[d])
            .and_then(|v| v.checked_add(pads_end[d]))
            .ok_or_else(|| err!(InvalidModel, "the padded input {xs:?} overflows"))?;
        ensure!(
            kernel[d] > 0 && padded >= eff[d],
            InvalidModel,
            "kernel {kernel:?} (dilated) is larger than the padded input {xs:?}"
        );
        output.push((padded - eff[d]) / strides[d] + 1);
    }
    Ok(Geometry {
        batch: xs[0],
        channels,
        out_channels,
        group,
        input,
        kernel,
        output,
        strides,
        dilations,
        pads_begin,
    })
}

/// For each (kernel offset, output position), the flat spatial input index, or None in padding.
fn gather_table(g: &Geometry) -> Vec<Option<usize>> {
    let nd = g.input.len();
    let ksz: usize = smelt_ir::dims_product(&g.kernel);
    let osz: usize = smelt_ir::dims_product(&g.output);
    let istr = smelt_ir::strides(&g.input);
    let kstr = smelt_ir::strides(&g.kernel);
    let ostr = smelt_ir::strides(&g.output);
    let mut t = Vec::with_capacity(ksz * osz);
    for kk in 0..ksz {
        for p in 0..osz {
            let mut flat = 0usize;
            let mut ok = true;
            for d in 0..nd {
                let kc = (kk / kstr[d]) % g.kernel[d];
                let oc = (p / ostr[d]) % g.output[d];
                let c =
                    (oc * g.strides[d] + kc * g.dilations[d]) as isize - g.pads_begin[d] as isize;
                if c < 0 || c as usize >= g.input[d] {
                    ok = false;
                    break;
                }
                flat += c as usize * istr[d];
            }
            t.push(if ok { Some(flat) } else { None });
        }
    }
    t
}

/// Convolution of already zero-point-shifted values: output [N, M, out...] as i32.
fn conv_i32(x: &[i32], w: &[i32], g: &Geometry) -> Result<Vec<i32>> {
    let cg = g.channels / g.group;
    let mg = g.out_channels / g.group;
    // Sizes from the model's attributes: checked before any product or allocation.
    let what = || "ConvInteger's output".to_string();
    let mut out_dims = vec![g.batch, g.out_channels];
    out_dims.extend(&g.output);
    let out_len = smelt_ir::limits::check_shape(DType::I32, &out_dims, &what)?;
    let ksz = smelt_ir::numel(&g.kernel)?;
    let osz = smelt_ir::numel(&g.output)?;
    let isz = smelt_ir::numel(&g.input)?;
    let q = cg * ksz;
    let col_len = smelt_ir::limits::check_shape(DType::I32, &[q, osz], &|| {
        "ConvInteger's column buffer".into()
    })?;
    let table_bytes = (ksz as u64 * osz as u64).saturating_mul(16);
    smelt_ir::limits::check_alloc(table_bytes, &|| "ConvInteger's gather table".into())?;
    let table = gather_table(g);
    let mut col = vec![0i32; col_len];
    let mut out = vec![0i32; out_len];
    for n in 0..g.batch {
        for gi in 0..g.group {
            for ci in 0..cg {
                let xb = (n * g.channels + gi * cg + ci) * isz;
                let xs = &x[xb..xb + isz];
                for kk in 0..ksz {
                    let row = &mut col[(ci * ksz + kk) * osz..(ci * ksz + kk + 1) * osz];
                    let tab = &table[kk * osz..(kk + 1) * osz];
                    for (c, t) in row.iter_mut().zip(tab) {
                        *c = t.map_or(0, |i| xs[i]);
                    }
                }
            }
            for mo in 0..mg {
                let mi = gi * mg + mo;
                let wrow = &w[mi * q..(mi + 1) * q];
                let ob = (n * g.out_channels + mi) * osz;
                let orow = &mut out[ob..ob + osz];
                for (qq, &wv) in wrow.iter().enumerate() {
                    if wv == 0 {
                        continue;
                    }
                    for (o, &c) in orow.iter_mut().zip(&col[qq * osz..(qq + 1) * osz]) {
                        *o = o.wrapping_add(wv.wrapping_mul(c));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Subtracts a zero point from conv data: scalar, or one per channel of axis 0 (weights) or
/// axis 1 (input).
fn shift(x: &Tensor, zp: Option<&Tensor>, channel_axis: usize, what: &str) -> Result<Vec<i32>> {
    let mut v = int_values(x, what)?;
    let Some(z) = zp else { return Ok(v) };
    ensure!(
        z.dtype() == x.dtype(),
        InvalidModel,
        "{what} zero point type {} differs from {}",
        z.dtype(),
        x.dtype()
    );
    let zv = int_values(z, what)?;
    if zv.len() == 1 {
        v.iter_mut().for_each(|e| *e = e.wrapping_sub(zv[0]));
        return Ok(v);
    }
    let ch = x.shape()[channel_axis];
    ensure!(
        zv.len() == ch,
        InvalidModel,
        "{what} zero point has {} values for {ch} channels",
        zv.len()
    );
    let inner: usize = smelt_ir::dims_product(&x.shape()[channel_axis + 1..]);
    for (i, e) in v.iter_mut().enumerate() {
        *e = e.wrapping_sub(zv[(i / inner) % ch]);
    }
    Ok(v)
}

fn out_shape(g: &Geometry) -> Vec<usize> {
    let mut s = vec![g.batch, g.out_channels];
    s.extend(&g.output);
    s
}

/// ConvInteger: x, w, optional x_zero_point, w_zero_point; i32 output.
pub fn conv_integer(p: &QConv, x: &Inputs) -> Result<Tensor> {
    let xt = x.tensor(0)?;
    let wt = x.tensor(1)?;
    let g = geometry(p, xt.shape(), wt.shape())?;
    let xv = shift(xt, x.opt_tensor(2)?, 1, "x")?;
    let wv = shift(wt, x.opt_tensor(3)?, 0, "w")?;
    let out = conv_i32(&xv, &wv, &g)?;
    Tensor::from_i64(
        DType::I32,
        out_shape(&g),
        &out.iter().map(|&v| v as i64).collect::<Vec<_>>(),
    )
}

/// QLinearConv: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, optional i32 bias.
pub fn qlinear_conv(p: &QConv, x: &Inputs) -> Result<Tensor> {
    let xt = x.tensor(0)?;
    let wt = x.tensor(3)?;
    let g = geometry(p, xt.shape(), wt.shape())?;
    let xv = shift(xt, x.opt_tensor(2)?, 1, "x")?;
    let wv = shift(wt, x.opt_tensor(5)?, 0, "w")?;
    let mut acc = conv_i32(&xv, &wv, &g)?;
    let osz: usize = smelt_ir::dims_product(&g.output);
    let m = g.out_channels;
    if let Some(b) = x.opt_tensor(8)? {
        let bv = int_values(b, "bias")?;
        ensure!(
            bv.len() == m,
            InvalidModel,
            "bias has {} values for {m} output channels",
            bv.len()
        );
        for (i, a) in acc.iter_mut().enumerate() {
            *a = a.wrapping_add(bv[(i / osz) % m]);
        }
    }
    let scalar = |i: usize, what: &str| -> Result<f64> {
        let t = x.tensor(i)?;
        let v = t.to_f64()?;
        ensure!(
            v.len() == 1,
            InvalidModel,
            "{what} must be a scalar, got shape {:?}",
            t.shape()
        );
        Ok(v[0])
    };
    let xs = scalar(1, "x_scale")?;
    let ys = scalar(6, "y_scale")?;
    let ws = x.tensor(4)?.to_f64()?;
    ensure!(
        ws.len() == 1 || ws.len() == m,
        InvalidModel,
        "w_scale has {} values for {m} output channels",
        ws.len()
    );
    let mult: Vec<f64> = (0..m)
        .map(|c| {
            round_to(
                DType::F32,
                round_to(DType::F32, xs * ws[if ws.len() == 1 { 0 } else { c }]) / ys,
            )
        })
        .collect();
    let (zy, out) = match x.opt_tensor(7)? {
        Some(z) => {
            let v = z.to_f64()?;
            ensure!(
                v.len() == 1,
                InvalidModel,
                "y_zero_point must be a scalar, got shape {:?}",
                z.shape()
            );
            (v[0], z.dtype())
        }
        None => (0.0, xt.dtype()),
    };
    if !matches!(out, DType::U8 | DType::I8) {
        bail!(
            Unsupported,
            "QLinearConv output must be u8 or i8, got {out}"
        );
    }
    let v: Vec<f64> = acc
        .iter()
        .enumerate()
        .map(|(i, &a)| a as f64 * mult[(i / osz) % m] + zy)
        .collect();
    saturate_to(out, out_shape(&g), &v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_with_padding() {
        let p = QConv {
            auto_pad: AutoPad::NotSet,
            kernel_shape: None,
            pads: Some(vec![1, 1, 1, 1]),
            strides: None,
            dilations: None,
            group: 1,
        };
        let g = geometry(&p, &[1, 1, 2, 2], &[1, 1, 2, 2]).unwrap();
        assert_eq!(g.output, vec![3, 3]);
        let out = conv_i32(&[1, 2, 3, 4], &[1, 1, 1, 1], &g).unwrap();
        assert_eq!(out, vec![1, 3, 2, 4, 10, 6, 3, 7, 4]);
    }

    #[test]
    fn same_upper_strided() {
        let p = QConv {
            auto_pad: AutoPad::SameUpper,
            kernel_shape: None,
            pads: None,
            strides: Some(vec![2]),
            dilations: None,
            group: 1,
        };
        let g = geometry(&p, &[1, 1, 5], &[1, 1, 3]).unwrap();
        assert_eq!(g.output, vec![3]);
        assert_eq!(g.pads_begin, vec![1]);
    }
}
