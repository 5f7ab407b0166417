//! Compiling a model for one set of input shapes: specialize, run the pass pipeline,
//! lower to kernel groups (or fall back to the reference executor, saying why).

use crate::plan::{Execution, Plan};
use crate::{InputShapes, SessionOptions};
use smelt_ir::{Graph, Result};
use smelt_passes::{PassContext, PassManager};
use std::io::Write;
use std::time::Instant;

/// Compiles `graph` with its inputs fixed to `shapes` (checked against the graph's inputs;
/// inputs not named keep their types).
pub fn compile(graph: &Graph, shapes: &InputShapes, options: &SessionOptions) -> Result<Plan> {
    let t = Instant::now();
    let mut g = graph.clone();
    if options.opt_level == 0 {
        return Ok(Plan::new(
            g,
            Execution::Reference {
                reason: "optimization level 0 runs the reference executor".into(),
            },
            Vec::new(),
            t.elapsed().as_secs_f64(),
        ));
    }
    smelt_passes::infer_shapes::set_input_shapes(&mut g, shapes.as_slice())?;
    let pm = PassManager::for_level(options.opt_level).stop_after(options.stop_after.clone());
    let eval = |op: &smelt_ir::Op, x: &[Option<&smelt_ir::Tensor>], n: usize| {
        smelt_reference::eval_op(op, x, n)
    };
    let cx = PassContext {
        evaluate: Some(&eval),
    };
    let dump = options.dump_after.as_deref();
    let reports = pm.run(&mut g, &cx, |name, g| {
        if dump == Some("all") || dump == Some(name) {
            // A closed stderr is no reason to fail the compilation.
            let _ = writeln!(
                std::io::stderr(),
                "=== IR after {name} ===\n{}",
                smelt_ir::text::print_graph(g)
            );
        }
    })?;
    // Passes that add nodes (composite recognition) leave their outputs untyped.
    smelt_passes::infer_shapes::infer_types(&mut g)?;
    let execution = match (&options.stop_after, smelt_passes::lower::unplannable(&g)) {
        (Some(pass), _) => Execution::Reference {
            reason: format!("the pipeline was stopped after pass {pass}"),
        },
        (None, Some(reason)) => Execution::Reference { reason },
        (None, None) => {
            let kp = smelt_passes::lower::lower(&mut g)?;
            let cpu = smelt_cpu::fused::CpuOptions {
                threads: options.threads,
                isa: options.isa,
            };
            Execution::Kernels(Box::new(smelt_cpu::fused::CpuPlan::with_options(kp, cpu)?))
        }
    };
    Ok(Plan::new(g, execution, reports, t.elapsed().as_secs_f64()))
}
