//! Quantized products: a QDQ model's `Conv`, `MatMul` and `Gemm` whose activation is
//! `DequantizeLinear(xq)` (a per-tensor scale and zero point) and whose weight is
//! `DequantizeLinear(wq)` of constant int8 weights (per-tensor or per-output-channel scales,
//! zero points all 0) become integer products:
//!
//! ```text
//! acc = ConvInteger(xq, wq, x_zero_point)     (or MatMulInteger; i32)
//! y   = Cast<f32>(acc) * (x_scale * w_scale)  (per output channel)
//!       [+ bias]                              (the dequantized i32 bias, a constant)
//! ```
//!
//! which is the float product up to f32 rounding (the integer sum is exact). The graph stays
//! standard ops, so the reference executor runs it as the oracle, and lowering fuses the
//! scale, bias, activation and the next `QuantizeLinear` into the integer kernel's epilogue.
//! Products of other forms (two activations, non-zero weight zero points, blocked scales)
//! stay float. `QLinearConv` and `QLinearMatMul` of that form (u8 activations and output,
//! constant int8 weights of zero points 0) become the same integer product, rescale and
//! i32 bias, then `QuantizeLinear` by the op's output scale and zero point. Runs before
//! constant folding, which would otherwise turn the dequantized weights into float
//! constants. Main graph only.

use crate::{Pass, PassContext};
use smelt_ir::op::elementwise::E8M0Rounding;
use smelt_ir::op::quant::QConv;
use smelt_ir::op::{ElementwiseOp, NnOp, QuantOp};
use smelt_ir::{Buf, DType, Data, Dim, Graph, Node, Op, Result, Tensor, ValueId, ValueType};
use std::collections::HashMap;

/// The quantized-products pass.
pub struct QuantizedProducts;

impl Pass for QuantizedProducts {
    fn name(&self) -> &'static str {
        "quantized-products"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        Ok(rewrite(g))
    }
}

/// A dequantized activation: `(xq - zero_point) * scale`, per tensor.
struct Activation {
    xq: ValueId,
    zero_point: Option<ValueId>,
    scale: f32,
}

/// Dequantized constant int8 weights with zero points all 0.
struct Weights {
    /// The int8 constant.
    id: ValueId,
    wq: Tensor,
    /// One scale, or one per index of `axis`.
    scales: Vec<f32>,
    axis: usize,
}

/// The graph's constants and producers, for reading the operands of a product.
struct Index<'g> {
    g: &'g Graph,
    constants: HashMap<ValueId, &'g Tensor>,
    producer: HashMap<ValueId, usize>,
}

impl<'g> Index<'g> {
    fn new(g: &'g Graph) -> Index<'g> {
        let constants = g.constants.iter().map(|c| (c.id, &c.tensor)).collect();
        let mut producer = HashMap::new();
        for (i, n) in g.nodes.iter().enumerate() {
            for o in n.outputs.iter().flatten() {
                producer.insert(*o, i);
            }
        }
        Index {
            g,
            constants,
            producer,
        }
    }

    /// The DequantizeLinear producing `v`: (x, scale, zero point, axis), when unblocked.
    fn dequantize(&self, v: ValueId) -> Option<(ValueId, ValueId, Option<ValueId>, i64)> {
        let n = &self.g.nodes[*self.producer.get(&v)?];
        let Op::Quant(QuantOp::DequantizeLinear {
            axis,
            block_size: 0,
            output_dtype: None | Some(DType::F32),
        }) = &n.op
        else {
            return None;
        };
        let x = n.inputs.first().copied().flatten()?;
        let s = n.inputs.get(1).copied().flatten()?;
        Some((x, s, n.inputs.get(2).copied().flatten(), *axis))
    }

    /// `v` as a per-tensor dequantized u8 or i8 activation.
    fn activation(&self, v: ValueId) -> Option<Activation> {
        let (xq, s, zp, _) = self.dequantize(v)?;
        if !matches!(
            super::lower::dtype_of(self.g, xq),
            Some(DType::U8 | DType::I8)
        ) {
            return None;
        }
        let scale = self.constants.get(&s)?;
        if scale.len() != 1 || scale.dtype() != DType::F32 {
            return None;
        }
        let scale = scale.as_f32()?[0];
        if let Some(z) = zp {
            let t = self.constants.get(&z)?;
            if t.len() != 1 || Some(t.dtype()) != super::lower::dtype_of(self.g, xq) {
                return None;
            }
        }
        (scale.is_finite() && scale > 0.0).then_some(Activation {
            xq,
            zero_point: zp,
            scale,
        })
    }

    /// `v` as dequantized constant int8 weights of rank `rank` whose scales are per tensor
    /// or along `channel_axis`.
    fn weights(&self, v: ValueId, rank: usize, channel_axis: usize) -> Option<Weights> {
        let (id, s, zp, axis) = self.dequantize(v)?;
        let wq = *self.constants.get(&id)?;
        if wq.dtype() != DType::I8 || wq.rank() != rank {
            return None;
        }
        let scales = self.constants.get(&s)?;
        if scales.dtype() != DType::F32 {
            return None;
        }
        let scales = scales.as_f32()?.to_vec();
        // (An empty scale would leave the per-channel scale nothing to index.)
        if scales.is_empty() || scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return None;
        }
        if let Some(z) = zp {
            let z = self.constants.get(&z)?;
            if z.len() != scales.len() || z.to_i64().ok()?.iter().any(|&v| v != 0) {
                return None;
            }
        }
        let axis = if axis < 0 { axis + rank as i64 } else { axis };
        let per_channel = scales.len() > 1;
        if per_channel && (axis != channel_axis as i64 || scales.len() != wq.shape()[channel_axis])
        {
            return None;
        }
        Some(Weights {
            id,
            wq: wq.clone(),
            scales,
            axis: channel_axis,
        })
    }

    /// An f32 bias of `len` values: a constant, or a dequantized constant (i32 with scale).
    fn bias(&self, v: ValueId, len: usize) -> Option<Vec<f32>> {
        if let Some(t) = self.constants.get(&v) {
            return (t.dtype() == DType::F32 && t.len() == len)
                .then(|| t.as_f32().unwrap_or(&[]).to_vec());
        }
        let (bq, s, zp, _) = self.dequantize(v)?;
        let bq = self.constants.get(&bq)?;
        let s = self.constants.get(&s)?.as_f32()?;
        if bq.len() != len || !(s.len() == 1 || s.len() == len) {
            return None;
        }
        let z = match zp {
            Some(z) => self.constants.get(&z)?.to_i64().ok()?,
            None => vec![0],
        };
        if !(z.len() == 1 || z.len() == len) {
            return None;
        }
        let q = bq.to_i64().ok()?;
        let pick = |v: &[f32], i: usize| v[if v.len() == 1 { 0 } else { i }];
        Some(
            (0..len)
                .map(|i| (q[i] - z[if z.len() == 1 { 0 } else { i }]) as f32 * pick(s, i))
                .collect(),
        )
    }
}

/// What replaces one product node.
struct Rewrite {
    /// The node index replaced.
    at: usize,
    /// The integer product's op and inputs.
    op: Op,
    inputs: Vec<Option<ValueId>>,
    /// A new int8 weight constant (a transposed Gemm B), else the original weight value.
    weight: WeightInput,
    /// Per-output-channel scale, the bias, and how they are shaped to broadcast.
    scale: Vec<f32>,
    bias: Option<Vec<f32>>,
    channel_shape: Vec<usize>,
    /// A QLinear op's output quantization (y_scale, y_zero_point): the rescaled value is
    /// quantized into the op's output.
    requantize: Option<(ValueId, Option<ValueId>)>,
}

enum WeightInput {
    Original(ValueId),
    New(Tensor),
}

/// Rewrites every product of the quantized form; true if any changed.
fn rewrite(g: &mut Graph) -> bool {
    let plans: Vec<Rewrite> = {
        let ix = Index::new(g);
        g.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| plan(&ix, i, n))
            .collect()
    };
    if plans.is_empty() {
        return false;
    }
    let mut extra: HashMap<usize, Vec<Node>> = HashMap::new();
    for p in plans {
        let new_nodes = apply(g, &p);
        extra.insert(p.at, new_nodes);
    }
    replace_nodes(g, extra);
    true
}

/// The rewrite of node `i`, if it is a product of the quantized form.
fn plan(ix: &Index, at: usize, n: &Node) -> Option<Rewrite> {
    let out = n.outputs.first().copied().flatten()?;
    match &n.op {
        Op::Quant(QuantOp::QLinearConv { conv }) => return qlinear(ix, at, n, Some(conv)),
        Op::Quant(QuantOp::QLinearMatMul) => return qlinear(ix, at, n, None),
        _ => {}
    }
    if super::lower::dtype_of(ix.g, out) != Some(DType::F32) {
        return None;
    }
    let a = ix.activation(n.inputs.first().copied().flatten()?)?;
    let w_in = n.inputs.get(1).copied().flatten()?;
    let per = |w: &Weights, c: usize| -> Vec<f32> {
        (0..c)
            .map(|i| a.scale * w.scales[if w.scales.len() == 1 { 0 } else { i }])
            .collect()
    };
    match &n.op {
        Op::Nn(NnOp::Conv {
            auto_pad,
            dilations,
            group,
            kernel_shape,
            pads,
            strides,
        }) => {
            let rank = ix.constants.get(&ix.dequantize(w_in)?.0)?.rank();
            if rank < 3 {
                return None;
            }
            let w = ix.weights(w_in, rank, 0)?;
            let cout = w.wq.shape()[0];
            let bias = match n.inputs.get(2).copied().flatten() {
                Some(b) => Some(ix.bias(b, cout)?),
                None => None,
            };
            let opt = |v: &Vec<i64>| (!v.is_empty()).then(|| v.clone());
            let mut channel_shape = vec![1; rank - 1];
            channel_shape[0] = cout;
            Some(Rewrite {
                at,
                op: Op::Quant(QuantOp::ConvInteger {
                    conv: QConv {
                        auto_pad: auto_pad.clone(),
                        kernel_shape: opt(kernel_shape),
                        pads: opt(pads),
                        strides: opt(strides),
                        dilations: opt(dilations),
                        group: *group,
                    },
                }),
                inputs: vec![Some(a.xq), None, a.zero_point],
                weight: WeightInput::Original(w.id),
                scale: per(&w, cout),
                bias,
                channel_shape,
                requantize: None,
            })
        }
        Op::Nn(NnOp::MatMul) => {
            let w = ix.weights(w_in, 2, 1)?;
            let ncols = w.wq.shape()[1];
            debug_assert_eq!(w.axis, 1);
            Some(Rewrite {
                at,
                op: Op::Quant(QuantOp::MatMulInteger),
                inputs: vec![Some(a.xq), None, a.zero_point],
                weight: WeightInput::Original(w.id),
                scale: per(&w, ncols),
                bias: None,
                channel_shape: vec![ncols],
                requantize: None,
            })
        }
        Op::Nn(NnOp::Gemm {
            alpha,
            beta,
            trans_a: false,
            trans_b,
        }) if *alpha == 1.0 && *beta == 1.0 => {
            let w = ix.weights(w_in, 2, usize::from(!*trans_b))?;
            let wq = if *trans_b {
                transposed(&w.wq)?
            } else {
                w.wq.clone()
            };
            let ncols = wq.shape()[1];
            let bias = match n.inputs.get(2).copied().flatten() {
                Some(b) => Some(ix.bias(b, ncols)?),
                None => None,
            };
            Some(Rewrite {
                at,
                op: Op::Quant(QuantOp::MatMulInteger),
                inputs: vec![Some(a.xq), None, a.zero_point],
                scale: per(&w, ncols),
                weight: if *trans_b {
                    WeightInput::New(wq)
                } else {
                    WeightInput::Original(w.id)
                },
                bias,
                channel_shape: vec![ncols],
                requantize: None,
            })
        }
        _ => None,
    }
}

/// Replaces node `i` of `g` by `replacements[i]`, where it has one.
pub(crate) fn replace_nodes(g: &mut Graph, mut replacements: HashMap<usize, Vec<Node>>) {
    let old = std::mem::take(&mut g.nodes);
    for (i, n) in old.into_iter().enumerate() {
        match replacements.remove(&i) {
            Some(ns) => g.nodes.extend(ns),
            None => g.nodes.push(n),
        }
    }
}

/// The rewrite of a `QLinearConv` (`conv`) or `QLinearMatMul` of u8 activations with a
/// per-tensor scale and zero point, constant int8 weights of zero points 0 (scales per
/// tensor or per output channel) and a u8 output: the integer product, the rescale by
/// `x_scale * w_scale`, the i32 bias at that scale, then QuantizeLinear by the output's
/// scale and zero point. Inputs: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp [, bias].
fn qlinear(ix: &Index, at: usize, n: &Node, conv: Option<&QConv>) -> Option<Rewrite> {
    let input = |i: usize| n.inputs.get(i).copied().flatten();
    let konst = |i: usize| ix.constants.get(&input(i)?).copied();
    let dtype = |v: ValueId| super::lower::dtype_of(ix.g, v);
    let x = input(0)?;
    let out = n.outputs.first().copied().flatten()?;
    if dtype(x) != Some(DType::U8) || dtype(out) != Some(DType::U8) {
        return None;
    }
    let scalar = |i: usize| {
        let t = konst(i)?;
        (t.len() == 1)
            .then(|| t.to_f64().ok())
            .flatten()
            .map(|v| v[0] as f32)
    };
    let xs = scalar(1)?;
    if let Some(z) = input(2) {
        let t = ix.constants.get(&z)?;
        if t.dtype() != DType::U8 || t.len() != 1 {
            return None;
        }
    }
    let w = konst(3)?;
    if w.dtype() != DType::I8 {
        return None;
    }
    let channels = match conv {
        Some(_) if w.rank() >= 3 => w.shape()[0],
        None if w.rank() == 2 => w.shape()[1],
        _ => return None,
    };
    let ws = konst(4)?.as_f32()?;
    if !(ws.len() == 1 || ws.len() == channels) {
        return None;
    }
    if let Some(z) = konst(5) {
        if !z.to_i64().ok()?.iter().all(|&v| v == 0) {
            return None;
        }
    } else if input(5).is_some() {
        return None;
    }
    scalar(6).filter(|s| *s > 0.0 && s.is_finite())?;
    if let Some(z) = input(7) {
        let t = ix.constants.get(&z)?;
        if t.dtype() != DType::U8 || t.len() != 1 {
            return None;
        }
    }
    let scale: Vec<f32> = (0..channels)
        .map(|c| xs * ws[if ws.len() == 1 { 0 } else { c }])
        .collect();
    let bias = match (conv, input(8)) {
        (Some(_), Some(b)) => {
            let t = ix.constants.get(&b)?;
            if t.dtype() != DType::I32 || t.len() != channels {
                return None;
            }
            let q = t.to_i64().ok()?;
            Some(q.iter().zip(&scale).map(|(&v, &s)| v as f32 * s).collect())
        }
        _ => None,
    };
    let (op, channel_shape) = match conv {
        Some(c) => {
            let mut shape = vec![1; w.rank() - 1];
            shape[0] = channels;
            (Op::Quant(QuantOp::ConvInteger { conv: c.clone() }), shape)
        }
        None => (Op::Quant(QuantOp::MatMulInteger), vec![channels]),
    };
    Some(Rewrite {
        at,
        op,
        inputs: vec![Some(x), None, input(2)],
        weight: WeightInput::Original(input(3)?),
        scale,
        bias,
        channel_shape,
        requantize: Some((input(6)?, input(7))),
    })
}

/// A 2-D int8 tensor transposed.
fn transposed(t: &Tensor) -> Option<Tensor> {
    let Data::I8(v) = t.data() else {
        return None;
    };
    let (r, c) = (t.shape()[0], t.shape()[1]);
    let v = v.as_slice();
    let out: Vec<i8> = (0..c * r).map(|i| v[(i % r) * c + i / r]).collect();
    Tensor::new(DType::I8, vec![c, r], Data::I8(Buf::from_vec(out))).ok()
}

/// A tensor type of known dims.
pub(crate) fn known(dtype: DType, shape: &[usize]) -> Option<ValueType> {
    Some(ValueType::Tensor {
        dtype,
        shape: Some(shape.iter().map(|&d| Dim::Known(d as u64)).collect()),
    })
}

/// Adds an f32 constant named `name`.
pub(crate) fn constant(g: &mut Graph, name: String, shape: &[usize], v: Vec<f32>) -> ValueId {
    let id = g.add_value(name, known(DType::F32, shape));
    if let Ok(tensor) = Tensor::from_f32(shape.to_vec(), v) {
        g.constants.push(smelt_ir::Constant { id, tensor });
    }
    id
}

/// Applies a rewrite; returns the nodes that replace the product.
fn apply(g: &mut Graph, p: &Rewrite) -> Vec<Node> {
    let n = g.nodes[p.at].clone();
    let out = n.outputs[0].unwrap_or(ValueId(0));
    // The product's type with another element type (its dims may be symbolic).
    let out_shape = match &g.value(out).ty {
        Some(ValueType::Tensor { shape, .. }) => shape.clone(),
        _ => None,
    };
    let like = |dtype: DType| {
        Some(ValueType::Tensor {
            dtype,
            shape: out_shape.clone(),
        })
    };
    let name = n.name.clone();
    let weight = match &p.weight {
        WeightInput::Original(v) => *v,
        WeightInput::New(t) => {
            let id = g.add_value(format!("{name}.weight_q"), known(DType::I8, t.shape()));
            g.constants.push(smelt_ir::Constant {
                id,
                tensor: t.clone(),
            });
            id
        }
    };
    let mut inputs = p.inputs.clone();
    inputs[1] = Some(weight);
    if inputs[2].is_none() {
        inputs.truncate(2);
    }
    let acc = g.add_value(format!("{name}.acc"), like(DType::I32));
    let scale = constant(
        g,
        format!("{name}.scale"),
        &p.channel_shape,
        p.scale.clone(),
    );
    let bias = p
        .bias
        .as_ref()
        .map(|b| constant(g, format!("{name}.bias_f32"), &p.channel_shape, b.clone()));
    let mut nodes = vec![Node {
        name: format!("{name}.integer"),
        op: p.op.clone(),
        inputs,
        outputs: vec![Some(acc)],
    }];
    match p.requantize {
        None => nodes.extend(finish_integer(g, &name, acc, scale, bias, out)),
        Some((ys, yz)) => {
            let v = g.add_value(format!("{name}.dequantized"), like(DType::F32));
            nodes.extend(finish_integer(g, &name, acc, scale, bias, v));
            nodes.push(Node {
                name: format!("{name}.requantize"),
                op: Op::Quant(QuantOp::QuantizeLinear {
                    axis: 1,
                    block_size: 0,
                    output_dtype: None,
                    saturate: true,
                    precision: None,
                }),
                inputs: vec![Some(v), Some(ys), yz],
                outputs: vec![Some(out)],
            });
        }
    }
    nodes
}

/// The nodes finishing an integer product `acc` (i32) into the f32 value `out` of its
/// type: `Cast<f32>(acc) * scale [+ bias]`, named after the product `name`.
pub(crate) fn finish_integer(
    g: &mut Graph,
    name: &str,
    acc: ValueId,
    scale: ValueId,
    bias: Option<ValueId>,
    out: ValueId,
) -> Vec<Node> {
    let f32_ty = match &g.value(out).ty {
        Some(ValueType::Tensor { shape, .. }) => Some(ValueType::Tensor {
            dtype: DType::F32,
            shape: shape.clone(),
        }),
        _ => None,
    };
    let accf = g.add_value(format!("{name}.acc_f32"), f32_ty.clone());
    let scaled = match bias {
        Some(_) => g.add_value(format!("{name}.scaled"), f32_ty),
        None => out,
    };
    let mut nodes = vec![
        Node {
            name: format!("{name}.to_f32"),
            op: Op::Elementwise(ElementwiseOp::Cast {
                to: DType::F32,
                saturate: true,
                round_mode: E8M0Rounding::Up,
            }),
            inputs: vec![Some(acc)],
            outputs: vec![Some(accf)],
        },
        Node {
            name: format!("{name}.rescale"),
            op: Op::Elementwise(ElementwiseOp::Mul),
            inputs: vec![Some(accf), Some(scale)],
            outputs: vec![Some(scaled)],
        },
    ];
    if let Some(b) = bias {
        nodes.push(Node {
            name: format!("{name}.bias"),
            op: Op::Elementwise(ElementwiseOp::Add),
            inputs: vec![Some(scaled), Some(b)],
            outputs: vec![Some(out)],
        });
    }
    nodes
}

#[cfg(test)]
mod tests;
