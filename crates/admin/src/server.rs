//! A small HTTP server for what a controller's pod exposes: `/metrics`, `/healthz`,
//! `/readyz` and `/debug/diagnostics` (feature `server`).
//!
//! - `/metrics`: the installed [`Metrics`](crate::metrics::Metrics) in the OpenMetrics text
//!   format (empty when none are installed).
//! - `/healthz`: `200 ok` while every liveness check passes, `503` naming the failing ones
//!   otherwise (a kubelet restarts the pod). With leader election, the elector's health
//!   goes here.
//! - `/readyz`: the same for readiness checks (a Service stops sending traffic; a rollout
//!   waits): typically "every informer has synced".
//! - `/debug/diagnostics`: one JSON document (`application/json`) of what the registered
//!   parts know now, as Linkerd's kubert admin server dumps its watches and Leases. An
//!   object with an array per section, always `informers`, `queues`, `leases` and `shards`
//!   (empty when nothing is registered there), plus any section of your own:
//!   - `informers` ([`diagnose_factory`](Server::diagnose_factory),
//!     [`diagnose_informer`](Server::diagnose_informer)): `name`, `started`, `synced`,
//!     `objects` (in the cache), `last_sync_resource_version`, `lists` (by reason: a relist
//!     after `expired` or `error` shows trouble), `syncs`, `watches`, `watch_events` (by
//!     type), `undecodable`, `queued_items` (in its FIFO), `processing_latency` (`count` and
//!     `sum` in seconds of the popped entries applied), `identity` (client-go's metrics
//!     labels, or `null`), `last_error` (`null`, or the
//!     failure that ended the last failed list-and-watch: `message`, `time`, `backoff`,
//!     `relist_reason`; it stays after a recovery);
//!   - `queues` ([`diagnose_controller`](Server::diagnose_controller),
//!     [`diagnose_queue`](Server::diagnose_queue)): `name`, `depth`, `depth_by_priority`
//!     (`[{"priority", "depth"}]`, highest first, for the priority queue), `processing`,
//!     `waiting`, `retries`, `longest_running_processor_seconds`, `unfinished_work_seconds`
//!     (`null` for a queue that records no metrics: install [`Metrics`](crate::metrics::Metrics)
//!     before building it), `shutting_down`;
//!   - `leases` ([`diagnose_elector`](Server::diagnose_elector)): `name`, `identity`,
//!     `holder`, `is_me`, `held`, `acquire_time`, `renew_time`, `lease_duration`,
//!     `transitions`, `observed_time`, `expires_in`;
//!   - `shards` (`.diagnose("shards", move || manager.status())` for a kinformer-sharding
//!     `ShardManager` in an `Arc`): `name`, `identity`, `shard_count`, `held`,
//!     `live_replicas`, `moves`, and each shard and membership Lease as in `leases`.
//!
//!   Times are RFC 3339 strings, durations seconds. Nothing secret is in it (no objects,
//!   no credentials), but it names the pod's informers, Leases and identities.
//!
//! Plain HTTP/1.1 on the address given; put TLS in front of it if the metrics are
//! sensitive. A check or a diagnostics source is a function called on each request: keep
//! it cheap.
//!
//! ```no_run
//! use kinformer_admin::metrics::Metrics;
//! use kinformer_admin::server::Server;
//! use kinformer_informer_factory::SharedInformerFactory;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run(factory: SharedInformerFactory) -> std::io::Result<()> {
//! Metrics::install().register_factory(&factory);
//! let cancel = CancellationToken::new();
//! let server = Server::bind("0.0.0.0:8080".parse().unwrap())
//!     .await?
//!     .diagnose_factory(&factory)
//!     .ready_when("informers", move || factory.all_synced());
//! tokio::spawn(server.run(cancel.clone()));
//! # Ok(()) }
//! ```
//!
//! A controller's queue, a leader elector's Lease, and a section of your own (anything
//! serde serializes) on the diagnostics page:
//!
//! ```no_run
//! use kinformer_controller::controller::Controller;
//! use kinformer_admin::server::Server;
//! use kinformer_core::ObjectKey;
//! use kinformer_leaderelection::LeaderElector;
//!
//! # async fn run(controller: Controller<ObjectKey>, elector: LeaderElector) -> std::io::Result<()> {
//! let server = Server::bind("127.0.0.1:8080".parse().unwrap())
//!     .await?
//!     .diagnose_controller(&controller) // under `queues`
//!     .diagnose_elector(&elector) // under `leases`
//!     .diagnose("build", || serde_json::json!({ "version": env!("CARGO_PKG_VERSION") }));
//! // A kinformer-sharding `ShardManager` in an `Arc`:
//! // .diagnose("shards", move || manager.status())
//! # Ok(()) }
//! ```

use std::convert::Infallible;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

mod diagnostics;

type Check = Box<dyn Fn() -> bool + Send + Sync>;

/// Named checks, all of which must pass.
#[derive(Default)]
struct Checks(Vec<(String, Check)>);

impl Checks {
    /// The names of the checks that fail now.
    fn failing(&self) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(_, check)| !check())
            .map(|(name, _)| name.as_str())
            .collect()
    }
}

/// What the server answers with.
#[derive(Default)]
struct Routes {
    live: Checks,
    ready: Checks,
    diagnostics: diagnostics::Diagnostics,
}

/// The server, bound and configured; [`run`](Self::run) serves it.
pub struct Server {
    listener: TcpListener,
    routes: Routes,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.listener.local_addr().ok())
            .field("liveness_checks", &self.routes.live.0.len())
            .field("readiness_checks", &self.routes.ready.0.len())
            .field("diagnostics_sources", &self.routes.diagnostics.len())
            .finish()
    }
}

impl Server {
    /// Binds `addr` (port 0 picks a free one: see [`local_addr`](Self::local_addr)).
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn bind(addr: SocketAddr) -> io::Result<Self> {
        Ok(Self {
            listener: TcpListener::bind(addr).await?,
            routes: Routes::default(),
        })
    }

    /// The address it listens on.
    ///
    /// # Errors
    /// As the socket's `local_addr`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Adds a readiness check named `name` to `/readyz`.
    #[must_use]
    pub fn ready_when(
        mut self,
        name: &str,
        check: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Self {
        self.routes.ready.0.push((name.to_owned(), Box::new(check)));
        self
    }

    /// Adds a liveness check named `name` to `/healthz`.
    #[must_use]
    pub fn healthy_when(
        mut self,
        name: &str,
        check: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Self {
        self.routes.live.0.push((name.to_owned(), Box::new(check)));
        self
    }

    /// Serves until `cancel` is cancelled (connections in progress are dropped then).
    ///
    /// # Errors
    /// When accepting connections fails.
    pub async fn run(self, cancel: CancellationToken) -> io::Result<()> {
        let routes = Arc::new(self.routes);
        loop {
            let (stream, _) = tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                accepted = self.listener.accept() => accepted?,
            };
            let routes = Arc::clone(&routes);
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let routes = Arc::clone(&routes);
                    async move { Ok::<_, Infallible>(respond(&routes, &req)) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                tokio::select! {
                    () = cancel.cancelled() => {}
                    served = conn => if let Err(e) = served {
                        tracing::debug!(error = %kinformer_core::ErrorChain(&e), "metrics/health connection failed");
                    }
                }
            });
        }
    }
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from(body)));
    *res.status_mut() = status;
    res.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    res
}

const PLAIN: &str = "text/plain; charset=utf-8";
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const JSON: &str = "application/json";

fn respond(routes: &Routes, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, PLAIN, "GET only\n".into());
    }
    match req.uri().path() {
        "/metrics" => match crate::metrics::Metrics::get().map(crate::metrics::Metrics::encode) {
            Some(Ok(body)) => text(StatusCode::OK, OPENMETRICS, body),
            Some(Err(_)) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                PLAIN,
                "cannot encode the metrics\n".into(),
            ),
            None => text(StatusCode::OK, OPENMETRICS, "# EOF\n".into()),
        },
        "/healthz" | "/livez" => checked(&routes.live),
        "/readyz" => checked(&routes.ready),
        "/debug/diagnostics" => match serde_json::to_string_pretty(&routes.diagnostics.render()) {
            Ok(body) => text(StatusCode::OK, JSON, body),
            Err(_) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                PLAIN,
                "cannot encode the diagnostics\n".into(),
            ),
        },
        _ => text(StatusCode::NOT_FOUND, PLAIN, "not found\n".into()),
    }
}

/// `200 ok`, or `503` with one line per failing check.
fn checked(checks: &Checks) -> Response<Full<Bytes>> {
    let failing = checks.failing();
    if failing.is_empty() {
        return text(StatusCode::OK, PLAIN, "ok\n".into());
    }
    let body: String = failing
        .iter()
        .map(|name| format!("[-]{name} failed\n"))
        .collect();
    text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, body)
}
