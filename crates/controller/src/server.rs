//! A small HTTP server for what a controller's pod exposes: `/metrics`, `/healthz` and
//! `/readyz` (feature `server`).
//!
//! - `/metrics`: the installed [`Metrics`](crate::metrics::Metrics) in the OpenMetrics text
//!   format (empty when none are installed).
//! - `/healthz`: `200 ok` while every liveness check passes, `503` naming the failing ones
//!   otherwise (a kubelet restarts the pod). With leader election, the elector's health
//!   goes here.
//! - `/readyz`: the same for readiness checks (a Service stops sending traffic; a rollout
//!   waits): typically "every informer has synced".
//!
//! Plain HTTP/1.1 on the address given; put TLS in front of it if the metrics are
//! sensitive. A check is a function called on each request: keep it cheap.
//!
//! ```no_run
//! use kinformer_controller::metrics::Metrics;
//! use kinformer_controller::server::Server;
//! use kinformer_informer_factory::SharedInformerFactory;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run(factory: SharedInformerFactory) -> std::io::Result<()> {
//! Metrics::install().register_factory(&factory);
//! let cancel = CancellationToken::new();
//! let server = Server::bind("0.0.0.0:8080".parse().unwrap())
//!     .await?
//!     .ready_when("informers", move || factory.all_synced());
//! tokio::spawn(server.run(cancel.clone()));
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
