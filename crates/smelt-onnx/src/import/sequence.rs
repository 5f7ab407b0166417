//! Import of the sequence op family: sequence ops, `SequenceMap` and the optional ops.

use super::NodeCtx;
use crate::tensor::decode_type;
use smelt_ir::op::SequenceOp;
use smelt_ir::{bail, err, DType, Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    if !n.is_onnx() {
        return Ok(None);
    }
    let op = match n.op_type() {
        "SequenceEmpty" => SequenceOp::SequenceEmpty {
            dtype: n.opt_dtype("dtype")?.unwrap_or(DType::F32),
        },
        "SequenceConstruct" => SequenceOp::SequenceConstruct,
        "SequenceInsert" => SequenceOp::SequenceInsert,
        "SequenceAt" => SequenceOp::SequenceAt,
        "SequenceErase" => SequenceOp::SequenceErase,
        "SequenceLength" => SequenceOp::SequenceLength,
        "SplitToSequence" => SequenceOp::SplitToSequence {
            axis: n.i("axis", 0)?,
            keepdims: n.flag("keepdims", true)?,
        },
        "ConcatFromSequence" => {
            let axis = n.opt_i("axis")?.ok_or_else(|| {
                err!(
                    InvalidModel,
                    "ConcatFromSequence needs the 'axis' attribute"
                )
            })?;
            SequenceOp::ConcatFromSequence {
                axis,
                new_axis: n.flag("new_axis", false)?,
            }
        }
        "SequenceMap" => {
            let body = Box::new(n.graph("body")?);
            if body.inputs.len() != n.n_inputs() {
                bail!(
                    InvalidModel,
                    "SequenceMap: body takes {} inputs but the node has {}",
                    body.inputs.len(),
                    n.n_inputs()
                );
            }
            if body.outputs.len() != n.n_outputs() {
                bail!(
                    InvalidModel,
                    "SequenceMap: body returns {} outputs but the node has {}",
                    body.outputs.len(),
                    n.n_outputs()
                );
            }
            SequenceOp::SequenceMap { body }
        }
        "Optional" => {
            let elem = match n.attr("type") {
                Some(a) => {
                    let tp = a.tp.as_ref().ok_or_else(|| {
                        err!(InvalidModel, "Optional: attribute 'type' holds no type")
                    })?;
                    Some(decode_type(tp).ok_or_else(|| {
                        err!(
                            Unsupported,
                            "Optional: attribute 'type' is not a usable type"
                        )
                    })?)
                }
                None => None,
            };
            let has_input = n.node.input.first().is_some_and(|s| !s.is_empty());
            if !has_input && elem.is_none() {
                bail!(
                    InvalidModel,
                    "Optional with no input needs the 'type' attribute"
                );
            }
            SequenceOp::Optional { elem }
        }
        "OptionalHasElement" => SequenceOp::OptionalHasElement,
        "OptionalGetElement" => SequenceOp::OptionalGetElement,
        _ => return Ok(None),
    };
    Ok(Some(Op::Sequence(op)))
}
