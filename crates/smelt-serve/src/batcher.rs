//! A model's dynamic batcher: a bounded queue of requests and the workers (one per model
//! instance) that take batches from it as the [`Policy`] decides, run them and hand each
//! request its share of the outputs. Work runs on plain threads, off the async runtime.

use crate::batch::{self, Pick, Policy, Queued};
use crate::error::{Result, ServeError, Status};
use crate::lane::Lane;
use smelt_ir::Tensor;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What runs a batch: a model instance.
pub trait Executor: Send + Sync + 'static {
    /// Runs the model on one (joined) set of inputs, in the model's input order, returning
    /// its outputs in the model's output order.
    fn run(&self, inputs: Vec<Tensor>, deadline: Option<Instant>) -> Result<Vec<Tensor>>;
    /// Called once when the model has been idle for a while (to give memory back).
    fn idle(&self) {}
    /// Whether inputs of these shapes (in the model's input order) run without compiling
    /// first; those that would compile run on the model's compile lane.
    fn is_warm(&self, _shapes: &[&[usize]]) -> bool {
        true
    }
}

/// A request's outputs and where its time went.
#[derive(Debug)]
pub struct Reply {
    /// The outputs, in the model's output order.
    pub outputs: Vec<Tensor>,
    /// Time spent queued.
    pub queue: Duration,
    /// Time the model ran (the whole batch's run).
    pub compute: Duration,
    /// Size of the batch the request ran in.
    pub batch: usize,
}

/// A request waiting in the queue.
struct Pending {
    inputs: Vec<Tensor>,
    batch: usize,
    enqueued: Instant,
    deadline: Option<Instant>,
    reply: oneshot::Sender<Result<Reply>>,
}

impl Queued for Pending {
    fn batch(&self) -> usize {
        self.batch
    }
    fn joins(&self, other: &Pending) -> bool {
        self.inputs.len() == other.inputs.len()
            && self
                .inputs
                .iter()
                .zip(&other.inputs)
                .all(|(a, b)| a.dtype() == b.dtype() && a.shape().get(1..) == b.shape().get(1..))
    }
    fn enqueued(&self) -> Instant {
        self.enqueued
    }
}

#[derive(Default)]
struct State {
    queue: VecDeque<Pending>,
    closing: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    policy: Policy,
    max_queue: usize,
    idle_after: Duration,
    exec: Arc<dyn Executor>,
    /// Where batches at shapes not compiled yet run (set once the lane has started).
    cold: OnceLock<Lane<Vec<Pending>>>,
}

/// A model's queue and workers.
pub struct Batcher {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl Batcher {
    /// Starts `instances` workers taking batches from a queue of at most `max_queue`
    /// requests; after `idle_after` without work, one of them calls [`Executor::idle`].
    pub fn start(
        exec: Arc<dyn Executor>,
        policy: Policy,
        max_queue: usize,
        instances: usize,
        idle_after: Duration,
    ) -> Result<Batcher> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            policy,
            max_queue: max_queue.max(1),
            idle_after,
            exec,
            cold: OnceLock::new(),
        });
        // The lane's thread holds the queue until `drain` stops it.
        let s = shared.clone();
        let lane = Lane::start("smelt-serve-compile".into(), shared.max_queue, move |b| {
            s.run(b)
        })?;
        let _ = shared.cold.set(lane);
        let mut workers = Vec::new();
        for i in 0..instances.max(1) {
            let s = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("smelt-serve-{i}"))
                .spawn(move || s.work())
                .map_err(|e| ServeError::internal(format!("cannot start a model worker: {e}")))?;
            workers.push(h);
        }
        Ok(Batcher {
            shared,
            workers: Mutex::new(workers),
        })
    }

    /// Queues a request (inputs in the model's order, dim 0 its batch size when the model
    /// batches); the receiver gets its reply. A full queue or a closing batcher answers
    /// UNAVAILABLE at once.
    pub fn submit(
        &self,
        inputs: Vec<Tensor>,
        deadline: Option<Instant>,
    ) -> Result<oneshot::Receiver<Result<Reply>>> {
        let batch = if self.shared.policy.max_batch_size == 0 {
            1
        } else {
            inputs
                .first()
                .and_then(|t| t.shape().first().copied())
                .unwrap_or(1)
        };
        let (tx, rx) = oneshot::channel();
        let mut st = self.shared.lock()?;
        if st.closing {
            return Err(ServeError::unavailable("the server is shutting down"));
        }
        if st.queue.len() >= self.shared.max_queue {
            return Err(ServeError::unavailable(format!(
                "the model's queue is full ({} requests); try again later",
                self.shared.max_queue
            )));
        }
        st.queue.push_back(Pending {
            inputs,
            batch,
            enqueued: Instant::now(),
            deadline,
            reply: tx,
        });
        drop(st);
        self.shared.wake.notify_one();
        Ok(rx)
    }

    /// How many requests wait in the queue now.
    pub fn queued(&self) -> usize {
        self.shared.lock().map(|s| s.queue.len()).unwrap_or(0)
    }

    /// Stops taking requests, runs those queued, and waits for the workers to finish.
    pub fn drain(&self) {
        if let Ok(mut st) = self.shared.lock() {
            st.closing = true;
        }
        self.shared.wake.notify_all();
        let workers = self
            .workers
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default();
        for w in workers {
            let _ = w.join();
        }
        if let Some(lane) = self.shared.cold.get() {
            lane.drain();
        }
    }
}

impl Drop for Batcher {
    fn drop(&mut self) {
        self.drain();
    }
}

impl Shared {
    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| ServeError::internal("a model worker panicked"))
    }

    /// A worker: take a batch, run it, repeat; exit once closing and the queue is empty.
    fn work(&self) {
        let mut idle_since: Option<Instant> = None;
        loop {
            let Ok(mut st) = self.lock() else { return };
            let taken = loop {
                let now = Instant::now();
                expire(&mut st.queue, now);
                let closing = st.closing;
                let queue = st.queue.make_contiguous();
                match self.policy.pick(queue, now, closing) {
                    Pick::Run(idx) => break take(&mut st.queue, &idx),
                    Pick::WaitUntil(t) => {
                        let t = earliest_deadline(&st.queue).map_or(t, |d| d.min(t));
                        let wait = t
                            .saturating_duration_since(now)
                            .max(Duration::from_micros(50));
                        st = match self.wake.wait_timeout(st, wait) {
                            Ok((g, _)) => g,
                            Err(_) => return,
                        };
                    }
                    Pick::Empty if st.closing => return,
                    Pick::Empty => {
                        let wait = match idle_since {
                            Some(t) => (t + self.idle_after).saturating_duration_since(now),
                            None => Duration::from_secs(3600),
                        };
                        if idle_since.is_some() && wait.is_zero() {
                            idle_since = None;
                            drop(st);
                            self.exec.idle();
                            st = match self.lock() {
                                Ok(g) => g,
                                Err(_) => return,
                            };
                            continue;
                        }
                        st = match self.wake.wait_timeout(st, wait) {
                            Ok((g, _)) => g,
                            Err(_) => return,
                        };
                    }
                }
            };
            drop(st);
            let Some(taken) = self.divert(taken) else {
                continue;
            };
            self.run(taken);
            idle_since = Some(Instant::now());
        }
    }

    /// Hands a batch at shapes the model has not compiled to the compile lane (a full lane
    /// answers UNAVAILABLE); gives back a batch that should run here.
    fn divert(&self, batch: Vec<Pending>) -> Option<Vec<Pending>> {
        let Some(lane) = self.cold.get() else {
            return Some(batch);
        };
        let first = batch.first()?;
        let total: usize = batch.iter().map(|p| p.batch).sum();
        let joined: Vec<Vec<usize>> = first
            .inputs
            .iter()
            .map(|t| {
                let mut d = t.shape().to_vec();
                if batch.len() > 1 {
                    if let Some(d0) = d.first_mut() {
                        *d0 = total;
                    }
                }
                d
            })
            .collect();
        let shapes: Vec<&[usize]> = joined.iter().map(Vec::as_slice).collect();
        if self.exec.is_warm(&shapes) {
            return Some(batch);
        }
        if let Err(batch) = lane.submit(batch) {
            for p in batch {
                let _ = p.reply.send(Err(ServeError::unavailable(
                    "the model is compiling too many new shapes; try again later",
                )));
            }
        }
        None
    }

    /// Runs the model, a panic in it answered as an Internal error (the worker lives on,
    /// so the model keeps serving).
    fn exec(&self, inputs: Vec<Tensor>, deadline: Option<Instant>) -> Result<Vec<Tensor>> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.exec.run(inputs, deadline)
        }))
        .unwrap_or_else(|_| {
            Err(ServeError::internal(
                "the model panicked while running this request",
            ))
        })
    }

    /// Runs one batch and answers its requests.
    fn run(&self, batch: Vec<Pending>) {
        let started = Instant::now();
        // A batch may run until its latest request's deadline (None if any has none).
        let deadline = batch
            .iter()
            .map(|p| p.deadline)
            .try_fold(started, |a, d| d.map(|d| a.max(d)));
        let result = if batch.len() == 1 {
            self.exec(batch[0].inputs.clone(), deadline)
                .map(|o| vec![o])
        } else {
            self.run_joined(&batch, deadline)
        };
        let compute = started.elapsed();
        let total = batch.iter().map(|p| p.batch).sum();
        match result {
            Ok(outputs) => {
                for (p, outputs) in batch.into_iter().zip(outputs) {
                    let _ = p.reply.send(Ok(Reply {
                        outputs,
                        queue: started.saturating_duration_since(p.enqueued),
                        compute,
                        batch: total,
                    }));
                }
            }
            // A batch that the model refuses is run request by request, so that only the
            // request at fault gets the error.
            Err(e) if batch.len() > 1 && e.status == Status::InvalidArgument => {
                for p in batch {
                    let t = Instant::now();
                    let r = self.exec(p.inputs, p.deadline).map(|outputs| Reply {
                        outputs,
                        queue: started.saturating_duration_since(p.enqueued),
                        compute: t.elapsed(),
                        batch: p.batch,
                    });
                    let _ = p.reply.send(r);
                }
            }
            Err(e) => {
                for p in batch {
                    let _ = p.reply.send(Err(e.clone()));
                }
            }
        }
    }

    /// Runs a batch joined along dim 0 and splits the outputs (or runs the requests one by
    /// one when an output has no batch dim).
    fn run_joined(&self, batch: &[Pending], deadline: Option<Instant>) -> Result<Vec<Vec<Tensor>>> {
        let inputs: Vec<&[Tensor]> = batch.iter().map(|p| p.inputs.as_slice()).collect();
        let outputs = self.exec(batch::join(&inputs)?, deadline)?;
        let sizes: Vec<usize> = batch.iter().map(|p| p.batch).collect();
        match batch::split(&outputs, &sizes)? {
            Some(parts) => Ok(parts),
            None => batch
                .iter()
                .map(|p| self.exec(p.inputs.clone(), deadline))
                .collect(),
        }
    }
}

/// Answers and drops the requests past their deadline, and those whose client is gone.
fn expire(queue: &mut VecDeque<Pending>, now: Instant) {
    queue.retain_mut(|p| {
        if p.reply.is_closed() {
            return false;
        }
        if p.deadline.is_some_and(|d| d <= now) {
            let waited = now.saturating_duration_since(p.enqueued);
            let e = ServeError::new(
                Status::DeadlineExceeded,
                format!(
                    "the request timed out after {} ms in the queue",
                    waited.as_millis()
                ),
            );
            // The receiver may be gone too; nothing to do then.
            let (tx, _) = oneshot::channel();
            let _ = std::mem::replace(&mut p.reply, tx).send(Err(e));
            return false;
        }
        true
    });
}

fn earliest_deadline(queue: &VecDeque<Pending>) -> Option<Instant> {
    queue.iter().filter_map(|p| p.deadline).min()
}

/// Removes the requests at the given (ascending) positions, in that order.
fn take(queue: &mut VecDeque<Pending>, idx: &[usize]) -> Vec<Pending> {
    let mut out = Vec::with_capacity(idx.len());
    for (removed, &i) in idx.iter().enumerate() {
        if let Some(p) = queue.remove(i - removed) {
            out.push(p);
        }
    }
    out
}
