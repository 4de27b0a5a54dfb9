//! Finalizers: cleanup that must run before an object goes away (feature `kube`).
//!
//! A controller that creates something outside the object (a cloud resource, a DNS record,
//! a row elsewhere) puts its finalizer on the object, so that deleting the object only marks
//! it (`deletionTimestamp`) until the controller has cleaned up and removed the finalizer.
//! [`finalizer`] does the bookkeeping in a reconcile:
//!
//! - the object is not being deleted and lacks the finalizer: add it, then
//!   [`FinalizerEvent::Apply`] with the object as the server returned it (in the same call:
//!   adding a finalizer changes no `generation`, so a controller that skips updates with
//!   [`predicates::generation_changed`](crate::predicates::generation_changed) would never
//!   see the update it makes);
//! - it is not being deleted and has it: [`FinalizerEvent::Apply`], your reconcile;
//! - it is being deleted and has it: [`FinalizerEvent::Cleanup`]; when that succeeds, remove
//!   the finalizer (the API server then deletes the object, if no other finalizer holds it).
//!   Cleanups must be idempotent: a reconcile working from a cache that has not yet seen
//!   the removal runs the cleanup again, and then finds the finalizer already gone;
//! - it is being deleted and lacks it: nothing to do.
//!
//! Both writes are JSON patches that first *test* the object's `resourceVersion`: a reconcile
//! working from a stale cache cannot drop a finalizer someone else added since, or add ours
//! twice; the write fails, the key is retried, and the next attempt sees the current object.
//! Deleting the object while the controller is down is fine: the finalizer keeps it until the
//! controller is back, lists it, and cleans up.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kinformer_controller::controller::{Action, Context};
//! use kinformer_controller::finalizer::{finalizer, FinalizerError, FinalizerEvent};
//! use kinformer_core::ObjectKey;
//! use kinformer_indexer::Lister;
//! use kube::Api;
//!
//! struct Ctx { client: kube::Client, cache: Lister<ConfigMap> }
//!
//! async fn reconcile(key: ObjectKey, ctx: Context<Ctx>) -> Result<Action, FinalizerError<kube::Error>> {
//!     let ns = key.namespace().unwrap_or_default();
//!     let Ok(cm) = ctx.cache.namespaced(ns).get(key.name()) else {
//!         return Ok(Action::Done); // gone: nothing of ours is left on it
//!     };
//!     let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
//!     finalizer(&api, "example.com/cleanup", cm, |event| async move {
//!         match event {
//!             FinalizerEvent::Apply(cm) => { /* make the world match `cm` */ }
//!             FinalizerEvent::Cleanup(cm) => { /* undo what Apply made for `cm` */ }
//!         }
//!         Ok::<_, kube::Error>(Action::Done)
//!     })
//!     .await
//! }
//! # let _ = reconcile;
//! ```

use std::future::Future;
use std::sync::Arc;

use kube::Api;
use kube_core::Resource;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::controller::Action;

/// What [`finalizer`] asks your reconcile to do.
#[derive(Debug)]
pub enum FinalizerEvent<K> {
    /// The object lives and carries the finalizer: reconcile it as usual.
    Apply(Arc<K>),
    /// The object is being deleted and still carries the finalizer: clean up what the
    /// controller made for it. On success the finalizer is removed.
    Cleanup(Arc<K>),
}

/// Why [`finalizer`] failed. The controller retries the key either way.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FinalizerError<E> {
    /// Your reconcile (apply or cleanup) failed; the finalizer stays.
    #[error("the reconcile failed")]
    Reconcile(#[source] E),
    /// Adding the finalizer failed (a conflict: the object changed since it was cached).
    #[error("cannot add the finalizer")]
    Add(#[source] kube::Error),
    /// Removing the finalizer failed (a conflict: the object changed since it was cached).
    #[error("cannot remove the finalizer")]
    Remove(#[source] kube::Error),
    /// The object has no name, so it cannot be patched.
    #[error("the object has no name")]
    UnnamedObject,
}

/// Runs `reconcile` for `obj` with the finalizer `name` kept in step: see the
/// [module docs](self). `api` must address `obj`'s namespace (or the cluster, for a
/// cluster-scoped kind).
///
/// # Errors
/// [`FinalizerError::Reconcile`] when `reconcile` fails; [`FinalizerError::Add`] or
/// [`FinalizerError::Remove`] when the patch is refused (most often because the cached
/// object is stale: the retry sees the current one).
pub async fn finalizer<K, F, Fut, E>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    reconcile: F,
) -> Result<Action, FinalizerError<E>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    F: FnOnce(FinalizerEvent<K>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
{
    let meta = obj.meta();
    let object_name = meta.name.clone().ok_or(FinalizerError::UnnamedObject)?;
    let finalizers = meta.finalizers.as_deref().unwrap_or_default();
    let ours = finalizers.iter().position(|f| f == name);
    let deleting = meta.deletion_timestamp.is_some();
    let rv_test = meta
        .resource_version
        .as_ref()
        .map(|rv| json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
    match (deleting, ours) {
        (false, Some(_)) => reconcile(FinalizerEvent::Apply(obj))
            .await
            .map_err(FinalizerError::Reconcile),
        (false, None) => {
            let add = if finalizers.is_empty() {
                json!({"op": "add", "path": "/metadata/finalizers", "value": [name]})
            } else {
                json!({"op": "add", "path": "/metadata/finalizers/-", "value": name})
            };
            let patch: Vec<_> = rv_test.into_iter().chain([add]).collect();
            let updated = json_patch(api, &object_name, &patch)
                .await
                .map_err(FinalizerError::Add)?;
            tracing::debug!(object = %object_name, finalizer = name, "finalizer added");
            reconcile(FinalizerEvent::Apply(Arc::new(updated)))
                .await
                .map_err(FinalizerError::Reconcile)
        }
        (true, Some(i)) => {
            let action = reconcile(FinalizerEvent::Cleanup(obj))
                .await
                .map_err(FinalizerError::Reconcile)?;
            let remove = [
                json!({"op": "test", "path": format!("/metadata/finalizers/{i}"), "value": name}),
                json!({"op": "remove", "path": format!("/metadata/finalizers/{i}")}),
            ];
            let patch: Vec<_> = rv_test.into_iter().chain(remove).collect();
            if let Err(e) = json_patch(api, &object_name, &patch).await {
                // A cleanup from a stale cache can follow one that already removed the
                // finalizer (the object then changed, or is gone): nothing left to do.
                match api.get_opt(&object_name).await {
                    Ok(None) => return Ok(action),
                    Ok(Some(now)) if !now.meta().finalizers.iter().flatten().any(|f| f == name) => {
                        return Ok(action);
                    }
                    _ => return Err(FinalizerError::Remove(e)),
                }
            }
            tracing::debug!(object = %object_name, finalizer = name, "cleaned up; finalizer removed");
            Ok(action)
        }
        (true, None) => Ok(Action::Done),
    }
}

/// Sends a JSON patch (`application/json-patch+json`) for the object `name` of `api`.
async fn json_patch<K>(
    api: &Api<K>,
    name: &str,
    ops: &[serde_json::Value],
) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let body = serde_json::to_vec(ops).map_err(kube::Error::SerdeError)?;
    let url = format!("{}/{}", api.resource_url(), name);
    let request = http::Request::patch(url)
        .header(http::header::CONTENT_TYPE, "application/json-patch+json")
        .header(http::header::ACCEPT, "application/json")
        .body(body)
        .map_err(kube::Error::HttpError)?;
    api.clone().into_client().request::<K>(request).await
}
