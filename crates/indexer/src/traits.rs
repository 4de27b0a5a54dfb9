//! The swap point between the informer and its cache, split in two: [`Indexer`], the read
//! side everybody gets, and [`IndexerWriter`], the write side only the informer holds.

use std::collections::HashSet;
use std::sync::Arc;

use crate::Selector;
use kinformer_core::{KnownObjects, MetaObject, ObjectKey, Sink};

use crate::{Error, Indexers};

/// The read side of a cache with indices (the reads of client-go's `Indexer`): what
/// listers, the informer's `indexer()` and controllers get.
///
/// It has no method that writes, so code holding an `Arc<dyn Indexer<K>>` cannot change
/// the cache behind the informer's back: that is a fact of the type, not a rule in the
/// docs. Lookups by key ([`get_by_key`](KnownObjects::get_by_key),
/// [`list_keys`](KnownObjects::list_keys)) come from kinformer-core's [`KnownObjects`], the
/// view the FIFOs read for tombstones and resyncs, so a cache needs no adapter to serve
/// them.
///
/// Three kinds of strings meet here: a storage key (`namespace/name`), the name of an index
/// (`"namespace"`, `"byNode"`), and an indexed value, which an [`IndexFunc`] computes from
/// an object (`"node-1"`). Objects come out as `Arc<K>`: a read hands out the stored
/// allocation, never a copy.
///
/// [`IndexFunc`]: crate::IndexFunc
pub trait Indexer<K>: KnownObjects<K> {
    /// Every stored object, in no particular order.
    fn list(&self) -> Vec<Arc<K>>;

    /// The stored objects listed under `value` in the index `index_name`, in no particular
    /// order.
    ///
    /// # Errors
    /// [`Error::UnknownIndex`].
    fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, Error>;

    /// The keys of the stored objects listed under `value` in the index `index_name`,
    /// sorted.
    ///
    /// # Errors
    /// [`Error::UnknownIndex`].
    fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, Error>;

    /// Every value that has at least one object in the index `index_name`, sorted; empty
    /// for an unknown index (as in client-go).
    fn list_index_func_values(&self, index_name: &str) -> Vec<String>;

    /// The registered index functions, by name.
    fn get_indexers(&self) -> Indexers<K>;

    /// The resource version of the last object written, deleted, replaced at or
    /// bookmarked; `""` before any.
    fn last_sync_resource_version(&self) -> String;

    /// How many objects are stored. The default counts [`list_keys`](KnownObjects::list_keys);
    /// a cache that knows its size says so.
    fn len(&self) -> usize {
        self.list_keys().len()
    }

    /// Whether nothing is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The object stored under the key `namespace/name`: what a namespaced lister's `get`
    /// asks for. The default builds the key and calls
    /// [`get_by_key`](KnownObjects::get_by_key); a store that can look the two parts up
    /// without building a `String` (the thread-safe store: on the stack) overrides it.
    fn get_by_namespaced_name(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.get_by_key(&format!("{namespace}/{name}"))
    }

    /// The stored objects that share at least one value of the index `index_name` with
    /// `obj` (whose values are computed with the index function, not looked up).
    ///
    /// The default computes the values and calls [`by_index`](Self::by_index) once per
    /// value, so with a writer running beside it, it is one snapshot per value; the
    /// thread-safe store answers from one snapshot.
    ///
    /// # Errors
    /// [`Error::UnknownIndex`], or [`Error::IndexFunc`] when the function fails on `obj`.
    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, Error>
    where
        K: MetaObject,
    {
        let indexers = self.get_indexers();
        let func = indexers
            .get(index_name)
            .ok_or_else(|| Error::UnknownIndex(index_name.to_owned()))?;
        let values = func.values(obj).map_err(|source| Error::IndexFunc {
            index: index_name.to_owned(),
            key: None,
            source,
        })?;
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for value in values {
            for obj in self.by_index(index_name, value.as_str())? {
                if seen.insert(Arc::as_ptr(&obj)) {
                    out.push(obj);
                }
            }
        }
        Ok(out)
    }

    /// The stored objects whose labels `selector` matches, in no particular order: what a
    /// [`Lister`](crate::Lister) lists. The default lists every object and keeps the
    /// matching ones; a store that can match before it hands objects out (one that would
    /// otherwise build every object it lists) overrides it.
    fn list_selected(&self, selector: &Selector) -> Vec<Arc<K>>
    where
        K: MetaObject,
    {
        let mut all = self.list();
        if !selector.selects_all() {
            all.retain(|obj| selected(selector, &**obj));
        }
        all
    }

    /// [`by_index`](Self::by_index), keeping the objects whose labels `selector` matches:
    /// what a namespaced lister lists (through the namespace index). Overridden as
    /// [`list_selected`](Self::list_selected).
    ///
    /// # Errors
    /// [`Error::UnknownIndex`].
    fn by_index_selected(
        &self,
        index_name: &str,
        value: &str,
        selector: &Selector,
    ) -> Result<Vec<Arc<K>>, Error>
    where
        K: MetaObject,
    {
        let mut objs = self.by_index(index_name, value)?;
        if !selector.selects_all() {
            objs.retain(|obj| selected(selector, &**obj));
        }
        Ok(objs)
    }
}

static NO_LABELS: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();

/// Whether `selector` matches the labels of `obj` (none count as empty).
pub(crate) fn selected<K: MetaObject + ?Sized>(selector: &Selector, obj: &K) -> bool {
    selector.matches(obj.object_labels().unwrap_or(&NO_LABELS))
}

/// The write side of a cache: what the informer holds and nobody else gets.
///
/// Writes are kinformer-core's [`Sink`] — the same six calls the reflector makes into a
/// FIFO (`add`, `update`, `delete`, `replace`, `resync`, `bookmark`) — so a cache can sit
/// behind an informer or directly behind a reflector, with no adapter. Add
/// [`add_indexers`](Self::add_indexers), which registers index functions (client-go allows
/// it before and after start).
///
/// Implement it, with [`Indexer`], [`KnownObjects`] and [`Sink`], to put your own cache
/// behind an informer (`SharedIndexInformer::builder(..).store(..)`);
/// [`ThreadSafeStore`](crate::ThreadSafeStore) is this crate's, every informer's cache by
/// default.
///
/// Contract for the writes, as client-go's store: `add` and `update` store the object
/// under its key, replacing any object there; `delete` removes whatever is stored under the
/// object's key; `replace` swaps everything for the list (later objects win over earlier
/// ones with the same key); each records the resource version it was given (an object's,
/// the list's, or a bookmark's) for
/// [`last_sync_resource_version`](Indexer::last_sync_resource_version); `resync` does
/// nothing to a cache. A write that fails changes nothing.
pub trait IndexerWriter<K>: Indexer<K> + Sink<K> {
    /// Registers more index functions and indexes every stored object with them.
    ///
    /// # Errors
    /// [`Error::IndexerConflict`] when a name is already registered, [`Error::IndexFunc`]
    /// when a new function fails on a stored object; nothing is added then.
    fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error>;
}

macro_rules! forward {
    ($($ptr:ty),*) => {$(
        impl<K, S: Indexer<K> + ?Sized> Indexer<K> for $ptr {
            fn list(&self) -> Vec<Arc<K>> { (**self).list() }
            fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, Error> { (**self).by_index(index_name, value) }
            fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, Error> { (**self).index_keys(index_name, value) }
            fn list_index_func_values(&self, index_name: &str) -> Vec<String> { (**self).list_index_func_values(index_name) }
            fn get_indexers(&self) -> Indexers<K> { (**self).get_indexers() }
            fn last_sync_resource_version(&self) -> String { (**self).last_sync_resource_version() }
            fn len(&self) -> usize { (**self).len() }
            fn is_empty(&self) -> bool { (**self).is_empty() }
            fn get_by_namespaced_name(&self, namespace: &str, name: &str) -> Option<Arc<K>> { (**self).get_by_namespaced_name(namespace, name) }
            fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, Error> where K: MetaObject { (**self).index(index_name, obj) }
            fn list_selected(&self, selector: &Selector) -> Vec<Arc<K>> where K: MetaObject { (**self).list_selected(selector) }
            fn by_index_selected(&self, index_name: &str, value: &str, selector: &Selector) -> Result<Vec<Arc<K>>, Error> where K: MetaObject { (**self).by_index_selected(index_name, value, selector) }
        }
    )*};
}

forward!(Arc<S>, Box<S>, &S);

impl<K, S: IndexerWriter<K> + ?Sized> IndexerWriter<K> for Arc<S> {
    fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error> {
        (**self).add_indexers(indexers)
    }
}
