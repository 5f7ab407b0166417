//! The pass manager: named passes in a fixed order, a report per pass, the verifier after
//! each pass when asked, and a hook to print the IR after any pass.

use smelt_ir::{bail, Graph, Op, Result, Tensor};
use std::time::Instant;

/// Runs one op on constant inputs (a backend's kernel, e.g. the reference executor), for folding.
pub type Evaluator<'a> = &'a dyn Fn(&Op, &[Option<&Tensor>], usize) -> Result<Vec<Tensor>>;

/// What passes may use besides the graph.
pub struct PassContext<'a> {
    /// Evaluates ops on constants; constant folding is skipped without one.
    pub evaluate: Option<Evaluator<'a>>,
}

/// A graph rewrite.
pub trait Pass {
    /// The pass's name, as `--dump-after` takes it.
    fn name(&self) -> &'static str;
    /// Rewrites the graph; returns whether anything changed.
    fn run(&self, g: &mut Graph, cx: &PassContext) -> Result<bool>;
}

pub use smelt_ir::PassReport;

/// Applies `rewrite` to every subgraph of `g` (innermost first), then to `g` itself;
/// true if any call changed something. For rewrites that read no value types.
pub fn rewrite_nested(g: &mut Graph, rewrite: &mut impl FnMut(&mut Graph) -> bool) -> bool {
    rewrite_scoped(g, &mut |g, _| rewrite(g))
}

/// Like [`rewrite_nested`], telling `rewrite` whether the graph's value types are facts:
/// true for `g` itself, whose node outputs shape inference typed (the pipeline runs it
/// first), false in subgraphs, whose types are what the model declares (unconfirmed: a
/// loop-carried value may change shape between iterations). A rewrite that decides from a
/// type makes no such decision where the flag is false.
pub fn rewrite_scoped(g: &mut Graph, rewrite: &mut impl FnMut(&mut Graph, bool) -> bool) -> bool {
    fn walk(g: &mut Graph, top: bool, rewrite: &mut impl FnMut(&mut Graph, bool) -> bool) -> bool {
        let mut changed = false;
        for n in &mut g.nodes {
            for sub in n.op.subgraphs_mut() {
                changed |= walk(sub, false, rewrite);
            }
        }
        rewrite(g, top) | changed
    }
    walk(g, true, rewrite)
}

/// A fixed pipeline of passes.
pub struct PassManager {
    passes: Vec<Box<dyn Pass>>,
    verify: bool,
    stop_after: Option<String>,
}

/// The pass names known to the pipeline, in order.
pub const PASS_NAMES: [&str; 15] = [
    "infer-shapes",
    "quantized-products",
    "fold-constants",
    "inline-if",
    "flatten-sequences",
    "remove-noops",
    "cse",
    "cancel-transposes",
    "cancel-reshapes",
    "fold-batchnorm",
    "fold-scalars",
    "recognize-composites",
    "blocked-layout",
    "precision",
    "dead-code",
];

impl PassManager {
    /// The pipeline for an optimization level: 0 runs nothing (the imported graph as is).
    pub fn for_level(level: u8) -> PassManager {
        let passes: Vec<Box<dyn Pass>> = match level {
            0 => Vec::new(),
            _ => vec![
                Box::new(crate::infer_shapes::InferShapes),
                Box::new(crate::quantized::QuantizedProducts),
                Box::new(crate::fold_constants::FoldConstants::default()),
                Box::new(crate::inline_if::InlineIf),
                Box::new(crate::flatten_sequences::FlattenSequences),
                Box::new(crate::remove_noops::RemoveNoops),
                Box::new(crate::cse::Cse),
                Box::new(crate::cancel_transposes::CancelTransposes),
                Box::new(crate::cancel_reshapes::CancelReshapes),
                Box::new(crate::fold_batchnorm::FoldBatchNorm),
                Box::new(crate::fold_scalars::FoldScalars),
                Box::new(crate::recognize::RecognizeComposites),
                Box::new(crate::dead_code::DeadCode),
            ],
        };
        PassManager {
            passes,
            verify: cfg!(debug_assertions),
            stop_after: None,
        }
    }

    /// Adds the blocked-layout pass (before dead-code) when `on`: a choice for the CPU
    /// kernels the plan will run on (see [`crate::blocked_layout`]).
    pub fn blocked_layout(mut self, on: bool) -> Self {
        let at = self.passes.iter().position(|p| p.name() == "dead-code");
        if let (true, Some(at)) = (on, at) {
            self.passes
                .insert(at, Box::new(crate::blocked_layout::BlockedLayout));
        }
        self
    }

    /// Adds the precision pass before dead-code elimination, when `policy` narrows anything
    /// (see [`crate::precision`]).
    pub fn precision(mut self, policy: &smelt_ir::PrecisionPolicy) -> Self {
        let at = self.passes.iter().position(|p| p.name() == "dead-code");
        if let (false, Some(at)) = (policy.is_f32(), at) {
            self.passes.insert(
                at,
                Box::new(crate::precision::PrecisionPass(policy.clone())),
            );
        }
        self
    }

    /// Runs the verifier after every pass (always on in debug builds).
    pub fn verify_each(mut self, on: bool) -> Self {
        self.verify = on || cfg!(debug_assertions);
        self
    }

    /// Stops after the named pass; an unknown name is an error at run time.
    pub fn stop_after(mut self, pass: Option<String>) -> Self {
        self.stop_after = pass;
        self
    }

    /// The names of the passes this pipeline runs, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    /// Runs the pipeline; `after` is called with each pass's name and the graph after it.
    pub fn run(
        &self,
        g: &mut Graph,
        cx: &PassContext,
        mut after: impl FnMut(&str, &Graph),
    ) -> Result<Vec<PassReport>> {
        if let Some(s) = &self.stop_after {
            if !PASS_NAMES.contains(&s.as_str()) {
                bail!(
                    InvalidInput,
                    "unknown pass '{s}' (passes: {})",
                    PASS_NAMES.join(", ")
                );
            }
        }
        if self.verify {
            // What fails here came in with the model; what fails after a pass is the pass's.
            smelt_ir::verify::verify(g).map_err(|e| e.context("verifier before the passes"))?;
        }
        let mut reports = Vec::new();
        for p in &self.passes {
            let before = g.node_count_deep();
            let t = Instant::now();
            let changed = p
                .run(g, cx)
                .map_err(|e| e.context(format!("pass {}", p.name())))?;
            let seconds = t.elapsed().as_secs_f64();
            if self.verify {
                // The pass broke the graph it was given: a bug in smelt, whatever the check.
                smelt_ir::verify::verify(g).map_err(|e| {
                    e.with_kind(smelt_ir::ErrorKind::Internal)
                        .context(format!("verifier after pass {}", p.name()))
                })?;
            }
            after(p.name(), g);
            reports.push(PassReport {
                name: p.name(),
                nodes_before: before,
                nodes_after: g.node_count_deep(),
                changed,
                seconds,
            });
            if self.stop_after.as_deref() == Some(p.name()) {
                break;
            }
        }
        Ok(reports)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use smelt_ir::text::{parse_graph, print_graph};

    /// A context without an evaluator.
    pub fn no_eval() -> PassContext<'static> {
        PassContext { evaluate: None }
    }

    /// Runs `pass` on the graph `input` (IR text) and checks the result against `expected`.
    pub fn golden(pass: &dyn Pass, cx: &PassContext, input: &str, expected: &str) {
        let mut g = parse_graph(input).unwrap_or_else(|e| panic!("input: {e}"));
        smelt_ir::verify::verify(&g).unwrap_or_else(|e| panic!("input does not verify: {e}"));
        pass.run(&mut g, cx)
            .unwrap_or_else(|e| panic!("{}: {e}", pass.name()));
        smelt_ir::verify::verify(&g).unwrap_or_else(|e| panic!("output does not verify: {e}"));
        let got = print_graph(&g);
        assert_eq!(got.trim(), expected.trim(), "\n--- got ---\n{got}");
    }

    #[test]
    fn only_the_main_graph_counts_as_typed() {
        let g = smelt_ir::text::parse_graph(
            r#"graph "g" {
  input %0 "c": bool[]
  %1 "y" = control.If {"else_branch":"$graph0","then_branch":"$graph1"} (%0) # "if"
    graph "else" {
      capture %0 "c": bool[] <- %0
      output %0
    }
    graph "then" {
      capture %0 "c": bool[] <- %0
      output %0
    }
  output %1
}"#,
        )
        .unwrap();
        let mut seen = Vec::new();
        rewrite_scoped(&mut g.clone(), &mut |g, typed| {
            seen.push((g.name.clone(), typed));
            false
        });
        assert_eq!(
            seen,
            [
                ("then".into(), false),
                ("else".into(), false),
                ("g".into(), true)
            ]
        );
    }

    #[test]
    fn unknown_stop_after_is_an_error() {
        let pm = PassManager::for_level(1).stop_after(Some("nope".into()));
        let mut g = Graph::default();
        assert!(pm.run(&mut g, &no_eval(), |_, _| {}).is_err());
        let bf16 = smelt_ir::PrecisionPolicy::uniform(smelt_ir::Precision::Bf16);
        let all = PassManager::for_level(1)
            .blocked_layout(true)
            .precision(&bf16)
            .names();
        assert_eq!(all, PASS_NAMES.to_vec());
        let plain: Vec<_> = PASS_NAMES
            .into_iter()
            .filter(|&p| p != "blocked-layout" && p != "precision")
            .collect();
        assert_eq!(PassManager::for_level(1).names(), plain);
        assert!(PassManager::for_level(0).names().is_empty());
    }

    /// Drops the graph's only node, leaving its output undefined.
    struct Breaks;

    impl Pass for Breaks {
        fn name(&self) -> &'static str {
            "breaks"
        }
        fn run(&self, g: &mut Graph, _cx: &PassContext) -> Result<bool> {
            g.nodes.clear();
            Ok(true)
        }
    }

    #[test]
    fn a_pass_that_breaks_the_graph_is_an_internal_error() {
        let text = r#"graph "g" {
  input %0 "x": f32[2]
  %1 "y" = elementwise.Relu (%0) # "relu"
  output %1
}"#;
        let pm = PassManager {
            passes: vec![Box::new(Breaks)],
            verify: true,
            stop_after: None,
        };
        let mut g = parse_graph(text).unwrap_or_else(|e| panic!("{e}"));
        let e = pm.run(&mut g, &no_eval(), |_, _| {}).unwrap_err();
        assert_eq!(e.kind(), smelt_ir::ErrorKind::Internal, "{e}");
        assert!(e.to_string().contains("after pass breaks"), "{e}");
        // The same graph broken before the passes is the model's fault.
        let e = pm.run(&mut g, &no_eval(), |_, _| {}).unwrap_err();
        assert_eq!(e.kind(), smelt_ir::ErrorKind::InvalidModel, "{e}");
        let pm = PassManager::for_level(1).stop_after(Some("nope".into()));
        let e = pm.run(&mut g, &no_eval(), |_, _| {}).unwrap_err();
        assert_eq!(e.kind(), smelt_ir::ErrorKind::InvalidInput, "{e}");
    }
}
