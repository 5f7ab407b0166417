//! The text form of the IR: a readable printer and the parser for golden tests.
//!
//! ```text
//! graph "main" {
//!   input %0 "x": f32[batch,16]
//!   const %1 "w" = {"dtype":"F32","shape":[16,4],"data":{"F32":[...]}}
//!   %2 "h": f32[batch,4] = nn.MatMul(%0, %1) # matmul_0
//!   %3 "y" = elementwise.LeakyRelu {"alpha":0.1} (%2) # act
//!   output %3
//! }
//! ```
//! Attributes are JSON; a subgraph attribute prints as `"$graph0"` and follows the node
//! line as a nested `graph` block. Constants over [`ELIDE_ABOVE`] elements print elided
//! (`<elided>`), which the parser refuses.

use crate::{
    bail, err, Capture, Constant, DType, Dim, Graph, GraphInput, Node, Op, Result, Tensor, ValueId,
    ValueInfo, ValueType,
};
use std::fmt::Write;

/// Constants with more elements than this print as `<elided>`.
pub const ELIDE_ABOVE: usize = 64;

/// Prints a graph as text.
pub fn print_graph(g: &Graph) -> String {
    let mut s = String::new();
    print_into(g, 0, &mut s);
    s
}

fn val(g: &Graph, id: ValueId) -> String {
    format!("%{} {:?}", id.0, g.name_of(id))
}

fn typed(g: &Graph, id: ValueId) -> String {
    match &g.value(id).ty {
        Some(t) => format!("{}: {t}", val(g, id)),
        None => val(g, id),
    }
}

fn tensor_text(t: &Tensor) -> String {
    if t.len() > ELIDE_ABOVE {
        format!("{}{:?} <elided>", t.dtype(), t.shape())
    } else {
        serde_json::to_string(t).unwrap_or_else(|e| format!("<unprintable: {e}>"))
    }
}

fn print_into(g: &Graph, indent: usize, s: &mut String) {
    let pad = "  ".repeat(indent);
    let _ = writeln!(s, "{pad}graph {:?} {{", g.name);
    for i in &g.inputs {
        match &i.default {
            Some(t) => {
                let _ = writeln!(s, "{pad}  input {} = {}", typed(g, i.id), tensor_text(t));
            }
            None => {
                let _ = writeln!(s, "{pad}  input {}", typed(g, i.id));
            }
        }
    }
    for c in &g.constants {
        let _ = writeln!(
            s,
            "{pad}  const {} = {}",
            val(g, c.id),
            tensor_text(&c.tensor)
        );
    }
    for c in &g.captures {
        let _ = writeln!(s, "{pad}  capture {} <- %{}", typed(g, c.inner), c.outer.0);
    }
    for n in &g.nodes {
        let outs: Vec<String> = n
            .outputs
            .iter()
            .map(|o| o.map(|o| typed(g, o)).unwrap_or("_".into()))
            .collect();
        let ins: Vec<String> = n
            .inputs
            .iter()
            .map(|i| i.map(|i| format!("%{}", i.0)).unwrap_or("_".into()))
            .collect();
        let mut subs = Vec::new();
        let attrs = extract_graphs(n.op.attrs_json(), &mut subs);
        let attrs = if attrs.is_null() {
            String::new()
        } else {
            format!(" {attrs}")
        };
        let _ = writeln!(
            s,
            "{pad}  {} = {}.{}{attrs} ({}) # {:?}",
            outs.join(", "),
            n.op.family(),
            n.op.name(),
            ins.join(", "),
            n.name
        );
        for sub in &subs {
            print_into(sub, indent + 2, s);
        }
    }
    let outs: Vec<String> = g.outputs.iter().map(|o| format!("%{}", o.0)).collect();
    let _ = writeln!(s, "{pad}  output {}", outs.join(", "));
    let _ = writeln!(s, "{pad}}}");
}

fn looks_like_graph(m: &serde_json::Map<String, serde_json::Value>) -> bool {
    [
        "values",
        "nodes",
        "inputs",
        "outputs",
        "constants",
        "captures",
    ]
    .iter()
    .all(|k| m.contains_key(*k))
}

/// Replaces every graph inside attribute JSON by `"$graphN"`, collecting the graphs.
fn extract_graphs(v: serde_json::Value, out: &mut Vec<Graph>) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        J::Object(m) if looks_like_graph(&m) => match serde_json::from_value::<Graph>(J::Object(m))
        {
            Ok(g) => {
                out.push(g);
                J::String(format!("$graph{}", out.len() - 1))
            }
            Err(e) => J::String(format!("<bad graph: {e}>")),
        },
        J::Object(m) => J::Object(
            m.into_iter()
                .map(|(k, v)| (k, extract_graphs(v, out)))
                .collect(),
        ),
        J::Array(a) => J::Array(a.into_iter().map(|v| extract_graphs(v, out)).collect()),
        J::Number(n) => J::Number(short_float(n)),
        other => other,
    }
}

/// An f32 attribute widened to f64 prints as its shortest f32 form (`0.1`, not
/// `0.10000000149011612`); it parses back to the same f32.
fn short_float(n: serde_json::Number) -> serde_json::Number {
    match n.as_f64() {
        Some(x) if n.is_f64() && (x as f32) as f64 == x => (x as f32)
            .to_string()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .unwrap_or(n),
        _ => n,
    }
}

fn insert_graphs(
    v: serde_json::Value,
    graphs: &mut Vec<Option<Graph>>,
) -> Result<serde_json::Value> {
    use serde_json::Value as J;
    Ok(match v {
        J::String(s) if s.starts_with("$graph") => {
            let i: usize = s[6..]
                .parse()
                .map_err(|_| err!(InvalidModel, "bad graph reference {s}"))?;
            let g = graphs
                .get_mut(i)
                .and_then(Option::take)
                .ok_or_else(|| err!(InvalidModel, "missing nested graph {s}"))?;
            serde_json::to_value(g).map_err(|e| err!(Internal, "{e}"))?
        }
        J::Object(m) => J::Object(
            m.into_iter()
                .map(|(k, v)| Ok((k, insert_graphs(v, graphs)?)))
                .collect::<Result<_>>()?,
        ),
        J::Array(a) => J::Array(
            a.into_iter()
                .map(|v| insert_graphs(v, graphs))
                .collect::<Result<_>>()?,
        ),
        other => other,
    })
}

/// Parses the text printed by [`print_graph`].
pub fn parse_graph(text: &str) -> Result<Graph> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut pos = 0;
    let g = parse_block(&lines, &mut pos)?;
    if pos != lines.len() {
        bail!(InvalidModel, "line {}: text after the graph", pos + 1);
    }
    Ok(g)
}

fn parse_block(lines: &[&str], pos: &mut usize) -> Result<Graph> {
    let head = lines
        .get(*pos)
        .ok_or_else(|| err!(InvalidModel, "expected a graph"))?;
    let lineno = *pos + 1;
    let rest = head
        .strip_prefix("graph ")
        .and_then(|r| r.strip_suffix('{'))
        .ok_or_else(|| err!(InvalidModel, "line {lineno}: expected 'graph \"name\" {{'"))?;
    let mut g = Graph {
        name: parse_quoted(rest.trim())
            .map_err(|e| e.context(format!("line {lineno}")))?
            .0,
        ..Graph::default()
    };
    *pos += 1;
    loop {
        let lineno = *pos + 1;
        let line = *lines
            .get(*pos)
            .ok_or_else(|| err!(InvalidModel, "graph '{}' is not closed", g.name))?;
        *pos += 1;
        let r: Result<bool> = (|| {
            if line == "}" {
                return Ok(true);
            }
            if let Some(r) = line.strip_prefix("input ") {
                let (lhs, default) = split_eq(r);
                let id = define(&mut g, lhs)?;
                let default = default.map(parse_tensor).transpose()?;
                g.inputs.push(GraphInput { id, default });
            } else if let Some(r) = line.strip_prefix("const ") {
                let (lhs, t) = split_eq(r);
                let id = define(&mut g, lhs)?;
                let tensor =
                    parse_tensor(t.ok_or_else(|| err!(InvalidModel, "const without a value"))?)?;
                g.constants.push(Constant { id, tensor });
            } else if let Some(r) = line.strip_prefix("capture ") {
                let (lhs, outer) = r
                    .split_once(" <- ")
                    .ok_or_else(|| err!(InvalidModel, "capture without '<-'"))?;
                let inner = define(&mut g, lhs)?;
                g.captures.push(Capture {
                    inner,
                    outer: parse_id(outer.trim())?,
                });
            } else if let Some(r) = line.strip_prefix("output") {
                for o in r.split(',').map(str::trim).filter(|o| !o.is_empty()) {
                    g.outputs.push(parse_id(o)?);
                }
            } else {
                let node = parse_node(&mut g, line, lines, pos)?;
                g.nodes.push(node);
            }
            Ok(false)
        })();
        if r.map_err(|e| e.context(format!("line {lineno}")))? {
            return Ok(g);
        }
    }
}

fn split_eq(s: &str) -> (&str, Option<&str>) {
    match s.split_once(" = ") {
        Some((a, b)) => (a.trim(), Some(b.trim())),
        None => (s.trim(), None),
    }
}

fn parse_tensor(s: &str) -> Result<Tensor> {
    if s.ends_with("<elided>") {
        bail!(
            InvalidModel,
            "constant values were elided when printing; the text cannot be parsed back"
        );
    }
    serde_json::from_str(s).map_err(|e| err!(InvalidModel, "bad tensor: {e}"))
}

fn parse_id(s: &str) -> Result<ValueId> {
    let n = s
        .strip_prefix('%')
        .ok_or_else(|| err!(InvalidModel, "expected a value like %3, got '{s}'"))?;
    Ok(ValueId(
        n.parse()
            .map_err(|_| err!(InvalidModel, "bad value id '{s}'"))?,
    ))
}

fn parse_quoted(s: &str) -> Result<(String, &str)> {
    let s = s.trim_start();
    if !s.starts_with('"') {
        bail!(InvalidModel, "expected a quoted name in '{s}'");
    }
    let mut end = None;
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '"' {
            end = Some(i);
            break;
        }
    }
    let end = end.ok_or_else(|| err!(InvalidModel, "unterminated name in '{s}'"))?;
    let name: String =
        serde_json::from_str(&s[..=end]).map_err(|e| err!(InvalidModel, "bad name: {e}"))?;
    Ok((name, &s[end + 1..]))
}

/// Defines a value from `%N "name"` or `%N "name": type`, checking ids come in order.
fn define(g: &mut Graph, s: &str) -> Result<ValueId> {
    let (id, rest) = s
        .split_once(' ')
        .ok_or_else(|| err!(InvalidModel, "expected '%N \"name\"', got '{s}'"))?;
    let id = parse_id(id)?;
    let (name, rest) = parse_quoted(rest)?;
    let ty = match rest.trim().strip_prefix(':') {
        Some(t) => Some(parse_type(t.trim())?),
        None => None,
    };
    let need = id.0 as usize + 1;
    if g.values.len() < need {
        g.values.resize(
            need,
            ValueInfo {
                name: String::new(),
                ty: None,
            },
        );
    }
    g.values[id.0 as usize] = ValueInfo { name, ty };
    Ok(id)
}

fn parse_node(g: &mut Graph, line: &str, lines: &[&str], pos: &mut usize) -> Result<Node> {
    let (outs, rhs) = line
        .split_once(" = ")
        .ok_or_else(|| err!(InvalidModel, "expected 'outputs = family.Op(...)'"))?;
    let (rhs, name) = match rhs.rsplit_once(" # ") {
        Some((r, n)) => (r, parse_quoted(n)?.0),
        None => (rhs, String::new()),
    };
    let (family, rest) = rhs
        .split_once('.')
        .ok_or_else(|| err!(InvalidModel, "expected family.Op"))?;
    let op_end = rest.find([' ', '(']).unwrap_or(rest.len());
    let op_name = &rest[..op_end];
    let rest = rest[op_end..].trim();
    let args_start = rest
        .rfind(" (")
        .map(|i| i + 1)
        .or_else(|| rest.starts_with('(').then_some(0))
        .ok_or_else(|| err!(InvalidModel, "expected (inputs)"))?;
    let attrs_text = rest[..args_start].trim();
    let args = rest[args_start..]
        .trim()
        .strip_prefix('(')
        .and_then(|a| a.strip_suffix(')'))
        .ok_or_else(|| err!(InvalidModel, "expected (inputs)"))?;
    let inputs = args
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| {
            if a == "_" {
                Ok(None)
            } else {
                parse_id(a).map(Some)
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let mut attrs: serde_json::Value = if attrs_text.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_str(attrs_text).map_err(|e| err!(InvalidModel, "bad attributes: {e}"))?
    };
    let n_graphs = attrs_text.matches("\"$graph").count();
    let mut graphs = Vec::new();
    for _ in 0..n_graphs {
        graphs.push(Some(parse_block(lines, pos)?));
    }
    attrs = insert_graphs(attrs, &mut graphs)?;
    let op = Op::from_parts(family, op_name, attrs)?;
    let mut outputs = Vec::new();
    for o in split_outputs(outs) {
        outputs.push(if o == "_" { None } else { Some(define(g, o)?) });
    }
    Ok(Node {
        name,
        op,
        inputs,
        outputs,
    })
}

/// Splits `%1 "a": f32[2,3], %2 "b"` at the commas between values (not inside types).
fn split_outputs(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start, mut in_str) = (0i32, 0usize, false);
    for (i, c) in s.char_indices() {
        match c {
            '"' => in_str = !in_str,
            '[' | '<' | '{' | '(' if !in_str => depth += 1,
            ']' | '>' | '}' | ')' if !in_str => depth -= 1,
            ',' if depth == 0 && !in_str => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}

/// Parses a value type as printed: `f32[batch,3]`, `f32[*]`, `seq<...>`, `opt<...>`, `map<k,v>`.
pub fn parse_type(s: &str) -> Result<ValueType> {
    let s = s.trim();
    if let Some(inner) = s.strip_prefix("seq<").and_then(|r| r.strip_suffix('>')) {
        return Ok(ValueType::Sequence(Box::new(parse_type(inner)?)));
    }
    if let Some(inner) = s.strip_prefix("opt<").and_then(|r| r.strip_suffix('>')) {
        return Ok(ValueType::Optional(Box::new(parse_type(inner)?)));
    }
    if let Some(inner) = s.strip_prefix("map<").and_then(|r| r.strip_suffix('>')) {
        let (k, v) = inner
            .split_once(',')
            .ok_or_else(|| err!(InvalidModel, "bad map type '{s}'"))?;
        let k = DType::from_name(k.trim())
            .ok_or_else(|| err!(InvalidModel, "unknown element type '{k}'"))?;
        return Ok(ValueType::Map(k, Box::new(parse_type(v)?)));
    }
    let open = s
        .find('[')
        .ok_or_else(|| err!(InvalidModel, "bad type '{s}'"))?;
    let dtype = DType::from_name(&s[..open])
        .ok_or_else(|| err!(InvalidModel, "unknown element type '{}'", &s[..open]))?;
    let dims = s[open + 1..]
        .strip_suffix(']')
        .ok_or_else(|| err!(InvalidModel, "bad type '{s}'"))?;
    if dims == "*" {
        return Ok(ValueType::Tensor { dtype, shape: None });
    }
    let shape = split_outputs(dims)
        .into_iter()
        .filter(|d| !d.is_empty())
        .map(|d| {
            Ok(match d {
                "?" => Dim::Unknown,
                d if d.starts_with('{') => Dim::Sym(crate::DimExpr::parse(
                    d.trim_start_matches('{').trim_end_matches('}'),
                )?),
                d => Dim::parse(d),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ValueType::Tensor {
        dtype,
        shape: Some(shape),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::{ControlOp, ElementwiseOp, NnOp};

    fn sample() -> Graph {
        let mut g = Graph {
            name: "main".into(),
            ..Graph::default()
        };
        let f32_ty = |dims: Vec<Dim>| {
            Some(ValueType::Tensor {
                dtype: DType::F32,
                shape: Some(dims),
            })
        };
        let x = g.add_value("x", f32_ty(vec![Dim::parse("batch"), Dim::Known(2)]));
        let w = g.add_value("w", None);
        let h = g.add_value(
            "h, with comma",
            f32_ty(vec![Dim::parse("floor(height/2 - 1/2)"), Dim::Unknown]),
        );
        let y = g.add_value("y", None);
        g.inputs.push(GraphInput {
            id: x,
            default: None,
        });
        g.constants.push(Constant {
            id: w,
            tensor: Tensor::from_f32(vec![2, 2], vec![1.0, 2.5, -3.0, 0.125]).unwrap(),
        });
        g.nodes.push(Node {
            name: "mm".into(),
            op: Op::Nn(NnOp::MatMul),
            inputs: vec![Some(x), Some(w)],
            outputs: vec![Some(h)],
        });
        let mut then_g = Graph {
            name: "then".into(),
            ..Graph::default()
        };
        let c = then_g.add_value("h", None);
        then_g.captures.push(Capture { inner: c, outer: h });
        let r = then_g.add_value("r", None);
        then_g.nodes.push(Node {
            name: "relu".into(),
            op: Op::Elementwise(ElementwiseOp::Relu),
            inputs: vec![Some(c)],
            outputs: vec![Some(r)],
        });
        then_g.outputs.push(r);
        let else_g = then_g.clone();
        g.nodes.push(Node {
            name: "if \"quoted\"".into(),
            op: Op::Control(ControlOp::If {
                then_branch: Box::new(then_g),
                else_branch: Box::new(else_g),
            }),
            inputs: vec![Some(x)],
            outputs: vec![Some(y), None],
        });
        g.outputs.push(y);
        g
    }

    #[test]
    fn print_then_parse_round_trips() {
        let g = sample();
        crate::verify::verify(&g).unwrap();
        let text = print_graph(&g);
        let back = parse_graph(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, g, "{text}");
        assert_eq!(print_graph(&back), text);
    }

    #[test]
    fn parse_errors_name_the_line() {
        let e = parse_graph("graph \"g\" {\n  output %0\n  bogus line\n}").unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
    }
}
