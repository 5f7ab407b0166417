//! The verifier: structural checks every pass must preserve.

use crate::{bail, Graph, Result, ValueId};

/// Checks that the graph is well formed: ids in range, every value defined exactly once
/// (as an input, constant, capture or node output), every use after its definition, and
/// subgraphs well formed too.
pub fn verify(g: &Graph) -> Result<()> {
    let n = g.values.len();
    let mut defined = vec![false; n];
    let define = |defined: &mut Vec<bool>, id: ValueId, what: &str| -> Result<()> {
        let i = id.0 as usize;
        if i >= n {
            bail!(
                InvalidModel,
                "{what} defines value %{i}, but the graph has {n} values"
            );
        }
        if defined[i] {
            bail!(
                InvalidModel,
                "value %{i} ({}) is defined twice (again by {what})",
                g.values[i].name
            );
        }
        defined[i] = true;
        Ok(())
    };
    for inp in &g.inputs {
        define(&mut defined, inp.id, "a graph input")?;
    }
    for c in &g.constants {
        define(&mut defined, c.id, "a constant")?;
    }
    for c in &g.captures {
        define(&mut defined, c.inner, "a capture")?;
    }
    for node in &g.nodes {
        for id in node.inputs.iter().flatten() {
            let i = id.0 as usize;
            if i >= n || !defined[i] {
                bail!(
                    InvalidModel,
                    "node {} ({}) uses value %{i} before it is defined",
                    node.name,
                    node.op.name()
                );
            }
        }
        for id in node.outputs.iter().flatten() {
            define(
                &mut defined,
                *id,
                &format!("node {} ({})", node.name, node.op.name()),
            )?;
        }
        for sub in node.op.subgraphs() {
            verify(sub).map_err(|e| e.context(format!("in a subgraph of node {}", node.name)))?;
        }
    }
    for id in &g.outputs {
        let i = id.0 as usize;
        if i >= n || !defined[i] {
            bail!(InvalidModel, "graph output %{i} is never defined");
        }
    }
    Ok(())
}
