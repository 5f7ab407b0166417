//! The text form of the IR: a readable printer (the parser comes with golden tests).

use crate::{Graph, ValueId};
use std::fmt::Write;

/// Prints a graph as text, one line per input, constant, node and output.
pub fn print_graph(g: &Graph) -> String {
    let mut s = String::new();
    print_into(g, 0, &mut s);
    s
}

fn val(g: &Graph, id: ValueId) -> String {
    format!("%{} \"{}\"", id.0, g.name_of(id))
}

fn print_into(g: &Graph, indent: usize, s: &mut String) {
    let pad = "  ".repeat(indent);
    let _ = writeln!(s, "{pad}graph \"{}\" {{", g.name);
    for i in &g.inputs {
        let ty = g
            .value(i.id)
            .ty
            .as_ref()
            .map(|t| t.to_string())
            .unwrap_or("?".into());
        let def = if i.default.is_some() {
            " (has default)"
        } else {
            ""
        };
        let _ = writeln!(s, "{pad}  input {} : {ty}{def}", val(g, i.id));
    }
    for c in &g.constants {
        let _ = writeln!(
            s,
            "{pad}  const {} = {}{:?}",
            val(g, c.id),
            c.tensor.dtype(),
            c.tensor.shape()
        );
    }
    for c in &g.captures {
        let _ = writeln!(s, "{pad}  capture {} <- %{}", val(g, c.inner), c.outer.0);
    }
    for n in &g.nodes {
        let ins: Vec<String> = n
            .inputs
            .iter()
            .map(|i| i.map(|i| val(g, i)).unwrap_or("_".into()))
            .collect();
        let outs: Vec<String> = n
            .outputs
            .iter()
            .map(|i| i.map(|i| val(g, i)).unwrap_or("_".into()))
            .collect();
        let attrs = n.op.attrs_json();
        let attrs = if attrs.is_null() || !n.op.subgraphs().is_empty() {
            String::new()
        } else {
            format!(" {attrs}")
        };
        let _ = writeln!(
            s,
            "{pad}  {} = {}.{}{attrs}({}) # {}",
            outs.join(", "),
            n.op.family(),
            n.op.name(),
            ins.join(", "),
            n.name
        );
        for sub in n.op.subgraphs() {
            print_into(sub, indent + 2, s);
        }
    }
    let outs: Vec<String> = g.outputs.iter().map(|&o| val(g, o)).collect();
    let _ = writeln!(s, "{pad}  output {}", outs.join(", "));
    let _ = writeln!(s, "{pad}}}");
}
