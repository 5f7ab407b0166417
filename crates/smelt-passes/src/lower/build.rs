//! Assembles kernel groups from the fusion drafts and the placement: every load, store
//! and operand becomes a strided window onto a buffer.

use super::group::{Draft, DraftKind, Fusion, Mapping};
use super::place::{ConcatPlan, Placement};
use super::shape_of_value;
use smelt_ir::kernel::{
    Anchor, Buffer, BufferId, BufferKind, GroupBody, KernelGroup, KernelPlan, Loop, MemoryStats,
    Reduction, Single, Store, TensorRef,
};
use smelt_ir::op::LayoutOp;
use smelt_ir::{bail, err, Graph, Node, Op, Result, Tensor, ValueId};
use std::collections::HashMap;

struct Builder<'a> {
    g: &'a Graph,
    f: &'a Fusion,
    consts: &'a HashMap<ValueId, &'a Tensor>,
    p: Placement,
    weight_of: HashMap<ValueId, TensorRef>,
    /// The constant behind each `BufferKind::Weight` index.
    weight_ids: Vec<ValueId>,
}

impl Builder<'_> {
    /// The window holding a value (a weight gets its buffer on first use).
    fn at(&mut self, v: ValueId) -> Result<TensorRef> {
        if let Some(w) = self.f.views.get(&v) {
            let base = self.root(w.root)?;
            return Ok(TensorRef {
                buffer: base.buffer,
                offset: base.offset + w.offset,
                shape: w.shape.clone(),
                strides: w.strides.clone(),
            });
        }
        self.root(v)
    }

    fn root(&mut self, v: ValueId) -> Result<TensorRef> {
        if let Some(r) = self.p.loc.get(&v) {
            return Ok(r.clone());
        }
        if let Some(r) = self.weight_of.get(&v) {
            return Ok(r.clone());
        }
        let t = self
            .consts
            .get(&v)
            .ok_or_else(|| err!(Internal, "value '{}' has no storage", self.g.name_of(v)))?;
        let shape = t.shape().to_vec();
        self.p.buffers.push(Buffer {
            name: self.g.name_of(v).to_string(),
            dtype: t.dtype(),
            shape: shape.clone(),
            kind: BufferKind::Weight(self.weight_ids.len()),
        });
        self.weight_ids.push(v);
        let r = TensorRef::dense(BufferId(self.p.buffers.len() as u32 - 1), &shape);
        self.weight_of.insert(v, r.clone());
        Ok(r)
    }

    /// Whether the group computing `v` writes it: it is stored, or it is a view of a
    /// stored value that the same group produces (a transposed store).
    fn writes(&self, v: ValueId) -> bool {
        if self.p.stored.contains(&v) {
            return true;
        }
        match self.f.views.get(&v) {
            Some(w) => {
                self.p.stored.contains(&w.root)
                    && self.f.value_group.contains_key(&w.root)
                    && self.f.value_group.get(&w.root) == self.f.value_group.get(&v)
            }
            None => false,
        }
    }

    fn load(&mut self, v: ValueId, map: Mapping, shape: &[usize]) -> Result<TensorRef> {
        let r = self.at(v)?;
        broadcast(&r, shape, map).ok_or_else(|| {
            err!(
                InvalidModel,
                "'{}' of shape {:?} does not broadcast to {shape:?}",
                self.g.name_of(v),
                r.shape
            )
        })
    }

    fn stores(&mut self, d: &Draft, perm: Option<&[usize]>) -> Result<Vec<Store>> {
        let mut vals: Vec<(ValueId, usize)> = d.vals.iter().map(|(&v, &o)| (v, o)).collect();
        vals.sort();
        let (per_row, kept) = match &d.kind {
            DraftKind::Reduction {
                per_row,
                reduce_from,
                ..
            } => (per_row.clone(), *reduce_from),
            _ => (vec![], 0),
        };
        let mut out = Vec::new();
        for (v, op) in vals {
            if !self.writes(v) {
                continue;
            }
            let dst = self.at(v)?;
            let (dst, row) = match perm {
                Some(perm) if per_row.contains(&v) => {
                    (row_ref(&dst, &d.shape, &perm[..kept]), true)
                }
                Some(perm) => (permute(&dst, perm), false),
                None => (dst, false),
            };
            out.push(Store {
                value: op,
                dst,
                per_row: row,
            });
        }
        Ok(out)
    }

    fn loop_of(&mut self, d: &Draft, perm: Option<&[usize]>) -> Result<Loop> {
        let mut loads = Vec::new();
        for &(v, map) in &d.loads {
            let r = self.load(v, map, &d.shape)?;
            loads.push(match perm {
                Some(p) => permute(&r, p),
                None => r,
            });
        }
        let shape = match perm {
            Some(p) => p.iter().map(|&a| d.shape[a]).collect(),
            None => d.shape.clone(),
        };
        Ok(Loop {
            shape,
            loads,
            ops: d.body.ops.clone(),
            stores: self.stores(d, perm)?,
        })
    }

    fn operands(&mut self, ins: &[Option<ValueId>]) -> Result<Vec<Option<TensorRef>>> {
        ins.iter()
            .map(|v| v.map(|v| self.at(v)).transpose())
            .collect()
    }
}

/// Builds the plan (arena offsets still zero, weights not yet filled in) and the constant
/// behind each weight index.
pub fn build(
    g: &Graph,
    f: &Fusion,
    p: Placement,
    consts: &HashMap<ValueId, &Tensor>,
) -> Result<(KernelPlan, Vec<ValueId>)> {
    let mut b = Builder {
        g,
        f,
        consts,
        p,
        weight_of: HashMap::new(),
        weight_ids: Vec::new(),
    };
    let mut groups = Vec::new();
    for d in &f.drafts {
        let names = |idx: &[usize]| -> (Vec<String>, Vec<String>) {
            idx.iter()
                .map(|&i| (g.nodes[i].op.name().to_string(), g.nodes[i].name.clone()))
                .unzip()
        };
        let (ops, nodes) = names(&d.members);
        let body = match &d.kind {
            DraftKind::Elementwise => GroupBody::Elementwise(b.loop_of(d, None)?),
            DraftKind::Reduction {
                perm,
                reduce_from,
                stages,
                ..
            } => GroupBody::Reduction(Reduction {
                body: b.loop_of(d, Some(perm))?,
                reduce_from: *reduce_from,
                stages: stages.clone(),
            }),
            DraftKind::Anchor(i) => {
                let n = &g.nodes[*i];
                GroupBody::Anchor(Anchor {
                    op: n.op.clone(),
                    inputs: b.operands(&n.inputs)?,
                    shape: d.shape.clone(),
                    epilogue: b.loop_of(d, None)?,
                })
            }
            DraftKind::Single(i) => {
                let n = &g.nodes[*i];
                if let Some(body) = reshape_copy(&mut b, n)? {
                    groups.push(KernelGroup {
                        ops,
                        nodes,
                        body,
                        choice: Default::default(),
                    });
                    continue;
                }
                let mut outputs = Vec::new();
                for o in &n.outputs {
                    outputs.push(match o {
                        Some(o) if b.writes(*o) => Some(b.at(*o)?),
                        _ => None,
                    });
                }
                GroupBody::Single(Single {
                    op: n.op.clone(),
                    inputs: b.operands(&n.inputs)?,
                    outputs,
                })
            }
            DraftKind::Concat(i) => {
                let n = &g.nodes[*i];
                match b.p.concats.get(i).cloned() {
                    Some(ConcatPlan::Pieces(pieces)) => {
                        let out =
                            n.outputs[0].ok_or_else(|| err!(Internal, "Concat without output"))?;
                        let whole = b.at(out)?;
                        let axis = concat_axis(g, *i, whole.shape.len())?;
                        let mut start = 0usize;
                        for (v, in_place) in n.inputs.iter().flatten().zip(pieces) {
                            let src = b.at(*v)?;
                            let len = src.shape[axis];
                            if !in_place {
                                let mut dst = whole.clone();
                                dst.offset += start * whole.strides[axis] as usize;
                                dst.shape = src.shape.clone();
                                groups.push(KernelGroup {
                                    ops: ops.clone(),
                                    nodes: nodes.clone(),
                                    body: GroupBody::Copy { src, dst },
                                    choice: Default::default(),
                                });
                            }
                            start += len;
                        }
                        continue;
                    }
                    Some(ConcatPlan::Dead) => continue,
                    _ => GroupBody::Single(Single {
                        op: n.op.clone(),
                        inputs: b.operands(&n.inputs)?,
                        outputs: vec![n.outputs[0].map(|o| b.at(o)).transpose()?],
                    }),
                }
            }
        };
        groups.push(KernelGroup {
            ops,
            nodes,
            body,
            choice: Default::default(),
        });
    }
    for (i, v) in b.p.output_copies.clone() {
        let src = b.at(v)?;
        let buf =
            b.p.buffers
                .iter()
                .position(|x| x.kind == BufferKind::Output(i))
                .ok_or_else(|| err!(Internal, "output {i} has no buffer"))?;
        let shape = shape_of_value(g, v).unwrap_or_default();
        groups.push(KernelGroup {
            ops: vec!["Copy".into()],
            nodes: vec![g.name_of(v).to_string()],
            body: GroupBody::Copy {
                src,
                dst: TensorRef::dense(BufferId(buf as u32), &shape),
            },
            choice: Default::default(),
        });
    }
    let outputs = g
        .outputs
        .iter()
        .enumerate()
        .map(|(i, &o)| {
            let buf =
                b.p.buffers
                    .iter()
                    .position(|x| x.kind == BufferKind::Output(i));
            (g.name_of(o).to_string(), BufferId(buf.unwrap_or(0) as u32))
        })
        .collect();
    let concat_in_place =
        b.p.concats
            .values()
            .filter(|c| matches!(c, ConcatPlan::Pieces(_)))
            .count();
    let plan = KernelPlan {
        buffers: b.p.buffers,
        weights: Vec::new(),
        inputs: g
            .inputs
            .iter()
            .map(|i| g.name_of(i.id).to_string())
            .collect(),
        outputs,
        groups,
        rejected: f.rejected.clone(),
        memory: MemoryStats {
            concat_in_place,
            ..MemoryStats::default()
        },
    };
    Ok((plan, b.weight_ids))
}

fn concat_axis(g: &Graph, node: usize, rank: usize) -> Result<usize> {
    let smelt_ir::Op::Layout(smelt_ir::op::LayoutOp::Concat { axis }) = g.nodes[node].op else {
        bail!(Internal, "not a Concat");
    };
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    usize::try_from(a).map_err(|_| err!(InvalidModel, "Concat axis {axis} out of range"))
}

/// A window broadcast onto `shape` (None when the shapes do not broadcast).
fn broadcast(r: &TensorRef, shape: &[usize], map: Mapping) -> Option<TensorRef> {
    let mut strides = vec![0isize; shape.len()];
    match map {
        Mapping::Numpy => {
            let off = shape.len().checked_sub(r.shape.len())?;
            for d in 0..r.shape.len() {
                if r.shape[d] == shape[d + off] {
                    strides[d + off] = r.strides[d];
                } else if r.shape[d] != 1 {
                    return None;
                }
            }
        }
        Mapping::Channel => {
            if r.shape.len() != 1 || shape.len() < 2 || r.shape[0] != shape[1] {
                return None;
            }
            strides[1] = r.strides[0];
        }
    }
    Some(TensorRef {
        buffer: r.buffer,
        offset: r.offset,
        shape: shape.to_vec(),
        strides,
    })
}

/// A window with its dims in iteration order.
fn permute(r: &TensorRef, perm: &[usize]) -> TensorRef {
    TensorRef {
        buffer: r.buffer,
        offset: r.offset,
        shape: perm.iter().map(|&a| r.shape[a]).collect(),
        strides: perm.iter().map(|&a| r.strides[a]).collect(),
    }
}

/// The per-row destination of a reduction whose natural shape is `shape` and whose
/// kept dims are `kept`: indexed by the kept dims, whether or not the output keeps the
/// reduced dims as ones.
fn row_ref(dst: &TensorRef, shape: &[usize], kept: &[usize]) -> TensorRef {
    let (shape_k, strides): (Vec<usize>, Vec<isize>) = if dst.shape.len() == shape.len() {
        kept.iter().map(|&a| (dst.shape[a], dst.strides[a])).unzip()
    } else {
        (dst.shape.clone(), dst.strides.clone())
    };
    TensorRef {
        buffer: dst.buffer,
        offset: dst.offset,
        shape: shape_k,
        strides,
    }
}

/// A Reshape, Flatten, Squeeze or Unsqueeze that fusion left to run alone (its input a
/// window no reshape of it can view, as a transposed blocked value leaving the blocked
/// layout) as a copy: the input's elements in row-major order into the dense output, read
/// through the output at the input's shape. None for other nodes, strings, and outputs
/// the group does not write.
fn reshape_copy(b: &mut Builder, n: &Node) -> Result<Option<GroupBody>> {
    if !matches!(
        n.op,
        Op::Layout(
            LayoutOp::Reshape { .. }
                | LayoutOp::Flatten { .. }
                | LayoutOp::Squeeze { .. }
                | LayoutOp::Unsqueeze { .. }
        )
    ) {
        return Ok(None);
    }
    let (Some(Some(x)), Some(Some(y))) = (n.inputs.first(), n.outputs.first()) else {
        return Ok(None);
    };
    // (Strings are not copied by the copy kernel.)
    if !b.writes(*y) || super::dtype_of(b.g, *x).is_none_or(|t| t == smelt_ir::DType::Str) {
        return Ok(None);
    }
    let (src, out) = (b.at(*x)?, b.at(*y)?);
    let count = |s: &[usize]| s.iter().product::<usize>();
    if !out.is_contiguous() || count(&src.shape) != count(&out.shape) {
        return Ok(None);
    }
    let dst = TensorRef {
        strides: super::views::dense_strides(&src.shape),
        shape: src.shape.clone(),
        ..out
    };
    Ok(Some(GroupBody::Copy { src, dst }))
}
