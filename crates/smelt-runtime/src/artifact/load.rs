//! Loading an artifact: check the header and manifest, map the weights in place, validate
//! the kernel plan with the executor's checks, and wrap it as a ready plan. No pass runs.

use super::format::{BucketPlan, Header, IoSpec, Manifest, PackEntry, WeightEntry, WEIGHT_ALIGN};
use crate::plan::{Execution, Plan};
use crate::SessionOptions;
use smelt_ir::kernel::{BufferKind, KernelPlan};
use smelt_ir::{
    bail, ensure, err, Backing, Buf, DType, Data, Dim, ErrorKind, Graph, GraphInput, Result,
    Tensor, ValueType,
};
use smelt_kernels::Isa;
use std::sync::Arc;
use std::time::Instant;

/// A loaded artifact: the plan, the graph signature it runs under, what it was built for.
pub(crate) struct Loaded {
    /// Inputs and outputs (no nodes), as the session reports and checks them.
    pub graph: Graph,
    /// The ready plans with the input shapes each runs at, the largest batch first
    /// (shared by every session of one file, see `shared`).
    pub plans: Vec<(crate::InputShapes, Arc<Plan>)>,
    /// What the artifact was compiled for.
    pub fixed: Fixed,
}

/// What an artifact session was compiled for.
#[derive(Debug, Clone)]
pub struct Fixed {
    /// The input shapes, in input order: the only ones it runs at.
    pub shapes: crate::InputShapes,
    /// The target CPU level asked for at compile time.
    pub target: String,
    /// The kernels' instruction set.
    pub isa: Isa,
    /// Whether it was compiled with `--deterministic`.
    pub deterministic: bool,
    /// Per input, the smallest table it indexes (see `IoSpec::index_limit`).
    pub index_limits: std::collections::HashMap<String, i64>,
    /// Of the packed weights the file stores, how many the kernels took (the rest, and
    /// any the file lacks, were packed at load): `(taken, stored)`.
    pub prepacked: (usize, usize),
    /// The preset it was compiled with, if any, and what the preset decided.
    pub preset: Option<String>,
    /// What the preset and the memory budget decided, a line each.
    pub decisions: Vec<String>,
    /// The most threads a run uses (recorded by the preset), if capped.
    pub max_threads: Option<usize>,
    /// The memory budget checked at compile time, bytes.
    pub max_memory: Option<u64>,
    /// The batch sizes it has plans for, ascending (empty: one plan, no batch buckets).
    pub buckets: Vec<usize>,
    /// What autotuning decided, per plan (informational: the choices are in the plans).
    pub tuning: Vec<crate::tune::TuneRecord>,
}

impl Fixed {
    /// The input shapes of the plan a run of these shapes takes: themselves when the
    /// artifact was compiled for them, else those of the smallest batch bucket that holds
    /// them (every input's dim 0 the same batch n, the other dims as compiled), with n.
    pub fn bucket_for(&self, shapes: &crate::InputShapes) -> Option<(crate::InputShapes, usize)> {
        let n = shapes.iter().next().and_then(|(_, d)| d.first().copied())?;
        let b = *self.buckets.iter().find(|&&b| b >= n)?;
        let mut want = crate::InputShapes::new();
        for (name, dims) in self.shapes.iter() {
            let got = shapes.get(name)?;
            if got.len() != dims.len() || got.first() != Some(&n) || got[1..] != dims[1..] {
                return None;
            }
            let mut d = dims.to_vec();
            d[0] = b;
            want.set(name, d);
        }
        Some((want, n))
    }
}

/// What a CPU needs for an ISA's kernels, in words.
fn isa_features(isa: Isa) -> &'static str {
    match isa {
        Isa::Portable => "nothing special",
        Isa::Avx2 => "AVX2 and FMA",
        Isa::Avx512 => "AVX-512 F, VL, DQ and BW",
    }
}

/// The file ranges (offset, bytes) a run of the plan reads: its packs and small weights.
fn hot_ranges(header: &Header, b: &BucketPlan) -> Vec<(usize, usize)> {
    let base = header.weights_offset;
    let packs = b
        .packed
        .iter()
        .map(|p| (p.offset, p.floats.saturating_mul(4)));
    let small = b.weights.iter().filter_map(|w| {
        let bytes = smelt_ir::numel(&w.shape)
            .ok()?
            .checked_mul(w.dtype.storage_size())?;
        (bytes < super::format::SMALL_WEIGHT_BYTES).then_some((w.offset, bytes))
    });
    packs
        .chain(small)
        .map(|(at, len)| (base.saturating_add(at), len))
        .collect()
}

/// Ranges sorted and joined where they overlap or lie within 64 KiB of each other.
fn merge_ranges(mut r: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    r.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (at, len) in r {
        let end = at.saturating_add(len);
        match out.last_mut() {
            Some((s, l)) if at <= s.saturating_add(*l).saturating_add(64 << 10) => {
                *l = end.max(s.saturating_add(*l)) - *s;
            }
            _ => out.push((at, len)),
        }
    }
    out
}

/// The elements of one weight: a window onto the file, or (bools) a checked copy.
fn weight(file: &Arc<dyn Backing>, base: usize, len: usize, w: &WeightEntry) -> Result<Tensor> {
    let n = smelt_ir::numel(&w.shape)?;
    let size = n.checked_mul(w.dtype.storage_size()).ok_or_else(|| {
        err!(
            InvalidModel,
            "a {} weight {:?} is too large",
            w.dtype,
            w.shape
        )
    })?;
    ensure!(
        w.offset.is_multiple_of(WEIGHT_ALIGN),
        InvalidModel,
        "a weight at offset {} is not {WEIGHT_ALIGN}-byte aligned",
        w.offset
    );
    ensure!(
        w.offset.checked_add(size).is_some_and(|e| e <= len),
        InvalidModel,
        "a {} weight {:?} ({size} bytes at {}) runs past the {len}-byte weights section",
        w.dtype,
        w.shape,
        w.offset
    );
    let at = base + w.offset;
    let f = file.clone();
    use DType::*;
    let data = match w.dtype {
        F32 => Data::F32(Buf::window(f, at, n)?),
        F64 => Data::F64(Buf::window(f, at, n)?),
        F16 => Data::F16(Buf::window(f, at, n)?),
        BF16 => Data::BF16(Buf::window(f, at, n)?),
        I8 | I4 | I2 => Data::I8(Buf::window(f, at, n)?),
        I16 => Data::I16(Buf::window(f, at, n)?),
        I32 => Data::I32(Buf::window(f, at, n)?),
        I64 => Data::I64(Buf::window(f, at, n)?),
        U8 | U4 | U2 | F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F4E2M1 | F8E8M0 => {
            Data::U8(Buf::window(f, at, n)?)
        }
        U16 => Data::U16(Buf::window(f, at, n)?),
        U32 => Data::U32(Buf::window(f, at, n)?),
        U64 => Data::U64(Buf::window(f, at, n)?),
        C64 => Data::C64(Buf::window(f, at, n)?),
        C128 => Data::C128(Buf::window(f, at, n)?),
        Bool => {
            let bytes = &file.bytes()[at..at + n];
            ensure!(
                bytes.iter().all(|&b| b <= 1),
                InvalidModel,
                "a bool weight holds a byte other than 0 or 1"
            );
            Data::Bool(bytes.iter().map(|&b| b == 1).collect())
        }
        Str => bail!(InvalidModel, "an artifact cannot hold string weights"),
    };
    Tensor::new(w.dtype, w.shape.clone(), data).map_err(|e| e.with_kind(ErrorKind::InvalidModel))
}

/// The floats of one packed weight: a window onto the file, its bounds checked.
fn pack(file: &Arc<dyn Backing>, base: usize, len: usize, p: &PackEntry) -> Result<Buf<f32>> {
    let size = p.floats.checked_mul(4);
    ensure!(
        p.offset.is_multiple_of(WEIGHT_ALIGN)
            && size
                .and_then(|s| p.offset.checked_add(s))
                .is_some_and(|e| e <= len),
        InvalidModel,
        "packed weight '{}' ({} floats at {}) is misaligned or runs past the {len}-byte weights section",
        p.key,
        p.floats,
        p.offset
    );
    Buf::window(file.clone(), base + p.offset, p.floats)
}

/// Checks the signature against the plan's own input and output buffers, and rebuilds
/// each default through the checked constructor.
fn check_signature(m: &mut BucketPlan) -> Result<()> {
    let plan = &m.plan;
    ensure!(
        m.inputs.len() == plan.inputs.len() && m.outputs.len() == plan.outputs.len(),
        InvalidModel,
        "the signature lists {} inputs and {} outputs, the plan {} and {}",
        m.inputs.len(),
        m.outputs.len(),
        plan.inputs.len(),
        plan.outputs.len()
    );
    let find = |kind: BufferKind| plan.buffers.iter().find(|b| b.kind == kind);
    for (i, spec) in m.inputs.iter_mut().enumerate() {
        ensure!(
            spec.name == plan.inputs[i] && !m.outputs.iter().any(|o| o.name == spec.name),
            InvalidModel,
            "input {i} is named '{}' in the signature, '{}' in the plan",
            spec.name,
            plan.inputs[i]
        );
        if let Some(b) = find(BufferKind::Input(i)) {
            ensure!(
                b.dtype == spec.dtype && b.shape == spec.shape,
                InvalidModel,
                "input '{}' is {} {:?} in the signature, {} {:?} in the plan",
                spec.name,
                spec.dtype,
                spec.shape,
                b.dtype,
                b.shape
            );
        }
        if let Some(d) = spec.default.take() {
            let (dtype, shape) = (d.dtype(), d.shape().to_vec());
            ensure!(
                dtype == spec.dtype && shape == spec.shape,
                InvalidModel,
                "input '{}': its default is {dtype} {shape:?}",
                spec.name
            );
            let t = Tensor::new(dtype, shape, d.into_data())
                .map_err(|e| e.with_kind(ErrorKind::InvalidModel))?;
            spec.default = Some(t);
        }
    }
    for (j, spec) in m.outputs.iter().enumerate() {
        let b = plan
            .buffers
            .get(plan.outputs[j].1 .0 as usize)
            .ok_or_else(|| err!(InvalidModel, "output {j} names no buffer"))?;
        ensure!(
            spec.name == plan.outputs[j].0 && b.dtype == spec.dtype && b.shape == spec.shape,
            InvalidModel,
            "output {j} ('{}') does not match the plan's output buffer",
            spec.name
        );
    }
    for (i, a) in m.inputs.iter().enumerate() {
        ensure!(
            !m.inputs[..i].iter().any(|b| b.name == a.name),
            InvalidModel,
            "input '{}' is listed twice",
            a.name
        );
    }
    Ok(())
}

fn tensor_type(s: &IoSpec) -> ValueType {
    ValueType::Tensor {
        dtype: s.dtype,
        shape: Some(s.shape.iter().map(|&d| Dim::Known(d as u64)).collect()),
    }
}

/// The input and output types a session reports: dim 0 a symbol `batch` when the
/// artifact has batch buckets.
fn signature_type(s: &IoSpec, batched: bool) -> ValueType {
    let mut ty = tensor_type(s);
    if let (true, ValueType::Tensor { shape: Some(d), .. }) = (batched, &mut ty) {
        if let Some(first) = d.first_mut() {
            *first = Dim::Sym(smelt_ir::DimExpr::Sym("batch".into()));
        }
    }
    ty
}

/// A graph of just the signature: typed inputs (with defaults) and outputs.
fn signature_graph(m: &BucketPlan, batched: bool) -> Graph {
    let mut g = Graph {
        name: "artifact".into(),
        ..Default::default()
    };
    for s in &m.inputs {
        let id = g.add_value(s.name.clone(), Some(signature_type(s, batched)));
        g.inputs.push(GraphInput {
            id,
            default: s.default.clone(),
        });
    }
    for s in &m.outputs {
        let id = g.add_value(s.name.clone(), Some(signature_type(s, batched)));
        g.outputs.push(id);
    }
    g
}

/// Loads the artifact at `path`, or shares the plan another session loaded from the same
/// file with the same thread count and ISA (checked against these options' limits, and
/// its weights' checksum when asked).
pub(crate) fn load_file(path: &std::path::Path, options: &SessionOptions) -> Result<Loaded> {
    let key = super::shared::key(path, options);
    if let Some(l) = key.as_ref().and_then(super::shared::get) {
        for (_, plan) in &l.plans {
            let kp = plan
                .kernels()
                .ok_or_else(|| err!(Internal, "an artifact plan without kernels"))?;
            crate::check::check_plan_memory(kp, &options.limits)?;
        }
        if options.verify_weights {
            let file = super::map_file(path)?;
            Header::parse(file.bytes())?.verify_weights(file.bytes())?;
        }
        return Ok(l);
    }
    let l = load(super::map_file(path)?, options, options.verify_weights)?;
    if let Some(k) = key {
        super::shared::put(k, &l);
    }
    Ok(l)
}

/// Loads an artifact from its bytes (a mapped file, or bytes read into aligned memory).
/// Checks the header checksum always, the weights' checksum when `verify_weights`.
pub(crate) fn load(
    file: Arc<dyn Backing>,
    options: &SessionOptions,
    verify_weights: bool,
) -> Result<Loaded> {
    let bytes = file.bytes();
    let header = Header::parse(bytes)?;
    if verify_weights {
        header.verify_weights(bytes)?;
    }
    let m = Manifest::parse(header.manifest(bytes))?;
    let isa = Isa::from_name(&m.isa)
        .ok_or_else(|| err!(InvalidModel, "unknown instruction set '{}'", m.isa))?;
    ensure!(
        isa.is_supported(),
        Unsupported,
        "the artifact was compiled for {} ({isa} kernels), and this CPU lacks {}",
        m.target,
        isa_features(isa)
    );
    if let Some(want) = options.isa {
        ensure!(
            want == isa,
            InvalidInput,
            "the artifact holds {isa} kernels, not {want} (compile it again for {want})"
        );
    }
    ensure!(
        m.max_threads != Some(0) && m.buckets.len() <= MAX_BUCKETS,
        InvalidModel,
        "the artifact caps runs at 0 threads, or has more than {MAX_BUCKETS} batch buckets"
    );
    let threads = options.threads.min(m.max_threads.unwrap_or(usize::MAX));
    let head = Head {
        producer: m.producer.clone(),
        isa,
        threads,
        options,
    };
    let mut hot = Vec::new();
    let (plans, fixed, graph) = {
        let batched = !m.buckets.is_empty();
        let Manifest {
            producer: _,
            target,
            isa: _,
            deterministic,
            inputs,
            outputs,
            plan,
            weights,
            kernels,
            packed,
            preset,
            decisions,
            max_threads,
            max_memory,
            buckets,
            tuning,
        } = m;
        let main = BucketPlan {
            batch: super::format::leading_dim(&inputs),
            inputs,
            outputs,
            plan,
            weights,
            kernels,
            packed,
        };
        let mut all = vec![main];
        all.extend(buckets);
        let mut plans = Vec::with_capacity(all.len());
        let mut graph = None;
        let mut prepacked = (0, 0);
        let mut batches = Vec::new();
        for (k, mut b) in all.into_iter().enumerate() {
            if batched {
                check_batch(&b).map_err(|e| e.context(format!("plan {k}")))?;
            }
            check_signature(&mut b).map_err(|e| bucket_context(e, k, batched, b.batch))?;
            if let Some(g) = &graph {
                ensure!(
                    same_signature(g, &signature_graph(&b, batched)),
                    InvalidModel,
                    "the plan for batch {} has another signature than the first",
                    b.batch
                );
            } else {
                graph = Some(signature_graph(&b, batched));
            }
            let mut shapes = crate::InputShapes::new();
            for s in &b.inputs {
                shapes.set(&s.name, s.shape.clone());
            }
            let index_limits: std::collections::HashMap<String, i64> = b
                .inputs
                .iter()
                .filter_map(|s| Some((s.name.clone(), s.index_limit?)))
                .collect();
            let batch = b.batch;
            hot.extend(hot_ranges(&header, &b));
            let (plan, used, stored) = load_plan(&file, &header, &head, b)
                .map_err(|e| bucket_context(e, k, batched, batch))?;
            prepacked = (prepacked.0 + used, prepacked.1 + stored);
            batches.push(batch);
            plans.push((shapes, Arc::new(plan), index_limits));
        }
        ensure!(
            !batched || batches.windows(2).all(|w| w[0] > w[1]),
            InvalidModel,
            "the batch buckets {batches:?} do not fall from the first"
        );
        let graph = graph.ok_or_else(|| err!(InvalidModel, "an artifact of no plan"))?;
        let (shapes, _, index_limits) = plans[0].clone();
        let fixed = Fixed {
            shapes,
            target,
            isa,
            deterministic,
            index_limits,
            prepacked,
            preset,
            decisions,
            max_threads,
            max_memory,
            tuning,
            buckets: if batched {
                batches.iter().rev().copied().collect()
            } else {
                Vec::new()
            },
        };
        let plans: Vec<_> = plans.into_iter().map(|(s, p, _)| (s, p)).collect();
        (plans, fixed, graph)
    };
    // Packing at load (of what the file did not store packed) read those weights once;
    // what runs reads the packed copies. The pages go back (those still read come back
    // from the page cache on first touch).
    file.release();
    // What every run reads, the packs and the small weights, mapped now in a few calls
    // rather than a fault per 64 KiB in the first run.
    for (at, len) in merge_ranges(hot) {
        file.prefetch(at, len);
    }
    Ok(Loaded {
        graph,
        plans,
        fixed,
    })
}

/// The most batch buckets an artifact may have.
const MAX_BUCKETS: usize = 64;

/// What every plan of one artifact is loaded with.
struct Head<'a> {
    producer: String,
    isa: Isa,
    threads: usize,
    options: &'a SessionOptions,
}

/// A bucket's batch is dim 0 of its first input (the file's `batch` must say the same),
/// and every input and output of the plan has that dim 0: runs pad the inputs and cut the
/// outputs there.
fn check_batch(b: &BucketPlan) -> Result<()> {
    let n = super::format::leading_dim(&b.inputs);
    ensure!(
        n > 0 && n == b.batch,
        InvalidModel,
        "a batch bucket says batch {} and its first input has dim 0 {n}",
        b.batch
    );
    if let Some(s) = b
        .inputs
        .iter()
        .chain(&b.outputs)
        .find(|s| s.shape.first() != Some(&b.batch))
    {
        bail!(
            InvalidModel,
            "the plan for batch {} has '{}' of shape {:?}, not batched in dim 0",
            b.batch,
            s.name,
            s.shape
        );
    }
    ensure!(
        b.inputs.iter().all(|s| s.default.is_none()),
        InvalidModel,
        "a bucketed plan's inputs cannot have defaults (they are not batched)"
    );
    Ok(())
}

/// Names the bucket an error is about, when the artifact has several.
fn bucket_context(e: smelt_ir::Error, k: usize, batched: bool, batch: usize) -> smelt_ir::Error {
    if batched {
        e.context(format!("the plan for batch {batch} (plan {k})"))
    } else {
        e
    }
}

/// Whether two signature graphs have the same inputs and outputs.
fn same_signature(a: &Graph, b: &Graph) -> bool {
    let io = |g: &Graph| {
        let ins: Vec<_> = g
            .inputs
            .iter()
            .map(|i| {
                (
                    g.name_of(i.id).to_string(),
                    g.value(i.id).ty.clone(),
                    i.default.is_some(),
                )
            })
            .collect();
        let outs: Vec<_> = g
            .outputs
            .iter()
            .map(|&o| (g.name_of(o).to_string(), g.value(o).ty.clone()))
            .collect();
        (ins, outs)
    };
    io(a) == io(b)
}

/// One plan of the artifact, ready: its weights mapped, its packs replayed, its kernels
/// checked against the file's choices. Returns it with (packs taken, packs stored).
fn load_plan(
    file: &Arc<dyn Backing>,
    header: &Header,
    head: &Head,
    b: BucketPlan,
) -> Result<(Plan, usize, usize)> {
    let t = Instant::now();
    ensure!(
        b.weights.len() <= b.plan.buffers.len(),
        InvalidModel,
        "{} weights for {} buffers",
        b.weights.len(),
        b.plan.buffers.len()
    );
    let weights = b
        .weights
        .iter()
        .enumerate()
        .map(|(i, w)| {
            weight(file, header.weights_offset, header.weights_len, w)
                .map_err(|e| e.context(format!("weight {i}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let graph = signature_graph(&b, false);
    let stored = b
        .packed
        .iter()
        .map(|p| {
            let buf = pack(file, header.weights_offset, header.weights_len, p)?;
            Ok((p.key.clone(), buf))
        })
        .collect::<Result<Vec<_>>>()?;
    let packs = stored.len();
    let kp = KernelPlan { weights, ..b.plan };
    crate::check::check_plan_memory(&kp, &head.options.limits)?;
    let cpu = smelt_cpu::fused::CpuOptions {
        threads: head.threads,
        isa: Some(head.isa),
    };
    // The plan came from a file: what the executor's checks refuse is a bad file, not a
    // bug of this build.
    // The kernels take their packed weights from the file where they match (a pack that
    // does not is packed again from the weights: slower, never wrong).
    let (cpu, replayed) =
        smelt_kernels::prepack::replay(stored, || smelt_cpu::fused::CpuPlan::with_options(kp, cpu));
    let cpu = cpu.map_err(|e| match e.kind() {
        ErrorKind::Internal => e.with_kind(ErrorKind::InvalidModel),
        _ => e,
    })?;
    let names = cpu.kernel_names();
    ensure!(
        names.len() == b.kernels.len(),
        InvalidModel,
        "{} kernel choices for {} groups",
        b.kernels.len(),
        names.len()
    );
    // A loop compiled to machine code computes what the interpreter does (SMELT_JIT=0 or
    // a build that cannot compile it): the same kernel as far as the artifact goes.
    let interp = |n: &str| match n.strip_prefix("elementwise.jit.") {
        Some(isa) => format!("elementwise.{isa}"),
        None => n.to_string(),
    };
    if let Some(i) = (0..names.len()).find(|&i| interp(&names[i]) != interp(&b.kernels[i])) {
        bail!(
            InvalidModel,
            "group {i}: the artifact chose kernel '{}', this build picks '{}' (it was written by {}; compile it again)",
            b.kernels[i],
            names[i],
            head.producer
        );
    }
    let plan = Plan::new(
        graph,
        Execution::Kernels(Box::new(cpu)),
        Vec::new(),
        t.elapsed().as_secs_f64(),
    );
    Ok((plan, replayed.used, packs))
}

#[cfg(test)]
mod tests {
    use super::merge_ranges;

    #[test]
    fn ranges_merge_across_small_gaps_only() {
        let gap = 64 << 10;
        let r = merge_ranges(vec![(10_000_000, 5), (0, 100), (100 + gap, 10), (50, 10)]);
        assert_eq!(r, vec![(0, 110 + gap), (10_000_000, 5)]);
        assert_eq!(merge_ranges(vec![(0, 100), (20, 10)]), vec![(0, 100)]);
        assert_eq!(
            merge_ranges(vec![(usize::MAX - 1, 10)]),
            vec![(usize::MAX - 1, 10)]
        );
        assert!(merge_ranges(Vec::new()).is_empty());
    }
}
