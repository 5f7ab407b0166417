//! Reference kernels of the layout op family.
//!
//! Every kernel computes the flat source index of each output element and then moves the
//! elements with [`Tensor::take`] (or [`Data::scatter`]), so all element types, strings and
//! bools included, go through the same code.

mod index;
mod movement;
mod shape;
mod unique;

use super::{Ctx, Inputs};
use smelt_ir::op::LayoutOp;
use smelt_ir::{ensure, err, Data, Result, Tensor, Value};

/// Runs one op of the family.
pub fn run(op: &LayoutOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    use LayoutOp as L;
    match op {
        L::Identity => {
            let v = x
                .value(0)
                .ok_or_else(|| err!(InvalidModel, "input 0 is required"))?;
            Ok(vec![v.clone()])
        }
        L::Reshape { shape, allowzero } => shape::reshape(x, shape.as_deref(), *allowzero),
        L::Flatten { axis } => shape::flatten(x, *axis),
        L::Squeeze { axes } => shape::squeeze(x, axes.as_deref()),
        L::Unsqueeze { axes } => shape::unsqueeze(x, axes.as_deref()),
        L::Shape { start, end } => shape::shape(x, *start, *end),
        L::Size => super::one(Tensor::scalar_i64(x.tensor(0)?.len() as i64)),
        L::ConstantOfShape { value } => shape::constant_of_shape(x, value.as_ref()),
        L::Range => shape::range(x),
        L::EyeLike { dtype, k } => shape::eye_like(x, *dtype, *k),
        L::Transpose { perm } => movement::transpose(x, perm.as_deref()),
        L::Concat { axis } => movement::concat(x, *axis),
        L::Split {
            axis,
            split,
            num_outputs,
        } => movement::split(x, cx, *axis, split.as_deref(), *num_outputs),
        L::Slice { starts, ends, axes } => {
            movement::slice(x, starts.as_deref(), ends.as_deref(), axes.as_deref())
        }
        L::Expand => movement::expand(x),
        L::Tile { legacy_axis } => movement::tile(x, *legacy_axis),
        L::Pad { mode, pads, value } => movement::pad(x, *mode, pads.as_deref(), *value),
        L::Trilu { upper } => movement::trilu(x, *upper),
        L::DepthToSpace { blocksize, mode } => movement::depth_to_space(x, *blocksize, *mode),
        L::SpaceToDepth { blocksize, mode } => movement::space_to_depth(x, *blocksize, *mode),
        L::ReverseSequence {
            batch_axis,
            time_axis,
        } => movement::reverse_sequence(x, *batch_axis, *time_axis),
        L::CenterCropPad { axes } => movement::center_crop_pad(x, axes.as_deref()),
        L::Col2Im {
            dilations,
            pads,
            strides,
        } => movement::col2im(x, dilations, pads, strides),
        L::Gather { axis } => index::gather(x, *axis),
        L::GatherElements { axis } => index::gather_elements(x, *axis),
        L::GatherND { batch_dims } => index::gather_nd(x, *batch_dims),
        L::ScatterElements { axis, reduction } => index::scatter_elements(x, *axis, *reduction),
        L::ScatterND { reduction } => index::scatter_nd(x, *reduction),
        L::OneHot { axis } => index::one_hot(x, *axis),
        L::Compress { axis } => index::compress(x, *axis),
        L::NonZero => index::non_zero(x),
        L::Unique { axis, sorted } => unique::unique(x, cx, *axis, *sorted),
    }
}

/// Normalizes an axis in [-rank, rank-1] to [0, rank-1].
pub(crate) fn norm_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    ensure!(
        (-r..r).contains(&axis),
        InvalidModel,
        "axis {axis} is out of range for rank {rank}"
    );
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// Normalizes a list of distinct axes in [-rank, rank-1].
pub(crate) fn norm_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let a = norm_axis(a, rank)?;
        ensure!(
            !out.contains(&a),
            InvalidModel,
            "axis {a} is repeated in {axes:?}"
        );
        out.push(a);
    }
    Ok(out)
}

/// Wraps a possibly negative index into [0, dim), or an error when it is out of range.
pub(crate) fn wrap_index(i: i64, dim: usize) -> Result<usize> {
    let d = dim as i64;
    ensure!(
        (-d..d).contains(&i),
        InvalidInput,
        "index {i} is out of range for a dimension of size {dim}"
    );
    Ok(if i < 0 { i + d } else { i } as usize)
}

/// A non-negative dimension from a user-supplied integer.
pub(crate) fn to_dim(v: i64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| err!(InvalidModel, "{what} must be non-negative, got {v}"))
}

/// The element count of an output shape, or an error when it is too large to build (the
/// data-movement kernels gather through one index per element: 8 bytes each).
pub(crate) fn check_size(shape: &[usize]) -> Result<usize> {
    let n = smelt_ir::numel(shape)?;
    check_count(n as u128, 8, &|| format!("output shape {shape:?}"))
}

/// An error unless `n` elements of `bytes` each fit smelt's cap on one tensor's element
/// count and the running thread's memory limits; returns `n`.
pub(crate) fn check_count(n: u128, bytes: u64, what: &dyn Fn() -> String) -> Result<usize> {
    ensure!(
        n <= shape::MAX_ELEMENTS as u128,
        ResourceExhausted,
        "{} has too many elements ({n})",
        what()
    );
    smelt_ir::limits::check_alloc(n as u64 * bytes, what)?;
    Ok(n as usize)
}

/// Calls `f` with every multi-index of `shape` in row-major order.
pub(crate) fn for_each_index(
    shape: &[usize],
    mut f: impl FnMut(&[usize]) -> Result<()>,
) -> Result<()> {
    if shape.contains(&0) {
        return Ok(());
    }
    let mut idx = vec![0usize; shape.len()];
    loop {
        f(&idx)?;
        let mut d = shape.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Flat offsets `base + sum(idx[d] * strides[d])` for every multi-index of `shape`, row-major.
/// The caller guarantees every offset is a valid index.
pub(crate) fn strided(shape: &[usize], base: isize, strides: &[isize]) -> Vec<usize> {
    // An empty tensor may have huge other dims: no product of them is taken.
    if shape.contains(&0) {
        return Vec::new();
    }
    let n: usize = smelt_ir::dims_product(shape);
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    let mut cur = base;
    for _ in 0..n {
        out.push(cur as usize);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            cur += strides[d];
            if idx[d] < shape[d] {
                break;
            }
            cur -= strides[d] * idx[d] as isize;
            idx[d] = 0;
        }
    }
    out
}

/// Row-major strides as isize.
pub(crate) fn istrides(shape: &[usize]) -> Vec<isize> {
    smelt_ir::strides(shape)
        .into_iter()
        .map(|s| s as isize)
        .collect()
}

/// Source indices of a transpose: output dim `d` is input dim `perm[d]`.
pub(crate) fn transpose_indices(shape: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let st = istrides(shape);
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let out_strides: Vec<isize> = perm.iter().map(|&p| st[p]).collect();
    let idx = strided(&out_shape, 0, &out_strides);
    (out_shape, idx)
}

/// Marker for "fill value" in the index lists given to [`take_fill`].
pub(crate) const FILL: usize = usize::MAX;

/// Like [`Tensor::take`], where index [`FILL`] takes the one element of `fill` instead.
pub(crate) fn take_fill(
    t: &Tensor,
    shape: Vec<usize>,
    mut idx: Vec<usize>,
    fill: &Data,
) -> Result<Tensor> {
    ensure!(
        fill.len() == 1,
        InvalidModel,
        "the fill value must have one element, got {}",
        fill.len()
    );
    let n = t.len();
    let ext = Data::concat(&[t.data(), fill])?;
    for i in idx.iter_mut() {
        if *i == FILL {
            *i = n;
        }
    }
    Tensor::new(t.dtype(), shape, ext.take(&idx))
}

/// A zero of `t`'s element type (empty string, false, 0).
pub(crate) fn zero_of(t: &Tensor) -> Result<Data> {
    Data::zeros(t.dtype(), 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_and_transpose() {
        assert_eq!(strided(&[2, 2], 0, &[1, 2]), vec![0, 2, 1, 3]);
        let (s, i) = transpose_indices(&[2, 3], &[1, 0]);
        assert_eq!(s, vec![3, 2]);
        assert_eq!(i, vec![0, 3, 1, 4, 2, 5]);
        assert_eq!(strided(&[3], 2, &[-1]), vec![2, 1, 0]);
    }

    #[test]
    fn axes_and_indices() {
        assert_eq!(norm_axis(-1, 3).unwrap(), 2);
        assert!(norm_axis(3, 3).is_err());
        assert!(norm_axes(&[0, -3], 3).is_err());
        assert_eq!(wrap_index(-2, 5).unwrap(), 3);
        assert!(wrap_index(5, 5).is_err());
    }

    fn run1(op: LayoutOp, inputs: Vec<Tensor>) -> Result<Vec<Value>> {
        let vals: Vec<Value> = inputs.into_iter().map(Value::Tensor).collect();
        let env = super::super::Env::new();
        let cx = Ctx {
            n_outputs: 1,
            outputs_used: vec![true],
            env: &env,
            consts: &env,
            control: crate::test_control(),
            depth: 0,
            runner: None,
        };
        run(&op, &Inputs::new(vals.iter().map(Some).collect()), &cx)
    }

    fn ints(v: &[i64]) -> Tensor {
        Tensor::from_i64_vec(vec![v.len()], v.to_vec()).unwrap()
    }

    #[test]
    fn extreme_values_are_errors_or_clamped() {
        use smelt_ir::op::layout::PadMode;
        let x = Tensor::from_f32(vec![2, 3], vec![0.0; 6]).unwrap();
        let pad = |p: &[i64]| {
            run1(
                LayoutOp::Pad {
                    mode: PadMode::Constant,
                    pads: Some(p.to_vec()),
                    value: None,
                },
                vec![x.clone()],
            )
        };
        assert!(pad(&[i64::MAX, 0, i64::MAX, 0]).is_err());
        let _ = pad(&[i64::MIN, 0, i64::MAX, 0]);
        let sl = |s: i64, e: i64, st: i64| {
            run1(
                LayoutOp::Slice {
                    starts: None,
                    ends: None,
                    axes: None,
                },
                vec![x.clone(), ints(&[s]), ints(&[e]), ints(&[1]), ints(&[st])],
            )
        };
        let r = sl(i64::MAX, i64::MIN, i64::MIN).unwrap();
        assert_eq!(r[0].tensor().unwrap().shape(), &[2, 1]);
        assert_eq!(
            sl(i64::MIN, i64::MAX, i64::MAX).unwrap()[0]
                .tensor()
                .unwrap()
                .shape(),
            &[2, 1]
        );
        let eye = run1(
            LayoutOp::EyeLike {
                dtype: None,
                k: i64::MAX,
            },
            vec![x.clone()],
        )
        .unwrap();
        assert_eq!(eye[0].tensor().unwrap().to_f64().unwrap(), vec![0.0; 6]);
        let col = run1(
            LayoutOp::Col2Im {
                dilations: vec![i64::MAX, 1],
                pads: vec![],
                strides: vec![],
            },
            vec![
                Tensor::from_f32(vec![1, 2, 1], vec![0.0; 2]).unwrap(),
                ints(&[2, 2]),
                ints(&[2, 1]),
            ],
        );
        assert!(col.is_err());
        let oh = run1(
            LayoutOp::OneHot { axis: -1 },
            vec![
                ints(&[i64::MIN, i64::MAX]),
                ints(&[3]),
                Tensor::from_f32(vec![2], vec![0.0, 1.0]).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(oh[0].tensor().unwrap().to_f64().unwrap(), vec![0.0; 6]);
        let g = run1(
            LayoutOp::Gather { axis: 0 },
            vec![x.clone(), ints(&[i64::MIN])],
        );
        assert!(g.is_err());
    }

    #[test]
    fn fill_takes_the_extra_element() {
        let t = Tensor::from_strings(vec![2], vec!["a".into(), "b".into()]).unwrap();
        let r = take_fill(&t, vec![3], vec![1, FILL, 0], &zero_of(&t).unwrap()).unwrap();
        assert_eq!(
            r.data(),
            &Data::Str(smelt_ir::Buf::from_vec(vec![
                "b".into(),
                String::new(),
                "a".into()
            ]))
        );
    }
}
