//! Metrics hooks: client-go's leader election metrics, plus leadership transitions.
//!
//! | prometheus name (component-base)  | hook                              | what                                   |
//! | --------------------------------- | --------------------------------- | -------------------------------------- |
//! | `leader_election_master_status`   | [`LeaderMetric::on`] / [`off`]    | 1 while this process leads, else 0     |
//! | `leader_election_slowpath_total`  | [`LeaderMetric::slowpath_exercised`] | renewals that had to read the record first (the optimistic write failed) |
//! | `leader_election_transitions_total` | [`LeaderMetric::transition`]    | times this process became the leader (not in client-go) |
//!
//! Each is labelled with the election's name
//! ([`LeaderElectionConfig::name`](crate::LeaderElectionConfig::name)). client-go has no
//! transitions metric; summed over the replicas, this one counts the election's leader
//! changes (what the record's `leaseTransitions` counts, but per process, so a flapping
//! replica shows).
//!
//! [`off`]: LeaderMetric::off

use std::sync::{Arc, OnceLock};

use crate::Error;

/// The metrics of one elector (client-go's `LeaderMetric`, plus
/// [`transition`](Self::transition)). Each call names the election.
pub trait LeaderMetric: Send + Sync {
    /// This process leads the election `name` (the gauge goes to 1).
    fn on(&self, name: &str);
    /// This process does not lead `name` (the gauge goes to 0). Also called when the elector
    /// is made, so the gauge exists from the start.
    fn off(&self, name: &str);
    /// A renewal of `name` took the slow path: the optimistic write failed, the record was
    /// read again.
    fn slowpath_exercised(&self, name: &str);
    /// This process became the leader of `name`.
    fn transition(&self, name: &str) {
        let _ = name;
    }
}

/// Makes the metrics of each elector (client-go's `MetricsProvider`).
///
/// Why a trait: the elector must not depend on one metrics library. The `prometheus`
/// feature provides `PrometheusMetricsProvider`; anything else implements this.
pub trait MetricsProvider: Send + Sync {
    /// The metrics of a new elector.
    fn new_leader_metric(&self) -> Box<dyn LeaderMetric>;
}

/// A provider whose metrics record nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopMetricsProvider;

struct Noop;

impl LeaderMetric for Noop {
    fn on(&self, _: &str) {}
    fn off(&self, _: &str) {}
    fn slowpath_exercised(&self, _: &str) {}
}

impl MetricsProvider for NoopMetricsProvider {
    fn new_leader_metric(&self) -> Box<dyn LeaderMetric> {
        Box::new(Noop)
    }
}

static GLOBAL_PROVIDER: OnceLock<Arc<dyn MetricsProvider>> = OnceLock::new();

/// Sets the provider of every elector built afterwards without one of its own
/// ([`LeaderElectorBuilder::metrics_provider`](crate::LeaderElectorBuilder::metrics_provider)),
/// as client-go's `leaderelection.SetProvider`.
///
/// # Errors
/// Only the first call has an effect; later ones return
/// [`Error::MetricsProviderAlreadySet`].
pub fn set_metrics_provider(provider: Arc<dyn MetricsProvider>) -> Result<(), Error> {
    GLOBAL_PROVIDER
        .set(provider)
        .map_err(|_| Error::MetricsProviderAlreadySet)
}

/// The metrics of an elector: from its own provider, else the global one, else none.
pub(crate) fn leader_metric(own: Option<&Arc<dyn MetricsProvider>>) -> Box<dyn LeaderMetric> {
    match own.or_else(|| GLOBAL_PROVIDER.get()) {
        Some(provider) => provider.new_leader_metric(),
        None => Box::new(Noop),
    }
}
