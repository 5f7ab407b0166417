//! Whole ops run by the reference kernels: inputs gathered from their windows (weights used
//! whole are borrowed, never copied), outputs scattered into theirs.

use super::access::copy_chunk;
use super::nest::{walk_chunks, Nest};
use super::RunCx;
use smelt_ir::kernel::check::{Checker, Use};
use smelt_ir::kernel::{BufferKind, Single, TensorRef};
use smelt_ir::{ensure, err, DType, Result, Tensor, Value};
use smelt_reference::eval_values;

/// Validates a single op's windows.
pub(crate) fn check(c: &Checker, s: &Single) -> Result<()> {
    for (i, r) in s.inputs.iter().enumerate() {
        if let Some(r) = r {
            c.window(r, Use::OpInput, &format!("input {i}"))?;
        }
    }
    for (i, r) in s.outputs.iter().enumerate() {
        if let Some(r) = r {
            c.window(r, Use::OpOutput, &format!("output {i}"))?;
        }
    }
    Ok(())
}

/// Runs a single op: gather, evaluate, scatter.
pub(crate) fn run(cx: &mut RunCx, s: &Single) -> Result<()> {
    let results = {
        let args = gather_args(cx, &s.inputs)?;
        let vals: Vec<Option<&Value>> = args.iter().map(Arg::value).collect();
        eval_values(&s.op, &vals, s.outputs.len())?
    };
    for (i, r) in s.outputs.iter().enumerate() {
        let Some(r) = r else { continue };
        let v = results.get(i).ok_or_else(|| {
            err!(
                Internal,
                "{} gave {} outputs, output {i} is used",
                s.op.name(),
                results.len()
            )
        })?;
        let t = v
            .tensor()
            .map_err(|e| e.context(format!("{} output {i}", s.op.name())))?;
        ensure!(
            t.shape() == r.shape.as_slice(),
            Internal,
            "{} output {i} has shape {:?}, the plan expects {:?}",
            s.op.name(),
            t.shape(),
            r.shape
        );
        scatter(cx, t, r).map_err(|e| e.context(format!("{} output {i}", s.op.name())))?;
    }
    Ok(())
}

/// An op input: borrowed when a weight is used whole, else gathered.
pub(crate) enum Arg<'a> {
    /// Omitted.
    Absent,
    /// A weight, whole.
    Borrowed(&'a Value),
    /// Gathered from a window.
    Owned(Value),
}

impl Arg<'_> {
    /// The value, if present.
    pub(crate) fn value(&self) -> Option<&Value> {
        match self {
            Arg::Absent => None,
            Arg::Borrowed(v) => Some(v),
            Arg::Owned(v) => Some(v),
        }
    }
}

/// Resolves op inputs.
pub(crate) fn gather_args<'a>(cx: &RunCx<'a>, refs: &[Option<TensorRef>]) -> Result<Vec<Arg<'a>>> {
    refs.iter()
        .map(|r| {
            let Some(r) = r else { return Ok(Arg::Absent) };
            let b = cx.plan.buffer(r.buffer);
            if let BufferKind::Weight(i) = b.kind {
                if whole(cx, r) {
                    return Ok(Arg::Borrowed(&cx.weights[i]));
                }
            }
            Ok(Arg::Owned(Value::Tensor(gather(cx, r)?)))
        })
        .collect()
}

fn whole(cx: &RunCx, r: &TensorRef) -> bool {
    r.offset == 0 && r.shape == cx.plan.buffer(r.buffer).shape && r.is_contiguous()
}

/// The elements of a window as a dense tensor of its buffer's type.
pub(crate) fn gather(cx: &RunCx, r: &TensorRef) -> Result<Tensor> {
    let b = cx.plan.buffer(r.buffer);
    if b.dtype == DType::Str {
        // Validated: strings are only used as whole buffers.
        return match b.kind {
            BufferKind::Input(i) => Ok(cx.inputs[i].clone()),
            BufferKind::Weight(i) => cx.weights[i].tensor().cloned(),
            BufferKind::Output(i) => cx.outputs[i]
                .clone()
                .ok_or_else(|| err!(Internal, "output '{}' is not available", b.name)),
            BufferKind::Arena { .. } => Err(err!(Internal, "strings in the arena")),
        };
    }
    let mut t = Tensor::zeros(b.dtype, r.shape.clone())?;
    let dst = super::data_ptr_mut(&mut t);
    let dense = smelt_ir::strides(&r.shape)
        .into_iter()
        .map(|s| s as isize)
        .collect();
    let src = cx.mem.ptrs[r.buffer.0 as usize];
    // SAFETY: the window was validated against the buffer; the tensor is dense of r.shape.
    unsafe {
        copy_window(
            b.dtype,
            src,
            r.offset as isize,
            &r.strides,
            dst,
            0,
            dense,
            &r.shape,
        )
    };
    Ok(t)
}

/// Writes a dense tensor of the window's shape into the window.
pub(crate) fn scatter(cx: &mut RunCx, t: &Tensor, r: &TensorRef) -> Result<()> {
    let b = cx.plan.buffer(r.buffer);
    ensure!(
        t.dtype() == b.dtype,
        Internal,
        "result is {}, buffer '{}' holds {}",
        t.dtype(),
        b.name,
        b.dtype
    );
    if b.dtype == DType::Str {
        if let BufferKind::Output(i) = b.kind {
            cx.outputs[i] = Some(t.clone());
        }
        return Ok(());
    }
    let src = super::data_ptr(t);
    let dense: Vec<isize> = smelt_ir::strides(&r.shape)
        .into_iter()
        .map(|s| s as isize)
        .collect();
    let dst = cx.mem.ptrs[r.buffer.0 as usize];
    // SAFETY: the window was validated writable; the tensor is dense of r.shape and b.dtype.
    unsafe {
        copy_window(
            b.dtype,
            src,
            0,
            &dense,
            dst,
            r.offset as isize,
            r.strides.clone(),
            &r.shape,
        )
    };
    Ok(())
}

/// Copies every element of a window to another window of the same shape and type, exactly.
///
/// # Safety
/// Both windows must lie in storages of `dtype` elements; the destination must be writable.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn copy_window(
    dtype: DType,
    src: *const u8,
    src_off: isize,
    src_strides: &[isize],
    dst: *mut u8,
    dst_off: isize,
    dst_strides: Vec<isize>,
    shape: &[usize],
) {
    let size = dtype.storage_size();
    let as_bool = dtype == DType::Bool;
    let nest = Nest::coalesced(shape, vec![src_strides.to_vec(), dst_strides]);
    let inner = nest.inner();
    walk_chunks(
        &nest.shape,
        &nest.strides,
        &inner,
        &[src_off, dst_off],
        |o, n| copy_chunk(size, as_bool, src, o[0], inner[0], dst, o[1], inner[1], n),
    );
}
