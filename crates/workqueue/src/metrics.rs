//! Metrics hooks: client-go's seven workqueue metrics, recorded only for a named queue.
//!
//! | client-go / prometheus name                        | hook                                                        |
//! | -------------------------------------------------- | ----------------------------------------------------------- |
//! | `workqueue_depth`                                  | [`MetricsProvider::new_depth_metric`]                       |
//! | `workqueue_adds_total`                             | [`MetricsProvider::new_adds_metric`]                        |
//! | `workqueue_queue_duration_seconds`                 | [`MetricsProvider::new_latency_metric`]                     |
//! | `workqueue_work_duration_seconds`                  | [`MetricsProvider::new_work_duration_metric`]               |
//! | `workqueue_unfinished_work_seconds`                | [`MetricsProvider::new_unfinished_work_seconds_metric`]     |
//! | `workqueue_longest_running_processor_seconds`      | [`MetricsProvider::new_longest_running_processor_seconds_metric`] |
//! | `workqueue_retries_total`                          | [`MetricsProvider::new_retries_metric`]                     |
//!
//! Each is labelled with the queue's name. A [`PriorityWorkQueue`](crate::PriorityWorkQueue)
//! labels its depth with the priority too, when its provider makes such a gauge
//! ([`MetricsProvider::new_depth_with_priority_metric`]: controller-runtime's
//! `workqueue_depth{priority}`); other queues, and providers that make none, keep the gauge
//! labelled with the name alone. A queue without a name, or without a provider
//! (none in its [`QueueConfig`](crate::QueueConfig) and none set with
//! [`set_metrics_provider`]), records nothing and pays nothing: no timestamps are kept.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::{Clock, Error, HashMap, Item};

/// How often a named queue refreshes its unfinished-work gauges on a real clock (client-go's
/// period). On a fake clock they are refreshed on every step instead.
pub(crate) const UNFINISHED_WORK_UPDATE_PERIOD: std::time::Duration =
    std::time::Duration::from_millis(500);

/// A value that goes up and down by one (the queue depth).
pub trait GaugeMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
    /// Subtracts one.
    fn dec(&self);
}

/// A gauge per priority (the depth of a [`PriorityWorkQueue`](crate::PriorityWorkQueue)):
/// controller-runtime's `DepthMetricWithPriority`.
pub trait PriorityGaugeMetric: Send + Sync {
    /// Adds one to the gauge of `priority`.
    fn inc(&self, priority: i32);
    /// Subtracts one from the gauge of `priority`.
    fn dec(&self, priority: i32);
}

/// A value that is set outright (the unfinished-work gauges).
pub trait SettableGaugeMetric: Send + Sync {
    /// Sets the value.
    fn set(&self, value: f64);
}

/// A value that only goes up (adds, retries).
pub trait CounterMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
}

/// A distribution of observations, in seconds (queue latency, work duration).
pub trait HistogramMetric: Send + Sync {
    /// Records one observation.
    fn observe(&self, value: f64);
}

/// Makes the metrics of one named queue.
///
/// Why a trait: the queue must not depend on one metrics library. client-go has the same
/// interface (`MetricsProvider`) and component-base plugs prometheus into it; here the
/// `prometheus` feature provides `PrometheusMetricsProvider`
/// and anything else can implement these seven constructors. Each is called once per queue,
/// with the queue's name.
pub trait MetricsProvider: Send + Sync {
    /// `depth`: how many items are waiting to be handed out.
    fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric>;
    /// `adds`: how many adds the queue accepted (duplicates of a queued item are not adds).
    fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric>;
    /// `queue_duration_seconds`: how long an item waited between add and get.
    fn new_latency_metric(&self, name: &str) -> Box<dyn HistogramMetric>;
    /// `work_duration_seconds`: how long an item was held between get and done.
    fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric>;
    /// `unfinished_work_seconds`: the summed age of every item currently held.
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric>;
    /// `longest_running_processor_seconds`: the age of the oldest item currently held.
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Box<dyn SettableGaugeMetric>;
    /// `retries`: how many `add_after` calls the delaying queue took.
    fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric>;
    /// `depth` labelled by priority, for a [`PriorityWorkQueue`](crate::PriorityWorkQueue)
    /// (controller-runtime's `MetricsProviderWithPriority`); called once per queue, instead
    /// of [`new_depth_metric`](Self::new_depth_metric). The default, `None`, means "no
    /// priority label": the queue then counts its depth in `new_depth_metric`'s gauge, so a
    /// provider written for the other queues works unchanged.
    fn new_depth_with_priority_metric(&self, name: &str) -> Option<Box<dyn PriorityGaugeMetric>> {
        let _ = name;
        None
    }
}

/// A provider whose metrics record nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopMetricsProvider;

struct Noop;

impl GaugeMetric for Noop {
    fn inc(&self) {}
    fn dec(&self) {}
}
impl SettableGaugeMetric for Noop {
    fn set(&self, _: f64) {}
}
impl CounterMetric for Noop {
    fn inc(&self) {}
}
impl HistogramMetric for Noop {
    fn observe(&self, _: f64) {}
}

impl MetricsProvider for NoopMetricsProvider {
    fn new_depth_metric(&self, _: &str) -> Box<dyn GaugeMetric> {
        Box::new(Noop)
    }
    fn new_adds_metric(&self, _: &str) -> Box<dyn CounterMetric> {
        Box::new(Noop)
    }
    fn new_latency_metric(&self, _: &str) -> Box<dyn HistogramMetric> {
        Box::new(Noop)
    }
    fn new_work_duration_metric(&self, _: &str) -> Box<dyn HistogramMetric> {
        Box::new(Noop)
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Box<dyn SettableGaugeMetric> {
        Box::new(Noop)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        Box::new(Noop)
    }
    fn new_retries_metric(&self, _: &str) -> Box<dyn CounterMetric> {
        Box::new(Noop)
    }
}

static GLOBAL_PROVIDER: OnceLock<Arc<dyn MetricsProvider>> = OnceLock::new();

/// Sets the provider used by every queue created afterwards whose config names no provider
/// (client-go's `workqueue.SetProvider`). Only the first call has an effect; later calls
/// return [`Error::MetricsProviderAlreadySet`].
pub fn set_metrics_provider(provider: Arc<dyn MetricsProvider>) -> Result<(), Error> {
    GLOBAL_PROVIDER
        .set(provider)
        .map_err(|_| Error::MetricsProviderAlreadySet)
}

/// The provider for a queue: its own, else the global one, else none.
pub(crate) fn resolve_provider(
    own: Option<&Arc<dyn MetricsProvider>>,
) -> Option<Arc<dyn MetricsProvider>> {
    own.or_else(|| GLOBAL_PROVIDER.get()).cloned()
}

/// The depth gauge: one per queue, or one per priority.
enum Depth {
    Plain(Box<dyn GaugeMetric>),
    ByPriority(Box<dyn PriorityGaugeMetric>),
}

impl Depth {
    fn inc(&self, priority: i32) {
        match self {
            Depth::Plain(gauge) => gauge.inc(),
            Depth::ByPriority(gauge) => gauge.inc(priority),
        }
    }

    fn dec(&self, priority: i32) {
        match self {
            Depth::Plain(gauge) => gauge.dec(),
            Depth::ByPriority(gauge) => gauge.dec(priority),
        }
    }
}

/// The metrics of one named queue, updated under the queue's lock (as client-go does).
pub(crate) struct QueueMetrics<T> {
    clock: Arc<dyn Clock>,
    depth: Depth,
    adds: Box<dyn CounterMetric>,
    latency: Box<dyn HistogramMetric>,
    work_duration: Box<dyn HistogramMetric>,
    unfinished_work: Box<dyn SettableGaugeMetric>,
    longest_running: Box<dyn SettableGaugeMetric>,
    added_at: HashMap<T, Instant>,
    started_at: HashMap<T, Instant>,
}

impl<T: Item> QueueMetrics<T> {
    pub(crate) fn new(provider: &dyn MetricsProvider, name: &str, clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            depth: Depth::Plain(provider.new_depth_metric(name)),
            adds: provider.new_adds_metric(name),
            latency: provider.new_latency_metric(name),
            work_duration: provider.new_work_duration_metric(name),
            unfinished_work: provider.new_unfinished_work_seconds_metric(name),
            longest_running: provider.new_longest_running_processor_seconds_metric(name),
            added_at: HashMap::default(),
            started_at: HashMap::default(),
        }
    }

    /// The metrics of a queue with priorities: its depth by priority if `provider` makes
    /// such a gauge.
    pub(crate) fn with_priority(
        provider: &dyn MetricsProvider,
        name: &str,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let depth = match provider.new_depth_with_priority_metric(name) {
            Some(gauge) => Depth::ByPriority(gauge),
            None => Depth::Plain(provider.new_depth_metric(name)),
        };
        Self {
            clock,
            depth,
            adds: provider.new_adds_metric(name),
            latency: provider.new_latency_metric(name),
            work_duration: provider.new_work_duration_metric(name),
            unfinished_work: provider.new_unfinished_work_seconds_metric(name),
            longest_running: provider.new_longest_running_processor_seconds_metric(name),
            added_at: HashMap::default(),
            started_at: HashMap::default(),
        }
    }

    /// An item became dirty (ready to be handed out, at `priority`).
    pub(crate) fn add(&mut self, item: &T, priority: i32) {
        self.adds.inc();
        self.depth.inc(priority);
        if !self.added_at.contains_key(item) {
            self.added_at.insert(item.clone(), self.clock.now());
        }
    }

    /// A ready item's priority was raised: it moves from one depth gauge to the other.
    pub(crate) fn reprioritize(&mut self, from: i32, to: i32) {
        if let Depth::ByPriority(gauge) = &self.depth {
            gauge.dec(from);
            gauge.inc(to);
        }
    }

    /// An item was handed out (it was ready at `priority`).
    pub(crate) fn get(&mut self, item: &T, priority: i32) {
        self.depth.dec(priority);
        let now = self.clock.now();
        self.started_at.insert(item.clone(), now);
        if let Some(added) = self.added_at.remove(item) {
            self.latency
                .observe(now.saturating_duration_since(added).as_secs_f64());
        }
    }

    /// An item was marked done.
    pub(crate) fn done(&mut self, item: &T) {
        if let Some(started) = self.started_at.remove(item) {
            let now = self.clock.now();
            self.work_duration
                .observe(now.saturating_duration_since(started).as_secs_f64());
        }
    }

    /// The summed age of the items currently held, and the oldest one's: what the two
    /// unfinished-work gauges show, and [`QueueStats`](crate::QueueStats) too.
    pub(crate) fn unfinished_work(&self) -> (Duration, Duration) {
        let now = self.clock.now();
        let mut total = Duration::ZERO;
        let mut oldest = Duration::ZERO;
        for started in self.started_at.values() {
            let age = now.saturating_duration_since(*started);
            total = total.saturating_add(age);
            oldest = oldest.max(age);
        }
        (total, oldest)
    }

    /// Refreshes the two unfinished-work gauges from the items currently held.
    pub(crate) fn update_unfinished_work(&mut self) {
        let (total, oldest) = self.unfinished_work();
        self.unfinished_work.set(total.as_secs_f64());
        self.longest_running.set(oldest.as_secs_f64());
    }
}

/// A delaying layer's retries: the `retries` metric of a named queue with a provider, and a
/// count for [`QueueStats::retries`](crate::QueueStats::retries) always (one relaxed add).
pub(crate) struct Retries {
    metric: Option<Box<dyn CounterMetric>>,
    count: AtomicU64,
}

impl Retries {
    /// The retries of the queue `name` (no metric for an unnamed queue), with the provider
    /// of `own` or the global one.
    pub(crate) fn new(own: Option<&Arc<dyn MetricsProvider>>, name: &str) -> Self {
        let metric = if name.is_empty() {
            None
        } else {
            resolve_provider(own).map(|provider| provider.new_retries_metric(name))
        };
        Self {
            metric,
            count: AtomicU64::new(0),
        }
    }

    /// Counts one retry.
    pub(crate) fn inc(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
        if let Some(metric) = &self.metric {
            metric.inc();
        }
    }

    /// The retries counted so far.
    pub(crate) fn get(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

impl<T> fmt::Debug for QueueMetrics<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueMetrics").finish_non_exhaustive()
    }
}
