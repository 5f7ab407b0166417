//! What the dynamic batcher decides and does with tensors: which queued requests form the
//! next batch (Triton's policy), and joining inputs / splitting outputs along dim 0.

use crate::error::{Result, ServeError};
use smelt_ir::{Data, Tensor};
use std::time::{Duration, Instant};

/// How a model's requests are batched.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// The largest batch (sum of the requests' dim 0); 0 runs each request alone.
    pub max_batch_size: usize,
    /// Batch sizes run as soon as they can be formed.
    pub preferred: Vec<usize>,
    /// How long the oldest request waits for a fuller batch.
    pub max_queue_delay: Duration,
}

/// One queued request as the policy sees it.
pub trait Queued {
    /// Its batch size (its inputs' dim 0; 1 when the model does not batch).
    fn batch(&self) -> usize;
    /// Whether it can share a batch with `other` (same dtypes and dims past dim 0).
    fn joins(&self, other: &Self) -> bool;
    /// When it was queued.
    fn enqueued(&self) -> Instant;
}

/// The policy's decision.
#[derive(Debug, PartialEq, Eq)]
pub enum Pick {
    /// Nothing is queued.
    Empty,
    /// Run the requests at these queue positions as one batch.
    Run(Vec<usize>),
    /// Wait until then for a fuller batch (or for an earlier wake-up).
    WaitUntil(Instant),
}

impl Policy {
    /// The next batch: requests that join the oldest, in queue order, within the maximum.
    /// It runs at once when it reaches the maximum or a preferred size, when the oldest has
    /// waited the queue delay, or when `flush` (shutting down); otherwise it waits.
    pub fn pick<Q: Queued>(&self, queue: &[Q], now: Instant, flush: bool) -> Pick {
        let Some(first) = queue.first() else {
            return Pick::Empty;
        };
        if self.max_batch_size == 0 {
            return Pick::Run(vec![0]);
        }
        let (mut chosen, mut total, mut preferred) = (Vec::new(), 0usize, None);
        for (i, q) in queue.iter().enumerate() {
            if total == self.max_batch_size {
                break;
            }
            if !q.joins(first) || total + q.batch() > self.max_batch_size {
                continue;
            }
            chosen.push(i);
            total += q.batch();
            if self.preferred.contains(&total) {
                preferred = Some(chosen.len());
            }
        }
        if total >= self.max_batch_size {
            return Pick::Run(chosen);
        }
        if let Some(n) = preferred {
            chosen.truncate(n);
            return Pick::Run(chosen);
        }
        let due = first.enqueued() + self.max_queue_delay;
        if flush || now >= due {
            Pick::Run(chosen)
        } else {
            Pick::WaitUntil(due)
        }
    }
}

/// Joins each input of several requests along dim 0 (one tensor per model input).
pub fn join(requests: &[&[Tensor]]) -> Result<Vec<Tensor>> {
    let Some(first) = requests.first() else {
        return Ok(Vec::new());
    };
    (0..first.len())
        .map(|i| {
            let parts: Vec<&Tensor> = requests.iter().map(|r| &r[i]).collect();
            let rows: usize = parts
                .iter()
                .map(|t| t.shape().first().copied().unwrap_or(1))
                .sum();
            let mut shape = parts[0].shape().to_vec();
            if shape.is_empty() {
                return Err(ServeError::internal("a batched input without a batch dim"));
            }
            shape[0] = rows;
            let data: Vec<&Data> = parts.iter().map(|t| t.data()).collect();
            let data = Data::concat(&data)?;
            Ok(Tensor::new(parts[0].dtype(), shape, data)?)
        })
        .collect()
}

/// Splits each output along dim 0 into the given batch sizes; None when an output's dim 0
/// is not the batch (the model then has to run the requests one by one).
pub fn split(outputs: &[Tensor], sizes: &[usize]) -> Result<Option<Vec<Vec<Tensor>>>> {
    let total: usize = sizes.iter().sum();
    if outputs.iter().any(|t| t.shape().first() != Some(&total)) {
        return Ok(None);
    }
    let mut out: Vec<Vec<Tensor>> = sizes.iter().map(|_| Vec::new()).collect();
    for t in outputs {
        let row = t.len() / total.max(1);
        let mut start = 0;
        for (k, &n) in sizes.iter().enumerate() {
            let mut shape = t.shape().to_vec();
            shape[0] = n;
            let idx: Vec<usize> = (start * row..(start + n) * row).collect();
            out[k].push(t.take(shape, &idx)?);
            start += n;
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Q(usize, u8, Instant);
    impl Queued for Q {
        fn batch(&self) -> usize {
            self.0
        }
        fn joins(&self, o: &Q) -> bool {
            self.1 == o.1
        }
        fn enqueued(&self) -> Instant {
            self.2
        }
    }

    fn policy(max: usize, preferred: &[usize], delay_ms: u64) -> Policy {
        Policy {
            max_batch_size: max,
            preferred: preferred.to_vec(),
            max_queue_delay: Duration::from_millis(delay_ms),
        }
    }

    #[test]
    fn batches_form_as_triton_forms_them() {
        let t = Instant::now();
        let q = |v: &[(usize, u8)]| v.iter().map(|&(b, k)| Q(b, k, t)).collect::<Vec<_>>();
        let p = policy(4, &[], 0);
        // Shapes differ: only those that join the oldest; sizes past the maximum skipped.
        assert_eq!(
            p.pick(&q(&[(1, 0), (1, 1), (2, 0), (2, 0), (1, 0)]), t, false),
            Pick::Run(vec![0, 2, 4])
        );
        assert_eq!(p.pick::<Q>(&[], t, false), Pick::Empty);
        // With a delay, a partial batch waits until the oldest has waited it...
        let p = policy(4, &[], 5);
        assert_eq!(
            p.pick(&q(&[(1, 0)]), t, false),
            Pick::WaitUntil(t + Duration::from_millis(5))
        );
        assert_eq!(
            p.pick(&q(&[(1, 0)]), t + Duration::from_millis(5), false),
            Pick::Run(vec![0])
        );
        assert_eq!(p.pick(&q(&[(1, 0)]), t, true), Pick::Run(vec![0]));
        // ...but a full or preferred one runs at once, the largest preferred formed.
        assert_eq!(
            p.pick(&q(&[(2, 0), (2, 0), (1, 0)]), t, false),
            Pick::Run(vec![0, 1])
        );
        let p = policy(8, &[2, 3], 5);
        assert_eq!(
            p.pick(&q(&[(1, 0), (1, 0), (1, 0), (1, 0)]), t, false),
            Pick::Run(vec![0, 1, 2])
        );
        // Without batching, one request at a time.
        assert_eq!(
            policy(0, &[], 5).pick(&q(&[(1, 0), (1, 0)]), t, false),
            Pick::Run(vec![0])
        );
    }

    #[test]
    fn join_then_split_gives_the_requests_back() {
        let a = Tensor::from_f32(vec![1, 2], vec![1.0, 2.0]).unwrap();
        let b = Tensor::from_f32(vec![2, 2], vec![3.0, 4.0, 5.0, 6.0]).unwrap();
        let joined = join(&[std::slice::from_ref(&a), std::slice::from_ref(&b)]).unwrap();
        assert_eq!(joined[0].shape(), &[3, 2]);
        let parts = split(&joined, &[1, 2]).unwrap().unwrap();
        assert_eq!(parts, vec![vec![a], vec![b]]);
        let scalar = Tensor::from_f32(vec![2], vec![0.0, 1.0]).unwrap();
        assert_eq!(split(&[scalar], &[1, 2]).unwrap(), None);
    }
}
