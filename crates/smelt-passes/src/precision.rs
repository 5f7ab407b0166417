//! Lower-precision weights: the constant weights of the ops a [`PrecisionPolicy`] names
//! (by default the products: MatMul, Gemm, Conv) are stored as bf16 or f16, each read
//! through a `Cast` to f32 (named `<weight>.widen`), so the graph still computes in f32
//! and the reference executor runs it as is. Lowering reads such a widened constant in
//! place (see `lower::views`): the CPU kernels load the narrow weights and widen them as
//! they pack, so a plan holds half the weight bytes and moves half per run.
//!
//! Kept in f32: weights that are not f32 constants, small ones (under
//! [`MIN_NARROWED_ELEMENTS`]), and for f16 those with a finite value past its range
//! (65504), which would turn to infinity. Biases (Gemm's C, Conv's B) stay f32: they are
//! small and added after the accumulation.
//!
//! Main graph only.

use crate::{Pass, PassContext};
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use smelt_ir::op::elementwise::E8M0Rounding;
use smelt_ir::op::{ElementwiseOp, LayoutOp, NnOp};
use smelt_ir::{
    Buf, DType, Data, Graph, Node, Op, Precision, PrecisionPolicy, Result, Tensor, ValueId,
    ValueType,
};
use std::collections::HashMap;

/// Weights with fewer elements stay f32 (a narrowed copy saves nothing worth a cast).
pub const MIN_NARROWED_ELEMENTS: usize = 256;

/// The precision pass, applying a policy.
pub struct PrecisionPass(pub PrecisionPolicy);

impl Pass for PrecisionPass {
    fn name(&self) -> &'static str {
        "precision"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        if self.0.is_f32() {
            return Ok(false);
        }
        // Dynamic int8 products first (see `crate::dynamic_int8`); int8 narrows no weight
        // here, so the rest of an int8 policy keeps f32.
        let int8 = crate::dynamic_int8::rewrite(g, &self.0);
        Ok(narrow_weights(g, &self.0)? || int8)
    }
}

/// The inputs of `op` that are weights a lower precision may narrow.
fn weight_slots(op: &Op) -> &'static [usize] {
    match op {
        Op::Nn(NnOp::MatMul) => &[0, 1],
        Op::Nn(NnOp::Gemm { .. }) => &[0, 1],
        Op::Nn(NnOp::Conv { .. } | NnOp::ConvBlocked { .. }) => &[1],
        _ => &[],
    }
}

/// `t` (f32) stored in `to`, or None when it must stay f32 (an f16 overflow).
fn narrowed(t: &Tensor, to: Precision) -> Option<Tensor> {
    let v = t.as_f32()?;
    let data = match to {
        Precision::F32 | Precision::Int8 => return None,
        // (The slice conversions use F16C where the CPU has it.)
        Precision::Bf16 => {
            let mut h = vec![bf16::ZERO; v.len()];
            h.convert_from_f32_slice(v);
            Data::BF16(Buf::from_vec(h))
        }
        Precision::F16 => {
            let max = f16::MAX.to_f32();
            if v.iter().any(|x| x.is_finite() && x.abs() > max) {
                return None;
            }
            let mut h = vec![f16::ZERO; v.len()];
            h.convert_from_f32_slice(v);
            Data::F16(Buf::from_vec(h))
        }
    };
    Tensor::new(to.dtype(), t.shape().to_vec(), data).ok()
}

/// A tensor type of known dims.
fn known(dtype: DType, shape: &[usize]) -> Option<ValueType> {
    Some(ValueType::Tensor {
        dtype,
        shape: Some(
            shape
                .iter()
                .map(|&d| smelt_ir::Dim::Known(d as u64))
                .collect(),
        ),
    })
}

/// Narrows the weights of the nodes the policy names; true if any changed.
fn narrow_weights(g: &mut Graph, policy: &PrecisionPolicy) -> Result<bool> {
    let mut n8 = Narrowing {
        index: g
            .constants
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id, i))
            .collect(),
        narrow: HashMap::new(),
        widened: HashMap::new(),
        casts: Vec::new(),
    };
    let mut after: HashMap<usize, Node> = HashMap::new();
    let mut changed = false;
    for ni in 0..g.nodes.len() {
        let n = &g.nodes[ni];
        let p = policy.for_node(&n.name, n.op.name());
        if matches!(p, Precision::F32 | Precision::Int8) {
            continue;
        }
        if matches!(n.op, Op::Layout(LayoutOp::Gather { .. })) {
            if let Some(cast) = n8.table(g, ni, p) {
                after.insert(ni, cast);
                changed = true;
            }
            continue;
        }
        for &s in weight_slots(&n.op) {
            let Some(Some(w)) = g.nodes[ni].inputs.get(s).copied() else {
                continue;
            };
            if let Some(t) = n8.widened(g, w, p) {
                g.nodes[ni].inputs[s] = Some(t);
                changed = true;
            }
        }
    }
    // The weights' casts read constants only: they go first; a table's cast follows its
    // Gather.
    let mut nodes = n8.casts;
    for (i, n) in std::mem::take(&mut g.nodes).into_iter().enumerate() {
        nodes.push(n);
        nodes.extend(after.remove(&i));
    }
    g.nodes = nodes;
    Ok(changed)
}

/// What the pass made so far: each narrow copy and each widening cast once per (constant,
/// precision), shared by every node that reads it.
struct Narrowing {
    /// Where each constant is in the graph's list.
    index: HashMap<ValueId, usize>,
    /// The narrow copy of a constant (None: it stays f32).
    narrow: HashMap<(ValueId, Precision), Option<ValueId>>,
    /// The f32 value a narrow copy is read through.
    widened: HashMap<(ValueId, Precision), ValueId>,
    /// The widening casts made (they read constants only).
    casts: Vec<Node>,
}

impl Narrowing {
    /// The narrow copy `<w>.<p>` of constant `w`, or None when `w` stays f32 (not a
    /// constant, not f32, small, or past fp16's range).
    fn narrow(&mut self, g: &mut Graph, w: ValueId, p: Precision) -> Option<ValueId> {
        let ci = *self.index.get(&w)?;
        *self.narrow.entry((w, p)).or_insert_with(|| {
            let t = &g.constants[ci].tensor;
            if t.dtype() != DType::F32 || t.len() < MIN_NARROWED_ELEMENTS {
                return None;
            }
            let narrow = narrowed(t, p)?;
            let shape = t.shape().to_vec();
            let name = format!("{}.{}", g.name_of(w), p.name());
            let nv = g.add_value(name, known(p.dtype(), &shape));
            g.constants.push(smelt_ir::Constant {
                id: nv,
                tensor: narrow,
            });
            Some(nv)
        })
    }

    /// The f32 value `<w>.widen` reading constant `w` narrowed, or None when it stays f32.
    fn widened(&mut self, g: &mut Graph, w: ValueId, p: Precision) -> Option<ValueId> {
        if let Some(&v) = self.widened.get(&(w, p)) {
            return Some(v);
        }
        let nv = self.narrow(g, w, p)?;
        let shape = crate::lower::shape_of_value(g, w)?;
        let name = format!("{}.widen", g.name_of(w));
        let wide = g.add_value(name.clone(), known(DType::F32, &shape));
        self.casts.push(Node {
            name,
            op: widen_op(),
            inputs: vec![Some(nv)],
            outputs: vec![Some(wide)],
        });
        self.widened.insert((w, p), wide);
        Some(wide)
    }

    /// Narrows the constant table node `ni` (a Gather) reads: the Gather then picks narrow
    /// rows and a cast after it widens just those (an embedding table, most of a language
    /// model's weights, is read a few rows a run). Returns the cast, or None when the table
    /// stays f32.
    fn table(&mut self, g: &mut Graph, ni: usize, p: Precision) -> Option<Node> {
        let n = &g.nodes[ni];
        let table = n.inputs.first().copied().flatten()?;
        let out = n.outputs.first().copied().flatten()?;
        if g.outputs.contains(&out) {
            return None;
        }
        let nt = self.narrow(g, table, p)?;
        let picked_ty = crate::lower::shape_of_value(g, out).and_then(|s| known(p.dtype(), &s));
        let picked = g.add_value(format!("{}.{}", g.name_of(out), p.name()), picked_ty);
        let n = &mut g.nodes[ni];
        n.inputs[0] = Some(nt);
        n.outputs[0] = Some(picked);
        Some(Node {
            name: format!("{}.widen", n.name),
            op: widen_op(),
            inputs: vec![Some(picked)],
            outputs: vec![Some(out)],
        })
    }
}

/// A cast to f32.
fn widen_op() -> Op {
    Op::Elementwise(ElementwiseOp::Cast {
        to: DType::F32,
        saturate: true,
        round_mode: E8M0Rounding::Up,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use smelt_ir::Constant;

    fn matmul_graph(w: Vec<f32>, k: usize, n: usize) -> Graph {
        let mut g = Graph::default();
        let x = g.add_value("x", known(DType::F32, &[2, k]));
        let wv = g.add_value("w", known(DType::F32, &[k, n]));
        let y = g.add_value("y", known(DType::F32, &[2, n]));
        g.inputs.push(smelt_ir::GraphInput {
            id: x,
            default: None,
        });
        g.constants.push(Constant {
            id: wv,
            tensor: Tensor::from_f32(vec![k, n], w).unwrap(),
        });
        g.nodes.push(Node {
            name: "fc".into(),
            op: Op::Nn(NnOp::MatMul),
            inputs: vec![Some(x), Some(wv)],
            outputs: vec![Some(y)],
        });
        g.outputs.push(y);
        g
    }

    fn run(g: &mut Graph, policy: PrecisionPolicy) -> bool {
        let cx = PassContext { evaluate: None };
        PrecisionPass(policy).run(g, &cx).unwrap()
    }

    #[test]
    fn narrows_a_product_weight_behind_a_cast() {
        let w: Vec<f32> = (0..64 * 8).map(|i| i as f32 * 0.37 - 3.0).collect();
        let mut g = matmul_graph(w.clone(), 64, 8);
        assert!(run(&mut g, PrecisionPolicy::uniform(Precision::Bf16)));
        assert_eq!(g.nodes.len(), 2);
        assert_eq!(g.nodes[0].name, "w.widen");
        let narrow = g
            .constants
            .iter()
            .find(|c| g.name_of(c.id) == "w.bf16")
            .unwrap();
        assert_eq!(narrow.tensor.dtype(), DType::BF16);
        let Data::BF16(b) = narrow.tensor.data() else {
            panic!()
        };
        for (x, h) in w.iter().zip(b.as_slice()) {
            assert!((x - h.to_f32()).abs() <= x.abs() / 128.0);
        }
        assert_eq!(g.nodes[1].inputs[1], g.nodes[0].outputs[0]);
        smelt_ir::verify::verify(&g).unwrap();
    }

    #[test]
    fn keeps_what_the_policy_or_the_range_excludes() {
        let w = vec![1.0f32; 64 * 8];
        let mut g = matmul_graph(w.clone(), 64, 8);
        let mut pol = PrecisionPolicy::uniform(Precision::F16);
        pol.nodes.push(("fc".into(), Precision::F32));
        assert!(!run(&mut g, pol));
        // Too small.
        let mut g = matmul_graph(vec![1.0; 16], 4, 4);
        assert!(!run(&mut g, PrecisionPolicy::uniform(Precision::F16)));
        // Past f16's range: f32 kept; bf16 holds it.
        let mut big = w;
        big[3] = 1e6;
        let mut g = matmul_graph(big.clone(), 64, 8);
        assert!(!run(&mut g, PrecisionPolicy::uniform(Precision::F16)));
        let mut g = matmul_graph(big, 64, 8);
        assert!(run(&mut g, PrecisionPolicy::uniform(Precision::Bf16)));
        // Not a listed op.
        let mut g = matmul_graph(vec![1.0; 64 * 8], 64, 8);
        let mut pol = PrecisionPolicy::uniform(Precision::Bf16);
        pol.ops = Some(vec!["Conv".into()]);
        assert!(!run(&mut g, pol));
    }

    #[test]
    fn int8_makes_a_product_dynamically_quantized_unless_overridden() {
        let w: Vec<f32> = (0..64 * 8).map(|i| i as f32 * 0.01 - 2.0).collect();
        let mut g = matmul_graph(w.clone(), 64, 8);
        assert!(run(&mut g, PrecisionPolicy::uniform(Precision::Int8)));
        let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(
            ops,
            [
                "DynamicQuantizeLinear",
                "Mul",
                "MatMulInteger",
                "Cast",
                "Mul"
            ]
        );
        // The product's output is the graph's, now the rescale's.
        assert_eq!(g.nodes[4].outputs[0], Some(g.outputs[0]));
        let wq = g
            .constants
            .iter()
            .find(|c| g.value(c.id).name == "fc.weight_int8")
            .unwrap();
        assert_eq!(wq.tensor.dtype(), DType::I8);
        assert_eq!(wq.tensor.shape(), [64, 8]);
        // A node kept in f32 by name, or an op not listed, is left alone.
        let mut g = matmul_graph(w.clone(), 64, 8);
        let mut pol = PrecisionPolicy::uniform(Precision::Int8);
        pol.nodes.push(("fc".into(), Precision::F32));
        assert!(!run(&mut g, pol));
        let mut g = matmul_graph(w, 64, 8);
        let mut pol = PrecisionPolicy::uniform(Precision::Int8);
        pol.ops = Some(vec!["Conv".into()]);
        assert!(!run(&mut g, pol));
    }
}
