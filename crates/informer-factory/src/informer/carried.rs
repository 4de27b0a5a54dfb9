//! What the informer's pipeline carries for objects of `K`: `K` itself (the decoded cache, a
//! store or FIFO of your own), or `Encoded<K>` (the default cache), and how each becomes the
//! `K` that handlers and transforms are given.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::{FutureExt as _, StreamExt as _};
use kinformer_compact_store::Encoded;
use kinformer_core::{
    BoxError, DeletedFinalStateUnknown, DeletedObject, DeltaObject, MetaObject, ObjectKey,
    TransformFn, meta_namespace_key,
};
use kinformer_reflector::{
    Error as ReflectorError, ListOptions, ListPage, ListerWatcher, Undecodable, WatchEvent,
    WatchOptions, WatchStream,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Needs, ResourceEventHandler};

/// An object as the informer's pipeline carries it, standing for a `K`.
pub(crate) trait Carried<K>: MetaObject + Send + Sync + Sized + 'static {
    /// The `K` a handler is given.
    fn decoded(this: &Arc<Self>) -> Result<Arc<K>, BoxError>;
    /// The `K` a handler of metadata only is given ([`Needs::metadata_only`]).
    fn metadata(this: &Arc<Self>) -> Result<Arc<K>, BoxError>;
    /// The `K` a transform is given (the pipeline's own `Arc` when it is one).
    fn into_decoded(this: Arc<Self>) -> Result<Arc<K>, BoxError>;
    /// What the pipeline carries for `obj`.
    fn carried(obj: Arc<K>) -> Result<Arc<Self>, BoxError>;
}

impl<K: MetaObject + Send + Sync + 'static> Carried<K> for K {
    fn decoded(this: &Arc<Self>) -> Result<Arc<K>, BoxError> {
        Ok(Arc::clone(this))
    }
    fn metadata(this: &Arc<Self>) -> Result<Arc<K>, BoxError> {
        Ok(Arc::clone(this))
    }
    fn into_decoded(this: Arc<Self>) -> Result<Arc<K>, BoxError> {
        Ok(this)
    }
    fn carried(obj: Arc<K>) -> Result<Arc<Self>, BoxError> {
        Ok(obj)
    }
}

impl<K> Carried<K> for Encoded<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn decoded(this: &Arc<Self>) -> Result<Arc<K>, BoxError> {
        Ok(Arc::new(this.decode()?))
    }
    /// A type that requires more than the metadata is decoded whole.
    fn metadata(this: &Arc<Self>) -> Result<Arc<K>, BoxError> {
        match this.decode_metadata() {
            Ok(k) => Ok(Arc::new(k)),
            Err(_) => Self::decoded(this),
        }
    }
    fn into_decoded(this: Arc<Self>) -> Result<Arc<K>, BoxError> {
        Self::decoded(&this)
    }
    fn carried(obj: Arc<K>) -> Result<Arc<Self>, BoxError> {
        Ok(Arc::new(Encoded::new(&*obj)?))
    }
}

/// A transform of `K` as one of what the pipeline carries: the object decoded, transformed
/// and carried again (for the encoded pipeline: decoded and encoded).
pub(crate) fn carried_transform<K, R: Carried<K>>(t: TransformFn<K>) -> TransformFn<R>
where
    K: 'static,
{
    Arc::new(move |obj: Arc<R>| R::carried(t(R::into_decoded(obj)?)?))
}

/// The key of `obj` as the default key function makes it, for a pipeline that carries
/// objects other than `K` (their metadata is `K`'s).
pub(crate) fn default_key<R: MetaObject>(obj: &R) -> Result<ObjectKey, kinformer_core::Error> {
    meta_namespace_key(obj)
}

/// A handler of `K` registered with a pipeline that carries `R`: each object it is given is
/// decoded, only for the callbacks it has and only as far as it reads
/// ([`ResourceEventHandler::needs`]). An object
/// that does not decode is logged with its key, counted, and not handed on.
pub(crate) struct Decoding<H, K> {
    handler: H,
    needs: Needs,
    failures: Arc<AtomicU64>,
    _k: PhantomData<fn(K)>,
}

impl<H: ResourceEventHandler<K>, K> Decoding<H, K> {
    pub(crate) fn new(handler: H, failures: Arc<AtomicU64>) -> Self {
        let needs = handler.needs();
        Self {
            handler,
            needs,
            failures,
            _k: PhantomData,
        }
    }

    fn decode<R: Carried<K>>(&self, obj: &Arc<R>) -> Option<Arc<K>> {
        let decoded = if self.needs.metadata_only {
            R::metadata(obj)
        } else {
            R::decoded(obj)
        };
        match decoded {
            Ok(o) => Some(o),
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    namespace = obj.object_namespace().unwrap_or(""),
                    name = obj.object_name().unwrap_or(""),
                    error = %e,
                    "an object does not decode: not handed to a handler"
                );
                None
            }
        }
    }
}

impl<K, R, H> ResourceEventHandler<R> for Decoding<H, K>
where
    R: Carried<K>,
    H: ResourceEventHandler<K>,
{
    fn on_add(&self, obj: &Arc<R>, is_in_initial_list: bool) {
        if self.needs.add
            && let Some(obj) = self.decode(obj)
        {
            self.handler.on_add(&obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: &Arc<R>, new: &Arc<R>) {
        if !self.needs.update {
            return;
        }
        let Some(new_k) = self.decode(new) else {
            return;
        };
        // A resync hands the same object twice: decoded once.
        let old_k = if Arc::ptr_eq(old, new) {
            Arc::clone(&new_k)
        } else {
            match self.decode(old) {
                Some(o) => o,
                None => return,
            }
        };
        self.handler.on_update(&old_k, &new_k);
    }

    fn on_delete(&self, obj: &DeletedObject<R>) {
        if !self.needs.delete {
            return;
        }
        let decoded = match obj {
            DeltaObject::Object(o) => self.decode(o).map(DeltaObject::Object),
            DeltaObject::Tombstone(t) => self.decode(&t.obj).map(|o| {
                DeltaObject::Tombstone(DeletedFinalStateUnknown {
                    key: t.key.clone(),
                    obj: o,
                })
            }),
        };
        if let Some(obj) = decoded {
            self.handler.on_delete(&obj);
        }
    }

    fn needs(&self) -> Needs {
        self.needs
    }
}

/// A lister-watcher of `K` as one of [`Encoded<K>`]: each object encoded as it arrives
/// (for lister-watchers that cannot transcode from the wire: in-memory ones, a Kubernetes
/// one that changes objects while decoding them). An object that cannot be encoded is
/// reported as undecodable, as one that does not decode is.
pub(crate) struct Encoding<K> {
    inner: Arc<dyn ListerWatcher<K>>,
    /// Runs on each object before it is encoded (the informer's transform): an error fails
    /// a list and skips a watch event, as the reflector's own transform.
    transform: Option<TransformFn<K>>,
}

impl<K> Encoding<K> {
    pub(crate) fn new(inner: Arc<dyn ListerWatcher<K>>) -> Self {
        Self {
            inner,
            transform: None,
        }
    }

    /// The same, with `transform` run on each object before it is encoded.
    pub(crate) fn with_transform(
        inner: Arc<dyn ListerWatcher<K>>,
        transform: TransformFn<K>,
    ) -> Self {
        Self {
            inner,
            transform: Some(transform),
        }
    }

    fn transformed(&self, obj: Arc<K>) -> Result<Arc<K>, ReflectorError> {
        match &self.transform {
            Some(t) => t(obj).map_err(|source| ReflectorError::Transform { source }),
            None => Ok(obj),
        }
    }
}

/// How a watch event of an encoded object is made.
type MakeEvent<K> = fn(Encoded<K>) -> WatchEvent<Encoded<K>>;

/// `obj` encoded; an object that cannot be is undecodable, as one that does not decode.
fn encode<K: Serialize + MetaObject>(obj: &K, deleted: bool) -> Result<Encoded<K>, ReflectorError> {
    Encoded::new(obj).map_err(|e| {
        let detail = format!("cannot be encoded: {e}");
        match meta_namespace_key(obj) {
            Ok(key) => {
                let mut object = Undecodable::new(key, detail);
                object.uid = obj.object_uid().map(str::to_owned);
                ReflectorError::Undecodable { object, deleted }
            }
            Err(_) => ReflectorError::decode("an object without a name", detail),
        }
    })
}

impl<K> ListerWatcher<Encoded<K>> for Encoding<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn list<'a>(
        &'a self,
        options: &'a ListOptions,
    ) -> futures::future::BoxFuture<'a, Result<ListPage<Encoded<K>>, ReflectorError>> {
        self.inner
            .list(options)
            .map(|page| {
                let page = page?;
                let mut out = ListPage::new(Vec::new(), page.resource_version);
                out.continue_token = page.continue_token;
                out.shard_selector = page.shard_selector;
                out.undecodable = page.undecodable;
                out.items.reserve(page.items.len());
                for obj in page.items {
                    match encode(&*self.transformed(obj)?, false) {
                        Ok(e) => out.items.push(Arc::new(e)),
                        Err(ReflectorError::Undecodable { object, .. }) => {
                            out.undecodable.push(object);
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(out)
            })
            .boxed()
    }

    fn watch<'a>(
        &'a self,
        options: &'a WatchOptions,
    ) -> futures::future::BoxFuture<'a, Result<WatchStream<Encoded<K>>, ReflectorError>> {
        let transform = self.transform.clone();
        self.inner
            .watch(options)
            .map(|stream| {
                stream.map(|s| {
                    s.map(move |event| {
                        let (o, deleted, make): (K, bool, MakeEvent<K>) = match event? {
                            WatchEvent::Added(o) => (o, false, WatchEvent::Added),
                            WatchEvent::Modified(o) => (o, false, WatchEvent::Modified),
                            WatchEvent::Deleted(o) => (o, true, WatchEvent::Deleted),
                            WatchEvent::Bookmark(b) => return Ok(WatchEvent::Bookmark(b)),
                        };
                        let o = match &transform {
                            Some(t) => t(Arc::new(o))
                                .map_err(|source| ReflectorError::Transform { source })?,
                            None => Arc::new(o),
                        };
                        encode(&*o, deleted).map(make)
                    })
                    .boxed()
                })
            })
            .boxed()
    }

    fn supports_watch_list(&self) -> bool {
        self.inner.supports_watch_list()
    }
}
