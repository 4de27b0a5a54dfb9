//! Metrics, in Prometheus' format through prometheus-client (feature `prometheus`).
//!
//! One [`Metrics`] per process, as in client-go and controller-runtime, where metrics are
//! process-wide: [`Metrics::install`] it once at start, before building controllers and
//! queues, and everything built afterwards records into it:
//!
//! - **controllers**, under controller-runtime's names, labelled `controller`:
//!   `controller_runtime_reconcile_total{result=success|requeue_after|error}`,
//!   `controller_runtime_reconcile_errors_total`, `controller_runtime_reconcile_panics_total`,
//!   `controller_runtime_reconcile_time_seconds` (histogram, controller-runtime's buckets),
//!   `controller_runtime_max_concurrent_reconciles`, `controller_runtime_active_workers`;
//! - **work queues** with a name (a controller's is named after it), under client-go's
//!   names: `workqueue_depth`, `workqueue_adds_total`, `workqueue_queue_duration_seconds`,
//!   `workqueue_work_duration_seconds`, `workqueue_unfinished_work_seconds`,
//!   `workqueue_longest_running_processor_seconds`, `workqueue_retries_total`;
//! - **informers** you register ([`register_informer`](Metrics::register_informer),
//!   [`register_factory`](Metrics::register_factory)), read at each scrape, labelled
//!   `informer`: `kinformer_informer_synced`, `kinformer_informer_objects`,
//!   `kinformer_informer_last_sync_resource_version`, `kinformer_reflector_lists_total{reason}`,
//!   `kinformer_reflector_watches_total`, `kinformer_reflector_watch_events_total{type}`,
//!   `kinformer_reflector_undecodable_objects_total` (objects skipped because they did not
//!   decode as the informer's type).
//!   client-go has no informer metrics today (its reflector metrics were removed from
//!   Kubernetes' components), so these names are kinformer's.
//! - **shard managers** you register
//!   ([`register_shard_manager`](Metrics::register_shard_manager), feature `kube`), read at
//!   each scrape, labelled `manager` and `identity`: `kinformer_shards_held`,
//!   `kinformer_shards_live_replicas`, `kinformer_shard_moves_total` (shards given up to
//!   re-balance).
//!
//! [`encode`](Metrics::encode) renders them all (the `server` feature serves them on
//! `/metrics`); [`registry`](Metrics::registry) takes your own metrics too.
//!
//! ```
//! use kinformer::metrics::Metrics;
//! use kinformer::prelude::*;
//!
//! let metrics = Metrics::install();
//! let queue = RateLimitingWorkQueue::<&str>::with_config(
//!     default_controller_rate_limiter(),
//!     QueueConfig::new().name("docs"),
//! );
//! queue.add("a");
//! let text = metrics.encode()?;
//! assert!(text.contains(r#"workqueue_adds_total{name="docs"} 1"#));
//! # Ok::<(), std::fmt::Error>(())
//! ```

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use kinformer_informer_factory::{InformerStats, SharedIndexInformer};
use kinformer_workqueue::PrometheusMetricsProvider;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::controller::Outcome;

/// controller-runtime's reconcile-time buckets, in seconds.
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_BUCKETS)
}

type Labels = Vec<(&'static str, String)>;

/// The controller families, shared by every controller.
#[derive(Clone, Debug)]
struct ControllerFamilies {
    reconciles: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    panics: Family<Labels, Counter>,
    time: Family<Labels, Histogram, fn() -> Histogram>,
    max_concurrent: Family<Labels, Gauge>,
    active: Family<Labels, Gauge>,
}

/// Where informer statistics come from at scrape time.
type StatsSource = Box<dyn Fn() -> Vec<InformerStats> + Send + Sync>;

/// The process's metrics: see the [module docs](self).
pub struct Metrics {
    registry: Mutex<Registry>,
    controllers: ControllerFamilies,
    informers: Arc<Mutex<Vec<StatsSource>>>,
    shard_managers: Arc<Mutex<Vec<ShardSource>>>,
}

/// A registered shard manager's state, read at a scrape.
struct ShardStats {
    manager: String,
    identity: String,
    held: usize,
    live: usize,
    moves: u64,
}

type ShardSource = Box<dyn Fn() -> ShardStats + Send + Sync>;

static INSTALLED: OnceLock<Metrics> = OnceLock::new();

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Installs the process's metrics, or returns the ones installed before: the
    /// controller families are registered, and the work queues' global metrics provider is
    /// set, and with the `kube` feature the leader electors' (client-go's
    /// `leader_election_master_status`, `leader_election_slowpath_total`, plus
    /// `leader_election_transitions_total`). If something else set a global provider first,
    /// it is kept and a warning says so.
    pub fn install() -> &'static Metrics {
        INSTALLED.get_or_init(|| {
            let mut registry = Registry::default();
            let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
            if kinformer_workqueue::set_metrics_provider(provider).is_err() {
                tracing::warn!(
                    "a global workqueue metrics provider was already set: queue metrics go there"
                );
            }
            #[cfg(feature = "kube")]
            {
                let provider = Arc::new(
                    kinformer_leaderelection::PrometheusMetricsProvider::new(&mut registry),
                );
                if kinformer_leaderelection::set_metrics_provider(provider).is_err() {
                    tracing::warn!(
                        "a global leader election metrics provider was already set: elector metrics go there"
                    );
                }
            }
            let controllers = ControllerFamilies {
                reconciles: Family::default(),
                errors: Family::default(),
                panics: Family::default(),
                time: Family::new_with_constructor(reconcile_histogram),
                max_concurrent: Family::default(),
                active: Family::default(),
            };
            // prometheus-client appends `_total` to counters and a period to help texts.
            registry.register(
                "controller_runtime_reconcile",
                "Total number of reconciliations per controller",
                controllers.reconciles.clone(),
            );
            registry.register(
                "controller_runtime_reconcile_errors",
                "Total number of reconciliation errors per controller",
                controllers.errors.clone(),
            );
            registry.register(
                "controller_runtime_reconcile_panics",
                "Total number of reconciliation panics per controller",
                controllers.panics.clone(),
            );
            registry.register(
                "controller_runtime_reconcile_time_seconds",
                "Length of time per reconciliation per controller",
                controllers.time.clone(),
            );
            registry.register(
                "controller_runtime_max_concurrent_reconciles",
                "Maximum number of concurrent reconciles per controller",
                controllers.max_concurrent.clone(),
            );
            registry.register(
                "controller_runtime_active_workers",
                "Number of currently used workers per controller",
                controllers.active.clone(),
            );
            let informers: Arc<Mutex<Vec<StatsSource>>> = Arc::default();
            registry.register_collector(Box::new(InformerCollector(Arc::clone(&informers))));
            let shard_managers: Arc<Mutex<Vec<ShardSource>>> = Arc::default();
            registry.register_collector(Box::new(ShardCollector(Arc::clone(&shard_managers))));
            Metrics {
                registry: Mutex::new(registry),
                controllers,
                informers,
                shard_managers,
            }
        })
    }

    /// The installed metrics, if [`install`](Self::install) was called.
    pub fn get() -> Option<&'static Metrics> {
        INSTALLED.get()
    }

    /// The registry, to register metrics of your own beside kinformer's.
    pub fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every metric, in the OpenMetrics text format (what `/metrics` serves).
    ///
    /// # Errors
    /// When a metric cannot be written (prometheus-client's formatting error).
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry())?;
        Ok(text)
    }

    /// Reports on `informer` at each scrape (kept alive by the metrics from now on).
    pub fn register_informer<K>(&self, informer: &SharedIndexInformer<K>)
    where
        K: kinformer_core::MetaObject + Send + Sync + 'static,
    {
        let informer = informer.clone();
        self.register_stats(move || vec![informer.stats()]);
    }

    /// Reports on every informer of `factory`, those requested later included, at each
    /// scrape (the factory is kept alive by the metrics from now on).
    #[cfg(feature = "kube")]
    pub fn register_factory(&self, factory: &kinformer_informer_factory::SharedInformerFactory) {
        let factory = factory.clone();
        self.register_stats(move || factory.informer_stats());
    }

    /// Reports at each scrape on the informers `source` describes.
    pub fn register_stats(&self, source: impl Fn() -> Vec<InformerStats> + Send + Sync + 'static) {
        self.informers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Box::new(source));
    }

    /// Reports on `manager` at each scrape (kept alive by the metrics from now on): the
    /// shards it holds, the live replicas it saw last, the shards it gave up to re-balance.
    #[cfg(feature = "kube")]
    pub fn register_shard_manager<L>(&self, manager: &Arc<crate::sharding::ShardManager<L>>)
    where
        L: Send + Sync + 'static,
    {
        let manager = Arc::clone(manager);
        self.shard_managers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Box::new(move || ShardStats {
                manager: manager.config().name.clone(),
                identity: manager.identity().to_owned(),
                held: manager.held().len(),
                live: manager.live_replicas(),
                moves: manager.moves(),
            }));
    }

    /// The metrics of controller `name`, which runs `workers` workers.
    pub(crate) fn controller(&self, name: &str, workers: usize) -> ControllerMetrics {
        let labels = vec![("controller", name.to_owned())];
        self.controllers
            .max_concurrent
            .get_or_create(&labels)
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
        ControllerMetrics {
            families: self.controllers.clone(),
            labels,
        }
    }
}

/// One controller's view of the controller families.
pub(crate) struct ControllerMetrics {
    families: ControllerFamilies,
    labels: Labels,
}

impl ControllerMetrics {
    pub(crate) fn reconciled(&self, outcome: &Outcome, took: Duration) {
        let result = match outcome {
            Outcome::Done => "success",
            Outcome::RequeueAfter(_) => "requeue_after",
            Outcome::Failed(_) | Outcome::Panicked(_) => "error",
        };
        let mut with_result = self.labels.clone();
        with_result.push(("result", result.to_owned()));
        self.families.reconciles.get_or_create(&with_result).inc();
        if matches!(outcome, Outcome::Failed(_) | Outcome::Panicked(_)) {
            self.families.errors.get_or_create(&self.labels).inc();
        }
        if matches!(outcome, Outcome::Panicked(_)) {
            self.families.panics.get_or_create(&self.labels).inc();
        }
        self.families
            .time
            .get_or_create(&self.labels)
            .observe(took.as_secs_f64());
    }

    pub(crate) fn worker_started(&self) {
        self.families.active.get_or_create(&self.labels).inc();
    }

    pub(crate) fn worker_ended(&self) {
        self.families.active.get_or_create(&self.labels).dec();
    }
}

/// Reads the registered shard managers' state at each scrape.
struct ShardCollector(Arc<Mutex<Vec<ShardSource>>>);

impl std::fmt::Debug for ShardCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardCollector").finish_non_exhaustive()
    }
}

impl Collector for ShardCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats: Vec<ShardStats> = {
            let sources = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            sources.iter().map(|source| source()).collect()
        };
        if stats.is_empty() {
            return Ok(());
        }
        let labels = |s: &ShardStats| {
            vec![
                ("manager", s.manager.clone()),
                ("identity", s.identity.clone()),
            ]
        };
        let gauge = |n: usize| ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX));
        let mut family = encoder.encode_descriptor(
            "kinformer_shards_held",
            "How many shard Leases this replica holds",
            None,
            MetricType::Gauge,
        )?;
        for s in &stats {
            gauge(s.held).encode(family.encode_family(&labels(s))?)?;
        }
        let mut family = encoder.encode_descriptor(
            "kinformer_shards_live_replicas",
            "The live replicas the shard manager saw at its last retry",
            None,
            MetricType::Gauge,
        )?;
        for s in &stats {
            gauge(s.live).encode(family.encode_family(&labels(s))?)?;
        }
        let mut family = encoder.encode_descriptor(
            "kinformer_shard_moves",
            "Shards given up to re-balance",
            None,
            MetricType::Counter,
        )?;
        for s in &stats {
            ConstCounter::new(s.moves).encode(family.encode_family(&labels(s))?)?;
        }
        Ok(())
    }
}

/// Reads the registered informers' statistics at each scrape.
struct InformerCollector(Arc<Mutex<Vec<StatsSource>>>);

impl std::fmt::Debug for InformerCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerCollector").finish_non_exhaustive()
    }
}

impl Collector for InformerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats: Vec<InformerStats> = {
            let sources = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            sources.iter().flat_map(|source| source()).collect()
        };
        if stats.is_empty() {
            return Ok(());
        }
        let informer = |s: &InformerStats| vec![("informer", s.name.clone())];

        let mut family = encoder.encode_descriptor(
            "kinformer_informer_synced",
            "Whether the informer's first list has been applied to its cache (1) or not (0)",
            None,
            MetricType::Gauge,
        )?;
        for s in &stats {
            ConstGauge::new(i64::from(s.synced)).encode(family.encode_family(&informer(s))?)?;
        }
        let mut family = encoder.encode_descriptor(
            "kinformer_informer_objects",
            "How many objects the informer's cache holds",
            None,
            MetricType::Gauge,
        )?;
        for s in &stats {
            let n = i64::try_from(s.objects).unwrap_or(i64::MAX);
            ConstGauge::new(n).encode(family.encode_family(&informer(s))?)?;
        }
        let mut family = encoder.encode_descriptor(
            "kinformer_informer_last_sync_resource_version",
            "The resource version of the informer's last list, event or bookmark, where numeric",
            None,
            MetricType::Gauge,
        )?;
        for s in &stats {
            // etcd's versions are numbers; others (an aggregated API's) are not graphed.
            if let Ok(rv) = s.last_sync_resource_version.parse::<i64>() {
                ConstGauge::new(rv).encode(family.encode_family(&informer(s))?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "kinformer_reflector_lists",
            "Lists (paged or streaming) the informer's reflector started, by reason",
            None,
            MetricType::Counter,
        )?;
        for s in &stats {
            for (reason, n) in &s.reflector.lists {
                let mut labels = informer(s);
                labels.push(("reason", (*reason).to_owned()));
                ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "kinformer_reflector_watches",
            "Watches the informer's reflector started",
            None,
            MetricType::Counter,
        )?;
        for s in &stats {
            ConstCounter::new(s.reflector.watches).encode(family.encode_family(&informer(s))?)?;
        }
        let mut family = encoder.encode_descriptor(
            "kinformer_reflector_watch_events",
            "Watch events the informer's reflector received, by type",
            None,
            MetricType::Counter,
        )?;
        for s in &stats {
            for (kind, n) in &s.reflector.events {
                let mut labels = informer(s);
                labels.push(("type", (*kind).to_owned()));
                ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "kinformer_reflector_undecodable_objects",
            "Objects the informer's reflector skipped because they did not decode as its type",
            None,
            MetricType::Counter,
        )?;
        for s in &stats {
            ConstCounter::new(s.reflector.undecodable)
                .encode(family.encode_family(&informer(s))?)?;
        }
        Ok(())
    }
}
