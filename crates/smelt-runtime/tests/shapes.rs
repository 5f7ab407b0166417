//! Shape specialization of the real models: with concrete input shapes, the optimized graph
//! has no `Shape` node left and every node output has a fully known shape. Skipped (with a
//! message) when the models are not in `~/.cache/smelt/data/models`. Needs the importer
//! and the passes (the `compiler` feature).
#![cfg(feature = "compiler")]

use smelt_ir::{Dim, Graph, ValueType};
use smelt_runtime::{InputShapes, Session, SessionOptions};
use std::path::PathBuf;

fn models_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("HOME")?).join(".cache/smelt/data/models");
    dir.is_dir().then_some(dir)
}

/// (Shape nodes, node outputs without a fully known shape, nodes) of the main graph.
fn census(g: &Graph) -> (usize, Vec<String>, usize) {
    let shapes = g.nodes.iter().filter(|n| n.op.name() == "Shape").count();
    let mut open = Vec::new();
    for n in &g.nodes {
        for o in n.outputs.iter().flatten() {
            let known = matches!(
                &g.value(*o).ty,
                Some(ValueType::Tensor { shape: Some(s), .. }) if s.iter().all(|d| matches!(d, Dim::Known(_)))
            );
            if !known {
                open.push(format!(
                    "{} ({}): {:?}",
                    n.name,
                    n.op.name(),
                    g.value(*o).ty
                ));
            }
        }
    }
    (shapes, open, g.nodes.len())
}

/// A model folder and the concrete shape of each input.
/// A model folder, the concrete shape of each input, and the kernel-count bound.
type Case = (
    &'static str,
    &'static [(&'static str, &'static [usize])],
    usize,
);

#[test]
fn specialized_models_have_static_shapes() {
    let Some(dir) = models_dir() else {
        println!("skipped: no ~/.cache/smelt/data/models");
        return;
    };
    let cases: [Case; 4] = [
        ("resnet50", &[("gpu_0/data_0", &[1, 3, 224, 224])], 60),
        (
            "minilm-b1",
            &[("input_ids", &[1, 128]), ("attention_mask", &[1, 128])],
            40,
        ),
        ("yolov8n", &[("images", &[1, 3, 320, 320])], 110),
        ("ppocr-det", &[("x", &[1, 3, 640, 640])], 150),
    ];
    let mut failures = Vec::new();
    for (name, shapes, max_kernels) in cases {
        let path = dir.join(name).join("model.onnx");
        if !path.is_file() {
            println!("skipped {name}: no {}", path.display());
            continue;
        }
        let options = SessionOptions {
            input_shapes: {
                let mut s = InputShapes::new();
                for (n, d) in shapes {
                    s.insert(*n, d.to_vec()).expect("distinct names");
                }
                s
            },
            ..Default::default()
        };
        let before = smelt_onnx::load_model(&path).expect("load");
        let (shape_before, open_before, nodes_before) = census(&before.graph);
        let s = Session::from_model_with(before, &options).expect("compile");
        let plan = s.last_plan().expect("compiled at load");
        let (shape_nodes, open, nodes) = census(plan.graph());
        match plan.kernels() {
            None => failures.push(format!(
                "{name}: not planned to kernels: {:?}",
                plan.fallback_reason()
            )),
            Some(k) => {
                let m = &k.memory;
                println!(
                    "{name}: kernel_count {} (at most {max_kernels}), arena {} of {} intermediate bytes",
                    k.groups.len(),
                    m.arena_bytes,
                    m.intermediate_bytes
                );
                if k.groups.len() > max_kernels {
                    failures.push(format!("{name}: {} kernels", k.groups.len()));
                }
                if m.arena_bytes * 10 > m.intermediate_bytes * 4 {
                    failures.push(format!("{name}: arena above 40% of intermediates: {m:?}"));
                }
            }
        }
        println!(
            "{name}: {nodes_before} -> {nodes} nodes, Shape {shape_before} -> {shape_nodes}, \
             outputs without a known shape {} -> {}",
            open_before.len(),
            open.len()
        );
        if shape_nodes > 0 || !open.is_empty() {
            failures.push(format!(
                "{name}: {shape_nodes} Shape nodes; not static: {open:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
