//! Objects on their way to the sink: the transform, the comparison of a listed object with
//! the cache, the hand-over of a list's parts and the back-pressure between them, and the
//! objects that do not decode.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use kinformer_core::{ErrorChain, ListPart, Listed, MetaObject, ObjectKey, Sink, Unchanged};

use super::Reflector;
use crate::{Error, ListerWatcher, Undecodable};

impl<K, L, S> Reflector<K, L, S>
where
    K: MetaObject + Send + Sync + 'static,
    L: ListerWatcher<K>,
    S: Sink<K>,
{
    /// Waits for the consumer after a part of a list ([`pace`](Self::pace)).
    pub(super) async fn paced(&self) {
        if let Some(ready) = &self.pace {
            ready().await;
        }
    }

    pub(super) fn transformed(&self, obj: Arc<K>) -> Result<Arc<K>, Error> {
        match &self.transform {
            Some(t) => t(obj).map_err(|source| Error::Transform { source }),
            None => Ok(obj),
        }
    }

    /// `obj` as listed; or, when the cache holds the same version (same key, same non-empty
    /// resource version: the same object version on the server), [`Listed::Unchanged`]:
    /// its key, the cache, and the listed copy. A sink that keeps the cache's entries (the
    /// atomic FIFO, the stores) drops the copy when the part reaches it, so a relist holds
    /// each unchanged object once, in the cache, rather than a decoded copy beside it
    /// until the cache is replaced; a sink that needs every object takes the cache's own
    /// allocation where the cache can share it, else the copy, and decodes nothing. This
    /// is the one place a listed object is compared with the cache. Called on listed objects only, after
    /// the transform, so the cached object (transformed when it was cached) stands for a
    /// transformed one.
    pub(super) fn list_item(&self, obj: Arc<K>) -> Listed<K> {
        let Some(known) = &self.known else {
            return Listed::Object(obj);
        };
        let Some(rv) = obj.object_resource_version().filter(|rv| !rv.is_empty()) else {
            return Listed::Object(obj);
        };
        let Ok(key) = self.key_of(&obj) else {
            return Listed::Object(obj);
        };
        if known.contains_version(key.as_str(), rv) {
            Listed::Unchanged(Unchanged::new(key, Arc::clone(known)).with_listed(obj))
        } else {
            Listed::Object(obj)
        }
    }

    /// Hands a part of a list to the sink: the first part `starts` it, and `end` (the
    /// list's resource version) ends it.
    pub(super) fn hand_over(
        &self,
        items: Vec<Listed<K>>,
        starts: bool,
        end: Option<&str>,
    ) -> Result<(), Error> {
        self.sink
            .replace(ListPart::new(items, starts, end.map(str::to_owned)))
            .map_err(Error::Sink)
    }

    /// Reports an object that did not decode, and counts it.
    pub(super) fn report_undecodable(&self, object: Undecodable, deleted: bool) {
        self.shared.undecodable.fetch_add(1, Ordering::Relaxed);
        let e = Error::Undecodable { object, deleted };
        tracing::warn!(error = %ErrorChain(&e), "skipping an object that does not decode");
        self.report(&e);
    }

    /// The cached versions of `keys` (objects that did not decode), to keep them through a
    /// relist.
    pub(super) fn still_cached(&self, keys: &[ObjectKey]) -> Vec<Arc<K>> {
        let Some(known) = &self.known else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|k| known.get_by_key(k.as_str()))
            .collect()
    }

    /// A deletion of an object that did not decode: deletes its cached version, if any.
    pub(super) fn delete_undecodable(&self, key: &ObjectKey) -> Result<(), Error> {
        let Some(old) = self.known.as_ref().and_then(|k| k.get_by_key(key.as_str())) else {
            return Ok(());
        };
        match self.sink.delete(old) {
            Err(e) if matches!(e, kinformer_core::Error::Closed) => Err(Error::Sink(e)),
            Err(e) => {
                self.report(&Error::Sink(e));
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }
}
