//! Which wire format a lister-watcher really got: a client that records the
//! `Content-Type` of every response.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use kinformer_reflector::{KubeListerWatcher, WireFormat};
use kube::Client;
use kube::client::ClientBuilder;
use kube::core::Resource;

/// The media types (parameters aside) of the responses a client received.
#[derive(Clone, Default)]
pub struct ContentTypes(Arc<Mutex<BTreeSet<String>>>);

impl ContentTypes {
    pub fn seen(&self) -> BTreeSet<String> {
        self.0.lock().unwrap().clone()
    }

    /// Whether every response was Kubernetes protobuf (lists and watch streams alike).
    pub fn all_protobuf(&self) -> bool {
        let seen = self.seen();
        !seen.is_empty()
            && seen
                .iter()
                .all(|t| t == "application/vnd.kubernetes.protobuf")
    }

    /// Whether every response was JSON.
    pub fn all_json(&self) -> bool {
        let seen = self.seen();
        !seen.is_empty() && seen.iter().all(|t| t == "application/json")
    }
}

/// A client like the reflector's (kube's stack without its retry layer) that records the
/// media type of every response in the returned [`ContentTypes`].
pub fn recording_client(mut config: kube::Config) -> (Client, ContentTypes) {
    config.default_retry = false;
    let types = ContentTypes::default();
    let layer = tower::util::MapResponseLayer::new(recorder(types.clone()));
    let client = ClientBuilder::try_from(config)
        .expect("a client from the control plane's config")
        .with_layer(&layer)
        .build();
    (client, types)
}

/// The lister-watcher `make` builds on a client of its own, in `format`, and what its
/// responses were.
pub fn recorded<K>(
    config: kube::Config,
    format: WireFormat,
    make: impl FnOnce(Client) -> KubeListerWatcher<K>,
) -> (KubeListerWatcher<K>, ContentTypes)
where
    K: Resource,
{
    let (client, types) = recording_client(config);
    (make(client).wire_format(format), types)
}

/// Records the media type of each response (generic over the body type of kube's stack).
fn recorder<B>(types: ContentTypes) -> impl Fn(http::Response<B>) -> http::Response<B> + Clone {
    move |resp| {
        if let Some(media) = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
        {
            types.0.lock().unwrap().insert(media.trim().to_owned());
        }
        resp
    }
}
