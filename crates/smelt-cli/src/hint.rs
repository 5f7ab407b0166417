//! The command line's advice on library errors: the library says what is missing ("no
//! shape given for input 'x'"), the command line says which flag gives it.

use smelt_ir::{Error, ErrorKind};

/// The same error (kind and context chain) with `suffix` appended to its message.
pub fn append(e: Error, suffix: &str) -> Error {
    let mut out = Error::new(e.kind(), format!("{}{suffix}", e.message()));
    for c in e.contexts() {
        out = out.context(c.clone());
    }
    out
}

/// Adds the flag that fixes an error the runtime reports in its own terms, if any.
pub fn with_flags(e: Error) -> Error {
    if e.kind() != ErrorKind::InvalidInput {
        return e;
    }
    let quoted = |prefix: &str| {
        e.message()
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_once('\''))
            .map(|(name, _)| name.to_string())
    };
    if let Some(name) = quoted("no shape given for input '") {
        let hint = format!("; give it with --shape {name}=DIMS");
        return append(e, &hint);
    }
    if quoted("a shape is given for '").is_some() {
        return append(e, " (check the --shape arguments)");
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use smelt_ir::err;

    #[test]
    fn a_missing_shape_names_the_flag_and_keeps_kind_and_context() {
        let e = err!(
            InvalidInput,
            "no shape given for input 'x' (it has symbolic dimensions)"
        )
        .context("model.onnx");
        let h = with_flags(e);
        assert_eq!(h.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            h.to_string(),
            "model.onnx: no shape given for input 'x' (it has symbolic dimensions); give it with --shape x=DIMS"
        );
        let other = err!(InvalidModel, "no shape given for input 'x'");
        assert_eq!(with_flags(other.clone()), other);
    }
}
