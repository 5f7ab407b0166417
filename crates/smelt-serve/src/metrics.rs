//! Prometheus metrics with Triton's names and labels (`nv_inference_*{model, version}`),
//! so dashboards made for Triton work unchanged, in the text format Triton serves.

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The labels of every per-model metric.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Labels {
    /// The model's name.
    pub model: String,
    /// Its version.
    pub version: String,
}

/// A counter exposed under its own name, as Triton's are (`nv_inference_count`, not
/// `nv_inference_count_total`, which the OpenMetrics encoder would write).
#[derive(Debug, Default)]
pub struct Count(AtomicU64);

impl Count {
    /// Adds to the count.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The count now.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl TypedMetric for Count {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for Count {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.get())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

type Counters = Family<Labels, Count>;

/// The batch sizes the batch-size histogram counts up to (powers of two).
fn batch_buckets() -> Histogram {
    Histogram::new([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0])
}

type Batches = Family<Labels, Histogram, fn() -> Histogram>;

/// Every metric the server keeps.
pub struct Metrics {
    registry: Registry,
    success: Counters,
    failure: Counters,
    count: Counters,
    exec_count: Counters,
    request_us: Counters,
    queue_us: Counters,
    input_us: Counters,
    infer_us: Counters,
    output_us: Counters,
    batch_size: Batches,
}

/// One request's times, for the duration counters.
#[derive(Debug, Default, Clone, Copy)]
pub struct Times {
    /// From arrival to answer.
    pub request: Duration,
    /// Waiting in the batcher's queue.
    pub queue: Duration,
    /// Decoding the inputs.
    pub input: Duration,
    /// Running the model.
    pub infer: Duration,
    /// Encoding the outputs.
    pub output: Duration,
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut m = Metrics {
            registry: Registry::default(),
            success: Counters::default(),
            failure: Counters::default(),
            count: Counters::default(),
            exec_count: Counters::default(),
            request_us: Counters::default(),
            queue_us: Counters::default(),
            input_us: Counters::default(),
            infer_us: Counters::default(),
            output_us: Counters::default(),
            batch_size: Batches::new_with_constructor(batch_buckets),
        };
        let r = &mut m.registry;
        let reg = |r: &mut Registry, name: &str, help: &str, c: &Counters| {
            r.register(name, help, c.clone());
        };
        reg(
            r,
            "nv_inference_request_success",
            "Number of successful inference requests, all batch sizes",
            &m.success,
        );
        reg(
            r,
            "nv_inference_request_failure",
            "Number of failed inference requests, all batch sizes",
            &m.failure,
        );
        reg(
            r,
            "nv_inference_count",
            "Number of inferences performed (a batch of n counts n)",
            &m.count,
        );
        reg(
            r,
            "nv_inference_exec_count",
            "Number of model executions performed (a batch counts 1)",
            &m.exec_count,
        );
        reg(
            r,
            "nv_inference_request_duration_us",
            "Cumulative inference request duration in microseconds",
            &m.request_us,
        );
        reg(
            r,
            "nv_inference_queue_duration_us",
            "Cumulative inference queuing duration in microseconds",
            &m.queue_us,
        );
        reg(
            r,
            "nv_inference_compute_input_duration_us",
            "Cumulative compute input duration in microseconds",
            &m.input_us,
        );
        reg(
            r,
            "nv_inference_compute_infer_duration_us",
            "Cumulative compute inference duration in microseconds",
            &m.infer_us,
        );
        reg(
            r,
            "nv_inference_compute_output_duration_us",
            "Cumulative inference compute output duration in microseconds",
            &m.output_us,
        );
        // Not one of Triton's: the sizes of the batches the model ran (smelt's own name).
        m.registry.register(
            "smelt_batch_size",
            "Batch size of each model execution",
            m.batch_size.clone(),
        );
        m
    }
}

impl Metrics {
    /// A registry holding Triton's inference metrics.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Makes a model's series appear (at zero) before its first request.
    pub fn register_model(&self, l: &Labels) {
        for c in self.all() {
            let _ = c.get_or_create(l);
        }
    }

    fn all(&self) -> [&Counters; 9] {
        [
            &self.success,
            &self.failure,
            &self.count,
            &self.exec_count,
            &self.request_us,
            &self.queue_us,
            &self.input_us,
            &self.infer_us,
            &self.output_us,
        ]
    }

    /// Records a successful request of `batch` inferences.
    pub fn success(&self, l: &Labels, batch: usize, t: &Times) {
        self.success.get_or_create(l).add(1);
        self.count.get_or_create(l).add(batch as u64);
        self.request_us.get_or_create(l).add(us(t.request));
        self.queue_us.get_or_create(l).add(us(t.queue));
        self.input_us.get_or_create(l).add(us(t.input));
        self.infer_us.get_or_create(l).add(us(t.infer));
        self.output_us.get_or_create(l).add(us(t.output));
    }

    /// Records a failed request.
    pub fn failure(&self, l: &Labels, request: Duration) {
        self.failure.get_or_create(l).add(1);
        self.request_us.get_or_create(l).add(us(request));
    }

    /// Records one model execution (of a whole batch of `batch`).
    pub fn execution(&self, l: &Labels, batch: usize) {
        self.exec_count.get_or_create(l).add(1);
        self.batch_size.get_or_create(l).observe(batch as f64);
    }

    /// The metrics in Prometheus' text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels_are_tritons() {
        let m = Metrics::new();
        let l = Labels {
            model: "mlp".into(),
            version: "1".into(),
        };
        m.register_model(&l);
        m.execution(&l, 3);
        let t = Times {
            queue: Duration::from_micros(7),
            ..Default::default()
        };
        m.success(&l, 4, &t);
        let text = m.render();
        assert!(text.contains("# TYPE nv_inference_count counter"), "{text}");
        assert!(
            text.contains("nv_inference_count{model=\"mlp\",version=\"1\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("nv_inference_exec_count{model=\"mlp\",version=\"1\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("nv_inference_queue_duration_us{model=\"mlp\",version=\"1\"} 7\n"),
            "{text}"
        );
        assert!(
            text.contains("nv_inference_request_failure{model=\"mlp\",version=\"1\"} 0\n"),
            "{text}"
        );
        assert!(!text.contains("_total"), "{text}");
        assert!(
            text.contains("smelt_batch_size_bucket{le=\"4.0\",model=\"mlp\",version=\"1\"} 1\n"),
            "{text}"
        );
    }
}
