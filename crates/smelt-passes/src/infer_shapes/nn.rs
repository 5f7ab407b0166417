//! Neural-network ops: matrix products, convolution and pooling output sizes, normalization,
//! dropout, attention.

use super::dims::{add, add_int, div_int, mul, sub};
use super::{axis, tensor_type, try_broadcast, typed, In, Outs};
use smelt_ir::op::{nn::DropoutMode, AutoPad, NnOp};
use smelt_ir::{bail, ensure, err, DType, Dim, Result};

/// Two known sizes that must agree (a contraction, channels); an error says which.
fn agree(a: &Dim, b: &Dim, what: &str) -> Result<()> {
    if let (Dim::Known(x), Dim::Known(y)) = (a, b) {
        ensure!(x == y, InvalidModel, "{what}: {x} and {y} differ");
    }
    Ok(())
}

/// Output types of an nn op; an error when known shapes do not fit the op.
pub(super) fn infer(op: &NnOp, x: &In) -> Result<Option<Outs>> {
    use NnOp::*;
    let dt = x.dtype(0);
    let same = || Some(vec![typed(dt, x.shape(0))]);
    Ok(match op {
        MatMul => Some(vec![typed(
            dt,
            match (x.shape(0), x.shape(1)) {
                (Some(a), Some(b)) => Some(matmul(a, b)?),
                _ => None,
            },
        )]),
        Gemm {
            trans_a, trans_b, ..
        } => {
            let s = match (x.shape(0), x.shape(1)) {
                (Some(a), Some(b)) => {
                    ensure!(
                        a.len() == 2 && b.len() == 2,
                        InvalidModel,
                        "A has rank {} and B rank {}; both must be 2",
                        a.len(),
                        b.len()
                    );
                    agree(
                        &a[usize::from(!*trans_a)],
                        &b[usize::from(*trans_b)],
                        "the inner dimensions of A and B",
                    )?;
                    Some(vec![
                        a[usize::from(*trans_a)].clone(),
                        b[usize::from(!*trans_b)].clone(),
                    ])
                }
                _ => None,
            };
            // C must broadcast to [M, N] one way (the fused epilogue reads it as such).
            if let (Some(out), Some(c)) = (&s, x.shape(2)) {
                ensure!(
                    c.len() <= 2,
                    InvalidModel,
                    "C has rank {}; it must broadcast to [M, N]",
                    c.len()
                );
                for (cd, od) in c.iter().rev().zip(out.iter().rev()) {
                    if let (Dim::Known(cv), Dim::Known(ov)) = (cd, od) {
                        ensure!(
                            *cv == 1 || cv == ov,
                            InvalidModel,
                            "C of shape {} does not broadcast to the output {}",
                            smelt_ir::dim::format_shape(&c),
                            smelt_ir::dim::format_shape(out)
                        );
                    }
                }
            }
            Some(vec![typed(dt, s)])
        }
        Conv { .. } => {
            let w = ConvAttrs::of(op).ok_or_else(|| err!(Internal, "Conv without attributes"))?;
            Some(vec![typed(dt, conv_shape(x.shape(0), x.shape(1), &w)?)])
        }
        ConvBlocked { .. } => {
            let plain = op.unblocked_conv();
            let w = plain
                .as_ref()
                .and_then(ConvAttrs::of)
                .ok_or_else(|| err!(Internal, "ConvBlocked without its plain form"))?;
            let plain = x.shape(0).map(|s| unblocked_shape(&s)).transpose()?;
            let out = conv_shape(plain, x.shape(1), &w)?;
            Some(vec![typed(dt, out.map(|o| blocked_shape(&o)).transpose()?)])
        }
        ConvTranspose {
            auto_pad,
            dilations,
            group,
            kernel_shape,
            output_padding,
            output_shape,
            pads,
            strides,
        } => {
            let s = (|| {
                let (xs, ws) = (x.shape(0)?, x.shape(1)?);
                if xs.len() < 3 || ws.len() != xs.len() {
                    return None;
                }
                let nd = xs.len() - 2;
                let kernel = kernel_dims(kernel_shape, &ws[2..]);
                // A kernel_shape of another rank is the executors' error to report.
                if kernel.len() != nd {
                    return None;
                }
                let mut out = vec![xs[0].clone(), mul(&ws[1], &Dim::Known(*group as u64))];
                let same = matches!(auto_pad, AutoPad::SameUpper | AutoPad::SameLower);
                for i in 0..nd {
                    let st = *strides.get(i).unwrap_or(&1);
                    out.push(if !output_shape.is_empty() {
                        let sp = &output_shape[output_shape.len().checked_sub(nd)?..];
                        Dim::Known(u64::try_from(sp[i]).ok()?)
                    } else if same && pads.is_empty() {
                        mul(&xs[2 + i], &Dim::Known(st as u64))
                    } else {
                        let d = *dilations.get(i).unwrap_or(&1);
                        let opad = *output_padding.get(i).unwrap_or(&0);
                        let p = pads
                            .get(i)
                            .unwrap_or(&0)
                            .saturating_add(*pads.get(nd + i).unwrap_or(&0));
                        // st * (in - 1) + opad + (k - 1) * d + 1 - pads
                        let eff = add_int(&mul(&add_int(&kernel[i], -1), &Dim::Known(d as u64)), 1);
                        let span = mul(&add_int(&xs[2 + i], -1), &Dim::Known(st as u64));
                        add_int(&add(&span, &eff), opad.saturating_sub(p))
                    });
                }
                Some(out)
            })();
            Some(vec![typed(dt, s)])
        }
        MaxPool {
            auto_pad,
            ceil_mode,
            dilations,
            kernel_shape,
            pads,
            strides,
            ..
        }
        | AveragePool {
            auto_pad,
            ceil_mode,
            dilations,
            kernel_shape,
            pads,
            strides,
            ..
        }
        | LpPool {
            auto_pad,
            ceil_mode,
            dilations,
            kernel_shape,
            pads,
            strides,
            ..
        } => {
            let s = match x.shape(0) {
                Some(xs) if xs.len() >= 3 => {
                    let kernel: Vec<Dim> =
                        kernel_shape.iter().map(|&k| Dim::Known(k as u64)).collect();
                    let w = Window {
                        auto_pad,
                        dilations,
                        kernel: &kernel,
                        pads,
                        strides,
                        ceil_mode: *ceil_mode,
                    };
                    w.output(&xs[2..])?.map(|o| {
                        let mut out = xs[..2].to_vec();
                        out.extend(o);
                        out
                    })
                }
                _ => None,
            };
            Some(vec![typed(dt, s.clone()), typed(Some(DType::I64), s)])
        }
        GlobalAveragePool | GlobalMaxPool | GlobalLpPool { .. } => {
            let s = x.shape(0).filter(|s| s.len() >= 2).map(|s| {
                let mut o = s[..2].to_vec();
                o.resize(s.len(), Dim::Known(1));
                o
            });
            Some(vec![typed(dt, s)])
        }
        BatchNormalization { training_mode, .. } => {
            let mut outs = vec![typed(dt, x.shape(0))];
            if *training_mode {
                outs.push(x.ty(3));
                outs.push(x.ty(4));
            }
            Some(outs)
        }
        InstanceNormalization { .. }
        | GroupNormalization { .. }
        | RmsNormalization { .. }
        | MeanVarianceNormalization { .. }
        | LpNormalization { .. }
        | Lrn { .. }
        | RotaryEmbedding { .. } => same(),
        LayerNormalization {
            axis: a,
            stash_type,
            ..
        } => {
            let s = x.shape(0);
            let stats = s.as_ref().and_then(|s| {
                let a = axis(*a, s.len())?;
                let mut o = s[..a].to_vec();
                o.resize(s.len(), Dim::Known(1));
                Some(o)
            });
            let st = if stash_type.is_float() {
                *stash_type
            } else {
                DType::F32
            };
            Some(vec![
                typed(dt, s),
                typed(Some(st), stats.clone()),
                typed(Some(st), stats),
            ])
        }
        Dropout { mode, .. } => {
            let typed_mask = matches!(
                mode,
                DropoutMode::Fixed {
                    typed_mask: true,
                    ..
                }
            );
            let mask = if typed_mask { dt } else { Some(DType::Bool) };
            Some(vec![typed(dt, x.shape(0)), typed(mask, x.shape(0))])
        }
        Attention {
            q_num_heads,
            kv_num_heads,
            ..
        } => Some(attention(x, *q_num_heads, *kv_num_heads)),
        Einsum { equation } => Some(vec![typed(dt, super::einsum::shape(equation, x)?)]),
        DeformConv {
            dilations,
            group,
            kernel_shape,
            pads,
            strides,
            ..
        } => {
            let w = ConvAttrs {
                auto_pad: &AutoPad::NotSet,
                dilations,
                group: *group,
                kernel_shape,
                pads,
                strides,
            };
            Some(vec![typed(dt, conv_shape(x.shape(0), x.shape(1), &w)?)])
        }
        MaxUnpool {
            kernel_shape,
            pads,
            strides,
        } => Some(vec![typed(dt, max_unpool(x, kernel_shape, pads, strides))]),
        _ => None,
    })
}

/// The kernel's spatial dims: the attribute when given, else the weights' trailing dims.
fn kernel_dims(attr: &[i64], from_weights: &[Dim]) -> Vec<Dim> {
    if attr.is_empty() {
        from_weights.to_vec()
    } else {
        attr.iter().map(|&k| Dim::Known(k.max(0) as u64)).collect()
    }
}

/// A convolution's attributes, as Conv, ConvInteger and QLinearConv have them.
pub(super) struct ConvAttrs<'a> {
    pub auto_pad: &'a AutoPad,
    pub dilations: &'a [i64],
    pub group: i64,
    pub kernel_shape: &'a [i64],
    pub pads: &'a [i64],
    pub strides: &'a [i64],
}

impl<'a> ConvAttrs<'a> {
    /// The attributes of a Conv (None for any other op).
    fn of(op: &'a NnOp) -> Option<ConvAttrs<'a>> {
        match op {
            NnOp::Conv {
                auto_pad,
                dilations,
                group,
                kernel_shape,
                pads,
                strides,
            } => Some(ConvAttrs {
                auto_pad,
                dilations,
                group: *group,
                kernel_shape,
                pads,
                strides,
            }),
            _ => None,
        }
    }
}

/// The plain shape `[N, C, H, W]` of a blocked one `[N, C/16, H, W, 16]`.
fn unblocked_shape(s: &[Dim]) -> Result<Vec<Dim>> {
    use smelt_ir::op::nn::CHANNEL_BLOCK;
    ensure!(
        s.len() == 5 && s[4] == Dim::Known(CHANNEL_BLOCK as u64),
        InvalidModel,
        "a blocked input has shape [N, C/16, H, W, 16], not {}",
        smelt_ir::dim::format_shape(s)
    );
    Ok(vec![
        s[0].clone(),
        mul(&s[1], &Dim::Known(CHANNEL_BLOCK as u64)),
        s[2].clone(),
        s[3].clone(),
    ])
}

/// The blocked shape `[N, C/16, H, W, 16]` of a plain one `[N, C, H, W]` (C a known
/// multiple of 16).
fn blocked_shape(s: &[Dim]) -> Result<Vec<Dim>> {
    use smelt_ir::op::nn::CHANNEL_BLOCK;
    let b = CHANNEL_BLOCK as u64;
    match s {
        [n, Dim::Known(c), h, w] if c % b == 0 => Ok(vec![
            n.clone(),
            Dim::Known(c / b),
            h.clone(),
            w.clone(),
            Dim::Known(b),
        ]),
        _ => bail!(
            InvalidModel,
            "a blocked convolution's output {} has no whole blocks of 16 channels",
            smelt_ir::dim::format_shape(s)
        ),
    }
}

/// A convolution's output shape from its input's and weights' shapes.
pub(super) fn conv_shape(
    xs: Option<Vec<Dim>>,
    ws: Option<Vec<Dim>>,
    a: &ConvAttrs,
) -> Result<Option<Vec<Dim>>> {
    let (Some(xs), Some(ws)) = (xs, ws) else {
        return Ok(None);
    };
    ensure!(
        xs.len() >= 3 && ws.len() == xs.len(),
        InvalidModel,
        "input of rank {} and weights of rank {}",
        xs.len(),
        ws.len()
    );
    if a.group >= 1 {
        agree(
            &xs[1],
            &super::dims::mul(&ws[1], &Dim::Known(a.group as u64)),
            "input channels and weight channels times group",
        )?;
    }
    let kernel = kernel_dims(a.kernel_shape, &ws[2..]);
    let w = Window {
        auto_pad: a.auto_pad,
        dilations: a.dilations,
        kernel: &kernel,
        pads: a.pads,
        strides: a.strides,
        ceil_mode: false,
    };
    let mut out = vec![xs[0].clone(), ws[0].clone()];
    Ok(w.output(&xs[2..])?.map(|o| {
        out.extend(o);
        out
    }))
}

/// The sliding-window geometry of convolution and pooling.
struct Window<'a> {
    auto_pad: &'a AutoPad,
    dilations: &'a [i64],
    kernel: &'a [Dim],
    pads: &'a [i64],
    strides: &'a [i64],
    ceil_mode: bool,
}

/// The largest kernel size, stride, dilation or pad shape inference takes.
const MAX_WINDOW: i64 = 1 << 31;

impl Window<'_> {
    /// Output spatial sizes for input spatial sizes; an error when the window does not fit.
    fn output(&self, ins: &[Dim]) -> Result<Option<Vec<Dim>>> {
        let nd = ins.len();
        if self.kernel.len() != nd {
            return Ok(None);
        }
        (0..nd)
            .map(|i| self.axis_out(i, nd, &ins[i]))
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    fn axis_out(&self, i: usize, nd: usize, input: &Dim) -> Result<Dim> {
        let s = *self.strides.get(i).unwrap_or(&1);
        let d = *self.dilations.get(i).unwrap_or(&1);
        ensure!(
            s > 0 && d > 0,
            InvalidModel,
            "stride {s} and dilation {d} of spatial axis {i} must be positive"
        );
        // No real window reaches 2^31, and below that the arithmetic stays in i64.
        let k = match &self.kernel[i] {
            Dim::Known(k) => Some(*k),
            _ => None,
        };
        let pads = self.pads.iter().copied();
        ensure!(
            k.unwrap_or(0) <= MAX_WINDOW as u64
                && s <= MAX_WINDOW
                && d <= MAX_WINDOW
                && pads.clone().all(|p| (0..=MAX_WINDOW).contains(&p)),
            InvalidModel,
            "the window of spatial axis {i} is out of range (kernel {k:?}, stride {s}, dilation {d}, pads {:?})",
            self.pads
        );
        // The dilated kernel: (k - 1) * d + 1.
        let eff = add_int(
            &mul(&add_int(&self.kernel[i], -1), &Dim::Known(d as u64)),
            1,
        );
        let (pb, pe) = match self.auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => {
                // Padding makes any window fit; one wider than twice the input reads
                // padding alone at every position (and costs its width at each).
                if let (Dim::Known(n), Dim::Known(k)) = (input, &eff) {
                    ensure!(
                        *k <= 2 * n + 1,
                        InvalidModel,
                        "the window of {k} is wider than twice spatial axis {i} of {n}"
                    );
                }
                return Ok(div_int(input, s, true));
            }
            AutoPad::Valid => (0, 0),
            AutoPad::NotSet => (
                *self.pads.get(i).unwrap_or(&0),
                *self.pads.get(nd + i).unwrap_or(&0),
            ),
        };
        if let (Dim::Known(n), Dim::Known(k)) = (input, &eff) {
            // In i128: an input dim near 2^63 plus pads must not overflow, nor the
            // rounding up of ceil mode.
            let span = *n as i128 + pb as i128 + pe as i128 - *k as i128;
            if span < 0 {
                bail!(
                    InvalidModel,
                    "the window of {k} is larger than spatial axis {i} of {n} padded by {pb} and {pe}"
                );
            }
            let s = s as i128;
            let mut o = if self.ceil_mode {
                (span + s - 1) / s + 1
            } else {
                span / s + 1
            };
            if self.ceil_mode && (o - 1) * s >= *n as i128 + pb as i128 {
                o -= 1;
            }
            let o = u64::try_from(o.max(0)).map_err(|_| {
                err!(
                    InvalidModel,
                    "spatial axis {i} of {n} padded by {pb} and {pe} gives an output too large"
                )
            })?;
            return Ok(Dim::Known(o));
        }
        if self.ceil_mode {
            return Ok(Dim::Unknown);
        }
        let span = add_int(input, pb + pe);
        let span = sub(&span, &eff);
        Ok(add_int(&div_int(&span, s, false), 1))
    }
}

/// Numpy matmul: 1-D operands promoted, batch dims broadcast; an error when the
/// contracted dims differ.
pub(super) fn matmul(a: Vec<Dim>, b: Vec<Dim>) -> Result<Vec<Dim>> {
    ensure!(
        !a.is_empty() && !b.is_empty(),
        InvalidModel,
        "MatMul of a scalar"
    );
    let (a1, b1) = (a.len() == 1, b.len() == 1);
    let a = if a1 {
        vec![Dim::Known(1), a[0].clone()]
    } else {
        a
    };
    let b = if b1 {
        vec![b[0].clone(), Dim::Known(1)]
    } else {
        b
    };
    agree(
        &a[a.len() - 1],
        &b[b.len() - 2],
        "the contracted dimensions of the two operands",
    )?;
    let mut out = try_broadcast(&[a[..a.len() - 2].to_vec(), b[..b.len() - 2].to_vec()])?;
    if !a1 {
        out.push(a[a.len() - 2].clone());
    }
    if !b1 {
        out.push(b[b.len() - 1].clone());
    }
    Ok(out)
}

/// Attention (opset 23): Y has Q's layout with V's head size; present key/value append the
/// new keys/values to the past ones (4-D caches).
fn attention(x: &In, q_heads: Option<i64>, kv_heads: Option<i64>) -> Outs {
    let dt = x.dtype(0);
    let (q, v) = (x.shape(0), x.shape(2));
    let y = match (&q, &v) {
        (Some(q), Some(v)) if q.len() == 4 && v.len() == 4 => {
            Some(vec![q[0].clone(), q[1].clone(), q[2].clone(), v[3].clone()])
        }
        (Some(q), Some(v)) if q.len() == 3 && v.len() == 3 => {
            let hidden = match (q_heads, kv_heads, &v[2]) {
                (Some(qh), Some(kh), Dim::Known(vh))
                    if kh > 0 && qh > 0 && *vh % kh as u64 == 0 =>
                {
                    (vh / kh as u64)
                        .checked_mul(qh as u64)
                        .map_or(Dim::Unknown, Dim::Known)
                }
                (Some(qh), Some(kh), vh) if qh == kh => vh.clone(),
                _ => Dim::Unknown,
            };
            Some(vec![q[0].clone(), q[1].clone(), hidden])
        }
        _ => None,
    };
    let mut outs = vec![typed(dt, y)];
    let k = x.shape(1);
    for (past, new) in [(4, &k), (5, &v)] {
        let present = (|| {
            let p = x.shape(past)?;
            let n = new.as_ref()?;
            if p.len() != 4 {
                return None;
            }
            let t = if n.len() == 4 { &n[2] } else { n.get(1)? };
            let mut o = p.clone();
            o[2] = add(&p[2], t);
            Some(tensor_type(x.dtype(past)?, o))
        })();
        outs.push(present);
    }
    // The scores: [batch, query heads, query length, key length with the past].
    let scores = (|| {
        let (q, k) = (q.as_ref()?, k.as_ref()?);
        let (heads, qs, ks) = match (q.len(), k.len()) {
            (4, 4) => (q[1].clone(), q[2].clone(), k[2].clone()),
            (3, 3) => (
                Dim::Known(u64::try_from(q_heads?).ok()?),
                q[1].clone(),
                k[1].clone(),
            ),
            _ => return None,
        };
        let total = match x.shape(4) {
            Some(p) if p.len() == 4 => add(&p[2], &ks),
            Some(_) => return None,
            None => ks,
        };
        Some(vec![q[0].clone(), heads, qs, total])
    })();
    outs.push(typed(dt, scores));
    outs
}

/// MaxUnpool's output: the output_shape input, else `(in - 1) * stride - pads + kernel` per
/// spatial axis.
fn max_unpool(x: &In, kernel: &[i64], pads: &[i64], strides: &[i64]) -> Option<Vec<Dim>> {
    if x.has(2) {
        return x
            .ints(2)?
            .iter()
            .map(|&d| u64::try_from(d).ok().map(Dim::Known))
            .collect();
    }
    let s = x.shape(0)?;
    let nd = s.len().checked_sub(2)?;
    if kernel.len() != nd {
        return None;
    }
    let mut o = s[..2].to_vec();
    for i in 0..nd {
        let Dim::Known(n) = s[2 + i] else {
            o.push(Dim::Unknown);
            continue;
        };
        let st = *strides.get(i).unwrap_or(&1);
        let pad = pads
            .get(i)
            .unwrap_or(&0)
            .saturating_add(*pads.get(nd + i).unwrap_or(&0));
        let v = (n as i64 - 1)
            .checked_mul(st)?
            .checked_sub(pad)?
            .checked_add(kernel[i])?;
        o.push(Dim::Known(u64::try_from(v).ok()?));
    }
    Some(o)
}
