//! Plans cached by input shapes (the guards), with a log of every compilation and why.

use crate::plan::Plan;
use crate::InputShapes;
use std::collections::HashMap;
use std::sync::Arc;

/// The input shapes a plan is specialized to: every tensor input, in graph order.
pub type ShapeKey = InputShapes;

/// One compilation and its cause.
#[derive(Debug, Clone)]
pub struct Recompile {
    /// The input shapes compiled for.
    pub shapes: ShapeKey,
    /// Why: first compile, or which input's shape missed the cache.
    pub reason: String,
}

/// Plans by shape key, at most a given number (the least recently used goes first).
#[derive(Default)]
pub struct PlanCache {
    pub(crate) plans: HashMap<ShapeKey, Arc<Plan>>,
    pub(crate) log: Vec<Recompile>,
    pub(crate) last: Option<ShapeKey>,
    /// Keys from least to most recently used.
    order: Vec<ShapeKey>,
    /// Keys evicted to respect the bound.
    evicted: Vec<ShapeKey>,
}

/// `[1,3,224,224]`
pub fn format_dims(d: &[usize]) -> String {
    format!(
        "[{}]",
        d.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

impl PlanCache {
    /// The plan for `key`, marking it most recently used.
    pub(crate) fn get(&mut self, key: &ShapeKey) -> Option<Arc<Plan>> {
        let p = self.plans.get(key)?.clone();
        self.touch(key);
        self.last = Some(key.clone());
        Some(p)
    }

    /// Adds a compiled plan, evicting the least recently used beyond `max` plans.
    pub(crate) fn insert(&mut self, key: ShapeKey, plan: Arc<Plan>, reason: String, max: usize) {
        while self.plans.len() >= max.max(1) && !self.order.is_empty() {
            let old = self.order.remove(0);
            self.plans.remove(&old);
            self.evicted.push(old);
        }
        self.plans.insert(key.clone(), plan);
        self.touch(&key);
        self.log.push(Recompile {
            shapes: key.clone(),
            reason,
        });
        self.last = Some(key);
    }

    fn touch(&mut self, key: &ShapeKey) {
        self.order.retain(|k| k != key);
        self.order.push(key.clone());
    }

    /// Why `key` needs a compilation, given what is cached.
    pub(crate) fn miss_reason(&self, key: &ShapeKey) -> String {
        if self.evicted.contains(key) {
            return "its plan was evicted (the cache holds at most max_plans)".into();
        }
        let Some(last) = &self.last else {
            return "first compilation".into();
        };
        for ((name, dims), (_, old)) in key.iter().zip(last.iter()) {
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
