//! Dynamic int8 (`--precision int8`): each `MatMul` (and `Gemm` of `alpha = beta = 1`, A
//! not transposed) whose weight is an f32 constant `K x N` and whose precision is int8 by
//! the policy becomes
//!
//! ```text
//! xq, xs, xz = DynamicQuantizeLinear(x)            (u8: each run's own range; one per x)
//! scale      = xs * w_scale                        (per output column)
//! y          = Cast<f32>(MatMulInteger(xq, wq, xz)) * scale   [+ bias]
//! ```
//!
//! with `wq` the weights as symmetric int8 per column. The graph stays standard ops (the
//! reference executor runs it), and lowering puts the products on the integer kernels with
//! the scale and bias fused into their epilogue. The form `smelt quantize --dynamic` writes
//! as ONNX. Main graph only.

use crate::quantized::{constant, finish_integer, known, replace_nodes};
use smelt_ir::op::{ElementwiseOp, NnOp, QuantOp};
use smelt_ir::{
    Buf, DType, Data, Graph, Node, Op, Precision, PrecisionPolicy, Tensor, ValueId, ValueType,
};
use std::collections::HashMap;

/// One product to rewrite.
struct Product {
    at: usize,
    x: ValueId,
    out: ValueId,
    /// Weights `K x N`.
    w: Vec<f32>,
    k: usize,
    n: usize,
    bias: Option<ValueId>,
}

/// The product at node `at`, if it has the form and the policy makes it int8.
fn product(
    g: &Graph,
    consts: &HashMap<ValueId, &Tensor>,
    at: usize,
    policy: &PrecisionPolicy,
) -> Option<Product> {
    let n = &g.nodes[at];
    if policy.for_node(&n.name, n.op.name()) != Precision::Int8 {
        return None;
    }
    let trans_b = match &n.op {
        Op::Nn(NnOp::MatMul) => false,
        Op::Nn(NnOp::Gemm {
            alpha,
            beta,
            trans_a: false,
            trans_b,
        }) if *alpha == 1.0 && *beta == 1.0 => *trans_b,
        _ => return None,
    };
    let x = n.inputs.first().copied().flatten()?;
    let out = n.outputs.first().copied().flatten()?;
    let f32_tensor = |v: ValueId| crate::lower::dtype_of(g, v) == Some(DType::F32);
    if consts.contains_key(&x) || !f32_tensor(x) || !f32_tensor(out) {
        return None;
    }
    let t = consts.get(&n.inputs.get(1).copied().flatten()?)?;
    let (w, dims) = (t.as_f32()?, t.shape());
    if dims.len() != 2 || w.len() < crate::precision::MIN_NARROWED_ELEMENTS {
        return None;
    }
    let (k, cols) = if trans_b {
        (dims[1], dims[0])
    } else {
        (dims[0], dims[1])
    };
    let w: Vec<f32> = if trans_b {
        (0..k * cols)
            .map(|i| w[(i % cols) * k + i / cols])
            .collect()
    } else {
        w.to_vec()
    };
    // MatMul's x must end in K (a Gemm's is 2-D); its rank is checked by lowering.
    match &g.value(x).ty {
        Some(ValueType::Tensor { shape: Some(s), .. })
            if s.last() == Some(&smelt_ir::Dim::Known(k as u64)) => {}
        _ => return None,
    }
    Some(Product {
        at,
        x,
        out,
        w,
        k,
        n: cols,
        bias: n.inputs.get(2).copied().flatten(),
    })
}

/// Rewrites the int8 products of `g`; true if any changed.
pub(crate) fn rewrite(g: &mut Graph, policy: &PrecisionPolicy) -> bool {
    let products: Vec<Product> = {
        let consts: HashMap<ValueId, &Tensor> =
            g.constants.iter().map(|c| (c.id, &c.tensor)).collect();
        (0..g.nodes.len())
            .filter_map(|i| product(g, &consts, i, policy))
            .collect()
    };
    if products.is_empty() {
        return false;
    }
    // One DynamicQuantizeLinear per activation, at its first product.
    let mut quantized: HashMap<ValueId, (ValueId, ValueId, ValueId)> = HashMap::new();
    let mut replace: HashMap<usize, Vec<Node>> = HashMap::new();
    for p in &products {
        let mut nodes = Vec::new();
        let name = g.nodes[p.at].name.clone();
        let out = p.out;
        let (xq, xs, xz) = match quantized.get(&p.x) {
            Some(q) => *q,
            None => {
                let x_shape = match &g.value(p.x).ty {
                    Some(ValueType::Tensor { shape, .. }) => shape.clone(),
                    _ => None,
                };
                let xname = g.value(p.x).name.clone();
                let xq = g.add_value(
                    format!("{xname}.q"),
                    Some(ValueType::Tensor {
                        dtype: DType::U8,
                        shape: x_shape,
                    }),
                );
                let xs = g.add_value(format!("{xname}.scale"), known(DType::F32, &[]));
                let xz = g.add_value(format!("{xname}.zero_point"), known(DType::U8, &[]));
                nodes.push(Node {
                    name: format!("{xname}.dynamic_quantize"),
                    op: Op::Quant(QuantOp::DynamicQuantizeLinear),
                    inputs: vec![Some(p.x)],
                    outputs: vec![Some(xq), Some(xs), Some(xz)],
                });
                quantized.insert(p.x, (xq, xs, xz));
                (xq, xs, xz)
            }
        };
        let (scales, q) =
            smelt_ir::precision::quantize_symmetric(&p.w, &[p.k, p.n], 1, true, 127.0);
        let q: Vec<i8> = q.into_iter().map(|v| v as i8).collect();
        let wq = Tensor::new(DType::I8, vec![p.k, p.n], Data::I8(Buf::from_vec(q)))
            .expect("k x n values");
        let wq_id = g.add_value(format!("{name}.weight_int8"), known(DType::I8, &[p.k, p.n]));
        g.constants.push(smelt_ir::Constant {
            id: wq_id,
            tensor: wq,
        });
        let ws = constant(g, format!("{name}.weight_scale"), &[p.n], scales);
        let out_shape = match &g.value(out).ty {
            Some(ValueType::Tensor { shape, .. }) => shape.clone(),
            _ => None,
        };
        let scale = g.add_value(format!("{name}.scale"), known(DType::F32, &[p.n]));
        let acc = g.add_value(
            format!("{name}.acc"),
            Some(ValueType::Tensor {
                dtype: DType::I32,
                shape: out_shape,
            }),
        );
        // The scale first, so it is computed before the product and fuses into it.
        nodes.push(Node {
            name: format!("{name}.scale"),
            op: Op::Elementwise(ElementwiseOp::Mul),
            inputs: vec![Some(xs), Some(ws)],
            outputs: vec![Some(scale)],
        });
        nodes.push(Node {
            name: format!("{name}.integer"),
            op: Op::Quant(QuantOp::MatMulInteger),
            inputs: vec![Some(xq), Some(wq_id), Some(xz)],
            outputs: vec![Some(acc)],
        });
        nodes.extend(finish_integer(g, &name, acc, scale, p.bias, out));
        replace.insert(p.at, nodes);
    }
    replace_nodes(g, replace);
    true
}
