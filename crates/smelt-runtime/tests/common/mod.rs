//! Helpers shared by the integration tests that build graphs in the IR's text form (each
//! test binary uses some of them).
#![allow(dead_code)]

use smelt_ir::{Model, Tensor};

/// Deterministic values in [-0.5, 0.5).
pub fn floats(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) as f32
                / (1u32 << 24) as f32
                - 0.5
        })
        .collect()
}

/// An f32 tensor as the text form's constant JSON.
pub fn tensor_json(shape: &[usize], v: &[f32]) -> String {
    serde_json::to_string(&Tensor::from_f32(shape.to_vec(), v.to_vec()).expect("tensor"))
        .expect("json")
}

/// A model of the graph in `text` (parsed and verified), opset 17.
pub fn model(text: &str) -> Model {
    let graph = smelt_ir::text::parse_graph(text).expect("parse");
    smelt_ir::verify::verify(&graph).expect("verify");
    Model {
        graph,
        opsets: vec![(String::new(), 17)],
        ir_version: 8,
        producer: "test".into(),
    }
}
