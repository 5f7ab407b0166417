//! Import of ONNX graphs into smelt's IR: scopes and names, initializers, constants,
//! subgraphs with outer-scope captures, and dispatch to one importer per op family.

mod attrs;
pub mod control;
pub mod elementwise;
pub mod layout;
pub mod llm;
pub mod loss;
pub mod misc;
pub mod nn;
pub mod quant;
pub mod recurrent;
pub mod reduce;
pub mod sequence;

use crate::proto::{GraphProto, ModelProto, NodeProto};
use crate::tensor::{decode_tensor, decode_type};
use smelt_ir::{
    bail, err, Capture, Constant, Graph, GraphInput, Limits, Model, Node, Op, Result, Tensor,
    ValueId,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A model and the problems a lenient import found.
pub struct Imported {
    /// The model (unsupported nodes are left out).
    pub model: Model,
    /// One line per unsupported node or opset.
    pub unsupported: Vec<String>,
}

/// Reads and imports an ONNX file; any unsupported op is an error.
pub fn load_model(path: &Path) -> Result<Model> {
    load_model_with(path, Limits::process_default())
}

/// Reads and imports an ONNX file within limits (node count, nesting depth); any
/// unsupported op is an error.
pub fn load_model_with(path: &Path, limits: &Limits) -> Result<Model> {
    let imp = load(path, false, limits)?;
    Ok(imp.model)
}

/// Reads and imports an ONNX file, collecting every unsupported op instead of stopping.
pub fn load_model_lenient(path: &Path) -> Result<Imported> {
    load(path, true, Limits::process_default())
}

/// Decodes a model's protobuf bytes and checks its size against the limits before any
/// import: node count (subgraphs included) and subgraph nesting depth.
pub fn decode_model(bytes: &[u8], limits: &Limits) -> Result<ModelProto> {
    let proto = <ModelProto as prost::Message>::decode(bytes).map_err(|e| {
        // prost stops at 100 nested messages (about 32 nested subgraphs): a limit, not a
        // malformed file.
        if e.to_string().contains("recursion limit") {
            err!(
                ResourceExhausted,
                "the model nests messages deeper than the decoder allows (100 levels)"
            )
        } else {
            err!(
                InvalidModel,
                "not a valid ONNX model (protobuf decode failed: {e})"
            )
        }
    })?;
    if let Some(g) = &proto.graph {
        let (nodes, depth) = proto_size(g);
        limits.check_graph_size(nodes, depth)?;
    }
    Ok(proto)
}

/// Nodes of a graph proto and its subgraphs, and how deep they nest.
fn proto_size(g: &GraphProto) -> (usize, usize) {
    let mut nodes = g.node.len();
    let mut depth = 0;
    for n in &g.node {
        for a in &n.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                let (sn, sd) = proto_size(sub);
                nodes = nodes.saturating_add(sn);
                depth = depth.max(sd + 1);
            }
        }
    }
    (nodes, depth)
}

/// Protobuf's limit on one message: larger weights belong in external data.
const MAX_MODEL_FILE: u64 = 2 << 30;

/// Reads a file of at most `max` bytes (a device or a growing file never ends, so the
/// length is not trusted: reading stops past `max`).
fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| err!(Io, "cannot read model: {e}"))?;
    let hint = f.metadata().map(|m| m.len()).unwrap_or(0);
    if hint > max {
        bail!(
            ResourceExhausted,
            "the model file is {hint} bytes, over {max}, protobuf's limit (large weights belong in external data)"
        );
    }
    let mut bytes = Vec::new();
    smelt_ir::limits::try_reserve(&mut bytes, hint as usize, &|| "the model file".into())?;
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| err!(Io, "cannot read model: {e}"))?;
    if bytes.len() as u64 > max {
        bail!(
            ResourceExhausted,
            "the model file is over {max} bytes, protobuf's limit (large weights belong in external data)"
        );
    }
    Ok(bytes)
}

fn load(path: &Path, lenient: bool, limits: &Limits) -> Result<Imported> {
    let ctx = || format!("{}", path.display());
    let bytes = read_bounded(path, MAX_MODEL_FILE).map_err(|e| e.context(ctx()))?;
    let proto = decode_model(&bytes, limits).map_err(|e| e.context(ctx()))?;
    let base = path
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .map(Path::to_path_buf);
    import_model(&proto, base, lenient).map_err(|e| e.context(ctx()))
}

/// Imports a decoded model; `base_dir` is where external data lives.
pub fn import_model(
    proto: &ModelProto,
    base_dir: Option<PathBuf>,
    lenient: bool,
) -> Result<Imported> {
    let Some(graph) = proto.graph.as_ref() else {
        bail!(InvalidModel, "the model has no graph")
    };
    let mut opsets = HashMap::new();
    for o in &proto.opset_import {
        let domain = if o.domain == "ai.onnx" {
            String::new()
        } else {
            o.domain.clone()
        };
        opsets.insert(domain, o.version);
    }
    if proto.opset_import.is_empty() {
        opsets.insert(String::new(), 1);
    }
    let mut imp = Importer {
        opsets,
        base_dir,
        scopes: Vec::new(),
        lenient,
        unsupported: Vec::new(),
    };
    let mut g = imp.import_graph(graph)?;
    if proto.ir_version < 4 {
        freeze_initializer_inputs(&mut g);
    }
    let mut opsets: Vec<(String, i64)> = imp.opsets.iter().map(|(k, v)| (k.clone(), *v)).collect();
    opsets.sort();
    Ok(Imported {
        model: Model {
            graph: g,
            opsets,
            ir_version: proto.ir_version,
            producer: proto.producer_name.clone(),
        },
        unsupported: imp.unsupported,
    })
}

/// Before IR version 4 every initializer had to be listed as a graph input, so being one
/// does not make it overridable (as in onnxruntime): such inputs become constants.
fn freeze_initializer_inputs(g: &mut Graph) {
    let inputs = std::mem::take(&mut g.inputs);
    for i in inputs {
        match i.default {
            Some(tensor) => g.constants.push(Constant { id: i.id, tensor }),
            None => g.inputs.push(i),
        }
    }
}

struct Scope {
    graph: Graph,
    names: HashMap<String, ValueId>,
}

/// State of one import: opsets, where external data lives, and the stack of graph scopes.
pub struct Importer {
    opsets: HashMap<String, i64>,
    base_dir: Option<PathBuf>,
    scopes: Vec<Scope>,
    lenient: bool,
    unsupported: Vec<String>,
}

impl Importer {
    fn scope(&mut self) -> &mut Scope {
        let n = self.scopes.len();
        &mut self.scopes[n - 1]
    }

    /// Finds a name in scope `level`, capturing it from enclosing scopes when needed.
    fn resolve_at(&mut self, level: usize, name: &str) -> Option<ValueId> {
        if let Some(&id) = self.scopes[level].names.get(name) {
            return Some(id);
        }
        if level == 0 {
            return None;
        }
        let outer = self.resolve_at(level - 1, name)?;
        let ty = self.scopes[level - 1].graph.value(outer).ty.clone();
        let s = &mut self.scopes[level];
        let inner = s.graph.add_value(name, ty);
        s.graph.captures.push(Capture { inner, outer });
        s.names.insert(name.to_string(), inner);
        Some(inner)
    }

    fn define(&mut self, name: &str) -> ValueId {
        let s = self.scope();
        let id = s.graph.add_value(name, None);
        // A later definition shadows an earlier one (ONNX forbids it, but be lenient).
        s.names.insert(name.to_string(), id);
        id
    }

    fn import_subgraph(&mut self, g: &GraphProto) -> Result<Graph> {
        self.import_graph(g)
    }

    fn import_graph(&mut self, g: &GraphProto) -> Result<Graph> {
        self.scopes.push(Scope {
            graph: Graph {
                name: g.name.clone(),
                ..Graph::default()
            },
            names: HashMap::new(),
        });
        let r = self.fill_graph(g);
        let scope = self.scopes.pop().expect("scope pushed above");
        r.map(|_| scope.graph)
    }

    fn fill_graph(&mut self, g: &GraphProto) -> Result<()> {
        let base = self.base_dir.clone();
        let mut inits: HashMap<&str, Tensor> = HashMap::new();
        for t in &g.initializer {
            let tensor = decode_tensor(t, base.as_deref())?;
            inits.insert(t.name.as_str(), tensor);
        }
        if !g.sparse_initializer.is_empty() {
            bail!(Unsupported, "sparse initializers are not supported");
        }
        for vi in &g.input {
            let id = self.define(&vi.name);
            let ty = vi.r#type.as_ref().and_then(decode_type);
            let s = self.scope();
            s.graph.values[id.0 as usize].ty = ty;
            let default = inits.remove(vi.name.as_str());
            s.graph.inputs.push(GraphInput { id, default });
        }
        for t in &g.initializer {
            if let Some(tensor) = inits.remove(t.name.as_str()) {
                let id = self.define(&t.name);
                self.scope().graph.constants.push(Constant { id, tensor });
            }
        }
        let mut types = HashMap::new();
        for vi in g.value_info.iter().chain(&g.output) {
            if let Some(t) = vi.r#type.as_ref().and_then(decode_type) {
                types.insert(vi.name.clone(), t);
            }
        }
        for (i, node) in g.node.iter().enumerate() {
            self.import_node(node, i).map_err(|e| {
                let name = if node.name.is_empty() {
                    format!("#{i}")
                } else {
                    node.name.clone()
                };
                e.context(format!("node {name} ({})", node.op_type))
            })?;
        }
        let level = self.scopes.len() - 1;
        for vi in &g.output {
            let id = self
                .resolve_at(level, &vi.name)
                .ok_or_else(|| err!(InvalidModel, "graph output '{}' is never defined", vi.name))?;
            self.scope().graph.outputs.push(id);
        }
        let s = self.scope();
        for (name, t) in types {
            if let Some(&id) = s.names.get(&name) {
                let v = &mut s.graph.values[id.0 as usize];
                if v.ty.is_none() {
                    v.ty = Some(t);
                }
            }
        }
        Ok(())
    }

    fn import_node(&mut self, node: &NodeProto, index: usize) -> Result<()> {
        let level = self.scopes.len() - 1;
        let mut inputs = Vec::with_capacity(node.input.len());
        for name in &node.input {
            if name.is_empty() {
                inputs.push(None);
            } else {
                let id = self.resolve_at(level, name).ok_or_else(|| {
                    err!(
                        InvalidModel,
                        "input '{name}' is not defined before this node"
                    )
                })?;
                inputs.push(Some(id));
            }
        }
        let domain = if node.domain == "ai.onnx" {
            ""
        } else {
            node.domain.as_str()
        };
        let opset = match self.opsets.get(domain) {
            Some(&v) => v,
            None if domain == "ai.onnx.ml"
                || domain == "ai.onnx.preview.training"
                || domain.is_empty() =>
            {
                1
            }
            None => bail!(
                InvalidModel,
                "domain '{domain}' is not imported by the model"
            ),
        };
        let name = if node.name.is_empty() {
            format!("{}_{}", node.op_type, index)
        } else {
            node.name.clone()
        };
        if domain.is_empty() && node.op_type == "Constant" {
            let t = constant_value(node, self)?;
            let out = node
                .output
                .first()
                .ok_or_else(|| err!(InvalidModel, "Constant has no output"))?;
            let id = self.define(out);
            self.scope()
                .graph
                .constants
                .push(Constant { id, tensor: t });
            return Ok(());
        }
        let mut ctx = NodeCtx {
            node,
            domain,
            opset,
            importer: self,
        };
        let op = match import_op(&mut ctx)? {
            Some(op) => op,
            None => {
                let msg = format!(
                    "unsupported op {} (domain '{}', opset {}) at node {}",
                    node.op_type,
                    if domain.is_empty() { "ai.onnx" } else { domain },
                    opset,
                    name
                );
                if !self.lenient {
                    return Err(err!(
                        Unsupported,
                        "unsupported op {} (domain '{}', opset {})",
                        node.op_type,
                        if domain.is_empty() { "ai.onnx" } else { domain },
                        opset
                    ));
                }
                self.unsupported.push(msg);
                // Keep going: define the outputs so later nodes still resolve.
                for o in node.output.iter().filter(|o| !o.is_empty()) {
                    self.define(o);
                }
                return Ok(());
            }
        };
        let outputs = node
            .output
            .iter()
            .map(|o| {
                if o.is_empty() {
                    None
                } else {
                    Some(self.define(o))
                }
            })
            .collect();
        self.scope().graph.nodes.push(Node {
            name,
            op,
            inputs,
            outputs,
        });
        Ok(())
    }
}

fn constant_value(node: &NodeProto, imp: &mut Importer) -> Result<Tensor> {
    let ctx = NodeCtx {
        node,
        domain: "",
        opset: 0,
        importer: imp,
    };
    if let Some(t) = ctx.opt_tensor("value")? {
        return Ok(t);
    }
    if let Some(f) = ctx.opt_f("value_float")? {
        return Ok(Tensor::scalar_f32(f));
    }
    if let Some(v) = ctx.opt_floats("value_floats")? {
        return Tensor::from_f32(vec![v.len()], v);
    }
    if let Some(i) = ctx.opt_i("value_int")? {
        return Ok(Tensor::scalar_i64(i));
    }
    if let Some(v) = ctx.opt_ints("value_ints")? {
        return Tensor::from_i64_vec(vec![v.len()], v);
    }
    if let Some(s) = ctx.opt_s("value_string")? {
        return Tensor::from_strings(vec![], vec![s]);
    }
    if let Some(v) = ctx.opt_strings("value_strings")? {
        return Tensor::from_strings(vec![v.len()], v);
    }
    if ctx.attr("sparse_value").is_some() {
        bail!(Unsupported, "sparse Constant values are not supported");
    }
    bail!(InvalidModel, "Constant has no value attribute")
}

/// What a family importer sees of one node: its type, domain, opset and attributes.
pub struct NodeCtx<'n, 'i> {
    /// The node as decoded.
    pub node: &'n NodeProto,
    /// Its domain ("" for the default ONNX domain).
    pub domain: &'n str,
    /// The opset version in force for that domain.
    pub opset: i64,
    importer: &'i mut Importer,
}

impl NodeCtx<'_, '_> {
    /// The op type, e.g. `Conv`.
    pub fn op_type(&self) -> &str {
        &self.node.op_type
    }

    /// True when the node is in the default ONNX domain.
    pub fn is_onnx(&self) -> bool {
        self.domain.is_empty()
    }

    /// Number of inputs, counting omitted optional ones.
    pub fn n_inputs(&self) -> usize {
        self.node.input.len()
    }

    /// Number of outputs, counting omitted optional ones.
    pub fn n_outputs(&self) -> usize {
        self.node.output.len()
    }
}

type FamilyImporter = fn(&mut NodeCtx) -> Result<Option<Op>>;

/// The family importers, tried in order until one recognizes the node.
const FAMILIES: &[FamilyImporter] = &[
    elementwise::import,
    layout::import,
    nn::import,
    reduce::import,
    control::import,
    sequence::import,
    quant::import,
    recurrent::import,
    loss::import,
    llm::import,
    misc::import,
];

fn import_op(ctx: &mut NodeCtx) -> Result<Option<Op>> {
    for f in FAMILIES {
        if let Some(op) = f(ctx)? {
            return Ok(Some(op));
        }
    }
    Ok(None)
}
