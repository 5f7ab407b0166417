//! Scaled dot-product attention on 4-D `[B, H, S, D]` heads:
//! `MatMul(Softmax(MatMul(q, kT) * c + mask, axis = last), v)` (`/ c` or `* c`, the mask
//! optional) becomes `Attention` with `scale = c` (or `1/c`). `kT` is usually a Transpose
//! of the key; a Transpose giving the key as `[B, H, S, D]` is made for the new node.
//!
//! The Attention op pads a mask narrower than the keys with -inf instead of broadcasting
//! it. A mask that provably spans the keys (its last dimension equal to the keys' length,
//! or a known size above 1, which a valid graph then has that many keys of) is passed as
//! is; any other mask of rank 1 to 4 is first expanded to the keys' length, read at run
//! time with `Shape(kT, 3..4)`.

use super::pattern::*;
use super::{Arg, Rewrite, Src, Step};
use smelt_ir::op::{ElementwiseOp, LayoutOp, NnOp, ReduceOp};
use smelt_ir::{Dim, Graph, Op, Shape, ValueId};

/// Matches an attention block whose output MatMul is node `root`.
pub(crate) fn recognize(g: &Graph, root: usize) -> Option<Rewrite> {
    if !matches!(g.nodes[root].op, Op::Nn(NnOp::MatMul)) {
        return None;
    }
    single_output(&g.nodes[root])?;
    let (probs, v) = binary_inputs(&g.nodes[root])?;
    let sm = producer(g, probs)?;
    let Op::Reduce(ReduceOp::Softmax { axis, .. }) = g.nodes[sm].op else {
        return None;
    };
    if axis != -1 && axis != 3 {
        return None;
    }
    let s = (*g.nodes[sm].inputs.first()?)?;
    let mut nodes = vec![sm];
    // s = scores + mask, or the scores alone.
    let (scores, mask) = match producer(g, s) {
        Some(a) if is_op(g, a, "Add") => {
            let (l, r) = binary_inputs(&g.nodes[a])?;
            nodes.push(a);
            if qk_of(g, l).is_some() {
                (l, Some(r))
            } else {
                (r, Some(l))
            }
        }
        _ => (s, None),
    };
    let (qk_node, scale, scale_nodes) = qk_of(g, scores)?;
    nodes.extend(scale_nodes);
    nodes.push(qk_node);
    let (q, kt) = binary_inputs(&g.nodes[qk_node])?;
    if [q, kt, v].iter().any(|&t| rank(g, t) != Some(4)) || !float_or_unknown(g, q) {
        return None;
    }
    // The key as [B, H, S, D].
    let (key, key_perm) = match &producer_node(g, kt).map(|n| &n.op) {
        Some(Op::Layout(LayoutOp::Transpose { perm: Some(p) })) if p.len() == 4 => {
            let t = producer(g, kt)?;
            nodes.push(t);
            ((*g.nodes[t].inputs.first()?)?, vec![p[0], p[1], p[3], p[2]])
        }
        _ => (kt, vec![0, 1, 3, 2]),
    };
    if !heads_compatible(g, q, kt, v) {
        return None;
    }
    let mask_arg = match mask {
        None => None,
        Some(m) => {
            let keys = key_lengths(g, &[kt, scores, s, probs], v);
            Some(mask_input(g, m, (key, key_perm[2]), &keys, root)?)
        }
    };
    // Intermediates (all but the key transpose, which may stay) are read inside only.
    let inner: Vec<ValueId> = [probs, s, scores]
        .into_iter()
        .chain(single_output(&g.nodes[qk_node]))
        .collect();
    let within: Vec<usize> = nodes.iter().copied().chain([root]).collect();
    if !inner.iter().all(|&o| used_only_by(g, o, &within)) {
        return None;
    }
    let key_arg = if key_perm == [0, 1, 2, 3] {
        Arg::Value(key)
    } else {
        Arg::Derived(vec![Step {
            name: format!("{}/key_transpose", g.nodes[root].name),
            op: Op::Layout(LayoutOp::Transpose {
                perm: Some(key_perm),
            }),
            inputs: vec![Src::Value(key)],
        }])
    };
    let mut inputs = vec![Arg::Value(q), key_arg, Arg::Value(v)];
    inputs.extend(mask_arg);
    Some(Rewrite {
        root,
        op: Op::Nn(NnOp::Attention {
            is_causal: false,
            kv_num_heads: None,
            q_num_heads: None,
            qk_matmul_output_mode: 0,
            scale: Some(scale as f32),
            softcap: 0.0,
            softmax_precision: None,
            left_window_size: -1,
            right_window_size: -1,
        }),
        inputs,
        interior: nodes,
    })
}

/// `scores = MatMul(q, kT) * c` (or `/ c`, or unscaled): the MatMul node, `c` and the
/// scaling nodes.
fn qk_of(g: &Graph, scores: ValueId) -> Option<(usize, f64, Vec<usize>)> {
    let j = producer(g, scores)?;
    if matches!(g.nodes[j].op, Op::Nn(NnOp::MatMul)) {
        return Some((j, 1.0, Vec::new()));
    }
    let p = product(g, j)?;
    let [qk] = p.values[..] else { return None };
    let m = producer(g, qk)?;
    let ok = matches!(g.nodes[m].op, Op::Nn(NnOp::MatMul))
        && p.coefficient > 0.0
        && p.coefficient.is_finite()
        && p.const_rank <= 4;
    ok.then_some((m, p.coefficient, p.nodes))
}

/// False when known shapes show the batch or head dimensions of q, kT and v disagree in a
/// way the Attention op does not accept (MatMul broadcasting would).
fn heads_compatible(g: &Graph, q: ValueId, kt: ValueId, v: ValueId) -> bool {
    let dims = |t: ValueId, i: usize| shape(g, t).and_then(|s| s.get(i)).cloned();
    let differ = |a: Option<Dim>, b: Option<Dim>| match (a, b) {
        (Some(Dim::Known(x)), Some(Dim::Known(y))) => x != y,
        _ => false,
    };
    !(0..2).any(|i| differ(dims(q, i), dims(kt, i)) || differ(dims(kt, i), dims(v, i)))
}

/// What the types say about the number of keys: the last dimension of the scores
/// (and of kT), and dimension 2 of v.
fn key_lengths(g: &Graph, last_dim_of: &[ValueId], v: ValueId) -> Vec<Dim> {
    let mut out: Vec<Dim> = last_dim_of
        .iter()
        .filter_map(|&t| shape(g, t).filter(|s| s.len() == 4).map(|s| s[3].clone()))
        .collect();
    out.extend(shape(g, v).filter(|s| s.len() == 4).map(|s| s[2].clone()));
    out
}

/// The Attention mask input for the additive mask `m` (float or untyped, rank 1 to 4):
/// `m` itself when it provably spans the keys, else `m` expanded to the keys' length,
/// read at run time as dimension `key.1` of `key.0`.
fn mask_input(
    g: &Graph,
    m: ValueId,
    key: (ValueId, i64),
    keys: &[Dim],
    root: usize,
) -> Option<Arg> {
    let ms = mask_shape(g, m, 8)?;
    let last = ms.last()?;
    if ms.len() > 4 || !float_or_unknown(g, m) {
        return None;
    }
    let wide = keys.iter().any(|k| same_dim(last, k)) || matches!(last, Dim::Known(n) if *n > 1);
    if wide {
        return Some(Arg::Value(m));
    }
    let name = &g.nodes[root].name;
    Some(Arg::Derived(vec![
        Step {
            name: format!("{name}/key_length"),
            op: Op::Layout(LayoutOp::Shape {
                start: key.1,
                end: Some(key.1 + 1),
            }),
            inputs: vec![Src::Value(key.0)],
        },
        Step {
            name: format!("{name}/mask_expand"),
            op: Op::Layout(LayoutOp::Expand),
            inputs: vec![Src::Value(m), Src::Prev],
        },
    ]))
}

/// The shape of a mask: from its type, or read through the elementwise ops, casts and
/// Unsqueezes exporters build masks with, down to a typed value.
fn mask_shape(g: &Graph, m: ValueId, depth: usize) -> Option<Shape> {
    if let Some(s) = shape(g, m) {
        return Some(s.clone());
    }
    if let Some(t) = constant(g, m) {
        return Some(t.shape().iter().map(|&d| Dim::Known(d as u64)).collect());
    }
    let n = producer_node(g, m)?;
    if depth == 0 {
        return None;
    }
    let input = |k: usize| n.inputs.get(k).copied().flatten();
    match &n.op {
        Op::Elementwise(ElementwiseOp::Cast { .. } | ElementwiseOp::Neg | ElementwiseOp::Not) => {
            mask_shape(g, input(0)?, depth - 1)
        }
        Op::Elementwise(
            ElementwiseOp::Add | ElementwiseOp::Sub | ElementwiseOp::Mul | ElementwiseOp::Div,
        ) => {
            // One operand a rank-0 constant: the other's shape.
            let (a, b) = binary_inputs(n)?;
            let scalar = |v: ValueId| constant(g, v).is_some_and(|t| t.rank() == 0);
            match (scalar(a), scalar(b)) {
                (true, false) => mask_shape(g, b, depth - 1),
                (false, true) => mask_shape(g, a, depth - 1),
                _ => None,
            }
        }
        Op::Layout(LayoutOp::Unsqueeze { axes }) => {
            let axes = match axes {
                Some(a) => a.clone(),
                None => constant(g, input(1)?)?.to_i64().ok()?,
            };
            let mut s = mask_shape(g, input(0)?, depth - 1)?;
            let out_rank = (s.len() + axes.len()) as i64;
            let mut norm: Vec<usize> = axes
                .iter()
                .map(|&a| usize::try_from(if a < 0 { a + out_rank } else { a }).ok())
                .collect::<Option<_>>()?;
            norm.sort_unstable();
            for a in norm {
                if a > s.len() {
                    return None;
                }
                s.insert(a, Dim::Known(1));
            }
            Some(s)
        }
        _ => None,
    }
}
