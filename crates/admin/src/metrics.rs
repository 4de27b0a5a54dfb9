//! The process's metrics, in Prometheus' format through prometheus-client.
//!
//! One [`Metrics`] per process, as in client-go and controller-runtime, where metrics are
//! process-wide: [`Metrics::install`] it once at start, before building controllers and
//! queues, and everything built afterwards records into it:
//!
//! - **controllers**, under controller-runtime's names, labelled `controller`:
//!   `controller_runtime_reconcile_total{result=success|requeue_after|error}`,
//!   `controller_runtime_reconcile_errors_total`, `controller_runtime_reconcile_panics_total`,
//!   `controller_runtime_reconcile_timeouts_total` (reconciles dropped at the controller's
//!   reconcile timeout; also counted as errors, as controller-runtime counts them),
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
//!   Beside them, client-go 1.36's three informer families, named and labelled as
//!   component-base registers them (`informer_queued_items`,
//!   `informer_processing_latency_seconds`, `informer_store_resource_version`, labels `name`,
//!   `group`, `version`, `resource`), for the informers that have an identity (a factory's:
//!   its `informer_name` is the `name`). client-go had no informer metrics before 1.36 (its
//!   reflector metrics were removed from Kubernetes' components), so the `kinformer_` names
//!   are kinformer's.
//! - **shard managers**: kinformer-sharding's own collector (its feature `prometheus`),
//!   registered with [`register_collector`](Metrics::register_collector):
//!   `metrics.register_collector(manager.metrics())`.
//!
//! [`encode`](Metrics::encode) renders them all (the `server` feature serves them on
//! `/metrics`); [`registry`](Metrics::registry) takes your own metrics too.
//!
//! ```
//! use kinformer_admin::metrics::Metrics;
//! use kinformer_workqueue::{
//!     Queue, QueueConfig, RateLimitingWorkQueue, default_controller_rate_limiter,
//! };
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

use kinformer_informer_factory::{InformerStats, PROCESSING_LATENCY_BUCKETS, SharedIndexInformer};
use kinformer_workqueue::PrometheusMetricsProvider;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// Where informer statistics come from at scrape time.
type StatsSource = Box<dyn Fn() -> Vec<InformerStats> + Send + Sync>;

/// The process's metrics: see the [module docs](self).
pub struct Metrics {
    registry: Mutex<Registry>,
    informers: Arc<Mutex<Vec<StatsSource>>>,
}

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
            kinformer_controller::metrics::register(&mut registry);
            let informers: Arc<Mutex<Vec<StatsSource>>> = Arc::default();
            registry.register_collector(Box::new(InformerCollector(Arc::clone(&informers))));
            Metrics {
                registry: Mutex::new(registry),
                informers,
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

    /// Reports what `collector` reads at each scrape: kinformer-sharding's
    /// `ShardManager::metrics()`, or a collector of your own.
    pub fn register_collector(&self, collector: impl Collector + 'static) {
        self.registry().register_collector(Box::new(collector));
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
        encode_client_go_families(&mut encoder, &stats)
    }
}

/// client-go 1.36's informer metrics (component-base's `clientgo/fifo`), for the informers
/// that have an identity: `informer_queued_items`, `informer_processing_latency_seconds`,
/// `informer_store_resource_version` (its 15 least significant digits), labelled `name`,
/// `group`, `version`, `resource`.
fn encode_client_go_families(
    encoder: &mut DescriptorEncoder,
    stats: &[InformerStats],
) -> Result<(), std::fmt::Error> {
    let named: Vec<(&InformerStats, Vec<(&str, String)>)> = stats
        .iter()
        .filter_map(|s| {
            let id = s.identity.as_ref()?;
            let labels = vec![
                ("name", id.name.clone()),
                ("group", id.group.clone()),
                ("version", id.version.clone()),
                ("resource", id.resource.clone()),
            ];
            Some((s, labels))
        })
        .collect();
    if named.is_empty() {
        return Ok(());
    }
    let mut family = encoder.encode_descriptor(
        "informer_queued_items",
        "Number of items currently queued in the FIFO.",
        None,
        MetricType::Gauge,
    )?;
    for (s, labels) in &named {
        let n = i64::try_from(s.queued_items).unwrap_or(i64::MAX);
        ConstGauge::new(n).encode(family.encode_family(labels)?)?;
    }
    let mut family = encoder.encode_descriptor(
        "informer_processing_latency_seconds",
        "Time taken to process events after popping from the queue.",
        None,
        MetricType::Histogram,
    )?;
    for (s, labels) in &named {
        let latency = &s.processing_latency;
        let bounds = PROCESSING_LATENCY_BUCKETS.iter().copied().chain([f64::MAX]);
        let buckets: Vec<(f64, u64)> = bounds.zip(latency.counts.iter().copied()).collect();
        family
            .encode_family(labels)?
            .encode_histogram::<NoLabelSet>(
                latency.sum.as_secs_f64(),
                latency.count,
                &buckets,
                None,
            )?;
    }
    let mut family = encoder.encode_descriptor(
        "informer_store_resource_version",
        "The 15 least significant digits of the resource version of the store.",
        None,
        MetricType::Gauge,
    )?;
    for (s, labels) in &named {
        let rv = &s.last_sync_resource_version;
        let digits = &rv[rv.len().saturating_sub(15)..];
        // etcd's versions are numbers; others (an aggregated API's) are not graphed.
        if rv.bytes().all(|b| b.is_ascii_digit())
            && let Ok(n) = digits.parse::<i64>()
        {
            ConstGauge::new(n).encode(family.encode_family(labels)?)?;
        }
    }
    Ok(())
}
