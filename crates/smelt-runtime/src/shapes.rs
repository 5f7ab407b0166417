//! Concrete input shapes, parsed and checked once: what a caller asks a session to compile
//! for, the key of the plan cache, and what a plan is specialized to.

use crate::IoInfo;
use smelt_ir::{bail, err, Result};
use std::fmt;

/// Concrete shapes of some graph inputs, by name (each name once, in the order given).
/// Made by [`InputShapes::parse`] (`x=1x3x224x224`) or [`InputShapes::insert`], checked
/// against a model by [`InputShapes::check`]; the plan cache keys plans by the shapes of
/// every input, in graph order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct InputShapes(Vec<(String, Vec<usize>)>);

impl InputShapes {
    /// No shapes.
    pub fn new() -> InputShapes {
        InputShapes::default()
    }

    /// Parses `NAME=DIMS` specs (`x=1x3x224x224`, dims separated by `x` or `,`; nothing
    /// after `=` for a scalar). A malformed spec or a name given twice is an error of kind
    /// InvalidInput that quotes the spec.
    pub fn parse<S: AsRef<str>>(specs: &[S]) -> Result<InputShapes> {
        let mut out = InputShapes::new();
        for spec in specs {
            let spec = spec.as_ref();
            let (name, dims) = parse_one(spec)?;
            out.insert(name, dims)
                .map_err(|e| e.context(format!("shape '{spec}'")))?;
        }
        Ok(out)
    }

    /// Adds the shape of one input; a name already given is an error (InvalidInput).
    pub fn insert(&mut self, name: impl Into<String>, dims: Vec<usize>) -> Result<()> {
        let name = name.into();
        if self.get(&name).is_some() {
            bail!(InvalidInput, "input '{name}' is given two shapes");
        }
        self.0.push((name, dims));
        Ok(())
    }

    /// Sets the shape of one input, replacing one already given.
    pub fn set(&mut self, name: &str, dims: Vec<usize>) {
        match self.0.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = dims,
            None => self.0.push((name.to_string(), dims)),
        }
    }

    /// The shape given for an input.
    pub fn get(&self, name: &str) -> Option<&[usize]> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| d.as_slice())
    }

    /// (name, dims) in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[usize])> {
        self.0.iter().map(|(n, d)| (n.as_str(), d.as_slice()))
    }

    /// The (name, dims) pairs, as graph specialization takes them.
    pub fn as_slice(&self) -> &[(String, Vec<usize>)] {
        &self.0
    }

    /// How many inputs have a shape.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no input has a shape.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Checks the shapes against a model's inputs: every name is an input, of its declared
    /// rank, with its known dims, and a symbol takes one size across all inputs (errors of
    /// kind InvalidInput naming the input).
    pub fn check(&self, sig: &[IoInfo]) -> Result<()> {
        let mut symbols = crate::check::Symbols::default();
        for (name, dims) in self.iter() {
            let Some(io) = sig.iter().find(|s| s.name == name) else {
                let known: Vec<&str> = sig.iter().map(|s| s.name.as_str()).collect();
                bail!(
                    InvalidInput,
                    "a shape is given for '{name}', which is not an input of the model (inputs: {})",
                    known.join(", ")
                );
            };
            crate::check::check_shape(io, dims, &mut symbols)?;
        }
        Ok(())
    }
}

impl fmt::Display for InputShapes {
    /// `x=1x3x224x224 mask=1x128`, as [`InputShapes::parse`] reads it back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, dims)) in self.iter().enumerate() {
            let d: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            write!(f, "{}{name}={}", if i > 0 { " " } else { "" }, d.join("x"))?;
        }
        Ok(())
    }
}

/// `NAME=DIMS` as (name, dims).
fn parse_one(spec: &str) -> Result<(String, Vec<usize>)> {
    let bad = |why: String| {
        err!(
            InvalidInput,
            "shape '{spec}': {why} (expected NAME=DIMS, e.g. x=1x3x224x224)"
        )
    };
    let (name, dims) = spec.rsplit_once('=').ok_or_else(|| bad("no '='".into()))?;
    if name.is_empty() {
        return Err(bad("no input name".into()));
    }
    let dims = dims.trim();
    if dims.is_empty() {
        return Ok((name.to_string(), Vec::new()));
    }
    let dims = dims
        .split(['x', ','])
        .map(|d| {
            let d = d.trim();
            d.parse::<usize>()
                .map_err(|_| bad(format!("'{d}' is not a dimension")))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((name.to_string(), dims))
}

#[cfg(test)]
mod tests {
    use super::*;
    use smelt_ir::{DType, Dim, ErrorKind, ValueType};

    #[test]
    fn parses_and_prints_back() {
        let s = InputShapes::parse(&["x=1x3x224x224", "mask=1,128", "scalar="]).unwrap();
        assert_eq!(s.get("x"), Some(&[1, 3, 224, 224][..]));
        assert_eq!(s.get("mask"), Some(&[1, 128][..]));
        assert_eq!(s.get("scalar"), Some(&[][..]));
        assert_eq!(s.to_string(), "x=1x3x224x224 mask=1x128 scalar=");
        let specs: Vec<String> = s.to_string().split(' ').map(String::from).collect();
        assert_eq!(InputShapes::parse(&specs).unwrap(), s);
    }

    #[test]
    fn bad_specs_are_invalid_input_naming_the_spec() {
        for bad in ["x", "=1x2", "x=1xq", "x=-1x3", "x=1x", "x=1x2 x=3"] {
            let specs: Vec<&str> = bad.split(' ').collect();
            let e = InputShapes::parse(&specs).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{bad}: {e}");
            assert!(e.to_string().contains("shape '"), "{bad}: {e}");
        }
    }

    #[test]
    fn checks_names_ranks_known_dims_and_symbols() {
        let f32_of = |dims: Vec<Dim>| {
            Some(ValueType::Tensor {
                dtype: DType::F32,
                shape: Some(dims),
            })
        };
        let sym = |s: &str| Dim::parse(s);
        let sig = vec![
            IoInfo {
                name: "x".into(),
                ty: f32_of(vec![sym("batch"), Dim::Known(3)]),
                required: true,
            },
            IoInfo {
                name: "y".into(),
                ty: f32_of(vec![sym("batch")]),
                required: true,
            },
        ];
        let ok = |specs: &[&str]| InputShapes::parse(specs).unwrap().check(&sig);
        ok(&["x=2x3", "y=2"]).unwrap();
        for (specs, needle) in [
            (&["z=1"][..], "'z'"),
            (&["x=2x3x1"][..], "rank"),
            (&["x=2x4"][..], "dimension 1"),
            (&["x=2x3", "y=5"][..], "batch"),
        ] {
            let e = ok(specs).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{specs:?}: {e}");
            assert!(e.to_string().contains(needle), "{specs:?}: {e}");
        }
    }
}
