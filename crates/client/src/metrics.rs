//! Request metrics: client-go's `rest_client_*` families (component-base's
//! `metrics/prometheus/restclient`) with a `resource` label, as a tower layer.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::time::Instant;
use tower::{Layer, Service};

use crate::{BoxFuture, is_watch};

/// component-base's `rest_client_request_duration_seconds` buckets.
const DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// The `code` of a request that got no response (client-go's: transport errors are
/// arbitrary strings, unbounded as labels).
pub const ERROR_CODE: &str = "<error>";
/// The `resource` of a request to no resource: discovery (`/api`, `/apis/apps/v1`),
/// `/version`, `/openapi/...`, `/healthz`.
pub const NO_RESOURCE: &str = "<none>";
/// The `host` when neither the layer nor the request names one (client-go's).
const NO_HOST: &str = "none";

type Labels = Vec<(&'static str, String)>;

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// client-go's request metrics, with the resource, registered in a
/// [`Registry`] of yours:
///
/// - `rest_client_requests_total{code, method, host, resource}`: every request that got a
///   response, by status code, and every one that got none, `code="<error>"`;
/// - `rest_client_request_duration_seconds{verb, host, resource}` (histogram, client-go's
///   buckets, 5 ms to 60 s): from the request to the end of its response body — client-go
///   times its `Do` the same way, body read included, and from before its rate limiter, so
///   a throttled request's wait counts (a [`ClientBuilder`](crate::ClientBuilder) puts the
///   metrics outside the limit for that reason). Watches are counted but not timed: a
///   watch lasts minutes by design, and client-go's `Watch` does not observe a latency
///   either;
/// - `rest_client_rate_limiter_duration_seconds{verb, host, resource}` (histogram, the same
///   buckets): how long each request waited for its token, when the
///   [`RateLimitLayer`](crate::RateLimitLayer) is given the metrics
///   ([`RateLimitLayer::metrics`](crate::RateLimitLayer::metrics); a
///   [`ClientBuilder`](crate::ClientBuilder) does it). Watches, which take no token, are
///   not in it, as in client-go.
///
/// `method` and `verb` are the HTTP method (`GET`, `PUT`, ...), as client-go's, whose labels
/// hold its request's HTTP verb under both names; `host` is the API server's `host:port`.
///
/// `resource` is the resource of the request's path, with its subresource after a slash
/// (`/api/v1/namespaces/x/pods/y` → `pods`, `/apis/apps/v1/deployments` → `deployments`,
/// `/api/v1/namespaces/x/pods/y/status` → `pods/status`, RBAC's spelling), or `<none>` for
/// paths that name none (discovery, `/version`). It never holds a name or a namespace: its
/// values are bounded by the resources the cluster serves, and the group is left out for the
/// same reason client-go leaves the path out (`events` of `events.k8s.io` and of the core
/// group share a label).
///
/// Clone it to share the families between clients: register once per registry
/// (prometheus-client would write a family registered twice twice).
#[derive(Debug, Clone)]
pub struct ClientMetrics {
    requests: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
    rate_limiter: Family<Labels, Histogram, fn() -> Histogram>,
}

impl ClientMetrics {
    /// Registers the families in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            rate_limiter: Family::new_with_constructor(duration_histogram),
        };
        // prometheus-client appends `_total` to counters and a period to help texts.
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, host and resource",
            metrics.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, host and resource",
            metrics.duration.clone(),
        );
        registry.register(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, host and resource",
            metrics.rate_limiter.clone(),
        );
        metrics
    }

    /// Notes that a request waited `wait` for its token.
    pub(crate) fn observe_wait(&self, labels: &RequestLabels, wait: std::time::Duration) {
        self.rate_limiter
            .get_or_create(&vec![
                ("verb", labels.method.clone()),
                ("host", labels.host.clone()),
                ("resource", labels.resource.clone()),
            ])
            .observe(wait.as_secs_f64());
    }
}

/// What the labels say of a request: its HTTP method, the API server, the resource.
#[derive(Debug)]
pub(crate) struct RequestLabels {
    pub(crate) method: String,
    pub(crate) host: String,
    pub(crate) resource: String,
}

impl RequestLabels {
    /// `host` is the layer's, if it was given one; else the request's, else `none`.
    pub(crate) fn of<B>(request: &Request<B>, host: Option<&str>) -> Self {
        let uri = request.uri();
        let host = match (host, uri.authority()) {
            (Some(host), _) => host.to_owned(),
            (None, Some(authority)) => authority.as_str().to_owned(),
            (None, None) => NO_HOST.to_owned(),
        };
        Self {
            method: request.method().as_str().to_owned(),
            host,
            resource: resource_of(uri.path()).unwrap_or_else(|| NO_RESOURCE.to_owned()),
        }
    }
}

/// The [`Layer`] of [`ClientMetrics`]: see [`MetricsService`].
#[derive(Debug, Clone)]
pub struct MetricsLayer {
    metrics: Option<ClientMetrics>,
    host: Option<Arc<str>>,
}

impl MetricsLayer {
    /// Records into `metrics`; `host` as the request's URI says, `none` when it says none
    /// (kube's stack adds the cluster's URL below the layers: see [`host`](Self::host)).
    pub fn new(metrics: ClientMetrics) -> Self {
        Self {
            metrics: Some(metrics),
            host: None,
        }
    }

    /// Records nothing: the layer passes requests through (a stack of one type whether
    /// metrics are on or off).
    pub fn disabled() -> Self {
        Self {
            metrics: None,
            host: None,
        }
    }

    /// The `host` label of every request: the API server's `host:port`, as client-go's
    /// (its rest client's base URL's host).
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(Arc::from(host.into()));
        self
    }
}

impl<S> Layer<S> for MetricsLayer {
    type Service = MetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        MetricsService {
            inner,
            metrics: self.metrics.clone(),
            host: self.host.clone(),
        }
    }
}

/// Counts each request by its response's status code (or `<error>`) and times it to the
/// end of its response body: see [`ClientMetrics`].
#[derive(Debug, Clone)]
pub struct MetricsService<S> {
    inner: S,
    metrics: Option<ClientMetrics>,
    host: Option<Arc<str>>,
}

impl<S, B, ResBody> Service<Request<B>> for MetricsService<S>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResBody: Body + Unpin + Send + 'static,
{
    type Response = Response<TimedBody<ResBody>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let Some(metrics) = self.metrics.clone() else {
            let response = self.inner.call(request);
            return Box::pin(async move {
                let response = response.await?;
                Ok(response.map(|body| TimedBody { body, timer: None }))
            });
        };
        let RequestLabels {
            method,
            host,
            resource,
        } = RequestLabels::of(&request, self.host.as_deref());
        let watch = is_watch(request.uri());
        let start = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = match &result {
                Ok(response) => response.status().as_str().to_owned(),
                Err(_) => ERROR_CODE.to_owned(),
            };
            metrics
                .requests
                .get_or_create(&vec![
                    ("code", code),
                    ("method", method.clone()),
                    ("host", host.clone()),
                    ("resource", resource.clone()),
                ])
                .inc();
            let timer = (!watch).then(|| Timer {
                histogram: metrics
                    .duration
                    .get_or_create(&vec![
                        ("verb", method),
                        ("host", host),
                        ("resource", resource),
                    ])
                    .clone(),
                start,
            });
            match result {
                Ok(response) => Ok(response.map(|body| TimedBody { body, timer })),
                Err(error) => {
                    drop(timer);
                    Err(error)
                }
            }
        })
    }
}

/// Observes the time since `start` when dropped: at the end of the body, when the body is
/// dropped unread, or at once for a request that failed.
#[derive(Debug)]
struct Timer {
    histogram: Histogram,
    start: Instant,
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

/// A response body that stops its request's timer when it ends (or fails, or is dropped).
#[derive(Debug)]
pub struct TimedBody<B> {
    body: B,
    timer: Option<Timer>,
}

impl<B: Body + Unpin> Body for TimedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let frame = Pin::new(&mut this.body).poll_frame(cx);
        if matches!(frame, Poll::Ready(None | Some(Err(_)))) {
            this.timer = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The resource a request's path names, with its subresource after a slash, as the API
/// server's `RequestInfoFactory` reads it: `None` for a path that names none.
///
/// `/api/v1/...` and `/apis/<group>/<version>/...`, then `namespaces/<ns>/` (unless what
/// follows is a namespace's own subresource, `status` or `finalize`), then
/// `<resource>[/<name>[/<subresource>]]`; the deprecated `watch/` prefix is skipped. Only
/// the subresource's first segment is kept (`pods/proxy`, whatever path follows it).
pub fn resource_of(path: &str) -> Option<String> {
    let mut parts = path.split('/').filter(|part| !part.is_empty());
    match parts.next()? {
        "api" => {
            parts.next()?;
        }
        "apis" => {
            parts.next()?;
            parts.next()?;
        }
        _ => return None,
    }
    let mut parts: Vec<&str> = parts.collect();
    if parts.first() == Some(&"watch") {
        parts.remove(0);
    }
    if parts.first() == Some(&"namespaces")
        && parts.len() > 2
        && !matches!(parts[2], "status" | "finalize")
    {
        parts.drain(..2);
    }
    let resource = parts.first()?;
    Some(match parts.get(2) {
        Some(subresource) => format!("{resource}/{subresource}"),
        None => (*resource).to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use std::io;

    use http::StatusCode;
    use tower::{ServiceExt, service_fn};

    use super::*;

    #[test]
    fn resource_from_path() {
        let cases = [
            ("/api/v1/namespaces/x/pods/y", Some("pods")),
            ("/api/v1/namespaces/x/pods", Some("pods")),
            ("/api/v1/pods", Some("pods")),
            ("/apis/apps/v1/deployments", Some("deployments")),
            (
                "/apis/apps/v1/namespaces/x/deployments/y",
                Some("deployments"),
            ),
            ("/api/v1/namespaces/x/pods/y/status", Some("pods/status")),
            (
                "/apis/apps/v1/namespaces/x/deployments/y/scale",
                Some("deployments/scale"),
            ),
            (
                "/api/v1/namespaces/x/pods/y/proxy/some/path",
                Some("pods/proxy"),
            ),
            ("/api/v1/namespaces", Some("namespaces")),
            ("/api/v1/namespaces/x", Some("namespaces")),
            ("/api/v1/namespaces/x/status", Some("namespaces/status")),
            ("/api/v1/namespaces/x/finalize", Some("namespaces/finalize")),
            ("/api/v1/nodes/n/proxy", Some("nodes/proxy")),
            ("/api/v1/watch/namespaces/x/pods", Some("pods")),
            (
                "/apis/example.com/v1/namespaces/x/widgets/w/status",
                Some("widgets/status"),
            ),
            ("/api/v1/namespaces/x/pods/", Some("pods")),
            ("/api", None),
            ("/api/v1", None),
            ("/apis", None),
            ("/apis/apps", None),
            ("/apis/apps/v1", None),
            ("/version", None),
            ("/openapi/v3/apis/apps/v1", None),
            ("/healthz", None),
            ("", None),
        ];
        for (path, resource) in cases {
            assert_eq!(resource_of(path).as_deref(), resource, "{path}");
        }
    }

    fn encode(registry: &Registry) -> Vec<prometheus_parse::Sample> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        let lines = text.lines().map(|line| Ok(line.to_owned()));
        prometheus_parse::Scrape::parse(lines).unwrap().samples
    }

    fn count(samples: &[prometheus_parse::Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
        samples
            .iter()
            .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
                prometheus_parse::Value::Histogram(ref buckets) => {
                    buckets.last().map_or(0.0, |b| b.count)
                }
                _ => 0.0,
            })
            .sum()
    }

    /// A fake API server: `/fail` is a transport error, `/missing` a 404, anything else a
    /// 200 with a body of two chunks.
    fn fake()
    -> impl Service<
        Request<()>,
        Response = Response<chunks::Chunks>,
        Error = io::Error,
        Future: Send,
    > + Clone {
        service_fn(|request: Request<()>| async move {
            match request.uri().path() {
                "/fail" => Err(io::Error::other("connection refused")),
                "/api/v1/namespaces/x/pods/missing" => Ok(Response::builder()
                    .status(StatusCode::NOT_FOUND)
                    .body(chunks::Chunks::new(&[b"{}"]))
                    .unwrap()),
                _ => Ok(Response::new(chunks::Chunks::new(&[
                    b"{\"items\":",
                    b"[]}",
                ]))),
            }
        })
    }

    /// A body of fixed chunks, each frame after a pause on Tokio's clock, so that the
    /// time to its end is known.
    mod chunks {
        use std::collections::VecDeque;
        use std::convert::Infallible;
        use std::pin::Pin;
        use std::task::{Context, Poll};
        use std::time::Duration;

        use http_body::{Body, Frame};

        #[derive(Debug)]
        pub(super) struct Chunks {
            chunks: VecDeque<&'static [u8]>,
            pause: Option<Pin<Box<tokio::time::Sleep>>>,
        }

        impl Chunks {
            pub(super) fn new(chunks: &[&'static [u8]]) -> Self {
                Self {
                    chunks: chunks.iter().copied().collect(),
                    pause: None,
                }
            }
        }

        impl Body for Chunks {
            type Data = &'static [u8];
            type Error = Infallible;

            fn poll_frame(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
                let this = &mut *self;
                if this.chunks.is_empty() {
                    return Poll::Ready(None);
                }
                let pause = this.pause.get_or_insert_with(|| {
                    Box::pin(tokio::time::sleep(Duration::from_millis(300)))
                });
                if pause.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.pause = None;
                Poll::Ready(this.chunks.pop_front().map(|chunk| Ok(Frame::data(chunk))))
            }
        }
    }

    async fn read_to_end<B: Body + Unpin>(mut body: B) {
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            assert!(frame.is_ok());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn counts_requests_by_code_method_host_and_resource() {
        let mut registry = Registry::default();
        let metrics = ClientMetrics::new(&mut registry);
        let mut service = MetricsLayer::new(metrics)
            .host("10.0.0.1:6443")
            .layer(fake());
        for (method, uri) in [
            ("GET", "/api/v1/namespaces/x/pods/a"),
            ("GET", "/api/v1/namespaces/x/pods/b"),
            ("GET", "/api/v1/namespaces/x/pods/missing"),
            ("PUT", "/api/v1/namespaces/x/pods/a/status"),
            ("GET", "/apis/apps/v1/deployments?limit=500"),
            ("GET", "/api/v1/pods?watch=true"),
            ("GET", "/version"),
            ("DELETE", "/fail"),
        ] {
            let request = Request::builder().method(method).uri(uri).body(()).unwrap();
            match service.ready().await.unwrap().call(request).await {
                Ok(response) => read_to_end(response.into_body()).await,
                Err(error) => assert_eq!(error.to_string(), "connection refused"),
            }
        }
        let samples = encode(&registry);
        let requests =
            |labels: &[(&str, &str)]| count(&samples, "rest_client_requests_total", labels);
        let host = ("host", "10.0.0.1:6443");
        assert_eq!(requests(&[host]), 8.0);
        assert_eq!(
            requests(&[
                ("code", "200"),
                ("method", "GET"),
                ("resource", "pods"),
                host
            ]),
            3.0
        );
        assert_eq!(
            requests(&[("code", "404"), ("method", "GET"), ("resource", "pods")]),
            1.0
        );
        assert_eq!(
            requests(&[
                ("code", "200"),
                ("method", "PUT"),
                ("resource", "pods/status")
            ]),
            1.0
        );
        assert_eq!(
            requests(&[("code", "200"), ("resource", "deployments")]),
            1.0
        );
        assert_eq!(requests(&[("code", "200"), ("resource", "<none>")]), 1.0);
        assert_eq!(
            requests(&[
                ("code", "<error>"),
                ("method", "DELETE"),
                ("resource", "<none>")
            ]),
            1.0
        );
        // No label holds a name or a namespace.
        for sample in &samples {
            for value in sample.labels.values() {
                assert!(
                    !["x", "a", "b", "missing"].contains(&value.as_str()),
                    "{sample:?}"
                );
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn times_requests_to_the_end_of_the_body_and_not_watches() {
        let mut registry = Registry::default();
        let metrics = ClientMetrics::new(&mut registry);
        let mut service = MetricsLayer::new(metrics).layer(fake());
        for uri in [
            "http://h:1/api/v1/pods",
            "http://h:1/api/v1/pods?watch=true",
            "http://h:1/fail",
        ] {
            let request = Request::get(uri).body(()).unwrap();
            if let Ok(response) = service.ready().await.unwrap().call(request).await {
                read_to_end(response.into_body()).await;
            }
        }
        let samples = encode(&registry);
        let timed = |labels: &[(&str, &str)]| {
            count(&samples, "rest_client_request_duration_seconds", labels)
        };
        // The list and the failure; not the watch.
        assert_eq!(
            timed(&[("verb", "GET"), ("host", "h:1"), ("resource", "pods")]),
            1.0
        );
        assert_eq!(timed(&[("resource", "<none>")]), 1.0);
        assert_eq!(timed(&[]), 2.0);
        // The list's two chunks came 300 ms apart each: its 600 ms are in the 1 s bucket,
        // not in the 0.5 s one (the response head came at once).
        let buckets = samples
            .iter()
            .find_map(|s| match (&s.value, s.labels.get("resource")) {
                (prometheus_parse::Value::Histogram(b), Some("pods")) => Some(b.clone()),
                _ => None,
            })
            .unwrap();
        let le = |bound: f64| buckets.iter().find(|b| b.less_than == bound).unwrap().count;
        assert_eq!((le(0.5), le(1.0)), (0.0, 1.0));
    }

    #[tokio::test]
    async fn disabled_passes_through() {
        let mut service = MetricsLayer::disabled().layer(fake());
        let response = service
            .ready()
            .await
            .unwrap()
            .call(Request::get("/api/v1/pods").body(()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
}
