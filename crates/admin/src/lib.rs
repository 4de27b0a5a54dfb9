//! A controller process's admin side: one Prometheus registry for everything the process
//! runs ([`metrics::Metrics`]: controllers under controller-runtime's names, work queues under
//! client-go's, informers, leader electors, and any crate's collector), and a server for it
//! ([`server::Server`], feature `server`): `/metrics`, `/healthz`, `/readyz` and the JSON
//! `/debug/diagnostics` page over every layer.
//!
//! # Where it sits
//!
//! Above the layers it reports on, so that none of them depends on it: each crate exports
//! its own metrics (kinformer-workqueue's and kinformer-leaderelection's providers,
//! kinformer-controller's `metrics::register`, kinformer-sharding's `ShardManager::metrics`
//! collector, each behind its crate's `prometheus` feature), and
//! [`Metrics::install`](metrics::Metrics::install) puts them in one registry. A program that
//! keeps a registry of its own can skip this crate and register those itself.
//!
//! ```text
//! kinformer-workqueue, kinformer-informer-factory, kinformer-controller, kinformer-leaderelection
//!     ◀── kinformer-admin (this crate)
//!         ◀── kinformer-runtime (the admin server's flags), kinformer (the facade:
//!             `kinformer::metrics`, `kinformer::server`)
//! ```
//!
//! # Features
//!
//! - `kube` (default): leader electors' metrics and lease status, a `SharedInformerFactory`'s
//!   informers.
//! - `server` (default): the HTTP server.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod metrics;
#[cfg(feature = "server")]
pub mod server;
