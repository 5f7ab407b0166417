//! Reference kernels of the sequence op family, and tensor helpers shared with control flow
//! (slicing along an axis, concatenating and stacking).

use super::{one, Ctx, Inputs};
use smelt_ir::op::SequenceOp;
use smelt_ir::{bail, ensure, err, Data, Result, Sequence, Tensor, Value, ValueType};

/// Runs one op of the family.
pub fn run(op: &SequenceOp, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    use SequenceOp::*;
    match op {
        SequenceEmpty { dtype } => Ok(vec![Value::Sequence(Sequence {
            elem: Some(ValueType::Tensor {
                dtype: *dtype,
                shape: None,
            }),
            items: vec![],
        })]),
        SequenceConstruct => {
            let items: Vec<Tensor> = (0..x.len())
                .map(|i| x.tensor(i).cloned())
                .collect::<Result<_>>()?;
            let Some(first) = items.first() else {
                bail!(InvalidModel, "SequenceConstruct needs at least one input")
            };
            let dtype = first.dtype();
            if let Some(t) = items.iter().find(|t| t.dtype() != dtype) {
                bail!(
                    InvalidModel,
                    "SequenceConstruct: inputs mix {dtype} and {}",
                    t.dtype()
                );
            }
            let elem = Some(ValueType::Tensor { dtype, shape: None });
            Ok(vec![Value::Sequence(Sequence {
                elem,
                items: items.into_iter().map(Value::Tensor).collect(),
            })])
        }
        SequenceInsert => {
            let mut s = seq(x, 0)?.clone();
            let t = x.tensor(1)?;
            check_elem_dtype(&s, t)?;
            let n = s.items.len();
            let pos = match position(x, 2)? {
                None => n,
                Some(p) => norm_position(p, n, true)?,
            };
            if s.elem.is_none() {
                s.elem = Some(ValueType::Tensor {
                    dtype: t.dtype(),
                    shape: None,
                });
            }
            s.items.insert(pos, Value::Tensor(t.clone()));
            Ok(vec![Value::Sequence(s)])
        }
        SequenceAt => {
            let s = seq(x, 0)?;
            let p =
                position(x, 1)?.ok_or_else(|| err!(InvalidModel, "SequenceAt needs a position"))?;
            let pos = norm_position(p, s.items.len(), false)?;
            Ok(vec![s.items[pos].clone()])
        }
        SequenceErase => {
            let mut s = seq(x, 0)?.clone();
            let n = s.items.len();
            ensure!(n > 0, InvalidInput, "SequenceErase on an empty sequence");
            let pos = match position(x, 1)? {
                None => n - 1,
                Some(p) => norm_position(p, n, false)?,
            };
            s.items.remove(pos);
            Ok(vec![Value::Sequence(s)])
        }
        SequenceLength => one(Tensor::scalar_i64(seq(x, 0)?.items.len() as i64)),
        SplitToSequence { axis, keepdims } => split_to_sequence(x, *axis, *keepdims),
        ConcatFromSequence { axis, new_axis } => {
            let s = seq(x, 0)?;
            let parts: Vec<&Tensor> = s.items.iter().map(Value::tensor).collect::<Result<_>>()?;
            ensure!(
                !parts.is_empty(),
                InvalidInput,
                "ConcatFromSequence of an empty sequence"
            );
            if *new_axis {
                one(stack(&parts, *axis)?)
            } else {
                let ax = norm_axis(*axis, parts[0].rank())?;
                one(concat_axis(&parts, ax)?)
            }
        }
        SequenceMap { body } => sequence_map(body, x, cx),
        Optional { elem } => {
            let v = match x.value(0) {
                Some(v) => smelt_ir::Optional {
                    elem: v.value_type(),
                    value: Some(Box::new(v.clone())),
                },
                None => smelt_ir::Optional {
                    elem: elem.clone(),
                    value: None,
                },
            };
            Ok(vec![Value::Optional(v)])
        }
        OptionalHasElement => {
            let has = match x.value(0) {
                None => false,
                Some(Value::Optional(o)) => o.value.is_some(),
                Some(_) => true,
            };
            one(Tensor::from_bools(vec![], vec![has])?)
        }
        OptionalGetElement => match x.value(0) {
            None => bail!(InvalidModel, "OptionalGetElement needs an input"),
            Some(Value::Optional(o)) => match &o.value {
                Some(v) => Ok(vec![(**v).clone()]),
                None => bail!(InvalidInput, "OptionalGetElement of an empty optional"),
            },
            Some(v) => Ok(vec![v.clone()]),
        },
    }
}

/// Input `i` as a sequence.
fn seq<'a>(x: &Inputs<'a>, i: usize) -> Result<&'a Sequence> {
    match x.value(i) {
        Some(Value::Sequence(s)) => Ok(s),
        Some(v) => bail!(
            InvalidModel,
            "input {i}: expected a sequence, got {}",
            v.kind()
        ),
        None => bail!(InvalidModel, "input {i} (a sequence) is required"),
    }
}

/// An optional scalar position input.
fn position(x: &Inputs, i: usize) -> Result<Option<i64>> {
    match x.opt_ints(i)? {
        None => Ok(None),
        Some(v) => match v.as_slice() {
            [p] => Ok(Some(*p)),
            _ => bail!(
                InvalidModel,
                "input {i}: a position should hold one value, got {}",
                v.len()
            ),
        },
    }
}

/// Resolves a position in a sequence of `n` items: -n..n, or -n..=n when `end_ok` (insertion).
fn norm_position(p: i64, n: usize, end_ok: bool) -> Result<usize> {
    let n = n as i64;
    let hi = if end_ok { n } else { n - 1 };
    ensure!(
        p >= -n && p <= hi,
        InvalidInput,
        "position {p} is out of range for a sequence of {n} items"
    );
    Ok(if p < 0 { p + n } else { p } as usize)
}

fn check_elem_dtype(s: &Sequence, t: &Tensor) -> Result<()> {
    let known = match (&s.elem, s.items.first()) {
        (_, Some(Value::Tensor(f))) => Some(f.dtype()),
        (Some(ValueType::Tensor { dtype, .. }), _) => Some(*dtype),
        _ => None,
    };
    match known {
        Some(d) if d != t.dtype() => bail!(
            InvalidModel,
            "cannot insert a {} tensor into a sequence of {d}",
            t.dtype()
        ),
        _ => Ok(()),
    }
}

fn split_to_sequence(x: &Inputs, axis: i64, keepdims: bool) -> Result<Vec<Value>> {
    let t = x.tensor(0)?;
    let ax = norm_axis(axis, t.rank())?;
    let dim = t.shape()[ax];
    let (lens, squeeze): (Vec<usize>, bool) = match x.opt_tensor(1)? {
        None => (vec![1; dim], !keepdims),
        Some(s) => {
            let v = s.to_i64()?;
            ensure!(
                v.iter().all(|&l| l >= 0),
                InvalidModel,
                "split lengths must be non-negative, got {v:?}"
            );
            if s.rank() == 0 {
                let l = v[0] as usize;
                ensure!(l > 0, InvalidModel, "the split size must be positive");
                let mut lens = vec![l; dim / l];
                if dim % l != 0 {
                    lens.push(dim % l);
                }
                (lens, false)
            } else {
                let lens: Vec<usize> = v.iter().map(|&l| l as usize).collect();
                ensure!(
                    lens.iter().sum::<usize>() == dim,
                    InvalidModel,
                    "split lengths {v:?} do not add up to the axis size {dim}"
                );
                (lens, false)
            }
        }
    };
    let mut items = Vec::with_capacity(lens.len());
    let mut start = 0;
    for l in lens {
        let mut part = slice_axis(t, ax, start, l)?;
        if squeeze {
            let mut shape = part.shape().to_vec();
            shape.remove(ax);
            part = part.reshape(shape)?;
        }
        items.push(Value::Tensor(part));
        start += l;
    }
    let elem = Some(ValueType::Tensor {
        dtype: t.dtype(),
        shape: None,
    });
    Ok(vec![Value::Sequence(Sequence { elem, items })])
}

fn sequence_map(body: &smelt_ir::Graph, x: &Inputs, cx: &Ctx) -> Result<Vec<Value>> {
    let first = seq(x, 0)?;
    let n = first.items.len();
    for i in 1..x.len() {
        if let Some(Value::Sequence(s)) = x.value(i) {
            ensure!(
                s.items.len() == n,
                InvalidInput,
                "SequenceMap: input {i} has {} items, input 0 has {n}",
                s.items.len()
            );
        }
    }
    let mut outs: Vec<Vec<Value>> = vec![Vec::with_capacity(n); body.outputs.len()];
    for k in 0..n {
        let mut inputs = vec![first.items[k].clone()];
        for i in 1..x.len() {
            inputs.push(match x.value(i) {
                Some(Value::Sequence(s)) => s.items[k].clone(),
                Some(v) => v.clone(),
                None => bail!(InvalidModel, "SequenceMap: input {i} is missing"),
            });
        }
        let r = cx
            .run_subgraph(body, inputs)
            .map_err(|e| e.context(format!("SequenceMap item {k}")))?;
        ensure!(
            r.len() == outs.len(),
            InvalidModel,
            "SequenceMap: body returned {} values, expected {}",
            r.len(),
            outs.len()
        );
        for (o, v) in outs.iter_mut().zip(r) {
            o.push(v);
        }
    }
    Ok(outs
        .into_iter()
        .zip(&body.outputs)
        .map(|(items, &id)| {
            let declared = body.value(id).ty.clone().map(|t| match t {
                ValueType::Tensor { dtype, .. } => ValueType::Tensor { dtype, shape: None },
                other => other,
            });
            let elem = declared.or_else(|| items.first().and_then(Value::value_type));
            Value::Sequence(Sequence { elem, items })
        })
        .collect())
}

/// Resolves a possibly negative axis against `rank` (valid: -rank..rank).
pub(crate) fn norm_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    ensure!(
        axis >= -r && axis < r,
        InvalidModel,
        "axis {axis} is out of range for rank {rank}"
    );
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// Elements `start..start+len` along `axis` (the axis is kept, with size `len`).
pub(crate) fn slice_axis(t: &Tensor, axis: usize, start: usize, len: usize) -> Result<Tensor> {
    let shape = t.shape();
    ensure!(
        axis < shape.len(),
        InvalidModel,
        "axis {axis} is out of range for rank {}",
        shape.len()
    );
    let dim = shape[axis];
    ensure!(
        start + len <= dim,
        InvalidModel,
        "slice {start}..{} is out of range for an axis of size {dim}",
        start + len
    );
    let outer: usize = smelt_ir::dims_product(&shape[..axis]);
    let inner: usize = smelt_ir::dims_product(&shape[axis + 1..]);
    let mut idx = Vec::with_capacity(outer * len * inner);
    for o in 0..outer {
        let base = (o * dim + start) * inner;
        idx.extend(base..base + len * inner);
    }
    let mut out_shape = shape.to_vec();
    out_shape[axis] = len;
    t.take(out_shape, &idx)
}

/// Element `i` along `axis`, with that axis removed.
pub(crate) fn select_axis(t: &Tensor, axis: usize, i: usize) -> Result<Tensor> {
    let s = slice_axis(t, axis, i, 1)?;
    let mut shape = s.shape().to_vec();
    shape.remove(axis);
    s.reshape(shape)
}

/// Concatenation along `axis`; every other dimension and the element type must agree.
pub(crate) fn concat_axis(parts: &[&Tensor], axis: usize) -> Result<Tensor> {
    let Some(first) = parts.first() else {
        bail!(InvalidModel, "concatenation of no tensors")
    };
    let shape = first.shape();
    ensure!(
        axis < shape.len(),
        InvalidModel,
        "axis {axis} is out of range for rank {}",
        shape.len()
    );
    for p in parts {
        ensure!(
            p.dtype() == first.dtype(),
            InvalidModel,
            "cannot concatenate {} and {} tensors",
            first.dtype(),
            p.dtype()
        );
        let same = p.rank() == shape.len()
            && p.shape()
                .iter()
                .zip(shape)
                .enumerate()
                .all(|(d, (a, b))| d == axis || a == b);
        ensure!(
            same,
            InvalidModel,
            "cannot concatenate shapes {:?} and {:?} along axis {axis}",
            shape,
            p.shape()
        );
    }
    let outer: usize = smelt_ir::dims_product(&shape[..axis]);
    let inner: usize = smelt_ir::dims_product(&shape[axis + 1..]);
    let data = Data::concat(&parts.iter().map(|p| p.data()).collect::<Vec<_>>())?;
    let mut idx = Vec::with_capacity(data.len());
    for o in 0..outer {
        let mut off = 0;
        for p in parts {
            let chunk = p.shape()[axis] * inner;
            idx.extend(off + o * chunk..off + (o + 1) * chunk);
            off += p.len();
        }
    }
    let mut out_shape = shape.to_vec();
    out_shape[axis] = parts.iter().map(|p| p.shape()[axis]).sum();
    Tensor::new(first.dtype(), out_shape, data.take(&idx))
}

/// Stacks equal-shaped tensors along a new axis (negative counts from the end of the output).
pub(crate) fn stack(parts: &[&Tensor], axis: i64) -> Result<Tensor> {
    let Some(first) = parts.first() else {
        bail!(InvalidModel, "stacking of no tensors")
    };
    let ax = norm_axis(axis, first.rank() + 1)?;
    let expanded: Vec<Tensor> = parts
        .iter()
        .map(|p| {
            ensure!(
                p.shape() == first.shape(),
                InvalidModel,
                "cannot stack shapes {:?} and {:?}",
                first.shape(),
                p.shape()
            );
            let mut s = p.shape().to_vec();
            s.insert(ax, 1);
            (*p).clone().reshape(s)
        })
        .collect::<Result<_>>()?;
    concat_axis(&expanded.iter().collect::<Vec<_>>(), ax)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: Vec<usize>, v: Vec<f32>) -> Tensor {
        Tensor::from_f32(shape, v).unwrap()
    }

    #[test]
    fn slicing_concat_and_stack() {
        let a = t(vec![2, 3], vec![0., 1., 2., 3., 4., 5.]);
        let s = slice_axis(&a, 1, 1, 2).unwrap();
        assert_eq!(s.as_f32().unwrap(), &[1., 2., 4., 5.]);
        assert_eq!(
            select_axis(&a, 0, 1).unwrap().as_f32().unwrap(),
            &[3., 4., 5.]
        );
        let c = concat_axis(&[&a, &s], 1).unwrap();
        assert_eq!(c.shape(), &[2, 5]);
        assert_eq!(
            c.as_f32().unwrap(),
            &[0., 1., 2., 1., 2., 3., 4., 5., 4., 5.]
        );
        let st = stack(&[&a, &a], -1).unwrap();
        assert_eq!(st.shape(), &[2, 3, 2]);
        assert_eq!(st.as_f32().unwrap()[..4], [0., 0., 1., 1.]);
        assert!(slice_axis(&a, 1, 2, 2).is_err());
    }

    #[test]
    fn positions() {
        assert_eq!(norm_position(-1, 3, false).unwrap(), 2);
        assert_eq!(norm_position(3, 3, true).unwrap(), 3);
        assert!(norm_position(3, 3, false).is_err());
        assert!(norm_position(-4, 3, true).is_err());
    }
}
