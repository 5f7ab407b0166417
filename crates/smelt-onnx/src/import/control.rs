//! Import of the control op family: `If`, `Loop`, `Scan` (opset 8 batched form and opset 9+).

use super::NodeCtx;
use smelt_ir::op::ControlOp;
use smelt_ir::{bail, Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    if !n.is_onnx() {
        return Ok(None);
    }
    let op = match n.op_type() {
        "If" => {
            let then_branch = Box::new(n.graph("then_branch")?);
            let else_branch = Box::new(n.graph("else_branch")?);
            if then_branch.outputs.len() != else_branch.outputs.len() {
                bail!(
                    InvalidModel,
                    "If: then_branch has {} outputs but else_branch has {}",
                    then_branch.outputs.len(),
                    else_branch.outputs.len()
                );
            }
            if then_branch.outputs.len() < n.n_outputs() {
                bail!(
                    InvalidModel,
                    "If: the node has {} outputs but the branches only {}",
                    n.n_outputs(),
                    then_branch.outputs.len()
                );
            }
            ControlOp::If {
                then_branch,
                else_branch,
            }
        }
        "Loop" => {
            let body = Box::new(n.graph("body")?);
            let carried = n.n_inputs().saturating_sub(2);
            if n.n_inputs() < 2 {
                bail!(
                    InvalidModel,
                    "Loop needs at least the M and cond inputs (possibly empty), got {}",
                    n.n_inputs()
                );
            }
            if body.inputs.len() != carried + 2 {
                bail!(
                    InvalidModel,
                    "Loop: body takes {} inputs, expected 2 + {carried} loop-carried values",
                    body.inputs.len()
                );
            }
            if body.outputs.len() < carried + 1 {
                bail!(
                    InvalidModel,
                    "Loop: body returns {} outputs, expected at least 1 + {carried}",
                    body.outputs.len()
                );
            }
            if n.n_outputs() > body.outputs.len() - 1 {
                bail!(
                    InvalidModel,
                    "Loop: the node has {} outputs but the body only {}",
                    n.n_outputs(),
                    body.outputs.len() - 1
                );
            }
            ControlOp::Loop { body }
        }
        "Scan" => {
            let body = Box::new(n.graph("body")?);
            let m = n.opt_i("num_scan_inputs")?.ok_or_else(|| {
                smelt_ir::err!(InvalidModel, "Scan needs the 'num_scan_inputs' attribute")
            })?;
            if m < 1 {
                bail!(
                    InvalidModel,
                    "Scan: num_scan_inputs must be at least 1, got {m}"
                );
            }
            let m = m as usize;
            let batched = n.opset < 9;
            let n_in = n.n_inputs().saturating_sub(usize::from(batched));
            if n_in < m {
                bail!(
                    InvalidModel,
                    "Scan: {m} scan inputs declared but only {n_in} inputs given"
                );
            }
            let n_state = n_in - m;
            if body.inputs.len() != n_in {
                bail!(
                    InvalidModel,
                    "Scan: body takes {} inputs, expected {n_in}",
                    body.inputs.len()
                );
            }
            if body.outputs.len() < n_state {
                bail!(
                    InvalidModel,
                    "Scan: body returns {} outputs, fewer than the {n_state} state variables",
                    body.outputs.len()
                );
            }
            let k = body.outputs.len() - n_state;
            let dirs = |name: &str, len: usize| -> Result<Vec<bool>> {
                match n.opt_ints(name)? {
                    None => Ok(vec![false; len]),
                    Some(v) if v.len() == len && v.iter().all(|&d| d == 0 || d == 1) => {
                        Ok(v.iter().map(|&d| d == 1).collect())
                    }
                    Some(v) => {
                        bail!(
                            InvalidModel,
                            "Scan: '{name}' should have {len} entries of 0 or 1, got {v:?}"
                        )
                    }
                }
            };
            let axes = |name: &str, len: usize| -> Result<Vec<i64>> {
                match n.opt_ints(name)? {
                    None => Ok(vec![0; len]),
                    Some(v) if v.len() == len => Ok(v),
                    Some(v) => bail!(
                        InvalidModel,
                        "Scan: '{name}' should have {len} entries, got {v:?}"
                    ),
                }
            };
            if batched {
                ControlOp::Scan {
                    body,
                    num_scan_inputs: m,
                    scan_input_axes: vec![0; m],
                    scan_input_directions: dirs("directions", m)?,
                    scan_output_axes: vec![0; k],
                    scan_output_directions: vec![false; k],
                    batched,
                }
            } else {
                ControlOp::Scan {
                    body,
                    num_scan_inputs: m,
                    scan_input_axes: axes("scan_input_axes", m)?,
                    scan_input_directions: dirs("scan_input_directions", m)?,
                    scan_output_axes: axes("scan_output_axes", k)?,
                    scan_output_directions: dirs("scan_output_directions", k)?,
                    batched,
                }
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(Op::Control(op)))
}
