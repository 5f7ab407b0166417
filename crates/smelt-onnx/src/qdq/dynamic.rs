//! Writes a dynamic-quantized model, as onnxruntime's `quantize_dynamic` does: each `MatMul`
//! (and `Gemm` of `alpha = beta = 1`, A not transposed) whose weight is a float initializer
//! becomes `DynamicQuantizeLinear` of its activation (u8, the scale and zero point of each
//! run's own range; one per activation, shared by its readers), `MatMulInteger` with the
//! int8 weights (symmetric, per output column or per tensor), `Cast` to f32, a `Mul` by the
//! activation's scale times the weights' and the bias `Add`. No calibration: the ranges are
//! taken at run time. Main graph only.

use super::{
    drop_unused_initializers, f32_initializer, f32_tensor, int_attr, int_tensor, main_opset, node,
    QdqOptions, Target,
};
use crate::proto::{DataType, ModelProto, NodeProto};
use smelt_ir::{bail, Result};
use std::collections::HashMap;

/// Rewrites the `MatMul`/`Gemm` targets of `model` for dynamic quantization; returns how
/// many it rewrote (`Conv` targets are left as they are).
pub fn write_dynamic(
    model: &mut ModelProto,
    targets: &[Target],
    opts: QdqOptions,
) -> Result<usize> {
    let opset = main_opset(model);
    if opset < 11 {
        bail!(
            Unsupported,
            "the model imports opset {opset}; DynamicQuantizeLinear needs opset 11 or later (convert it first, e.g. onnx.version_converter)"
        );
    }
    let Some(g) = model.graph.as_mut() else {
        bail!(InvalidModel, "the model has no graph");
    };
    let targets: Vec<&Target> = targets
        .iter()
        .filter(|t| matches!(g.node[t.node].op_type.as_str(), "MatMul" | "Gemm"))
        .collect();
    // Activations: one DynamicQuantizeLinear each, before its first reader.
    let mut first_reader: HashMap<&str, usize> = HashMap::new();
    for t in &targets {
        let e = first_reader.entry(&t.activation).or_insert(t.node);
        *e = (*e).min(t.node);
    }
    let mut before: HashMap<usize, Vec<NodeProto>> = HashMap::new();
    let mut sorted: Vec<(&str, usize)> = first_reader.into_iter().collect();
    sorted.sort();
    for (a, at) in sorted {
        before.entry(at).or_default().push(NodeProto {
            op_type: "DynamicQuantizeLinear".into(),
            name: format!("{a}_DynamicQuantizeLinear"),
            input: vec![a.to_string()],
            output: vec![
                format!("{a}_quantized"),
                format!("{a}_scale"),
                format!("{a}_zero_point"),
            ],
            ..Default::default()
        });
    }
    // Weights, `K x N` (a transposed Gemm weight is transposed here), once per weight and
    // layout; each product replaced by its integer form.
    let mut new_inits = Vec::new();
    let mut weights: HashMap<(String, usize), String> = HashMap::new();
    let mut replace: HashMap<usize, Vec<NodeProto>> = HashMap::new();
    for t in &targets {
        let key = (t.weight.clone(), t.axis);
        if !weights.contains_key(&key) {
            let Some((w, dims)) = f32_initializer(g, &t.weight) else {
                bail!(Internal, "weight {} is not an f32 initializer", t.weight);
            };
            let (k, n) = if t.axis == 0 {
                (dims[1], dims[0])
            } else {
                (dims[0], dims[1])
            };
            let w: Vec<f32> = if t.axis == 0 {
                (0..k * n).map(|i| w[(i % n) * k + i / n]).collect()
            } else {
                w
            };
            let qmax = if opts.reduce_range { 63.0 } else { 127.0 };
            let (scales, q) =
                smelt_ir::precision::quantize_symmetric(&w, &[k, n], 1, opts.per_channel, qmax);
            let base = format!("{}_kn", t.weight);
            let sd: Vec<usize> = if scales.len() > 1 { vec![n] } else { vec![] };
            new_inits.push(int_tensor(
                &format!("{base}_quantized"),
                &[k, n],
                DataType::Int8,
                &q,
            ));
            new_inits.push(f32_tensor(&format!("{base}_scale"), &sd, &scales));
            new_inits.push(int_tensor(
                &format!("{base}_zero_point"),
                &sd,
                DataType::Int8,
                &vec![0; scales.len()],
            ));
            weights.insert(key.clone(), base);
        }
        let base = &weights[&key];
        let n = &g.node[t.node];
        let name = if n.name.is_empty() {
            format!("node{}", t.node)
        } else {
            n.name.clone()
        };
        let a = &t.activation;
        let out = n.output[0].clone();
        let bias = n.input.get(2).filter(|b| !b.is_empty()).cloned();
        let product = if bias.is_some() {
            format!("{name}_product")
        } else {
            out.clone()
        };
        // The scale first: computed before the product, it fuses into the product's epilogue.
        let mut nodes = vec![
            node(
                "Mul",
                format!("{name}_scale_Mul"),
                vec![format!("{a}_scale"), format!("{base}_scale")],
                format!("{name}_scale"),
                vec![],
            ),
            node(
                "MatMulInteger",
                format!("{name}_MatMulInteger"),
                vec![
                    format!("{a}_quantized"),
                    format!("{base}_quantized"),
                    format!("{a}_zero_point"),
                    format!("{base}_zero_point"),
                ],
                format!("{name}_int32"),
                vec![],
            ),
            node(
                "Cast",
                format!("{name}_Cast"),
                vec![format!("{name}_int32")],
                format!("{name}_float"),
                vec![int_attr("to", DataType::Float as i64)],
            ),
            node(
                "Mul",
                format!("{name}_Mul"),
                vec![format!("{name}_float"), format!("{name}_scale")],
                product.clone(),
                vec![],
            ),
        ];
        if let Some(b) = bias {
            nodes.push(node(
                "Add",
                format!("{name}_bias_Add"),
                vec![product, b],
                out,
                vec![],
            ));
        }
        replace.insert(t.node, nodes);
    }
    let count = replace.len();
    let old = std::mem::take(&mut g.node);
    for (i, n) in old.into_iter().enumerate() {
        if let Some(q) = before.remove(&i) {
            g.node.extend(q);
        }
        match replace.remove(&i) {
            Some(r) => g.node.extend(r),
            None => g.node.push(n),
        }
    }
    g.initializer.extend(new_inits);
    drop_unused_initializers(g);
    Ok(count)
}

/// Embedding tables stored as int8, as onnxruntime's `quantize_dynamic` does for `Gather`:
/// each `Gather` along axis 0 of a 2-D float initializer of at least `min_elements` becomes
/// a `Gather` of the int8 table (symmetric; one scale per column with `per_channel`, else
/// one) followed by `DequantizeLinear` of the rows it picked (along the last axis). A
/// table read by anything else is left float. Returns how many tables it rewrote.
pub fn quantize_gathers(
    model: &mut ModelProto,
    opts: QdqOptions,
    min_elements: usize,
) -> Result<usize> {
    let opset = main_opset(model);
    let Some(g) = model.graph.as_mut() else {
        bail!(InvalidModel, "the model has no graph");
    };
    // Per-axis DequantizeLinear needs opset 13; before it, one scale.
    let per_column = opts.per_channel && opset >= 13;
    let mut readers: HashMap<&str, usize> = HashMap::new();
    for n in &g.node {
        for i in &n.input {
            *readers.entry(i.as_str()).or_default() += 1;
        }
    }
    let picked: Vec<(usize, String)> = g
        .node
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            n.domain.is_empty()
                && n.op_type == "Gather"
                && super::attr_i(n, "axis", 0) == 0
                && n.input.len() == 2
                && n.output.first().is_some_and(|o| !o.is_empty())
                && readers.get(n.input[0].as_str()) == Some(&1)
        })
        .map(|(i, n)| (i, n.input[0].clone()))
        .collect();
    let mut new_inits = Vec::new();
    let mut after: HashMap<usize, NodeProto> = HashMap::new();
    for (i, table) in picked {
        let Some((w, dims)) = f32_initializer(g, &table) else {
            continue;
        };
        if dims.len() != 2 || w.len() < min_elements {
            continue;
        }
        let qmax = if opts.reduce_range { 63.0 } else { 127.0 };
        // Scales along axis 1 (per column) or one for the table.
        let (scales, q) = smelt_ir::precision::quantize_symmetric(&w, &dims, 1, per_column, qmax);
        let (qn, sn, zn) = (
            format!("{table}_quantized"),
            format!("{table}_scale"),
            format!("{table}_zero_point"),
        );
        let sd: Vec<usize> = if scales.len() > 1 {
            vec![dims[1]]
        } else {
            vec![]
        };
        new_inits.push(int_tensor(&qn, &dims, DataType::Int8, &q));
        new_inits.push(f32_tensor(&sn, &sd, &scales));
        new_inits.push(int_tensor(&zn, &sd, DataType::Int8, &vec![0; scales.len()]));
        let n = &mut g.node[i];
        let out = n.output[0].clone();
        let rows = format!("{out}_quantized_rows");
        n.input[0] = qn;
        n.output[0] = rows.clone();
        let attrs = if scales.len() > 1 {
            vec![int_attr("axis", -1)]
        } else {
            vec![]
        };
        after.insert(
            i,
            node(
                "DequantizeLinear",
                format!("{out}_DequantizeLinear"),
                vec![rows, sn, zn],
                out,
                attrs,
            ),
        );
    }
    let count = after.len();
    let old = std::mem::take(&mut g.node);
    for (i, n) in old.into_iter().enumerate() {
        g.node.push(n);
        if let Some(dq) = after.remove(&i) {
            g.node.push(dq);
        }
    }
    g.initializer.extend(new_inits);
    drop_unused_initializers(g);
    Ok(count)
}
