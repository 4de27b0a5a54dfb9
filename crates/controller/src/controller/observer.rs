//! What the workers report about their reconciles, and where it goes: controller-runtime's
//! controller metrics with the `prometheus` feature (once the process's metrics are
//! installed), nowhere without it.
//!
//! This module imports neither the controller nor the `metrics` module: the controller
//! reports through it, and installing the metrics registers its families here. So the
//! dependencies point one way, `controller` → `observer` ← `metrics`.

use std::time::Duration;

/// How one reconcile ended.
pub(crate) enum Outcome {
    Done,
    /// After the delay, at the priority if one was asked for.
    RequeueAfter(Duration, Option<i32>),
    Failed(String),
    Panicked(String),
    /// The reconcile ran past the controller's reconcile timeout and was dropped.
    TimedOut(Duration),
}

/// A controller's view of the metrics, fixed when it starts.
pub(crate) struct Observer {
    #[cfg(feature = "prometheus")]
    metrics: Option<families::ControllerMetrics>,
}

impl Observer {
    /// The observer of controller `name` with `workers` workers.
    pub(crate) fn new(name: &str, workers: usize) -> Self {
        #[cfg(feature = "prometheus")]
        {
            Self {
                metrics: families::ControllerFamilies::installed()
                    .map(|f| f.controller(name, workers)),
            }
        }
        #[cfg(not(feature = "prometheus"))]
        {
            let _ = (name, workers);
            Self {}
        }
    }

    /// A worker is busy until the returned guard is dropped.
    pub(crate) fn active(&self) -> Active<'_> {
        #[cfg(feature = "prometheus")]
        if let Some(m) = &self.metrics {
            m.worker_started();
        }
        Active { observer: self }
    }

    /// A key was not reconciled because a cache had not shown its last write (`gave_up`:
    /// it was, the bound having passed).
    /// `behind`: the group and resource of the cache behind, when known.
    pub(crate) fn stale_cache(&self, gave_up: bool, behind: Option<&(String, String)>) {
        #[cfg(feature = "prometheus")]
        if let Some(m) = &self.metrics {
            m.stale_cache(gave_up, behind);
        }
        #[cfg(not(feature = "prometheus"))]
        let _ = behind;
        #[cfg(not(feature = "prometheus"))]
        let _ = gave_up;
    }

    /// One reconcile ended with `outcome` after `took`.
    pub(crate) fn reconciled(&self, outcome: &Outcome, took: Duration) {
        #[cfg(feature = "prometheus")]
        if let Some(m) = &self.metrics {
            m.reconciled(outcome, took);
        }
        #[cfg(not(feature = "prometheus"))]
        let _ = (outcome, took);
    }
}

/// A busy worker, counted in the active-workers gauge while it lives.
pub(crate) struct Active<'a> {
    observer: &'a Observer,
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        #[cfg(feature = "prometheus")]
        if let Some(m) = &self.observer.metrics {
            m.worker_ended();
        }
        #[cfg(not(feature = "prometheus"))]
        let _ = self.observer;
    }
}

#[cfg(feature = "prometheus")]
pub(crate) use families::ControllerFamilies;

/// controller-runtime's controller families, registered once per process.
#[cfg(feature = "prometheus")]
mod families {
    use std::sync::OnceLock;
    use std::time::Duration;

    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::histogram::Histogram;
    use prometheus_client::registry::Registry;

    use super::Outcome;

    /// controller-runtime's reconcile-time buckets, in seconds.
    const RECONCILE_BUCKETS: [f64; 40] = [
        0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
        0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,
        15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
    ];

    fn reconcile_histogram() -> Histogram {
        Histogram::new(RECONCILE_BUCKETS)
    }

    type Labels = Vec<(&'static str, String)>;

    /// The families registered with the installed metrics; none until then.
    static INSTALLED: OnceLock<ControllerFamilies> = OnceLock::new();

    /// The controller families, shared by every controller.
    #[derive(Clone, Debug)]
    pub(crate) struct ControllerFamilies {
        reconciles: Family<Labels, Counter>,
        errors: Family<Labels, Counter>,
        panics: Family<Labels, Counter>,
        timeouts: Family<Labels, Counter>,
        time: Family<Labels, Histogram, fn() -> Histogram>,
        max_concurrent: Family<Labels, Gauge>,
        active: Family<Labels, Gauge>,
        stale_skips: Family<Labels, Counter>,
        stale_timeouts: Family<Labels, Counter>,
        stale_sync_skips: Family<Labels, Counter>,
    }

    impl ControllerFamilies {
        /// Registers the families in `registry` and makes them the ones every controller
        /// started from now on records into. Called once, when the metrics are installed.
        pub(crate) fn install(registry: &mut Registry) {
            let families = INSTALLED.get_or_init(|| Self {
                reconciles: Family::default(),
                errors: Family::default(),
                panics: Family::default(),
                timeouts: Family::default(),
                time: Family::new_with_constructor(reconcile_histogram),
                max_concurrent: Family::default(),
                active: Family::default(),
                stale_skips: Family::default(),
                stale_timeouts: Family::default(),
                stale_sync_skips: Family::default(),
            });
            // prometheus-client appends `_total` to counters and a period to help texts.
            registry.register(
                "controller_runtime_reconcile",
                "Total number of reconciliations per controller",
                families.reconciles.clone(),
            );
            registry.register(
                "controller_runtime_reconcile_errors",
                "Total number of reconciliation errors per controller",
                families.errors.clone(),
            );
            registry.register(
                "controller_runtime_reconcile_panics",
                "Total number of reconciliation panics per controller",
                families.panics.clone(),
            );
            registry.register(
                "controller_runtime_reconcile_timeouts",
                "Total number of reconciliation timeouts per controller",
                families.timeouts.clone(),
            );
            registry.register(
                "controller_runtime_reconcile_time_seconds",
                "Length of time per reconciliation per controller",
                families.time.clone(),
            );
            registry.register(
                "controller_runtime_max_concurrent_reconciles",
                "Maximum number of concurrent reconciles per controller",
                families.max_concurrent.clone(),
            );
            registry.register(
                "controller_runtime_active_workers",
                "Number of currently used workers per controller",
                families.active.clone(),
            );
            // kinformer's own (no framework has them): read your own writes.
            registry.register(
                "kinformer_reconcile_stale_cache_skips",
                "Reconciles put off because a cache had not shown the key's last write",
                families.stale_skips.clone(),
            );
            registry.register(
                "kinformer_reconcile_stale_cache_timeouts",
                "Reconciles run with a cache still behind the key's last write, the read-your-writes timeout having passed",
                families.stale_timeouts.clone(),
            );
            // The same skips under the name Kubernetes 1.36's own controllers give them
            // (KEP-5647: `job_controller_stale_sync_skips_total{group, resource}`), the
            // controller a label rather than a prefix.
            registry.register(
                "stale_sync_skips",
                "Syncs skipped due to a stale cache, by controller and the group and resource of the cache behind",
                families.stale_sync_skips.clone(),
            );
        }

        /// The installed families, if the metrics are installed.
        pub(super) fn installed() -> Option<&'static Self> {
            INSTALLED.get()
        }

        /// The metrics of controller `name`, which runs `workers` workers.
        pub(super) fn controller(&self, name: &str, workers: usize) -> ControllerMetrics {
            let labels = vec![("controller", name.to_owned())];
            self.max_concurrent
                .get_or_create(&labels)
                .set(i64::try_from(workers).unwrap_or(i64::MAX));
            ControllerMetrics {
                families: self.clone(),
                labels,
            }
        }
    }

    /// One controller's view of the controller families.
    pub(super) struct ControllerMetrics {
        families: ControllerFamilies,
        labels: Labels,
    }

    impl ControllerMetrics {
        pub(super) fn reconciled(&self, outcome: &Outcome, took: Duration) {
            let result = match outcome {
                Outcome::Done => "success",
                Outcome::RequeueAfter(..) => "requeue_after",
                Outcome::Failed(_) | Outcome::Panicked(_) | Outcome::TimedOut(_) => "error",
            };
            let mut with_result = self.labels.clone();
            with_result.push(("result", result.to_owned()));
            self.families.reconciles.get_or_create(&with_result).inc();
            if matches!(
                outcome,
                Outcome::Failed(_) | Outcome::Panicked(_) | Outcome::TimedOut(_)
            ) {
                self.families.errors.get_or_create(&self.labels).inc();
            }
            if matches!(outcome, Outcome::Panicked(_)) {
                self.families.panics.get_or_create(&self.labels).inc();
            }
            if matches!(outcome, Outcome::TimedOut(_)) {
                self.families.timeouts.get_or_create(&self.labels).inc();
            }
            self.families
                .time
                .get_or_create(&self.labels)
                .observe(took.as_secs_f64());
        }

        pub(super) fn stale_cache(&self, gave_up: bool, behind: Option<&(String, String)>) {
            if gave_up {
                self.families
                    .stale_timeouts
                    .get_or_create(&self.labels)
                    .inc();
                return;
            }
            self.families.stale_skips.get_or_create(&self.labels).inc();
            let (group, resource) = behind.cloned().unwrap_or_default();
            let mut labels = self.labels.clone();
            labels.push(("group", group));
            labels.push(("resource", resource));
            self.families.stale_sync_skips.get_or_create(&labels).inc();
        }

        pub(super) fn worker_started(&self) {
            self.families.active.get_or_create(&self.labels).inc();
        }

        pub(super) fn worker_ended(&self) {
            self.families.active.get_or_create(&self.labels).dec();
        }
    }
}
