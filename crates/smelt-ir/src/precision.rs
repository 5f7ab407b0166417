//! Which precision a plan computes in, node by node: the policy the precision pass applies
//! (here, not in the pass crate, so that a runtime built without the compiler still carries
//! it in its options).

use crate::DType;
use serde::{Deserialize, Serialize};

/// A plan's precision: how weights (and, later, activations) are stored. Products always
/// accumulate in f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Precision {
    /// Everything in f32 (the model as given).
    #[default]
    F32,
    /// Weights stored as bfloat16 (8 exponent bits: f32's range, 8 significant bits).
    Bf16,
    /// Weights stored as IEEE half (5 exponent bits, 11 significant bits; largest 65504).
    F16,
    /// Dynamic int8: MatMul and Gemm weights stored as int8 (per output column), their
    /// activations quantized to u8 at run time from each run's range; products on the
    /// integer kernels (i32 sums). Other ops keep f32.
    Int8,
}

impl Precision {
    /// Every precision, widest first.
    pub const ALL: [Precision; 4] = [
        Precision::F32,
        Precision::Bf16,
        Precision::F16,
        Precision::Int8,
    ];

    /// The name the command line uses: fp32, bf16, fp16 or int8.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "fp32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "fp16",
            Precision::Int8 => "int8",
        }
    }

    /// The precision a name gives (`fp32`/`f32`, `bf16`, `fp16`/`f16`), or None.
    pub fn from_name(s: &str) -> Option<Precision> {
        match s.to_ascii_lowercase().as_str() {
            "fp32" | "f32" | "float32" => Some(Precision::F32),
            "bf16" | "bfloat16" => Some(Precision::Bf16),
            "fp16" | "f16" | "float16" | "half" => Some(Precision::F16),
            "int8" | "i8" => Some(Precision::Int8),
            _ => None,
        }
    }

    /// The element type weights are stored in.
    pub fn dtype(self) -> DType {
        match self {
            Precision::F32 => DType::F32,
            Precision::Bf16 => DType::BF16,
            Precision::F16 => DType::F16,
            Precision::Int8 => DType::I8,
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The ops whose weights a lower precision narrows by default: the products and embedding
/// lookups (Gather from a constant table), where weights are most of a model's bytes.
/// Normalizations, softmax and reductions are not among them and keep f32.
pub const DEFAULT_NARROWED_OPS: [&str; 5] = ["MatMul", "Gemm", "Conv", "ConvBlocked", "Gather"];

/// What the precision pass does: a precision for the plan, the ops it applies to, and
/// per-node overrides by name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PrecisionPolicy {
    /// The plan's precision (F32: the pass does nothing but per-node overrides).
    pub precision: Precision,
    /// The ops it applies to, by name (None: [`DEFAULT_NARROWED_OPS`]). Ops not listed
    /// keep f32.
    pub ops: Option<Vec<String>>,
    /// Nodes (by name) given a precision of their own, whatever their op.
    pub nodes: Vec<(String, Precision)>,
}

impl PrecisionPolicy {
    /// The policy of one precision with the default op list.
    pub fn uniform(precision: Precision) -> Self {
        PrecisionPolicy {
            precision,
            ..Default::default()
        }
    }

    /// Whether the policy keeps everything in f32.
    pub fn is_f32(&self) -> bool {
        self.precision == Precision::F32 && self.nodes.iter().all(|(_, p)| *p == Precision::F32)
    }

    /// The precision of node `name` running op `op`.
    pub fn for_node(&self, name: &str, op: &str) -> Precision {
        if let Some((_, p)) = self.nodes.iter().rev().find(|(n, _)| n == name) {
            return *p;
        }
        let listed = match &self.ops {
            Some(ops) => ops.iter().any(|o| o == op),
            None => DEFAULT_NARROWED_OPS.contains(&op),
        };
        if listed {
            self.precision
        } else {
            Precision::F32
        }
    }

    /// A short description: `bf16`, or `bf16 (ops MatMul; 2 node overrides)`.
    pub fn describe(&self) -> String {
        let mut extra = Vec::new();
        if let Some(ops) = &self.ops {
            extra.push(format!("ops {}", ops.join(",")));
        }
        if !self.nodes.is_empty() {
            extra.push(format!("{} node overrides", self.nodes.len()));
        }
        if extra.is_empty() {
            self.precision.name().to_string()
        } else {
            format!("{} ({})", self.precision, extra.join("; "))
        }
    }
}

/// Symmetric integer weights (zero point 0): one scale per index of `axis` when
/// `per_channel` (else one), `max |w| / qmax` (1 for an all-zero or non-finite channel),
/// and each value `round_half_even(w / scale)` clamped to `[-qmax, qmax]`. Returns (scales,
/// values).
pub fn quantize_symmetric(
    w: &[f32],
    dims: &[usize],
    axis: usize,
    per_channel: bool,
    qmax: f32,
) -> (Vec<f32>, Vec<i32>) {
    let channels = if per_channel { dims[axis] } else { 1 };
    let inner: usize = dims[axis + 1..].iter().product();
    let chan = |i: usize| {
        if per_channel {
            (i / inner) % dims[axis]
        } else {
            0
        }
    };
    let mut amax = vec![0f32; channels];
    for (i, &x) in w.iter().enumerate() {
        amax[chan(i)] = amax[chan(i)].max(x.abs());
    }
    let scales: Vec<f32> = amax
        .iter()
        .map(|&a| {
            if a > 0.0 && a.is_finite() {
                a / qmax
            } else {
                1.0
            }
        })
        .collect();
    let q = w
        .iter()
        .enumerate()
        .map(|(i, &x)| (x / scales[chan(i)]).round_ties_even().clamp(-qmax, qmax) as i32)
        .collect();
    (scales, q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_nodes_override_ops() {
        for p in Precision::ALL {
            assert_eq!(Precision::from_name(p.name()), Some(p));
        }
        assert_eq!(Precision::from_name("int3"), None);
        let mut pol = PrecisionPolicy::uniform(Precision::Bf16);
        assert_eq!(pol.for_node("fc", "MatMul"), Precision::Bf16);
        assert_eq!(pol.for_node("ln", "LayerNormalization"), Precision::F32);
        pol.nodes.push(("fc".into(), Precision::F32));
        pol.nodes.push(("ln".into(), Precision::F16));
        assert_eq!(pol.for_node("fc", "MatMul"), Precision::F32);
        assert_eq!(pol.for_node("ln", "LayerNormalization"), Precision::F16);
        pol.ops = Some(vec!["Conv".into()]);
        assert_eq!(pol.for_node("other", "MatMul"), Precision::F32);
        assert!(!pol.is_f32());
        assert!(PrecisionPolicy::default().is_f32());
    }
}
