//! The thread-safe store (every informer's cache by default, of `Cached` objects or decoded
//! ones): one `RwLock` over the items and every index.

use std::collections::HashSet;
use std::fmt;
use std::mem;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kinformer_core::{KeyFunc, KnownObjects, MetaObject, ObjectKey, WholeList, meta_namespace_key};

use crate::{Error, Indexers};

mod keys;
mod state;
mod traits;

use keys::{KEY_BUF, LookupKey};
use state::{NamedIndexFunc, State};

/// The default [`Indexer`](crate::Indexer): a thread-safe store with indices (client-go's
/// `threadSafeMap` behind its `cache`).
///
/// Every read takes the read lock once and sees the store as it was between two writes;
/// every write is atomic. See the [crate documentation](crate#the-consistency-guarantee)
/// for what that guarantees, the structure, and the measurements behind it.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::{Pod, PodSpec};
/// use kinformer_indexer::{namespace_indexers, Indexer, KnownObjects, ThreadSafeStore};
///
/// let store = ThreadSafeStore::new(namespace_indexers());
/// let mut pod = Pod::default();
/// pod.metadata.name = Some("web-0".into());
/// pod.metadata.namespace = Some("prod".into());
/// store.add(Arc::new(pod))?;
///
/// let got = store.get_by_key("prod/web-0").expect("stored");
/// assert_eq!(got.metadata.name.as_deref(), Some("web-0"));
/// assert_eq!(store.by_index("namespace", "prod")?.len(), 1);
/// # Ok::<(), kinformer_indexer::Error>(())
/// ```
pub struct ThreadSafeStore<K> {
    state: RwLock<State<K>>,
    /// `None` is [`meta_namespace_key`].
    key_func: Option<KeyFunc<K>>,
    /// The parts of a list written through [`Sink::replace`], until it ends.
    lists: WholeList<K>,
}

impl<K: MetaObject> ThreadSafeStore<K> {
    /// An empty store keyed by `namespace/name` (client-go's `NewIndexer(MetaNamespaceKeyFunc,
    /// indexers)`). Pass [`namespace_indexers()`](crate::namespace_indexers) for what an
    /// informer's store usually has, or `Indexers::new()` for none.
    pub fn new(indexers: Indexers<K>) -> Self {
        Self::build(None, indexers)
    }

    /// An empty store that keys objects with `key_func`.
    pub fn with_key_func(key_func: KeyFunc<K>, indexers: Indexers<K>) -> Self {
        Self::build(Some(key_func), indexers)
    }

    fn build(key_func: Option<KeyFunc<K>>, indexers: Indexers<K>) -> Self {
        let indexers: Arc<[NamedIndexFunc<K>]> = indexers
            .into_iter()
            .map(|(name, func)| NamedIndexFunc { name, func })
            .collect();
        Self {
            state: RwLock::new(State::new(indexers)),
            key_func,
            lists: WholeList::default(),
        }
    }

    fn key_of(&self, obj: &K) -> Result<ObjectKey, Error> {
        match &self.key_func {
            None => meta_namespace_key(obj).map_err(Error::Key),
            Some(f) => f(obj).map_err(Error::Key),
        }
    }

    /// The key of `obj` for a lookup: with the default key function, written into a stack
    /// buffer, so that only a key new to the store is allocated.
    fn lookup_key(&self, obj: &K) -> Result<LookupKey, Error> {
        if self.key_func.is_some() {
            return self.key_of(obj).map(LookupKey::Owned);
        }
        let namespace = obj.object_namespace().filter(|ns| !ns.is_empty());
        let name = obj.object_name().unwrap_or("");
        let len = namespace.map_or(0, |ns| ns.len() + 1) + name.len();
        let valid = !name.is_empty()
            && !name.contains('/')
            && !namespace.is_some_and(|ns| ns.contains('/'));
        if !valid || len > KEY_BUF {
            return self.key_of(obj).map(LookupKey::Owned);
        }
        let mut buf = [0u8; KEY_BUF];
        let mut at = 0;
        for part in [
            namespace.unwrap_or(""),
            if namespace.is_some() { "/" } else { "" },
            name,
        ] {
            if let Some(dst) = buf.get_mut(at..at + part.len()) {
                dst.copy_from_slice(part.as_bytes());
            }
            at += part.len();
        }
        Ok(LookupKey::Parts { buf, len })
    }

    // A panic can only happen under the write lock inside a user's index function, and
    // index functions run before anything is changed: the state is consistent even when
    // the lock is poisoned, so poisoning is ignored.
    fn read(&self) -> RwLockReadGuard<'_, State<K>> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State<K>> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn put(&self, obj: Arc<K>) -> Result<(), Error> {
        let key = self.lookup_key(&obj)?;
        let mut state = self.write();
        let old = state.put(key, &obj)?;
        set_rv(&mut state.rv, obj.object_resource_version());
        drop(state);
        // The replaced object may be the last reference: free it outside the lock.
        drop(old);
        Ok(())
    }
}

/// client-go sets the store's version from every written object's metadata, an unset one
/// included (as `""`).
fn set_rv(rv: &mut String, new: Option<&str>) {
    rv.clear();
    rv.push_str(new.unwrap_or(""));
}

/// Writes. Each is the store's side of kinformer-core's [`Sink`](kinformer_core::Sink) (which the store also
/// implements, for the informer), with this crate's error type.
impl<K: MetaObject + Send + Sync + 'static> ThreadSafeStore<K> {
    /// Stores `obj` under its key, replacing any object there. Same as
    /// [`update`](Self::update).
    ///
    /// # Errors
    /// [`Error::Key`] when no key can be made for `obj`, [`Error::IndexFunc`] when an index
    /// function fails on it; the store is then unchanged.
    pub fn add(&self, obj: Arc<K>) -> Result<(), Error> {
        self.put(obj)
    }

    /// Stores `obj` under its key, replacing any object there.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn update(&self, obj: Arc<K>) -> Result<(), Error> {
        self.put(obj)
    }

    /// Removes the object stored under `obj`'s key, if any. `obj` is the object's final
    /// state: its resource version becomes the store's
    /// [`last_sync_resource_version`](crate::Indexer::last_sync_resource_version) (client-go's
    /// `DeleteWithObject`).
    ///
    /// # Errors
    /// [`Error::Key`] when no key can be made for `obj`.
    pub fn delete(&self, obj: Arc<K>) -> Result<(), Error> {
        let key = self.lookup_key(&obj)?;
        let mut state = self.write();
        let old = state.remove(key.as_str());
        set_rv(&mut state.rv, obj.object_resource_version());
        drop(state);
        drop(old);
        Ok(())
    }

    /// Replaces everything with `list` (a relist) at `resource_version`. Later objects in
    /// `list` win over earlier ones with the same key.
    ///
    /// # Errors
    /// As [`add`](Self::add), for any object of the list; the store is then unchanged.
    pub fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), Error> {
        let mut items = Vec::with_capacity(list.len());
        for obj in list {
            items.push((self.key_of(&obj)?, obj));
        }
        // Index the new list without the lock, so that readers keep going meanwhile...
        let indexers = Arc::clone(&self.read().indexers);
        let mut fresh = State::new(Arc::clone(&indexers));
        for (key, obj) in &items {
            fresh.put(LookupKey::Owned(key.clone()), obj)?;
        }
        let mut state = self.write();
        // ...unless indexers were added meanwhile: then index again, under the lock.
        if !Arc::ptr_eq(&indexers, &state.indexers) {
            fresh = State::new(Arc::clone(&state.indexers));
            for (key, obj) in &items {
                fresh.put(LookupKey::Owned(key.clone()), obj)?;
            }
        }
        fresh.rv = resource_version.to_owned();
        let old = mem::replace(&mut *state, fresh);
        drop(state);
        drop(old);
        Ok(())
    }

    /// Replaces everything, as [`replace`](Self::replace), with `list` and the objects
    /// stored under the keys in `keep`, which stay as they are (the same allocations, filed
    /// where they were), in place: no second copy of the store's maps is built beside the
    /// first, which is what a relist that changes little needs (the informer's atomic FIFO
    /// hands unchanged objects over as keys). An object in
    /// `list` wins over a kept one with its key; a key in `keep` that is not stored is left
    /// out. It is one write: readers see the store before or after it, and wait meanwhile
    /// (client-go's `Replace` holds its lock the same way).
    ///
    /// # Errors
    /// As [`add`](Self::add), for any object of `list`; the store is then unchanged.
    pub fn replace_keeping(
        &self,
        list: Vec<Arc<K>>,
        keep: &[ObjectKey],
        resource_version: &str,
    ) -> Result<(), Error> {
        let mut items = Vec::with_capacity(list.len());
        for obj in list {
            items.push((self.key_of(&obj)?, obj));
        }
        let listed: HashSet<&str> = items
            .iter()
            .map(|(k, _)| k.as_str())
            .chain(keep.iter().map(ObjectKey::as_str))
            .collect();
        let mut state = self.write();
        // Every index function on every new object first, so that a failure changes nothing.
        for (key, obj) in &items {
            state.check(key, obj)?;
        }
        let gone: Vec<String> = state
            .keys
            .keys()
            .filter_map(|k| {
                let k = std::str::from_utf8(k.as_bytes()).ok()?;
                (!listed.contains(k)).then(|| k.to_owned())
            })
            .collect();
        // Freed outside the lock: these may be the last references.
        let mut freed = Vec::with_capacity(gone.len() + items.len());
        freed.extend(gone.iter().filter_map(|k| state.remove(k)));
        for (key, obj) in &items {
            freed.extend(state.put(LookupKey::Owned(key.clone()), obj)?);
        }
        resource_version.clone_into(&mut state.rv);
        drop(state);
        drop(freed);
        Ok(())
    }

    /// The stored object with `obj`'s key.
    ///
    /// # Errors
    /// [`Error::Key`] when no key can be made for `obj`.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, Error> {
        let key = self.lookup_key(obj)?;
        Ok(self.get_by_key(key.as_str()))
    }
}

impl<K> fmt::Debug for ThreadSafeStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        let names: Vec<&str> = state.indexers.iter().map(|ix| ix.name.as_str()).collect();
        f.debug_struct("ThreadSafeStore")
            .field("len", &state.keys.len())
            .field("indexers", &names)
            .field("resource_version", &state.rv)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{IndexFunc, Indexer, IndexerWriter};

    #[derive(Debug)]
    struct Obj {
        ns: String,
        name: String,
        tags: Vec<String>,
    }

    impl MetaObject for Obj {
        fn object_name(&self) -> Option<&str> {
            Some(&self.name)
        }
        fn object_namespace(&self) -> Option<&str> {
            Some(&self.ns)
        }
        fn object_resource_version(&self) -> Option<&str> {
            None
        }
    }

    fn obj(ns: &str, name: &str, tags: &[&str]) -> Arc<Obj> {
        Arc::new(Obj {
            ns: ns.into(),
            name: name.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
        })
    }

    fn by_tag() -> IndexFunc<Obj> {
        IndexFunc::new(|o: &Obj| o.tags.clone())
    }

    #[test]
    fn keys_of_every_length_round_trip() {
        let s = ThreadSafeStore::new(Indexers::new());
        // Inline (<= 46 bytes), boxed in the map, and longer than the stack buffer.
        let names = ["a".to_owned(), "b".repeat(60), "c".repeat(400)];
        for n in &names {
            s.add(obj("ns", n, &[])).unwrap();
        }
        for n in &names {
            let key = format!("ns/{n}");
            assert_eq!(s.get_by_key(&key).unwrap().name, *n);
        }
        let mut keys: Vec<String> = s.list_keys().iter().map(|k| k.to_string()).collect();
        keys.sort();
        assert_eq!(
            keys,
            names.iter().map(|n| format!("ns/{n}")).collect::<Vec<_>>()
        );
        s.delete(obj("ns", &names[2], &[])).unwrap();
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn freed_slots_are_reused_with_clean_index_values() {
        let mut ix = Indexers::new();
        ix.insert("tag".to_owned(), by_tag());
        let s = ThreadSafeStore::new(ix);
        s.add(obj("ns", "a", &["x", "y"])).unwrap();
        s.add(obj("ns", "b", &["y"])).unwrap();
        s.delete(obj("ns", "a", &[])).unwrap();
        // Slot of "a" is reused by "c"; nothing of "a" may stick to it.
        s.add(obj("ns", "c", &[])).unwrap();
        assert_eq!(s.read().objs.len(), 2);
        assert!(s.by_index("tag", "x").unwrap().is_empty());
        assert_eq!(s.list_index_func_values("tag"), ["y"]);
        assert_eq!(
            s.index_keys("tag", "y").unwrap(),
            [ObjectKey::parse("ns/b").unwrap()]
        );
        s.update(obj("ns", "c", &["x", "z"])).unwrap();
        assert_eq!(s.list_index_func_values("tag"), ["x", "y", "z"]);
        assert!(s.read().indices[0].multi.contains_key(&0));
        s.update(obj("ns", "c", &["z"])).unwrap();
        assert!(s.read().indices[0].multi.is_empty());
        assert_eq!(s.list_index_func_values("tag"), ["y", "z"]);
    }

    #[test]
    fn more_than_two_indices_added_later_are_kept_per_slot() {
        let s = ThreadSafeStore::new(Indexers::new());
        s.add(obj("ns", "a", &["t1"])).unwrap();
        for (i, name) in ["one", "two", "three"].into_iter().enumerate() {
            let mut ix = Indexers::new();
            ix.insert(name.to_owned(), by_tag());
            s.add_indexers(ix).unwrap();
            assert_eq!(s.by_index(name, "t1").unwrap().len(), 1, "index {i}");
        }
        s.update(obj("ns", "a", &["t2"])).unwrap();
        for name in ["one", "two", "three"] {
            assert!(s.by_index(name, "t1").unwrap().is_empty());
            assert_eq!(s.list_index_func_values(name), ["t2"]);
        }
        s.delete(obj("ns", "a", &[])).unwrap();
        for name in ["one", "two", "three"] {
            assert!(s.list_index_func_values(name).is_empty());
        }
    }

    #[test]
    fn cluster_scoped_and_namespaced_keys_never_collide() {
        let s = ThreadSafeStore::new(Indexers::new());
        s.add(obj("", "x", &[])).unwrap();
        s.add(obj("a", "x", &[])).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.get_by_key("x").unwrap().ns, "");
        // A name with a slash is refused, so "a" + "/x" cannot pose as "a/x".
        assert!(matches!(s.add(obj("", "a/x", &[])), Err(Error::Key(_))));
        assert_eq!(s.get_by_key("a/x").unwrap().ns, "a");
    }
}
