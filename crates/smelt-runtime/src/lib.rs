//! smelt's runtime: a [`Session`] loads a model, checks inputs against its signature and runs it.
//!
//! Today a session runs the reference executor on the imported graph; compiled plans
//! (passes, fused kernels, memory planning) come in behind the same API.

mod check;

pub use check::check_inputs;

use smelt_ir::{Model, Result, Value, ValueType};
use std::collections::HashMap;
use std::path::Path;

/// A model ready to run.
pub struct Session {
    model: Model,
    consts: smelt_cpu::Constants,
}

/// One graph input or output as callers see it.
#[derive(Debug, Clone)]
pub struct IoInfo {
    /// Its name.
    pub name: String,
    /// Its declared type, when the model gives one.
    pub ty: Option<ValueType>,
    /// Whether a caller must supply it (inputs only).
    pub required: bool,
}

impl Session {
    /// Loads an ONNX model file.
    pub fn load(path: &Path) -> Result<Session> {
        Ok(Session::from_model(smelt_onnx::load_model(path)?))
    }

    /// Wraps an already imported model.
    pub fn from_model(model: Model) -> Session {
        let consts = smelt_cpu::Constants::of(&model.graph);
        Session { model, consts }
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The inputs, in order.
    pub fn inputs(&self) -> Vec<IoInfo> {
        let g = &self.model.graph;
        g.inputs
            .iter()
            .map(|i| IoInfo {
                name: g.name_of(i.id).to_string(),
                ty: g.value(i.id).ty.clone(),
                required: i.default.is_none(),
            })
            .collect()
    }

    /// The outputs, in order.
    pub fn outputs(&self) -> Vec<IoInfo> {
        let g = &self.model.graph;
        g.outputs
            .iter()
            .map(|&o| IoInfo {
                name: g.name_of(o).to_string(),
                ty: g.value(o).ty.clone(),
                required: false,
            })
            .collect()
    }

    /// Runs the model on named inputs; returns (name, value) per output in graph order.
    pub fn run(&self, inputs: HashMap<String, Value>) -> Result<Vec<(String, Value)>> {
        check_inputs(&self.inputs(), &inputs)?;
        let outs = smelt_cpu::run_graph_prepared(&self.model.graph, &self.consts, inputs)?;
        Ok(self
            .outputs()
            .into_iter()
            .map(|o| o.name)
            .zip(outs)
            .collect())
    }
}
