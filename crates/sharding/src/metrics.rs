//! The shard managers' metrics (feature `prometheus`): a prometheus-client collector that
//! reads a [`ShardManager`] at each scrape, labelled `manager` and `identity`:
//! `kinformer_shards_held`, `kinformer_shards_live_replicas`, `kinformer_shard_moves_total`
//! (shards given up to re-balance). Register it in any registry (kinformer-admin's
//! `Metrics::register_collector`, or `Registry::register_collector`).

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::ShardManager;

/// A [`ShardManager`]'s metrics, read at each scrape: see the [module docs](self). Made by
/// [`ShardManager::metrics`]; it keeps the manager alive.
pub struct ShardMetrics {
    read: Box<dyn Fn() -> ShardStats + Send + Sync>,
}

struct ShardStats {
    manager: String,
    identity: String,
    held: usize,
    live: usize,
    moves: u64,
}

impl std::fmt::Debug for ShardMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardMetrics").finish_non_exhaustive()
    }
}

impl<L: Send + Sync + 'static> ShardManager<L> {
    /// This manager's metrics as a prometheus-client collector (feature `prometheus`): the
    /// shards it holds, the live replicas it saw last, the shards it gave up to re-balance.
    pub fn metrics(self: &Arc<Self>) -> ShardMetrics {
        let manager = Arc::clone(self);
        ShardMetrics {
            read: Box::new(move || ShardStats {
                manager: manager.config().name.clone(),
                identity: manager.identity().to_owned(),
                held: manager.held().len(),
                live: manager.live_replicas(),
                moves: manager.moves(),
            }),
        }
    }
}

impl Collector for ShardMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = (self.read)();
        let labels = vec![
            ("manager", s.manager.clone()),
            ("identity", s.identity.clone()),
        ];
        let gauge = |n: usize| ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX));
        let mut family = encoder.encode_descriptor(
            "kinformer_shards_held",
            "How many shard Leases this replica holds",
            None,
            MetricType::Gauge,
        )?;
        gauge(s.held).encode(family.encode_family(&labels)?)?;
        let mut family = encoder.encode_descriptor(
            "kinformer_shards_live_replicas",
            "The live replicas the shard manager saw at its last retry",
            None,
            MetricType::Gauge,
        )?;
        gauge(s.live).encode(family.encode_family(&labels)?)?;
        let mut family = encoder.encode_descriptor(
            "kinformer_shard_moves",
            "Shards given up to re-balance",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(s.moves).encode(family.encode_family(&labels)?)?;
        Ok(())
    }
}
