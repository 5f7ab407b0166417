//! Runs convolution chains in the blocked channel layout (NCHW16c): each 2-D convolution
//! whose channel counts are multiples of 16 becomes a `ConvBlocked`, elementwise ops between
//! such values (a residual add, an activation) work on the blocked values as they are, and
//! reorders (a Reshape and a Transpose each way) appear only where a region of blocked
//! values meets the rest of the graph. A region is kept only when its convolutions do
//! enough work per element its reorders move ([`MIN_FLOPS_PER_REORDERED`]).
//!
//! Why: with 16 channels of a pixel together, a convolution broadcasts one input channel
//! of several output pixels from one cache line and writes whole lines of output, where
//! the plain layout reads a stride of rows per channel (see `smelt_kernels::blocked`).
//!
//! Main graph only (types are facts there); needs the convolutions' shapes known.

use crate::{manager::rewrite_scoped, Pass, PassContext};
use smelt_ir::op::nn::CHANNEL_BLOCK;
use smelt_ir::op::{ElementwiseOp, LayoutOp, NnOp};
use smelt_ir::{DType, Dim, Graph, Node, Op, Result, Tensor, ValueId, ValueType};
use std::collections::{HashMap, HashSet};

/// The blocked-layout pass.
pub struct BlockedLayout;

impl Pass for BlockedLayout {
    fn name(&self) -> &'static str {
        "blocked-layout"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        Ok(rewrite_scoped(g, &mut |g, typed| typed && block(g)))
    }
}

/// Convolution FLOPs a region must do per element its reorders move. A reorder where a
/// region meets a plain reader is a store through a transposed window, and the blocked
/// kernels save a tenth to a fifth of a convolution's time: the region pays from about
/// 1,200 FLOPs per element moved. At 2,000 (2-vCPU Xeon, AVX-512, one thread): YOLOv8n's
/// 10x10 layers go blocked (the model 4-5% faster), PP-OCRv4 det's 20x20 1x1 layers
/// between depthwise ones stay plain (3% slower blocked). ResNet-50 goes blocked whole,
/// its Winograd layers included (`smelt_kernels::winograd_blocked`): 8% faster.
const MIN_FLOPS_PER_REORDERED: u64 = 2000;

/// Output pixels up to which a 3x3 convolution's image counts as small (20x20).
const SMALL_IMAGE: u64 = 400;

/// The largest weights (bytes) a blocked convolution takes. ResNet-50's last stage (3x3
/// layers of 9.4 MB, 1x1 layers of 4-8 MB) is no faster plain than blocked once the
/// reorders at its border are counted (one thread, interleaved runs: 0.3 ms faster in
/// all blocked), so this only bounds what one layer's repacked weights may take.
const MAX_WEIGHT_BYTES: u64 = 64 << 20;

const B: u64 = CHANNEL_BLOCK as u64;

/// The dims of tensor `v` (a value or a constant), when all are known.
fn known_shape(g: &Graph, v: ValueId) -> Option<Vec<u64>> {
    crate::lower::shape_of_value(g, v).map(|s| s.into_iter().map(|d| d as u64).collect())
}

/// The product of sizes from the model, saturating (a hostile shape cannot overflow it).
fn product(dims: &[u64]) -> u64 {
    dims.iter().fold(1u64, |a, &d| a.saturating_mul(d))
}

/// The element type of tensor `v`, when known.
fn dtype(g: &Graph, v: ValueId) -> Option<DType> {
    crate::lower::dtype_of(g, v)
}

/// The constant tensor `v` is, if it is one.
fn constant(g: &Graph, v: ValueId) -> Option<&Tensor> {
    g.constants.iter().find(|c| c.id == v).map(|c| &c.tensor)
}

/// A convolution the blocked kernels take: 2-D, one group, f32, constant weights (and
/// bias), channel counts multiples of 16, stride 1 or 2 along the width; its FLOPs.
fn candidate(g: &Graph, n: &Node) -> Option<u64> {
    let Op::Nn(NnOp::Conv { group, strides, .. }) = &n.op else {
        return None;
    };
    let x = (*n.inputs.first()?)?;
    let w = (*n.inputs.get(1)?)?;
    let out = (*n.outputs.first()?)?;
    if *group != 1 || n.outputs.len() != 1 || dtype(g, x) != Some(DType::F32) {
        return None;
    }
    if !matches!(strides.get(1).copied().unwrap_or(1), 1 | 2) {
        return None;
    }
    let (xs, ws, os) = (known_shape(g, x)?, known_shape(g, w)?, known_shape(g, out)?);
    let wt = constant(g, w)?;
    if wt.dtype() != DType::F32 || xs.len() != 4 || ws.len() != 4 || os.len() != 4 {
        return None;
    }
    if let Some(Some(b)) = n.inputs.get(2) {
        constant(g, *b)?;
    }
    let (c, m) = (xs[1], ws[0]);
    if c % B != 0 || m % B != 0 || ws[1] != c || os[1] != m {
        return None;
    }
    // Winograd's layers go blocked too: the blocked Winograd kernels beat the plain ones
    // (see `smelt_kernels::winograd_blocked`).
    if product(&ws).saturating_mul(4) > MAX_WEIGHT_BYTES {
        return None;
    }
    let flops = product(&[2, product(&os), c, ws[2], ws[3]]);
    // Small images gain most (the plain kernels' tiles waste lanes on their short rows):
    // YOLOv8n's 3x3 layers at 10x10 took 0.20-0.22 ms blocked against 0.29-0.36 plain,
    // three times the gain of larger ones per FLOP. Their work counts thrice.
    let small = ws[2] == 3 && ws[3] == 3 && os[2] * os[3] <= SMALL_IMAGE;
    Some(if small {
        flops.saturating_mul(3)
    } else {
        flops
    })
}

/// Whether elementwise node `n` can run on blocked values as they are: every input blocked
/// (one shape, the output's) or a single element of rank at most 4.
fn transparent(g: &Graph, n: &Node, blocked: &HashSet<ValueId>) -> bool {
    if !matches!(n.op, Op::Elementwise(ref e) if !matches!(e, ElementwiseOp::LegacyBroadcast { .. }))
        || n.outputs.len() != 1
    {
        return false;
    }
    let Some(out) = n.outputs[0] else {
        return false;
    };
    let Some(os) = known_shape(g, out) else {
        return false;
    };
    let mut any = false;
    for i in n.inputs.iter().flatten() {
        if blocked.contains(i) {
            if known_shape(g, *i).as_ref() != Some(&os) {
                return false;
            }
            any = true;
        } else {
            match known_shape(g, *i) {
                Some(s) if s.len() <= 4 && product(&s) == 1 => {}
                _ => return false,
            }
        }
    }
    any
}

/// Disjoint sets of values (regions joined through the nodes between them).
struct Regions(HashMap<ValueId, ValueId>);

impl Regions {
    fn root(&mut self, v: ValueId) -> ValueId {
        let p = *self.0.entry(v).or_insert(v);
        if p == v {
            return v;
        }
        let r = self.root(p);
        self.0.insert(v, r);
        r
    }

    fn join(&mut self, a: ValueId, b: ValueId) {
        let (ra, rb) = (self.root(a), self.root(b));
        if ra != rb {
            self.0.insert(ra, rb);
        }
    }
}

/// Rewrites the graph's convolution regions into the blocked layout; true if any was.
fn block(g: &mut Graph) -> bool {
    // Which values go blocked, region by region.
    let mut blocked = HashSet::new();
    let mut conv_flops = HashMap::new();
    let mut regions = Regions(HashMap::new());
    for (i, n) in g.nodes.iter().enumerate() {
        let Some(Some(out)) = n.outputs.first().copied() else {
            continue;
        };
        if let Some(f) = candidate(g, n) {
            conv_flops.insert(i, f);
            blocked.insert(out);
            regions.root(out);
        } else if transparent(g, n, &blocked) {
            blocked.insert(out);
            for v in n.inputs.iter().flatten().filter(|v| blocked.contains(v)) {
                regions.join(*v, out);
            }
        }
    }
    if conv_flops.is_empty() {
        return false;
    }
    // A convolution's blocked input joins its region; a plain one is reordered in.
    let mut reorder_in: HashMap<ValueId, Vec<usize>> = HashMap::new();
    for &i in conv_flops.keys() {
        let n = &g.nodes[i];
        let (x, out) = (n.inputs[0].unwrap(), n.outputs[0].unwrap());
        if blocked.contains(&x) {
            regions.join(x, out);
        } else {
            reorder_in.entry(x).or_default().push(i);
        }
    }
    let plain = plain_read(g, &blocked);
    let numel = |v: ValueId| known_shape(g, v).map_or(u64::MAX, |s| product(&s));
    // Each region's work and reorder traffic.
    let mut work: HashMap<ValueId, (u64, u64)> = HashMap::new();
    for (&i, &f) in &conv_flops {
        let r = regions.root(g.nodes[i].outputs[0].unwrap());
        let e = work.entry(r).or_default();
        e.0 = e.0.saturating_add(f);
    }
    for (&x, convs) in &reorder_in {
        let r = regions.root(g.nodes[convs[0]].outputs[0].unwrap());
        let e = work.entry(r).or_default();
        e.1 = e.1.saturating_add(numel(x));
        // Convolutions of other regions reading the same plain value share the reorder;
        // each region counts it (an over-estimate on their side).
        for &c in &convs[1..] {
            let rc = regions.root(g.nodes[c].outputs[0].unwrap());
            if rc != r {
                let e = work.entry(rc).or_default();
                e.1 = e.1.saturating_add(numel(x));
            }
        }
    }
    for &v in &blocked {
        if plain.contains(&v) {
            let r = regions.root(v);
            let e = work.entry(r).or_default();
            e.1 = e.1.saturating_add(numel(v));
        }
    }
    let kept: HashSet<ValueId> = work
        .iter()
        .filter(|(_, &(flops, moved))| flops > 0 && flops / MIN_FLOPS_PER_REORDERED >= moved)
        .map(|(&r, _)| r)
        .collect();
    let blocked: HashSet<ValueId> = blocked
        .iter()
        .copied()
        .filter(|&v| kept.contains(&regions.root(v)))
        .collect();
    if blocked.is_empty() {
        return false;
    }
    rewrite(g, &blocked);
    true
}

/// The values some reader needs plain (a reorder out): the graph's outputs, what its
/// nodes' subgraphs capture, and every input but those of nodes making blocked values (a
/// convolution's input 0, an elementwise node's inputs).
fn plain_read(g: &Graph, blocked: &HashSet<ValueId>) -> HashSet<ValueId> {
    let mut plain: HashSet<ValueId> = g.outputs.iter().copied().collect();
    for n in &g.nodes {
        for sub in n.op.subgraphs() {
            plain.extend(sub.captures.iter().map(|c| c.outer));
        }
        let makes_blocked = n
            .outputs
            .first()
            .copied()
            .flatten()
            .is_some_and(|o| blocked.contains(&o));
        let conv = matches!(n.op, Op::Nn(NnOp::Conv { .. }));
        for (s, x) in n.inputs.iter().enumerate() {
            if let Some(x) = x {
                if !(makes_blocked && (!conv || s == 0)) {
                    plain.insert(*x);
                }
            }
        }
    }
    plain
}

/// The blocked shape of a plain `[N, C, H, W]` one.
fn blocked_dims(s: &[u64]) -> Vec<Dim> {
    [s[0], s[1] / B, s[2], s[3], B]
        .iter()
        .map(|&d| Dim::Known(d))
        .collect()
}

fn tensor_type(dtype: DType, dims: Vec<Dim>) -> Option<ValueType> {
    Some(ValueType::Tensor {
        dtype,
        shape: Some(dims),
    })
}

/// Rewrites the nodes: producers of `blocked` values write blocked twins, their blocked
/// readers read the twins, convolutions become `ConvBlocked`, and reorders make the plain
/// values other readers need and the blocked inputs of convolutions fed plain values.
fn rewrite(g: &mut Graph, blocked: &HashSet<ValueId>) {
    let shapes: HashMap<ValueId, Vec<u64>> = blocked
        .iter()
        .filter_map(|&v| Some((v, known_shape(g, v)?)))
        .collect();
    // Every blocked value's twin.
    let mut twin = HashMap::new();
    for &v in blocked {
        let dt = dtype(g, v).unwrap_or(DType::F32);
        let name = format!("{}.blocked", g.name_of(v));
        let t = g.add_value(name, tensor_type(dt, blocked_dims(&shapes[&v])));
        twin.insert(v, t);
    }
    let plain_readers = plain_read(g, blocked);
    let nodes = std::mem::take(&mut g.nodes);
    let mut out = Vec::with_capacity(nodes.len() + 8);
    let mut blocked_in: HashMap<ValueId, ValueId> = HashMap::new();
    for mut n in nodes {
        let Some(Some(o)) = n.outputs.first().copied() else {
            out.push(n);
            continue;
        };
        if !blocked.contains(&o) {
            out.push(n);
            continue;
        }
        let conv = matches!(n.op, Op::Nn(NnOp::Conv { .. }));
        for (s, x) in n.inputs.iter_mut().enumerate() {
            let Some(v) = *x else { continue };
            if conv && s > 0 {
                continue;
            }
            if let Some(&t) = twin.get(&v) {
                *x = Some(t);
            } else if conv {
                // A plain input: reordered in once, before its first blocked reader.
                let t = match blocked_in.get(&v) {
                    Some(&t) => t,
                    None => {
                        let t = reorder_in(g, v, &mut out, &n.name);
                        blocked_in.insert(v, t);
                        t
                    }
                };
                *x = Some(t);
            }
        }
        if let Op::Nn(NnOp::Conv {
            auto_pad,
            dilations,
            kernel_shape,
            pads,
            strides,
            ..
        }) = &n.op
        {
            n.op = Op::Nn(NnOp::ConvBlocked {
                auto_pad: auto_pad.clone(),
                dilations: dilations.clone(),
                kernel_shape: kernel_shape.clone(),
                pads: pads.clone(),
                strides: strides.clone(),
            });
        }
        n.outputs[0] = Some(twin[&o]);
        let name = n.name.clone();
        out.push(n);
        if plain_readers.contains(&o) {
            reorder_out(g, twin[&o], o, &shapes[&o], &mut out, &name);
        }
    }
    g.nodes = out;
}

/// Appends `Reshape` and `Transpose` making the blocked twin of plain `v`; returns it.
fn reorder_in(g: &mut Graph, v: ValueId, out: &mut Vec<Node>, at: &str) -> ValueId {
    // A candidate's input has a known 4-D shape (see `candidate`).
    let Some(s) = known_shape(g, v).filter(|s| s.len() == 4) else {
        return v;
    };
    let dt = dtype(g, v).unwrap_or(DType::F32);
    let split = [s[0], s[1] / B, B, s[2], s[3]];
    let mid_ty = tensor_type(dt, split.iter().map(|&d| Dim::Known(d)).collect());
    let mid = g.add_value(format!("{}.split", g.name_of(v)), mid_ty);
    let b = g.add_value(
        format!("{}.blocked", g.name_of(v)),
        tensor_type(dt, blocked_dims(&s)),
    );
    out.push(Node {
        name: format!("{at}.reorder_in.reshape"),
        op: Op::Layout(LayoutOp::Reshape {
            shape: Some(split.iter().map(|&d| d as i64).collect()),
            allowzero: false,
        }),
        inputs: vec![Some(v)],
        outputs: vec![Some(mid)],
    });
    out.push(Node {
        name: format!("{at}.reorder_in"),
        op: Op::Layout(LayoutOp::Transpose {
            perm: Some(vec![0, 1, 3, 4, 2]),
        }),
        inputs: vec![Some(mid)],
        outputs: vec![Some(b)],
    });
    b
}

/// Appends `Transpose` and `Reshape` making plain `v` (shape `s`) from its blocked twin.
fn reorder_out(g: &mut Graph, twin: ValueId, v: ValueId, s: &[u64], out: &mut Vec<Node>, at: &str) {
    let dt = dtype(g, v).unwrap_or(DType::F32);
    let split = [s[0], s[1] / B, B, s[2], s[3]];
    let mid_ty = tensor_type(dt, split.iter().map(|&d| Dim::Known(d)).collect());
    let mid = g.add_value(format!("{}.unblocked", g.name_of(v)), mid_ty);
    out.push(Node {
        name: format!("{at}.reorder_out"),
        op: Op::Layout(LayoutOp::Transpose {
            perm: Some(vec![0, 1, 4, 2, 3]),
        }),
        inputs: vec![Some(twin)],
        outputs: vec![Some(mid)],
    });
    out.push(Node {
        name: format!("{at}.reorder_out.reshape"),
        op: Op::Layout(LayoutOp::Reshape {
            shape: Some(s.iter().map(|&d| d as i64).collect()),
            allowzero: false,
        }),
        inputs: vec![Some(mid)],
        outputs: vec![Some(v)],
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer_shapes::InferShapes;

    /// A graph of `x [1, c, hw, hw]` through `convs` (kernel, stride, output channels),
    /// each followed by a ReLU, the last one's output the graph's.
    fn chain(c: usize, hw: usize, convs: &[(usize, usize, usize)]) -> Graph {
        let mut t = format!("graph \"g\" {{\n  input %0 \"x\": f32[1,{c},{hw},{hw}]\n");
        let (mut prev, mut id, mut ch) = (0, 1, c);
        for (i, &(k, s, m)) in convs.iter().enumerate() {
            let w = vec!["0.5"; m * ch * k * k].join(",");
            t += &format!(
                "  const %{id} \"w{i}\" = {{\"dtype\":\"F32\",\"shape\":[{m},{ch},{k},{k}],\"data\":{{\"F32\":[{w}]}}}}\n"
            );
            let p = k / 2;
            t += &format!(
                "  %{} \"c{i}\" = nn.Conv {{\"auto_pad\":\"NotSet\",\"dilations\":[1,1],\"group\":1,\"kernel_shape\":[{k},{k}],\"pads\":[{p},{p},{p},{p}],\"strides\":[{s},{s}]}} (%{prev}, %{id})\n",
                id + 1
            );
            t += &format!("  %{} \"r{i}\" = elementwise.Relu (%{})\n", id + 2, id + 1);
            (prev, id, ch) = (id + 2, id + 3, m);
        }
        t += &format!("  output %{prev}\n}}\n");
        let mut g = smelt_ir::text::parse_graph(&t).unwrap();
        InferShapes
            .run(&mut g, &PassContext { evaluate: None })
            .unwrap();
        g
    }

    fn count(g: &Graph, name: &str) -> usize {
        g.nodes.iter().filter(|n| n.op.name() == name).count()
    }

    #[test]
    fn a_chain_runs_blocked_with_one_reorder_each_way() {
        let mut g = chain(32, 12, &[(1, 1, 64), (3, 1, 64), (3, 2, 32)]);
        assert!(BlockedLayout
            .run(&mut g, &PassContext { evaluate: None })
            .unwrap());
        assert_eq!(count(&g, "ConvBlocked"), 3);
        assert_eq!(count(&g, "Conv"), 0);
        // In: Reshape + Transpose; out: Transpose + Reshape. The ReLUs stay between the
        // convolutions, on blocked values.
        assert_eq!((count(&g, "Transpose"), count(&g, "Reshape")), (2, 2));
        assert_eq!(count(&g, "Relu"), 3);
        smelt_ir::verify::verify(&g).unwrap();
        // The graph's output keeps its plain type.
        let out = g.outputs[0];
        assert_eq!(known_shape(&g, out), Some(vec![1, 32, 6, 6]));
        // Shape inference agrees with the types the pass wrote.
        let before: Vec<_> = g.values.iter().map(|v| v.ty.clone()).collect();
        InferShapes
            .run(&mut g, &PassContext { evaluate: None })
            .unwrap();
        let after: Vec<_> = g.values.iter().map(|v| v.ty.clone()).collect();
        assert_eq!(before, after);
    }

    #[test]
    fn little_work_per_reordered_element_stays_plain() {
        // One 1x1 convolution of 16 channels: 8 FLOPs per element moved.
        let mut g = chain(16, 6, &[(1, 1, 16)]);
        assert!(!BlockedLayout
            .run(&mut g, &PassContext { evaluate: None })
            .unwrap());
        assert_eq!(count(&g, "Conv"), 1);
    }

    #[test]
    fn a_chain_of_winograd_layers_runs_blocked() {
        // 3x3 stride 1 at 16x16: the blocked Winograd kernels' layers.
        let mut g = chain(64, 16, &[(3, 1, 64), (3, 1, 64), (3, 1, 64), (3, 1, 64)]);
        assert!(BlockedLayout
            .run(&mut g, &PassContext { evaluate: None })
            .unwrap());
        assert_eq!(count(&g, "ConvBlocked"), 4);
    }

    #[test]
    fn a_lone_layer_and_odd_channels_stay_plain() {
        // One 3x3 layer does too little per element its reorders would move; 24 channels
        // are no whole blocks.
        let mut g = chain(64, 16, &[(3, 1, 64), (1, 1, 24)]);
        assert!(!BlockedLayout
            .run(&mut g, &PassContext { evaluate: None })
            .unwrap());
        assert_eq!(count(&g, "ConvBlocked"), 0);
    }
}
