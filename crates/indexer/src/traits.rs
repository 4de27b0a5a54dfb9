//! The `Store` and `Indexer` traits: the swap point between the informer and its cache.

use std::sync::Arc;

use kinformer_core::ObjectKey;

use crate::{Error, Indexers};

/// A keyed cache of objects (client-go's `Store`): what an informer writes and what
/// listers read.
///
/// Objects go in and come out as `Arc<K>`: a read hands out the stored allocation, never a
/// copy. Treat them as immutable; to change one, write a new object.
///
/// Implementations must be safe to call from many threads at once. [`ThreadSafeStore`]
/// is the default; implement the trait (with [`Indexer`]) to put something else behind an
/// informer.
///
/// [`ThreadSafeStore`]: crate::ThreadSafeStore
pub trait Store<K>: Send + Sync {
    /// Stores `obj` under its key, replacing any object there. Same as [`update`](Self::update).
    ///
    /// # Errors
    /// [`Error::Key`] when no key can be made for `obj`, [`Error::IndexFunc`] when an index
    /// function fails on it; the store is then unchanged.
    fn add(&self, obj: Arc<K>) -> Result<(), Error>;

    /// Stores `obj` under its key, replacing any object there.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    fn update(&self, obj: Arc<K>) -> Result<(), Error>;

    /// Removes the object stored under `obj`'s key, if any. `obj` is the object's final
    /// state: its resource version becomes [`last_sync_resource_version`](Self::last_sync_resource_version).
    ///
    /// # Errors
    /// [`Error::Key`] when no key can be made for `obj`.
    fn delete(&self, obj: &K) -> Result<(), Error>;

    /// Every stored object, in no particular order.
    fn list(&self) -> Vec<Arc<K>>;

    /// Every key, in no particular order.
    fn list_keys(&self) -> Vec<ObjectKey>;

    /// The stored object with `obj`'s key.
    ///
    /// # Errors
    /// [`Error::Key`] when no key can be made for `obj`.
    fn get(&self, obj: &K) -> Result<Option<Arc<K>>, Error>;

    /// The object stored under `key` (`namespace/name` or `name`).
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;

    /// Replaces everything with `list` (a relist) at `resource_version`. Later objects in
    /// `list` win over earlier ones with the same key.
    ///
    /// # Errors
    /// As [`add`](Self::add), for any object of the list; the store is then unchanged.
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), Error>;

    /// A periodic resync. Meaningless for a plain store (client-go's is a no-op); FIFOs
    /// give it meaning.
    ///
    /// # Errors
    /// Never for the default store.
    fn resync(&self) -> Result<(), Error> {
        Ok(())
    }

    /// The resource version of the last object written, deleted, replaced at or
    /// [`bookmark`](Self::bookmark)ed; `""` before any.
    fn last_sync_resource_version(&self) -> String;

    /// Records that the watch has reached `resource_version` (a bookmark event).
    fn bookmark(&self, resource_version: &str);
}

/// A [`Store`] with indices (client-go's `Indexer`).
///
/// Three kinds of strings meet here: a storage key (`namespace/name`), the name of an index
/// (`"namespace"`, `"byNode"`), and an indexed value, which an [`IndexFunc`] computes from
/// an object (`"node-1"`).
///
/// [`IndexFunc`]: crate::IndexFunc
pub trait Indexer<K>: Store<K> {
    /// The stored objects that share at least one value of the index `index_name` with
    /// `obj` (whose values are computed, not looked up).
    ///
    /// # Errors
    /// [`Error::UnknownIndex`], or [`Error::IndexFunc`] when the function fails on `obj`.
    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, Error>;

    /// The keys of the stored objects listed under `value` in the index `index_name`,
    /// sorted.
    ///
    /// # Errors
    /// [`Error::UnknownIndex`].
    fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, Error>;

    /// Every value that has at least one object in the index `index_name`, sorted; empty
    /// for an unknown index (as in client-go).
    fn list_index_func_values(&self, index_name: &str) -> Vec<String>;

    /// The stored objects listed under `value` in the index `index_name`, in no particular
    /// order.
    ///
    /// # Errors
    /// [`Error::UnknownIndex`].
    fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, Error>;

    /// The registered index functions, by name.
    fn get_indexers(&self) -> Indexers<K>;

    /// Registers more index functions and indexes every stored object with them.
    ///
    /// # Errors
    /// [`Error::IndexerConflict`] when a name is already registered, [`Error::IndexFunc`]
    /// when a new function fails on a stored object; nothing is added then.
    fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error>;
}

macro_rules! forward {
    ($($ptr:ty),*) => {$(
        impl<K, S: Store<K> + ?Sized> Store<K> for $ptr {
            fn add(&self, obj: Arc<K>) -> Result<(), Error> { (**self).add(obj) }
            fn update(&self, obj: Arc<K>) -> Result<(), Error> { (**self).update(obj) }
            fn delete(&self, obj: &K) -> Result<(), Error> { (**self).delete(obj) }
            fn list(&self) -> Vec<Arc<K>> { (**self).list() }
            fn list_keys(&self) -> Vec<ObjectKey> { (**self).list_keys() }
            fn get(&self, obj: &K) -> Result<Option<Arc<K>>, Error> { (**self).get(obj) }
            fn get_by_key(&self, key: &str) -> Option<Arc<K>> { (**self).get_by_key(key) }
            fn replace(&self, list: Vec<Arc<K>>, rv: &str) -> Result<(), Error> { (**self).replace(list, rv) }
            fn resync(&self) -> Result<(), Error> { (**self).resync() }
            fn last_sync_resource_version(&self) -> String { (**self).last_sync_resource_version() }
            fn bookmark(&self, rv: &str) { (**self).bookmark(rv) }
        }

        impl<K, S: Indexer<K> + ?Sized> Indexer<K> for $ptr {
            fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, Error> { (**self).index(index_name, obj) }
            fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, Error> { (**self).index_keys(index_name, value) }
            fn list_index_func_values(&self, index_name: &str) -> Vec<String> { (**self).list_index_func_values(index_name) }
            fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, Error> { (**self).by_index(index_name, value) }
            fn get_indexers(&self) -> Indexers<K> { (**self).get_indexers() }
            fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error> { (**self).add_indexers(indexers) }
        }
    )*};
}

forward!(Arc<S>, Box<S>, &S);
