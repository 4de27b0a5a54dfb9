//! Which wire format a client really got: a client that records the `Content-Type` of every
//! response.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use kube::Client;
use kube::client::ClientBuilder;

use crate::error::Error;

/// The media types (parameters aside) of the responses a client received.
#[derive(Clone, Default)]
pub struct ContentTypes(Arc<Mutex<BTreeSet<String>>>);

impl ContentTypes {
    /// Every media type seen so far.
    pub fn seen(&self) -> BTreeSet<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
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
///
/// # Errors
/// [`Error::Kubeconfig`] when kube cannot build a client from `config`.
pub fn recording_client(mut config: kube::Config) -> Result<(Client, ContentTypes), Error> {
    config.default_retry = false;
    let types = ContentTypes::default();
    let layer = tower::util::MapResponseLayer::new(recorder(types.clone()));
    let client = ClientBuilder::try_from(config)
        .map_err(|e| Error::Kubeconfig(e.to_string()))?
        .with_layer(&layer)
        .build();
    Ok((client, types))
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
            types
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(media.trim().to_owned());
        }
        resp
    }
}
