//! Fusion: walks the graph in order and forms kernel groups. Elementwise ops join the
//! group that computes their latest input when the iteration space matches (an
//! elementwise chain, a reduction's epilogue or an anchor's epilogue); every refusal is
//! recorded with its reason.

use super::pointwise::{self, Body};
use super::reduction;
use super::views::{self, View};
use super::{dtype_of, shape_of_value};
use smelt_ir::kernel::{RejectedFusion, ScalarOp, Stage};
use smelt_ir::op::{LayoutOp, NnOp};
use smelt_ir::{DType, Graph, Node, Op, Result, Tensor, ValueId};
use std::collections::HashMap;

/// How a load maps a tensor onto a group's (natural-order) iteration space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mapping {
    /// Numpy broadcasting, right-aligned.
    Numpy,
    /// A 1-D per-channel vector along axis 1 (BatchNormalization parameters).
    Channel,
}

/// What a draft group runs.
#[derive(Debug, Clone)]
pub enum DraftKind {
    /// An elementwise loop.
    Elementwise,
    /// A reduction: `perm` orders the iteration dims (kept, then reduced).
    Reduction {
        /// Iteration order of the natural dims.
        perm: Vec<usize>,
        /// Number of kept dims.
        reduce_from: usize,
        /// Stages.
        stages: Vec<Stage>,
        /// The values that are one per row, with their output shapes.
        per_row: Vec<ValueId>,
    },
    /// An anchor node (index) with an epilogue.
    Anchor(usize),
    /// One node run whole.
    Single(usize),
    /// A Concat node: placement decides between in-place pieces, copies or a single op.
    Concat(usize),
}

/// A group being formed.
#[derive(Debug, Clone)]
pub struct Draft {
    /// What it runs.
    pub kind: DraftKind,
    /// The natural iteration shape (loops) or the anchor's result shape.
    pub shape: Vec<usize>,
    /// The loop body.
    pub body: Body,
    /// Loads: the value read and how it maps onto the iteration space.
    pub loads: Vec<(ValueId, Mapping)>,
    load_ops: HashMap<(ValueId, Mapping), usize>,
    /// Member values and the instruction computing each.
    pub vals: HashMap<ValueId, usize>,
    /// Member node indices, in graph order.
    pub members: Vec<usize>,
}

impl Draft {
    fn new(kind: DraftKind, shape: Vec<usize>) -> Draft {
        Draft {
            kind,
            shape,
            body: Body::default(),
            loads: Vec::new(),
            load_ops: HashMap::new(),
            vals: HashMap::new(),
            members: Vec::new(),
        }
    }
}

/// The result of fusion.
pub struct Fusion {
    /// Groups in run order.
    pub drafts: Vec<Draft>,
    /// Views: value -> window onto a stored value.
    pub views: HashMap<ValueId, View>,
    /// Which draft each node belongs to (None for views).
    pub node_group: Vec<Option<usize>>,
    /// Which draft computes each non-view value.
    pub value_group: HashMap<ValueId, usize>,
    /// Fusions not done.
    pub rejected: Vec<RejectedFusion>,
    /// DequantizeLinear nodes computed where their value is read (output -> node index):
    /// each reading group loads the 8-bit input and dequantizes it in its own loop, so the
    /// f32 value is never stored (see [`deferred_dequantizations`]).
    pub deferred: HashMap<ValueId, usize>,
}

/// Anchor ops: run whole, then an elementwise epilogue over their result.
fn is_anchor(g: &Graph, n: &Node) -> bool {
    let single_out = n.outputs.len() == 1 || n.outputs.iter().skip(1).all(|o| o.is_none());
    let out = n.outputs[0].and_then(|o| dtype_of(g, o));
    let integer = matches!(
        n.op,
        Op::Quant(smelt_ir::op::QuantOp::ConvInteger { .. } | smelt_ir::op::QuantOp::MatMulInteger)
    );
    if integer {
        return single_out && out == Some(DType::I32);
    }
    single_out
        && out == Some(DType::F32)
        && matches!(
            n.op,
            Op::Nn(
                NnOp::MatMul
                    | NnOp::Gemm { .. }
                    | NnOp::Conv { .. }
                    | NnOp::ConvBlocked { .. }
                    | NnOp::ConvTranspose { .. }
                    | NnOp::Attention { .. }
                    | NnOp::MaxPool { .. }
                    | NnOp::AveragePool { .. }
            ) | Op::Misc(smelt_ir::op::MiscOp::Resize { .. })
        )
}

impl Fusion {
    /// Whether `n` is a deferred dequantization (computed where it is read).
    pub fn is_deferred(&self, n: &Node) -> bool {
        n.outputs
            .first()
            .copied()
            .flatten()
            .is_some_and(|o| self.deferred.contains_key(&o))
    }

    /// The values a group reads to have `v`: a deferred dequantization's inputs, else `v`.
    pub fn sources(&self, g: &Graph, v: ValueId) -> Vec<ValueId> {
        match self.deferred.get(&v) {
            Some(&i) => g.nodes[i].inputs.iter().flatten().copied().collect(),
            None => vec![v],
        }
    }
}

/// Forms the groups of a graph whose values all have concrete shapes.
pub fn fuse(g: &Graph, consts: &HashMap<ValueId, &Tensor>) -> Result<Fusion> {
    let mut f = Fusion {
        drafts: Vec::new(),
        views: HashMap::new(),
        node_group: vec![None; g.nodes.len()],
        value_group: HashMap::new(),
        rejected: Vec::new(),
        deferred: HashMap::new(),
    };
    let readers = readers(g);
    f.deferred = deferred_dequantizations(g, &readers);
    let transposed = transposed_stores(g, &readers);
    for (i, n) in g.nodes.iter().enumerate() {
        if f.is_deferred(n) {
            continue;
        }
        if let Some(&v) = transposed.get(&i) {
            store_transposed(g, n, v, &mut f);
            continue;
        }
        if try_view(g, n, consts, &mut f) {
            continue;
        }
        if let (Op::Elementwise(_), Some(reason)) = (&n.op, pointwise::unfusible_reason(g, n)) {
            f.rejected.push(RejectedFusion {
                node: n.name.clone(),
                into: String::new(),
                reason: format!("runs alone: {reason}"),
            });
        }
        let out_shape = n
            .outputs
            .first()
            .copied()
            .flatten()
            .and_then(|o| shape_of_value(g, o));
        let gi = if matches!(n.op, Op::Layout(LayoutOp::Concat { .. })) {
            new_group(&mut f, Draft::new(DraftKind::Concat(i), vec![]))
        } else if let (None, Some(shape)) = (pointwise::unfusible_reason(g, n), out_shape.clone()) {
            pointwise_node(g, n, shape, consts, &mut f)
        } else if let Some(gi) = reduction_node(g, i, n, consts, &readers, &mut f) {
            gi
        } else if is_anchor(g, n) && out_shape.is_some() {
            let mut d = Draft::new(DraftKind::Anchor(i), out_shape.unwrap_or_default());
            let acc = d.body.push(ScalarOp::Acc);
            if let Some(o) = n.outputs[0] {
                d.vals.insert(o, acc);
            }
            new_group(&mut f, d)
        } else {
            new_group(&mut f, Draft::new(DraftKind::Single(i), vec![]))
        };
        f.node_group[i] = Some(gi);
        f.drafts[gi].members.push(i);
        for o in n.outputs.iter().flatten() {
            f.value_group.insert(*o, gi);
        }
    }
    Ok(f)
}

/// DequantizeLinear nodes whose every reader is an elementwise op that fuses (so each
/// can dequantize in its own loop), not a graph output: their output value -> node index.
/// Joining the group that computes the 8-bit input instead would store the f32 value
/// beside the bytes that group stores anyway for the products that read them (a QDQ
/// model's skip connection: four bytes an element written and read again, not one).
fn deferred_dequantizations(g: &Graph, readers: &Readers) -> HashMap<ValueId, usize> {
    let mut out = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if !matches!(
            n.op,
            Op::Quant(smelt_ir::op::QuantOp::DequantizeLinear { .. })
        ) || pointwise::unfusible_reason(g, n).is_some()
        {
            continue;
        }
        let Some(o) = n.outputs.first().copied().flatten() else {
            continue;
        };
        let rs = readers.get(&o).map_or(&[][..], Vec::as_slice);
        // (Not BatchNormalization: it reads its parameters per channel, a mapping the
        // dequantization's own operands may not take.)
        let fusing_reader = |j: &usize| {
            let r = &g.nodes[*j];
            !is_view_op(&r.op)
                && !matches!(r.op, Op::Nn(NnOp::BatchNormalization { .. }))
                && pointwise::unfusible_reason(g, r).is_none()
                && r.outputs
                    .first()
                    .copied()
                    .flatten()
                    .is_some_and(|v| shape_of_value(g, v).is_some())
        };
        if !g.outputs.contains(&o) && !rs.is_empty() && rs.iter().all(fusing_reader) {
            out.insert(o, i);
        }
    }
    out
}

/// Transpose nodes whose input is computed only for them: the producer stores its
/// result already transposed (node index -> the transposed value).
fn transposed_stores(g: &Graph, readers: &Readers) -> HashMap<usize, ValueId> {
    let produced: std::collections::HashSet<ValueId> = g
        .nodes
        .iter()
        .filter(|n| !is_view_op(&n.op) && !matches!(n.op, Op::Layout(LayoutOp::Concat { .. })))
        .flat_map(|n| n.outputs.iter().flatten().copied())
        .collect();
    g.nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let Op::Layout(LayoutOp::Transpose { perm }) = &n.op else {
                return None;
            };
            // Only a true permutation (a malformed one is left to the Transpose kernel).
            if let Some(p) = perm {
                let r = p.len() as i64;
                let mut seen: Vec<i64> = p.iter().map(|&a| if a < 0 { a + r } else { a }).collect();
                seen.sort_unstable();
                if !seen.iter().copied().eq(0..r) {
                    return None;
                }
            }
            let v = n.inputs.first().copied().flatten()?;
            let out = n.outputs.first().copied().flatten()?;
            let ok = produced.contains(&v)
                && readers.get(&v).is_some_and(|r| r.len() == 1)
                && !g.outputs.contains(&v)
                && shape_of_value(g, v).is_some()
                && shape_of_value(g, out).is_some();
            ok.then_some((i, v))
        })
        .collect()
}

/// The nodes reading each value, once per input slot.
type Readers = HashMap<ValueId, Vec<usize>>;

fn readers(g: &Graph) -> Readers {
    let mut r: Readers = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for v in n.inputs.iter().flatten() {
            r.entry(*v).or_default().push(i);
        }
    }
    r
}

/// Ops that may become views (their outputs are then not stored by them).
fn is_view_op(op: &Op) -> bool {
    matches!(
        op,
        Op::Layout(
            LayoutOp::Identity
                | LayoutOp::Reshape { .. }
                | LayoutOp::Flatten { .. }
                | LayoutOp::Squeeze { .. }
                | LayoutOp::Unsqueeze { .. }
                | LayoutOp::Transpose { .. }
                | LayoutOp::Expand
                | LayoutOp::Slice { .. }
                | LayoutOp::Split { .. }
                | LayoutOp::Gather { .. }
        ) | Op::Nn(NnOp::Dropout { .. })
            | Op::Elementwise(smelt_ir::op::ElementwiseOp::Cast { .. })
    )
}

/// Makes the Transpose's result the stored value and its input a view of it, so the
/// input's producer writes the transposed layout directly.
fn store_transposed(g: &Graph, n: &Node, v: ValueId, f: &mut Fusion) {
    let Some(out) = n.outputs.first().copied().flatten() else {
        return;
    };
    let (Some(shape), Some(v_shape)) = (shape_of_value(g, out), shape_of_value(g, v)) else {
        return;
    };
    let r = shape.len();
    let perm: Vec<usize> = match &n.op {
        Op::Layout(LayoutOp::Transpose { perm: Some(p) }) => p
            .iter()
            .map(|&a| (if a < 0 { a + r as i64 } else { a }) as usize)
            .collect(),
        _ => (0..r).rev().collect(),
    };
    // out's dim k is v's dim perm[k], so v's dim perm[k] steps like out's dim k.
    let dense = views::dense_strides(&shape);
    let mut strides = vec![0isize; r];
    for (k, &p) in perm.iter().enumerate() {
        if let Some(s) = strides.get_mut(p) {
            *s = dense[k];
        }
    }
    f.views.insert(
        v,
        View {
            root: out,
            offset: 0,
            shape: v_shape,
            strides,
        },
    );
    if let Some(&gi) = f.value_group.get(&v) {
        f.value_group.insert(out, gi);
    }
}

fn new_group(f: &mut Fusion, d: Draft) -> usize {
    f.drafts.push(d);
    f.drafts.len() - 1
}

/// Records a view node; false when the node is not a view (it then runs as a kernel,
/// or as a copy when it is a reshape that needs one).
fn try_view(g: &Graph, n: &Node, consts: &HashMap<ValueId, &Tensor>, f: &mut Fusion) -> bool {
    let Some(input) = n.inputs.first().copied().flatten() else {
        return false;
    };
    let Some(base) = view_or_dense(g, f, input) else {
        return false;
    };
    if matches!(n.op, Op::Layout(LayoutOp::Split { .. })) {
        if let Some(vs) = views::split_views(g, n, &base) {
            for (o, v) in n.outputs.iter().zip(vs) {
                if let (Some(o), Some(v)) = (o, v) {
                    f.views.insert(*o, v);
                }
            }
            return true;
        }
        return false;
    }
    if let Some(v) = views::view_of(g, n, consts, &base) {
        if let Some(o) = n.outputs[0] {
            f.views.insert(o, v);
        }
        return true;
    }
    false
}

/// The window a value is: its view, or the whole of it.
pub fn view_or_dense(g: &Graph, f: &Fusion, v: ValueId) -> Option<View> {
    match f.views.get(&v) {
        Some(w) => Some(w.clone()),
        None => Some(View::dense(v, &shape_of_value(g, v)?)),
    }
}

/// The draft whose run makes `v`'s data ready (None for inputs and weights).
fn ready_group(f: &Fusion, v: ValueId) -> Option<usize> {
    let root = f.views.get(&v).map_or(v, |w| w.root);
    f.value_group.get(&root).copied()
}

/// An instruction reading `v` in draft `gi`: a member value directly, a deferred
/// dequantization computed here from its bytes, else a load (scalar constants of f32 or
/// small integers become immediates).
fn operand(
    g: &Graph,
    f: &mut Fusion,
    gi: usize,
    v: ValueId,
    map: Mapping,
    consts: &HashMap<ValueId, &Tensor>,
) -> usize {
    if let Some(&op) = f.drafts[gi].vals.get(&v) {
        return op;
    }
    if let Some(&i) = f.deferred.get(&v) {
        // Dequantized here, from the 8-bit input.
        let n = &g.nodes[i];
        let args: Vec<Option<usize>> = n
            .inputs
            .iter()
            .map(|x| x.map(|x| operand(g, f, gi, x, map, consts)))
            .collect();
        let d = &mut f.drafts[gi];
        // unfusible_reason vetted the op: emit never fails for it.
        let out = pointwise::emit(&n.op, &args, &mut d.body).unwrap_or(0);
        d.vals.insert(v, out);
        if !d.members.contains(&i) {
            d.members.push(i);
        }
        return out;
    }
    let d = &mut f.drafts[gi];
    // Scalar constants become immediates: f32 ones, and integers of at most 16 bits (f32
    // holds them exactly; a zero point was otherwise a load, refilling a chunk with its one
    // value for every chunk: 9% of onnxruntime's QDQ MiniLM's run).
    if let Some(t) = consts.get(&v) {
        let exact = matches!(
            t.dtype(),
            DType::F32 | DType::U8 | DType::I8 | DType::U16 | DType::I16
        );
        if t.len() == 1 && exact {
            if let Ok(x) = t.to_f64() {
                return d.body.push(ScalarOp::Const(x[0] as f32));
            }
        }
    }
    if let Some(&op) = d.load_ops.get(&(v, map)) {
        return op;
    }
    d.loads.push((v, map));
    let op = d.body.push(ScalarOp::Load(d.loads.len() - 1));
    d.load_ops.insert((v, map), op);
    op
}

fn pointwise_node(
    g: &Graph,
    n: &Node,
    shape: Vec<usize>,
    consts: &HashMap<ValueId, &Tensor>,
    f: &mut Fusion,
) -> usize {
    let latest = n
        .inputs
        .iter()
        .flatten()
        .flat_map(|&v| f.sources(g, v))
        .filter_map(|v| ready_group(f, v))
        .max();
    let target = latest.and_then(|gi| match join_refusal(g, f, n, gi, &shape) {
        None => Some(gi),
        Some(reason) => {
            let into = d_name(g, &f.drafts[gi]);
            f.rejected.push(RejectedFusion {
                node: n.name.clone(),
                into,
                reason,
            });
            None
        }
    });
    let gi = target.unwrap_or_else(|| new_group(f, Draft::new(DraftKind::Elementwise, shape)));
    let bn = matches!(n.op, Op::Nn(NnOp::BatchNormalization { .. }));
    let args: Vec<Option<usize>> = n
        .inputs
        .iter()
        .enumerate()
        .map(|(k, v)| {
            let map = if bn && k > 0 {
                Mapping::Channel
            } else {
                Mapping::Numpy
            };
            v.map(|v| operand(g, f, gi, v, map, consts))
        })
        .collect();
    let d = &mut f.drafts[gi];
    // A quantization's range is its output's type (an attribute, the zero point's, or u8).
    let op = match &n.op {
        Op::Quant(smelt_ir::op::QuantOp::QuantizeLinear {
            axis,
            block_size,
            saturate,
            precision,
            ..
        }) => Op::Quant(smelt_ir::op::QuantOp::QuantizeLinear {
            axis: *axis,
            block_size: *block_size,
            output_dtype: n.outputs[0].and_then(|o| dtype_of(g, o)),
            saturate: *saturate,
            precision: *precision,
        }),
        op => op.clone(),
    };
    // unfusible_reason vetted the op: emit never fails for it.
    let out = pointwise::emit(&op, &args, &mut d.body).unwrap_or(0);
    if let Some(o) = n.outputs[0] {
        d.vals.insert(o, out);
    }
    gi
}

/// Why `n` cannot join draft `gi`, or None when it can.
fn join_refusal(g: &Graph, f: &Fusion, n: &Node, gi: usize, shape: &[usize]) -> Option<String> {
    let d = &f.drafts[gi];
    // What the node reads, a deferred dequantization's inputs in its place.
    let inputs: Vec<ValueId> = n
        .inputs
        .iter()
        .flatten()
        .flat_map(|&v| f.sources(g, v))
        .collect();
    let kind = match &d.kind {
        DraftKind::Elementwise | DraftKind::Anchor(_) => None,
        DraftKind::Reduction { per_row, .. } => {
            if inputs.iter().any(|v| per_row.contains(v)) {
                Some("its input is one value per row of a reduction".to_string())
            } else if matches!(
                n.op,
                Op::Quant(smelt_ir::op::QuantOp::QuantizeLinear { .. })
            ) {
                // A normalization's row kernel takes one f32 store: quantizing in a loop of
                // its own keeps it (measured on MiniLM-L3's LayerNorm + QuantizeLinear,
                // 1024 x 384: 1.15 ms interpreted, a few tenths as kernel and loop).
                Some(
                    "a quantization after a reduction runs as its own loop (keeps the row kernels)"
                        .to_string(),
                )
            } else {
                None
            }
        }
        DraftKind::Single(_) => Some("its producer runs whole (no epilogue support)".into()),
        DraftKind::Concat(_) => Some("its producer is a Concat".into()),
    };
    if kind.is_some() {
        return kind;
    }
    if d.shape != shape {
        return Some(format!(
            "its shape {shape:?} differs from the group's iteration space {:?}",
            d.shape
        ));
    }
    for v in &inputs {
        if ready_group(f, *v) == Some(gi) && !d.vals.contains_key(v) {
            return Some(
                "it reads a reshaped or transposed view of a value the group computes".into(),
            );
        }
    }
    None
}

/// The elementwise group computing a reduction's input that can become its prologue:
/// same iteration space, and nothing outside it reads its values but this reduction
/// (through its main input). A refusal that is close is recorded.
fn prologue_group(
    g: &Graph,
    i: usize,
    n: &Node,
    x: ValueId,
    shape: &[usize],
    readers: &Readers,
    f: &mut Fusion,
) -> Option<usize> {
    if f.views.contains_key(&x) {
        return None;
    }
    let gp = *f.value_group.get(&x)?;
    let d = &f.drafts[gp];
    if !matches!(d.kind, DraftKind::Elementwise) || d.shape != shape {
        return None;
    }
    let mut refusal = None;
    for &v in d.vals.keys() {
        if g.outputs.contains(&v) {
            refusal = Some(format!("'{}' is a graph output", g.name_of(v)));
            break;
        }
        // Readers outside the group: only the reduction, once, through its main input.
        let outside: Vec<usize> = readers
            .get(&v)
            .into_iter()
            .flatten()
            .copied()
            .filter(|j| !d.members.contains(j))
            .collect();
        if !(outside.is_empty() || (v == x && outside == [i])) {
            refusal = Some(format!("'{}' is also read outside the group", g.name_of(v)));
            break;
        }
    }
    // The reduction's other inputs must be ready before the prologue runs.
    if refusal.is_none()
        && n.inputs
            .iter()
            .skip(1)
            .flatten()
            .any(|v| ready_group(f, *v).is_some_and(|r| r >= gp))
    {
        refusal = Some("another input of the reduction is computed later".into());
    }
    match refusal {
        None => Some(gp),
        Some(reason) => {
            let into = d_name(g, &f.drafts[gp]);
            f.rejected.push(RejectedFusion {
                node: n.name.clone(),
                into,
                reason: format!("not fused as a prologue: {reason}"),
            });
            None
        }
    }
}

fn d_name(g: &Graph, d: &Draft) -> String {
    d.members
        .first()
        .map(|&m| g.nodes[m].name.clone())
        .unwrap_or_default()
}

fn reduction_node(
    g: &Graph,
    i: usize,
    n: &Node,
    consts: &HashMap<ValueId, &Tensor>,
    readers: &Readers,
    f: &mut Fusion,
) -> Option<usize> {
    let x = n.inputs.first().copied().flatten()?;
    let out = n.outputs.first().copied().flatten()?;
    let in_shape = shape_of_value(g, x)?;
    let form = reduction::form(g, n, consts, in_shape.len())?;
    let kept: Vec<usize> = (0..in_shape.len())
        .filter(|a| !form.axes.contains(a))
        .collect();
    let perm: Vec<usize> = kept.iter().chain(&form.axes).copied().collect();
    let count: usize = form.axes.iter().map(|&a| in_shape[a]).product();
    let prologue = prologue_group(g, i, n, x, &in_shape, readers, f);
    let (gi, snapshot) = match prologue {
        Some(gp) => (gp, Some(f.drafts[gp].clone())),
        None => (
            new_group(f, Draft::new(DraftKind::Elementwise, in_shape)),
            None,
        ),
    };
    let xo = operand(g, f, gi, x, Mapping::Numpy, consts);
    let mut stages = Vec::new();
    let mut body = std::mem::take(&mut f.drafts[gi].body);
    let mut arg = |k: usize, b: &mut Body| -> Option<usize> {
        let v = n.inputs.get(k).copied().flatten()?;
        f.drafts[gi].body = std::mem::take(b);
        let op = operand(g, f, gi, v, Mapping::Numpy, consts);
        *b = std::mem::take(&mut f.drafts[gi].body);
        Some(op)
    };
    let res = reduction::emit(&n.op, xo, &mut arg, count, &mut body, &mut stages);
    let d = &mut f.drafts[gi];
    d.body = body;
    let Some(res) = res else {
        // Not expressible after all: undo.
        match snapshot {
            Some(d) => f.drafts[gi] = d,
            None => {
                f.drafts.pop();
            }
        }
        return None;
    };
    d.vals.insert(out, res);
    d.kind = DraftKind::Reduction {
        perm,
        reduce_from: kept.len(),
        stages,
        per_row: if form.per_element { vec![] } else { vec![out] },
    };
    Some(gi)
}
