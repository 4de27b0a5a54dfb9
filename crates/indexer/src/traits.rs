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

/// Forwards [`Indexer`](crate::Indexer) methods to a field: inside the trait's `impl` for a
/// decorator, `forward_indexer!(K, field: all)` writes every method as a call of the same
/// method on `self.field`; `forward_indexer!(K, field: method, ..)` writes only those named,
/// for a decorator that writes the others itself. `all` is: `list`, `by_index`, `index_keys`,
/// `list_index_func_values`, `get_indexers`, `last_sync_resource_version`, `len`, `is_empty`,
/// `get_by_namespaced_name`, `index`, `list_selected`, `by_index_selected`.
#[macro_export]
macro_rules! forward_indexer {
    ($item:ty, $field:tt: all) => {
        $crate::forward_indexer!($item, $field: list, by_index, index_keys, list_index_func_values, get_indexers, last_sync_resource_version, len, is_empty, get_by_namespaced_name, index, list_selected, by_index_selected);
    };
    ($item:ty, $field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_indexer!(@method $item, $field, $method);)+
    };
    (@method $item:ty, $f:tt, list) => {
        fn list(&self) -> ::std::vec::Vec<::std::sync::Arc<$item>> {
            self.$f.list()
        }
    };
    (@method $item:ty, $f:tt, by_index) => {
        fn by_index(&self, index_name: &str, value: &str) -> ::std::result::Result<::std::vec::Vec<::std::sync::Arc<$item>>, $crate::Error> {
            self.$f.by_index(index_name, value)
        }
    };
    (@method $item:ty, $f:tt, index_keys) => {
        fn index_keys(&self, index_name: &str, value: &str) -> ::std::result::Result<::std::vec::Vec<$crate::__core::ObjectKey>, $crate::Error> {
            self.$f.index_keys(index_name, value)
        }
    };
    (@method $item:ty, $f:tt, list_index_func_values) => {
        fn list_index_func_values(&self, index_name: &str) -> ::std::vec::Vec<::std::string::String> {
            self.$f.list_index_func_values(index_name)
        }
    };
    (@method $item:ty, $f:tt, get_indexers) => {
        fn get_indexers(&self) -> $crate::Indexers<$item> {
            self.$f.get_indexers()
        }
    };
    (@method $item:ty, $f:tt, last_sync_resource_version) => {
        fn last_sync_resource_version(&self) -> ::std::string::String {
            self.$f.last_sync_resource_version()
        }
    };
    (@method $item:ty, $f:tt, len) => {
        fn len(&self) -> usize {
            self.$f.len()
        }
    };
    (@method $item:ty, $f:tt, is_empty) => {
        fn is_empty(&self) -> bool {
            self.$f.is_empty()
        }
    };
    (@method $item:ty, $f:tt, get_by_namespaced_name) => {
        fn get_by_namespaced_name(&self, namespace: &str, name: &str) -> ::std::option::Option<::std::sync::Arc<$item>> {
            self.$f.get_by_namespaced_name(namespace, name)
        }
    };
    (@method $item:ty, $f:tt, index) => {
        fn index(&self, index_name: &str, obj: &$item) -> ::std::result::Result<::std::vec::Vec<::std::sync::Arc<$item>>, $crate::Error>
        where
            $item: $crate::__core::MetaObject,
        {
            self.$f.index(index_name, obj)
        }
    };
    (@method $item:ty, $f:tt, list_selected) => {
        fn list_selected(&self, selector: &$crate::Selector) -> ::std::vec::Vec<::std::sync::Arc<$item>>
        where
            $item: $crate::__core::MetaObject,
        {
            self.$f.list_selected(selector)
        }
    };
    (@method $item:ty, $f:tt, by_index_selected) => {
        fn by_index_selected(
            &self,
            index_name: &str,
            value: &str,
            selector: &$crate::Selector,
        ) -> ::std::result::Result<::std::vec::Vec<::std::sync::Arc<$item>>, $crate::Error>
        where
            $item: $crate::__core::MetaObject,
        {
            self.$f.by_index_selected(index_name, value, selector)
        }
    };
}

/// Forwards [`IndexerWriter`](crate::IndexerWriter) methods to a field: inside the trait's
/// `impl` for a decorator, `forward_indexer_writer!(K, field: all)` writes every method as a
/// call of the same method on `self.field`; `forward_indexer_writer!(K, field: method, ..)`
/// writes only those named, for a decorator that writes the others itself. `all` is:
/// `add_indexers`.
#[macro_export]
macro_rules! forward_indexer_writer {
    ($item:ty, $field:tt: all) => {
        $crate::forward_indexer_writer!($item, $field: add_indexers);
    };
    ($item:ty, $field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_indexer_writer!(@method $item, $field, $method);)+
    };
    (@method $item:ty, $f:tt, add_indexers) => {
        fn add_indexers(&self, indexers: $crate::Indexers<$item>) -> ::std::result::Result<(), $crate::Error> {
            self.$f.add_indexers(indexers)
        }
    };
}
