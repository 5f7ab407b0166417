//! Typed access to a node's attributes, with errors that name the attribute.

use super::NodeCtx;
use crate::proto::{attribute_proto::attribute_type as at, AttributeProto};
use smelt_ir::{bail, err, DType, Graph, Result, Tensor};

impl NodeCtx<'_, '_> {
    /// The raw attribute, if present.
    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.node.attribute.iter().find(|a| a.name == name)
    }

    fn typed(&self, name: &str, want: i32, what: &str) -> Result<Option<&AttributeProto>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type == want || a.r#type == at::UNDEFINED => Ok(Some(a)),
            Some(a) => bail!(
                InvalidModel,
                "attribute '{name}' should be {what}, but has type code {}",
                a.r#type
            ),
        }
    }

    /// An integer attribute, if present.
    pub fn opt_i(&self, name: &str) -> Result<Option<i64>> {
        Ok(self.typed(name, at::INT, "an int")?.map(|a| a.i))
    }

    /// An integer attribute with a default.
    pub fn i(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self.opt_i(name)?.unwrap_or(default))
    }

    /// A boolean (0/1 integer) attribute with a default.
    pub fn flag(&self, name: &str, default: bool) -> Result<bool> {
        Ok(self.i(name, default as i64)? != 0)
    }

    /// A float attribute, if present.
    pub fn opt_f(&self, name: &str) -> Result<Option<f32>> {
        Ok(self.typed(name, at::FLOAT, "a float")?.map(|a| a.f))
    }

    /// A float attribute with a default.
    pub fn f(&self, name: &str, default: f32) -> Result<f32> {
        Ok(self.opt_f(name)?.unwrap_or(default))
    }

    /// A string attribute, if present.
    pub fn opt_s(&self, name: &str) -> Result<Option<String>> {
        Ok(self
            .typed(name, at::STRING, "a string")?
            .map(|a| String::from_utf8_lossy(&a.s).into_owned()))
    }

    /// A string attribute with a default.
    pub fn s(&self, name: &str, default: &str) -> Result<String> {
        Ok(self.opt_s(name)?.unwrap_or_else(|| default.to_string()))
    }

    /// An integer-list attribute, if present.
    pub fn opt_ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        Ok(self
            .typed(name, at::INTS, "a list of ints")?
            .map(|a| a.ints.clone()))
    }

    /// A float-list attribute, if present.
    pub fn opt_floats(&self, name: &str) -> Result<Option<Vec<f32>>> {
        Ok(self
            .typed(name, at::FLOATS, "a list of floats")?
            .map(|a| a.floats.clone()))
    }

    /// A string-list attribute, if present.
    pub fn opt_strings(&self, name: &str) -> Result<Option<Vec<String>>> {
        Ok(self
            .typed(name, at::STRINGS, "a list of strings")?
            .map(|a| {
                a.strings
                    .iter()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect()
            }))
    }

    /// A tensor attribute, decoded, if present.
    pub fn opt_tensor(&self, name: &str) -> Result<Option<Tensor>> {
        match self.typed(name, at::TENSOR, "a tensor")? {
            Some(a) => {
                let t =
                    a.t.as_ref()
                        .ok_or_else(|| err!(InvalidModel, "attribute '{name}' has no tensor"))?;
                Ok(Some(crate::tensor::decode_tensor(
                    t,
                    self.importer.base_dir.as_deref(),
                )?))
            }
            None => Ok(None),
        }
    }

    /// An element-type attribute (ONNX data type code), if present.
    pub fn opt_dtype(&self, name: &str) -> Result<Option<DType>> {
        match self.opt_i(name)? {
            Some(code) => Ok(Some(DType::from_onnx_code(code as i32).ok_or_else(
                || {
                    err!(
                        Unsupported,
                        "attribute '{name}': unknown data type code {code}"
                    )
                },
            )?)),
            None => Ok(None),
        }
    }

    /// A graph attribute, imported as a subgraph of the current scope.
    pub fn graph(&mut self, name: &str) -> Result<Graph> {
        let a = self
            .typed(name, at::GRAPH, "a graph")?
            .ok_or_else(|| err!(InvalidModel, "missing graph attribute '{name}'"))?;
        let g =
            a.g.as_ref()
                .ok_or_else(|| err!(InvalidModel, "attribute '{name}' has no graph"))?
                .clone();
        self.importer
            .import_subgraph(&g)
            .map_err(|e| e.context(format!("in subgraph '{name}'")))
    }
}
