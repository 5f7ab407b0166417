//! A structure-aware mutator of ONNX models: it decodes a `ModelProto`, changes one thing a
//! hostile file could change (a dim, an attribute, an initializer, a wire, an op type) in
//! the main graph or any subgraph, and encodes it again.

use prost::Message;
use smelt_bench::rng::Rng;
use smelt_onnx::proto::tensor_shape_proto::dimension::Value as DimValue;
use smelt_onnx::proto::{
    attribute_proto::attribute_type as at, type_proto, AttributeProto, GraphProto, ModelProto,
    NodeProto, TensorProto, ValueInfoProto,
};

/// Dims and integers that break size arithmetic: empty, negative, past 2^31, 2^40, 2^62.
pub const EXTREME_INTS: [i64; 12] = [
    0,
    -1,
    -7,
    1,
    3,
    1 << 31,
    1 << 40,
    1 << 62,
    i64::MAX,
    i64::MIN,
    i32::MAX as i64,
    65536,
];

/// Floats that break numeric code.
pub const EXTREME_FLOATS: [f32; 9] = [
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    0.0,
    -1.0,
    1e38,
    -1e38,
    1e-45,
    4294967296.0,
];

/// Op types a swap may pick (a spread of families, data-movement and shape ops first).
pub const OPS: [&str; 40] = [
    "Expand",
    "Tile",
    "ConstantOfShape",
    "Range",
    "Reshape",
    "Pad",
    "Resize",
    "OneHot",
    "Gather",
    "Slice",
    "Concat",
    "Split",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "MatMul",
    "Gemm",
    "Conv",
    "ConvTranspose",
    "MaxPool",
    "LayerNormalization",
    "Softmax",
    "Einsum",
    "Compress",
    "NonZero",
    "TopK",
    "CumSum",
    "ScatterND",
    "GatherND",
    "Loop",
    "If",
    "Add",
    "Mul",
    "Cast",
    "ReduceSum",
    "DFT",
    "ImageDecoder",
    "Upsample",
    "EyeLike",
    "NoSuchOp",
];

/// What a mutation changed, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// A dim of a declared input, output or value type.
    ValueDim,
    /// A dim of an initializer or constant tensor (its data no longer fits).
    TensorDim,
    /// An integer element of an initializer or constant (shapes, axes, counts).
    TensorInt,
    /// An initializer's element type.
    TensorType,
    /// An initializer's data cut short.
    TensorTruncate,
    /// An integer attribute.
    IntAttr,
    /// A float attribute.
    FloatAttr,
    /// An element of an integer-list attribute, or the list's length.
    IntsAttr,
    /// A node input wired to another value (possibly a later one: a cycle) or to nothing.
    Rewire,
    /// A node's op type.
    OpSwap,
    /// A node's domain, or an opset version.
    Domain,
    /// An attribute removed.
    DropAttr,
    /// A node removed.
    DropNode,
}

const ALL: [Mutation; 13] = [
    Mutation::ValueDim,
    Mutation::TensorDim,
    Mutation::TensorInt,
    Mutation::TensorType,
    Mutation::TensorTruncate,
    Mutation::IntAttr,
    Mutation::FloatAttr,
    Mutation::IntsAttr,
    Mutation::Rewire,
    Mutation::OpSwap,
    Mutation::Domain,
    Mutation::DropAttr,
    Mutation::DropNode,
];

/// Decodes `bytes` as a model, applies 1 to 3 mutations drawn from `seed` and encodes it;
/// None when the bytes are not a model.
pub fn mutate_bytes(bytes: &[u8], seed: u64) -> Option<Vec<u8>> {
    let mut m = ModelProto::decode(bytes).ok()?;
    let mut rng = Rng::new(seed);
    let n = 1 + rng.below(3);
    for _ in 0..n {
        mutate_model(&mut m, &mut rng);
    }
    Some(m.encode_to_vec())
}

/// Applies one mutation to the model (in the main graph or a subgraph); returns what it
/// tried (a mutation with nothing to act on leaves the model as it was).
pub fn mutate_model(m: &mut ModelProto, rng: &mut Rng) -> Mutation {
    let kind = ALL[rng.below(ALL.len())];
    if kind == Mutation::Domain && rng.below(2) == 0 {
        if !m.opset_import.is_empty() {
            let i = rng.below(m.opset_import.len());
            m.opset_import[i].version = pick_int(rng);
        }
        return kind;
    }
    let Some(g) = m.graph.as_mut() else {
        return kind;
    };
    let n = count_graphs(g);
    let target = rng.below(n);
    let mut k = 0;
    with_graph(g, target, &mut k, &mut |g| mutate_graph(g, kind, rng));
    kind
}

fn count_graphs(g: &GraphProto) -> usize {
    1 + g
        .node
        .iter()
        .flat_map(|n| &n.attribute)
        .map(|a| {
            a.g.iter().map(count_graphs).sum::<usize>()
                + a.graphs.iter().map(count_graphs).sum::<usize>()
        })
        .sum::<usize>()
}

/// Calls `f` on graph number `target` in pre-order.
fn with_graph(
    g: &mut GraphProto,
    target: usize,
    k: &mut usize,
    f: &mut dyn FnMut(&mut GraphProto),
) {
    if *k == target {
        *k += 1;
        f(g);
        return;
    }
    *k += 1;
    for n in &mut g.node {
        for a in &mut n.attribute {
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                if *k > target {
                    return;
                }
                with_graph(sub, target, k, f);
            }
        }
    }
}

fn pick_int(rng: &mut Rng) -> i64 {
    EXTREME_INTS[rng.below(EXTREME_INTS.len())]
}

fn mutate_graph(g: &mut GraphProto, kind: Mutation, rng: &mut Rng) {
    match kind {
        Mutation::ValueDim => {
            let n = g.input.len() + g.output.len() + g.value_info.len();
            if n == 0 {
                return;
            }
            let i = rng.below(n);
            let vi: &mut ValueInfoProto = if i < g.input.len() {
                &mut g.input[i]
            } else if i < g.input.len() + g.output.len() {
                &mut g.output[i - g.input.len()]
            } else {
                &mut g.value_info[i - g.input.len() - g.output.len()]
            };
            if let Some(type_proto::Value::TensorType(t)) =
                vi.r#type.as_mut().and_then(|t| t.value.as_mut())
            {
                if let Some(s) = t.shape.as_mut() {
                    if !s.dim.is_empty() {
                        let d = rng.below(s.dim.len());
                        s.dim[d].value = Some(DimValue::DimValue(pick_int(rng)));
                    }
                }
            }
        }
        Mutation::TensorDim
        | Mutation::TensorInt
        | Mutation::TensorType
        | Mutation::TensorTruncate => {
            let mut tensors: Vec<&mut TensorProto> = g.initializer.iter_mut().collect();
            for n in &mut g.node {
                for a in &mut n.attribute {
                    tensors.extend(a.t.iter_mut());
                }
            }
            if tensors.is_empty() {
                return;
            }
            let i = rng.below(tensors.len());
            mutate_tensor(tensors[i], kind, rng);
        }
        Mutation::IntAttr | Mutation::FloatAttr | Mutation::IntsAttr | Mutation::DropAttr => {
            let Some(node) = pick_node(g, rng) else {
                return;
            };
            mutate_attr(node, kind, rng);
        }
        Mutation::Rewire => {
            let mut names: Vec<String> = g.input.iter().map(|v| v.name.clone()).collect();
            names.extend(g.initializer.iter().map(|t| t.name.clone()));
            names.extend(g.node.iter().flat_map(|n| n.output.iter().cloned()));
            names.push(String::new());
            let Some(node) = pick_node(g, rng) else {
                return;
            };
            if node.input.is_empty() {
                node.input.push(names[rng.below(names.len())].clone());
            } else {
                let k = rng.below(node.input.len());
                node.input[k] = names[rng.below(names.len())].clone();
            }
        }
        Mutation::OpSwap => {
            let Some(node) = pick_node(g, rng) else {
                return;
            };
            node.op_type = OPS[rng.below(OPS.len())].to_string();
        }
        Mutation::Domain => {
            let Some(node) = pick_node(g, rng) else {
                return;
            };
            node.domain =
                ["com.example.unknown", "ai.onnx.ml", "com.microsoft"][rng.below(3)].to_string();
        }
        Mutation::DropNode => {
            if !g.node.is_empty() {
                let i = rng.below(g.node.len());
                g.node.remove(i);
            }
        }
    }
}

fn pick_node<'a>(g: &'a mut GraphProto, rng: &mut Rng) -> Option<&'a mut NodeProto> {
    if g.node.is_empty() {
        return None;
    }
    let i = rng.below(g.node.len());
    g.node.get_mut(i)
}

fn mutate_tensor(t: &mut TensorProto, kind: Mutation, rng: &mut Rng) {
    match kind {
        Mutation::TensorDim => match rng.below(4) {
            0 => t.dims.push(pick_int(rng)),
            1 => {
                t.dims.pop();
            }
            _ if !t.dims.is_empty() => {
                let d = rng.below(t.dims.len());
                t.dims[d] = pick_int(rng);
            }
            _ => t.dims.push(pick_int(rng)),
        },
        Mutation::TensorInt => {
            let v = pick_int(rng);
            if !t.int64_data.is_empty() {
                let i = rng.below(t.int64_data.len());
                t.int64_data[i] = v;
            } else if !t.int32_data.is_empty() {
                let i = rng.below(t.int32_data.len());
                t.int32_data[i] = v as i32;
            } else if t.raw_data.len() >= 8 {
                let i = rng.below(t.raw_data.len() / 8) * 8;
                t.raw_data[i..i + 8].copy_from_slice(&v.to_le_bytes());
            } else if !t.raw_data.is_empty() {
                let i = rng.below(t.raw_data.len());
                t.raw_data[i] = v as u8;
            }
        }
        Mutation::TensorType => t.data_type = rng.below(27) as i32,
        _ => {
            if !t.raw_data.is_empty() {
                let n = rng.below(t.raw_data.len());
                t.raw_data.truncate(n);
            } else if !t.float_data.is_empty() {
                let n = rng.below(t.float_data.len());
                t.float_data.truncate(n);
            } else if !t.int64_data.is_empty() {
                let n = rng.below(t.int64_data.len());
                t.int64_data.truncate(n);
            } else {
                t.int32_data.clear();
            }
        }
    }
}

fn mutate_attr(node: &mut NodeProto, kind: Mutation, rng: &mut Rng) {
    let want = match kind {
        Mutation::IntAttr => at::INT,
        Mutation::FloatAttr => at::FLOAT,
        Mutation::IntsAttr => at::INTS,
        _ => -1,
    };
    let idx: Vec<usize> = node
        .attribute
        .iter()
        .enumerate()
        .filter(|(_, a)| want < 0 || a.r#type == want)
        .map(|(i, _)| i)
        .collect();
    if idx.is_empty() {
        // Nothing of that type: add one under a common name, which the importer may read.
        let name = ["axis", "k", "depth", "size", "group", "blocksize"][rng.below(6)];
        if want == at::INT {
            node.attribute.push(AttributeProto {
                name: name.into(),
                r#type: at::INT,
                i: pick_int(rng),
                ..Default::default()
            });
        }
        return;
    }
    let i = idx[rng.below(idx.len())];
    let a = &mut node.attribute[i];
    match kind {
        Mutation::IntAttr => a.i = pick_int(rng),
        Mutation::FloatAttr => a.f = EXTREME_FLOATS[rng.below(EXTREME_FLOATS.len())],
        Mutation::IntsAttr => match rng.below(3) {
            0 => {
                let n = rng.below(a.ints.len() + 1);
                a.ints.truncate(n);
            }
            1 => a.ints.push(pick_int(rng)),
            _ if !a.ints.is_empty() => {
                let k = rng.below(a.ints.len());
                a.ints[k] = pick_int(rng);
            }
            _ => a.ints.push(pick_int(rng)),
        },
        _ => {
            node.attribute.remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smelt_onnx::proto::{OperatorSetIdProto, TensorShapeProto, TypeProto};

    fn model() -> ModelProto {
        let ty = TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: 1,
                shape: Some(TensorShapeProto {
                    dim: vec![smelt_onnx::proto::tensor_shape_proto::Dimension {
                        value: Some(DimValue::DimValue(2)),
                        denotation: String::new(),
                    }],
                }),
            })),
            denotation: String::new(),
        };
        let vi = |n: &str| ValueInfoProto {
            name: n.into(),
            r#type: Some(ty.clone()),
            ..Default::default()
        };
        ModelProto {
            ir_version: 8,
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: 17,
            }],
            graph: Some(GraphProto {
                node: vec![NodeProto {
                    input: vec!["x".into()],
                    output: vec!["y".into()],
                    op_type: "Relu".into(),
                    ..Default::default()
                }],
                input: vec![vi("x")],
                output: vec![vi("y")],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn mutants_are_deterministic_and_decode() {
        let bytes = model().encode_to_vec();
        let mut changed = 0;
        for seed in 0..200 {
            let a = mutate_bytes(&bytes, seed).unwrap();
            assert_eq!(a, mutate_bytes(&bytes, seed).unwrap());
            assert!(ModelProto::decode(a.as_slice()).is_ok());
            changed += (a != bytes) as usize;
        }
        assert!(changed > 100, "only {changed} of 200 mutants differ");
        assert!(mutate_bytes(b"\xff\xff\xff", 1).is_none());
    }
}
