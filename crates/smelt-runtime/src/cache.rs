//! Plans cached by input shapes (the guards), with a bounded log of compilations and why,
//! and the compilations in progress (so that two runs at one new shape compile it once).

use crate::plan::Plan;
use crate::InputShapes;
use smelt_ir::Result;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};

/// The input shapes a plan is specialized to: every tensor input, in graph order.
pub type ShapeKey = InputShapes;

/// How many compilations the log keeps (the most recent); the count covers all of them.
pub const LOG_LEN: usize = 256;

/// How many evicted keys are remembered, to explain a recompilation.
const EVICTED_LEN: usize = 256;

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
    /// The most recent compilations, oldest first, at most [`LOG_LEN`].
    pub(crate) log: VecDeque<Recompile>,
    /// Compilations since the session began (the log may have dropped some).
    pub(crate) compiled: usize,
    pub(crate) last: Option<ShapeKey>,
    /// Compilations under way, by key: a run at the same key waits for it.
    pub(crate) compiling: HashMap<ShapeKey, Arc<Pending>>,
    /// Keys from least to most recently used.
    order: Vec<ShapeKey>,
    /// Keys evicted to respect the bound, the most recent [`EVICTED_LEN`].
    evicted: VecDeque<ShapeKey>,
}

/// A compilation under way: its result once done, and the runs waiting for it.
#[derive(Default)]
pub(crate) struct Pending {
    result: Mutex<Option<Result<Arc<Plan>>>>,
    done: Condvar,
}

impl Pending {
    /// Publishes the result and wakes the waiters.
    pub(crate) fn finish(&self, r: Result<Arc<Plan>>) {
        if let Ok(mut g) = self.result.lock() {
            *g = Some(r);
        }
        self.done.notify_all();
    }

    /// Waits for the result.
    pub(crate) fn wait(&self) -> Result<Arc<Plan>> {
        let lost = || smelt_ir::err!(Internal, "a compilation panicked in another thread");
        let mut g = self.result.lock().map_err(|_| lost())?;
        loop {
            if let Some(r) = g.as_ref() {
                return r.clone();
            }
            g = self.done.wait(g).map_err(|_| lost())?;
        }
    }
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

    /// Whether a plan for `key` is cached (its use order unchanged).
    pub(crate) fn contains(&self, key: &ShapeKey) -> bool {
        self.plans.contains_key(key)
    }

    /// Adds a compiled plan, evicting the least recently used beyond `max` plans.
    pub(crate) fn insert(&mut self, key: ShapeKey, plan: Arc<Plan>, reason: String, max: usize) {
        while self.plans.len() >= max.max(1) && !self.order.is_empty() {
            let old = self.order.remove(0);
            self.plans.remove(&old);
            if self.evicted.len() >= EVICTED_LEN {
                self.evicted.pop_front();
            }
            self.evicted.push_back(old);
        }
        self.evicted.retain(|k| k != &key);
        self.plans.insert(key.clone(), plan);
        self.touch(&key);
        self.record(key.clone(), reason);
        self.last = Some(key);
    }

    /// Logs a compilation, dropping the oldest entry beyond [`LOG_LEN`].
    fn record(&mut self, shapes: ShapeKey, reason: String) {
        if self.log.len() >= LOG_LEN {
            self.log.pop_front();
        }
        self.log.push_back(Recompile { shapes, reason });
        self.compiled += 1;
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
