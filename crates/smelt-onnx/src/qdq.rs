//! Writes a static-quantized QDQ model: each product (`Conv`, `MatMul`, `Gemm`) whose
//! weight is a float initializer reads its activation through `QuantizeLinear` ->
//! `DequantizeLinear` (u8, asymmetric, per tensor, from a calibrated range) and its weight
//! through `DequantizeLinear` of int8 (symmetric, zero point 0, per output channel or per
//! tensor); a `Conv`/`Gemm` bias becomes int32 at scale `x_scale * w_scale`. The layout
//! onnxruntime's `quantize_static` writes, so onnxruntime runs the file too. Inference
//! BatchNormalization after a `Conv` is folded into it first, so the folded weights are
//! what is quantized. Main graph only.

use crate::proto::{
    attribute_proto::attribute_type, AttributeProto, DataType, GraphProto, ModelProto, NodeProto,
    TensorProto,
};
use smelt_ir::{bail, Result};
use std::collections::{HashMap, HashSet};

/// A product to quantize.
#[derive(Debug, Clone)]
pub struct Target {
    /// Its index in the graph's nodes.
    pub node: usize,
    /// The activation it reads (input 0).
    pub activation: String,
    /// Its weight initializer (input 1).
    pub weight: String,
    /// The weight's output-channel axis.
    pub axis: usize,
}

/// A calibrated activation range.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    /// Smallest value seen (or the lower percentile).
    pub min: f32,
    /// Largest value seen (or the upper percentile).
    pub max: f32,
}

/// How weights are quantized.
#[derive(Debug, Clone, Copy)]
pub struct QdqOptions {
    /// One scale per output channel (else one per tensor).
    pub per_channel: bool,
    /// 7-bit weights, within [-63, 63]: their products with u8 activations then sum in
    /// pairs without saturating 16 bits, so CPUs without VNNI take the faster
    /// `vpmaddubsw` kernel (one bit of weight precision for it).
    pub reduce_range: bool,
    /// Which Add and Sum inputs that are quantized activations read the dequantized value.
    pub residuals: Residuals,
}

/// Which Add and Sum nodes (skip connections) read a quantized activation's dequantized
/// value instead of its float value. Read dequantized, a skip connection stays 8-bit: one
/// byte an element to write and read again, not four besides the byte the next product
/// reads (ResNet-50: 13% faster, top-1 and cosine to fp32 unchanged on 26 photographs).
/// In a transformer the residual stream holds outliers, and quantizing it costs accuracy
/// (MiniLM-L3 on 128 sentences: embedding cosine to fp32 0.9943, against 0.9970 float).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Residuals {
    /// Where the activation is a rectifier's output (Relu, Clip): a convolutional
    /// network's blocks.
    #[default]
    Auto,
    /// Every such read (as onnxruntime's QDQ models do).
    Quantized,
    /// None: Add and Sum keep the float values.
    Float,
}

fn attr<'a>(n: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    n.attribute.iter().find(|a| a.name == name)
}

fn attr_i(n: &NodeProto, name: &str, default: i64) -> i64 {
    attr(n, name).map_or(default, |a| a.i)
}

fn attr_f(n: &NodeProto, name: &str, default: f32) -> f32 {
    attr(n, name).map_or(default, |a| a.f)
}

/// An initializer's f32 values and dims, if it is an f32 tensor in the file.
fn f32_initializer(g: &GraphProto, name: &str) -> Option<(Vec<f32>, Vec<usize>)> {
    let t = g.initializer.iter().find(|t| t.name == name)?;
    if t.data_type != DataType::Float as i32 || !t.external_data.is_empty() {
        return None;
    }
    let v = crate::decode_tensor(t, None).ok()?;
    Some((v.as_f32()?.to_vec(), v.shape().to_vec()))
}

/// An f32 tensor initializer.
fn f32_tensor(name: &str, dims: &[usize], v: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: DataType::Float as i32,
        raw_data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// An integer tensor initializer of `dtype` (Int8, Uint8 or Int32).
fn int_tensor(name: &str, dims: &[usize], dtype: DataType, v: &[i32]) -> TensorProto {
    let raw: Vec<u8> = match dtype {
        DataType::Int32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        _ => v.iter().map(|&x| x as u8).collect(),
    };
    TensorProto {
        name: name.into(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: dtype as i32,
        raw_data: raw,
        ..Default::default()
    }
}

fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INT,
        i,
        ..Default::default()
    }
}

fn node(
    op: &str,
    name: String,
    inputs: Vec<String>,
    output: String,
    attrs: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name,
        input: inputs,
        output: vec![output],
        attribute: attrs,
        ..Default::default()
    }
}

/// How many nodes read each value (and graph outputs count once each).
fn readers(g: &GraphProto) -> HashMap<String, usize> {
    let mut r: HashMap<String, usize> = HashMap::new();
    for n in &g.node {
        for i in n.input.iter().filter(|i| !i.is_empty()) {
            *r.entry(i.clone()).or_default() += 1;
        }
    }
    for o in &g.output {
        *r.entry(o.name.clone()).or_default() += 1;
    }
    r
}

/// Folds each inference BatchNormalization whose input is a `Conv` read by it alone, with
/// f32 initializer weights and statistics, into the Conv; returns how many.
pub fn fold_batchnorm(g: &mut GraphProto) -> usize {
    let mut folded = 0;
    loop {
        let r = readers(g);
        let producer: HashMap<&str, usize> = g
            .node
            .iter()
            .enumerate()
            .flat_map(|(i, n)| n.output.iter().map(move |o| (o.as_str(), i)))
            .collect();
        let found = g.node.iter().enumerate().find_map(|(bi, bn)| {
            if bn.op_type != "BatchNormalization" || !bn.domain.is_empty() || bn.output.len() != 1 {
                return None;
            }
            let ci = *producer.get(bn.input.first()?.as_str())?;
            let conv = &g.node[ci];
            if conv.op_type != "Conv" || r.get(&conv.output[0]) != Some(&1) {
                return None;
            }
            let get = |k: usize| f32_initializer(g, bn.input.get(k)?);
            let (scale, bias, mean, var) = (get(1)?, get(2)?, get(3)?, get(4)?);
            let (w, wd) = f32_initializer(g, conv.input.get(1)?)?;
            let m = *wd.first()?;
            if [&scale, &bias, &mean, &var].iter().any(|v| v.0.len() != m) {
                return None;
            }
            let b = match conv.input.get(2).filter(|s| !s.is_empty()) {
                Some(name) => f32_initializer(g, name)?.0,
                None => vec![0.0; m],
            };
            let eps = attr_f(bn, "epsilon", 1e-5);
            let k = w.len() / m;
            let f: Vec<f32> = (0..m)
                .map(|c| scale.0[c] / (var.0[c] + eps).sqrt())
                .collect();
            let w2: Vec<f32> = w.iter().enumerate().map(|(i, &x)| x * f[i / k]).collect();
            let b2: Vec<f32> = (0..m)
                .map(|c| (b[c] - mean.0[c]) * f[c] + bias.0[c])
                .collect();
            Some((bi, ci, w2, wd, b2))
        });
        let Some((bi, ci, w2, wd, b2)) = found else {
            return folded;
        };
        let cname = if g.node[ci].name.is_empty() {
            format!("conv{ci}")
        } else {
            g.node[ci].name.clone()
        };
        let (wn, bn_name) = (
            format!("{cname}_bn_folded_weight"),
            format!("{cname}_bn_folded_bias"),
        );
        g.initializer.push(f32_tensor(&wn, &wd, &w2));
        g.initializer.push(f32_tensor(&bn_name, &[b2.len()], &b2));
        let out = g.node[bi].output[0].clone();
        let conv = &mut g.node[ci];
        conv.input.resize(3, String::new());
        conv.input[1] = wn;
        conv.input[2] = bn_name;
        conv.output[0] = out;
        g.node.remove(bi);
        folded += 1;
    }
}

/// The products of `g` to quantize (op types among `ops`), in graph order.
pub fn targets(g: &GraphProto, ops: &[&str]) -> Vec<Target> {
    let inits: HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    g.node
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            if !n.domain.is_empty() || !ops.contains(&n.op_type.as_str()) {
                return None;
            }
            // (A product's rewrite names its output.)
            n.output.first().filter(|o| !o.is_empty())?;
            let act = n.input.first()?;
            let w = n.input.get(1)?;
            if act.is_empty() || inits.contains(act.as_str()) || !inits.contains(w.as_str()) {
                return None;
            }
            let (_, dims) = f32_initializer(g, w)?;
            let axis = match n.op_type.as_str() {
                "Conv" if dims.len() >= 3 => 0,
                "MatMul" if dims.len() == 2 => 1,
                "Gemm"
                    if dims.len() == 2
                        && attr_i(n, "transA", 0) == 0
                        && attr_f(n, "alpha", 1.0) == 1.0
                        && attr_f(n, "beta", 1.0) == 1.0 =>
                {
                    if attr_i(n, "transB", 0) != 0 {
                        0
                    } else {
                        1
                    }
                }
                _ => return None,
            };
            Some(Target {
                node: i,
                activation: act.clone(),
                weight: w.clone(),
                axis,
            })
        })
        .collect()
}

/// u8 scale and zero point covering `r` (and 0).
pub fn activation_params(r: Range) -> (f32, u8) {
    let (lo, hi) = (r.min.min(0.0), r.max.max(0.0));
    let scale = (hi - lo) / 255.0;
    if !(scale.is_finite() && scale > 0.0) {
        return (1.0, 0);
    }
    let zp = (-lo / scale).round_ties_even().clamp(0.0, 255.0) as u8;
    (scale, zp)
}

/// The version of the default (ai.onnx) opset the model imports, 0 if none.
fn main_opset(model: &ModelProto) -> i64 {
    model
        .opset_import
        .iter()
        .filter(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .max()
        .unwrap_or(0)
}

/// Rewrites `model` as a QDQ model of `targets` with the activation ranges `ranges`.
pub fn write_qdq(
    model: &mut ModelProto,
    targets: &[Target],
    ranges: &HashMap<String, Range>,
    opts: QdqOptions,
) -> Result<()> {
    let opset = main_opset(model);
    let need = if opts.per_channel { 13 } else { 10 };
    if opset < need {
        bail!(
            Unsupported,
            "the model imports opset {opset}; QDQ with {} weights needs opset {need} or later (convert it first, e.g. onnx.version_converter)",
            if opts.per_channel { "per-channel" } else { "per-tensor" }
        );
    }
    let Some(g) = model.graph.as_mut() else {
        bail!(InvalidModel, "the model has no graph");
    };
    // Activations: one QuantizeLinear/DequantizeLinear pair each, before its first reader.
    let mut first_reader: HashMap<String, usize> = HashMap::new();
    for t in targets {
        let e = first_reader.entry(t.activation.clone()).or_insert(t.node);
        *e = (*e).min(t.node);
    }
    // Add/Sum inputs that read the dequantized activation: (node, input position).
    let rectified: HashSet<&str> = g
        .node
        .iter()
        .filter(|n| n.domain.is_empty() && (n.op_type == "Relu" || n.op_type == "Clip"))
        .filter_map(|n| n.output.first().map(String::as_str))
        .collect();
    let mut residual_reads: Vec<(usize, usize)> = Vec::new();
    for (i, n) in g.node.iter().enumerate() {
        if !(n.op_type == "Add" || n.op_type == "Sum") || !n.domain.is_empty() {
            continue;
        }
        for (k, x) in n.input.iter().enumerate() {
            let wanted = match opts.residuals {
                Residuals::Float => false,
                Residuals::Quantized => true,
                Residuals::Auto => rectified.contains(x.as_str()),
            };
            if let (true, Some(e)) = (wanted, first_reader.get_mut(x)) {
                *e = (*e).min(i);
                residual_reads.push((i, k));
            }
        }
    }
    let mut act_params: HashMap<String, (f32, u8)> = HashMap::new();
    let mut before: HashMap<usize, Vec<NodeProto>> = HashMap::new();
    let mut new_inits: Vec<TensorProto> = Vec::new();
    let mut sorted: Vec<(&String, &usize)> = first_reader.iter().collect();
    sorted.sort();
    for (a, &at) in sorted {
        let Some(r) = ranges.get(a) else {
            bail!(Internal, "no calibrated range for activation {a}");
        };
        let (s, z) = activation_params(*r);
        act_params.insert(a.clone(), (s, z));
        let (sn, zn) = (format!("{a}_scale"), format!("{a}_zero_point"));
        new_inits.push(f32_tensor(&sn, &[], &[s]));
        new_inits.push(int_tensor(&zn, &[], DataType::Uint8, &[z as i32]));
        let (qn, dn) = (format!("{a}_quantized"), format!("{a}_dequantized"));
        let nodes = before.entry(at).or_default();
        nodes.push(node(
            "QuantizeLinear",
            format!("{a}_QuantizeLinear"),
            vec![a.clone(), sn.clone(), zn.clone()],
            qn.clone(),
            vec![],
        ));
        nodes.push(node(
            "DequantizeLinear",
            format!("{a}_DequantizeLinear"),
            vec![qn, sn, zn],
            dn,
            vec![],
        ));
    }
    for (i, k) in residual_reads {
        let x = &mut g.node[i].input[k];
        *x = format!("{x}_dequantized");
    }
    // Weights (once per weight and axis) and biases.
    let mut weight_dq: HashMap<(String, usize), (String, Vec<f32>)> = HashMap::new();
    let mut head: Vec<NodeProto> = Vec::new();
    for t in targets {
        let key = (t.weight.clone(), t.axis);
        if !weight_dq.contains_key(&key) {
            let Some((w, dims)) = f32_initializer(g, &t.weight) else {
                bail!(Internal, "weight {} is not an f32 initializer", t.weight);
            };
            let qmax = if opts.reduce_range { 63.0 } else { 127.0 };
            let (scales, q) =
                smelt_ir::precision::quantize_symmetric(&w, &dims, t.axis, opts.per_channel, qmax);
            let base = if t.axis == 0 {
                t.weight.clone()
            } else {
                format!("{}_axis{}", t.weight, t.axis)
            };
            let (qn, sn, zn, dn) = (
                format!("{base}_quantized"),
                format!("{base}_scale"),
                format!("{base}_zero_point"),
                format!("{base}_dequantized"),
            );
            new_inits.push(int_tensor(&qn, &dims, DataType::Int8, &q));
            let sd: Vec<usize> = if scales.len() > 1 {
                vec![scales.len()]
            } else {
                vec![]
            };
            new_inits.push(f32_tensor(&sn, &sd, &scales));
            new_inits.push(int_tensor(&zn, &sd, DataType::Int8, &vec![0; scales.len()]));
            let attrs = if scales.len() > 1 {
                vec![int_attr("axis", t.axis as i64)]
            } else {
                vec![]
            };
            head.push(node(
                "DequantizeLinear",
                format!("{base}_DequantizeLinear"),
                vec![qn, sn, zn],
                dn.clone(),
                attrs,
            ));
            weight_dq.insert(key.clone(), (dn, scales));
        }
        let (dn, wscales) = weight_dq[&key].clone();
        let (sx, _) = act_params[&t.activation];
        let n = &mut g.node[t.node];
        n.input[0] = format!("{}_dequantized", t.activation);
        n.input[1] = dn;
        // A 1-D bias of one value per output channel: int32 at x_scale * w_scale.
        let bias = n.input.get(2).filter(|b| !b.is_empty()).cloned();
        if let Some(b) = bias {
            if let Some((bv, bd)) = f32_initializer(g, &b) {
                let per = |c: usize| sx * wscales[if wscales.len() == 1 { 0 } else { c }];
                if bd.len() == 1 && (wscales.len() == 1 || wscales.len() == bv.len()) {
                    let bs: Vec<f32> = (0..bv.len()).map(per).collect();
                    let q: Vec<i32> = bv
                        .iter()
                        .zip(&bs)
                        .map(|(&x, &s)| {
                            (x / s)
                                .round_ties_even()
                                .clamp(i32::MIN as f32, i32::MAX as f32)
                                as i32
                        })
                        .collect();
                    let node_name = if g.node[t.node].name.is_empty() {
                        format!("node{}", t.node)
                    } else {
                        g.node[t.node].name.clone()
                    };
                    let (qn, sn, zn, dn) = (
                        format!("{node_name}_bias_quantized"),
                        format!("{node_name}_bias_scale"),
                        format!("{node_name}_bias_zero_point"),
                        format!("{node_name}_bias_dequantized"),
                    );
                    new_inits.push(int_tensor(&qn, &bd, DataType::Int32, &q));
                    new_inits.push(f32_tensor(&sn, &bd, &bs));
                    new_inits.push(int_tensor(&zn, &bd, DataType::Int32, &vec![0; bv.len()]));
                    head.push(node(
                        "DequantizeLinear",
                        format!("{node_name}_bias_DequantizeLinear"),
                        vec![qn, sn, zn],
                        dn.clone(),
                        vec![int_attr("axis", 0)],
                    ));
                    g.node[t.node].input[2] = dn;
                }
            }
        }
    }
    // New node order: weight dequantizations first, activation pairs before their readers.
    let old = std::mem::take(&mut g.node);
    let mut nodes = head;
    for (i, n) in old.into_iter().enumerate() {
        if let Some(qdq) = before.remove(&i) {
            nodes.extend(qdq);
        }
        nodes.push(n);
    }
    g.node = nodes;
    g.initializer.extend(new_inits);
    drop_unused_initializers(g);
    Ok(())
}

/// Removes the initializers no node reads any more (the float weights, folded
/// BatchNormalization statistics) and their graph-input entries; not where a subgraph might
/// read them.
fn drop_unused_initializers(g: &mut GraphProto) {
    let subgraphs = g.node.iter().any(|n| {
        n.attribute
            .iter()
            .any(|a| a.g.is_some() || !a.graphs.is_empty())
    });
    let mut read: HashSet<String> = g
        .node
        .iter()
        .flat_map(|n| n.input.iter().cloned())
        .collect();
    read.extend(g.output.iter().map(|o| o.name.clone()));
    let unused: HashSet<String> = g
        .initializer
        .iter()
        .filter(|t| !subgraphs && !read.contains(&t.name))
        .map(|t| t.name.clone())
        .collect();
    g.initializer.retain(|t| !unused.contains(&t.name));
    g.input.retain(|i| !unused.contains(&i.name));
}

/// A model's protobuf bytes.
pub fn encode(model: &ModelProto) -> Vec<u8> {
    prost::Message::encode_to_vec(model)
}

pub mod dynamic;

#[cfg(test)]
mod tests;
