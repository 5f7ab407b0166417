//! Compiling a model for one set of input shapes: specialize, run the pass pipeline,
//! lower to kernel groups (or fall back to the reference executor, saying why).

use crate::plan::{Execution, Plan};
use crate::segment::{Segments, MAX_DEPTH};
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
    optimize_and_lower(g, options, t, 0)
}

/// Runs the pass pipeline on a specialized graph, then plans it: to kernels when it can be
/// planned whole, else in segments (see [`crate::segment`]), else on the reference
/// executor. `depth` counts the segments above this graph; `t` is when compiling began.
pub(crate) fn optimize_and_lower(
    mut g: Graph,
    options: &SessionOptions,
    t: Instant,
    depth: usize,
) -> Result<Plan> {
    let pm = PassManager::for_level(options.opt_level)
        .blocked_layout(blocked_layout(options))
        .precision(&options.precision)
        .stop_after(options.stop_after.clone());
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
        (None, Some(reason)) if depth < MAX_DEPTH => {
            match Segments::split(&mut g, reason.clone(), options, depth)? {
                Some(s) => Execution::Segments(Box::new(s)),
                None => Execution::Reference { reason },
            }
        }
        (None, Some(reason)) => Execution::Reference {
            reason: format!("{reason}; the graph split {MAX_DEPTH} times already"),
        },
        (None, None) => kernels(&mut g, options)?,
    };
    Ok(
        Plan::new(g, execution, reports, t.elapsed().as_secs_f64())
            .with_compiled_subgraphs(options),
    )
}

/// Lowers a graph that can be planned whole to CPU kernels (its sizes checked against the
/// limits first).
/// Whether convolutions run in the blocked channel layout: as the options say, by default
/// where the CPU kernels' tiles span two blocks (AVX-512: measured there) and bf16 does not
/// put the convolutions on AMX tiles, unless `SMELT_BLOCKED_LAYOUT=0` or `1` overrides
/// them.
fn blocked_layout(options: &SessionOptions) -> bool {
    match std::env::var("SMELT_BLOCKED_LAYOUT").as_deref() {
        Ok("0") => false,
        Ok("1") => true,
        _ => options.blocked_layout.unwrap_or_else(|| {
            let isa = options.isa.unwrap_or_else(smelt_kernels::Isa::detect);
            // bf16 convolutions on AMX tiles run plain (YOLOv8n at one thread, bf16: 6%
            // faster with its 10x10 layers plain on the tiles than blocked in f32).
            let amx = options.precision.precision == smelt_ir::Precision::Bf16
                && isa == smelt_kernels::Isa::Avx512
                && smelt_kernels::amx::available();
            !amx && smelt_kernels::Kernels::for_isa(isa).is_some_and(|k| k.micro.nr >= 2 * BLOCK)
        }),
    }
}

/// Channels per block of the blocked layout.
const BLOCK: usize = smelt_ir::op::nn::CHANNEL_BLOCK;

pub(crate) fn kernels(g: &mut Graph, options: &SessionOptions) -> Result<Execution> {
    check_value_sizes(g, &options.limits)?;
    let kp = smelt_passes::lower::lower(g)?;
    crate::check::check_plan_memory(&kp, &options.limits)?;
    let cpu = smelt_cpu::fused::CpuOptions {
        threads: options.threads,
        isa: options.isa,
    };
    Ok(Execution::Kernels(Box::new(
        smelt_cpu::fused::CpuPlan::with_options(kp, cpu)?,
    )))
}

/// Every value whose shape inference made concrete must fit the tensor limit before the
/// graph is lowered (lowering computes strides and offsets from those shapes).
fn check_value_sizes(g: &Graph, limits: &smelt_ir::Limits) -> Result<()> {
    for v in &g.values {
        let Some(smelt_ir::ValueType::Tensor {
            dtype,
            shape: Some(s),
        }) = &v.ty
        else {
            continue;
        };
        let dims: Option<Vec<u64>> = s
            .iter()
            .map(|d| match d {
                smelt_ir::Dim::Known(n) => Some(*n),
                _ => None,
            })
            .collect();
        let Some(dims) = dims else { continue };
        let bytes = dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| smelt_ir::limits::storage_bytes(*dtype, n));
        match bytes {
            Some(b) if b <= limits.max_tensor_bytes => {}
            Some(b) => smelt_ir::bail!(
                ResourceExhausted,
                "value '{}' ({dtype} {dims:?}) needs {b} bytes, over the tensor limit of {}",
                v.name,
                limits.max_tensor_bytes
            ),
            None => smelt_ir::bail!(
                ResourceExhausted,
                "value '{}' ({dtype} {dims:?}) has too many elements to address",
                v.name
            ),
        }
    }
    Ok(())
}
