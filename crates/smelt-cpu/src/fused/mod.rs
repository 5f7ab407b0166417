//! The fused executor: runs a compiled [`KernelPlan`] on the CPU with the kernel table of
//! the machine's ISA (`smelt_kernels`), on the process's thread pool.
//!
//! [`CpuPlan::new`] validates the plan once with the checks of `smelt_ir::kernel::check`
//! (every window inside its buffer, bodies well formed, arena placement sound), picks each
//! group's kernel and packs constant GEMM operands, so execution reads and writes storage
//! through raw pointers without checks. Elementwise loops and reductions run through the
//! vectorized scalar-op evaluator; MatMul/Gemm, Conv and attention anchors on the fast
//! kernels with fused epilogues; other anchors and single ops on the reference kernels
//! (each group's kernel, and why a group falls back, is in [`CpuPlan::kernel_names`]).

mod access;
mod anchor;
mod arena;
mod concat;
mod conv;
mod conv_blocked;
mod conv_transpose;
mod dynamic_quant;
mod elementwise;
mod epilogue;
mod fast_epilogue;
mod gather;
mod integer;
mod interp;
mod matmul;
mod nest;
mod pool;
mod profile;
mod recurrent;
mod reduction;
mod requant;
mod resize;
mod row_kernel;
mod sdpa;
mod single;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ops;
#[cfg(test)]
mod tests_validate;

pub use arena::Arena;
pub use profile::{total_by_group, KernelTiming};

use access::Elem;
use anchor::AnchorPlan;
use concat::ConcatPlan;
use elementwise::LoopPlan;
use gather::GatherPlan;
use reduction::ReductionPlan;
use smelt_ir::kernel::check::{Checker, Use};
use smelt_ir::kernel::{BufferKind, GroupBody, KernelGroup, KernelPlan};
use smelt_ir::{ensure, with_data, DType, Result, Tensor, Value};
use smelt_kernels::pool::ThreadPool;
use smelt_kernels::{Isa, Kernels};
use std::time::Instant;

/// How a plan runs: the kernel table and how many of the pool's threads one run may use.
#[derive(Debug, Clone, Copy)]
pub struct CpuOptions {
    /// Threads per run (the caller's included); at least 1.
    pub threads: usize,
    /// The instruction set (None: the best this CPU has, see `smelt_kernels::kernels`).
    pub isa: Option<Isa>,
}

impl Default for CpuOptions {
    fn default() -> Self {
        CpuOptions {
            threads: smelt_kernels::pool::available_threads(),
            isa: None,
        }
    }
}

/// What a run executes with: the kernel table, the pool and the thread budget.
#[derive(Clone, Copy)]
pub(crate) struct Exec {
    pub kern: &'static Kernels,
    pub pool: &'static ThreadPool,
    pub threads: usize,
}

impl Exec {
    /// The same, on the calling thread only.
    pub(crate) fn serial(&self) -> Exec {
        Exec {
            threads: 1,
            ..*self
        }
    }
}

/// A validated kernel plan, ready to run on many threads at once (one [`Arena`] each).
pub struct CpuPlan {
    plan: KernelPlan,
    weights: Vec<Value>,
    groups: Vec<Prepared>,
    names: Vec<String>,
    ex: Exec,
}

/// A group's validated, execution-ready form.
enum Prepared {
    Loop(Box<LoopPlan>),
    Reduction(Box<ReductionPlan>),
    Anchor(Box<AnchorPlan>),
    Copy,
    Single,
    Gather(Box<GatherPlan>),
    DynamicQuant(dynamic_quant::DynamicQuantPlan),
    Concat(ConcatPlan),
    Recurrent(Box<recurrent::RecurrentPlan>),
}

/// Every buffer's storage during one run (plus one slot for an anchor's result).
pub(crate) struct Mem {
    pub ptrs: Vec<*mut u8>,
    pub elems: Vec<Elem>,
}

// SAFETY: threads share a Mem only to touch disjoint elements (see validate::race_free).
unsafe impl Sync for Mem {}
unsafe impl Send for Mem {}

/// One run's state: storage, the caller's inputs, the outputs being filled.
pub(crate) struct RunCx<'a> {
    pub plan: &'a KernelPlan,
    pub weights: &'a [Value],
    pub inputs: &'a [&'a Tensor],
    pub outputs: Vec<Option<Tensor>>,
    pub mem: Mem,
    pub ex: Exec,
}

impl CpuPlan {
    /// Validates a plan with the default options (see [`CpuPlan::with_options`]).
    pub fn new(plan: KernelPlan) -> Result<CpuPlan> {
        CpuPlan::with_options(plan, CpuOptions::default())
    }

    /// Validates a plan, picks each group's kernel and packs constant GEMM operands; takes
    /// the plan's weights (as values shared by every run; the returned plan's `weights`
    /// list is left empty, see [`CpuPlan::weight`]).
    pub fn with_options(mut plan: KernelPlan, options: CpuOptions) -> Result<CpuPlan> {
        let kern = match options.isa {
            Some(isa) => Kernels::for_isa(isa)
                .ok_or_else(|| smelt_ir::err!(Unsupported, "this CPU cannot run {isa} kernels"))?,
            None => smelt_kernels::kernels(),
        };
        let weights = std::mem::take(&mut plan.weights);
        let (groups, names) = {
            let c = Checker::new(&plan, &weights)?;
            let acc = plan.buffers.len();
            let mut groups = Vec::with_capacity(plan.groups.len());
            let mut names = Vec::with_capacity(plan.groups.len());
            for (i, g) in plan.groups.iter().enumerate() {
                let p = prepare(&c, &weights, g, acc, kern).map_err(|e| {
                    e.context(format!("group {i} ({} {})", g.body.kind(), g.ops.join("+")))
                })?;
                let mut name = kernel_name(&p, &g.body, kern);
                if let Some(n) = g.choice.max_threads {
                    name.push_str(&format!(", at most {n} thread(s)"));
                }
                names.push(name);
                groups.push(p);
            }
            (groups, names)
        };
        Ok(CpuPlan {
            plan,
            weights: weights.into_iter().map(Value::Tensor).collect(),
            groups,
            names,
            ex: Exec {
                kern,
                pool: smelt_kernels::pool::global(),
                threads: options.threads.max(1),
            },
        })
    }

    /// The kernel each group runs (`gemm.avx512 (packed weights)`, `elementwise.avx2`,
    /// `reference (why)`...), in group order.
    pub fn kernel_names(&self) -> &[String] {
        &self.names
    }

    /// The same plan, running on at most `n` threads (at least one).
    pub fn with_threads(mut self, n: usize) -> CpuPlan {
        self.ex.threads = n.max(1);
        self
    }

    /// Threads one run may use.
    pub fn threads(&self) -> usize {
        self.ex.threads
    }

    /// The instruction set of the kernels.
    pub fn isa(&self) -> Isa {
        self.ex.kern.isa
    }

    /// The plan (its weights moved out: see [`CpuPlan::weight`]).
    pub fn plan(&self) -> &KernelPlan {
        &self.plan
    }

    /// Weight number `i`.
    pub fn weight(&self, i: usize) -> Option<&Tensor> {
        self.weights.get(i).and_then(Value::as_tensor)
    }

    /// Runs the plan on inputs given in `plan.inputs` order; returns the outputs in
    /// `plan.outputs` order. The arena grows when smaller than the plan needs. With a
    /// profile, one [`KernelTiming`] per group is appended.
    pub fn run(
        &self,
        inputs: &[&Tensor],
        arena: &mut Arena,
        profile: Option<&mut Vec<KernelTiming>>,
    ) -> Result<Vec<Tensor>> {
        self.run_controlled(inputs, arena, profile, None)
    }

    /// Like [`CpuPlan::run`]; with a control, stops between kernel groups with its error
    /// once it is cancelled or past its deadline (a group already running finishes).
    pub fn run_controlled(
        &self,
        inputs: &[&Tensor],
        arena: &mut Arena,
        mut profile: Option<&mut Vec<KernelTiming>>,
        control: Option<&smelt_ir::RunControl>,
    ) -> Result<Vec<Tensor>> {
        let start = profile.is_some().then(Instant::now);
        let plan = &self.plan;
        ensure!(
            inputs.len() == plan.inputs.len(),
            InvalidInput,
            "the plan takes {} inputs, got {}",
            plan.inputs.len(),
            inputs.len()
        );
        let mut outputs: Vec<Option<Tensor>> = Vec::with_capacity(plan.outputs.len());
        for (j, (_, id)) in plan.outputs.iter().enumerate() {
            let b = plan.buffer(*id);
            outputs.push(match b.kind {
                BufferKind::Output(i) if i == j => Some(Tensor::zeros(b.dtype, b.shape.clone())?),
                _ => None,
            });
        }
        arena.reserve(plan.memory.arena_bytes);
        let arena_base = arena.base();
        let mut ptrs = Vec::with_capacity(plan.buffers.len() + 1);
        let mut elems = Vec::with_capacity(plan.buffers.len() + 1);
        for b in &plan.buffers {
            let p: *mut u8 = match b.kind {
                BufferKind::Input(i) => {
                    let t = inputs[i];
                    ensure!(
                        t.dtype() == b.dtype && t.shape() == b.shape.as_slice(),
                        InvalidInput,
                        "input '{}': expected {} {:?}, got {} {:?}",
                        plan.inputs[i],
                        b.dtype,
                        b.shape,
                        t.dtype(),
                        t.shape()
                    );
                    data_ptr(t) as *mut u8
                }
                BufferKind::Weight(i) => match &self.weights[i] {
                    Value::Tensor(t) => data_ptr(t) as *mut u8,
                    _ => std::ptr::null_mut(),
                },
                BufferKind::Output(i) => match outputs[i].as_mut() {
                    Some(t) => data_ptr_mut(t),
                    None => std::ptr::null_mut(),
                },
                // SAFETY: validated offset + size <= arena_bytes <= the arena's length.
                BufferKind::Arena { offset } => unsafe { arena_base.add(offset) },
            };
            ptrs.push(p);
            elems.push(Elem::of(b.dtype));
        }
        ptrs.push(std::ptr::null_mut());
        elems.push(Elem::Opaque);
        let mut cx = RunCx {
            plan,
            weights: &self.weights,
            inputs,
            outputs,
            mem: Mem { ptrs, elems },
            ex: self.ex,
        };
        for (gi, (g, p)) in plan.groups.iter().zip(&self.groups).enumerate() {
            if let Some(c) = control {
                c.check()?;
            }
            let t0 = start.map(|s| s.elapsed());
            cx.ex.threads = match g.choice.max_threads {
                Some(n) => (n as usize).clamp(1, self.ex.threads),
                None => self.ex.threads,
            };
            self.run_group(&mut cx, &g.body, p).map_err(|e| {
                e.context(format!(
                    "group {gi} ({} {})",
                    g.body.kind(),
                    g.ops.join("+")
                ))
            })?;
            if let (Some(prof), Some(s), Some(t0)) = (profile.as_deref_mut(), start, t0) {
                prof.push(KernelTiming {
                    group: gi,
                    start_ns: t0.as_nanos() as u64,
                    dur_ns: (s.elapsed() - t0).as_nanos() as u64,
                });
            }
        }
        self.collect_outputs(cx)
    }

    fn run_group(&self, cx: &mut RunCx, body: &GroupBody, p: &Prepared) -> Result<()> {
        match (body, p) {
            // SAFETY (all three): validated by CpuPlan::new against these buffers.
            (_, Prepared::Loop(l)) => unsafe { l.run(&cx.mem, &cx.ex) },
            (_, Prepared::Reduction(r)) => unsafe { r.run(&cx.mem, &cx.ex) },
            (GroupBody::Copy { src, dst }, Prepared::Copy) => unsafe {
                let dtype = self.plan.buffer(src.buffer).dtype;
                single::copy_window(
                    dtype,
                    cx.mem.ptrs[src.buffer.0 as usize],
                    src.offset as isize,
                    &src.strides,
                    cx.mem.ptrs[dst.buffer.0 as usize],
                    dst.offset as isize,
                    dst.strides.clone(),
                    &src.shape,
                )
            },
            (GroupBody::Anchor(a), Prepared::Anchor(ap)) => ap.run(cx, a)?,
            (GroupBody::Single(s), Prepared::Single) => single::run(cx, s)?,
            (GroupBody::Single(s), Prepared::Recurrent(l)) => l.run(cx, s)?,
            // SAFETY: validated by CpuPlan::new against these buffers.
            (GroupBody::Single(_), Prepared::Gather(g)) => unsafe { g.run(&cx.mem)? },
            // SAFETY: validated by CpuPlan::new against these buffers.
            (GroupBody::Single(_), Prepared::DynamicQuant(d)) => unsafe { d.run(&cx.mem, &cx.ex) },
            // SAFETY: validated by CpuPlan::new against these buffers.
            (GroupBody::Single(s), Prepared::Concat(k)) => {
                if !unsafe { k.run(&cx.mem, s) } {
                    single::run(cx, s)?
                }
            }
            _ => smelt_ir::bail!(Internal, "group and its prepared form disagree"),
        }
        Ok(())
    }

    /// The outputs in plan order; those that are not their own output buffer are copied.
    fn collect_outputs(&self, mut cx: RunCx) -> Result<Vec<Tensor>> {
        let plan = &self.plan;
        let mut copies: Vec<Option<Tensor>> = Vec::with_capacity(plan.outputs.len());
        for (j, (_, id)) in plan.outputs.iter().enumerate() {
            if cx.outputs[j].is_some() {
                copies.push(None);
                continue;
            }
            let b = plan.buffer(*id);
            let whole = smelt_ir::kernel::TensorRef::dense(*id, &b.shape);
            copies.push(Some(match b.kind {
                BufferKind::Output(i) => cx.outputs[i]
                    .clone()
                    .ok_or_else(|| smelt_ir::err!(Internal, "output '{}' missing", b.name))?,
                _ => single::gather(&cx, &whole)?,
            }));
        }
        Ok(copies
            .into_iter()
            .enumerate()
            .filter_map(|(j, c)| c.or_else(|| cx.outputs[j].take()))
            .collect())
    }
}

/// The first byte of a tensor's storage.
pub(crate) fn data_ptr(t: &Tensor) -> *const u8 {
    with_data!(t.data(), v => v.as_ptr().cast::<u8>())
}

/// The first byte of a tensor's storage, for writing.
pub(crate) fn data_ptr_mut(t: &mut Tensor) -> *mut u8 {
    with_data!(t.data_mut(), v => v.as_mut_ptr().cast::<u8>())
}

/// The name of the kernel a prepared group runs.
fn kernel_name(p: &Prepared, body: &GroupBody, kern: &Kernels) -> String {
    match p {
        Prepared::Loop(l) if l.is_compiled() => kern.name("elementwise.jit"),
        Prepared::Loop(_) => kern.name("elementwise"),
        Prepared::Reduction(r) => r.kernel_name(kern),
        Prepared::Anchor(a) => a.kernel_name(),
        Prepared::Copy => "copy".into(),
        Prepared::Gather(_) => "gather.rows".into(),
        Prepared::DynamicQuant(_) => kern.name("dynamic-quantize"),
        Prepared::Concat(_) => "concat.copy".into(),
        Prepared::Recurrent(l) => kern.name(l.kernel()),
        Prepared::Single => match body {
            GroupBody::Single(s) => format!("reference ({}: runs whole)", s.op.name()),
            _ => "reference".into(),
        },
    }
}

fn prepare(
    c: &Checker,
    weights: &[Tensor],
    group: &KernelGroup,
    acc: usize,
    kern: &Kernels,
) -> Result<Prepared> {
    Ok(match &group.body {
        GroupBody::Elementwise(l) => Prepared::Loop(Box::new(LoopPlan::new(c, l, None, kern)?)),
        GroupBody::Reduction(r) => Prepared::Reduction(Box::new(ReductionPlan::new(c, r)?)),
        GroupBody::Anchor(a) => Prepared::Anchor(Box::new(AnchorPlan::new(
            c,
            weights,
            a,
            acc,
            kern,
            &group.choice,
        )?)),
        GroupBody::Copy { src, dst } => {
            c.window(src, Use::CopySrc, "copy source")?;
            c.window(dst, Use::CopyDst, "copy destination")?;
            let (s, d) = (
                c.plan.buffer(src.buffer).dtype,
                c.plan.buffer(dst.buffer).dtype,
            );
            ensure!(s == d, Internal, "copy from {s} to {d}");
            ensure!(s != DType::Str, Internal, "copy of strings");
            ensure!(
                src.shape == dst.shape,
                Internal,
                "copy from {:?} to {:?}",
                src.shape,
                dst.shape
            );
            Prepared::Copy
        }
        GroupBody::Single(s) => {
            single::check(c, s)?;
            if let Some(l) = recurrent::RecurrentPlan::new(c, weights, s, kern) {
                Prepared::Recurrent(Box::new(l))
            } else if let Some(g) = GatherPlan::new(c, s) {
                Prepared::Gather(Box::new(g))
            } else if let Some(d) = dynamic_quant::DynamicQuantPlan::new(c, s) {
                Prepared::DynamicQuant(d)
            } else if let Some(k) = ConcatPlan::new(c, s) {
                Prepared::Concat(k)
            } else {
                Prepared::Single
            }
        }
    })
}
