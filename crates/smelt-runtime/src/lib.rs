//! smelt's runtime: a [`Session`] loads a model, checks inputs against its signature and runs it.
//!
//! A session runs the pass pipeline of its optimization level on the imported graph, then
//! the reference executor; fused kernels and memory planning come in behind the same API.

mod check;

pub use check::check_inputs;

use smelt_ir::{Model, Result, Value, ValueType};
use smelt_passes::{PassContext, PassManager, PassReport};
use std::collections::HashMap;
use std::path::Path;

/// A model ready to run.
pub struct Session {
    model: Model,
    consts: smelt_cpu::Constants,
    reports: Vec<PassReport>,
}

/// How a session compiles its model.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// 0 runs the imported graph as is (the reference); 1 and up run the pass pipeline.
    pub opt_level: u8,
    /// Print the IR (to stderr) after this pass, or after every pass with `all`.
    pub dump_after: Option<String>,
    /// Stop the pipeline after this pass.
    pub stop_after: Option<String>,
    /// Concrete shapes for graph inputs (name, dims): the graph is specialized to them
    /// before the pipeline runs.
    pub input_shapes: Vec<(String, Vec<u64>)>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            opt_level: 1,
            dump_after: None,
            stop_after: None,
            input_shapes: Vec::new(),
        }
    }
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
    /// Loads an ONNX model file and compiles it with the default options.
    pub fn load(path: &Path) -> Result<Session> {
        Session::load_with(path, &SessionOptions::default())
    }

    /// Loads an ONNX model file and compiles it with the given options.
    pub fn load_with(path: &Path, options: &SessionOptions) -> Result<Session> {
        let model = smelt_onnx::load_model(path)?;
        Session::from_model_with(model, options).map_err(|e| e.context(path.display().to_string()))
    }

    /// Compiles an already imported model with the default options.
    pub fn from_model(model: Model) -> Result<Session> {
        Session::from_model_with(model, &SessionOptions::default())
    }

    /// Compiles an already imported model: runs the pass pipeline of `options.opt_level`.
    pub fn from_model_with(mut model: Model, options: &SessionOptions) -> Result<Session> {
        if !options.input_shapes.is_empty() {
            let shapes: HashMap<String, Vec<u64>> = options.input_shapes.iter().cloned().collect();
            smelt_passes::infer_shapes::set_input_shapes(&mut model.graph, &shapes)?;
        }
        let pm = PassManager::for_level(options.opt_level).stop_after(options.stop_after.clone());
        let eval = |op: &smelt_ir::Op, x: &[Option<&smelt_ir::Tensor>], n: usize| {
            smelt_cpu::eval_op(op, x, n)
        };
        let cx = PassContext {
            evaluate: Some(&eval),
        };
        let dump = options.dump_after.as_deref();
        let reports = pm.run(&mut model.graph, &cx, |name, g| {
            if dump == Some("all") || dump == Some(name) {
                eprintln!(
                    "=== IR after {name} ===\n{}",
                    smelt_ir::text::print_graph(g)
                );
            }
        })?;
        let consts = smelt_cpu::Constants::of(&model.graph);
        Ok(Session {
            model,
            consts,
            reports,
        })
    }

    /// What each pass did when the session was compiled.
    pub fn pass_reports(&self) -> &[PassReport] {
        &self.reports
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
