//! [`ClientBuilder`]: a `kube::Client` with the rate limit and the metrics on it.

use prometheus_client::registry::Registry;

use crate::Error;
use crate::metrics::{ClientMetrics, MetricsLayer, MetricsService};
use crate::rate_limit::{DEFAULT_BURST, DEFAULT_QPS, RateLimit, RateLimitLayer, RateLimitService};

/// Builds a `kube::Client` from a `kube::Config` with client-go's client-side rate limit
/// (5 requests a second, bursts of 10, unless told otherwise) and, if given a registry,
/// client-go's request metrics.
///
/// ```no_run
/// use prometheus_client::registry::Registry;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let mut registry = Registry::default();
/// let client = kinformer_client::ClientBuilder::new(kube::Config::infer().await?)
///     .qps(20.0)
///     .burst(40)
///     .metrics(&mut registry)
///     .build()?;
/// # let _ = client;
/// # Ok(())
/// # }
/// ```
///
/// The layers sit outside kube's whole stack (authentication, retry, ...): one request
/// made through the client is one token and one count, whatever kube's retry layer does
/// below (a reflector's client has that retry off: see
/// [`reflector_connection`](Self::reflector_connection)).
#[derive(Debug)]
pub struct ClientBuilder {
    config: kube::Config,
    limit: Limit,
    metrics: Option<ClientMetrics>,
    reflector_connection: bool,
}

#[derive(Debug, Clone, Copy)]
enum Limit {
    Limited { qps: f32, burst: u32 },
    Unlimited,
}

impl ClientBuilder {
    /// A client of `config`, limited to client-go's defaults, without metrics.
    pub fn new(config: kube::Config) -> Self {
        Self {
            config,
            limit: Limit::Limited {
                qps: DEFAULT_QPS,
                burst: DEFAULT_BURST,
            },
            metrics: None,
            reflector_connection: false,
        }
    }

    /// Requests a second on average (client-go's `rest.Config.QPS`; default 5). Checked by
    /// [`build`](Self::build): finite and above zero. Turns a limit back on after
    /// [`unlimited`](Self::unlimited).
    pub fn qps(mut self, qps: f32) -> Self {
        let burst = match self.limit {
            Limit::Limited { burst, .. } => burst,
            Limit::Unlimited => DEFAULT_BURST,
        };
        self.limit = Limit::Limited { qps, burst };
        self
    }

    /// Requests at once (client-go's `rest.Config.Burst`; default 10). Checked by
    /// [`build`](Self::build): at least 1. Turns a limit back on after
    /// [`unlimited`](Self::unlimited).
    pub fn burst(mut self, burst: u32) -> Self {
        let qps = match self.limit {
            Limit::Limited { qps, .. } => qps,
            Limit::Unlimited => DEFAULT_QPS,
        };
        self.limit = Limit::Limited { qps, burst };
        self
    }

    /// The limit as a [`RateLimit`].
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.limit = match (limit.qps(), limit.burst()) {
            (Some(qps), Some(burst)) => Limit::Limited { qps, burst },
            _ => Limit::Unlimited,
        };
        self
    }

    /// No client-side limit (kube's own behaviour; client-go's with a negative QPS): for
    /// clients that the API server's priority and fairness alone should pace.
    pub fn unlimited(self) -> Self {
        self.rate_limit(RateLimit::unlimited())
    }

    /// Registers [`ClientMetrics`] in `registry` and records into them. For several
    /// clients on one registry, register once with [`ClientMetrics::new`] and give each
    /// client a clone through [`metrics_into`](Self::metrics_into).
    pub fn metrics(self, registry: &mut Registry) -> Self {
        self.metrics_into(ClientMetrics::new(registry))
    }

    /// Records into `metrics`, registered already.
    pub fn metrics_into(mut self, metrics: ClientMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The connection [`reflector_client`](crate::reflector_client) makes, under the layers:
    /// kube's retry of `429`, `503` and `504` off, so that a reflector sees them and backs
    /// off or relists on its own schedule, and connections with `TCP_NODELAY` (see
    /// [`reflector_client`](crate::reflector_client)'s docs for why both). Use it for the client of a
    /// `KubeListerWatcher` or a `SharedInformerFactory`; its per-request settings
    /// (protobuf `Accept` headers, `timeoutSeconds`) are in its requests and pass the layers
    /// untouched.
    pub fn reflector_connection(mut self) -> Self {
        self.reflector_connection = true;
        self
    }

    /// The layers alone, to put on a `kube::client::ClientBuilder` of your own stack.
    ///
    /// # Errors
    /// [`Error::InvalidRateLimit`] when the QPS or the burst cannot make a limit.
    pub fn layers(&self) -> Result<ClientLayers, Error> {
        let limit = match self.limit {
            Limit::Limited { qps, burst } => RateLimit::new(qps, burst)?,
            Limit::Unlimited => RateLimit::unlimited(),
        };
        let host = self
            .config
            .cluster_url
            .authority()
            .map(|authority| authority.as_str().to_owned());
        let mut rate_limit = RateLimitLayer::new(limit);
        let mut metrics = MetricsLayer::disabled();
        if let Some(client_metrics) = &self.metrics {
            rate_limit = rate_limit.metrics(client_metrics.clone(), host.clone());
            metrics = MetricsLayer::new(client_metrics.clone());
            if let Some(host) = host {
                metrics = metrics.host(host);
            }
        }
        Ok(ClientLayers {
            rate_limit,
            metrics,
        })
    }

    /// The client.
    ///
    /// Call it within a Tokio runtime (kube's `Client` starts a task).
    ///
    /// # Errors
    /// [`Error::InvalidRateLimit`] when the QPS or the burst cannot make a limit;
    /// [`Error::Client`] when kube cannot build a client from the config.
    pub fn build(self) -> Result<kube::Client, Error> {
        let layers = self.layers()?;
        let client_error = |source| Error::Client { source };
        let mut config = self.config;
        if self.reflector_connection {
            config.default_retry = false;
            // As `reflector_client`: through a proxy, kube's own connection (Nagle on).
            if config.proxy_url.is_none() {
                return crate::reflector_connection(config)
                    .map(|builder| layers.apply(builder).build())
                    .map_err(client_error);
            }
        }
        let builder = kube::client::ClientBuilder::try_from(config).map_err(client_error)?;
        Ok(layers.apply(builder).build())
    }
}

/// The rate limit and the metrics as layers, for any `kube::client::ClientBuilder`
/// ([`ClientBuilder::layers`]).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let config = kube::Config::infer().await?;
/// let layers = kinformer_client::ClientBuilder::new(config.clone()).layers()?;
/// let stack = kube::client::ClientBuilder::try_from(config)?; // or a stack of your own
/// let client = layers.apply(stack).build();
/// # let _ = client;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ClientLayers {
    rate_limit: RateLimitLayer,
    metrics: MetricsLayer,
}

impl ClientLayers {
    /// Puts the layers on `builder`'s stack: the metrics outermost, so that a request's
    /// time includes its wait for a token (as client-go's), then the rate limit.
    pub fn apply<S>(
        &self,
        builder: kube::client::ClientBuilder<S>,
    ) -> kube::client::ClientBuilder<MetricsService<RateLimitService<S>>> {
        builder
            .with_layer(&self.rate_limit)
            .with_layer(&self.metrics)
    }
}
