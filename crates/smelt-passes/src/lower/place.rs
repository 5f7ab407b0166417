//! Placement: which values are stored, and where. Graph outputs are written straight
//! into the caller's output tensors, Concat pieces into their slot of the result when
//! they can be, every other stored value gets its own arena buffer (offsets come later).

use super::group::{DraftKind, Fusion};
use super::views::dense_strides;
use super::{dtype_of, shape_of_value};
use smelt_ir::kernel::{Buffer, BufferId, BufferKind, TensorRef};
use smelt_ir::op::LayoutOp;
use smelt_ir::{err, Graph, Op, Result, Tensor, ValueId};
use std::collections::{HashMap, HashSet};

/// How a Concat runs.
#[derive(Debug, Clone)]
pub enum ConcatPlan {
    /// Pieces in order: true when the producer writes it in place, false when copied.
    Pieces(Vec<bool>),
    /// As one op.
    Whole,
    /// Its result is unused.
    Dead,
}

/// Where everything lives.
pub struct Placement {
    /// Every buffer so far (weights are added as they are referenced).
    pub buffers: Vec<Buffer>,
    /// Storage of each stored or external value (dense blocks).
    pub loc: HashMap<ValueId, TensorRef>,
    /// Values some kernel must write.
    pub stored: HashSet<ValueId>,
    /// Graph outputs that need a copy into their output buffer: (output index, value).
    pub output_copies: Vec<(usize, ValueId)>,
    /// How each Concat node runs.
    pub concats: HashMap<usize, ConcatPlan>,
}

fn new_buffer(
    buffers: &mut Vec<Buffer>,
    g: &Graph,
    v: ValueId,
    kind: BufferKind,
) -> Result<TensorRef> {
    let shape = shape_of_value(g, v)
        .ok_or_else(|| err!(Internal, "value '{}' has no shape", g.name_of(v)))?;
    let dtype =
        dtype_of(g, v).ok_or_else(|| err!(Internal, "value '{}' has no type", g.name_of(v)))?;
    buffers.push(Buffer {
        name: g.name_of(v).to_string(),
        dtype,
        shape: shape.clone(),
        kind,
    });
    Ok(TensorRef::dense(BufferId(buffers.len() as u32 - 1), &shape))
}

/// Decides storage for the fused graph.
pub fn place(g: &Graph, f: &Fusion, consts: &HashMap<ValueId, &Tensor>) -> Result<Placement> {
    let stored = stored_values(g, f);
    let mut p = Placement {
        buffers: Vec::new(),
        loc: HashMap::new(),
        stored,
        output_copies: Vec::new(),
        concats: HashMap::new(),
    };
    for (i, input) in g.inputs.iter().enumerate() {
        let r = new_buffer(&mut p.buffers, g, input.id, BufferKind::Input(i))?;
        p.loc.insert(input.id, r);
    }
    for (i, &o) in g.outputs.iter().enumerate() {
        let r = new_buffer(&mut p.buffers, g, o, BufferKind::Output(i))?;
        let own = !f.views.contains_key(&o)
            && f.value_group.contains_key(&o)
            && !p.loc.contains_key(&o)
            && !consts.contains_key(&o);
        if own {
            p.loc.insert(o, r);
        } else {
            p.output_copies.push((i, o));
        }
    }
    place_concats(g, f, &mut p)?;
    let mut rest: Vec<ValueId> = p
        .stored
        .iter()
        .copied()
        .filter(|v| !p.loc.contains_key(v))
        .collect();
    rest.sort();
    for v in rest {
        if f.value_group.contains_key(&v) {
            let r = new_buffer(&mut p.buffers, g, v, BufferKind::Arena { offset: 0 })?;
            p.loc.insert(v, r);
        }
    }
    Ok(p)
}

/// When `ins` starts with views that are, in order, the consecutive dense parts of one
/// stored value that has no storage yet: that value and how many pieces it covers.
fn split_run(
    g: &Graph,
    f: &Fusion,
    p: &Placement,
    ins: &[ValueId],
    dtype: Option<smelt_ir::DType>,
) -> Option<(ValueId, usize)> {
    let first = f.views.get(ins.first()?)?;
    let root = first.root;
    let root_len: usize = shape_of_value(g, root)?.iter().product();
    let ok_root = f.value_group.contains_key(&root)
        && !p.loc.contains_key(&root)
        && p.stored.contains(&root)
        && dtype_of(g, root) == dtype;
    if !ok_root {
        return None;
    }
    let mut at = 0usize;
    for (count, v) in ins.iter().enumerate() {
        let w = f.views.get(v).filter(|w| w.root == root)?;
        let dense = dense_strides(&w.shape);
        let contiguous = w
            .shape
            .iter()
            .zip(w.strides.iter().zip(&dense))
            .all(|(&n, (s, d))| n == 1 || s == d);
        if w.offset != at || !contiguous {
            return None;
        }
        at += w.shape.iter().product::<usize>();
        if at == root_len {
            return Some((root, count + 1));
        }
    }
    None
}

/// Values produced by one group and read outside it (or graph outputs).
fn stored_values(g: &Graph, f: &Fusion) -> HashSet<ValueId> {
    let mut stored = HashSet::new();
    let root = |v: ValueId| f.views.get(&v).map_or(v, |w| w.root);
    for (j, n) in g.nodes.iter().enumerate() {
        let cg = f.node_group[j];
        if f.is_deferred(n) {
            continue;
        }
        // A deferred dequantization is computed in the reader's group from its inputs.
        let inputs = n.inputs.iter().flatten().flat_map(|&v| f.sources(g, v));
        for v in inputs {
            if f.views.contains_key(&v) {
                stored.insert(root(v));
            } else if cg.is_none() || f.value_group.get(&v) != cg.as_ref() {
                stored.insert(v);
            }
        }
    }
    for &o in &g.outputs {
        stored.insert(root(o));
    }
    stored.retain(|v| f.value_group.contains_key(v));
    stored
}

fn place_concats(g: &Graph, f: &Fusion, p: &mut Placement) -> Result<()> {
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    for d in &f.drafts {
        if let DraftKind::Concat(i) = d.kind {
            for v in g.nodes[i].inputs.iter().flatten() {
                *uses.entry(*v).or_default() += 1;
            }
        }
    }
    for d in f.drafts.iter().rev() {
        let DraftKind::Concat(i) = d.kind else {
            continue;
        };
        let n = &g.nodes[i];
        let Some(out) = n.outputs.first().copied().flatten() else {
            p.concats.insert(i, ConcatPlan::Dead);
            continue;
        };
        if !p.stored.contains(&out) {
            p.concats.insert(i, ConcatPlan::Dead);
            continue;
        }
        if !p.loc.contains_key(&out) {
            let r = new_buffer(&mut p.buffers, g, out, BufferKind::Arena { offset: 0 })?;
            p.loc.insert(out, r);
        }
        let Op::Layout(LayoutOp::Concat { axis }) = n.op else {
            continue;
        };
        let shape = shape_of_value(g, out).unwrap_or_default();
        let r = shape.len() as i64;
        let a = usize::try_from(if axis < 0 { axis + r } else { axis })
            .ok()
            .filter(|&a| a < shape.len());
        let Some(a) = a.filter(|&a| shape[..a].iter().product::<usize>() == 1) else {
            // A bad axis is the Concat kernel's to report; non-contiguous slots are copied.
            p.concats.insert(i, ConcatPlan::Whole);
            continue;
        };
        let inner: usize = smelt_ir::dims_product(&shape[a + 1..]);
        let base = p.loc[&out].clone();
        let out_dt = dtype_of(g, out);
        let ins: Vec<ValueId> = n.inputs.iter().flatten().copied().collect();
        let mut start = 0usize;
        let mut pieces = Vec::new();
        let mut k = 0;
        while k < ins.len() {
            let v = ins[k];
            let vs = shape_of_value(g, v).unwrap_or_default();
            let len = vs.get(a).copied().unwrap_or(0);
            if let Some(run) = split_run(g, f, p, &ins[k..], out_dt) {
                // The pieces are the consecutive parts of one stored value (a Split):
                // that value is written into the result directly.
                let (root, count) = run;
                let rs = shape_of_value(g, root).unwrap_or_default();
                let rlen: usize = ins[k..k + count]
                    .iter()
                    .map(|v| {
                        shape_of_value(g, *v)
                            .and_then(|s| s.get(a).copied())
                            .unwrap_or(0)
                    })
                    .sum();
                p.loc.insert(
                    root,
                    TensorRef {
                        buffer: base.buffer,
                        offset: base.offset + start * inner,
                        strides: dense_strides(&rs),
                        shape: rs,
                    },
                );
                pieces.extend(std::iter::repeat_n(true, count));
                start += rlen;
                k += count;
                continue;
            }
            let ok = !f.views.contains_key(&v)
                && f.value_group.contains_key(&v)
                && !p.loc.contains_key(&v)
                && uses.get(&v) == Some(&1)
                && dtype_of(g, v) == out_dt
                && p.stored.contains(&v);
            if ok {
                p.loc.insert(
                    v,
                    TensorRef {
                        buffer: base.buffer,
                        offset: base.offset + start * inner,
                        strides: dense_strides(&vs),
                        shape: vs,
                    },
                );
            }
            pieces.push(ok);
            start += len;
            k += 1;
        }
        let plan = if pieces.iter().any(|&x| x) {
            ConcatPlan::Pieces(pieces)
        } else {
            ConcatPlan::Whole
        };
        p.concats.insert(i, plan);
    }
    Ok(())
}
