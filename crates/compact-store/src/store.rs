//! The compact store: entries in a `ThreadSafeStore`, objects encoded, decoded on read.

use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use kinformer_core::{
    KeyFunc, KnownObjects, ListPart, Listed, MetaObject, ObjectKey, Sink, WholeList,
    meta_namespace_key,
};
use kinformer_indexer::{
    Error, IndexFunc, Indexer, IndexerWriter, Indexers, ThreadSafeStore, everything,
};
use kube_core::Selector;
use kube_core::SelectorExt as _;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::DecodeCache;
use crate::codec;
use crate::encoded::Encoded;
use crate::entry::{Entry, Head};
use crate::labels::LabelSets;
use crate::view::Cached;

/// How many decoded objects a store keeps by default (see [`CompactStore::with_cache`]).
pub const DEFAULT_CACHE: usize = 64;

/// What a [`CompactStore`] holds, for sizing it: see [`CompactStore::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Objects stored.
    pub objects: usize,
    /// Heap bytes of the stored entries: encodings, names, resource versions and computed
    /// index values (not the maps around them, nor the shared label sets).
    pub entry_bytes: usize,
    /// Distinct label sets the objects share.
    pub label_sets: usize,
    /// Objects decoded since the store was made (reads the decode cache did not answer).
    pub decodes: u64,
    /// Reads the decode cache answered.
    pub cache_hits: u64,
    /// Stored objects that failed to decode (and were read as missing); anything but 0 is a
    /// type whose `Serialize` and `Deserialize` disagree.
    pub decode_failures: u64,
}

/// How the store answers one of its indices.
#[derive(Clone, Copy)]
enum Computed {
    /// The inner store's namespace index, from the entry's namespace.
    Namespace,
    /// Values computed from the object when it was written, kept in the entry at this
    /// position.
    At(usize),
}

struct Registered<K> {
    name: String,
    func: IndexFunc<K>,
    how: Computed,
}

impl<K> Clone for Registered<K> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            func: self.func.clone(),
            how: self.how,
        }
    }
}

/// A cache for an informer that keeps every object encoded and decodes it when it is read.
/// Plug it in where a
/// [`ThreadSafeStore`] goes (`SharedIndexInformer::builder(..).store(..)`); listers,
/// indices and handlers work unchanged.
///
/// Each read decodes what it returns (a few microseconds per pod), except what the small
/// cache of recently read and written objects still holds, and hands out a new `Arc`
/// (objects are not shared between readers as the decoded store shares them). Label
/// selectors and index lookups are answered before decoding, so a lister decodes only
/// what it returns. See the [crate docs](crate) for the measurements and the trade.
///
/// `K` must encode and decode through serde with the same result as through JSON (every
/// k8s-openapi type, `DynamicObject`, a `#[derive(CustomResource)]` type, a projection
/// struct do); the first write checks it.
pub struct CompactStore<K> {
    inner: ThreadSafeStore<Cached<K>>,
    /// The caller's index functions, with how each is answered. Behind a lock because
    /// `add_indexers` may add to them while readers run `index`.
    indexers: RwLock<Arc<[Registered<K>]>>,
    key_func: Option<KeyFunc<K>>,
    /// Serializes writes, so that the index functions and the entries written with them
    /// stay in step while `add_indexers` runs.
    writer: Mutex<LabelSets>,
    cache: DecodeCache<K>,
    /// The parts of a list written through [`Sink::replace`], until it ends.
    lists: WholeList<K>,
    /// Whether an object of `K` has been seen to decode back (the first write checks it).
    round_trip_checked: AtomicBool,
    decodes: AtomicU64,
    cache_hits: AtomicU64,
    decode_failures: AtomicU64,
    _k: PhantomData<fn() -> K>,
}

impl<K> fmt::Debug for CompactStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactStore")
            .field("inner", &self.inner)
            .field("cache_slots", &self.cache.size())
            .finish_non_exhaustive()
    }
}

type Values = Box<[Box<[Box<str>]>]>;

impl<K> CompactStore<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// An empty store keyed by `namespace/name`, with these index functions (pass
    /// [`namespace_indexers()`](kinformer_indexer::namespace_indexers) for what an
    /// informer's store usually has) and a cache of [`DEFAULT_CACHE`] decoded objects.
    pub fn new(indexers: Indexers<K>) -> Self {
        Self::build(None, indexers, DEFAULT_CACHE)
    }

    /// An empty store that keys objects with `key_func`.
    pub fn with_key_func(key_func: KeyFunc<K>, indexers: Indexers<K>) -> Self {
        Self::build(Some(key_func), indexers, DEFAULT_CACHE)
    }

    /// The same store with a decode cache of `slots` objects (0: none). Each slot may keep
    /// one decoded object alive; a reconcile that reads the same object several times
    /// decodes it once as long as its slot was not taken meanwhile.
    #[must_use]
    pub fn with_cache(self, slots: usize) -> Self {
        Self {
            cache: DecodeCache::new(slots),
            ..self
        }
    }

    fn build(key_func: Option<KeyFunc<K>>, indexers: Indexers<K>, cache: usize) -> Self {
        let inner = match &key_func {
            None => ThreadSafeStore::new(Indexers::new()),
            // The key the caller's function made for the object, kept in its entry.
            Some(_) => ThreadSafeStore::with_key_func(
                Arc::new(|e: &Cached<K>| ObjectKey::parse(e.entry().custom_key())),
                Indexers::new(),
            ),
        };
        let store = Self {
            inner,
            indexers: RwLock::new(Arc::from(Vec::new())),
            key_func,
            writer: Mutex::new(LabelSets::default()),
            cache: DecodeCache::new(cache),
            lists: WholeList::default(),
            round_trip_checked: AtomicBool::new(false),
            decodes: AtomicU64::new(0),
            cache_hits: AtomicU64::new(0),
            decode_failures: AtomicU64::new(0),
            _k: PhantomData,
        };
        // Registering into an empty store cannot fail but for a duplicate name, which a
        // map of indexers cannot hold.
        let (all, inner) = store.plan(&[], indexers);
        if let Err(e) = store.install(all, inner) {
            tracing::error!(error = %e, "registering the index functions of an empty store");
        }
        store
    }

    /// What the store holds and how its reads went.
    pub fn stats(&self) -> Stats {
        let entries = self.inner.list();
        Stats {
            objects: entries.len(),
            entry_bytes: entries.iter().map(|e| e.entry().heap_bytes()).sum(),
            label_sets: self.lock_writer().len(),
            decodes: self.decodes.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            decode_failures: self.decode_failures.load(Ordering::Relaxed),
        }
    }

    fn lock_writer(&self) -> MutexGuard<'_, LabelSets> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn registered(&self) -> Arc<[Registered<K>]> {
        Arc::clone(&self.indexers.read().unwrap_or_else(PoisonError::into_inner))
    }

    pub(crate) fn key_of(&self, obj: &K) -> Result<ObjectKey, Error> {
        match &self.key_func {
            None => meta_namespace_key(obj).map_err(Error::Key),
            Some(f) => f(obj).map_err(Error::Key),
        }
    }

    /// The values of every computed index for `obj`, by position.
    fn values(
        registered: &[Registered<K>],
        obj: &K,
        key: Option<&ObjectKey>,
    ) -> Result<Values, Error> {
        let mut out = Vec::new();
        for r in registered {
            if let Computed::At(pos) = r.how {
                let mut vs = r.func.values(obj).map_err(|source| Error::IndexFunc {
                    index: r.name.clone(),
                    key: key.cloned(),
                    source,
                })?;
                vs.sort_unstable();
                vs.dedup();
                if out.len() <= pos {
                    out.resize_with(pos + 1, Box::default);
                }
                if let Some(slot) = out.get_mut(pos) {
                    *slot = vs.into_iter().map(String::into_boxed_str).collect();
                }
            }
        }
        Ok(out.into_boxed_slice())
    }

    /// The entry for `obj`: encoded, its labels shared, its index values computed.
    fn entry(
        &self,
        registered: &[Registered<K>],
        labels: &mut LabelSets,
        obj: &K,
        buf: &mut Vec<u8>,
    ) -> Result<Cached<K>, Error> {
        let key = self.key_of(obj)?;
        let values = Self::values(registered, obj, Some(&key))?;
        buf.clear();
        codec::encode(obj, buf).map_err(|e| Error::Other(Box::new(e)))?;
        if !self.round_trip_checked.load(Ordering::Relaxed) {
            // Once per store: a type that cannot decode what it encodes is refused at its
            // first write rather than read as missing later.
            codec::decode::<K>(buf).map_err(|e| Error::Other(Box::new(e)))?;
            self.round_trip_checked.store(true, Ordering::Relaxed);
        }
        Ok(self.assemble(obj, &key, buf, labels.intern(obj.object_labels()), values))
    }

    /// The entry for an object that arrives encoded: stored as it is; decoded only when a
    /// key function or an index function other than the namespace index needs the object,
    /// and once per store to check that its bytes are a `K`.
    fn entry_from_encoded(
        &self,
        registered: &[Registered<K>],
        labels: &mut LabelSets,
        encoded: &Encoded<K>,
    ) -> Result<Cached<K>, Error> {
        let needs_object = self.key_func.is_some()
            || registered.iter().any(|r| matches!(r.how, Computed::At(_)))
            || !self.round_trip_checked.load(Ordering::Relaxed);
        let (key, values) = if needs_object {
            let obj = encoded.decode().map_err(|e| Error::Other(Box::new(e)))?;
            self.round_trip_checked.store(true, Ordering::Relaxed);
            let key = self.key_of(&obj)?;
            let values = Self::values(registered, &obj, Some(&key))?;
            (key, values)
        } else {
            (
                meta_namespace_key(encoded).map_err(Error::Key)?,
                Values::default(),
            )
        };
        let shared = labels.intern(encoded.object_labels());
        Ok(self.assemble(encoded, &key, encoded.bytes(), shared, values))
    }

    /// An entry of `meta`'s metadata, the key (kept when the store has a key function of
    /// its own), the encoding and the index values.
    fn assemble(
        &self,
        meta: &impl MetaObject,
        key: &ObjectKey,
        encoded: &[u8],
        labels: Option<Arc<crate::entry::Labels>>,
        values: Values,
    ) -> Cached<K> {
        let head = Head {
            namespace: meta.object_namespace(),
            name: meta.object_name(),
            resource_version: meta.object_resource_version(),
            uid: meta.object_uid(),
            custom_key: self.key_func.as_ref().map(|_| key),
        };
        Cached::new(Entry::new(&head, encoded, labels, values))
    }

    /// An entry with the key and resource version of `obj` only: what a delete or a query
    /// needs.
    fn bare_entry(&self, obj: &K, values: Values) -> Result<Cached<K>, Error> {
        let key = match &self.key_func {
            None => None,
            Some(_) => Some(self.key_of(obj)?),
        };
        let head = Head {
            namespace: obj.object_namespace(),
            name: obj.object_name(),
            resource_version: obj.object_resource_version(),
            uid: None,
            custom_key: key.as_ref(),
        };
        Ok(Cached::new(Entry::new(&head, &[], None, values)))
    }

    fn put(&self, obj: Arc<K>) -> Result<(), Error> {
        let mut labels = self.lock_writer();
        let registered = self.registered();
        let mut buf = Vec::new();
        let entry = Arc::new(self.entry(&registered, &mut labels, &obj, &mut buf)?);
        self.inner.add(Arc::clone(&entry))?;
        drop(labels);
        // The object just written is the likeliest to be read next (the informer reads
        // the old version of an object on its next event).
        self.cache.put(entry, obj);
        Ok(())
    }

    fn remove(&self, obj: &K) -> Result<(), Error> {
        // The key is checked as for any write.
        self.key_of(obj)?;
        let entry = Arc::new(self.bare_entry(obj, Box::new([]))?);
        let _labels = self.lock_writer();
        self.inner.delete(entry)
    }

    /// Replaces everything with `list` and the entries held under `keep` (left as they
    /// are: not decoded, not encoded again, not moved), in one write of the inner store.
    fn replace_all(
        &self,
        list: Vec<Arc<K>>,
        keep: &[ObjectKey],
        resource_version: &str,
    ) -> Result<(), Error> {
        let mut buf = Vec::new();
        self.replace_with(
            list,
            keep,
            resource_version,
            |store, registered, labels, obj| {
                store.entry(registered, labels, &obj, &mut buf)
                // Each object is dropped here: only its encoding stays.
            },
        )
    }

    /// [`replace_all`](Self::replace_all) with objects that arrive encoded.
    pub(crate) fn replace_all_encoded(
        &self,
        list: Vec<Arc<Encoded<K>>>,
        keep: &[ObjectKey],
        resource_version: &str,
    ) -> Result<(), Error> {
        self.replace_with(
            list,
            keep,
            resource_version,
            |store, registered, labels, obj| store.entry_from_encoded(registered, labels, &obj),
        )
    }

    fn replace_with<T>(
        &self,
        list: Vec<T>,
        keep: &[ObjectKey],
        resource_version: &str,
        mut entry: impl FnMut(&Self, &[Registered<K>], &mut LabelSets, T) -> Result<Cached<K>, Error>,
    ) -> Result<(), Error> {
        let mut labels = self.lock_writer();
        let registered = self.registered();
        let mut entries = Vec::with_capacity(list.len());
        for obj in list {
            entries.push(Arc::new(entry(self, &registered, &mut labels, obj)?));
        }
        if keep.is_empty() {
            self.inner.replace(entries, resource_version)
        } else {
            // The kept entries stay where they are: no second copy of the maps.
            self.inner.replace_keeping(entries, keep, resource_version)
        }
    }

    /// Stores an object that arrives encoded (see [`entry_from_encoded`](Self::entry_from_encoded)).
    pub(crate) fn put_encoded(&self, obj: &Encoded<K>) -> Result<(), Error> {
        let mut labels = self.lock_writer();
        let registered = self.registered();
        let entry = self.entry_from_encoded(&registered, &mut labels, obj)?;
        self.inner.add(Arc::new(entry))
    }

    /// Removes the object `obj` is a version of.
    pub(crate) fn remove_encoded(&self, obj: &Encoded<K>) -> Result<(), Error> {
        if self.key_func.is_some() {
            let obj = obj.decode().map_err(|e| Error::Other(Box::new(e)))?;
            return self.remove(&obj);
        }
        meta_namespace_key(obj).map_err(Error::Key)?;
        let head = Head {
            namespace: obj.object_namespace(),
            name: obj.object_name(),
            resource_version: obj.object_resource_version(),
            uid: None,
            custom_key: None,
        };
        let entry = Arc::new(Cached::new(Entry::new(&head, &[], None, Values::default())));
        let _labels = self.lock_writer();
        self.inner.delete(entry)
    }

    /// The entries of the inner store, for the encoded side.
    pub(crate) fn entries(&self) -> &ThreadSafeStore<Cached<K>> {
        &self.inner
    }

    /// The registered index functions, for the encoded side.
    pub(crate) fn index_functions(&self) -> Vec<(String, IndexFunc<K>)> {
        self.registered()
            .iter()
            .map(|r| (r.name.clone(), r.func.clone()))
            .collect()
    }

    /// The object `entry` encodes: from the decode cache, or decoded. `None` (logged and
    /// counted) when it does not decode.
    fn materialize(&self, entry: &Arc<Cached<K>>, remember: bool) -> Option<Arc<K>> {
        if let Some(obj) = self.cache.get(entry) {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Some(obj);
        }
        self.decodes.fetch_add(1, Ordering::Relaxed);
        match codec::decode::<K>(entry.entry().encoded()) {
            Ok(obj) => {
                let obj = Arc::new(obj);
                if remember {
                    self.cache.put(Arc::clone(entry), Arc::clone(&obj));
                }
                Some(obj)
            }
            Err(e) => {
                self.decode_failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    error = %e,
                    namespace = entry.object_namespace().unwrap_or(""),
                    name = entry.object_name().unwrap_or(""),
                    "a stored object does not decode: read as missing"
                );
                None
            }
        }
    }

    fn materialize_all(&self, entries: Vec<Arc<Cached<K>>>) -> Vec<Arc<K>> {
        let mut out = Vec::with_capacity(entries.len());
        out.extend(entries.iter().filter_map(|e| self.materialize(e, false)));
        out
    }

    /// The registrations after adding `indexers` (names checked by the caller) to
    /// `current`, and the inner store's functions for the new ones.
    fn plan(
        &self,
        current: &[Registered<K>],
        indexers: Indexers<K>,
    ) -> (Vec<Registered<K>>, Indexers<Cached<K>>) {
        let mut all = current.to_vec();
        let mut next = all
            .iter()
            .filter_map(|r| match r.how {
                Computed::At(p) => Some(p + 1),
                Computed::Namespace => None,
            })
            .max()
            .unwrap_or(0);
        let mut inner = Indexers::new();
        for (name, func) in indexers {
            let how = if func.is_namespace() && self.key_func.is_none() {
                inner.insert(name.clone(), IndexFunc::namespace());
                Computed::Namespace
            } else {
                let pos = next;
                next += 1;
                inner.insert(
                    name.clone(),
                    IndexFunc::new(move |e: &Cached<K>| {
                        e.entry()
                            .values(pos)
                            .iter()
                            .map(|v| v.to_string())
                            .collect()
                    }),
                );
                Computed::At(pos)
            };
            all.push(Registered { name, func, how });
        }
        (all, inner)
    }

    /// Makes `all` the registrations and adds `inner` to the inner store.
    fn install(&self, all: Vec<Registered<K>>, inner: Indexers<Cached<K>>) -> Result<(), Error> {
        if !inner.is_empty() {
            self.inner.add_indexers(inner)?;
        }
        *self
            .indexers
            .write()
            .unwrap_or_else(PoisonError::into_inner) = all.into();
        Ok(())
    }
}

/// Writes, as the informer makes them through kinformer-core's [`Sink`]. Errors other than
/// a bad key arrive boxed in [`kinformer_core::Error::Other`] and downcast back to
/// [`kinformer_indexer::Error`].
impl<K> Sink<K> for CompactStore<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn add(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(self.put(obj)?)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(self.put(obj)?)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(self.remove(&obj)?)
    }
    /// Gathers the list, then one write; an unchanged object (this store's own, listed by
    /// key) keeps its entry as it is, so a relist neither decodes nor encodes it.
    fn replace(&self, part: ListPart<K>) -> Result<(), kinformer_core::Error> {
        let Some((list, rv)) = self.lists.gather(part) else {
            return Ok(());
        };
        let (objects, unchanged) = Listed::split(list);
        Ok(self.replace_all(objects, &unchanged, &rv)?)
    }
    /// Nothing to do for a cache.
    fn resync(&self) -> Result<(), kinformer_core::Error> {
        Ok(())
    }
    fn bookmark(&self, rv: &str) -> Result<(), kinformer_core::Error> {
        Sink::bookmark(&self.inner, rv)
    }
}

impl<K> KnownObjects<K> for CompactStore<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.inner.list_keys()
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        let entry = self.inner.get_by_key(key)?;
        self.materialize(&entry, true)
    }

    /// Only what the decode cache holds: anything else would be decoded, a new copy, which
    /// is what a caller asking for the shared object wants to avoid.
    fn get_shared(&self, key: &str) -> Option<Arc<K>> {
        let entry = self.inner.get_by_key(key)?;
        self.cache.get(&entry)
    }

    /// Answered from the entry, without decoding.
    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        !resource_version.is_empty()
            && self
                .inner
                .get_by_key(key)
                .is_some_and(|e| e.object_resource_version() == Some(resource_version))
    }
}

impl<K> Indexer<K> for CompactStore<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn list(&self) -> Vec<Arc<K>> {
        self.materialize_all(self.inner.list())
    }

    fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, Error> {
        Ok(self.materialize_all(self.inner.by_index(index_name, value)?))
    }

    fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, Error> {
        self.inner.index_keys(index_name, value)
    }

    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.inner.list_index_func_values(index_name)
    }

    fn get_indexers(&self) -> Indexers<K> {
        self.registered()
            .iter()
            .map(|r| (r.name.clone(), r.func.clone()))
            .collect()
    }

    fn last_sync_resource_version(&self) -> String {
        self.inner.last_sync_resource_version()
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    /// One snapshot, as the thread-safe store: the query's values are computed with the index
    /// function, then looked up in the inner store's index at once.
    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, Error>
    where
        K: MetaObject,
    {
        Ok(self.materialize_all(self.index_entries(index_name, obj)?))
    }

    /// Matches the labels kept beside each encoding, and decodes only the matches.
    fn list_selected(&self, selector: &Selector) -> Vec<Arc<K>>
    where
        K: MetaObject,
    {
        let mut entries = self.inner.list();
        retain_selected(&mut entries, selector);
        self.materialize_all(entries)
    }

    /// Matches the labels kept beside each encoding, and decodes only the matches.
    fn by_index_selected(
        &self,
        index_name: &str,
        value: &str,
        selector: &Selector,
    ) -> Result<Vec<Arc<K>>, Error>
    where
        K: MetaObject,
    {
        let mut entries = self.inner.by_index(index_name, value)?;
        retain_selected(&mut entries, selector);
        Ok(self.materialize_all(entries))
    }
}

impl<K> CompactStore<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// The entries `index(index_name, obj)` returns, undecoded.
    pub(crate) fn index_entries(
        &self,
        index_name: &str,
        obj: &K,
    ) -> Result<Vec<Arc<Cached<K>>>, Error> {
        let registered = self.registered();
        let r = registered
            .iter()
            .find(|r| r.name == index_name)
            .ok_or_else(|| Error::UnknownIndex(index_name.to_owned()))?;
        let values = match r.how {
            Computed::Namespace => Box::new([]) as Values,
            Computed::At(_) => Self::values(&registered, obj, self.key_of(obj).ok().as_ref())?,
        };
        let query = self.bare_entry_for_query(obj, values);
        self.inner.index(index_name, &query)
    }

    /// The entry a query object stands for: its namespace (and key, if it has one) and the
    /// values computed from it. A query object need not have a valid key.
    fn bare_entry_for_query(&self, obj: &K, values: Values) -> Cached<K> {
        let key = self.key_func.as_ref().and_then(|_| self.key_of(obj).ok());
        let head = Head {
            namespace: obj.object_namespace(),
            name: obj.object_name(),
            resource_version: None,
            uid: None,
            custom_key: key.as_ref(),
        };
        Cached::new(Entry::new(&head, &[], None, values))
    }
}

pub(crate) fn retain_selected<K>(entries: &mut Vec<Arc<Cached<K>>>, selector: &Selector) {
    static NO_LABELS: std::collections::BTreeMap<String, String> =
        std::collections::BTreeMap::new();
    if selector.selects_all() || *selector == everything() {
        return;
    }
    entries.retain(|e| selector.matches(e.object_labels().unwrap_or(&NO_LABELS)));
}

impl<K> IndexerWriter<K> for CompactStore<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// Decodes every stored object once to compute the new functions' values, stores the
    /// entries again with them, and only then registers the functions, so that a new index
    /// is complete from the moment it can be queried.
    fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error> {
        let mut labels = self.lock_writer();
        let registered = self.registered();
        let conflicts: Vec<String> = indexers
            .keys()
            .filter(|n| registered.iter().any(|r| &r.name == *n))
            .cloned()
            .collect();
        if !conflicts.is_empty() {
            return Err(Error::IndexerConflict(conflicts));
        }
        let (all, inner) = self.plan(&registered, indexers);
        let entries = self.inner.list();
        if !entries.is_empty() {
            // Every stored object must index with the new functions before anything
            // changes: the entries are built first, any error returned before the swap.
            let mut buf = Vec::new();
            let mut fresh = Vec::with_capacity(entries.len());
            for entry in &entries {
                let obj: K = codec::decode(entry.entry().encoded())
                    .map_err(|e| Error::Other(Box::new(e)))?;
                fresh.push(Arc::new(self.entry(&all, &mut labels, &obj, &mut buf)?));
            }
            let rv = self.inner.last_sync_resource_version();
            self.inner.replace(fresh, &rv)?;
        }
        self.install(all, inner)
    }
}
