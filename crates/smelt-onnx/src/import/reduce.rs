//! Import of the reduce op family: `Reduce*`, `ArgMax`/`ArgMin`, the softmax family, `CumSum`/`CumProd`, `TopK`.

use super::NodeCtx;
use smelt_ir::op::reduce::{ReduceOp, Reduction};
use smelt_ir::{bail, Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    if !n.is_onnx() {
        return Ok(None);
    }
    let op = match n.op_type() {
        "ReduceSum" => ReduceOp::ReduceSum(reduction(n, 13)?),
        "ReduceMean" => ReduceOp::ReduceMean(reduction(n, 18)?),
        "ReduceMax" => ReduceOp::ReduceMax(reduction(n, 18)?),
        "ReduceMin" => ReduceOp::ReduceMin(reduction(n, 18)?),
        "ReduceProd" => ReduceOp::ReduceProd(reduction(n, 18)?),
        "ReduceL1" => ReduceOp::ReduceL1(reduction(n, 18)?),
        "ReduceL2" => ReduceOp::ReduceL2(reduction(n, 18)?),
        "ReduceLogSum" => ReduceOp::ReduceLogSum(reduction(n, 18)?),
        "ReduceLogSumExp" => ReduceOp::ReduceLogSumExp(reduction(n, 18)?),
        "ReduceSumSquare" => ReduceOp::ReduceSumSquare(reduction(n, 18)?),
        "ArgMax" | "ArgMin" => {
            let axis = n.i("axis", 0)?;
            let keepdims = n.flag("keepdims", true)?;
            let select_last_index = n.flag("select_last_index", false)?;
            if n.op_type() == "ArgMax" {
                ReduceOp::ArgMax {
                    axis,
                    keepdims,
                    select_last_index,
                }
            } else {
                ReduceOp::ArgMin {
                    axis,
                    keepdims,
                    select_last_index,
                }
            }
        }
        "Softmax" | "LogSoftmax" | "Hardmax" => {
            let coerce_2d = n.opset < 13;
            let axis = n.i("axis", if coerce_2d { 1 } else { -1 })?;
            match n.op_type() {
                "Softmax" => ReduceOp::Softmax { axis, coerce_2d },
                "LogSoftmax" => ReduceOp::LogSoftmax { axis, coerce_2d },
                _ => ReduceOp::Hardmax { axis, coerce_2d },
            }
        }
        "CumSum" | "CumProd" => {
            let exclusive = n.flag("exclusive", false)?;
            let reverse = n.flag("reverse", false)?;
            if n.n_inputs() < 2 {
                bail!(InvalidModel, "{} needs an axis input", n.op_type());
            }
            if n.op_type() == "CumSum" {
                ReduceOp::CumSum { exclusive, reverse }
            } else {
                ReduceOp::CumProd { exclusive, reverse }
            }
        }
        "TopK" => {
            let k = if n.opset < 10 {
                let k = n.opt_i("k")?.ok_or_else(|| {
                    smelt_ir::err!(
                        InvalidModel,
                        "TopK (opset {}) needs the 'k' attribute",
                        n.opset
                    )
                })?;
                if k < 0 {
                    bail!(InvalidModel, "TopK: k must be non-negative, got {k}");
                }
                Some(k)
            } else {
                if n.n_inputs() < 2 {
                    bail!(InvalidModel, "TopK (opset {}) needs the K input", n.opset);
                }
                None
            };
            ReduceOp::TopK {
                k,
                axis: n.i("axis", -1)?,
                largest: n.flag("largest", true)?,
                sorted: n.flag("sorted", true)?,
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(Op::Reduce(op)))
}

/// The shared `Reduce*` attributes; `axes_input_from` is the opset where `axes` became an input.
fn reduction(n: &NodeCtx, axes_input_from: i64) -> Result<Reduction> {
    let keepdims = n.flag("keepdims", true)?;
    let noop_with_empty_axes = n.flag("noop_with_empty_axes", false)?;
    let axes = if n.opset < axes_input_from {
        // The attribute, or every axis when it is absent.
        Some(n.opt_ints("axes")?.unwrap_or_default())
    } else {
        if n.attr("axes").is_some() {
            bail!(
                InvalidModel,
                "{}: 'axes' is an input from opset {axes_input_from} on, not an attribute",
                n.op_type()
            );
        }
        None
    };
    Ok(Reduction {
        axes,
        keepdims,
        noop_with_empty_axes,
    })
}
