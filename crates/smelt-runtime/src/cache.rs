//! Plans cached by input shapes (the guards), with a log of every compilation and why.

use crate::plan::Plan;
use std::collections::HashMap;
use std::sync::Arc;

/// The input shapes a plan is specialized to, by input name (inputs in graph order).
pub type ShapeKey = Vec<(String, Vec<u64>)>;

/// One compilation and its cause.
#[derive(Debug, Clone)]
pub struct Recompile {
    /// The input shapes compiled for.
    pub shapes: ShapeKey,
    /// Why: first compile, or which input's shape missed the cache.
    pub reason: String,
}

/// Plans by shape key.
#[derive(Default)]
pub struct PlanCache {
    pub(crate) plans: HashMap<ShapeKey, Arc<Plan>>,
    pub(crate) log: Vec<Recompile>,
    pub(crate) last: Option<ShapeKey>,
}

/// `[1,3,224,224]`
pub fn format_dims(d: &[u64]) -> String {
    format!(
        "[{}]",
        d.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

impl PlanCache {
    /// Why `key` needs a compilation, given what is cached.
    pub(crate) fn miss_reason(&self, key: &ShapeKey) -> String {
        let Some(last) = &self.last else {
            return "first compilation".into();
        };
        for ((name, dims), (_, old)) in key.iter().zip(last) {
            if dims != old {
                return format!(
                    "input '{name}' has shape {}; the last plan was for {} ({} plan(s) cached)",
                    format_dims(dims),
                    format_dims(old),
                    self.plans.len()
                );
            }
        }
        "new input shapes".into()
    }
}
