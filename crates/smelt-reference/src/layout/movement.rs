//! Data movement without index tensors: Transpose, Concat, Split, Slice, Expand, Tile, Pad,
//! Trilu, DepthToSpace, SpaceToDepth, ReverseSequence, CenterCropPad, Col2Im.

use super::super::broadcast::{broadcast_shapes, index_map};
use super::super::{one, Ctx, Inputs};
use super::{
    check_size, for_each_index, istrides, norm_axes, norm_axis, strided, take_fill, to_dim,
    transpose_indices, zero_of, FILL,
};
use smelt_ir::op::layout::{BlockMode, PadMode};
use smelt_ir::{bail, ensure, err, numel, Data, Result, Tensor, Value};

pub(super) fn transpose(x: &Inputs, perm: Option<&[i64]>) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let r = t.rank();
    let perm: Vec<usize> = match perm {
        None => (0..r).rev().collect(),
        Some(p) => {
            ensure!(
                p.len() == r,
                InvalidModel,
                "perm {p:?} does not match rank {r}"
            );
            norm_axes(p, r).map_err(|e| e.context(format!("perm {p:?}")))?
        }
    };
    let (shape, idx) = transpose_indices(t.shape(), &perm);
    one(t.take(shape, &idx)?)
}

pub(super) fn concat(x: &Inputs, axis: i64) -> Result<Vec<Value>> {
    let ts: Vec<&Tensor> = x.present().map(|v| v.tensor()).collect::<Result<_>>()?;
    let first = *ts
        .first()
        .ok_or_else(|| err!(InvalidModel, "Concat needs at least one input"))?;
    let r = first.rank();
    ensure!(r > 0, InvalidModel, "Concat does not accept scalars");
    let a = norm_axis(axis, r)?;
    let mut total = 0usize;
    for t in &ts {
        ensure!(
            t.dtype() == first.dtype(),
            InvalidModel,
            "Concat inputs have different types ({} and {})",
            first.dtype(),
            t.dtype()
        );
        ensure!(
            t.rank() == r,
            InvalidModel,
            "Concat inputs have different ranks ({:?} and {:?})",
            first.shape(),
            t.shape()
        );
        for d in 0..r {
            ensure!(
                d == a || t.shape()[d] == first.shape()[d],
                InvalidModel,
                "Concat inputs {:?} and {:?} differ off the axis",
                first.shape(),
                t.shape()
            );
        }
        total += t.shape()[a];
    }
    let outer = numel(&first.shape()[..a])?;
    let mut shape = first.shape().to_vec();
    shape[a] = total;
    let data = Data::concat(&ts.iter().map(|t| t.data()).collect::<Vec<_>>())?;
    let n = numel(&shape)?;
    let mut idx = Vec::with_capacity(n);
    // An empty output takes nothing: no walk over a huge outer extent of empty chunks.
    for o in 0..if n == 0 { 0 } else { outer } {
        let mut base = 0;
        for t in &ts {
            let chunk = numel(&t.shape()[a..])?;
            idx.extend(base + o * chunk..base + (o + 1) * chunk);
            base += t.len();
        }
    }
    one(Tensor::new(first.dtype(), shape, data.take(&idx))?)
}

/// The part of `t` from `start` to `start + len` along axis `a`.
pub(super) fn narrow(t: &Tensor, a: usize, start: usize, len: usize) -> Result<Tensor> {
    let mut shape = t.shape().to_vec();
    ensure!(
        start + len <= shape[a],
        InvalidModel,
        "range {start}..{} exceeds dim {a} of {shape:?}",
        start + len
    );
    shape[a] = len;
    let st = istrides(t.shape());
    let idx = strided(&shape, start as isize * st[a], &st);
    t.take(shape, &idx)
}

pub(super) fn split(
    x: &Inputs,
    cx: &Ctx,
    axis: i64,
    attr: Option<&[i64]>,
    num_outputs: Option<i64>,
) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let a = norm_axis(axis, t.rank())?;
    let dim = t.shape()[a];
    let given = attr
        .map(|s| s.to_vec())
        .or(x.opt_ints(1)?)
        .filter(|s| !s.is_empty());
    let sizes: Vec<usize> = match given {
        Some(s) => {
            ensure!(
                s.len() == cx.n_outputs,
                InvalidModel,
                "split {s:?} has {} parts for {} outputs",
                s.len(),
                cx.n_outputs
            );
            let s = s
                .iter()
                .map(|&v| to_dim(v, "split sizes"))
                .collect::<Result<Vec<_>>>()?;
            ensure!(
                s.iter().sum::<usize>() == dim,
                InvalidModel,
                "split {s:?} does not sum to the dim {dim}"
            );
            s
        }
        None => {
            let k = num_outputs.map(|k| k as usize).unwrap_or(cx.n_outputs);
            ensure!(k > 0, InvalidModel, "Split needs at least one output");
            ensure!(
                k == cx.n_outputs,
                InvalidModel,
                "num_outputs {k} differs from the node's {} outputs",
                cx.n_outputs
            );
            let chunk = dim.div_ceil(k);
            let mut s = vec![chunk; k];
            let last = dim
                .checked_sub(chunk * (k - 1))
                .ok_or_else(|| err!(InvalidModel, "cannot split a dim of {dim} into {k} parts"))?;
            s[k - 1] = last;
            s
        }
    };
    let mut out = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for s in sizes {
        out.push(Value::Tensor(narrow(t, a, start, s)?));
        start += s;
    }
    Ok(out)
}

/// Effective (start, step, count) of one sliced axis of size `dim`, as the Slice spec clamps them.
pub(crate) fn slice_params(
    dim: usize,
    start: i64,
    end: i64,
    step: i64,
) -> Result<(usize, isize, usize)> {
    ensure!(step != 0, InvalidModel, "Slice step must not be zero");
    let d = dim as i64;
    let fix = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let (s, e) = (fix(start), fix(end));
    if step > 0 {
        let (s, e) = (s.clamp(0, d), e.clamp(0, d));
        let count = if e > s {
            ((e - s) as u64).div_ceil(step as u64) as usize
        } else {
            0
        };
        Ok((s as usize, step as isize, count))
    } else {
        if d == 0 {
            return Ok((0, step as isize, 0));
        }
        let (s, e) = (s.clamp(0, d - 1), e.clamp(-1, d - 1));
        let count = if s > e {
            ((s - e) as u64).div_ceil(step.unsigned_abs()) as usize
        } else {
            0
        };
        Ok((s as usize, step as isize, count))
    }
}

pub(super) fn slice(
    x: &Inputs,
    starts: Option<&[i64]>,
    ends: Option<&[i64]>,
    axes: Option<&[i64]>,
) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let r = t.rank();
    let (starts, ends, axes, steps) = match (starts, ends) {
        (Some(s), Some(e)) => (s.to_vec(), e.to_vec(), axes.map(|a| a.to_vec()), None),
        _ => (
            x.opt_ints(1)?
                .ok_or_else(|| err!(InvalidModel, "Slice needs the starts input"))?,
            x.opt_ints(2)?
                .ok_or_else(|| err!(InvalidModel, "Slice needs the ends input"))?,
            x.opt_ints(3)?,
            x.opt_ints(4)?,
        ),
    };
    ensure!(
        starts.len() == ends.len(),
        InvalidModel,
        "Slice starts {starts:?} and ends {ends:?} differ in length"
    );
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    ensure!(
        axes.len() == starts.len(),
        InvalidModel,
        "Slice axes {axes:?} and starts {starts:?} differ in length"
    );
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    ensure!(
        steps.len() == starts.len(),
        InvalidModel,
        "Slice steps {steps:?} and starts {starts:?} differ in length"
    );
    let axes = norm_axes(&axes, r)?;
    let st = istrides(t.shape());
    let mut shape = t.shape().to_vec();
    let mut strides = st.clone();
    let mut base = 0isize;
    for (i, &a) in axes.iter().enumerate() {
        let (s, step, count) = slice_params(t.shape()[a], starts[i], ends[i], steps[i])?;
        shape[a] = count;
        if count > 0 {
            base += s as isize * st[a];
        }
        // With fewer than two elements the stride is never used (and may not fit).
        strides[a] = if count > 1 { step * st[a] } else { 0 };
    }
    let idx = strided(&shape, base, &strides);
    one(t.take(shape, &idx)?)
}

pub(super) fn expand(x: &Inputs) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let spec = x
        .opt_ints(1)?
        .ok_or_else(|| err!(InvalidModel, "Expand needs the shape input"))?;
    let spec = spec
        .iter()
        .map(|&d| to_dim(d, "Expand dims"))
        .collect::<Result<Vec<_>>>()?;
    let shape = broadcast_shapes(&[t.shape(), &spec])?;
    check_size(&shape)?;
    let idx = index_map(t.shape(), &shape);
    one(t.take(shape, &idx)?)
}

pub(super) fn tile(x: &Inputs, legacy_axis: bool) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let r = t.rank();
    let reps: Vec<i64> = if legacy_axis {
        let tiles = x
            .opt_ints(1)?
            .and_then(|v| v.first().copied())
            .ok_or_else(|| err!(InvalidModel, "Tile-1 needs the tiles input"))?;
        let axis = x
            .opt_ints(2)?
            .and_then(|v| v.first().copied())
            .ok_or_else(|| err!(InvalidModel, "Tile-1 needs the axis input"))?;
        let a = norm_axis(axis, r)?;
        (0..r).map(|i| if i == a { tiles } else { 1 }).collect()
    } else {
        x.opt_ints(1)?
            .ok_or_else(|| err!(InvalidModel, "Tile needs the repeats input"))?
    };
    ensure!(
        reps.len() == r,
        InvalidModel,
        "Tile repeats {reps:?} do not match rank {r}"
    );
    let mut shape = Vec::with_capacity(r);
    for (d, &rep) in t.shape().iter().zip(&reps) {
        shape.push(
            d.checked_mul(to_dim(rep, "Tile repeats")?)
                .ok_or_else(|| err!(ResourceExhausted, "Tile output is too large"))?,
        );
    }
    let n = check_size(&shape)?;
    let st = smelt_ir::strides(t.shape());
    let src = t.shape();
    let mut idx = Vec::with_capacity(n);
    for_each_index(&shape, |m| {
        idx.push(
            m.iter()
                .zip(src)
                .zip(&st)
                .map(|((&i, &d), &s)| (i % d) * s)
                .sum(),
        );
        Ok(())
    })?;
    one(t.take(shape, &idx)?)
}

/// Source position along one padded axis of size `n`, or None for a constant fill.
fn pad_source(i: i64, n: usize, mode: PadMode) -> Result<Option<usize>> {
    let n = n as i64;
    if (0..n).contains(&i) {
        return Ok(Some(i as usize));
    }
    Ok(match mode {
        PadMode::Constant => None,
        _ if n == 0 => bail!(InvalidModel, "cannot pad an empty axis in {mode:?} mode"),
        PadMode::Edge => Some(i.clamp(0, n - 1) as usize),
        PadMode::Wrap => Some(i.rem_euclid(n) as usize),
        PadMode::Reflect => {
            if n == 1 {
                Some(0)
            } else {
                let p = 2 * (n - 1);
                let j = i.rem_euclid(p);
                Some(if j >= n { p - j } else { j } as usize)
            }
        }
    })
}

pub(super) fn pad(
    x: &Inputs,
    mode: PadMode,
    attr: Option<&[i64]>,
    value: Option<f32>,
) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let r = t.rank();
    let pads = match attr {
        Some(p) => p.to_vec(),
        None => x
            .opt_ints(1)?
            .ok_or_else(|| err!(InvalidModel, "Pad needs the pads input"))?,
    };
    let axes = match if attr.is_some() { None } else { x.opt_ints(3)? } {
        Some(a) => norm_axes(&a, r)?,
        None => (0..r).collect(),
    };
    ensure!(
        pads.len() == 2 * axes.len(),
        InvalidModel,
        "pads {pads:?} should have {} values",
        2 * axes.len()
    );
    let mut begin = vec![0i64; r];
    let mut end = vec![0i64; r];
    for (i, &a) in axes.iter().enumerate() {
        begin[a] = pads[i];
        end[a] = pads[axes.len() + i];
    }
    let fill = match (value, x.opt_tensor(2)?) {
        (Some(v), _) => match t.dtype() {
            smelt_ir::DType::Str => Data::Str(vec![String::new()].into()),
            d => Tensor::from_f64(d, vec![1], &[v as f64])?.into_data(),
        },
        (None, Some(c)) if !c.is_empty() => {
            ensure!(
                c.dtype() == t.dtype(),
                InvalidModel,
                "Pad constant_value is {}, data is {}",
                c.dtype(),
                t.dtype()
            );
            c.data().take(&[0])
        }
        _ => zero_of(t)?,
    };
    let mut shape = Vec::with_capacity(r);
    for d in 0..r {
        let s = t.shape()[d] as i128 + begin[d] as i128 + end[d] as i128;
        ensure!(
            s >= 0,
            InvalidModel,
            "pads {pads:?} make dim {d} of {:?} negative",
            t.shape()
        );
        shape.push(
            usize::try_from(s)
                .map_err(|_| err!(ResourceExhausted, "pads {pads:?} are too large"))?,
        );
    }
    // The size is checked before the per-axis maps are built: an empty output may still
    // have a huge dim, and a non-empty one has no dim larger than itself.
    let n = check_size(&shape)?;
    if n == 0 {
        return one(take_fill(t, shape, Vec::new(), &fill)?);
    }
    // Per axis, the source position (or None) for each output position.
    let maps: Vec<Vec<Option<usize>>> = (0..r)
        .map(|d| {
            (0..shape[d] as i64)
                .map(|o| pad_source(o.saturating_sub(begin[d]), t.shape()[d], mode))
                .collect()
        })
        .collect::<Result<_>>()?;
    let st = smelt_ir::strides(t.shape());
    let mut idx = Vec::with_capacity(n);
    for_each_index(&shape, |m| {
        let mut off = 0;
        for d in 0..r {
            match maps[d][m[d]] {
                Some(s) => off += s * st[d],
                None => {
                    idx.push(FILL);
                    return Ok(());
                }
            }
        }
        idx.push(off);
        Ok(())
    })?;
    one(take_fill(t, shape, idx, &fill)?)
}

pub(super) fn trilu(x: &Inputs, upper: bool) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let r = t.rank();
    ensure!(
        r >= 2,
        InvalidModel,
        "Trilu needs rank >= 2, got shape {:?}",
        t.shape()
    );
    let k = match x.opt_ints(1)? {
        Some(v) => *v
            .first()
            .ok_or_else(|| err!(InvalidModel, "Trilu k is empty"))?,
        None => 0,
    };
    let (rows, cols) = (t.shape()[r - 2], t.shape()[r - 1]);
    let idx: Vec<usize> = (0..t.len())
        .map(|i| {
            let (row, col) = (((i / cols) % rows) as i64, (i % cols) as i64);
            let keep = if upper {
                col - row >= k
            } else {
                col - row <= k
            };
            if keep {
                i
            } else {
                FILL
            }
        })
        .collect();
    one(take_fill(t, t.shape().to_vec(), idx, &zero_of(t)?)?)
}

fn block_args(t: &Tensor, blocksize: i64) -> Result<(usize, [usize; 4])> {
    ensure!(
        t.rank() == 4,
        InvalidModel,
        "expected a 4-D NCHW input, got shape {:?}",
        t.shape()
    );
    ensure!(
        (1..=1 << 16).contains(&blocksize),
        InvalidModel,
        "blocksize {blocksize} is out of range"
    );
    let s = t.shape();
    Ok((blocksize as usize, [s[0], s[1], s[2], s[3]]))
}

pub(super) fn depth_to_space(x: &Inputs, blocksize: i64, mode: BlockMode) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let (bs, [b, c, h, w]) = block_args(t, blocksize)?;
    ensure!(
        c % (bs * bs) == 0,
        InvalidModel,
        "channels {c} are not divisible by blocksize^2 = {}",
        bs * bs
    );
    let c2 = c / (bs * bs);
    let (tmp, perm) = match mode {
        BlockMode::Dcr => ([b, bs, bs, c2, h, w], [0, 3, 4, 1, 5, 2]),
        BlockMode::Crd => ([b, c2, bs, bs, h, w], [0, 1, 4, 2, 5, 3]),
    };
    let (_, idx) = transpose_indices(&tmp, &perm);
    one(t.take(vec![b, c2, h * bs, w * bs], &idx)?)
}

pub(super) fn space_to_depth(x: &Inputs, blocksize: i64, mode: BlockMode) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let (bs, [b, c, h, w]) = block_args(t, blocksize)?;
    ensure!(
        h % bs == 0 && w % bs == 0,
        InvalidModel,
        "spatial dims {h}x{w} are not divisible by blocksize {bs}"
    );
    let tmp = [b, c, h / bs, bs, w / bs, bs];
    let perm = match mode {
        BlockMode::Dcr => [0, 3, 5, 1, 2, 4],
        BlockMode::Crd => [0, 1, 3, 5, 2, 4],
    };
    let (_, idx) = transpose_indices(&tmp, &perm);
    one(t.take(vec![b, c * bs * bs, h / bs, w / bs], &idx)?)
}

pub(super) fn reverse_sequence(x: &Inputs, batch_axis: i64, time_axis: i64) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    ensure!(
        t.rank() >= 2,
        InvalidModel,
        "ReverseSequence needs rank >= 2"
    );
    ensure!(
        matches!((batch_axis, time_axis), (0, 1) | (1, 0)),
        InvalidModel,
        "batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1 in some order"
    );
    let (ba, ta) = (batch_axis as usize, time_axis as usize);
    let lens = x
        .opt_ints(1)?
        .ok_or_else(|| err!(InvalidModel, "ReverseSequence needs sequence_lens"))?;
    let (nb, nt) = (t.shape()[ba], t.shape()[ta]);
    ensure!(
        lens.len() == nb,
        InvalidModel,
        "sequence_lens has {} entries for a batch of {nb}",
        lens.len()
    );
    let lens = lens
        .iter()
        .map(|&l| {
            ensure!(
                (0..=nt as i64).contains(&l),
                InvalidInput,
                "sequence length {l} is out of range [0, {nt}]"
            );
            Ok(l as usize)
        })
        .collect::<Result<Vec<_>>>()?;
    let st = smelt_ir::strides(t.shape());
    let mut idx = Vec::with_capacity(t.len());
    for_each_index(t.shape(), |m| {
        let (bi, ti) = (m[ba], m[ta]);
        let src_t = if ti < lens[bi] { lens[bi] - 1 - ti } else { ti };
        idx.push(
            m.iter()
                .zip(&st)
                .enumerate()
                .map(|(d, (&i, &s))| if d == ta { src_t * s } else { i * s })
                .sum(),
        );
        Ok(())
    })?;
    one(t.take(t.shape().to_vec(), &idx)?)
}

pub(super) fn center_crop_pad(x: &Inputs, axes: Option<&[i64]>) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let r = t.rank();
    let target = x
        .opt_ints(1)?
        .ok_or_else(|| err!(InvalidModel, "CenterCropPad needs the shape input"))?;
    let axes = match axes {
        Some(a) => norm_axes(a, r)?,
        None => (0..r).collect(),
    };
    ensure!(
        target.len() == axes.len(),
        InvalidModel,
        "shape {target:?} does not match the {} axes",
        axes.len()
    );
    let mut shape = t.shape().to_vec();
    let mut offset = vec![0i64; r];
    for (&a, &s) in axes.iter().zip(&target) {
        let s = to_dim(s, "CenterCropPad shape")?;
        let d = t.shape()[a];
        offset[a] = if d >= s {
            ((d - s) / 2) as i64
        } else {
            -(((s - d) / 2) as i64)
        };
        shape[a] = s;
    }
    let st = smelt_ir::strides(t.shape());
    let mut idx = Vec::with_capacity(check_size(&shape)?);
    for_each_index(&shape, |m| {
        let mut off = 0;
        for d in 0..r {
            let i = m[d] as i64 + offset[d];
            if !(0..t.shape()[d] as i64).contains(&i) {
                idx.push(FILL);
                return Ok(());
            }
            off += i as usize * st[d];
        }
        idx.push(off);
        Ok(())
    })?;
    one(take_fill(t, shape, idx, &zero_of(t)?)?)
}

pub(super) fn col2im(
    x: &Inputs,
    dilations: &[i64],
    pads: &[i64],
    strides: &[i64],
) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let image = x
        .opt_ints(1)?
        .ok_or_else(|| err!(InvalidModel, "Col2Im needs image_shape"))?;
    let block = x
        .opt_ints(2)?
        .ok_or_else(|| err!(InvalidModel, "Col2Im needs block_shape"))?;
    let nd = image.len();
    ensure!(
        block.len() == nd,
        InvalidModel,
        "image_shape {image:?} and block_shape {block:?} differ in length"
    );
    ensure!(
        t.rank() == 3,
        InvalidModel,
        "Col2Im needs a 3-D input, got {:?}",
        t.shape()
    );
    let dil = if dilations.is_empty() {
        vec![1; nd]
    } else {
        dilations.to_vec()
    };
    let strd = if strides.is_empty() {
        vec![1; nd]
    } else {
        strides.to_vec()
    };
    let pads = if pads.is_empty() {
        vec![0; 2 * nd]
    } else {
        pads.to_vec()
    };
    ensure!(
        dil.len() == nd && strd.len() == nd && pads.len() == 2 * nd,
        InvalidModel,
        "Col2Im attributes do not match {nd} spatial dims"
    );
    ensure!(
        dil.iter().chain(&strd).all(|&v| v > 0),
        InvalidModel,
        "Col2Im strides and dilations must be positive"
    );
    let img = image
        .iter()
        .map(|&v| to_dim(v, "image_shape"))
        .collect::<Result<Vec<_>>>()?;
    let blk = block
        .iter()
        .map(|&v| to_dim(v, "block_shape"))
        .collect::<Result<Vec<_>>>()?;
    let ksize = numel(&blk)?;
    let (n, ck, l) = (t.shape()[0], t.shape()[1], t.shape()[2]);
    ensure!(
        ksize > 0 && ck % ksize == 0,
        InvalidModel,
        "input channels {ck} are not divisible by the block size {ksize}"
    );
    let c = ck / ksize;
    let mut ncol = Vec::with_capacity(nd);
    for i in 0..nd {
        let span = img[i] as i128 + pads[i] as i128 + pads[nd + i] as i128
            - (dil[i] as i128 * (blk[i] as i128 - 1) + 1);
        ensure!(
            (0..1 << 40).contains(&span),
            InvalidModel,
            "Col2Im block does not fit the padded image in dim {i}"
        );
        ncol.push((span / strd[i] as i128 + 1) as usize);
    }
    ensure!(
        numel(&ncol)? == l,
        InvalidModel,
        "Col2Im input has {l} blocks, expected {}",
        numel(&ncol)?
    );
    let src = t.to_f64()?;
    let isz = numel(&img)?;
    check_size(&[n, c, isz])?;
    let mut out = vec![0.0f64; n * c * isz];
    let ist = smelt_ir::strides(&img);
    for nc in 0..n * c {
        let (bn, ch) = (nc / c, nc % c);
        let mut k = 0usize;
        for_each_index(&blk, |kof| {
            let row = (bn * ck + ch * ksize + k) * l;
            let mut col = 0usize;
            for_each_index(&ncol, |cidx| {
                let mut off = 0usize;
                let mut inside = true;
                for i in 0..nd {
                    let p = cidx[i] as i64 * strd[i] - pads[i] + kof[i] as i64 * dil[i];
                    if !(0..img[i] as i64).contains(&p) {
                        inside = false;
                        break;
                    }
                    off += p as usize * ist[i];
                }
                if inside {
                    out[nc * isz + off] += src[row + col];
                }
                col += 1;
                Ok(())
            })?;
            k += 1;
            Ok(())
        })?;
    }
    let mut shape = vec![n, c];
    shape.extend(&img);
    one(Tensor::from_f64(t.dtype(), shape, &out)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_clamping() {
        assert_eq!(slice_params(4, 1, 1000, 1).unwrap(), (1, 1, 3));
        assert_eq!(slice_params(4, -1, i64::MIN, -1).unwrap(), (3, -1, 4));
        assert_eq!(slice_params(4, 20, 0, -2).unwrap(), (3, -2, 2));
        assert_eq!(slice_params(4, 3, 1, 1).unwrap(), (3, 1, 0));
        assert!(slice_params(4, 0, 1, 0).is_err());
    }

    #[test]
    fn pad_sources() {
        assert_eq!(pad_source(-1, 3, PadMode::Reflect).unwrap(), Some(1));
        assert_eq!(pad_source(3, 3, PadMode::Reflect).unwrap(), Some(1));
        assert_eq!(pad_source(-1, 3, PadMode::Wrap).unwrap(), Some(2));
        assert_eq!(pad_source(5, 3, PadMode::Edge).unwrap(), Some(2));
        assert_eq!(pad_source(-1, 3, PadMode::Constant).unwrap(), None);
    }
}
