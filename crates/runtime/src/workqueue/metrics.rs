//! Prometheus metrics for work queues (client-go's `workqueue_*` families).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use tokio::time::Instant;

use super::lock;

/// Label set shared by every work queue metric: the queue's name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: String,
}

type HistogramFamily = Family<QueueLabels, Histogram, fn() -> Histogram>;

/// Buckets used by client-go for both duration histograms: 10ns .. 1000s.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-8, 10.0, 12))
}

/// The `workqueue_*` metric families, shared by any number of queues.
///
/// Register once per [`Registry`] with [`QueueMetrics::register`] and pass the
/// result to [`WorkQueueBuilder::metrics`](super::WorkQueueBuilder::metrics)
/// for every queue that should be instrumented; each queue's series carry a
/// `name` label with the queue's name. Queues built without metrics do no
/// metrics work at all (not even reading the clock).
///
/// Exported families (OpenMetrics text names):
///
/// | name | type | meaning |
/// |------|------|---------|
/// | `workqueue_depth` | gauge | items added and not yet handed out by `get` |
/// | `workqueue_adds_total` | counter | adds that were not deduplicated away |
/// | `workqueue_queue_duration_seconds` | histogram | time from add to `get` |
/// | `workqueue_work_duration_seconds` | histogram | time from `get` to `done` |
/// | `workqueue_unfinished_work_seconds` | gauge | summed age of items currently processing |
/// | `workqueue_longest_running_processor_seconds` | gauge | age of the oldest item currently processing |
/// | `workqueue_retries_total` | counter | calls to [`RateLimitingQueue::add_rate_limited`](super::RateLimitingQueue::add_rate_limited) |
///
/// The two "in progress" gauges are computed at scrape time by a
/// [`Collector`] that looks at the live queues' processing start times, so
/// they are always current and no background task is needed. Queues that have
/// been dropped disappear from those two gauges. Several queues may share a
/// name; their in-progress work is then summed (unfinished work) or maxed
/// (longest running) under that name.
///
/// ```
/// use prometheus_client::registry::Registry;
/// use kubewright_runtime::workqueue::{QueueMetrics, WorkQueue};
///
/// let mut registry = Registry::default();
/// let metrics = QueueMetrics::register(&mut registry);
/// let queue = WorkQueue::<String>::builder().name("pods").metrics(&metrics).build();
/// queue.add("default/nginx".to_string());
///
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).expect("encoding to a String");
/// assert!(text.contains("workqueue_depth{name=\"pods\"} 1"));
/// ```
#[derive(Clone, Debug)]
pub struct QueueMetrics {
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    queue_duration: HistogramFamily,
    work_duration: HistogramFamily,
    retries: Family<QueueLabels, Counter>,
    in_progress: Arc<InProgressCollector>,
}

impl QueueMetrics {
    /// Creates the metric families and registers them with `registry`.
    ///
    /// Call this once per registry and share the returned value (it is cheap
    /// to clone) between all queues; registering twice in the same registry
    /// would export every family twice.
    pub fn register(registry: &mut Registry) -> QueueMetrics {
        let metrics = QueueMetrics {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            retries: Family::default(),
            in_progress: Arc::new(InProgressCollector::default()),
        };
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            metrics.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            metrics.adds.clone(),
        );
        registry.register_with_unit(
            "workqueue_queue_duration",
            "How long in seconds an item stays in workqueue before being requested",
            Unit::Seconds,
            metrics.queue_duration.clone(),
        );
        registry.register_with_unit(
            "workqueue_work_duration",
            "How long in seconds processing an item from workqueue takes",
            Unit::Seconds,
            metrics.work_duration.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            metrics.retries.clone(),
        );
        registry.register_collector(Box::new(Arc::clone(&metrics.in_progress)));
        metrics
    }

    /// Resolves the per-queue series for `name` once, so that the hot path
    /// never touches the families' label maps.
    pub(crate) fn for_queue(&self, name: &str) -> QueueMetricsHandle {
        let labels = QueueLabels {
            name: name.to_owned(),
        };
        QueueMetricsHandle {
            depth: self.depth.get_or_create_owned(&labels),
            adds: self.adds.get_or_create_owned(&labels),
            queue_duration: self.queue_duration.get_or_create_owned(&labels),
            work_duration: self.work_duration.get_or_create_owned(&labels),
            retries: self.retries.get_or_create_owned(&labels),
        }
    }

    /// Starts reporting the in-progress work of a queue named `name`.
    pub(crate) fn track_in_progress(&self, name: &str, source: Weak<dyn InProgressSource>) {
        lock(&self.in_progress.sources).push((name.to_owned(), source));
    }
}

/// One queue's resolved metric series.
#[derive(Clone, Debug)]
pub(crate) struct QueueMetricsHandle {
    pub(crate) depth: Gauge,
    pub(crate) adds: Counter,
    pub(crate) queue_duration: Histogram,
    pub(crate) work_duration: Histogram,
    pub(crate) retries: Counter,
}

/// Work currently being processed by one queue's workers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct InProgress {
    /// Sum over processing items of the seconds since `get` returned them.
    pub(crate) total_seconds: f64,
    /// The largest of those ages, in seconds.
    pub(crate) longest_seconds: f64,
}

/// Something that can report its in-progress work at scrape time.
pub(crate) trait InProgressSource: Send + Sync {
    /// Measures in-progress work relative to `now`.
    fn in_progress(&self, now: Instant) -> InProgress;
}

/// Computes `workqueue_unfinished_work_seconds` and
/// `workqueue_longest_running_processor_seconds` on every scrape.
#[derive(Default)]
struct InProgressCollector {
    sources: Mutex<Vec<(String, Weak<dyn InProgressSource>)>>,
}

impl fmt::Debug for InProgressCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InProgressCollector")
            .field("queues", &lock(&self.sources).len())
            .finish()
    }
}

impl InProgressCollector {
    /// In-progress work per queue name, dropping queues that no longer exist.
    fn snapshot(&self) -> BTreeMap<String, InProgress> {
        let now = Instant::now();
        let mut live = Vec::new();
        let mut per_name: BTreeMap<String, InProgress> = BTreeMap::new();
        {
            let mut sources = lock(&self.sources);
            sources.retain(|(name, source)| match source.upgrade() {
                Some(queue) => {
                    let work = queue.in_progress(now);
                    let entry = per_name.entry(name.clone()).or_default();
                    entry.total_seconds += work.total_seconds;
                    entry.longest_seconds = entry.longest_seconds.max(work.longest_seconds);
                    // Dropped after the lock is released: this may be the last
                    // handle to the queue.
                    live.push(queue);
                    true
                }
                None => false,
            });
        }
        drop(live);
        per_name
    }
}

impl Collector for InProgressCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let per_name = self.snapshot();
        if per_name.is_empty() {
            return Ok(());
        }
        {
            let mut metric = encoder.encode_descriptor(
                "workqueue_unfinished_work",
                "How many seconds of work has been done that is in progress and hasn't been \
                 observed by work_duration. Large values indicate stuck threads. One can deduce \
                 the number of stuck threads by observing the rate at which this increases.",
                Some(&Unit::Seconds),
                MetricType::Gauge,
            )?;
            for (name, work) in &per_name {
                let labels = QueueLabels { name: name.clone() };
                ConstGauge::new(work.total_seconds).encode(metric.encode_family(&labels)?)?;
            }
        }
        let mut metric = encoder.encode_descriptor(
            "workqueue_longest_running_processor",
            "How many seconds has the longest running processor for workqueue been running.",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?;
        for (name, work) in &per_name {
            let labels = QueueLabels { name: name.clone() };
            ConstGauge::new(work.longest_seconds).encode(metric.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::workqueue::{BucketRateLimiter, WorkQueue};

    fn encode(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry)
            .expect("encoding into a String cannot fail");
        text
    }

    fn assert_line(text: &str, line: &str) {
        assert!(
            text.lines().any(|l| l == line),
            "expected line {line:?} in:\n{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn depth_adds_and_retries_are_exported() {
        let mut registry = Registry::default();
        let metrics = QueueMetrics::register(&mut registry);
        let queue = WorkQueue::builder()
            .name("test")
            .metrics(&metrics)
            .rate_limiter(BucketRateLimiter::new(1000.0, 1000).expect("valid limiter"))
            .build();

        queue.add("a");
        queue.add("b");
        queue.add("a"); // deduplicated: not counted
        let text = encode(&registry);
        assert_line(&text, "workqueue_depth{name=\"test\"} 2");
        assert_line(&text, "workqueue_adds_total{name=\"test\"} 2");
        assert_line(&text, "workqueue_retries_total{name=\"test\"} 0");

        let item = queue.get().await.expect("item");
        assert_eq!(item, "a");
        let text = encode(&registry);
        assert_line(&text, "workqueue_depth{name=\"test\"} 1");
        assert_line(
            &text,
            "workqueue_queue_duration_seconds_count{name=\"test\"} 1",
        );

        queue.add_rate_limited("a");
        queue.add_rate_limited("c");
        let text = encode(&registry);
        assert_line(&text, "workqueue_retries_total{name=\"test\"} 2");
        queue.done(&"a");
        let text = encode(&registry);
        assert_line(
            &text,
            "workqueue_work_duration_seconds_count{name=\"test\"} 1",
        );

        queue.shutdown();
        let text = encode(&registry);
        assert_line(&text, "workqueue_depth{name=\"test\"} 0");
    }

    #[tokio::test]
    async fn unnamed_queues_report_nothing() {
        let mut registry = Registry::default();
        let metrics = QueueMetrics::register(&mut registry);
        let queue = WorkQueue::builder().metrics(&metrics).build();
        queue.add(1);
        let item = queue.get().await.expect("item");
        let text = encode(&registry);
        assert!(!text.contains("name="), "unexpected series:\n{text}");
        queue.done(&item);
    }

    #[tokio::test(start_paused = true)]
    async fn durations_and_in_progress_work_are_measured() {
        let mut registry = Registry::default();
        let metrics = QueueMetrics::register(&mut registry);
        let queue = WorkQueue::builder().name("timed").metrics(&metrics).build();
        // A second queue with the same name shares the series.
        let other = WorkQueue::builder().name("timed").metrics(&metrics).build();

        queue.add(1u32);
        queue.add(2u32);
        tokio::time::advance(Duration::from_secs(3)).await;
        let first = queue.get().await.expect("item");
        tokio::time::advance(Duration::from_secs(1)).await;
        let second = queue.get().await.expect("item");
        other.add(3u32);
        let third = other.get().await.expect("item");
        tokio::time::advance(Duration::from_secs(2)).await;

        // first: 3s processing, second: 2s, third: 2s.
        let text = encode(&registry);
        assert_line(
            &text,
            "workqueue_unfinished_work_seconds{name=\"timed\"} 7.0",
        );
        assert_line(
            &text,
            "workqueue_longest_running_processor_seconds{name=\"timed\"} 3.0",
        );
        assert_line(
            &text,
            "workqueue_queue_duration_seconds_sum{name=\"timed\"} 7.0",
        );

        queue.done(&first);
        queue.done(&second);
        other.done(&third);
        let text = encode(&registry);
        assert_line(
            &text,
            "workqueue_unfinished_work_seconds{name=\"timed\"} 0.0",
        );
        assert_line(
            &text,
            "workqueue_longest_running_processor_seconds{name=\"timed\"} 0.0",
        );
        assert_line(
            &text,
            "workqueue_work_duration_seconds_sum{name=\"timed\"} 7.0",
        );
        assert_line(
            &text,
            "workqueue_work_duration_seconds_count{name=\"timed\"} 3",
        );

        drop(queue);
        drop(other);
        let text = encode(&registry);
        assert!(
            !text.contains("workqueue_unfinished_work_seconds{"),
            "dropped queues must not be reported:\n{text}"
        );
    }
}
