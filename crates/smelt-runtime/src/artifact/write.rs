//! Writing a compiled plan as an artifact: the manifest, then every weight at an aligned
//! offset of the weights section.

use super::format::{
    self, align_up, BucketPlan, IoSpec, Manifest, PackEntry, WeightEntry, SMALL_WEIGHT_BYTES,
    WEIGHT_ALIGN,
};
use crate::{Plan, Session};
use smelt_ir::kernel::BufferKind;
use smelt_ir::{bail, err, pod_bytes, Data, Result, Tensor};

/// What `smelt compile` records besides the plan.
#[derive(Debug, Clone, Default)]
pub struct CompileInfo {
    /// The target CPU level asked for (`x86-64-v3`, `x86-64-v4`, `native`).
    pub target: String,
    /// Whether the plan was compiled with `--deterministic`.
    pub deterministic: bool,
    /// Per input, the smallest table it indexes (see [`IoSpec::index_limit`]).
    pub index_limits: std::collections::HashMap<String, i64>,
    /// The preset asked for (`edge`, `datacenter`), if any.
    pub preset: Option<String>,
    /// What the preset and the memory budget decided, a line each.
    pub decisions: Vec<String>,
    /// The most threads a run of the artifact may use.
    pub max_threads: Option<usize>,
    /// The memory budget checked at compile time, bytes.
    pub max_memory: Option<u64>,
    /// What autotuning decided, per plan in the order given to the writer.
    pub tuning: Vec<crate::tune::TuneRecord>,
}

/// The bytes of one weight as the loader maps them (bools as one byte each).
fn weight_bytes(t: &Tensor) -> Result<std::borrow::Cow<'_, [u8]>> {
    use std::borrow::Cow;
    Ok(match t.data() {
        Data::F32(v) => Cow::Borrowed(pod_bytes(v)),
        Data::F64(v) => Cow::Borrowed(pod_bytes(v)),
        Data::F16(v) => Cow::Borrowed(pod_bytes(v)),
        Data::BF16(v) => Cow::Borrowed(pod_bytes(v)),
        Data::I8(v) => Cow::Borrowed(pod_bytes(v)),
        Data::I16(v) => Cow::Borrowed(pod_bytes(v)),
        Data::I32(v) => Cow::Borrowed(pod_bytes(v)),
        Data::I64(v) => Cow::Borrowed(pod_bytes(v)),
        Data::U8(v) => Cow::Borrowed(pod_bytes(v)),
        Data::U16(v) => Cow::Borrowed(pod_bytes(v)),
        Data::U32(v) => Cow::Borrowed(pod_bytes(v)),
        Data::U64(v) => Cow::Borrowed(pod_bytes(v)),
        Data::C64(v) => Cow::Borrowed(pod_bytes(v)),
        Data::C128(v) => Cow::Borrowed(pod_bytes(v)),
        Data::Bool(v) => Cow::Owned(v.iter().map(|&b| b as u8).collect()),
        Data::Str(_) => bail!(
            Unsupported,
            "string weights cannot be stored in an artifact"
        ),
    })
}

/// The artifact of `plan`, one of `session`'s plans. Only plans lowered to kernels can be
/// stored (the reference executor needs the whole graph).
pub fn encode(session: &Session, plan: &Plan, info: &CompileInfo) -> Result<Vec<u8>> {
    encode_buckets(session, &[plan], info)
}

/// The artifact of several plans of `session` for different batch sizes (dim 0 of every
/// input and output), the largest first: a run takes the smallest that holds its batch.
/// Their weights are stored once where they are equal.
pub fn encode_buckets(session: &Session, plans: &[&Plan], info: &CompileInfo) -> Result<Vec<u8>> {
    let Some((first, rest)) = plans.split_first() else {
        bail!(Internal, "an artifact of no plan");
    };
    let mut section = Section::default();
    let (isa, mut main, main_large) = encode_plan(session, first, info, &mut section)?;
    let mut buckets = Vec::with_capacity(rest.len());
    let mut large = Vec::with_capacity(rest.len());
    for p in rest {
        let (_, b, l) = encode_plan(session, p, info, &mut section)?;
        buckets.push(b);
        large.push(l);
    }
    // The large weights after every plan's small weights and packs (see `encode_plan`).
    place_large(first, &main_large, &mut main, &mut section)?;
    for ((p, l), b) in rest.iter().zip(&large).zip(&mut buckets) {
        place_large(p, l, b, &mut section)?;
    }
    check_batched(&main, &buckets)?;
    let manifest = Manifest {
        producer: format!("smelt {}", env!("CARGO_PKG_VERSION")),
        target: info.target.clone(),
        isa,
        deterministic: info.deterministic,
        inputs: main.inputs,
        outputs: main.outputs,
        plan: main.plan,
        weights: main.weights,
        kernels: main.kernels,
        packed: main.packed,
        preset: info.preset.clone(),
        decisions: info.decisions.clone(),
        max_threads: info.max_threads,
        max_memory: info.max_memory,
        buckets,
        tuning: info.tuning.clone(),
    };
    let json = serde_json::to_vec(&manifest)
        .map_err(|e| err!(Internal, "cannot encode the artifact manifest: {e}"))?;
    format::encode(&json, &section.bytes)
}

/// Rewrites an artifact's manifest, its weights section unchanged (to record what was
/// measured on the written artifact).
pub fn amend(bytes: &[u8], f: impl FnOnce(&mut Manifest)) -> Result<Vec<u8>> {
    let header = format::Header::parse(bytes)?;
    let mut m = Manifest::parse(header.manifest(bytes))?;
    f(&mut m);
    let json = serde_json::to_vec(&m)
        .map_err(|e| err!(Internal, "cannot encode the artifact manifest: {e}"))?;
    let weights = &bytes[header.weights_offset..header.weights_offset + header.weights_len];
    format::encode(&json, weights)
}

/// Every bucket's inputs and outputs have a batch (dim 0) and differ from the plan
/// before's in it alone, each bucket smaller than the one before.
fn check_batched(main: &BucketPlan, buckets: &[BucketPlan]) -> Result<()> {
    let mut prev = main;
    for b in buckets {
        let (m, n) = (prev.batch, b.batch);
        let same_but_batch = |x: &[IoSpec], y: &[IoSpec]| {
            x.len() == y.len()
                && x.iter().zip(y).all(|(x, y)| {
                    x.name == y.name
                        && x.dtype == y.dtype
                        && x.shape.len() == y.shape.len()
                        && x.shape.first() == Some(&m)
                        && y.shape.first() == Some(&n)
                        && x.shape[1..] == y.shape[1..]
                })
        };
        if n == 0 || n >= m || !same_but_batch(&prev.inputs, &b.inputs) {
            bail!(
                Unsupported,
                "batch buckets need every input batched in dim 0 alone (the plans for batch {m} and {n} differ elsewhere)"
            );
        }
        if !same_but_batch(&prev.outputs, &b.outputs) {
            bail!(
                Unsupported,
                "batch buckets need every output batched in dim 0 (an output of the plan for batch {n} is not that of batch {m} with another dim 0)"
            );
        }
        prev = b;
    }
    Ok(())
}

/// The weights section being written: each distinct content once, at an aligned offset.
#[derive(Default)]
struct Section {
    bytes: Vec<u8>,
    /// Offsets of the contents stored so far, by checksum and length.
    stored: std::collections::HashMap<(u32, usize), Vec<usize>>,
}

impl Section {
    /// The offset of `data` in the section, appending it unless equal content is there.
    fn put(&mut self, data: &[u8]) -> Result<usize> {
        let key = (crc32fast::hash(data), data.len());
        let bytes = &self.bytes;
        let found = self.stored.get(&key).and_then(|offsets| {
            offsets
                .iter()
                .copied()
                .find(|&at| &bytes[at..at + data.len()] == data)
        });
        if let Some(at) = found {
            return Ok(at);
        }
        let at = align_up(self.bytes.len()).ok_or_else(|| err!(ResourceExhausted, "too large"))?;
        self.bytes.resize(at, 0u8);
        self.bytes.extend_from_slice(data);
        self.stored.entry(key).or_default().push(at);
        Ok(at)
    }
}

/// Stores weights `large` of `plan` (the ones `encode_plan` left out) in `section`, and
/// their offsets in `encoded`.
fn place_large(
    plan: &Plan,
    large: &[usize],
    encoded: &mut BucketPlan,
    section: &mut Section,
) -> Result<()> {
    for &i in large {
        let t = plan
            .weight(i)
            .ok_or_else(|| err!(Internal, "weight {i} of a plan went missing"))?;
        let at = section.put(&weight_bytes(t)?)?;
        debug_assert!(at.is_multiple_of(WEIGHT_ALIGN));
        let entry = encoded
            .weights
            .get_mut(i)
            .ok_or_else(|| err!(Internal, "weight {i} has no entry"))?;
        entry.offset = at;
    }
    Ok(())
}

/// Stores one plan's small weights and packed weights in `section` and describes the
/// plan; returns the large weights' numbers too, for the caller to store after every
/// plan's small weights and packs (their entries' offsets are placeholders until then).
fn encode_plan(
    session: &Session,
    plan: &Plan,
    info: &CompileInfo,
    section: &mut Section,
) -> Result<(String, BucketPlan, Vec<usize>)> {
    if plan.segments().is_some() {
        bail!(
            Unsupported,
            "part of the model is planned at run time (by the shapes and contents it gets); \
             artifacts hold whole kernel plans only"
        );
    }
    let Some(kp) = plan.kernels() else {
        bail!(
            Unsupported,
            "the model runs on the reference executor ({}); artifacts hold kernel plans only",
            plan.fallback_reason().unwrap_or("no kernel plan")
        )
    };
    let (_, isa) = plan
        .cpu_setup()
        .ok_or_else(|| err!(Internal, "a kernel plan without a CPU setup"))?;
    let tensors: Vec<&Tensor> = (0..).map_while(|i| plan.weight(i)).collect();
    // What a run reads, side by side: the small weights (biases, scales, shapes: what
    // kernels read besides the packs), then the packs; the large weights, which only a
    // loader that packs again reads, after them. The kernel maps a file's pages in folios
    // of up to 2 MiB, so a large weight beside what runs read is mapped (and counted in
    // the process's memory) too: YOLOv8n's artifact with the large weights between the
    // small ones and the packs mapped 3.2 MB of them.
    let small = |i: &usize| tensors[*i].nbytes() < SMALL_WEIGHT_BYTES;
    let mut offsets = vec![0; tensors.len()];
    for i in (0..tensors.len()).filter(small) {
        offsets[i] = section.put(&weight_bytes(tensors[i])?)?;
    }
    // The kernels' packed weights: the plan built again as a loader builds it, recording
    // what it packs, stored for the loader to map instead of packing.
    let (threads, _) = plan.cpu_setup().unwrap_or((1, isa));
    let options = smelt_cpu::fused::CpuOptions {
        threads,
        isa: Some(isa),
    };
    let full = smelt_ir::kernel::KernelPlan {
        weights: tensors.iter().map(|t| (*t).clone()).collect(),
        ..kp.clone()
    };
    let (built, recorded) =
        smelt_kernels::prepack::record(|| smelt_cpu::fused::CpuPlan::with_options(full, options));
    built?;
    let mut packed = Vec::with_capacity(recorded.len());
    for r in &recorded {
        packed.push(PackEntry {
            key: r.key.clone(),
            offset: section.put(pod_bytes(r.floats.as_slice()))?,
            floats: r.floats.len(),
        });
    }
    let large: Vec<usize> = (0..tensors.len()).filter(|i| !small(i)).collect();
    let entries: Vec<WeightEntry> = tensors
        .iter()
        .zip(&offsets)
        .map(|(t, &offset)| WeightEntry {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            offset,
        })
        .collect();

    let g = &session.model().graph;
    let io = |name: &str, kind: BufferKind| -> Result<IoSpec> {
        let b = kp.buffers.iter().find(|b| b.kind == kind).ok_or_else(|| {
            err!(
                Unsupported,
                "graph value '{name}' has no buffer in the plan"
            )
        })?;
        let default = g
            .inputs
            .iter()
            .find(|i| g.name_of(i.id) == name)
            .and_then(|i| i.default.clone());
        Ok(IoSpec {
            name: name.to_string(),
            dtype: b.dtype,
            shape: b.shape.clone(),
            default: default.filter(|_| matches!(kind, BufferKind::Input(_))),
            index_limit: info.index_limits.get(name).copied(),
        })
    };
    let inputs = kp
        .inputs
        .iter()
        .enumerate()
        .map(|(i, n)| io(n, BufferKind::Input(i)))
        .collect::<Result<Vec<_>>>()?;
    let outputs = kp
        .outputs
        .iter()
        .map(|(n, id)| {
            let b = kp.buffer(*id);
            Ok(IoSpec {
                name: n.clone(),
                dtype: b.dtype,
                shape: b.shape.clone(),
                default: None,
                index_limit: None,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let encoded = BucketPlan {
        batch: format::leading_dim(&inputs),
        inputs,
        outputs,
        plan: kp.clone(),
        weights: entries,
        kernels: plan.kernel_names().to_vec(),
        packed,
    };
    Ok((isa.name().to_string(), encoded, large))
}
