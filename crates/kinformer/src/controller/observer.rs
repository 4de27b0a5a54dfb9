//! What the workers report about their reconciles: to the installed
//! [`Metrics`](crate::metrics::Metrics) with the `prometheus` feature, nowhere without it.

use std::time::Duration;

use super::Outcome;

/// A controller's view of the metrics, fixed when it starts.
pub(super) struct Observer {
    #[cfg(feature = "prometheus")]
    metrics: Option<crate::metrics::ControllerMetrics>,
}

impl Observer {
    /// The observer of controller `name` with `workers` workers.
    pub(super) fn new(name: &str, workers: usize) -> Self {
        #[cfg(feature = "prometheus")]
        {
            Self {
                metrics: crate::metrics::Metrics::get().map(|m| m.controller(name, workers)),
            }
        }
        #[cfg(not(feature = "prometheus"))]
        {
            let _ = (name, workers);
            Self {}
        }
    }

    /// A worker is busy until the returned guard is dropped.
    pub(super) fn active(&self) -> Active<'_> {
        #[cfg(feature = "prometheus")]
        if let Some(m) = &self.metrics {
            m.worker_started();
        }
        Active { observer: self }
    }

    /// One reconcile ended with `outcome` after `took`.
    pub(super) fn reconciled(&self, outcome: &Outcome, took: Duration) {
        #[cfg(feature = "prometheus")]
        if let Some(m) = &self.metrics {
            m.reconciled(outcome, took);
        }
        #[cfg(not(feature = "prometheus"))]
        let _ = (outcome, took);
    }
}

/// A busy worker, counted in the active-workers gauge while it lives.
pub(super) struct Active<'a> {
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
