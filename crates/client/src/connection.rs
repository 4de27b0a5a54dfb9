//! The connection a reflector's `kube::Client` should use: kube's stack without its retry
//! layer, with `TCP_NODELAY`. Here, beside the client's other layers, so that the
//! Kubernetes lister-watcher (kinformer-kube) and [`ClientBuilder`](crate::ClientBuilder)
//! share it.

/// A `kube::Client` for a reflector: `config` with kube's built-in retry turned off, on
/// connections with `TCP_NODELAY`.
///
/// kube retries `429`, `503` and `504` inside the client by default
/// (`Config::default_retry`: up to 15 times, 5 ms to 1000 s apart). A reflector should
/// see those statuses itself, as client-go's does: a `429` must back off on the
/// reflector's own schedule (and reach its error handler), and a `504` "Too large
/// resource version" must trigger a relist at `""` at once, not minutes of hidden
/// retries. Build the reflector's client with this function; keep the default for
/// other clients.
///
/// kube's client leaves Nagle's algorithm on. On a new TLS connection the request is a
/// small write right after the handshake's last one, so it waits for the server's
/// delayed ACK: about 40 ms on Linux (seen with `strace`: 42 ms between writing the
/// request and the first response byte, 1.5 ms on the reused connection). Every relist
/// and every watch that opens a connection pays it; client-go sets `TCP_NODELAY`, as
/// Go does on every TCP connection. This client does too. It is kube's stack (base URI,
/// authentication, extra headers, TLS from the config, its timeouts) without kube's
/// retry, tracing and decompression layers; with a `proxy_url` in the config it is
/// kube's own client instead (Nagle on).
///
/// # Errors
/// kube's error when the client cannot be built from `config` (its TLS or authentication
/// settings).
pub fn reflector_client(mut config: kube::Config) -> Result<kube::Client, kube::Error> {
    config.default_retry = false;
    if config.proxy_url.is_some() {
        return kube::Client::try_from(config);
    }
    reflector_connection(config).map(kube::client::ClientBuilder::build)
}

/// The connection under [`reflector_client`]'s client, boxed: kube's `Body` in, hyper's
/// body out.
pub type ReflectorConnection = tower::util::BoxService<
    http::Request<kube::client::Body>,
    http::Response<hyper::body::Incoming>,
    Box<dyn std::error::Error + Send + Sync>,
>;

/// [`reflector_client`]'s stack as a `kube::client::ClientBuilder` that takes more layers
/// (client-side rate limiting, request metrics: kinformer-client): kube's stack (base URI,
/// authentication, extra headers, TLS and timeouts from `config`) on connections with
/// `TCP_NODELAY`, without kube's retry, tracing and decompression layers. `config`'s
/// `proxy_url` is not used: through a proxy, build kube's own client
/// (`kube::client::ClientBuilder::try_from(config)`), as [`reflector_client`] does.
///
/// # Errors
/// kube's, when the TLS connector or the authentication layer cannot be built from
/// `config`.
pub fn reflector_connection(
    config: kube::Config,
) -> Result<kube::client::ClientBuilder<ReflectorConnection>, kube::Error> {
    use kube::client::ConfigExt;
    use tower::ServiceBuilder;

    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = config.rustls_https_connector_with_connector(http)?;
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let hyper_client =
        hyper_util::client::legacy::Builder::new(hyper_util::rt::TokioExecutor::new())
            .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> { Box::new(e) })
        .service(hyper_client);
    Ok(kube::client::ClientBuilder::new(
        tower::util::BoxService::new(service),
        config.default_namespace,
    ))
}
