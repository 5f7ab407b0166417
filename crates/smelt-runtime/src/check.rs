//! Checks of caller inputs against a model's declared signature.

use crate::IoInfo;
use smelt_ir::{bail, Dim, Result, Value, ValueType};
use std::collections::HashMap;

/// Checks names, presence, element types and shapes (symbols bound consistently).
pub fn check_inputs(sig: &[IoInfo], inputs: &HashMap<String, Value>) -> Result<()> {
    for name in inputs.keys() {
        if !sig.iter().any(|s| &s.name == name) {
            let known: Vec<&str> = sig.iter().map(|s| s.name.as_str()).collect();
            bail!(
                InvalidInput,
                "the model has no input named '{name}' (inputs: {})",
                known.join(", ")
            );
        }
    }
    let mut symbols: HashMap<String, (usize, String)> = HashMap::new();
    for s in sig {
        let Some(v) = inputs.get(&s.name) else {
            if s.required {
                bail!(InvalidInput, "missing required input '{}'", s.name);
            }
            continue;
        };
        let (dtype, shape, t) = match (&s.ty, v) {
            (Some(ValueType::Tensor { dtype, shape }), Value::Tensor(t)) => (dtype, shape, t),
            (Some(ValueType::Tensor { .. }), _)
            | (Some(ValueType::Sequence(_)), Value::Tensor(_)) => {
                let want = if matches!(s.ty, Some(ValueType::Tensor { .. })) {
                    "tensor"
                } else {
                    "sequence"
                };
                bail!(
                    InvalidInput,
                    "input '{}': expected a {want}, got a {}",
                    s.name,
                    v.kind()
                );
            }
            _ => continue,
        };
        if t.dtype() != *dtype {
            bail!(
                InvalidInput,
                "input '{}': expected {dtype} elements, got {}",
                s.name,
                t.dtype()
            );
        }
        let Some(shape) = shape else { continue };
        if shape.len() != t.rank() {
            bail!(
                InvalidInput,
                "input '{}': expected rank {} ({}), got shape {:?}",
                s.name,
                shape.len(),
                smelt_ir::dim::format_shape(shape),
                t.shape()
            );
        }
        for (i, (d, &n)) in shape.iter().zip(t.shape()).enumerate() {
            match d {
                Dim::Known(k) if *k as usize != n => bail!(InvalidInput,
                    "input '{}': dimension {i} must be {k}, got {n} (shape {:?})",
                    s.name,
                    t.shape()
                ),
                Dim::Sym(smelt_ir::DimExpr::Sym(sym)) => match symbols.get(sym) {
                    Some((prev, who)) if *prev != n => bail!(InvalidInput,
                        "input '{}': dimension {i} ('{sym}') is {n}, but input '{who}' has {sym} = {prev}",
                        s.name
                    ),
                    _ => {
                        symbols.insert(sym.clone(), (n, s.name.clone()));
                    }
                },
                _ => {}
            }
        }
    }
    Ok(())
}
