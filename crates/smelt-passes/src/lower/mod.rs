//! Lowering a shape-specialized graph to a [`KernelPlan`]: views, fusion into kernel
//! groups, placement of every stored tensor, and the memory plan.

pub mod group;
pub mod memory;
pub mod pointwise;
pub mod reduction;
pub mod views;

mod build;
mod place;

use smelt_ir::kernel::KernelPlan;
use smelt_ir::{DType, Graph, Result, Tensor, ValueId, ValueType};
use std::collections::HashMap;

/// The element type of a tensor value, when known.
pub fn dtype_of(g: &Graph, v: ValueId) -> Option<DType> {
    match &g.value(v).ty {
        Some(ValueType::Tensor { dtype, .. }) => Some(*dtype),
        None => g
            .constants
            .iter()
            .find(|c| c.id == v)
            .map(|c| c.tensor.dtype()),
        _ => None,
    }
}

/// The concrete shape of a tensor value, when known.
pub fn shape_of_value(g: &Graph, v: ValueId) -> Option<Vec<usize>> {
    views::shape_of(g, v)
}

/// Why a graph cannot be lowered to a kernel plan (it then runs on the reference
/// executor, or in segments), or None when it can: every value must be a tensor of concrete
/// shape and a flat element type, and no node may carry a subgraph.
pub fn unplannable(g: &Graph) -> Option<String> {
    let p = Plannability::new(g);
    g.inputs
        .iter()
        .find_map(|i| p.value(i.id))
        .or_else(|| g.nodes.iter().find_map(|n| p.node(n)))
        .or_else(|| g.outputs.iter().find_map(|&o| p.value(o)))
}

/// What of a graph can be lowered to kernels, value by value and node by node.
pub struct Plannability<'a> {
    g: &'a Graph,
    consts: std::collections::HashSet<ValueId>,
}

impl<'a> Plannability<'a> {
    /// The checks for `g`.
    pub fn new(g: &'a Graph) -> Self {
        Plannability {
            g,
            consts: g.constants.iter().map(|c| c.id).collect(),
        }
    }

    /// Why value `v` cannot be stored in a kernel plan (None: it can).
    pub fn value(&self, v: ValueId) -> Option<String> {
        let g = self.g;
        let name = g.name_of(v);
        if self.consts.contains(&v) {
            return None;
        }
        match &g.value(v).ty {
            Some(ValueType::Tensor { dtype, .. }) => {
                if *dtype == DType::Str {
                    return Some(format!("value '{name}' holds strings"));
                }
                if shape_of_value(g, v).is_none() {
                    return Some(format!("value '{name}' has no concrete shape"));
                }
                None
            }
            Some(t) => Some(format!("value '{name}' is a {t}, not a tensor")),
            None => Some(format!("value '{name}' has no inferred type")),
        }
    }

    /// Why node `n` cannot run as a kernel group (None: it can).
    pub fn node(&self, n: &smelt_ir::Node) -> Option<String> {
        if !n.op.subgraphs().is_empty() {
            return Some(format!("node '{}' ({}) has subgraphs", n.name, n.op.name()));
        }
        n.inputs
            .iter()
            .chain(&n.outputs)
            .flatten()
            .find_map(|&v| self.value(v))
            .map(|r| format!("{r} (node '{}', {})", n.name, n.op.name()))
    }
}

/// Lowers a graph (see [`unplannable`] for what it needs) to a kernel plan. The weights'
/// contents move into the plan: the graph's constants keep their ids and types but are
/// left empty (zero elements).
pub fn lower(g: &mut Graph) -> Result<KernelPlan> {
    if let Some(why) = unplannable(g) {
        smelt_ir::bail!(Unsupported, "cannot plan this graph: {why}");
    }
    let (mut plan, weight_ids) = {
        let consts: HashMap<ValueId, &Tensor> =
            g.constants.iter().map(|c| (c.id, &c.tensor)).collect();
        let fusion = group::fuse(g, &consts)?;
        let placed = place::place(g, &fusion, &consts)?;
        build::build(g, &fusion, placed, &consts)?
    };
    memory::plan_arena(&mut plan);
    plan.weights = take_weights(g, &weight_ids)?;
    Ok(plan)
}

/// Moves the contents of the constants `ids` out of the graph, in order.
fn take_weights(g: &mut Graph, ids: &[ValueId]) -> Result<Vec<Tensor>> {
    let index: HashMap<ValueId, usize> = g
        .constants
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id, i))
        .collect();
    ids.iter()
        .map(|id| {
            let &i = index.get(id).ok_or_else(|| {
                smelt_ir::err!(Internal, "weight '{}' is not a constant", g.name_of(*id))
            })?;
            let c = &mut g.constants[i];
            let empty = Tensor::zeros(c.tensor.dtype(), vec![0])?;
            Ok(std::mem::replace(&mut c.tensor, empty))
        })
        .collect()
}

#[cfg(test)]
mod tests;
