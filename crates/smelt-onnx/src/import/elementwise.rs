//! Import of the elementwise op family.

use super::NodeCtx;
use crate::proto::attribute_proto::attribute_type as at;
use smelt_ir::op::elementwise::{E8M0Rounding, GeluApprox, ShiftDirection};
use smelt_ir::op::ElementwiseOp as E;
use smelt_ir::{bail, err, DType, Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    if !n.is_onnx() {
        return Ok(None);
    }
    let op = match n.op_type() {
        "Abs" => E::Abs,
        "Neg" => E::Neg,
        "Exp" => E::Exp,
        "Log" => E::Log,
        "Sqrt" => E::Sqrt,
        "Reciprocal" => E::Reciprocal,
        "Floor" => E::Floor,
        "Ceil" => E::Ceil,
        "Round" => E::Round,
        "Sign" => E::Sign,
        "Erf" => E::Erf,
        "Sin" => E::Sin,
        "Cos" => E::Cos,
        "Tan" => E::Tan,
        "Asin" => E::Asin,
        "Acos" => E::Acos,
        "Atan" => E::Atan,
        "Sinh" => E::Sinh,
        "Cosh" => E::Cosh,
        "Asinh" => E::Asinh,
        "Acosh" => E::Acosh,
        "Atanh" => E::Atanh,
        "Relu" => E::Relu,
        "LeakyRelu" => E::LeakyRelu {
            alpha: n.f("alpha", 0.01)?,
        },
        "PRelu" => E::PRelu,
        "Elu" => E::Elu {
            alpha: n.f("alpha", 1.0)?,
        },
        "Selu" => E::Selu {
            alpha: n.f("alpha", 1.673_263_2)?,
            gamma: n.f("gamma", 1.050_701)?,
        },
        "Celu" => E::Celu {
            alpha: n.f("alpha", 1.0)?,
        },
        "Sigmoid" => E::Sigmoid,
        "HardSigmoid" => E::HardSigmoid {
            alpha: n.f("alpha", 0.2)?,
            beta: n.f("beta", 0.5)?,
        },
        "HardSwish" => E::HardSwish,
        "Tanh" => E::Tanh,
        "Softplus" => E::Softplus,
        "Softsign" => E::Softsign,
        "Mish" => E::Mish,
        "Swish" => E::Swish {
            alpha: n.f("alpha", 1.0)?,
        },
        "ThresholdedRelu" => E::ThresholdedRelu {
            alpha: n.f("alpha", 1.0)?,
        },
        "Gelu" => E::Gelu {
            approximate: match n.s("approximate", "none")?.as_str() {
                "none" => GeluApprox::None,
                "tanh" => GeluApprox::Tanh,
                s => bail!(
                    InvalidModel,
                    "Gelu: unknown approximate '{s}' (expected 'none' or 'tanh')"
                ),
            },
        },
        "Shrink" => E::Shrink {
            bias: n.f("bias", 0.0)?,
            lambd: n.f("lambd", 0.5)?,
        },
        "Add" => legacy(n, E::Add)?,
        "Sub" => legacy(n, E::Sub)?,
        "Mul" => legacy(n, E::Mul)?,
        "Div" => legacy(n, E::Div)?,
        "Pow" => legacy(n, E::Pow)?,
        "Mod" => E::Mod {
            fmod: n.flag("fmod", false)?,
        },
        "BitShift" => E::BitShift {
            direction: match n.opt_s("direction")?.as_deref() {
                Some("LEFT") => ShiftDirection::Left,
                Some("RIGHT") => ShiftDirection::Right,
                Some(s) => bail!(
                    InvalidModel,
                    "BitShift: unknown direction '{s}' (expected 'LEFT' or 'RIGHT')"
                ),
                None => bail!(InvalidModel, "BitShift: missing attribute 'direction'"),
            },
        },
        "BitwiseAnd" => E::BitwiseAnd,
        "BitwiseOr" => E::BitwiseOr,
        "BitwiseXor" => E::BitwiseXor,
        "BitwiseNot" => E::BitwiseNot,
        "Equal" => legacy(n, E::Equal)?,
        "Less" => legacy(n, E::Less)?,
        "LessOrEqual" => E::LessOrEqual,
        "Greater" => legacy(n, E::Greater)?,
        "GreaterOrEqual" => E::GreaterOrEqual,
        "And" => legacy(n, E::And)?,
        "Or" => legacy(n, E::Or)?,
        "Xor" => legacy(n, E::Xor)?,
        "Not" => E::Not,
        "IsNaN" => E::IsNaN,
        "IsInf" => E::IsInf {
            detect_positive: n.flag("detect_positive", true)?,
            detect_negative: n.flag("detect_negative", true)?,
        },
        "Sum" => E::Sum,
        "Mean" => E::Mean,
        "Max" => E::Max,
        "Min" => E::Min,
        "Where" => E::Where,
        "Clip" => {
            if n.opset < 11 {
                E::Clip {
                    min: Some(n.f("min", f32::NEG_INFINITY)?),
                    max: Some(n.f("max", f32::INFINITY)?),
                }
            } else {
                E::Clip {
                    min: None,
                    max: None,
                }
            }
        }
        "Cast" => E::Cast {
            to: cast_to(n)?,
            saturate: n.flag("saturate", true)?,
            round_mode: round_mode(n)?,
        },
        "BitCast" => E::BitCast {
            to: n
                .opt_dtype("to")?
                .ok_or_else(|| err!(InvalidModel, "BitCast: missing attribute 'to'"))?,
        },
        "CastLike" => E::CastLike {
            saturate: n.flag("saturate", true)?,
            round_mode: round_mode(n)?,
        },
        _ => return Ok(None),
    };
    Ok(Some(Op::Elementwise(op)))
}

/// Opsets before 7 broadcast only with `broadcast=1`, aligning input 1 at `axis` of input 0.
fn legacy(n: &NodeCtx, op: E) -> Result<E> {
    if n.opset >= 7 || !n.flag("broadcast", false)? {
        return Ok(op);
    }
    match n.opt_i("axis")? {
        Some(axis) => Ok(E::LegacyBroadcast {
            op: Box::new(op),
            axis,
        }),
        // Without an axis, input 1 aligns with the trailing dimensions: numpy broadcasting.
        None => Ok(op),
    }
}

fn round_mode(n: &NodeCtx) -> Result<E8M0Rounding> {
    Ok(match n.s("round_mode", "up")?.as_str() {
        "up" => E8M0Rounding::Up,
        "down" => E8M0Rounding::Down,
        "nearest" => E8M0Rounding::Nearest,
        s => bail!(
            InvalidModel,
            "Cast: unknown round_mode '{s}' (expected 'up', 'down' or 'nearest')"
        ),
    })
}

/// The `to` attribute: a type code, or (opsets 1 to 5) a type name such as "FLOAT".
fn cast_to(n: &NodeCtx) -> Result<DType> {
    let a = n
        .attr("to")
        .ok_or_else(|| err!(InvalidModel, "Cast: missing attribute 'to'"))?;
    if a.r#type == at::STRING || (a.r#type == at::UNDEFINED && !a.s.is_empty()) {
        let name = String::from_utf8_lossy(&a.s).to_ascii_uppercase();
        return dtype_from_onnx_name(&name)
            .ok_or_else(|| err!(Unsupported, "Cast: unknown type name '{name}'"));
    }
    n.opt_dtype("to")?
        .ok_or_else(|| err!(InvalidModel, "Cast: missing attribute 'to'"))
}

fn dtype_from_onnx_name(s: &str) -> Option<DType> {
    use DType::*;
    Some(match s {
        "FLOAT" => F32,
        "UINT8" => U8,
        "INT8" => I8,
        "UINT16" => U16,
        "INT16" => I16,
        "INT32" => I32,
        "INT64" => I64,
        "STRING" => Str,
        "BOOL" => Bool,
        "FLOAT16" => F16,
        "DOUBLE" => F64,
        "UINT32" => U32,
        "UINT64" => U64,
        "COMPLEX64" => C64,
        "COMPLEX128" => C128,
        "BFLOAT16" => BF16,
        _ => return None,
    })
}
