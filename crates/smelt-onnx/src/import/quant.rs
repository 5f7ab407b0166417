//! Import of the quant op family: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
//! MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv.

use super::NodeCtx;
use smelt_ir::op::quant::QConv;
use smelt_ir::op::{AutoPad, QuantOp};
use smelt_ir::{bail, DType, Op, Result};

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    if !n.is_onnx() {
        return Ok(None);
    }
    let op = match n.op_type() {
        "QuantizeLinear" => {
            let output_dtype = opt_type(n, "output_dtype")?;
            if let Some(d) = output_dtype {
                if !quantized_type(d) {
                    bail!(
                        InvalidModel,
                        "QuantizeLinear: output_dtype {d} is not a quantized type"
                    );
                }
            }
            let precision = opt_type(n, "precision")?;
            if let Some(d) = precision {
                if !matches!(d, DType::F32 | DType::F16 | DType::BF16 | DType::F64) {
                    bail!(
                        Unsupported,
                        "QuantizeLinear: precision {d} is not a supported float type"
                    );
                }
            }
            QuantOp::QuantizeLinear {
                axis: n.i("axis", 1)?,
                block_size: block_size(n)?,
                output_dtype,
                saturate: n.flag("saturate", true)?,
                precision,
            }
        }
        "DequantizeLinear" => {
            let output_dtype = opt_type(n, "output_dtype")?;
            if let Some(d) = output_dtype {
                if !matches!(d, DType::F32 | DType::F16 | DType::BF16 | DType::F64) {
                    bail!(
                        InvalidModel,
                        "DequantizeLinear: output_dtype {d} is not a float type"
                    );
                }
            }
            QuantOp::DequantizeLinear {
                axis: n.i("axis", 1)?,
                block_size: block_size(n)?,
                output_dtype,
            }
        }
        "DynamicQuantizeLinear" => QuantOp::DynamicQuantizeLinear,
        "MatMulInteger" => QuantOp::MatMulInteger,
        "QLinearMatMul" => QuantOp::QLinearMatMul,
        "ConvInteger" => QuantOp::ConvInteger {
            conv: conv_attrs(n)?,
        },
        "QLinearConv" => QuantOp::QLinearConv {
            conv: conv_attrs(n)?,
        },
        _ => return Ok(None),
    };
    Ok(Some(Op::Quant(op)))
}

/// True for the element types QuantizeLinear can produce.
fn quantized_type(d: DType) -> bool {
    use DType::*;
    matches!(
        d,
        U8 | I8
            | U16
            | I16
            | U4
            | I4
            | U2
            | I2
            | F8E4M3FN
            | F8E4M3FNUZ
            | F8E5M2
            | F8E5M2FNUZ
            | F4E2M1
    )
}

/// A data-type attribute where 0 (UNDEFINED) means absent.
fn opt_type(n: &NodeCtx, name: &str) -> Result<Option<DType>> {
    match n.opt_i(name)? {
        None | Some(0) => Ok(None),
        Some(_) => n.opt_dtype(name),
    }
}

fn block_size(n: &NodeCtx) -> Result<i64> {
    let b = n.i("block_size", 0)?;
    if b < 0 {
        bail!(InvalidModel, "block_size must be >= 0, got {b}");
    }
    Ok(b)
}

fn conv_attrs(n: &NodeCtx) -> Result<QConv> {
    let auto_pad = match n.s("auto_pad", "NOTSET")?.as_str() {
        "NOTSET" | "" => AutoPad::NotSet,
        "SAME_UPPER" => AutoPad::SameUpper,
        "SAME_LOWER" => AutoPad::SameLower,
        "VALID" => AutoPad::Valid,
        other => bail!(InvalidModel, "unknown auto_pad '{other}'"),
    };
    let group = n.i("group", 1)?;
    if group < 1 {
        bail!(InvalidModel, "group must be >= 1, got {group}");
    }
    let kernel_shape = n.opt_ints("kernel_shape")?;
    if let Some(k) = &kernel_shape {
        if k.iter().any(|&v| v < 1) {
            bail!(InvalidModel, "kernel_shape must be positive, got {k:?}");
        }
    }
    let pads = n.opt_ints("pads")?;
    if let Some(p) = &pads {
        if p.iter().any(|&v| v < 0) || p.len() % 2 != 0 {
            bail!(
                InvalidModel,
                "pads must be non-negative begin/end pairs, got {p:?}"
            );
        }
    }
    let strides = n.opt_ints("strides")?;
    if let Some(s) = &strides {
        if s.iter().any(|&v| v < 1) {
            bail!(InvalidModel, "strides must be positive, got {s:?}");
        }
    }
    let dilations = n.opt_ints("dilations")?;
    if let Some(d) = &dilations {
        if d.iter().any(|&v| v < 1) {
            bail!(InvalidModel, "dilations must be positive, got {d:?}");
        }
    }
    Ok(QConv {
        auto_pad,
        kernel_shape,
        pads,
        strides,
        dilations,
        group,
    })
}
