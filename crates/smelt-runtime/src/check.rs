//! Checks of caller inputs (values, or shapes to compile for) against a model's declared
//! signature.

use crate::IoInfo;
use smelt_ir::{bail, Dim, Result, Value, ValueType};
use std::collections::HashMap;

/// Sizes bound to symbolic dims so far, with the input that bound each.
#[derive(Default)]
pub(crate) struct Symbols(HashMap<String, (usize, String)>);

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
    let mut symbols = Symbols::default();
    for s in sig {
        let Some(v) = inputs.get(&s.name) else {
            if s.required {
                bail!(InvalidInput, "missing required input '{}'", s.name);
            }
            continue;
        };
        let (dtype, t) = match (&s.ty, v) {
            (Some(ValueType::Tensor { dtype, .. }), Value::Tensor(t)) => (dtype, t),
            // An optional may stand for its contents, and the contents for an optional.
            (Some(ty), v)
                if expected_kind(ty) != v.kind()
                    && expected_kind(ty) != "optional"
                    && v.kind() != "optional" =>
            {
                bail!(
                    InvalidInput,
                    "input '{}': expected a {}, got a {}",
                    s.name,
                    expected_kind(ty),
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
        check_shape(s, t.shape(), &mut symbols)?;
    }
    Ok(())
}

/// The kind of value a type describes, as [`Value::kind`] names it.
fn expected_kind(t: &ValueType) -> &'static str {
    match t {
        ValueType::Tensor { .. } => "tensor",
        ValueType::Sequence(_) => "sequence",
        ValueType::Optional(_) => "optional",
        ValueType::Map(..) => "map",
    }
}

/// Checks one input's concrete shape against its declared one: the rank, the known dims,
/// and each symbol's size against the size other dims bound it to.
pub(crate) fn check_shape(s: &IoInfo, dims: &[usize], symbols: &mut Symbols) -> Result<()> {
    let Some(ValueType::Tensor {
        shape: Some(shape), ..
    }) = &s.ty
    else {
        return Ok(());
    };
    if shape.len() != dims.len() {
        bail!(
            InvalidInput,
            "input '{}': expected rank {} ({}), got shape {dims:?}",
            s.name,
            shape.len(),
            smelt_ir::dim::format_shape(shape)
        );
    }
    for (i, (d, &n)) in shape.iter().zip(dims).enumerate() {
        match d {
            Dim::Known(k) if *k as usize != n => bail!(
                InvalidInput,
                "input '{}': dimension {i} must be {k}, got {n} (shape {dims:?})",
                s.name
            ),
            Dim::Sym(smelt_ir::DimExpr::Sym(sym)) => match symbols.0.get(sym) {
                Some((prev, who)) if *prev != n => bail!(
                    InvalidInput,
                    "input '{}': dimension {i} ('{sym}') is {n}, but input '{who}' has {sym} = {prev}",
                    s.name
                ),
                _ => {
                    symbols.0.insert(sym.clone(), (n, s.name.clone()));
                }
            },
            _ => {}
        }
    }
    Ok(())
}
