//! Shape and dtype inference over symbolic dimensions.
//!
//! [`infer_types`] walks the nodes in order and computes each output's type from its
//! inputs' types and, where an op needs values (Reshape's shape, Slice's starts...), from
//! constant inputs. A rule answers one of three things: a type, nothing learned (unknown), or
//! an error when the node cannot run on such inputs (a Reshape to a `-5` dim, a Transpose
//! whose permutation does not fit the rank): the model is invalid, and the error names the
//! node.
//!
//! What a model declares about node outputs (`value_info`, graph outputs) is a claim, not a
//! fact: [`confirm_types`] (the pass) replaces it by what inference derives, fails when the
//! two contradict, and drops a declaration inference cannot confirm, so that no later pass
//! decides from it (a plan with an untyped value runs on the reference executor, which
//! checks everything at run time). Graph inputs keep their declared types (every run checks
//! its inputs against them). [`set_input_shapes`] specializes a graph to concrete input
//! shapes. Subgraphs are left as they are, and passes make no type-based rewrite there.

mod confirm;
mod dims;
mod einsum;
mod elementwise;
mod indexing;
mod layout;
mod llm;
mod loss;
mod misc;
mod nn;
mod quant;
mod recurrent;
mod reduce;
mod reshape;
mod signal;
mod training;

pub use confirm::confirm_types;
pub(crate) use layout::shape_range;

use crate::{Pass, PassContext};
use smelt_ir::{
    bail, err, DType, Dim, ErrorKind, Graph, Node, Op, Result, Tensor, ValueId, ValueType,
};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

/// The shape-inference pass (types only; the graph's nodes do not change).
pub struct InferShapes;

impl Pass for InferShapes {
    fn name(&self) -> &'static str {
        "infer-shapes"
    }

    fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
        confirm_types(g)
    }
}

/// What a rule computes: one type per output slot (None: nothing learned). A rule returns
/// an error when its inputs are invalid for the op, `Ok(None)` when it learns nothing.
pub(crate) type Outs = Vec<Option<ValueType>>;

/// A node's inputs as rules see them: types, and values of constant inputs.
pub(crate) struct In<'a> {
    g: &'a Graph,
    consts: &'a HashMap<ValueId, usize>,
    node: &'a Node,
    /// Where non-constant inputs a rule asked for the value of are recorded.
    wanted: Option<&'a RefCell<HashSet<ValueId>>>,
}

impl<'a> In<'a> {
    /// The id of input `i`, if present.
    fn id(&self, i: usize) -> Option<ValueId> {
        self.node.inputs.get(i).copied().flatten()
    }

    /// Whether input `i` is given.
    pub fn has(&self, i: usize) -> bool {
        self.id(i).is_some()
    }

    /// The number of input slots.
    pub fn len(&self) -> usize {
        self.node.inputs.len()
    }

    /// The number of output slots.
    pub fn n_outputs(&self) -> usize {
        self.node.outputs.len()
    }

    /// The constant value of input `i`, if it is a constant (a rule asks for it when the
    /// output's type depends on it; a non-constant asked for is recorded).
    pub fn constant(&self, i: usize) -> Option<&'a Tensor> {
        let t = self.const_of(i);
        if let (None, Some(w), Some(id)) = (t, self.wanted, self.id(i)) {
            w.borrow_mut().insert(id);
        }
        t
    }

    fn const_of(&self, i: usize) -> Option<&'a Tensor> {
        let id = self.id(i)?;
        self.consts.get(&id).map(|&c| &self.g.constants[c].tensor)
    }

    /// The type of input `i`.
    pub fn ty(&self, i: usize) -> Option<ValueType> {
        if let Some(t) = self.const_of(i) {
            return Some(tensor_type(t.dtype(), known(t.shape())));
        }
        self.g.value(self.id(i)?).ty.clone()
    }

    /// The element type of tensor input `i`.
    pub fn dtype(&self, i: usize) -> Option<DType> {
        match self.ty(i)? {
            ValueType::Tensor { dtype, .. } => Some(dtype),
            _ => None,
        }
    }

    /// The shape of tensor input `i`, when its rank is known.
    pub fn shape(&self, i: usize) -> Option<Vec<Dim>> {
        match self.ty(i)? {
            ValueType::Tensor { shape, .. } => shape,
            _ => None,
        }
    }

    /// The values of constant integer input `i`.
    pub fn ints(&self, i: usize) -> Option<Vec<i64>> {
        self.constant(i)?.to_i64().ok()
    }

    /// The values of constant numeric input `i`, as f64.
    pub fn floats(&self, i: usize) -> Option<Vec<f64>> {
        self.constant(i)?.to_f64().ok()
    }
}

/// A tensor type.
pub(crate) fn tensor_type(dtype: DType, shape: Vec<Dim>) -> ValueType {
    ValueType::Tensor {
        dtype,
        shape: Some(shape),
    }
}

/// A tensor type with a shape when one is known.
pub(crate) fn typed(dtype: Option<DType>, shape: Option<Vec<Dim>>) -> Option<ValueType> {
    Some(ValueType::Tensor {
        dtype: dtype?,
        shape,
    })
}

/// Known dims of a concrete shape.
pub(crate) fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d as u64)).collect()
}

/// An axis in [-r, r-1] (or [-r, r] with `r` one larger) as an index.
pub(crate) fn axis(a: i64, r: usize) -> Option<usize> {
    let r = r as i64;
    let a = if a < 0 { a + r } else { a };
    (0..r).contains(&a).then_some(a as usize)
}

/// Numpy broadcasting of several shapes; None if two known dims disagree.
pub(crate) fn broadcast(shapes: &[Vec<Dim>]) -> Option<Vec<Dim>> {
    try_broadcast(shapes).ok()
}

/// Numpy broadcasting of several shapes (at least one); an error names two known dims
/// that disagree.
pub(crate) fn try_broadcast(shapes: &[Vec<Dim>]) -> Result<Vec<Dim>> {
    let rank = shapes.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = vec![Dim::Known(1); rank];
    for s in shapes {
        let off = rank - s.len();
        for (i, d) in s.iter().enumerate() {
            out[off + i] = broadcast_dim(&out[off + i], d).ok_or_else(|| {
                let all: Vec<String> = shapes
                    .iter()
                    .map(|s| smelt_ir::dim::format_shape(s))
                    .collect();
                err!(
                    InvalidModel,
                    "shapes {} do not broadcast (dimension {} is {} and {})",
                    all.join(", "),
                    off + i,
                    out[off + i],
                    d
                )
            })?;
        }
    }
    Ok(out)
}

fn broadcast_dim(a: &Dim, b: &Dim) -> Option<Dim> {
    Some(match (a, b) {
        _ if a == b => a.clone(),
        (Dim::Known(1), x) | (x, Dim::Known(1)) => x.clone(),
        (Dim::Known(_), Dim::Known(_)) => return None,
        (Dim::Known(n), _) | (_, Dim::Known(n)) => Dim::Known(*n),
        (Dim::Unknown, _) | (_, Dim::Unknown) => Dim::Unknown,
        _ => dims::max(a, b),
    })
}

/// The types a node's outputs get from its inputs; an error when the node cannot run on
/// them.
fn infer_node(x: &In) -> Result<Outs> {
    let r = match &x.node.op {
        Op::Elementwise(o) => elementwise::infer(o, x)?,
        Op::Nn(o) => nn::infer(o, x)?,
        Op::Layout(o) => layout::infer(o, x)?,
        Op::Reduce(o) => reduce::infer(o, x)?,
        Op::Misc(o) => misc::infer(o, x)?,
        Op::Quant(o) => quant::infer(o, x)?,
        Op::Recurrent(o) => recurrent::infer(o, x)?,
        Op::Loss(o) => loss::infer(o, x)?,
        Op::Llm(o) => llm::infer(o, x)?,
        // The branch taken depends on the condition's value (inline-if inlines it then).
        Op::Control(smelt_ir::op::ControlOp::If { .. }) => {
            x.constant(0);
            None
        }
        // A sequence's structure depends on its positions' values (flatten-sequences
        // resolves it then).
        Op::Sequence(o) => {
            use smelt_ir::op::SequenceOp as S;
            match o {
                S::SequenceInsert => {
                    x.constant(2);
                }
                S::SequenceAt | S::SequenceErase | S::SplitToSequence { .. } => {
                    x.constant(1);
                }
                _ => {}
            }
            None
        }
        _ => None,
    };
    Ok(r.unwrap_or_default())
}

/// `node NAME (Op)`, as errors about a node start.
fn node_context(n: &Node) -> String {
    format!("node {} ({})", n.name, n.op.name())
}

/// Computes the type of every node output from its inputs (see the module docs), refining
/// the types already there (inferred before: a type inference cannot derive again stays);
/// returns whether any type changed. An invalid node is an error of kind InvalidModel.
pub fn infer_types(g: &mut Graph) -> Result<bool> {
    infer_recording(g, None)
}

/// The non-constant values whose contents some node's output type depends on (Reshape's
/// shape, Resize's scales, a reduction's axes...): given as constants, they would let
/// inference type those outputs. Found by inferring over a copy of `g`.
pub fn shape_operands(g: &Graph) -> Result<HashSet<ValueId>> {
    let wanted = RefCell::new(HashSet::new());
    infer_recording(&mut g.clone(), Some(&wanted))?;
    Ok(wanted.into_inner())
}

fn infer_recording(g: &mut Graph, wanted: Option<&RefCell<HashSet<ValueId>>>) -> Result<bool> {
    let consts: HashMap<ValueId, usize> = g
        .constants
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id, i))
        .collect();
    let mut changed = false;
    for i in 0..g.nodes.len() {
        let outs = infer_node(&In {
            g,
            consts: &consts,
            node: &g.nodes[i],
            wanted,
        })
        .map_err(|e| invalid(e).context(node_context(&g.nodes[i])))?;
        for (slot, ty) in g.nodes[i].outputs.clone().into_iter().zip(outs) {
            let (Some(id), Some(ty)) = (slot, ty) else {
                continue;
            };
            let old = &g.values[id.0 as usize].ty;
            let new = merge(old.as_ref(), ty).map_err(|e| {
                invalid(e).context(format!(
                    "{}, output {}",
                    node_context(&g.nodes[i]),
                    g.name_of(id)
                ))
            })?;
            if old.as_ref() != Some(&new) {
                g.values[id.0 as usize].ty = Some(new);
                changed = true;
            }
        }
    }
    Ok(changed)
}

/// An inference failure is the model's fault unless a rule said otherwise.
fn invalid(e: smelt_ir::Error) -> smelt_ir::Error {
    if e.kind() == ErrorKind::Internal {
        e.with_kind(ErrorKind::InvalidModel)
    } else {
        e
    }
}

/// A type known before refined by one inferred now (kept as is when the element types differ).
fn merge(declared: Option<&ValueType>, inferred: ValueType) -> Result<ValueType> {
    let Some(declared) = declared else {
        return Ok(inferred);
    };
    match (declared, &inferred) {
        (
            ValueType::Tensor { dtype, shape },
            ValueType::Tensor {
                dtype: dt2,
                shape: s2,
            },
        ) => {
            if dtype != dt2 {
                // Only over declared types (`confirm_types` reports the contradiction); an
                // earlier inference from the same inputs cannot disagree. Keep what is there.
                return Ok(declared.clone());
            }
            let shape = match (shape, s2) {
                (Some(a), Some(b)) => {
                    if a.len() != b.len() {
                        bail!(
                            InvalidModel,
                            "known rank {} ({}) but inferred rank {} ({})",
                            a.len(),
                            smelt_ir::dim::format_shape(a),
                            b.len(),
                            smelt_ir::dim::format_shape(b)
                        );
                    }
                    let dims = a
                        .iter()
                        .zip(b)
                        .enumerate()
                        .map(|(i, (a, b))| {
                            merge_dim(a, b).map_err(|e| e.context(format!("dim {i}")))
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Some(dims)
                }
                (a, b) => a.clone().or(b.clone()),
            };
            Ok(ValueType::Tensor {
                dtype: *dtype,
                shape,
            })
        }
        _ => Ok(declared.clone()),
    }
}

/// Known beats symbolic beats unknown; an inferred expression replaces a declared symbol
/// (it relates the dim to the inputs) unless it is a broadcast `max`.
fn merge_dim(declared: &Dim, inferred: &Dim) -> Result<Dim> {
    Ok(match (declared, inferred) {
        (Dim::Known(a), Dim::Known(b)) if a != b => {
            bail!(InvalidModel, "known size {a} but inferred {b}")
        }
        (Dim::Known(_), _) | (Dim::Sym(_), Dim::Unknown) => declared.clone(),
        (Dim::Sym(_), Dim::Sym(e)) if e.to_string().contains("max(") => declared.clone(),
        _ => inferred.clone(),
    })
}

/// Gives graph inputs concrete shapes, binds the symbols of their declared dims to those
/// sizes and substitutes the binding in every value type of the graph. The shapes must have
/// been checked against the graph's inputs (`smelt_runtime::InputShapes::check` does it
/// once, with the caller's errors); one that does not fit is an internal error here.
pub fn set_input_shapes(g: &mut Graph, shapes: &[(String, Vec<usize>)]) -> Result<()> {
    let mut env: HashMap<String, i64> = HashMap::new();
    let mut concrete = Vec::new();
    for (name, dims) in shapes {
        let input = g
            .inputs
            .iter()
            .find(|i| g.name_of(i.id) == name)
            .ok_or_else(|| err!(Internal, "unchecked input shapes: no input '{name}'"))?;
        let Some(ValueType::Tensor { dtype, shape }) = &g.value(input.id).ty else {
            bail!(
                Internal,
                "unchecked input shapes: input '{name}' is no typed tensor"
            );
        };
        if let Some(declared) = shape {
            if declared.len() != dims.len() {
                bail!(Internal, "unchecked input shapes: rank of '{name}'");
            }
            for (d, &n) in declared.iter().zip(dims) {
                let fits = match d {
                    Dim::Known(k) => *k == n as u64,
                    Dim::Sym(smelt_ir::DimExpr::Sym(s)) => env
                        .insert(s.clone(), n as i64)
                        .is_none_or(|p| p == n as i64),
                    _ => true,
                };
                if !fits {
                    bail!(
                        Internal,
                        "unchecked input shapes: '{name}' dimension {d} is {n}"
                    );
                }
            }
        }
        concrete.push((
            input.id,
            tensor_type(*dtype, dims.iter().map(|&d| Dim::Known(d as u64)).collect()),
        ));
    }
    for v in &mut g.values {
        if let Some(ValueType::Tensor {
            shape: Some(shape), ..
        }) = &mut v.ty
        {
            for d in shape.iter_mut() {
                *d = dims::substitute(d, &env);
            }
        }
    }
    for (id, ty) in concrete {
        g.values[id.0 as usize].ty = Some(ty);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
