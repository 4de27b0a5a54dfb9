//! Client-side rate limiting: client-go's `flowcontrol.NewTokenBucketRateLimiter` as a
//! tower layer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use http::Request;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

use crate::metrics::{ClientMetrics, RequestLabels};
use crate::{BoxFuture, Error, is_watch};

/// client-go's `rest.DefaultQPS`.
pub const DEFAULT_QPS: f32 = 5.0;
/// client-go's `rest.DefaultBurst`.
pub const DEFAULT_BURST: u32 = 10;

/// client-go's `longThrottleLatency`: a wait longer than this is logged (at debug).
const LONG_WAIT: Duration = Duration::from_millis(50);
/// client-go's `extraLongThrottleLatency`: a wait longer than this is logged at info, at
/// most once every [`INFO_INTERVAL`] (client-go's throttled logger), so that a program
/// throttled for minutes does not log every request.
const EXTRA_LONG_WAIT: Duration = Duration::from_secs(1);
const INFO_INTERVAL: Duration = Duration::from_secs(10);

/// How many requests a client may send: a token bucket that holds `burst` tokens, starts
/// full and refills at `qps` tokens a second; each request takes one and waits for it when
/// none is left — client-go's rest client (`rest.Config{QPS, Burst}`), whose defaults,
/// 5 and 10, are [`RateLimit::default`].
///
/// kube's client has no such limit, and neither would kinformer's reflectors and
/// controllers over it: a controller that lists and writes in a loop sends as fast as the
/// API server answers. The API server's priority and fairness protects the server; this
/// protects the server from *you* the way every client-go program does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// `None`: unlimited.
    limit: Option<(f32, u32)>,
}

impl Default for RateLimit {
    /// client-go's defaults: 5 requests a second, bursts of 10.
    fn default() -> Self {
        Self {
            limit: Some((DEFAULT_QPS, DEFAULT_BURST)),
        }
    }
}

impl RateLimit {
    /// `qps` requests a second on average, `burst` at once.
    ///
    /// # Errors
    /// [`Error::InvalidRateLimit`] when `qps` is not a finite number above zero or `burst`
    /// is zero (a bucket that holds no token would never let a request through; client-go
    /// reads zero as "the default" and a negative QPS as "unlimited": say
    /// [`RateLimit::default`] or [`RateLimit::unlimited`] instead).
    pub fn new(qps: f32, burst: u32) -> Result<Self, Error> {
        if !(qps.is_finite() && qps > 0.0) || burst == 0 {
            return Err(Error::InvalidRateLimit { qps, burst });
        }
        Ok(Self {
            limit: Some((qps, burst)),
        })
    }

    /// No limit: requests never wait (kube's behaviour; client-go's with a negative QPS).
    pub fn unlimited() -> Self {
        Self { limit: None }
    }

    /// Requests a second, if limited.
    pub fn qps(&self) -> Option<f32> {
        self.limit.map(|(qps, _)| qps)
    }

    /// Requests at once, if limited.
    pub fn burst(&self) -> Option<u32> {
        self.limit.map(|(_, burst)| burst)
    }
}

/// The token bucket: golang.org/x/time/rate's `Limiter` as client-go uses it (`Wait`,
/// which reserves a token, maybe in the future, then sleeps until its time).
///
/// Reserving at once, in the order requests arrive, and sleeping afterwards is what keeps
/// the requests in order and spaced `1/qps` apart once the burst is spent: the n-th
/// request past the burst owes `n` tokens and waits `n/qps`.
#[derive(Debug)]
pub(crate) struct Bucket {
    qps: f64,
    burst: f64,
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    /// Negative when requests wait for tokens not yet there.
    tokens: f64,
    last: Instant,
}

impl Bucket {
    pub(crate) fn new(qps: f32, burst: u32) -> Self {
        Self {
            qps: f64::from(qps),
            burst: f64::from(burst),
            state: Mutex::new(BucketState {
                tokens: f64::from(burst),
                last: Instant::now(),
            }),
        }
    }

    /// Takes a token and says how long to wait before it is there.
    pub(crate) fn reserve(&self) -> Duration {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let elapsed = now.saturating_duration_since(state.last).as_secs_f64();
        state.tokens = (state.tokens + elapsed * self.qps).min(self.burst);
        state.last = state.last.max(now);
        state.tokens -= 1.0;
        if state.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-state.tokens / self.qps)
        }
    }

    /// Gives back a token whose request was dropped while it waited (as `rate`'s
    /// `Reservation.Cancel` does when `Wait`'s context ends), so that the requests after it
    /// do not wait for it.
    fn give_back(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.tokens = (state.tokens + 1.0).min(self.burst);
    }
}

/// A token taken for a request that has not been sent yet; given back if dropped.
struct Reservation {
    bucket: Arc<Bucket>,
    wait: Duration,
    sent: bool,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.sent && !self.wait.is_zero() {
            self.bucket.give_back();
        }
    }
}

/// The [`Layer`] of [`RateLimit`]: see [`RateLimitService`].
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Option<Arc<Bucket>>,
    last_info: Arc<AtomicU64>,
    created: Instant,
    metrics: Option<Observe>,
}

/// Where the waits go: `rest_client_rate_limiter_duration_seconds`.
#[derive(Debug, Clone)]
struct Observe {
    metrics: ClientMetrics,
    host: Option<Arc<str>>,
}

impl RateLimitLayer {
    /// One bucket for every service this layer makes: the clients built from one layer
    /// share their limit, as the clients of one client-go `rest.Config` share theirs.
    pub fn new(limit: RateLimit) -> Self {
        Self {
            bucket: limit
                .limit
                .map(|(qps, burst)| Arc::new(Bucket::new(qps, burst))),
            last_info: Arc::new(AtomicU64::new(u64::MAX)),
            created: Instant::now(),
            metrics: None,
        }
    }

    /// Records each request's wait for its token in `metrics`
    /// (`rest_client_rate_limiter_duration_seconds`), with `host` as its `host` label (the
    /// API server's `host:port`; `None`: the request URI's, as in
    /// [`MetricsLayer`](crate::MetricsLayer)).
    pub fn metrics(mut self, metrics: ClientMetrics, host: Option<String>) -> Self {
        self.metrics = Some(Observe {
            metrics,
            host: host.map(Arc::from),
        });
        self
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimitService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner: Arc::new(tokio::sync::Mutex::new(inner)),
            bucket: self.bucket.clone(),
            last_info: Arc::clone(&self.last_info),
            created: self.created,
            metrics: self.metrics.clone(),
        }
    }
}

/// Takes a token for each request before sending it, and waits for one when none is left
/// (client-go's `tryThrottle`: `Wait`, never a failure). Dropping the response future
/// while it waits cancels the request and gives its token back.
///
/// Watches (`?watch=true`) take no token: client-go's `Request.Watch` does not throttle
/// ("We specifically don't want to rate limit watches"), and a reflector's re-watch every
/// few minutes should not wait behind a controller's writes. Log follows and other
/// streams do take one, as client-go's `Request.Stream`.
///
/// A wait over 50 ms is logged at debug, one over 1 s at info at most every 10 s
/// (client-go's `V(3)` and throttled logger), with the method and path (never the query,
/// headers or body).
///
/// The inner service is called once the token is there, so it is held behind an
/// asynchronous lock (kube's `ClientBuilder` stack is not `Clone`); the lock is held only
/// while the inner service gets ready and is called, not while the response comes.
#[derive(Debug)]
pub struct RateLimitService<S> {
    inner: Arc<tokio::sync::Mutex<S>>,
    bucket: Option<Arc<Bucket>>,
    last_info: Arc<AtomicU64>,
    created: Instant,
    metrics: Option<Observe>,
}

impl<S> Clone for RateLimitService<S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            bucket: self.bucket.clone(),
            last_info: Arc::clone(&self.last_info),
            created: self.created,
            metrics: self.metrics.clone(),
        }
    }
}

impl<S, B> Service<Request<B>> for RateLimitService<S>
where
    S: Service<Request<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The inner service's readiness is awaited in the response future, after the token.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // Reserved now, in the order requests are made; waited for in the future.
        let reservation = match &self.bucket {
            Some(bucket) if !is_watch(request.uri()) => Some(Reservation {
                wait: bucket.reserve(),
                bucket: Arc::clone(bucket),
                sent: false,
            }),
            _ => None,
        };
        let observe = match (&reservation, &self.metrics) {
            (Some(_), Some(observe)) => Some((
                observe.metrics.clone(),
                RequestLabels::of(&request, observe.host.as_deref()),
            )),
            _ => None,
        };
        let inner = Arc::clone(&self.inner);
        let last_info = Arc::clone(&self.last_info);
        let created = self.created;
        Box::pin(async move {
            if let Some(mut reservation) = reservation {
                if !reservation.wait.is_zero() {
                    tokio::time::sleep(reservation.wait).await;
                    log_wait(reservation.wait, &request, &last_info, created);
                }
                reservation.sent = true;
                if let Some((metrics, labels)) = observe {
                    metrics.observe_wait(&labels, reservation.wait);
                }
            }
            let response = {
                let mut service = inner.lock_owned().await;
                service.ready().await?.call(request)
            };
            response.await
        })
    }
}

fn log_wait<B>(wait: Duration, request: &Request<B>, last_info: &AtomicU64, created: Instant) {
    if wait <= LONG_WAIT {
        return;
    }
    let (method, path) = (request.method().as_str(), request.uri().path());
    let info_due = wait > EXTRA_LONG_WAIT && {
        let now = u64::try_from(created.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = last_info.load(Ordering::Relaxed);
        let interval = u64::try_from(INFO_INTERVAL.as_millis()).unwrap_or(u64::MAX);
        (last == u64::MAX || now.saturating_sub(last) >= interval)
            && last_info
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    };
    if info_due {
        tracing::info!(
            ?wait,
            method,
            path,
            "waited before sending request: client-side throttling, not priority and fairness"
        );
    } else {
        tracing::debug!(
            ?wait,
            method,
            path,
            "waited before sending request: client-side throttling, not priority and fairness"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::service_fn;

    use super::*;

    type Sent = Arc<Mutex<Vec<(String, Duration)>>>;

    /// A service that notes which request reached it when (since `start`).
    fn recorder(
        start: Instant,
    ) -> (
        Sent,
        impl Service<Request<()>, Response = (), Error = Infallible, Future: Send> + Send + 'static,
    ) {
        let sent: Sent = Arc::default();
        let log = Arc::clone(&sent);
        let service = service_fn(move |request: Request<()>| {
            log.lock()
                .unwrap()
                .push((request.uri().to_string(), start.elapsed()));
            std::future::ready(Ok::<_, Infallible>(()))
        });
        (sent, service)
    }

    /// Makes each request in order (the calls, where tokens are reserved), then awaits them
    /// all together.
    async fn send_all<S>(service: &mut S, uris: &[&str])
    where
        S: Service<Request<()>, Response = (), Error = Infallible>,
        S::Future: Send + 'static,
    {
        let mut handles = Vec::new();
        for uri in uris {
            std::future::poll_fn(|cx| service.poll_ready(cx))
                .await
                .unwrap();
            let request = Request::get(*uri).body(()).unwrap();
            handles.push(tokio::spawn(service.call(request)));
        }
        for handle in handles {
            handle.await.unwrap().unwrap();
        }
    }

    fn millis(sent: &Sent) -> Vec<(String, u128)> {
        let mut sent: Vec<_> = sent
            .lock()
            .unwrap()
            .iter()
            .map(|(uri, at)| (uri.clone(), at.as_millis()))
            .collect();
        sent.sort_by_key(|(_, at)| *at);
        sent
    }

    #[tokio::test(start_paused = true)]
    async fn burst_passes_at_once_then_one_per_qps_interval() {
        let start = Instant::now();
        let (sent, inner) = recorder(start);
        let mut service = RateLimitLayer::new(RateLimit::new(5.0, 3).unwrap()).layer(inner);
        send_all(&mut service, &["/1", "/2", "/3", "/4", "/5", "/6"]).await;
        let at: Vec<u128> = millis(&sent).into_iter().map(|(_, at)| at).collect();
        assert_eq!(at, [0, 0, 0, 200, 400, 600]);
        // The bucket refills: a second later, three requests pass at once again (the bucket
        // held -3 tokens at 0 ms, 3 at 1.2 s).
        tokio::time::sleep_until(start + Duration::from_millis(1200)).await;
        sent.lock().unwrap().clear();
        send_all(&mut service, &["/7", "/8", "/9", "/10"]).await;
        let at: Vec<u128> = millis(&sent).into_iter().map(|(_, at)| at).collect();
        assert_eq!(at, [1200, 1200, 1200, 1400]);
    }

    #[tokio::test(start_paused = true)]
    async fn client_go_defaults_are_5_qps_and_bursts_of_10() {
        assert_eq!(RateLimit::default(), RateLimit::new(5.0, 10).unwrap());
        let start = Instant::now();
        let (sent, inner) = recorder(start);
        let mut service = RateLimitLayer::new(RateLimit::default()).layer(inner);
        let uris: Vec<String> = (0..12).map(|i| format!("/{i}")).collect();
        let uris: Vec<&str> = uris.iter().map(String::as_str).collect();
        send_all(&mut service, &uris).await;
        let at: Vec<u128> = millis(&sent).into_iter().map(|(_, at)| at).collect();
        assert_eq!(at, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 200, 400]);
    }

    #[tokio::test(start_paused = true)]
    async fn unlimited_never_waits() {
        let start = Instant::now();
        let (sent, inner) = recorder(start);
        let mut service = RateLimitLayer::new(RateLimit::unlimited()).layer(inner);
        let uris: Vec<String> = (0..1000).map(|i| format!("/{i}")).collect();
        let uris: Vec<&str> = uris.iter().map(String::as_str).collect();
        send_all(&mut service, &uris).await;
        let sent = millis(&sent);
        assert_eq!(sent.len(), 1000);
        assert!(sent.iter().all(|(_, at)| *at == 0), "{sent:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn watches_take_no_token() {
        let start = Instant::now();
        let (sent, inner) = recorder(start);
        let mut service = RateLimitLayer::new(RateLimit::new(5.0, 1).unwrap()).layer(inner);
        send_all(
            &mut service,
            &[
                "/api/v1/pods",
                "/api/v1/pods?watch=true&resourceVersion=1",
                "/api/v1/pods?watch=1",
                "/api/v1/pods?limit=500",
            ],
        )
        .await;
        assert_eq!(
            millis(&sent),
            [
                ("/api/v1/pods".to_owned(), 0),
                ("/api/v1/pods?watch=true&resourceVersion=1".to_owned(), 0),
                ("/api/v1/pods?watch=1".to_owned(), 0),
                ("/api/v1/pods?limit=500".to_owned(), 200),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_dropped_while_waiting_gives_its_token_back() {
        let start = Instant::now();
        let (sent, inner) = recorder(start);
        let mut service = RateLimitLayer::new(RateLimit::new(5.0, 1).unwrap()).layer(inner);
        send_all(&mut service, &["/1"]).await;
        // Waits for 200 ms, dropped after 100.
        let waiting = service.call(Request::get("/dropped").body(()).unwrap());
        assert!(
            tokio::time::timeout(Duration::from_millis(100), waiting)
                .await
                .is_err()
        );
        // Its token is back: the next one is due at 200 ms, not 400.
        send_all(&mut service, &["/2"]).await;
        assert_eq!(
            millis(&sent),
            [("/1".to_owned(), 0), ("/2".to_owned(), 200)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waits_are_observed_by_verb_host_and_resource_and_watches_not() {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = ClientMetrics::new(&mut registry);
        let (_, inner) = recorder(Instant::now());
        let mut service = RateLimitLayer::new(RateLimit::new(5.0, 1).unwrap())
            .metrics(metrics, Some("10.0.0.1:6443".to_owned()))
            .layer(inner);
        send_all(
            &mut service,
            &[
                "/api/v1/namespaces/x/pods/a",
                "/api/v1/pods?watch=true",
                "/api/v1/namespaces/x/pods/b",
                "/api/v1/namespaces/x/pods/c",
            ],
        )
        .await;
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let labels = r#"{verb="GET",host="10.0.0.1:6443",resource="pods"}"#;
        // Three GETs, waits of 0, 0.2 and 0.4 s; the watch took no token and is not there.
        let value = |name: &str| -> f64 {
            let prefix = format!("{name}{labels} ");
            let line = text.lines().find_map(|l| l.strip_prefix(prefix.as_str()));
            line.unwrap_or_else(|| panic!("{name} not in\n{text}"))
                .parse()
                .unwrap()
        };
        assert_eq!(
            value("rest_client_rate_limiter_duration_seconds_count"),
            3.0
        );
        let sum = value("rest_client_rate_limiter_duration_seconds_sum");
        assert!((sum - 0.6).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn rejects_limits_that_would_never_let_a_request_through() {
        for (qps, burst) in [
            (0.0, 10),
            (-1.0, 10),
            (f32::NAN, 10),
            (f32::INFINITY, 10),
            (5.0, 0),
        ] {
            assert!(
                matches!(
                    RateLimit::new(qps, burst),
                    Err(Error::InvalidRateLimit { .. })
                ),
                "{qps} {burst}"
            );
        }
        let limit = RateLimit::new(50.0, 100).unwrap();
        assert_eq!((limit.qps(), limit.burst()), (Some(50.0), Some(100)));
        assert_eq!(RateLimit::unlimited().qps(), None);
    }
}
