//! Golden IR tests for the composite recognizers, one file per composite.

mod attention;
mod gelu;
mod hardswish;
mod layernorm;
mod silu;

use crate::manager::tests::{golden, no_eval};

/// Runs the pass on `input` and checks the result against `expected`.
pub(super) fn check(input: &str, expected: &str) {
    golden(&super::RecognizeComposites, &no_eval(), input, expected);
}

/// Checks that the pass leaves `input` unchanged and says so.
pub(super) fn unchanged(input: &str) {
    let mut g = smelt_ir::text::parse_graph(input).unwrap_or_else(|e| panic!("input: {e}"));
    let before = smelt_ir::text::print_graph(&g);
    let changed = crate::Pass::run(&super::RecognizeComposites, &mut g, &no_eval())
        .unwrap_or_else(|e| panic!("recognize-composites: {e}"));
    assert_eq!(smelt_ir::text::print_graph(&g), before);
    assert!(!changed, "the pass reported a change");
}
