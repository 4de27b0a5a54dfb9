//! A `kube::Client` that reaches no server.

/// A `kube::Client` whose every request fails at once (as a server that cannot be
/// reached), with `default` as its default namespace: what a
/// `SharedInformerFactory` needs to be built when every one of its informers replays
/// (`SharedInformerFactoryBuilder::lister_watcher_for`), so that a controller written for
/// a factory runs over recordings with no cluster, and a write it makes fails rather than
/// reaching one.
///
/// ```
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// # rt.block_on(async {
/// let client = kinformer_replay::offline_client("default");
/// let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::default_namespaced(client);
/// assert!(pods.get("web-0").await.is_err());
/// # });
/// ```
pub fn offline_client(default: &str) -> kube::Client {
    let service = tower::service_fn(|_: http::Request<kube::client::Body>| async {
        Err::<http::Response<kube::client::Body>, _>(std::io::Error::other(
            "offline: this client reaches no server (kinformer-replay)",
        ))
    });
    kube::Client::new(service, default)
}
