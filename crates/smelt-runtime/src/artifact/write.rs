//! Writing a compiled plan as an artifact: the manifest, then every weight at an aligned
//! offset of the weights section.

use super::format::{self, align_up, IoSpec, Manifest, PackEntry, WeightEntry, WEIGHT_ALIGN};
use crate::{Plan, Session};
use smelt_ir::kernel::BufferKind;
use smelt_ir::{bail, err, pod_bytes, Data, Result, Tensor};

/// Weights under this many bytes are laid out first, together (see `encode`).
const SMALL_WEIGHT_BYTES: usize = 64 << 10;

/// What `smelt compile` records besides the plan.
#[derive(Debug, Clone)]
pub struct CompileInfo {
    /// The target CPU level asked for (`x86-64-v3`, `x86-64-v4`, `native`).
    pub target: String,
    /// Whether the plan was compiled with `--deterministic`.
    pub deterministic: bool,
    /// Per input, the smallest table it indexes (see [`IoSpec::index_limit`]).
    pub index_limits: std::collections::HashMap<String, i64>,
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
    // Small weights (biases, scales, shapes: what kernels read at run time besides the
    // packs) first and together, large ones after: the kernel maps a file's pages in
    // folios of up to 2 MiB, so a bias between two large matrices would map them too,
    // though only their packed copies are read.
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| tensors[i].nbytes() >= SMALL_WEIGHT_BYTES);
    let mut weights = Vec::new();
    let mut offsets = vec![0; tensors.len()];
    for &i in &order {
        let at = align_up(weights.len()).ok_or_else(|| err!(ResourceExhausted, "too large"))?;
        weights.resize(at, 0u8);
        weights.extend_from_slice(&weight_bytes(tensors[i])?);
        offsets[i] = at;
    }
    let entries: Vec<WeightEntry> = tensors
        .iter()
        .zip(&offsets)
        .map(|(t, &offset)| WeightEntry {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            offset,
        })
        .collect();
    debug_assert!(entries
        .iter()
        .all(|e| e.offset.is_multiple_of(WEIGHT_ALIGN)));
    // The kernels' packed weights: the plan built again as a loader builds it, recording
    // what it packs, stored after the weights for the loader to map instead of packing.
    let (threads, _) = plan.cpu_setup().unwrap_or((1, isa));
    let options = smelt_cpu::fused::CpuOptions {
        threads,
        isa: Some(isa),
    };
    let full = smelt_ir::kernel::KernelPlan {
        weights: (0..entries.len())
            .filter_map(|i| plan.weight(i).cloned())
            .collect(),
        ..kp.clone()
    };
    let (built, recorded) =
        smelt_kernels::prepack::record(|| smelt_cpu::fused::CpuPlan::with_options(full, options));
    built?;
    let mut packed = Vec::with_capacity(recorded.len());
    for r in &recorded {
        let at = align_up(weights.len()).ok_or_else(|| err!(ResourceExhausted, "too large"))?;
        weights.resize(at, 0u8);
        weights.extend_from_slice(pod_bytes(r.floats.as_slice()));
        packed.push(PackEntry {
            key: r.key.clone(),
            offset: at,
            floats: r.floats.len(),
        });
    }
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
    let manifest = Manifest {
        producer: format!("smelt {}", env!("CARGO_PKG_VERSION")),
        target: info.target.clone(),
        isa: isa.name().to_string(),
        deterministic: info.deterministic,
        inputs,
        outputs,
        plan: kp.clone(),
        weights: entries,
        kernels: plan.kernel_names().to_vec(),
        packed,
    };
    let json = serde_json::to_vec(&manifest)
        .map_err(|e| err!(Internal, "cannot encode the artifact manifest: {e}"))?;
    format::encode(&json, &weights)
}
