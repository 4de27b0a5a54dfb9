//! The controllers' metrics, under controller-runtime's names (feature `prometheus`):
//! [`register`] puts them in a prometheus-client registry, and every controller started from
//! then on records into them. kinformer-admin's `Metrics::install` does this for the process,
//! with the work queues', informers' and leader electors' metrics; a program with a registry
//! of its own calls [`register`] itself.
//!
//! The families, labelled `controller`:
//! `controller_runtime_reconcile_total{result=success|requeue_after|error}`,
//! `controller_runtime_reconcile_errors_total`, `controller_runtime_reconcile_panics_total`,
//! `controller_runtime_reconcile_timeouts_total` (reconciles dropped at the controller's
//! reconcile timeout; also counted as errors, as controller-runtime counts them),
//! `controller_runtime_reconcile_time_seconds` (histogram, controller-runtime's buckets),
//! `controller_runtime_max_concurrent_reconciles`, `controller_runtime_active_workers`, and
//! kinformer's read-your-writes counters.
//!
//! ```
//! // A registry of the program's own; controllers started from now on record into it
//! // (a family shows up at the first reconcile of a controller).
//! let mut registry = prometheus_client::registry::Registry::default();
//! kinformer_controller::metrics::register(&mut registry);
//! let mut text = String::new();
//! prometheus_client::encoding::text::encode(&mut text, &registry)?;
//! # Ok::<(), std::fmt::Error>(())
//! ```
//!
//! kinformer-admin's tests check every family after real reconciles.

use prometheus_client::registry::Registry;

use crate::controller::observer::ControllerFamilies;

/// Registers the controller families in `registry`; controllers started from now on record
/// into them. The families are one per process: a second call registers the same families
/// in another registry (so both show the same counts).
pub fn register(registry: &mut Registry) {
    ControllerFamilies::install(registry);
}
