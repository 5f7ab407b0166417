//! The dynamic batcher with a stand-in model: batches form by shape and size, each request
//! gets its own rows back, a full queue answers UNAVAILABLE at once, a request past its
//! timeout is answered DEADLINE_EXCEEDED, draining answers everything queued, and a panic
//! in the model fails only its request.

use smelt_ir::Tensor;
use smelt_serve::batch::Policy;
use smelt_serve::batcher::{Batcher, Executor};
use smelt_serve::error::{Result, Status};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Doubles its input and records each batch's dim 0; runs only while the gate is open.
#[derive(Default)]
struct Doubler {
    batches: Mutex<Vec<usize>>,
    gate: Mutex<bool>,
    opened: Condvar,
}

impl Doubler {
    fn open(&self) {
        *self.gate.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl Executor for Doubler {
    fn run(&self, inputs: Vec<Tensor>, _: Option<Instant>) -> Result<Vec<Tensor>> {
        let mut g = self.gate.lock().unwrap();
        while !*g {
            g = self.opened.wait(g).unwrap();
        }
        drop(g);
        let x = &inputs[0];
        assert!(x.as_f32().unwrap()[0] >= 0.0, "a negative first element");
        self.batches.lock().unwrap().push(x.shape()[0]);
        let v: Vec<f32> = x.as_f32().unwrap().iter().map(|v| v * 2.0).collect();
        Ok(vec![Tensor::from_f32(x.shape().to_vec(), v)?])
    }
}

fn rows(first: f32, n: usize, width: usize) -> Tensor {
    let v = (0..n * width).map(|i| first + i as f32).collect();
    Tensor::from_f32(vec![n, width], v).unwrap()
}

fn batcher(exec: &Arc<Doubler>, max: usize, delay_ms: u64, queue: usize) -> Batcher {
    let policy = Policy {
        max_batch_size: max,
        preferred: Vec::new(),
        max_queue_delay: Duration::from_millis(delay_ms),
    };
    Batcher::start(exec.clone(), policy, queue, 1, Duration::from_secs(60)).unwrap()
}

#[tokio::test]
async fn requests_of_one_shape_share_a_batch_and_get_their_rows_back() {
    let exec = Arc::new(Doubler::default());
    exec.open();
    let b = batcher(&exec, 8, 200, 64);
    // Six requests of width 2 (sizes 1+2+1+2+1+1 = 8, a full batch) and one of width 3.
    let sizes = [1, 2, 1, 2, 1, 1];
    let mut waits = Vec::new();
    for (k, &n) in sizes.iter().enumerate() {
        waits.push((
            rows(k as f32 * 10.0, n, 2),
            b.submit(vec![rows(k as f32 * 10.0, n, 2)], None).unwrap(),
        ));
    }
    let other = b.submit(vec![rows(0.0, 1, 3)], None).unwrap();
    for (input, rx) in waits {
        let reply = rx.await.unwrap().unwrap();
        let want: Vec<f32> = input.as_f32().unwrap().iter().map(|v| v * 2.0).collect();
        assert_eq!(reply.outputs[0].as_f32().unwrap(), &want[..]);
        assert_eq!(reply.outputs[0].shape(), input.shape());
        assert_eq!(reply.batch, 8);
    }
    assert_eq!(other.await.unwrap().unwrap().batch, 1);
    assert_eq!(*exec.batches.lock().unwrap(), vec![8, 1]);
}

#[tokio::test]
async fn a_full_queue_refuses_at_once_and_timeouts_expire_in_the_queue() {
    let exec = Arc::new(Doubler::default());
    let b = batcher(&exec, 0, 0, 2);
    // The worker takes the first and blocks on the gate; two more fill the queue.
    let first = b.submit(vec![rows(0.0, 1, 2)], None).unwrap();
    while b.queued() > 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let late = b
        .submit(
            vec![rows(1.0, 1, 2)],
            Some(Instant::now() + Duration::from_millis(20)),
        )
        .unwrap();
    let queued = b.submit(vec![rows(2.0, 1, 2)], None).unwrap();
    let refused = b.submit(vec![rows(3.0, 1, 2)], None).unwrap_err();
    assert_eq!(refused.status, Status::Unavailable);
    assert!(
        refused.message.contains("queue is full"),
        "{}",
        refused.message
    );
    tokio::time::sleep(Duration::from_millis(40)).await;
    exec.open();
    assert!(first.await.unwrap().is_ok());
    let e = late.await.unwrap().unwrap_err();
    assert_eq!(e.status, Status::DeadlineExceeded, "{}", e.message);
    assert!(queued.await.unwrap().is_ok());
}

#[tokio::test]
async fn draining_answers_every_queued_request_then_refuses() {
    let exec = Arc::new(Doubler::default());
    let b = batcher(&exec, 4, 10_000, 16);
    let waits: Vec<_> = (0..3)
        .map(|k| b.submit(vec![rows(k as f32, 1, 2)], None).unwrap())
        .collect();
    exec.open();
    // The batch is not full and its delay is long: draining runs it now.
    let t = Instant::now();
    b.drain();
    assert!(t.elapsed() < Duration::from_secs(5));
    for rx in waits {
        assert_eq!(rx.await.unwrap().unwrap().batch, 3);
    }
    assert_eq!(
        b.submit(vec![rows(0.0, 1, 2)], None).unwrap_err().status,
        Status::Unavailable
    );
}

#[tokio::test]
async fn a_panic_in_the_model_fails_its_request_and_the_worker_lives_on() {
    let exec = Arc::new(Doubler::default());
    exec.open();
    let b = batcher(&exec, 0, 0, 4);
    let e = b
        .submit(vec![rows(-1.0, 1, 2)], None)
        .unwrap()
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(e.status, Status::Internal, "{}", e.message);
    let ok = b
        .submit(vec![rows(1.0, 1, 2)], None)
        .unwrap()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ok.outputs[0].as_f32().unwrap(), &[2.0, 4.0]);
}

/// A model that has compiled width 2 only: a run at another width "compiles" until the
/// gate opens.
#[derive(Default)]
struct Compiler {
    gate: Mutex<bool>,
    opened: Condvar,
    compiling: std::sync::atomic::AtomicBool,
}

impl Executor for Compiler {
    fn run(&self, inputs: Vec<Tensor>, _: Option<Instant>) -> Result<Vec<Tensor>> {
        if inputs[0].shape()[1] != 2 {
            self.compiling
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let mut g = self.gate.lock().unwrap();
            while !*g {
                g = self.opened.wait(g).unwrap();
            }
        }
        Ok(inputs)
    }

    fn is_warm(&self, shapes: &[&[usize]]) -> bool {
        shapes[0][1] == 2
    }
}

#[tokio::test]
async fn a_new_shape_compiles_on_the_lane_while_known_shapes_are_served() {
    let exec = Arc::new(Compiler::default());
    let policy = Policy {
        max_batch_size: 0,
        preferred: Vec::new(),
        max_queue_delay: Duration::ZERO,
    };
    // One instance: were the new shape run there, the known ones would wait behind it.
    let b = Batcher::start(exec.clone(), policy, 2, 1, Duration::from_secs(60)).unwrap();
    let cold = b.submit(vec![rows(0.0, 1, 5)], None).unwrap();
    // The lane runs at a lower priority: on a busy machine it may start late.
    while !exec.compiling.load(std::sync::atomic::Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for k in 0..20 {
        let reply = b.submit(vec![rows(k as f32, 1, 2)], None).unwrap();
        let r = tokio::time::timeout(Duration::from_secs(10), reply)
            .await
            .expect("a known shape is served while the new one compiles")
            .unwrap()
            .unwrap();
        assert_eq!(r.outputs[0].as_f32().unwrap(), &[k as f32, k as f32 + 1.0]);
    }
    // The lane holds 2 waiting batches beside the one compiling; a fourth is refused.
    let waiting: Vec<_> = (0..2)
        .map(|_| b.submit(vec![rows(0.0, 1, 5)], None).unwrap())
        .collect();
    while b.queued() > 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let over = b.submit(vec![rows(0.0, 1, 5)], None).unwrap();
    let e = tokio::time::timeout(Duration::from_secs(10), over)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(e.status, Status::Unavailable, "{}", e.message);
    *exec.gate.lock().unwrap() = true;
    exec.opened.notify_all();
    assert!(cold.await.unwrap().is_ok());
    for w in waiting {
        assert!(w.await.unwrap().is_ok());
    }
    b.drain();
}
