//! Layers for a `kube::Client` that client-go's rest client has and kube's has not: a
//! client-side rate limit and request metrics.
//!
//! - **[`RateLimit`]** ([`RateLimitLayer`]): a token bucket per client, client-go's
//!   `rest.Config{QPS, Burst}` with its defaults, 5 requests a second and bursts of 10
//!   ([`RateLimit::default`]); a request over the limit waits for its token, as in
//!   client-go (`Wait`, never an error); watches take none, as in client-go; unlimited on
//!   request ([`RateLimit::unlimited`]). kube has no client-side limit, so neither have
//!   kinformer's reflectors, informers and controllers over a plain `kube::Client`: a
//!   controller stuck in an error loop writes as fast as the API server answers.
//! - **[`ClientMetrics`]** ([`MetricsLayer`]): client-go's
//!   `rest_client_requests_total{code, method, host}` and
//!   `rest_client_request_duration_seconds{verb, host}` (its buckets), each with a
//!   `resource` label read from the path (`pods`, `pods/status`; never a name or a
//!   namespace), in a prometheus-client [`Registry`](prometheus_client::registry::Registry)
//!   of yours; `code="<error>"` for a request that got no response. With the limit,
//!   `rest_client_rate_limiter_duration_seconds{verb, host, resource}`: each request's wait
//!   for its token.
//! - **[`ClientBuilder`]**: both on a client built from a `kube::Config`, on kube's
//!   connection or on the reflector's ([`ClientBuilder::reflector_connection`]: kube's
//!   retry off, `TCP_NODELAY`, as kinformer-reflector's `reflector_client`); or the
//!   layers alone for a stack of your own ([`ClientBuilder::layers`]).
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::Api;
//! use prometheus_client::registry::Registry;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mut registry = Registry::default();
//! // client-go's 5 requests a second, bursts of 10; metrics in `registry`.
//! let client = kinformer_client::ClientBuilder::new(kube::Config::infer().await?)
//!     .metrics(&mut registry)
//!     .build()?;
//! let pods: Api<Pod> = Api::namespaced(client, "default");
//! pods.get_opt("web-0").await?;
//!
//! let mut text = String::new();
//! prometheus_client::encoding::text::encode(&mut text, &registry)?;
//! // rest_client_requests_total{code="200",method="GET",host="...",resource="pods"} 1
//! # Ok(())
//! # }
//! ```
//!
//! # Differences from client-go
//!
//! - A `resource` label on both metrics (client-go's have none; its path template is given
//!   to its latency adapter, which drops it).
//! - A limit cannot be zero: client-go reads a zero QPS or burst as "the default" and a
//!   negative QPS as "unlimited"; here each is said by name ([`RateLimit::default`],
//!   [`RateLimit::unlimited`]) and anything else is [`Error::InvalidRateLimit`].
//! - The layers see one request per call of the client: kube's retry layer (on in kube's
//!   default client, off on the reflector's connection) retries below them, where client-go
//!   throttles and counts each retry.
//! - `rest_client_request_retries_total` and the size histograms are not recorded.

mod builder;
mod connection;
pub mod metrics;
mod rate_limit;

use std::future::Future;
use std::pin::Pin;

pub use builder::{ClientBuilder, ClientLayers};
pub use connection::{ReflectorConnection, reflector_client, reflector_connection};
pub use metrics::{ClientMetrics, MetricsLayer, MetricsService, TimedBody};
pub use rate_limit::{DEFAULT_BURST, DEFAULT_QPS, RateLimit, RateLimitLayer, RateLimitService};

/// The response future of the layers' services.
pub type ResponseFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
pub(crate) use ResponseFuture as BoxFuture;

/// What can go wrong building a client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A QPS that is not a finite number above zero, or a burst of zero.
    #[error(
        "invalid client rate limit: qps {qps}, burst {burst} (qps must be finite and above zero, burst at least 1)"
    )]
    InvalidRateLimit {
        /// The QPS given.
        qps: f32,
        /// The burst given.
        burst: u32,
    },
    /// kube could not build a client from the config (TLS material, authentication).
    #[error("cannot build the Kubernetes client")]
    Client {
        /// kube's error.
        #[source]
        source: kube::Error,
    },
}

/// Whether a request is a watch: `?watch=true` (or any true of Go's `ParseBool`, as the
/// API server reads it), or the deprecated `/watch/` path prefix.
pub(crate) fn is_watch(uri: &http::Uri) -> bool {
    let query_says = uri.query().is_some_and(|query| {
        query.split('&').any(|pair| {
            matches!(
                pair.split_once('='),
                Some(("watch", "1" | "t" | "T" | "true" | "TRUE" | "True"))
            )
        })
    });
    let mut path = uri.path().split('/').filter(|part| !part.is_empty());
    let path_says = match path.next() {
        Some("api") => path.nth(1) == Some("watch"),
        Some("apis") => path.nth(2) == Some("watch"),
        _ => false,
    };
    query_says || path_says
}

#[cfg(test)]
mod tests {
    use super::is_watch;

    #[test]
    fn watches_by_query_or_path() {
        for (uri, watch) in [
            ("/api/v1/pods?watch=true", true),
            (
                "/api/v1/pods?labelSelector=a%3Db&watch=1&resourceVersion=5",
                true,
            ),
            ("/api/v1/pods?watch=false", false),
            ("/api/v1/pods?watch", false),
            ("/api/v1/pods?limit=500", false),
            ("/api/v1/pods", false),
            ("/api/v1/watch/namespaces/x/pods", true),
            ("/apis/apps/v1/watch/deployments", true),
            ("/apis/apps/v1/deployments/watch", false),
            ("/api/v1/namespaces/x/pods/watch", false),
        ] {
            assert_eq!(is_watch(&uri.parse().unwrap()), watch, "{uri}");
        }
    }
}
