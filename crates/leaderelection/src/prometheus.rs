//! A [`MetricsProvider`] for prometheus-client (feature `prometheus`).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::{LeaderMetric, MetricsProvider};

type Labels = Vec<(String, String)>;

/// Records the leader election metrics with component-base's names —
/// `leader_election_master_status` (gauge) and `leader_election_slowpath_total` — plus
/// `leader_election_transitions_total`, each labelled `name="<election name>"`, in the
/// [`Registry`] given to [`new`](Self::new).
///
/// ```
/// use std::sync::Arc;
/// use kinformer_leaderelection::{LeaderMetric, MetricsProvider, PrometheusMetricsProvider};
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let provider = PrometheusMetricsProvider::new(&mut registry);
/// let metric = provider.new_leader_metric();
/// metric.on("kube-system/my-controller");
/// metric.transition("kube-system/my-controller");
///
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"leader_election_master_status{name="kube-system/my-controller"} 1"#));
/// assert!(text.contains(r#"leader_election_transitions_total{name="kube-system/my-controller"} 1"#));
/// ```
#[derive(Debug, Clone)]
pub struct PrometheusMetricsProvider {
    status: Family<Labels, Gauge>,
    slowpath: Family<Labels, Counter>,
    transitions: Family<Labels, Counter>,
}

impl PrometheusMetricsProvider {
    /// Registers the three metric families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let provider = Self {
            status: Family::default(),
            slowpath: Family::default(),
            transitions: Family::default(),
        };
        // component-base's help texts; prometheus-client ends each with a period itself and
        // appends `_total` to counters.
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates \
             backup, 1 indicates master. 'name' is the string used to identify the lease. \
             Please make sure to group by name",
            provider.status.clone(),
        );
        registry.register(
            "leader_election_slowpath",
            "Total number of slow path exercised in renewing leader leases. 'name' is the \
             string used to identify the lease. Please make sure to group by name",
            provider.slowpath.clone(),
        );
        registry.register(
            "leader_election_transitions",
            "Total number of times this process became the leader of the lease. 'name' is \
             the string used to identify the lease",
            provider.transitions.clone(),
        );
        provider
    }
}

fn labels(name: &str) -> Labels {
    vec![("name".to_owned(), name.to_owned())]
}

impl MetricsProvider for PrometheusMetricsProvider {
    fn new_leader_metric(&self) -> Box<dyn LeaderMetric> {
        Box::new(self.clone())
    }
}

impl LeaderMetric for PrometheusMetricsProvider {
    fn on(&self, name: &str) {
        self.status.get_or_create(&labels(name)).set(1);
    }

    fn off(&self, name: &str) {
        self.status.get_or_create(&labels(name)).set(0);
    }

    fn slowpath_exercised(&self, name: &str) {
        self.slowpath.get_or_create(&labels(name)).inc();
    }

    fn transition(&self, name: &str) {
        self.transitions.get_or_create(&labels(name)).inc();
    }
}
