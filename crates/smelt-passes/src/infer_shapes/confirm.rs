//! The model's declarations about node outputs checked against inference: a contradiction
//! is an error, and what inference cannot confirm is dropped (see the module docs above).

use super::{infer_types, node_context};
use smelt_ir::{bail, Dim, Graph, Result, ValueId, ValueType};

/// Replaces the declared types of the graph's node outputs by inferred ones (see the module
/// docs): a declaration that contradicts inference is an error (InvalidModel) naming the
/// node; one that inference cannot confirm is dropped. Returns whether any type changed.
pub fn confirm_types(g: &mut Graph) -> Result<bool> {
    let mut declared: Vec<(usize, ValueId, Option<ValueType>)> = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for &id in n.outputs.iter().flatten() {
            declared.push((i, id, g.values[id.0 as usize].ty.take()));
        }
    }
    infer_types(g)?;
    let mut changed = false;
    for (i, id, claim) in declared {
        let now = g.values[id.0 as usize].ty.as_ref();
        if let (Some(claim), Some(now)) = (&claim, now) {
            contradiction(claim, now).map_err(|e| {
                e.context(format!(
                    "{}, output {}",
                    node_context(&g.nodes[i]),
                    g.name_of(id)
                ))
            })?;
        }
        changed |= claim.as_ref() != now;
    }
    Ok(changed)
}

/// An error when a declared type cannot describe a value of the inferred type.
fn contradiction(declared: &ValueType, inferred: &ValueType) -> Result<()> {
    let (
        ValueType::Tensor { dtype, shape },
        ValueType::Tensor {
            dtype: dt2,
            shape: s2,
        },
    ) = (declared, inferred)
    else {
        if std::mem::discriminant(declared) != std::mem::discriminant(inferred) {
            bail!(InvalidModel, "declared as {declared} but it is {inferred}");
        }
        return Ok(());
    };
    if dtype != dt2 {
        bail!(InvalidModel, "declared as {declared} but it is {inferred}");
    }
    if let (Some(a), Some(b)) = (shape, s2) {
        if a.len() != b.len() {
            bail!(
                InvalidModel,
                "declared as {declared} (rank {}) but it is {inferred} (rank {})",
                a.len(),
                b.len()
            );
        }
        for (i, (a, b)) in a.iter().zip(b).enumerate() {
            if let (Dim::Known(x), Dim::Known(y)) = (a, b) {
                if x != y {
                    bail!(
                        InvalidModel,
                        "declared as {declared} but it is {inferred} (dimension {i})"
                    );
                }
            }
        }
    }
    Ok(())
}
