//! What one model and one run may use: the largest tensor, the bytes a run may hold, the
//! node count, the subgraph nesting depth, and a deadline with a cancel handle.
//!
//! A [`RunControl`] carries one run's limits, deadline and cancel token; the executors
//! check it between nodes (and loop iterations) and between kernel groups. Allocations
//! sized by a model or an input check [`check_alloc`] first: it reads the control the
//! running thread entered with [`RunControl::enter`], or the process's default limits.
//! Memory defaults come from what the process may really use: the least of physical
//! memory, the address-space limit (RLIMIT_AS) and the cgroup's memory limit.

use crate::{err, DType, Result};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Limits on one model and its runs. Exceeding one is an error of kind ResourceExhausted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes one tensor may hold.
    pub max_tensor_bytes: u64,
    /// The most bytes one run may hold at once: its inputs, every value it has computed and
    /// not yet freed, and (fused plans) its arena and outputs.
    pub max_run_bytes: u64,
    /// The most nodes a model may have, subgraphs included.
    pub max_nodes: usize,
    /// The deepest subgraph nesting a model may have (a graph inside an If inside a Loop
    /// is at depth 2).
    pub max_nesting: usize,
    /// How long one run may take (None: no limit); a run past it stops with
    /// DeadlineExceeded.
    pub timeout: Option<Duration>,
}

/// The default node limit: far above any real model, far below what exhausts memory.
pub const DEFAULT_MAX_NODES: usize = 1 << 20;
/// The default nesting limit: deep enough for any real model (and at least 30).
pub const DEFAULT_MAX_NESTING: usize = 32;

impl Default for Limits {
    /// Limits from the memory this process may use ([`available_memory`]): a quarter of it
    /// for one tensor, three quarters for one run.
    fn default() -> Self {
        Limits::for_memory(available_memory().bytes)
    }
}

impl Limits {
    /// The default limits for a process that may use `bytes` of memory.
    pub fn for_memory(bytes: u64) -> Limits {
        Limits {
            max_tensor_bytes: bytes / 4,
            max_run_bytes: bytes / 4 * 3,
            max_nodes: DEFAULT_MAX_NODES,
            max_nesting: DEFAULT_MAX_NESTING,
            timeout: None,
        }
    }

    /// The process's default limits, measured once.
    pub fn process_default() -> &'static Limits {
        static D: OnceLock<Limits> = OnceLock::new();
        D.get_or_init(Limits::default)
    }

    /// An error unless a graph of `nodes` nodes nesting `depth` deep fits.
    pub fn check_graph_size(&self, nodes: usize, depth: usize) -> Result<()> {
        if nodes > self.max_nodes {
            return Err(err!(
                ResourceExhausted,
                "the model has {nodes} nodes, over the limit of {}",
                self.max_nodes
            ));
        }
        if depth > self.max_nesting {
            return Err(err!(
                ResourceExhausted,
                "subgraphs nest {depth} deep, over the limit of {}",
                self.max_nesting
            ));
        }
        Ok(())
    }
}

/// The memory this process may use, and which bound set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// Bytes.
    pub bytes: u64,
    /// What set it: "physical memory", "RLIMIT_AS", "cgroup memory.max" or "unknown".
    pub source: &'static str,
}

/// The least of physical memory, RLIMIT_AS and the cgroup's memory limit (measured once;
/// 8 GiB when none can be read).
pub fn available_memory() -> Memory {
    static M: OnceLock<Memory> = OnceLock::new();
    *M.get_or_init(|| {
        let mut best = Memory {
            bytes: u64::MAX,
            source: "unknown",
        };
        for (bytes, source) in [
            (physical_memory(), "physical memory"),
            (rlimit_as(), "RLIMIT_AS"),
            (cgroup_limit(), "cgroup memory.max"),
        ] {
            if let Some(b) = bytes.filter(|&b| b < best.bytes) {
                best = Memory { bytes: b, source };
            }
        }
        if best.bytes == u64::MAX {
            best.bytes = 8 << 30;
        }
        best
    })
}

fn physical_memory() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// The soft address-space limit, from /proc/self/limits (no libc needed).
fn rlimit_as() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = s.lines().find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The tightest memory limit of this process's cgroup and its ancestors (v2 memory.max,
/// or v1 memory.limit_in_bytes).
fn cgroup_limit() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut best: Option<u64> = None;
    let mut note = |v: Option<u64>| {
        if let Some(v) = v {
            best = Some(best.map_or(v, |b| b.min(v)));
        }
    };
    for line in s.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let (root, file) = match controllers {
            "" => ("/sys/fs/cgroup", "memory.max"),
            c if c.split(',').any(|c| c == "memory") => {
                ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
            }
            _ => continue,
        };
        let mut dir = std::path::PathBuf::from(format!("{root}{path}"));
        loop {
            let v = std::fs::read_to_string(dir.join(file))
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                // cgroup v1 says "no limit" with a huge page-rounded number.
                .filter(|&v| v < (1 << 60));
            note(v);
            if dir.as_os_str().len() <= root.len() || !dir.pop() {
                break;
            }
        }
    }
    best
}

/// A handle that cancels runs: cheap to clone, and every clone cancels the same runs.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A new token, not cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancels every run watching this token (they stop at their next check).
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether `cancel` was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// One run's limits, deadline and cancel token, and the bytes it holds.
#[derive(Debug)]
pub struct RunControl {
    limits: Limits,
    deadline: Option<Instant>,
    cancel: Option<CancelToken>,
    live: AtomicU64,
}

impl Default for RunControl {
    fn default() -> Self {
        RunControl::new(Limits::process_default().clone(), None, None)
    }
}

impl RunControl {
    /// A control with these limits, stopping at `deadline` (or the limits' timeout from
    /// now, whichever is sooner) or when `cancel` is cancelled.
    pub fn new(limits: Limits, deadline: Option<Instant>, cancel: Option<CancelToken>) -> Self {
        let by_timeout = limits.timeout.and_then(|t| Instant::now().checked_add(t));
        let deadline = match (deadline, by_timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        RunControl {
            limits,
            deadline,
            cancel,
            live: AtomicU64::new(0),
        }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// When the run must stop, if ever.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// An error of kind Cancelled once the token is cancelled, DeadlineExceeded once the
    /// deadline has passed.
    pub fn check(&self) -> Result<()> {
        if self.cancel.as_ref().is_some_and(CancelToken::is_cancelled) {
            return Err(err!(Cancelled, "the run was cancelled"));
        }
        if let Some(d) = self.deadline {
            if Instant::now() >= d {
                return Err(match self.limits.timeout {
                    Some(t) => err!(
                        DeadlineExceeded,
                        "the run passed its deadline ({:.3} s)",
                        t.as_secs_f64()
                    ),
                    None => err!(DeadlineExceeded, "the run passed its deadline"),
                });
            }
        }
        Ok(())
    }

    /// Bytes the run holds now.
    pub fn live_bytes(&self) -> u64 {
        self.live.load(Ordering::Relaxed)
    }

    /// An error unless one more allocation of `bytes` fits: the tensor limit, and the run
    /// limit with what the run holds now.
    pub fn check_alloc(&self, bytes: u64, what: &dyn Fn() -> String) -> Result<()> {
        if bytes > self.limits.max_tensor_bytes {
            return Err(err!(
                ResourceExhausted,
                "{} needs {bytes} bytes, over the tensor limit of {}",
                what(),
                self.limits.max_tensor_bytes
            ));
        }
        let live = self.live_bytes();
        if live.saturating_add(bytes) > self.limits.max_run_bytes {
            return Err(err!(
                ResourceExhausted,
                "{} needs {bytes} bytes; with the {live} the run holds, over the run limit of {}",
                what(),
                self.limits.max_run_bytes
            ));
        }
        Ok(())
    }

    /// Counts `bytes` as held by the run; an error (and nothing counted) past the run limit.
    pub fn charge(&self, bytes: u64, what: &dyn Fn() -> String) -> Result<()> {
        let live = self
            .live
            .fetch_add(bytes, Ordering::Relaxed)
            .saturating_add(bytes);
        if live > self.limits.max_run_bytes {
            self.release(bytes);
            return Err(err!(
                ResourceExhausted,
                "{} makes the run hold {live} bytes, over the run limit of {}",
                what(),
                self.limits.max_run_bytes
            ));
        }
        Ok(())
    }

    /// Stops counting `bytes` (a value the run freed).
    pub fn release(&self, bytes: u64) {
        let _ = self
            .live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(bytes))
            });
    }

    /// Makes this the control that [`check_alloc`] reads on this thread until the guard
    /// drops (then the previous one is back).
    pub fn enter(self: &Arc<Self>) -> Entered {
        let prev = CURRENT.with(|c| c.replace(Some(self.clone())));
        Entered { prev }
    }

    /// The control this thread entered, if any.
    pub fn current() -> Option<Arc<RunControl>> {
        CURRENT.with(|c| c.borrow().clone())
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<RunControl>>> = const { RefCell::new(None) };
}

/// Checks the entered run's deadline and cancel token every [`WorkPacer::EVERY`] units of
/// work inside one long kernel, so a node whose work the model's sizes make huge stops
/// with the run instead of running to its end (a clock read per unit would cost more than
/// small units do).
pub struct WorkPacer {
    control: Option<Arc<RunControl>>,
    since: u64,
}

impl WorkPacer {
    /// Units of work between checks.
    pub const EVERY: u64 = 1 << 16;

    /// A pacer for the control this thread entered (none: it never stops the work).
    pub fn new() -> WorkPacer {
        WorkPacer {
            control: RunControl::current(),
            since: 0,
        }
    }

    /// Counts `units` of work done, checking the run when they reach [`Self::EVERY`].
    pub fn done(&mut self, units: u64) -> Result<()> {
        self.since = self.since.saturating_add(units);
        if self.since >= Self::EVERY {
            self.since = 0;
            if let Some(c) = &self.control {
                c.check()?;
            }
        }
        Ok(())
    }
}

impl Default for WorkPacer {
    fn default() -> Self {
        Self::new()
    }
}

/// While alive, [`RunControl::current`] is the control entered; see [`RunControl::enter`].
pub struct Entered {
    prev: Option<Arc<RunControl>>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let prev = self.prev.take();
        CURRENT.with(|c| *c.borrow_mut() = prev);
    }
}

/// An error unless an allocation of `bytes` fits the running thread's control (or the
/// process's default limits outside a run).
pub fn check_alloc(bytes: u64, what: &dyn Fn() -> String) -> Result<()> {
    match RunControl::current() {
        Some(c) => c.check_alloc(bytes, what),
        None => {
            let max = Limits::process_default().max_tensor_bytes;
            if bytes > max {
                return Err(err!(
                    ResourceExhausted,
                    "{} needs {bytes} bytes, over the tensor limit of {max}",
                    what()
                ));
            }
            Ok(())
        }
    }
}

/// Bytes that `n` elements of `dtype` take in memory (strings count their headers), or
/// None on overflow.
pub fn storage_bytes(dtype: DType, n: usize) -> Option<u64> {
    let size: u64 = match dtype {
        DType::Str => std::mem::size_of::<String>() as u64,
        DType::C64 => 8,
        DType::C128 => 16,
        d => (d.bits() as u64).div_ceil(8).max(1),
    };
    (n as u64).checked_mul(size)
}

/// The product of a shape's dimensions with zeros counted as ones (saturating): how many
/// iterations loops over an empty tensor's other axes would walk.
pub fn extent(shape: &[usize]) -> u64 {
    shape
        .iter()
        .fold(1u64, |a, &d| a.saturating_mul((d as u64).max(1)))
}

/// An error of kind ResourceExhausted when an empty shape's other axes span more elements of
/// `dtype` than the tensor limit allows a tensor to hold. Such a tensor holds nothing, but
/// kernels that walk its outer axes would loop for minutes: it is refused like the tensor
/// its axes describe. Shapes with no zero dimension pass (their size is checked as bytes).
pub fn check_extent(dtype: DType, shape: &[usize], what: &dyn Fn() -> String) -> Result<()> {
    if !shape.contains(&0) {
        return Ok(());
    }
    let span = extent(shape);
    let bytes =
        storage_bytes(dtype, usize::try_from(span).unwrap_or(usize::MAX)).unwrap_or(u64::MAX);
    let max = match RunControl::current() {
        Some(c) => c.limits.max_tensor_bytes,
        None => Limits::process_default().max_tensor_bytes,
    };
    if bytes > max {
        return Err(err!(
            ResourceExhausted,
            "{}: the empty shape {shape:?} spans {span} {dtype} elements in its other axes, \
             over the tensor limit of {max} bytes",
            what()
        ));
    }
    Ok(())
}

/// Checks that a tensor of `dtype` and `shape` fits before it is allocated; returns its
/// element count. Overflowing sizes are errors of kind ResourceExhausted too, and so are
/// empty shapes whose other axes span more than a tensor may hold ([`check_extent`]).
pub fn check_shape(dtype: DType, shape: &[usize], what: &dyn Fn() -> String) -> Result<usize> {
    check_extent(dtype, shape, what)?;
    let n = crate::numel(shape).map_err(|e| e.context(what()))?;
    let bytes = storage_bytes(dtype, n).ok_or_else(|| {
        err!(
            ResourceExhausted,
            "{}: {n} {dtype} elements overflow the address space",
            what()
        )
    })?;
    check_alloc(bytes, &|| format!("{} ({dtype} {shape:?})", what()))?;
    Ok(n)
}

/// A vector of `n` copies of `v`, allocated fallibly after checking the limits: the one
/// way to allocate a buffer whose length a model or an input chose.
pub fn try_vec<T: Clone>(n: usize, v: T, what: &dyn Fn() -> String) -> Result<Vec<T>> {
    let bytes = (n as u64)
        .checked_mul(std::mem::size_of::<T>() as u64)
        .ok_or_else(|| err!(ResourceExhausted, "{}: {n} elements overflow", what()))?;
    check_alloc(bytes, what)?;
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| {
        err!(
            ResourceExhausted,
            "{}: cannot allocate {bytes} bytes (out of memory)",
            what()
        )
    })?;
    out.resize(n, v);
    Ok(out)
}

/// Reserves room for `extra` more elements fallibly, after checking the limits.
pub fn try_reserve<T>(v: &mut Vec<T>, extra: usize, what: &dyn Fn() -> String) -> Result<()> {
    let total = v.len().saturating_add(extra);
    let bytes = (total as u64).saturating_mul(std::mem::size_of::<T>() as u64);
    check_alloc(bytes, what)?;
    v.try_reserve(extra).map_err(|_| {
        err!(
            ResourceExhausted,
            "{}: cannot allocate {bytes} bytes (out of memory)",
            what()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn memory_is_measured() {
        let m = available_memory();
        assert!(m.bytes >= 1 << 20, "{m:?}");
        let l = Limits::default();
        assert!(l.max_tensor_bytes < l.max_run_bytes);
        assert!(l.max_nesting >= 30);
    }

    #[test]
    fn cancel_and_deadline() {
        let tok = CancelToken::new();
        let c = RunControl::new(Limits::for_memory(1 << 30), None, Some(tok.clone()));
        assert!(c.check().is_ok());
        tok.clone().cancel();
        assert_eq!(c.check().unwrap_err().kind(), ErrorKind::Cancelled);
        let past = Instant::now();
        let c = RunControl::new(Limits::for_memory(1 << 30), Some(past), None);
        assert_eq!(c.check().unwrap_err().kind(), ErrorKind::DeadlineExceeded);
        let mut l = Limits::for_memory(1 << 30);
        l.timeout = Some(Duration::ZERO);
        let c = RunControl::new(l, None, None);
        assert_eq!(c.check().unwrap_err().kind(), ErrorKind::DeadlineExceeded);
    }

    #[test]
    fn a_pacer_checks_the_entered_run_every_so_much_work() {
        // Without an entered control, work never stops.
        let mut free = WorkPacer::new();
        assert!(free.done(u64::MAX).is_ok());
        let c = Arc::new(RunControl::new(
            Limits::for_memory(1 << 30),
            Some(Instant::now()),
            None,
        ));
        let _entered = c.enter();
        let mut p = WorkPacer::new();
        assert!(p.done(WorkPacer::EVERY - 1).is_ok());
        assert_eq!(p.done(1).unwrap_err().kind(), ErrorKind::DeadlineExceeded);
    }

    #[test]
    fn allocations_check_the_entered_control() {
        let mut l = Limits::for_memory(1 << 20);
        l.max_tensor_bytes = 1000;
        l.max_run_bytes = 1500;
        let c = Arc::new(RunControl::new(l, None, None));
        {
            let _g = c.enter();
            assert!(try_vec(100, 0u64, &|| "x".into()).is_ok());
            let e = try_vec(126, 0u64, &|| "x".into()).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ResourceExhausted);
            c.charge(1000, &|| "y".into()).unwrap();
            let e = check_alloc(600, &|| "z".into()).unwrap_err();
            assert!(e.to_string().contains("run limit"), "{e}");
            assert!(c.charge(600, &|| "w".into()).is_err());
            assert_eq!(c.live_bytes(), 1000);
            c.release(1000);
            let e = check_shape(DType::F32, &[1 << 40, 1 << 40], &|| "s".into()).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ResourceExhausted);
        }
        assert!(RunControl::current().is_none());
        let e = try_vec(usize::MAX, 0u8, &|| "huge".into()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ResourceExhausted);
    }

    #[test]
    fn empty_shapes_with_huge_other_axes_are_refused() {
        let mut l = Limits::for_memory(1 << 20);
        l.max_tensor_bytes = 1000;
        let c = Arc::new(RunControl::new(l, None, None));
        let _g = c.enter();
        let what = || "t".to_string();
        // 250 f32 elements fit 1000 bytes: an empty tensor whose other axes span them passes.
        assert_eq!(check_shape(DType::F32, &[0, 10, 25], &what).unwrap(), 0);
        assert!(crate::Tensor::zeros(DType::F32, vec![10, 0, 25]).is_ok());
        for shape in [
            vec![0, 251],
            vec![1 << 62, 0],
            vec![usize::MAX, usize::MAX, 0],
        ] {
            let e = check_shape(DType::F32, &shape, &what).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{shape:?}");
            assert!(e.to_string().contains("empty shape"), "{e}");
            let e = crate::Tensor::zeros(DType::F32, shape.clone()).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{shape:?}");
        }
        let t = crate::Tensor::zeros(DType::U8, vec![0]).unwrap();
        assert!(t.clone().reshape(vec![0, 1000]).is_ok());
        assert!(t.reshape(vec![1001, 0]).is_err());
        assert_eq!(extent(&[0, 3, 0, 5]), 15);
    }
}
