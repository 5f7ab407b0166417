//! What an artifact holds in memory while it runs, for `--max-memory`: its weights
//! section (weights and packed weights, distinct contents once; an upper bound, since the
//! pages of weights only their packed copies are read go back after load) plus each
//! plan's arena and outputs.

use super::format::{BucketPlan, Header, Manifest};
use smelt_ir::kernel::BufferKind;
use smelt_ir::{bail, Result};

/// An artifact's memory, by part, with the largest items of each.
#[derive(Debug, Clone)]
pub struct Footprint {
    /// Bytes of the weights section (weights and packed weights).
    pub weights_section: usize,
    /// Bytes of the arenas of all plans (one per batch bucket).
    pub arenas: usize,
    /// Bytes of the outputs a run allocates (the largest plan's).
    pub outputs: usize,
    /// The largest weights and packed weights, (name, bytes), largest first.
    pub largest_weights: Vec<(String, usize)>,
    /// The largest intermediate buffers of the arena, (value name, bytes), largest first.
    pub largest_intermediates: Vec<(String, usize)>,
}

impl Footprint {
    /// The footprint of an artifact's bytes.
    pub fn of(bytes: &[u8]) -> Result<Footprint> {
        let header = Header::parse(bytes)?;
        let m = Manifest::parse(header.manifest(bytes))?;
        let mut weights = Vec::new();
        let mut inter = Vec::new();
        let (mut arenas, mut outputs) = (0usize, 0usize);
        let main = [(&m.plan, &m.packed)];
        let plans = main
            .into_iter()
            .chain(m.buckets.iter().map(|b: &BucketPlan| (&b.plan, &b.packed)));
        for (k, (plan, packed)) in plans.enumerate() {
            arenas = arenas.saturating_add(plan.memory.arena_bytes);
            let outs: usize = plan
                .buffers
                .iter()
                .filter(|b| matches!(b.kind, BufferKind::Output(_)))
                .map(|b| b.bytes())
                .sum();
            outputs = outputs.max(outs);
            if k > 0 {
                continue;
            }
            for b in &plan.buffers {
                match b.kind {
                    BufferKind::Weight(_) => {
                        weights.push((format!("weight '{}'", b.name), b.bytes()))
                    }
                    BufferKind::Arena { .. } => inter.push((format!("'{}'", b.name), b.bytes())),
                    _ => {}
                }
            }
            for p in packed {
                weights.push((format!("packed {}", p.key), p.floats.saturating_mul(4)));
            }
        }
        let top = |mut v: Vec<(String, usize)>| {
            v.sort_by_key(|w| std::cmp::Reverse(w.1));
            v.truncate(3);
            v
        };
        Ok(Footprint {
            weights_section: header.weights_len,
            arenas,
            outputs,
            largest_weights: top(weights),
            largest_intermediates: top(inter),
        })
    }

    /// All parts together.
    pub fn total(&self) -> usize {
        self.weights_section
            .saturating_add(self.arenas)
            .saturating_add(self.outputs)
    }

    /// Fails, naming the parts and their largest items, when the total exceeds `max`.
    pub fn check(&self, max: u64) -> Result<()> {
        if self.total() as u64 <= max {
            return Ok(());
        }
        let list = |v: &[(String, usize)]| {
            v.iter()
                .map(|(n, b)| format!("{n} {}", mib(*b)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        bail!(
            ResourceExhausted,
            "--max-memory {}: the compiled model needs {}, which does not fit: weights and packed weights {} (largest: {}), arena {} (largest intermediates: {}), outputs {}",
            mib(max as usize),
            mib(self.total()),
            mib(self.weights_section),
            list(&self.largest_weights),
            mib(self.arenas),
            list(&self.largest_intermediates),
            mib(self.outputs)
        )
    }
}

/// Bytes in MiB, for messages.
pub fn mib(b: usize) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}
