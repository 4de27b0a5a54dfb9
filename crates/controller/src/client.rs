//! One client per kind for a reconcile: reads from the informer's cache, writes to the API
//! server, and remembers each write for read-your-writes (controller-runtime's
//! `client.Client` from the manager, typed).
//!
//! Why: a controller reads many objects and writes few. Reading through the cache costs no
//! request; writing goes to the API server; and the next reconcile of a key must not act on
//! a cache that has not seen this reconcile's writes yet (it would create a second child, or
//! write a status twice). [`Client`] does all three: [`get`](Client::get),
//! [`list`](Client::list) and [`by_field`](Client::by_field) read the informer's cache (what
//! a lister reads, in place, no copy), every write goes to the server and is recorded in the
//! reconcile's [`Context`] ([`Context::wrote`]) so the controller holds the key back until
//! the cache has caught up, and [`write_status`](Client::write_status) writes only what the
//! reconcile changed in the status, or nothing when nothing changed.
//!
//! ```no_run
//! use k8s_openapi::api::batch::v1::Job;
//! use kinformer_controller::client::{Client, ignore_not_found};
//! use kinformer_controller::controller::{Action, Context};
//! use kinformer_core::ObjectKey;
//!
//! struct Ctx { jobs: Client<Job> }
//!
//! async fn reconcile(key: ObjectKey, ctx: Context<Ctx>) -> Result<Action, kinformer_controller::client::Error> {
//!     let ns = key.namespace().unwrap_or_default();
//!     // From the cache: a view of the encoded job, no request, no decoding.
//!     let Some(job) = ctx.jobs.get(ns, key.name()) else {
//!         return Ok(Action::Done);
//!     };
//!     if job.status().and_then(|s| s.succeeded()).unwrap_or(0) > 0 {
//!         // To the server; the next reconcile of this key waits until the cache has seen it.
//!         ignore_not_found(ctx.jobs.delete(&ctx, ns, key.name()).await)?;
//!     }
//!     Ok(Action::Done)
//! }
//! # let _ = reconcile;
//! ```
//!
//! Differences from controller-runtime's client: one [`Client`] per kind (typed, as
//! `kube::Api`), made from the informer it reads; reads are synchronous (the cache is in
//! memory) and return what the cache holds (`Arc<Cached<K>>` for the default informers:
//! [`get_object`](Client::get_object) decodes one for a change); a write records
//! read-your-writes by itself, where controller-runtime v0.25's experimental option makes
//! the *reads* wait.

use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kinformer_compact_store::{Cached, DecodeError, KubeObject};
use kinformer_core::MetaObject;
use kinformer_indexer::{Indexer, Lister, Selector};
use kinformer_informer_factory::SharedIndexInformer;
use kube::api::{DeleteParams, GetParams, Patch, PatchParams, PostParams};
use kube::core::{Request, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::controller::fresh::has_seen;
use crate::controller::{CacheProgress, Context};

/// What a [`Client`]'s call can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The API server refused the request, or could not be reached (kube's error: see
    /// [`is_not_found`](Self::is_not_found), [`is_already_exists`](Self::is_already_exists),
    /// [`is_conflict`](Self::is_conflict)).
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// An object could not be written as JSON (a `Serialize` of your own that fails).
    #[error("cannot write the object as JSON")]
    Json(#[from] serde_json::Error),
    /// A cached object did not decode as the kind (see [`Cached::decode`]).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A request could not be built (an empty name, say).
    #[error("cannot build the request")]
    Request(#[from] kube::core::request::Error),
}

impl Error {
    /// The HTTP status the API server answered with, if it answered.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Self::Kube(kube::Error::Api(status)) => Some(status.code),
            _ => None,
        }
    }

    /// `404 Not Found`: the object is not there (controller-runtime's `IsNotFound`).
    pub fn is_not_found(&self) -> bool {
        self.status_code() == Some(404)
    }

    /// `409` with reason `AlreadyExists`: a create found the name taken.
    pub fn is_already_exists(&self) -> bool {
        matches!(self, Self::Kube(kube::Error::Api(s)) if s.is_already_exists())
    }

    /// `409` other than `AlreadyExists`: an update or a patch with a resourceVersion lost a
    /// race with another writer (controller-runtime's `IsConflict`).
    pub fn is_conflict(&self) -> bool {
        self.status_code() == Some(409) && !self.is_already_exists()
    }
}

/// `Ok(None)` for a "not found", the other results as they are (controller-runtime's
/// `client.IgnoreNotFound`): a delete of something already gone, a get of something that
/// may not exist.
///
/// # Errors
/// Every error but a "not found".
pub fn ignore_not_found<T>(result: Result<T, Error>) -> Result<Option<T>, Error> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// `Ok(None)` for an "already exists", the other results as they are: a create that an
/// earlier attempt already made.
///
/// # Errors
/// Every error but an "already exists".
pub fn ignore_already_exists<T>(result: Result<T, Error>) -> Result<Option<T>, Error> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.is_already_exists() => Ok(None),
        Err(e) => Err(e),
    }
}

/// How often [`Client::caught_up`] looks at the cache's progress.
const CAUGHT_UP_POLL: Duration = Duration::from_millis(10);

/// How many times [`Client::update_with`] reads and writes again after a conflict
/// (client-go's `retry.DefaultRetry` makes five attempts in all).
pub const CONFLICT_RETRIES: usize = 4;

/// Reads kind `K` from an informer's cache, writes it to the API server: see the
/// [module docs](self). Cheap to clone.
///
/// `C` is what the cache holds: [`Cached<K>`] for the default informers (the default), or
/// `K` for a decoded one. Namespaced and cluster-scoped kinds alike: `namespace` is `""`
/// for a cluster-scoped object.
pub struct Client<K, C = Cached<K>> {
    kube: kube::Client,
    informer: SharedIndexInformer<C>,
    lister: Lister<C>,
    /// The newest resourceVersion written through this client and its clones, whatever the
    /// key: what [`caught_up`](Client::caught_up) waits for.
    newest_write: Arc<Mutex<String>>,
    _kind: std::marker::PhantomData<fn() -> K>,
}

impl<K, C> Clone for Client<K, C> {
    fn clone(&self) -> Self {
        Self {
            kube: self.kube.clone(),
            informer: self.informer.clone(),
            lister: self.lister.clone(),
            newest_write: Arc::clone(&self.newest_write),
            _kind: std::marker::PhantomData,
        }
    }
}

impl<K, C> Debug for Client<K, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

impl<K, C> Client<K, C>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned + Send + Sync,
    K: 'static,
    C: KubeObject<Kind = K> + MetaObject + Send + Sync + 'static,
{
    /// A client over `informer`'s cache that writes through `kube`.
    pub fn new(kube: kube::Client, informer: &SharedIndexInformer<C>) -> Self {
        Self {
            kube,
            lister: Lister::from_dyn(informer.indexer()),
            informer: informer.clone(),
            newest_write: Arc::default(),
            _kind: std::marker::PhantomData,
        }
    }

    /// The informer this client reads.
    pub fn informer(&self) -> &SharedIndexInformer<C> {
        &self.informer
    }

    /// The lister over the cache, for the queries this client does not wrap.
    pub fn lister(&self) -> &Lister<C> {
        &self.lister
    }

    /// The object `namespace/name` from the cache (`namespace` `""` for a cluster-scoped
    /// kind), or `None`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<C>> {
        self.lister.namespaced(namespace).get(name).ok()
    }

    /// The object `namespace/name` from the cache as the kind, to change and write back;
    /// `None` when the cache does not hold it.
    ///
    /// # Errors
    /// [`Error::Decode`] when the cached bytes do not decode as the kind.
    pub fn get_object(&self, namespace: &str, name: &str) -> Result<Option<K>, Error> {
        match self.get(namespace, name) {
            Some(entry) => Ok(Some(entry.to_kind()?)),
            None => Ok(None),
        }
    }

    /// The objects of `namespace` (`""`: every namespace) whose labels match `selector`,
    /// from the cache ([`everything()`](kinformer_indexer::everything) for all).
    pub fn list(&self, namespace: &str, selector: &Selector) -> Vec<Arc<C>> {
        self.lister.namespaced(namespace).list(selector)
    }

    /// The objects of `namespace` (`""`: every namespace) that the
    /// [namespaced index](kinformer_indexer::IndexFunc::namespaced) `index` files under
    /// `value` (controller-runtime's `List(InNamespace(ns), MatchingFields{index: value})`).
    ///
    /// # Errors
    /// [`kinformer_indexer::Error::UnknownIndex`].
    pub fn by_field(
        &self,
        namespace: &str,
        index: &str,
        value: &str,
    ) -> Result<Vec<Arc<C>>, kinformer_indexer::Error> {
        self.lister.namespaced(namespace).by_field(index, value)
    }

    /// The objects the index `index` files under `value`, as the index holds them (for an
    /// index that is not [namespaced](kinformer_indexer::IndexFunc::namespaced)).
    ///
    /// # Errors
    /// [`kinformer_indexer::Error::UnknownIndex`].
    pub fn by_index(
        &self,
        index: &str,
        value: &str,
    ) -> Result<Vec<Arc<C>>, kinformer_indexer::Error> {
        self.lister.indexer().by_index(index, value)
    }

    /// The object `namespace/name` read from the API server (not the cache): for a write
    /// that must start from the newest version.
    ///
    /// # Errors
    /// [`Error::Kube`] (`is_not_found` when it is not there).
    pub async fn fetch(&self, namespace: &str, name: &str) -> Result<K, Error> {
        let req = self.request(namespace).get(name, &GetParams::default())?;
        Ok(self.kube.request::<K>(req).await?)
    }

    /// Creates `obj` (in its namespace) and returns what the server stored; the next
    /// reconcile of this key waits until the cache has it.
    ///
    /// # Errors
    /// [`Error::Kube`] (`is_already_exists` when the name is taken).
    pub async fn create<D>(&self, ctx: &Context<D>, obj: &K) -> Result<K, Error> {
        let req = self
            .request(obj.meta().namespace.as_deref().unwrap_or(""))
            .create(&PostParams::default(), serde_json::to_vec(obj)?)?;
        self.wrote(ctx, self.kube.request::<K>(req).await?)
    }

    /// Replaces the object with `obj`, which carries the resourceVersion it was read at:
    /// [`Error::is_conflict`] when another writer came first. See
    /// [`update_with`](Self::update_with) for a read-change-write that retries.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn update<D>(&self, ctx: &Context<D>, obj: &K) -> Result<K, Error> {
        let (namespace, name) = namespace_and_name(obj);
        let req = self.request(namespace).replace(
            name,
            &PostParams::default(),
            serde_json::to_vec(obj)?,
        )?;
        self.wrote(ctx, self.kube.request::<K>(req).await?)
    }

    /// Reads `namespace/name` from the API server, lets `change` change it and writes it
    /// back; after a conflict (someone wrote in between), reads and changes it again, up to
    /// [`CONFLICT_RETRIES`] times (client-go's `retry.RetryOnConflict`). `change` must be
    /// safe to run more than once: it gets a fresh object each time.
    ///
    /// # Errors
    /// [`Error::Kube`]; the last conflict once the retries are spent.
    pub async fn update_with<D>(
        &self,
        ctx: &Context<D>,
        namespace: &str,
        name: &str,
        mut change: impl FnMut(&mut K),
    ) -> Result<K, Error> {
        let mut attempt = 0;
        loop {
            let mut obj = self.fetch(namespace, name).await?;
            change(&mut obj);
            match self.update(ctx, &obj).await {
                Err(e) if e.is_conflict() && attempt < CONFLICT_RETRIES => {
                    attempt += 1;
                    // client-go's DefaultRetry waits 10 ms between attempts (it adds up to
                    // 10% jitter, left out here).
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                result => return result,
            }
        }
    }

    /// Applies `patch` (merge, JSON patch, strategic merge or server-side apply) to
    /// `namespace/name` and returns the result.
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn patch<D, P: Serialize + Debug>(
        &self,
        ctx: &Context<D>,
        namespace: &str,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, Error> {
        let req = self.request(namespace).patch(name, params, patch)?;
        self.wrote(ctx, self.kube.request::<K>(req).await?)
    }

    /// Deletes `namespace/name` with background propagation (the garbage collector deletes
    /// what it owns afterwards: what a controller deleting its children wants; the API's
    /// default for some kinds, Jobs among them, orphans them). Returns the object when the
    /// server keeps it for now (finalizers, graceful deletion), `None` when it is gone;
    /// either way the next reconcile of this key waits until the cache has seen the deletion
    /// (the object gone, or replaced by one with another uid, or marked for deletion).
    /// [`delete_with`](Self::delete_with) takes other parameters.
    ///
    /// # Errors
    /// [`Error::Kube`] (`is_not_found` when it was not there: see [`ignore_not_found`]).
    pub async fn delete<D>(
        &self,
        ctx: &Context<D>,
        namespace: &str,
        name: &str,
    ) -> Result<Option<K>, Error> {
        self.delete_with(ctx, namespace, name, &DeleteParams::background())
            .await
    }

    /// [`delete`](Self::delete) with `params` (a grace period, preconditions, another
    /// propagation policy).
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn delete_with<D>(
        &self,
        ctx: &Context<D>,
        namespace: &str,
        name: &str,
        params: &DeleteParams,
    ) -> Result<Option<K>, Error> {
        let uid = self
            .get(namespace, name)
            .and_then(|o| o.object_uid().map(str::to_owned));
        let req = self.request(namespace).delete(name, params)?;
        let answer = self.kube.request_status::<K>(req).await?;
        match answer.left() {
            Some(kept) => Ok(Some(self.wrote(ctx, kept)?)),
            None => {
                if let Some(uid) = uid {
                    let lister = self.lister.clone();
                    let (namespace, name) = (namespace.to_owned(), name.to_owned());
                    ctx.wrote_when(move || {
                        lister
                            .namespaced(&namespace)
                            .get(&name)
                            .map_or(true, |o| o.object_uid() != Some(uid.as_str()))
                    });
                }
                Ok(None)
            }
        }
    }

    /// Applies `patch` to the status of `namespace/name` (the `status` subresource).
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn patch_status<D, P: Serialize + Debug>(
        &self,
        ctx: &Context<D>,
        namespace: &str,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K, Error> {
        let req = self
            .request(namespace)
            .patch_subresource("status", name, params, patch)?;
        self.wrote(ctx, self.kube.request::<K>(req).await?)
    }

    /// Replaces the status of the object with `obj`'s (the `status` subresource), at the
    /// resourceVersion `obj` carries ([`Error::is_conflict`] when another writer came
    /// first).
    ///
    /// # Errors
    /// [`Error::Kube`].
    pub async fn update_status<D>(&self, ctx: &Context<D>, obj: &K) -> Result<K, Error> {
        let (namespace, name) = namespace_and_name(obj);
        let req = self.request(namespace).replace_subresource(
            "status",
            name,
            &PostParams::default(),
            serde_json::to_vec(obj)?,
        )?;
        self.wrote(ctx, self.kube.request::<K>(req).await?)
    }

    /// Writes what the reconcile changed in the status: `after` is `before` with its status
    /// changed. The patch is a JSON merge patch of the difference (fields removed from
    /// the status are written as `null`, so none is left behind), sent to the status
    /// subresource; nothing is sent when the statuses are equal (`Ok(None)`). Without a
    /// resourceVersion in the patch, as controller-runtime's `Status().Patch(ctx, obj,
    /// MergeFrom(before))`: another writer's changes to other fields stay.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::batch::v1::Job;
    /// # use kinformer_controller::client::{Client, Error};
    /// # use kinformer_controller::controller::Context;
    /// # async fn f(jobs: &Client<Job>, ctx: &Context<()>) -> Result<(), Error> {
    /// let Some(before) = jobs.get_object("default", "backup")? else { return Ok(()) };
    /// let mut after = before.clone();
    /// let status = after.status.get_or_insert_with(Default::default);
    /// status.active = None; // written as `"active": null`
    /// status.succeeded = Some(1);
    /// jobs.write_status(ctx, &before, &after).await?; // nothing sent if nothing changed
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Json`] when an object does not serialize; [`Error::Kube`].
    pub async fn write_status<D>(
        &self,
        ctx: &Context<D>,
        before: &K,
        after: &K,
    ) -> Result<Option<K>, Error> {
        let Some(patch) = status_patch(before, after)? else {
            return Ok(None);
        };
        let (namespace, name) = namespace_and_name(after);
        let params = PatchParams::default();
        self.patch_status(ctx, namespace, name, &params, &Patch::Merge(&patch))
            .await
            .map(Some)
    }

    fn request(&self, namespace: &str) -> Request {
        let namespace = Some(namespace).filter(|ns| !ns.is_empty());
        Request::new(K::url_path(&(), namespace))
    }

    /// Records `written` for read-your-writes in `ctx`, and hands it back.
    fn wrote<D>(&self, ctx: &Context<D>, written: K) -> Result<K, Error> {
        if let Some(rv) = written.meta().resource_version.as_deref() {
            ctx.wrote_version(&self.informer, rv);
            let mut newest = self
                .newest_write
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if !has_seen(&newest, rv) {
                rv.clone_into(&mut newest);
            }
        }
        Ok(written)
    }

    /// Waits until the cache has applied every write made through this client and its
    /// clones, whatever their keys, or `timeout` passes; returns whether it has. Then a
    /// [`list`](Self::list) shows all of them: controller-runtime v0.25's read-your-writes
    /// `List`, which waits for every pending write of its kind. (A reconcile's own key
    /// waits for its writes without this: see [`Context::wrote`].) A delete answered
    /// without the object carries no version: it is not waited for here.
    pub async fn caught_up(&self, timeout: Duration) -> bool {
        let start = tokio::time::Instant::now();
        loop {
            let newest = self
                .newest_write
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if newest.is_empty() || has_seen(&self.informer.applied_resource_version(), &newest) {
                return true;
            }
            if start.elapsed() >= timeout {
                return false;
            }
            tokio::time::sleep(CAUGHT_UP_POLL).await;
        }
    }
}

fn namespace_and_name<K: Resource>(obj: &K) -> (&str, &str) {
    let meta = obj.meta();
    (
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or(""),
    )
}

/// The JSON merge patch `{"status": ..}` that turns `before`'s status into `after`'s
/// (RFC 7386: changed fields, removed ones as `null`, lists whole), or `None` when they are
/// equal (no status and an empty one are equal): what [`Client::write_status`] sends.
///
/// ```
/// use k8s_openapi::api::batch::v1::{Job, JobStatus};
/// use kinformer_controller::client::status_patch;
///
/// let mut before = Job::default();
/// before.status = Some(JobStatus { active: Some(1), ready: Some(1), ..Default::default() });
/// let mut after = before.clone();
/// after.status.as_mut().unwrap().active = None;
/// after.status.as_mut().unwrap().succeeded = Some(1);
/// let patch = status_patch(&before, &after)?.unwrap();
/// assert_eq!(patch, serde_json::json!({"status": {"active": null, "succeeded": 1}}));
/// assert_eq!(status_patch(&after, &after)?, None);
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// # Errors
/// When an object does not serialize.
pub fn status_patch<K: Serialize>(
    before: &K,
    after: &K,
) -> Result<Option<Value>, serde_json::Error> {
    let status = |obj: &K| -> Result<Value, serde_json::Error> {
        Ok(match serde_json::to_value(obj)? {
            Value::Object(mut fields) => fields.remove("status").unwrap_or(Value::Null),
            _ => Value::Null,
        })
    };
    let (before, after) = (status(before)?, status(after)?);
    // No status and an empty one say the same.
    let empty = |v: &Value| v.is_null() || v.as_object().is_some_and(serde_json::Map::is_empty);
    if empty(&before) && empty(&after) {
        return Ok(None);
    }
    Ok(merge_diff(&before, &after).map(|diff| serde_json::json!({ "status": diff })))
}

/// The RFC 7386 merge patch from `before` to `after`; `None` when they are equal.
fn merge_diff(before: &Value, after: &Value) -> Option<Value> {
    if before == after {
        return None;
    }
    let (Value::Object(old), Value::Object(new)) = (before, after) else {
        return Some(after.clone());
    };
    let mut patch = serde_json::Map::new();
    for (key, value) in new {
        match old.get(key) {
            Some(was) => {
                if let Some(diff) = merge_diff(was, value) {
                    patch.insert(key.clone(), diff);
                }
            }
            None => {
                patch.insert(key.clone(), value.clone());
            }
        }
    }
    for key in old.keys().filter(|key| !new.contains_key(*key)) {
        patch.insert(key.clone(), Value::Null);
    }
    Some(Value::Object(patch))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::merge_diff;

    #[test]
    fn a_merge_diff_writes_changes_nulls_removals_and_lists_whole() {
        let before = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2], "f": "x"});
        let after = json!({"a": 1, "b": {"c": 2, "d": 4}, "e": [1], "g": true});
        assert_eq!(
            merge_diff(&before, &after),
            Some(json!({"b": {"d": 4}, "e": [1], "g": true, "f": null}))
        );
        assert_eq!(merge_diff(&before, &before), None);
        assert_eq!(
            merge_diff(&json!(null), &json!({"a": 1})),
            Some(json!({"a": 1}))
        );
        assert_eq!(
            merge_diff(&json!({"a": 1}), &json!(null)),
            Some(json!(null))
        );
    }
}
