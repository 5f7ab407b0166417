//! Sampling and signal ops: GridSample, AffineGrid, RoiAlign, Det, DFT, STFT, the window
//! functions and the mel filter bank; and the feature ops of ai.onnx.ml and text
//! (LabelEncoder, Binarizer, ArrayFeatureExtractor, TreeEnsemble, TfIdfVectorizer). Sizes
//! given as inputs must be constants.

use super::dims::{add_int, div_int};
use super::{axis, tensor_type, typed, In, Outs};
use smelt_ir::op::misc::MiscOp;
use smelt_ir::{ensure, Dim, Result};

/// Output types of a sampling or signal op; None for other misc ops.
pub(super) fn infer(op: &MiscOp, x: &In) -> Result<Option<Outs>> {
    use MiscOp::*;
    let dt = x.dtype(0);
    let one = |s: Option<Vec<Dim>>| Ok(Some(vec![typed(dt, s)]));
    match op {
        // [N, C, in...] sampled at grid [N, out..., r]: [N, C, out...].
        GridSample { .. } => one(match (x.shape(0), x.shape(1)) {
            (Some(xs), Some(g)) if xs.len() >= 3 && g.len() == xs.len() => {
                let mut o = xs[..2].to_vec();
                o.extend_from_slice(&g[1..g.len() - 1]);
                Some(o)
            }
            _ => None,
        }),
        // theta [N, r, r+1] and size [N, C, spatial...]: [N, spatial..., r].
        AffineGrid { .. } => one(x.ints(1).and_then(|size| {
            let spatial: Vec<Dim> = size
                .get(2..)?
                .iter()
                .map(|&d| u64::try_from(d).ok().map(Dim::Known))
                .collect::<Option<_>>()?;
            let mut o = vec![Dim::Known(u64::try_from(*size.first()?).ok()?)];
            let r = spatial.len() as u64;
            o.extend(spatial);
            o.push(Dim::Known(r));
            Some(o)
        })),
        RoiAlign {
            output_height,
            output_width,
            ..
        } => one(match (x.shape(0), x.shape(1)) {
            (Some(xs), Some(rois)) if xs.len() == 4 && rois.len() == 2 => Some(vec![
                rois[0].clone(),
                xs[1].clone(),
                Dim::Known(u64::try_from(*output_height).unwrap_or(0)),
                Dim::Known(u64::try_from(*output_width).unwrap_or(0)),
            ]),
            _ => None,
        }),
        Det => one(x.shape(0).and_then(|s| {
            let r = s.len();
            (r >= 2).then(|| s[..r - 2].to_vec())
        })),
        Dft {
            onesided,
            inverse,
            axis: attr,
        } => one(dft(x, *onesided, *inverse, *attr)?),
        HannWindow { dtype, .. } | HammingWindow { dtype, .. } | BlackmanWindow { dtype, .. } => {
            let n = x.ints(0).and_then(|v| v.first().copied());
            let n = n.and_then(|n| u64::try_from(n).ok()).map(Dim::Known);
            Ok(Some(vec![Some(tensor_type(
                *dtype,
                vec![n.unwrap_or(Dim::Unknown)],
            ))]))
        }
        // [floor(dft_length / 2) + 1, num_mel_bins].
        MelWeightMatrix { dtype } => {
            let scalar = |i| x.ints(i).and_then(|v| v.first().copied());
            let bins = scalar(0).and_then(|n| u64::try_from(n).ok());
            let len = scalar(1).and_then(|n| u64::try_from(n).ok());
            Ok(Some(vec![Some(tensor_type(
                *dtype,
                vec![
                    len.map_or(Dim::Unknown, |n| Dim::Known(n / 2 + 1)),
                    bins.map_or(Dim::Unknown, Dim::Known),
                ],
            ))]))
        }
        Stft { onesided } => one(stft(x, *onesided)),
        // [C] or [N, C] counted into [out] or [N, out], out the largest n-gram index + 1.
        TfIdfVectorizer { ngram_indexes, .. } => {
            ensure!(
                ngram_indexes.iter().all(|&i| (0..1 << 24).contains(&i)),
                InvalidModel,
                "TfIdfVectorizer: ngram indexes must lie in [0, 2^24)"
            );
            let out = ngram_indexes.iter().max().map_or(0, |&m| m as u64 + 1);
            let shape = x.shape(0).and_then(|s| match s.len() {
                1 => Some(vec![Dim::Known(out)]),
                2 => Some(vec![s[0].clone(), Dim::Known(out)]),
                _ => None,
            });
            Ok(Some(vec![typed(Some(smelt_ir::DType::F32), shape)]))
        }
        // X [..., C] at indices Y: [..., |Y|] ([1, |Y|] for a 1-D X).
        ArrayFeatureExtractor => one(match (x.shape(0), x.shape(1)) {
            (Some(xs), Some(ys)) if !xs.is_empty() => {
                let count = ys.iter().try_fold(1u64, |a, d| match d {
                    Dim::Known(n) => a.checked_mul(*n),
                    _ => None,
                });
                count.map(|n| {
                    let mut o = if xs.len() == 1 {
                        vec![Dim::Known(1)]
                    } else {
                        xs[..xs.len() - 1].to_vec()
                    };
                    o.push(Dim::Known(n));
                    o
                })
            }
            _ => None,
        }),
        // X [N, F]: [N, n_targets].
        TreeEnsemble(spec) => one(x.shape(0).and_then(|s| {
            let targets = u64::try_from(spec.n_targets).ok()?;
            (s.len() == 2).then(|| vec![s[0].clone(), Dim::Known(targets)])
        })),
        LabelEncoder { values, .. } => Ok(Some(vec![typed(Some(values.dtype()), x.shape(0))])),
        Binarizer { .. } => one(x.shape(0)),
        _ => super::training::infer(op, x).unwrap_or(Ok(None)),
    }
}

/// STFT's output `[batch, frames, bins, 2]` from the signal `[batch, length, 1|2]`, the
/// constant frame step and frame length (or the window's length, or the signal's).
fn stft(x: &In, onesided: bool) -> Option<Vec<Dim>> {
    // Both constants asked for first: each is recorded as a shape operand when asked.
    let step = x.ints(1);
    let frame_length = x.has(3).then(|| x.ints(3));
    let s = x.shape(0)?;
    let known = |d: &Dim| match d {
        Dim::Known(n) => Some(*n),
        _ => None,
    };
    let (batch, len) = (s.first()?.clone(), known(s.get(1)?)?);
    let step = u64::try_from(*step?.first()?).ok().filter(|&n| n > 0)?;
    let frame = match frame_length {
        Some(v) => u64::try_from(*v?.first()?).ok()?,
        None if x.has(2) => known(x.shape(2)?.first()?)?,
        None => len,
    };
    if s.len() != 3 || frame == 0 || frame > len {
        return None;
    }
    let bins = if onesided { frame / 2 + 1 } else { frame };
    let frames = (len - frame) / step + 1;
    Some(vec![
        batch,
        Dim::Known(frames),
        Dim::Known(bins),
        Dim::Known(2),
    ])
}

/// DFT's output: the transformed axis has `dft_length` (or the input's) points, half plus
/// one when one-sided, and the last dim holds (real, imaginary).
fn dft(x: &In, onesided: bool, inverse: bool, attr: Option<i64>) -> Result<Option<Vec<Dim>>> {
    let Some(s) = x.shape(0) else {
        return Ok(None);
    };
    let r = s.len();
    ensure!(
        r >= 2,
        InvalidModel,
        "DFT needs a rank of at least 2, got {r}"
    );
    let a = match attr {
        Some(a) => a,
        None if x.has(2) => match x.ints(2).and_then(|v| v.first().copied()) {
            Some(a) => a,
            None => return Ok(None),
        },
        None => -2,
    };
    // The axis counts among the signal dims (the last holds the complex parts).
    let Some(a) = axis(a, r).filter(|&a| a < r - 1) else {
        return Ok(None);
    };
    let n = if x.has(1) {
        match x.ints(1).and_then(|v| v.first().copied()) {
            Some(n) if n > 0 => Dim::Known(n as u64),
            Some(n) => smelt_ir::bail!(InvalidModel, "dft_length {n} must be positive"),
            None => return Ok(None),
        }
    } else {
        s[a].clone()
    };
    let mut o = s;
    if onesided && inverse {
        // A one-sided spectrum back to a real signal: `dft_length` points, by default
        // 2 (n - 1), one channel.
        o[a] = if x.has(1) {
            n
        } else {
            match &o[a] {
                Dim::Known(m) => match m.checked_sub(1).and_then(|m| m.checked_mul(2)) {
                    Some(len) if len > 0 => Dim::Known(len),
                    _ => return Ok(None),
                },
                _ => return Ok(None),
            }
        };
        o[r - 1] = Dim::Known(1);
        return Ok(Some(o));
    }
    o[a] = if onesided {
        add_int(&div_int(&n, 2, false), 1)
    } else {
        n
    };
    o[r - 1] = Dim::Known(2);
    Ok(Some(o))
}
