//! Which values are views: windows onto another value's storage that cost no kernel
//! (reshapes, transposes, splits, unit-step slices, expands, constant-index gathers).
//! Views are computed assuming the value they view is stored row-major, which the
//! placement step guarantees (every stored value is a dense block).

use smelt_ir::op::nn::DropoutMode;
use smelt_ir::op::{ElementwiseOp, LayoutOp, NnOp};
use smelt_ir::{DType, Graph, Node, Op, ValueId};
use std::collections::HashMap;

/// A window onto a stored value (the root), in elements of the root's dense layout.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// The stored value the window reads.
    pub root: ValueId,
    /// Offset of element zero.
    pub offset: usize,
    /// The view's shape.
    pub shape: Vec<usize>,
    /// Step per dimension (0 broadcasts).
    pub strides: Vec<isize>,
}

impl View {
    /// The whole of a stored value.
    pub fn dense(root: ValueId, shape: &[usize]) -> View {
        View {
            root,
            offset: 0,
            shape: shape.to_vec(),
            strides: dense_strides(shape),
        }
    }

    /// Whether this is the root itself, unchanged.
    pub fn is_identity(&self, root_shape: &[usize]) -> bool {
        self.offset == 0 && self.shape == root_shape && self.strides == dense_strides(root_shape)
    }
}

/// Row-major strides of a shape. They saturate: only an empty tensor's can overflow (a
/// stored tensor's size was checked against the limits), and an empty one is never read.
pub fn dense_strides(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for d in (0..shape.len()).rev() {
        s[d] = acc;
        acc = acc.saturating_mul(isize::try_from(shape[d]).unwrap_or(isize::MAX));
    }
    s
}

/// The concrete shape of a tensor value: from its type, else from its constant.
pub fn shape_of(g: &Graph, v: ValueId) -> Option<Vec<usize>> {
    let typed = match &g.value(v).ty {
        Some(smelt_ir::ValueType::Tensor { shape: Some(s), .. }) => s
            .iter()
            .map(|d| match d {
                smelt_ir::Dim::Known(n) => Some(*n as usize),
                _ => None,
            })
            .collect(),
        _ => None,
    };
    typed.or_else(|| {
        g.constants
            .iter()
            .find(|c| c.id == v)
            .map(|c| c.tensor.shape().to_vec())
    })
}

/// The view a node's first output is, given the views of its inputs, or None when the
/// node must run as a kernel.
pub fn view_of(
    g: &Graph,
    n: &Node,
    consts: &HashMap<ValueId, &smelt_ir::Tensor>,
    input: &View,
) -> Option<View> {
    let out = n.outputs.first().copied().flatten()?;
    let shape = shape_of(g, out)?;
    match &n.op {
        Op::Layout(LayoutOp::Identity) => Some(input.clone()),
        Op::Nn(NnOp::Dropout { mode, .. }) => {
            // Only in inference, with the mask unused.
            let inference = match mode {
                DropoutMode::Fixed { training, .. } => !training,
                DropoutMode::FromInputs => n.inputs.get(2).copied().flatten().is_none(),
            };
            let no_mask = n.outputs.len() < 2 || n.outputs[1].is_none();
            (inference && no_mask).then(|| input.clone())
        }
        Op::Elementwise(ElementwiseOp::Cast { to, .. }) => {
            let x = n.inputs[0]?;
            let from = crate::lower::dtype_of(g, x)?;
            let widened_weight = consts.contains_key(&x)
                && input.root == x
                && matches!(from, DType::BF16 | DType::F16)
                && *to == DType::F32
                && read_as_weights_only(g, out);
            (from == *to || widened_weight).then(|| input.clone())
        }
        Op::Layout(
            LayoutOp::Reshape { .. }
            | LayoutOp::Flatten { .. }
            | LayoutOp::Squeeze { .. }
            | LayoutOp::Unsqueeze { .. },
        ) => reshape(input, &shape),
        Op::Layout(LayoutOp::Transpose { perm }) => {
            let r = input.shape.len();
            let perm: Vec<usize> = match perm {
                None => (0..r).rev().collect(),
                Some(p) => p
                    .iter()
                    .map(|&a| usize::try_from(if a < 0 { a + r as i64 } else { a }).ok())
                    .collect::<Option<_>>()?,
            };
            let mut sorted = perm.clone();
            sorted.sort_unstable();
            if !sorted.into_iter().eq(0..r) {
                // Not a permutation: the Transpose kernel reports it.
                return None;
            }
            Some(View {
                root: input.root,
                offset: input.offset,
                shape: perm.iter().map(|&p| input.shape[p]).collect(),
                strides: perm.iter().map(|&p| input.strides[p]).collect(),
            })
        }
        Op::Layout(LayoutOp::Expand) => {
            let r = shape.len();
            let off = r.checked_sub(input.shape.len())?;
            let mut strides = vec![0isize; r];
            for d in 0..input.shape.len() {
                if input.shape[d] == shape[d + off] {
                    strides[d + off] = input.strides[d];
                } else if input.shape[d] != 1 {
                    return None;
                }
            }
            Some(View {
                root: input.root,
                offset: input.offset,
                shape,
                strides,
            })
        }
        Op::Layout(LayoutOp::Slice { .. }) => slice(n, consts, input, &shape),
        Op::Layout(LayoutOp::Gather { axis }) => {
            let idx = consts.get(&n.inputs.get(1).copied().flatten()?)?;
            if idx.len() != 1 || idx.rank() > 1 {
                return None;
            }
            let r = input.shape.len() as i64;
            let a = if *axis < 0 { axis + r } else { *axis };
            let a = usize::try_from(a).ok().filter(|&a| a < input.shape.len())?;
            let dim = input.shape[a] as i64;
            let mut i = *idx.to_i64().ok()?.first()?;
            if i < 0 {
                i += dim;
            }
            if i < 0 || i >= dim {
                return None;
            }
            let offset = offset_add(input.offset, i as isize * input.strides[a])?;
            let (mut sh, mut st) = (input.shape.clone(), input.strides.clone());
            if idx.rank() == 0 {
                sh.remove(a);
                st.remove(a);
            } else {
                sh[a] = 1;
            }
            (sh == shape).then_some(View {
                root: input.root,
                offset,
                shape: sh,
                strides: st,
            })
        }
        _ => None,
    }
}

/// Whether every reader of `v` is a product that reads it as its weights (MatMul's or
/// Gemm's A or B, a convolution's filter), and `v` is no graph output. A widening cast of
/// narrow constant weights read only so is a view of the narrow weights: those kernels
/// widen them as they pack them (see `crate::precision`).
fn read_as_weights_only(g: &Graph, v: ValueId) -> bool {
    if g.outputs.contains(&v) {
        return false;
    }
    g.nodes.iter().all(|n| {
        n.inputs.iter().enumerate().all(|(s, x)| {
            *x != Some(v)
                || match &n.op {
                    Op::Nn(NnOp::MatMul | NnOp::Gemm { .. }) => s < 2,
                    Op::Nn(NnOp::Conv { .. } | NnOp::ConvBlocked { .. }) => s == 1,
                    _ => false,
                }
        })
    })
}

/// The views of a Split node's outputs, in order (None for an absent output).
pub fn split_views(g: &Graph, n: &Node, input: &View) -> Option<Vec<Option<View>>> {
    let Op::Layout(LayoutOp::Split { axis, .. }) = &n.op else {
        return None;
    };
    let r = input.shape.len() as i64;
    let a = if *axis < 0 { axis + r } else { *axis };
    let a = usize::try_from(a).ok().filter(|&a| a < input.shape.len())?;
    let mut start = 0usize;
    let mut views = Vec::new();
    for o in &n.outputs {
        let Some(o) = o else {
            return None;
        };
        let shape = shape_of(g, *o)?;
        let len = *shape.get(a)?;
        let offset = offset_add(input.offset, start as isize * input.strides[a])?;
        views.push(Some(View {
            root: input.root,
            offset,
            shape,
            strides: input.strides.clone(),
        }));
        start += len;
    }
    (start == input.shape[a]).then_some(views)
}

fn offset_add(base: usize, delta: isize) -> Option<usize> {
    usize::try_from(base as isize + delta).ok()
}

/// A unit-step Slice with constant parameters.
fn slice(
    n: &Node,
    consts: &HashMap<ValueId, &smelt_ir::Tensor>,
    input: &View,
    shape: &[usize],
) -> Option<View> {
    let Op::Layout(LayoutOp::Slice { starts, axes, .. }) = &n.op else {
        return None;
    };
    let ints = |i: usize| -> Option<Vec<i64>> {
        consts
            .get(&n.inputs.get(i).copied().flatten()?)?
            .to_i64()
            .ok()
    };
    let starts = match starts {
        Some(s) => s.clone(),
        None => ints(1)?,
    };
    let r = input.shape.len();
    let axes: Vec<i64> = match axes {
        Some(a) => a.clone(),
        None if n.inputs.get(3).copied().flatten().is_some() => ints(3)?,
        None => (0..starts.len() as i64).collect(),
    };
    if n.inputs.get(4).copied().flatten().is_some() && ints(4)?.iter().any(|&s| s != 1) {
        return None;
    }
    if shape.len() != r || axes.len() != starts.len() {
        return None;
    }
    let mut offset = input.offset as isize;
    for (&ax, &st) in axes.iter().zip(&starts) {
        let a = usize::try_from(if ax < 0 { ax + r as i64 } else { ax }).ok()?;
        let dim = *input.shape.get(a)? as i64;
        let s = if st < 0 { st + dim } else { st }.clamp(0, dim);
        offset += s as isize * input.strides[a];
    }
    Some(View {
        root: input.root,
        offset: usize::try_from(offset).ok()?,
        shape: shape.to_vec(),
        strides: input.strides.clone(),
    })
    .filter(|v| v.shape.iter().zip(&input.shape).all(|(o, i)| o <= i))
}

/// The same elements under a new row-major shape, when the strides allow it without a copy.
pub fn reshape(input: &View, shape: &[usize]) -> Option<View> {
    let product = |s: &[usize]| s.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if product(&input.shape)? != product(shape)? {
        return None;
    }
    // Group the input's non-unit dims into runs that are contiguous with each other.
    let dims: Vec<(usize, isize)> = input
        .shape
        .iter()
        .zip(&input.strides)
        .filter(|(&n, _)| n != 1)
        .map(|(&n, &s)| (n, s))
        .collect();
    let mut strides = vec![0isize; shape.len()];
    let (mut i, mut o) = (0usize, 0usize);
    while o < shape.len() && shape[o] == 1 {
        strides[o] = 1;
        o += 1;
    }
    while i < dims.len() {
        // One contiguous run of input dims [i, j).
        let mut j = i + 1;
        while j < dims.len()
            && Some(dims[j - 1].1) == dims[j].1.checked_mul(isize::try_from(dims[j].0).ok()?)
        {
            j += 1;
        }
        let run: usize = dims[i..j].iter().map(|d| d.0).product();
        let inner = dims[j - 1].1;
        // Output dims covering exactly this run.
        let mut covered = 1usize;
        let start = o;
        while o < shape.len() && covered < run {
            covered = covered.checked_mul(shape[o])?;
            o += 1;
        }
        while o < shape.len() && shape[o] == 1 {
            o += 1;
        }
        if covered != run {
            return None;
        }
        let mut acc = inner;
        for d in (start..o).rev() {
            strides[d] = acc;
            acc = acc.saturating_mul(isize::try_from(shape[d]).unwrap_or(isize::MAX));
        }
        i = j;
    }
    (o == shape.len()).then(|| View {
        root: input.root,
        offset: input.offset,
        shape: shape.to_vec(),
        strides,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_of_transposed_view() {
        let root = ValueId(0);
        let base = View::dense(root, &[2, 3, 4]);
        // Merge the last two dims of a dense block: contiguous.
        let v = reshape(&base, &[2, 12]).unwrap();
        assert_eq!(v.strides, vec![12, 1]);
        // Transposed [3, 2, 4]: dims 0 and 1 are not contiguous, so they cannot merge...
        let t = View {
            root,
            offset: 0,
            shape: vec![3, 2, 4],
            strides: vec![4, 12, 1],
        };
        assert!(reshape(&t, &[6, 4]).is_none());
        // ...but splitting the last one is fine.
        let s = reshape(&t, &[3, 2, 2, 2]).unwrap();
        assert_eq!(s.strides, vec![4, 12, 2, 1]);
        // Unit dims anywhere.
        let u = reshape(&base, &[1, 2, 1, 3, 4, 1]).unwrap();
        assert_eq!(u.shape, vec![1, 2, 1, 3, 4, 1]);
        assert_eq!(u.strides[1], 12);
        assert_eq!(u.strides[3], 4);
        assert_eq!(u.strides[4], 1);
    }
}
