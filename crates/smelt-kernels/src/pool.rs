//! The one thread pool: fixed workers that spin briefly after a job, then sleep.
//!
//! A caller splits its work into numbered tasks and calls [`ThreadPool::run`]. It claims
//! up to `threads - 1` idle workers, does tasks itself until none are left, withdraws any
//! claim a worker has not picked up yet, and waits only for workers that are still on a
//! task. The tasks are dealt in contiguous ranges, one per participant (the caller first,
//! then the workers in slot order), each with its own counter on its own cache line; a
//! participant that finishes its range takes what is left of the others'. So a thread
//! takes its tasks without touching a line another core writes, and the same thread gets
//! the same range on every run of a plan (its share of the weights stays in its caches).
//! Busy workers are never waited for, so two sessions (or two runs) sharing the pool
//! divide the workers between them instead of oversubscribing the cores, and nested calls
//! cannot deadlock. Which thread runs a task never changes what the task computes.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

/// How long an idle worker spins before it sleeps, unless `SMELT_SPIN_US` says otherwise.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(300);

/// Most task ranges a job is dealt in; participants past it share ranges (modulo).
const MAX_PARTS: usize = 16;

/// A counter alone on its cache line (two lines: adjacent-line prefetchers pair them).
#[repr(align(128))]
#[derive(Default)]
struct Counter(AtomicUsize);

/// A job on its caller's stack: tasks dealt in `parts` contiguous ranges, each handed out
/// by its own counter.
struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
    tasks: usize,
    parts: usize,
    /// Tasks taken from each range (past its length when it is used up).
    next: [Counter; MAX_PARTS],
    /// Workers that hold a claim on this job (claimed or working).
    holders: AtomicUsize,
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

impl Job<'_> {
    /// Range `q`'s first task and its end (the first `tasks % parts` ranges one longer).
    fn range(&self, q: usize) -> (usize, usize) {
        let (len, extra) = (self.tasks / self.parts, self.tasks % self.parts);
        let start = |q: usize| q * len + q.min(extra);
        (start(q), start(q + 1))
    }

    /// Runs participant `me`'s range, then what is left of the others' (the next ranges
    /// first), until no task is left; a panicking task is recorded, not propagated.
    fn work(&self, me: usize) {
        let home = me % self.parts;
        for q in (home..self.parts).chain(0..home) {
            let (lo, hi) = self.range(q);
            let counter = &self.next[q].0;
            // A range another thread used up is skipped without a write to its line.
            if counter.load(Relaxed) >= hi - lo {
                continue;
            }
            loop {
                let t = lo + counter.fetch_add(1, Relaxed);
                if t >= hi {
                    break;
                }
                if let Err(p) = catch_unwind(AssertUnwindSafe(|| (self.f)(t))) {
                    if let Ok(mut slot) = self.panic.lock() {
                        slot.get_or_insert(p);
                    }
                }
            }
        }
    }
}

/// A job pointer with its lifetime erased (a worker only uses it while it holds a claim).
type JobPtr = *mut Job<'static>;

/// One worker's mailbox.
struct Slot {
    /// Null when idle, a job when claimed, [`taken`] while working.
    job: AtomicPtr<Job<'static>>,
    /// The participant this worker is in the job it was handed (written before the job).
    part: AtomicUsize,
    sleeping: AtomicBool,
    thread: OnceLock<Thread>,
}

/// The sentinel of a slot whose worker is on a job (never dereferenced).
fn taken() -> JobPtr {
    std::ptr::dangling_mut()
}

struct Shared {
    slots: Vec<Slot>,
    shutdown: AtomicBool,
    spin: Duration,
}

/// A fixed set of worker threads that run the tasks of [`ThreadPool::run`].
pub struct ThreadPool {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl ThreadPool {
    /// A pool of `workers` threads (the caller of `run` is one more), spinning `spin` when idle.
    pub fn new(workers: usize, spin: Duration) -> ThreadPool {
        let shared = Arc::new(Shared {
            slots: (0..workers)
                .map(|_| Slot {
                    job: AtomicPtr::new(std::ptr::null_mut()),
                    part: AtomicUsize::new(0),
                    sleeping: AtomicBool::new(false),
                    thread: OnceLock::new(),
                })
                .collect(),
            shutdown: AtomicBool::new(false),
            spin,
        });
        let mut handles = Vec::with_capacity(workers);
        for i in 0..workers {
            let sh = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name(format!("smelt-worker-{i}"))
                .spawn(move || worker(&sh, i));
            match spawned {
                Ok(h) => {
                    let _ = shared.slots[i].thread.set(h.thread().clone());
                    handles.push(h);
                }
                // A worker that cannot start leaves its slot marked busy for good; the pool
                // runs with fewer threads rather than failing.
                Err(_) => shared.slots[i].job.store(taken(), SeqCst),
            }
        }
        ThreadPool { shared, handles }
    }

    /// Worker threads (the caller of `run` is one more).
    pub fn workers(&self) -> usize {
        self.shared.slots.len()
    }

    /// Runs `f(0) .. f(tasks - 1)` on the caller and up to `threads - 1` idle workers, and
    /// returns when all are done. A task that panics is re-raised here after the others finish.
    pub fn run(&self, threads: usize, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        let helpers = threads.saturating_sub(1).min(tasks.saturating_sub(1));
        if helpers == 0 || self.shared.slots.is_empty() {
            for t in 0..tasks {
                f(t);
            }
            return;
        }
        let job = Job {
            f,
            tasks,
            parts: (helpers + 1).min(MAX_PARTS),
            next: Default::default(),
            holders: AtomicUsize::new(0),
            panic: Mutex::new(None),
        };
        // SAFETY: the pointer escapes only into slots; every claim is withdrawn or released
        // (holders back to 0) before this function returns, so no worker outlives the job.
        let ptr: JobPtr = (&job as *const Job<'_>).cast_mut().cast();
        let mut claimed = 0;
        for slot in &self.shared.slots {
            if claimed == helpers {
                break;
            }
            if !slot.job.load(Relaxed).is_null() {
                continue;
            }
            job.holders.fetch_add(1, SeqCst);
            // Read by the worker only after it sees the job (the exchange publishes it). A
            // caller racing for the same slot may overwrite it: that worker then starts on
            // another range, which changes nothing but where it starts.
            slot.part.store(claimed + 1, Relaxed);
            if slot
                .job
                .compare_exchange(std::ptr::null_mut(), ptr, SeqCst, Relaxed)
                .is_ok()
            {
                claimed += 1;
                if slot.sleeping.load(SeqCst) {
                    if let Some(t) = slot.thread.get() {
                        t.unpark();
                    }
                }
            } else {
                job.holders.fetch_sub(1, SeqCst);
            }
        }
        job.work(0);
        // Withdraw claims no worker picked up yet.
        for slot in &self.shared.slots {
            if slot
                .job
                .compare_exchange(ptr, std::ptr::null_mut(), SeqCst, Relaxed)
                .is_ok()
            {
                job.holders.fetch_sub(1, SeqCst);
            }
        }
        let mut spins = 0u32;
        while job.holders.load(Acquire) != 0 {
            spins += 1;
            if spins < 1 << 16 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let panicked = job.panic.lock().ok().and_then(|mut p| p.take());
        if let Some(p) = panicked {
            resume_unwind(p);
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, SeqCst);
        for s in &self.shared.slots {
            if let Some(t) = s.thread.get() {
                t.unpark();
            }
        }
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

fn worker(sh: &Shared, i: usize) {
    let slot = &sh.slots[i];
    loop {
        let p = wait_for_job(sh, slot);
        if p.is_null() {
            return;
        }
        // Claim it; the caller may have withdrawn it meanwhile.
        if slot
            .job
            .compare_exchange(p, taken(), SeqCst, Relaxed)
            .is_err()
        {
            continue;
        }
        // SAFETY: the claim keeps the job alive until `holders` is decremented below.
        let job = unsafe { &*p };
        job.work(slot.part.load(Relaxed));
        slot.job.store(std::ptr::null_mut(), SeqCst);
        job.holders.fetch_sub(1, Release);
    }
}

/// Waits for a job in the slot: spins for the pool's spin time, then sleeps until woken
/// (and spins again after each wake-up). Null means shut down.
fn wait_for_job(sh: &Shared, slot: &Slot) -> JobPtr {
    loop {
        let start = Instant::now();
        let mut n = 0u32;
        loop {
            if sh.shutdown.load(Relaxed) {
                return std::ptr::null_mut();
            }
            let p = slot.job.load(Acquire);
            if !p.is_null() && p != taken() {
                return p;
            }
            n = n.wrapping_add(1);
            if n.is_multiple_of(64) && start.elapsed() >= sh.spin {
                break;
            }
            std::hint::spin_loop();
        }
        slot.sleeping.store(true, SeqCst);
        let p = slot.job.load(SeqCst);
        if (p.is_null() || p == taken()) && !sh.shutdown.load(SeqCst) {
            std::thread::park();
        }
        slot.sleeping.store(false, SeqCst);
    }
}

/// The threads this process may use: its CPU affinity and cgroup CPU quota respected.
pub fn available_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The process's pool, started on first use with one worker fewer than the available
/// threads (the caller is the last one). Every session shares it.
pub fn global() -> &'static ThreadPool {
    static POOL: OnceLock<ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let spin = std::env::var("SMELT_SPIN_US")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map_or(DEFAULT_SPIN, Duration::from_micros);
        ThreadPool::new(available_threads().saturating_sub(1), spin)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_task_runs_once() {
        let pool = ThreadPool::new(3, Duration::from_micros(50));
        for tasks in [0, 1, 2, 7, 100, 1000] {
            for threads in [1, 2, 4, 8] {
                let hits: Vec<AtomicU64> = (0..tasks).map(|_| AtomicU64::new(0)).collect();
                pool.run(threads, tasks, &|t| {
                    hits[t].fetch_add(1, Relaxed);
                });
                assert!(hits.iter().all(|h| h.load(Relaxed) == 1), "{tasks} tasks");
            }
        }
    }

    #[test]
    fn a_participant_runs_its_own_range_first_then_the_next_ones() {
        let order = Mutex::new(Vec::new());
        let f = |t: usize| order.lock().unwrap().push(t);
        let job = Job {
            f: &f,
            tasks: 10,
            parts: 3,
            next: Default::default(),
            holders: AtomicUsize::new(0),
            panic: Mutex::new(None),
        };
        // Ranges 0..4, 4..7, 7..10; participant 5 shares range 2's (modulo).
        job.work(5);
        assert_eq!(*order.lock().unwrap(), [7, 8, 9, 0, 1, 2, 3, 4, 5, 6]);
        // Used-up ranges are skipped.
        job.work(0);
        assert_eq!(order.lock().unwrap().len(), 10);
    }

    #[test]
    fn more_threads_than_ranges_run_every_task_once() {
        let pool = ThreadPool::new(MAX_PARTS + 3, Duration::from_micros(50));
        for tasks in [1, MAX_PARTS - 1, MAX_PARTS + 2, 300] {
            let hits: Vec<AtomicU64> = (0..tasks).map(|_| AtomicU64::new(0)).collect();
            pool.run(MAX_PARTS + 4, tasks, &|t| {
                hits[t].fetch_add(1, Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Relaxed) == 1), "{tasks} tasks");
        }
    }

    #[test]
    fn concurrent_and_nested_callers_share_workers() {
        let pool = ThreadPool::new(2, Duration::from_micros(50));
        let total = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50 {
                        pool.run(3, 8, &|_| {
                            pool.run(2, 4, &|_| {
                                total.fetch_add(1, Relaxed);
                            });
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Relaxed), 4 * 50 * 8 * 4);
    }

    #[test]
    fn a_panicking_task_is_reraised_and_the_pool_survives() {
        let pool = ThreadPool::new(2, Duration::from_micros(50));
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(3, 10, &|t| {
                if t == 5 {
                    panic!("task 5");
                }
            })
        }));
        assert!(r.is_err());
        let n = AtomicU64::new(0);
        pool.run(3, 10, &|_| {
            n.fetch_add(1, Relaxed);
        });
        assert_eq!(n.load(Relaxed), 10);
    }

    #[test]
    fn sleeping_workers_wake_up() {
        let pool = ThreadPool::new(1, Duration::from_micros(1));
        std::thread::sleep(Duration::from_millis(20));
        let seen = Mutex::new(std::collections::HashSet::new());
        for _ in 0..20 {
            pool.run(2, 64, &|_| {
                seen.lock().unwrap().insert(std::thread::current().id());
                std::thread::sleep(Duration::from_micros(200));
            });
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(seen.lock().unwrap().len(), 2, "the worker took part");
    }
}
