//! Import of the layout op family.

use super::NodeCtx;
use smelt_ir::op::layout::{BlockMode, PadMode, ScatterReduction};
use smelt_ir::op::LayoutOp as L;
use smelt_ir::{bail, ensure, Op, Result};

fn reduction(n: &NodeCtx) -> Result<ScatterReduction> {
    Ok(match n.s("reduction", "none")?.as_str() {
        "none" => ScatterReduction::None,
        "add" => ScatterReduction::Add,
        "mul" => ScatterReduction::Mul,
        "max" => ScatterReduction::Max,
        "min" => ScatterReduction::Min,
        other => bail!(
            InvalidModel,
            "unknown reduction '{other}' (expected none, add, mul, max or min)"
        ),
    })
}

fn block_mode(n: &NodeCtx) -> Result<BlockMode> {
    Ok(match n.s("mode", "DCR")?.as_str() {
        "DCR" => BlockMode::Dcr,
        "CRD" => BlockMode::Crd,
        other => bail!(InvalidModel, "unknown mode '{other}' (expected DCR or CRD)"),
    })
}

fn blocksize(n: &NodeCtx) -> Result<i64> {
    let b = n
        .opt_i("blocksize")?
        .ok_or_else(|| smelt_ir::err!(InvalidModel, "missing required attribute 'blocksize'"))?;
    ensure!(b > 0, InvalidModel, "blocksize must be positive, got {b}");
    Ok(b)
}

/// Translates the node if it belongs to this family; None otherwise.
pub fn import(n: &mut NodeCtx) -> Result<Option<Op>> {
    if !n.is_onnx() {
        return Ok(None);
    }
    let v = n.opset;
    let op = match n.op_type() {
        "Identity" => L::Identity,
        "Reshape" => {
            let shape = if v < 5 {
                Some(n.opt_ints("shape")?.ok_or_else(|| {
                    smelt_ir::err!(InvalidModel, "Reshape-1 needs the 'shape' attribute")
                })?)
            } else {
                None
            };
            L::Reshape {
                shape,
                allowzero: n.flag("allowzero", false)?,
            }
        }
        "Flatten" => L::Flatten {
            axis: n.i("axis", 1)?,
        },
        "Squeeze" => L::Squeeze {
            axes: if v < 13 { n.opt_ints("axes")? } else { None },
        },
        "Unsqueeze" => {
            let axes = if v < 13 {
                Some(n.opt_ints("axes")?.ok_or_else(|| {
                    smelt_ir::err!(
                        InvalidModel,
                        "Unsqueeze needs the 'axes' attribute before opset 13"
                    )
                })?)
            } else {
                None
            };
            L::Unsqueeze { axes }
        }
        "Transpose" => L::Transpose {
            perm: n.opt_ints("perm")?,
        },
        "Concat" => {
            let axis = match n.opt_i("axis")? {
                Some(a) => a,
                None if v < 4 => 1,
                None => bail!(InvalidModel, "Concat needs the 'axis' attribute"),
            };
            L::Concat { axis }
        }
        "Split" => {
            let split = if v < 13 { n.opt_ints("split")? } else { None };
            let num_outputs = if v >= 18 {
                n.opt_i("num_outputs")?
            } else {
                None
            };
            if let Some(k) = num_outputs {
                ensure!(k > 0, InvalidModel, "num_outputs must be positive, got {k}");
            }
            L::Split {
                axis: n.i("axis", 0)?,
                split,
                num_outputs,
            }
        }
        "Slice" => {
            if v < 10 {
                let starts = n
                    .opt_ints("starts")?
                    .ok_or_else(|| smelt_ir::err!(InvalidModel, "Slice-1 needs 'starts'"))?;
                let ends = n
                    .opt_ints("ends")?
                    .ok_or_else(|| smelt_ir::err!(InvalidModel, "Slice-1 needs 'ends'"))?;
                ensure!(
                    starts.len() == ends.len(),
                    InvalidModel,
                    "starts and ends have different lengths"
                );
                let axes = n.opt_ints("axes")?;
                if let Some(a) = &axes {
                    ensure!(
                        a.len() == starts.len(),
                        InvalidModel,
                        "axes and starts have different lengths"
                    );
                }
                L::Slice {
                    starts: Some(starts),
                    ends: Some(ends),
                    axes,
                }
            } else {
                L::Slice {
                    starts: None,
                    ends: None,
                    axes: None,
                }
            }
        }
        "Gather" => L::Gather {
            axis: n.i("axis", 0)?,
        },
        "GatherElements" => L::GatherElements {
            axis: n.i("axis", 0)?,
        },
        "GatherND" => L::GatherND {
            batch_dims: n.i("batch_dims", 0)?,
        },
        "ScatterElements" | "Scatter" => L::ScatterElements {
            axis: n.i("axis", 0)?,
            reduction: reduction(n)?,
        },
        "ScatterND" => L::ScatterND {
            reduction: reduction(n)?,
        },
        "Expand" => L::Expand,
        "Tile" => L::Tile { legacy_axis: v < 6 },
        "Pad" => {
            let mode = match n.s("mode", "constant")?.as_str() {
                "constant" => PadMode::Constant,
                "reflect" => PadMode::Reflect,
                "edge" => PadMode::Edge,
                "wrap" => PadMode::Wrap,
                other => bail!(InvalidModel, "unknown pad mode '{other}'"),
            };
            if v < 11 {
                let name = if v < 2 { "paddings" } else { "pads" };
                let pads = n.opt_ints(name)?.ok_or_else(|| {
                    smelt_ir::err!(InvalidModel, "Pad needs the '{name}' attribute")
                })?;
                L::Pad {
                    mode,
                    pads: Some(pads),
                    value: Some(n.f("value", 0.0)?),
                }
            } else {
                L::Pad {
                    mode,
                    pads: None,
                    value: None,
                }
            }
        }
        "Shape" => L::Shape {
            start: n.i("start", 0)?,
            end: n.opt_i("end")?,
        },
        "Size" => L::Size,
        "ConstantOfShape" => {
            let value = n.opt_tensor("value")?;
            if let Some(t) = &value {
                ensure!(
                    t.len() == 1,
                    InvalidModel,
                    "ConstantOfShape 'value' must have one element, got {}",
                    t.len()
                );
            }
            L::ConstantOfShape { value }
        }
        "Range" => L::Range,
        "OneHot" => L::OneHot {
            axis: n.i("axis", -1)?,
        },
        "Trilu" => L::Trilu {
            upper: n.flag("upper", true)?,
        },
        "EyeLike" => L::EyeLike {
            dtype: n.opt_dtype("dtype")?,
            k: n.i("k", 0)?,
        },
        "DepthToSpace" => L::DepthToSpace {
            blocksize: blocksize(n)?,
            mode: block_mode(n)?,
        },
        "SpaceToDepth" => L::SpaceToDepth {
            blocksize: blocksize(n)?,
            mode: block_mode(n)?,
        },
        "ReverseSequence" => L::ReverseSequence {
            batch_axis: n.i("batch_axis", 1)?,
            time_axis: n.i("time_axis", 0)?,
        },
        "Compress" => L::Compress {
            axis: n.opt_i("axis")?,
        },
        "NonZero" => L::NonZero,
        "Unique" => L::Unique {
            axis: n.opt_i("axis")?,
            sorted: n.flag("sorted", true)?,
        },
        "CenterCropPad" => L::CenterCropPad {
            axes: n.opt_ints("axes")?,
        },
        "Col2Im" => L::Col2Im {
            dilations: n.opt_ints("dilations")?.unwrap_or_default(),
            pads: n.opt_ints("pads")?.unwrap_or_default(),
            strides: n.opt_ints("strides")?.unwrap_or_default(),
        },
        _ => return Ok(None),
    };
    Ok(Some(Op::Layout(op)))
}
