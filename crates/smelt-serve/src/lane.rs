//! A model's compile lane: batches at shapes the model has not compiled yet run here, one
//! at a time on a thread of lowered scheduling priority, so that the model's instances go
//! on serving the shapes they know while a new one compiles.

use crate::error::{Result, ServeError};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// How much lower than the server's the lane's priority is (a nice increment): the
/// scheduler then gives the lane what the instances leave, not an equal share.
const NICE: i32 = 5;

struct Jobs<T> {
    queue: VecDeque<T>,
    closing: bool,
}

struct Shared<T> {
    jobs: Mutex<Jobs<T>>,
    wake: Condvar,
    capacity: usize,
}

/// A queue of jobs and the one thread that runs them.
pub struct Lane<T> {
    shared: Arc<Shared<T>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl<T: Send + 'static> Lane<T> {
    /// Starts the lane's thread, which runs each job with `run`; at most `capacity` jobs
    /// wait.
    pub fn start(name: String, capacity: usize, run: impl Fn(T) + Send + 'static) -> Result<Self> {
        let shared = Arc::new(Shared {
            jobs: Mutex::new(Jobs {
                queue: VecDeque::new(),
                closing: false,
            }),
            wake: Condvar::new(),
            capacity: capacity.max(1),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                lower_priority();
                while let Some(job) = s.next() {
                    run(job);
                }
            })
            .map_err(|e| ServeError::internal(format!("cannot start a compile lane: {e}")))?;
        Ok(Lane {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues a job; gives it back when the lane is full or closing.
    pub fn submit(&self, job: T) -> std::result::Result<(), T> {
        let Ok(mut jobs) = self.shared.jobs.lock() else {
            return Err(job);
        };
        if jobs.closing || jobs.queue.len() >= self.shared.capacity {
            return Err(job);
        }
        jobs.queue.push_back(job);
        drop(jobs);
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Runs the jobs queued, then stops the thread and waits for it.
    pub fn drain(&self) {
        if let Ok(mut jobs) = self.shared.jobs.lock() {
            jobs.closing = true;
        }
        self.shared.wake.notify_all();
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

impl<T> Shared<T> {
    /// The next job, waiting for one; None once closing and empty.
    fn next(&self) -> Option<T> {
        let mut jobs = self.jobs.lock().ok()?;
        loop {
            if let Some(job) = jobs.queue.pop_front() {
                return Some(job);
            }
            if jobs.closing {
                return None;
            }
            jobs = self.wake.wait(jobs).ok()?;
        }
    }
}

/// Lowers the calling thread's scheduling priority by [`NICE`] (Linux: a thread's nice
/// value is its own); elsewhere, or when refused, the thread keeps its priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority take no pointers; setpriority on our own thread id
    // changes only this thread's nice value.
    unsafe {
        let tid = libc::gettid();
        let now = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, now + NICE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn jobs_run_in_order_and_a_full_lane_gives_them_back() {
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        let gate = Mutex::new(gate_rx);
        let done = Arc::new(Mutex::new(Vec::new()));
        let d = done.clone();
        let lane = Lane::start("test-lane".into(), 2, move |j: usize| {
            if j == 0 {
                // The first job holds the thread until the test lets it go.
                let _ = gate.lock().map(|g| g.recv());
            }
            d.lock().unwrap().push(j);
        })
        .unwrap();
        assert!(lane.submit(0).is_ok());
        // Wait until the thread has taken job 0, so the queue holds only what follows.
        while !lane.shared.jobs.lock().unwrap().queue.is_empty() {
            std::thread::yield_now();
        }
        assert!(lane.submit(1).is_ok());
        assert!(lane.submit(2).is_ok());
        assert_eq!(
            lane.submit(3),
            Err(3),
            "a third waiting job is over capacity"
        );
        gate_tx.send(()).unwrap();
        lane.drain();
        assert_eq!(*done.lock().unwrap(), vec![0, 1, 2]);
        assert_eq!(lane.submit(4), Err(4), "a drained lane takes nothing");
    }

    #[test]
    fn the_lane_thread_runs_at_a_lower_priority() {
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let s = seen.clone();
        #[cfg(target_os = "linux")]
        // SAFETY: as in lower_priority.
        let base = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        let lane = Lane::start("test-nice".into(), 1, move |_: ()| {
            #[cfg(target_os = "linux")]
            // SAFETY: as in lower_priority.
            let p = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
            #[cfg(not(target_os = "linux"))]
            let p = 0;
            s.store(p as usize, Ordering::SeqCst);
        })
        .unwrap();
        lane.submit(()).unwrap();
        lane.drain();
        #[cfg(target_os = "linux")]
        assert_eq!(seen.load(Ordering::SeqCst), (base + NICE).min(19) as usize);
    }
}
