//! Where events are written: the [`EventSink`] trait (client-go's `EventSink`) and its
//! Kubernetes implementation.

use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use crate::Error;

/// Stores events: the broadcaster's only way out, and the swap point for tests or for
/// another destination.
///
/// [`KubeSink`] is the default. An implementation answers with the crate's [`Error`] so
/// that the broadcaster can tell, as client-go does, a refusal by the server
/// ([`Error::Api`], not retried except as noted there) from a failed transport
/// ([`Error::Transport`], retried) and from a request that cannot be built
/// ([`Error::Request`], not retried).
pub trait EventSink: Send + Sync + 'static {
    /// Creates `event` in its namespace and returns what the server stored.
    fn create(&self, event: &Event) -> impl Future<Output = Result<Event, Error>> + Send;

    /// Applies `patch`, a strategic-merge patch in JSON (for a series,
    /// `{"series":{"count":N,"lastObservedTime":"..."}}`), to the event named
    /// `event.metadata.name` in its namespace, and returns the patched event. `event` is
    /// the whole event as the broadcaster has it, the patch already applied.
    fn patch(
        &self,
        event: &Event,
        patch: &[u8],
    ) -> impl Future<Output = Result<Event, Error>> + Send;
}

/// A shared sink, so that the caller can keep a handle on it (to read what a test sink
/// recorded, say).
impl<S: EventSink> EventSink for Arc<S> {
    fn create(&self, event: &Event) -> impl Future<Output = Result<Event, Error>> + Send {
        (**self).create(event)
    }

    fn patch(
        &self,
        event: &Event,
        patch: &[u8],
    ) -> impl Future<Output = Result<Event, Error>> + Send {
        (**self).patch(event, patch)
    }
}

/// Writes events to the API server's `events.k8s.io/v1` resource through a
/// [`kube::Client`] (client-go's `EventSinkImpl`).
///
/// The client needs `create` and `patch` on `events.events.k8s.io` in every namespace it
/// records events for (and in `default` for cluster-scoped objects).
#[derive(Clone)]
pub struct KubeSink {
    client: kube::Client,
}

impl KubeSink {
    /// A sink writing through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api(&self, event: &Event) -> Result<Api<Event>, Error> {
        match event.metadata.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => Ok(Api::namespaced(self.client.clone(), ns)),
            _ => Err(Error::Request("an event needs a namespace".into())),
        }
    }
}

impl std::fmt::Debug for KubeSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSink").finish_non_exhaustive()
    }
}

impl EventSink for KubeSink {
    async fn create(&self, event: &Event) -> Result<Event, Error> {
        let api = self.api(event)?;
        Ok(api.create(&PostParams::default(), event).await?)
    }

    async fn patch(&self, event: &Event, patch: &[u8]) -> Result<Event, Error> {
        let api = self.api(event)?;
        let name = event
            .metadata
            .name
            .as_deref()
            .ok_or_else(|| Error::Request("an event to patch needs a name".into()))?;
        let patch: serde_json::Value =
            serde_json::from_slice(patch).map_err(|err| Error::Request(Box::new(err)))?;
        Ok(api
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await?)
    }
}
