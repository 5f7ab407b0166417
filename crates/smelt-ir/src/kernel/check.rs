//! The checks that make a kernel plan safe to execute, shared by every backend and loader:
//! everything raw-pointer execution relies on is proved here once (buffers fit their
//! storage, windows fit their buffers, bodies only read earlier ops, parallel splits do not
//! race).
//!
//! A plan that fails them was built wrong by smelt's own lowering: the errors are internal
//! (but for buffers too large to address). A loader of plans from files should make them
//! invalid-model errors at its boundary (`Error::with_kind`).

use super::{BufferKind, KernelPlan, ScalarOp, TensorRef, ARENA_ALIGN};
use crate::{bail, ensure, err, DType, Result, Tensor};

/// Whether elements of `d` convert to and from f32 (everything but strings and complex).
pub fn converts_to_f32(d: DType) -> bool {
    !matches!(d, DType::Str | DType::C64 | DType::C128)
}

/// Checks windows against a plan whose buffers were checked.
pub struct Checker<'a> {
    /// The plan.
    pub plan: &'a KernelPlan,
    lens: Vec<usize>,
}

/// What a window is used for.
#[derive(Clone, Copy, PartialEq)]
pub enum Use {
    /// Read and converted to f32.
    Load,
    /// Written from f32.
    Store,
    /// Read whole by an op (any type; strings only as whole buffers).
    OpInput,
    /// Written by an op (any type; strings only as whole output buffers).
    OpOutput,
    /// Exact copy source.
    CopySrc,
    /// Exact copy destination.
    CopyDst,
}

impl<'a> Checker<'a> {
    /// Checks every buffer (sizes, kinds, weights, arena placement) and the output list.
    pub fn new(plan: &'a KernelPlan, weights: &[Tensor]) -> Result<Checker<'a>> {
        let mut lens = Vec::with_capacity(plan.buffers.len());
        for (id, b) in plan.buffers.iter().enumerate() {
            let what = || format!("buffer {id} ('{}')", b.name);
            let len = crate::numel(&b.shape).map_err(|e| e.context(what()))?;
            crate::limits::check_extent(b.dtype, &b.shape, &what)?;
            let bytes = len
                .checked_mul(b.dtype.storage_size())
                .filter(|&n| n <= isize::MAX as usize)
                .ok_or_else(|| err!(ResourceExhausted, "{}: too large", what()))?;
            match b.kind {
                BufferKind::Input(i) => ensure!(
                    i < plan.inputs.len(),
                    Internal,
                    "{}: input {i} of {}",
                    what(),
                    plan.inputs.len()
                ),
                BufferKind::Weight(i) => {
                    let w = weights.get(i).ok_or_else(|| {
                        err!(Internal, "{}: weight {i} of {}", what(), weights.len())
                    })?;
                    ensure!(
                        w.dtype() == b.dtype && w.shape() == b.shape.as_slice(),
                        Internal,
                        "{}: weight {i} is {} {:?}, the buffer {} {:?}",
                        what(),
                        w.dtype(),
                        w.shape(),
                        b.dtype,
                        b.shape
                    );
                }
                BufferKind::Output(i) => ensure!(
                    plan.outputs.get(i).map(|o| o.1 .0 as usize) == Some(id),
                    Internal,
                    "{}: output {i} does not name this buffer",
                    what()
                ),
                BufferKind::Arena { offset } => {
                    ensure!(
                        b.dtype != DType::Str,
                        Internal,
                        "{}: strings cannot live in the arena",
                        what()
                    );
                    ensure!(
                        offset % ARENA_ALIGN == 0,
                        Internal,
                        "{}: offset {offset} is not aligned",
                        what()
                    );
                    ensure!(
                        offset
                            .checked_add(bytes)
                            .is_some_and(|end| end <= plan.memory.arena_bytes),
                        Internal,
                        "{}: {bytes} bytes at {offset} exceed the arena ({} bytes)",
                        what(),
                        plan.memory.arena_bytes
                    );
                }
            }
            lens.push(len);
        }
        for (name, id) in &plan.outputs {
            ensure!(
                (id.0 as usize) < plan.buffers.len(),
                Internal,
                "output '{name}': no buffer {}",
                id.0
            );
        }
        Ok(Checker { plan, lens })
    }

    /// Checks that a window lies in its buffer and suits its use.
    pub fn window(&self, r: &TensorRef, u: Use, what: &str) -> Result<()> {
        let id = r.buffer.0 as usize;
        let b = self
            .plan
            .buffers
            .get(id)
            .ok_or_else(|| err!(Internal, "{what}: no buffer {id}"))?;
        ensure!(
            r.shape.len() == r.strides.len(),
            Internal,
            "{what}: {} extents but {} strides",
            r.shape.len(),
            r.strides.len()
        );
        let writes = matches!(u, Use::Store | Use::OpOutput | Use::CopyDst);
        if writes {
            ensure!(
                matches!(b.kind, BufferKind::Output(_) | BufferKind::Arena { .. }),
                Internal,
                "{what}: buffer '{}' is read only",
                b.name
            );
        }
        if matches!(u, Use::Load | Use::Store) {
            ensure!(
                converts_to_f32(b.dtype),
                Internal,
                "{what}: {} elements do not convert to f32",
                b.dtype
            );
        }
        if b.dtype == DType::Str {
            ensure!(
                matches!(u, Use::OpInput | Use::OpOutput) && self.whole(r),
                Internal,
                "{what}: strings are only read or written whole by single ops"
            );
        }
        if r.shape.contains(&0) {
            return Ok(());
        }
        let (mut lo, mut hi) = (r.offset as i128, r.offset as i128);
        for (&n, &s) in r.shape.iter().zip(&r.strides) {
            let reach = (n as i128 - 1) * s as i128;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        ensure!(
            lo >= 0 && hi < self.lens[id] as i128,
            Internal,
            "{what}: window [{lo}, {hi}] is outside buffer '{}' of {} elements",
            b.name,
            self.lens[id]
        );
        Ok(())
    }

    /// Whether a window is its whole buffer, row-major.
    pub fn whole(&self, r: &TensorRef) -> bool {
        let b = self.plan.buffer(r.buffer);
        r.offset == 0 && r.shape == b.shape && r.is_contiguous()
    }
}

/// Checks a body: operands refer to earlier ops, loads and stages exist, `Acc` only where allowed.
pub fn body(ops: &[ScalarOp], n_loads: usize, acc: bool, n_stages: usize) -> Result<()> {
    for (i, op) in ops.iter().enumerate() {
        let earlier = |k: usize| -> Result<()> {
            ensure!(
                k < i,
                Internal,
                "op {i} ({op:?}) reads op {k}, which is not earlier"
            );
            Ok(())
        };
        match *op {
            ScalarOp::Load(k) => {
                ensure!(k < n_loads, Internal, "op {i} reads load {k} of {n_loads}")
            }
            ScalarOp::Const(_) => {}
            ScalarOp::Acc => ensure!(acc, Internal, "op {i}: Acc outside an anchor epilogue"),
            ScalarOp::Reduced(k) => {
                ensure!(
                    k < n_stages,
                    Internal,
                    "op {i} reads stage {k} of {n_stages}"
                )
            }
            ScalarOp::Unary(_, a) => earlier(a)?,
            ScalarOp::Binary(_, a, b) => {
                earlier(a)?;
                earlier(b)?
            }
            ScalarOp::Select(c, a, b) => {
                earlier(c)?;
                earlier(a)?;
                earlier(b)?
            }
        }
    }
    Ok(())
}

/// The ops `roots` depend on (themselves included), ascending. Roots must be valid indices.
pub fn deps(ops: &[ScalarOp], roots: &[usize]) -> Vec<usize> {
    let mut need = vec![false; ops.len()];
    for &r in roots {
        need[r] = true;
    }
    for i in (0..ops.len()).rev() {
        if !need[i] {
            continue;
        }
        for a in ops[i].operands() {
            need[a] = true;
        }
    }
    (0..ops.len()).filter(|&i| need[i]).collect()
}

/// Checks that an op index exists.
pub fn op_index(ops: &[ScalarOp], i: usize, what: &str) -> Result<()> {
    if i >= ops.len() {
        bail!(Internal, "{what} is op {i} of {}", ops.len());
    }
    Ok(())
}

/// Whether windows can be split between threads without two threads touching one element
/// while one writes it: every store is one-to-one, and windows that overlap a store's
/// are that store's exact window.
pub fn race_free(loads: &[&TensorRef], stores: &[&TensorRef]) -> bool {
    let injective = |r: &TensorRef| {
        let mut dims: Vec<(usize, isize)> = r
            .shape
            .iter()
            .zip(&r.strides)
            .filter(|(&n, _)| n > 1)
            .map(|(&n, &s)| (n, s.abs()))
            .collect();
        dims.sort_by_key(|d| d.1);
        let mut reach = 0isize;
        dims.iter().all(|&(n, s)| {
            let ok = s > reach;
            reach = reach.saturating_add(s.saturating_mul(n as isize - 1));
            ok
        })
    };
    let overlaps = |a: &TensorRef, b: &TensorRef| match (a.span(), b.span()) {
        (Some(x), Some(y)) => a.buffer == b.buffer && x.0 < y.1 && y.0 < x.1,
        _ => false,
    };
    let same = |a: &TensorRef, b: &TensorRef| a.offset == b.offset && a.strides == b.strides;
    stores.iter().all(|s| injective(s))
        && stores.iter().enumerate().all(|(i, s)| {
            loads
                .iter()
                .chain(&stores[..i])
                .all(|o| !overlaps(o, s) || same(o, s))
        })
}
