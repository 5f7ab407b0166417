//! Checks of caller inputs (values, or shapes to compile for) against a model's declared
//! signature.

use crate::IoInfo;
use smelt_ir::{bail, DType, Dim, Result, Tensor, Value, ValueType};
use std::collections::HashMap;

/// Sizes bound to symbolic dims so far, with the input that bound each.
#[derive(Default)]
pub(crate) struct Symbols(HashMap<String, (usize, String)>);

/// Checks names, presence, element types and shapes (symbols bound consistently).
pub fn check_inputs(sig: &[IoInfo], inputs: &HashMap<String, Value>) -> Result<()> {
    check_names(sig, inputs.keys().map(String::as_str))?;
    check_given(sig, |name| inputs.get(name).map(Given::Value))
}

/// [`check_inputs`] for borrowed tensors; a name given twice is an error too.
pub fn check_tensor_inputs(sig: &[IoInfo], inputs: &[(&str, &Tensor)]) -> Result<()> {
    check_names(sig, inputs.iter().map(|(n, _)| *n))?;
    for (i, (name, _)) in inputs.iter().enumerate() {
        if inputs[..i].iter().any(|(n, _)| n == name) {
            bail!(InvalidInput, "input '{name}' is given twice");
        }
    }
    check_given(sig, |name| {
        inputs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| Given::Tensor(t))
    })
}

/// An input as a caller gave it: any value, or a borrowed tensor.
#[derive(Clone, Copy)]
enum Given<'a> {
    Value(&'a Value),
    Tensor(&'a Tensor),
}

/// Every given name is an input of the model.
fn check_names<'a>(sig: &[IoInfo], names: impl Iterator<Item = &'a str>) -> Result<()> {
    for name in names {
        if !sig.iter().any(|s| s.name == name) {
            let known: Vec<&str> = sig.iter().map(|s| s.name.as_str()).collect();
            bail!(
                InvalidInput,
                "the model has no input named '{name}' (inputs: {})",
                known.join(", ")
            );
        }
    }
    Ok(())
}

fn check_given<'a>(sig: &[IoInfo], get: impl Fn(&str) -> Option<Given<'a>>) -> Result<()> {
    let mut symbols = Symbols::default();
    for s in sig {
        let Some(given) = get(&s.name) else {
            if s.required {
                bail!(InvalidInput, "missing required input '{}'", s.name);
            }
            continue;
        };
        let v = match given {
            Given::Value(v) => v,
            Given::Tensor(t) => {
                check_tensor(s, t, &mut symbols)?;
                continue;
            }
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
        check_dtype(s, *dtype, t)?;
        check_shape(s, t.shape(), &mut symbols)?;
    }
    Ok(())
}

/// A borrowed tensor against its input's declared type (a tensor where another kind of
/// value is declared is an error, as in [`check_inputs`]).
fn check_tensor(s: &IoInfo, t: &Tensor, symbols: &mut Symbols) -> Result<()> {
    match &s.ty {
        Some(ValueType::Tensor { dtype, .. }) => {
            check_dtype(s, *dtype, t)?;
            check_shape(s, t.shape(), symbols)
        }
        Some(ty @ (ValueType::Sequence(_) | ValueType::Map(..))) => bail!(
            InvalidInput,
            "input '{}': expected a {}, got a tensor",
            s.name,
            expected_kind(ty)
        ),
        _ => Ok(()),
    }
}

fn check_dtype(s: &IoInfo, dtype: DType, t: &Tensor) -> Result<()> {
    if t.dtype() != dtype {
        bail!(
            InvalidInput,
            "input '{}': expected {dtype} elements, got {}",
            s.name,
            t.dtype()
        );
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

/// A fused plan's memory is known before it runs: every intermediate and output buffer
/// must fit the tensor limit, and the arena with the outputs the run limit.
pub(crate) fn check_plan_memory(
    kp: &smelt_ir::kernel::KernelPlan,
    limits: &smelt_ir::Limits,
) -> Result<()> {
    use smelt_ir::kernel::BufferKind;
    let mut outputs = 0u64;
    for b in &kp.buffers {
        if matches!(b.kind, BufferKind::Input(_) | BufferKind::Weight(_)) {
            continue;
        }
        let bytes = smelt_ir::numel(&b.shape)
            .ok()
            .and_then(|n| smelt_ir::limits::storage_bytes(b.dtype, n))
            .unwrap_or(u64::MAX);
        smelt_ir::ensure!(
            bytes != u64::MAX,
            ResourceExhausted,
            "value '{}' ({} {:?}) has too many elements to address",
            b.name,
            b.dtype,
            b.shape
        );
        smelt_ir::ensure!(
            bytes <= limits.max_tensor_bytes,
            ResourceExhausted,
            "value '{}' ({} {:?}) needs {bytes} bytes, over the tensor limit of {}",
            b.name,
            b.dtype,
            b.shape,
            limits.max_tensor_bytes
        );
        if matches!(b.kind, BufferKind::Output(_)) {
            outputs = outputs.saturating_add(bytes);
        }
    }
    let total = (kp.memory.arena_bytes as u64).saturating_add(outputs);
    smelt_ir::ensure!(
        total <= limits.max_run_bytes,
        ResourceExhausted,
        "the plan needs {total} bytes per run (arena {} and outputs {outputs}), over the run limit of {}",
        kp.memory.arena_bytes,
        limits.max_run_bytes
    );
    Ok(())
}
