//! A [`MetricsProvider`] for prometheus-client (feature `prometheus`).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, PriorityGaugeMetric,
    SettableGaugeMetric,
};

type Labels = Vec<(String, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;

fn duration_histogram() -> Histogram {
    // component-base's buckets: 10 ns to 10 s, times ten each.
    Histogram::new(exponential_buckets(10e-9, 10.0, 10))
}

/// Records client-go's seven workqueue metrics, with the names component-base gives them
/// (`workqueue_depth`, `workqueue_adds_total`, `workqueue_queue_duration_seconds`,
/// `workqueue_work_duration_seconds`, `workqueue_unfinished_work_seconds`,
/// `workqueue_longest_running_processor_seconds`, `workqueue_retries_total`), each labelled
/// `name="<queue name>"`, in the [`Registry`] given to [`new`](Self::new).
///
/// A [`PriorityWorkQueue`](crate::PriorityWorkQueue)'s depth is labelled
/// `{name, priority}` (controller-runtime's `workqueue_depth{priority}`; kinformer's workqueue
/// metrics have no `controller` label), other queues' keep `{name}`. As controller-runtime,
/// a queue that uses more than 25 distinct priorities reports its depth under
/// `priority="exceeded_cardinality_limit"` from then on, so a priority computed from data
/// cannot grow the series without bound.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_workqueue::{PrometheusMetricsProvider, Queue, QueueConfig, WorkQueue};
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
/// let queue = WorkQueue::with_config(QueueConfig::new().name("pods").metrics_provider(provider));
/// queue.add("default/web-0");
///
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"workqueue_adds_total{name="pods"} 1"#));
/// ```
#[derive(Debug, Clone)]
pub struct PrometheusMetricsProvider {
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    latency: Family<Labels, Histogram, fn() -> Histogram>,
    work_duration: Family<Labels, Histogram, fn() -> Histogram>,
    unfinished_work: Family<Labels, FloatGauge>,
    longest_running: Family<Labels, FloatGauge>,
    retries: Family<Labels, Counter>,
}

impl PrometheusMetricsProvider {
    /// Registers the seven metric families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let provider = Self {
            depth: Family::default(),
            adds: Family::default(),
            latency: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            retries: Family::default(),
        };
        // prometheus-client ends each help text with a period itself.
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            provider.depth.clone(),
        );
        // prometheus-client appends `_total` to counters.
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            provider.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            provider.latency.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            provider.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been observed by \
             work_duration. Large values indicate stuck threads. One can deduce the number of \
             stuck threads by observing the rate at which this increases",
            provider.unfinished_work.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            provider.longest_running.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            provider.retries.clone(),
        );
        provider
    }
}

fn labels(name: &str) -> Labels {
    vec![("name".to_owned(), name.to_owned())]
}

/// controller-runtime's `maxRecommendedUniquePriorities`: the priorities it uses itself (0
/// and `LowPriority`), and room for a few more.
const MAX_PRIORITY_LABELS: usize = 25;

/// The depth of one priority queue, one gauge per priority label.
struct PromDepthByPriority {
    depth: Family<Labels, Gauge>,
    name: String,
    /// The priorities seen; `None` once more than [`MAX_PRIORITY_LABELS`] were.
    seen: Mutex<Option<BTreeSet<i32>>>,
}

impl PromDepthByPriority {
    fn gauge(&self, priority: i32) -> Gauge {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let label = match seen.as_mut() {
            Some(priorities) => {
                priorities.insert(priority);
                if priorities.len() > MAX_PRIORITY_LABELS {
                    *seen = None;
                    "exceeded_cardinality_limit".to_owned()
                } else {
                    priority.to_string()
                }
            }
            None => "exceeded_cardinality_limit".to_owned(),
        };
        let labels = vec![
            ("name".to_owned(), self.name.clone()),
            ("priority".to_owned(), label),
        ];
        self.depth.get_or_create_owned(&labels)
    }
}

impl PriorityGaugeMetric for PromDepthByPriority {
    fn inc(&self, priority: i32) {
        self.gauge(priority).inc();
    }
    fn dec(&self, priority: i32) {
        self.gauge(priority).dec();
    }
}

struct PromGauge(Gauge);
struct PromFloatGauge(FloatGauge);
struct PromCounter(Counter);
struct PromHistogram(Histogram);

impl GaugeMetric for PromGauge {
    fn inc(&self) {
        self.0.inc();
    }
    fn dec(&self) {
        self.0.dec();
    }
}
impl SettableGaugeMetric for PromFloatGauge {
    fn set(&self, value: f64) {
        self.0.set(value);
    }
}
impl CounterMetric for PromCounter {
    fn inc(&self) {
        self.0.inc();
    }
}
impl HistogramMetric for PromHistogram {
    fn observe(&self, value: f64) {
        self.0.observe(value);
    }
}

impl MetricsProvider for PrometheusMetricsProvider {
    fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric> {
        Box::new(PromGauge(self.depth.get_or_create_owned(&labels(name))))
    }
    fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        Box::new(PromCounter(self.adds.get_or_create_owned(&labels(name))))
    }
    fn new_latency_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        Box::new(PromHistogram(
            self.latency.get_or_create_owned(&labels(name)),
        ))
    }
    fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        Box::new(PromHistogram(
            self.work_duration.get_or_create_owned(&labels(name)),
        ))
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric> {
        Box::new(PromFloatGauge(
            self.unfinished_work.get_or_create_owned(&labels(name)),
        ))
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        Box::new(PromFloatGauge(
            self.longest_running.get_or_create_owned(&labels(name)),
        ))
    }
    fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        Box::new(PromCounter(self.retries.get_or_create_owned(&labels(name))))
    }
    fn new_depth_with_priority_metric(&self, name: &str) -> Option<Box<dyn PriorityGaugeMetric>> {
        Some(Box::new(PromDepthByPriority {
            depth: self.depth.clone(),
            name: name.to_owned(),
            seen: Mutex::new(Some(BTreeSet::new())),
        }))
    }
}
