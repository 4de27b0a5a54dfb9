//! The thread-safe store (the decoded cache, `CacheKind::Decoded` in an informer; the compact
//! store keeps its entries in one): one `RwLock` over the items and every index.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::mem;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kinformer_core::{
    KeyFunc, KnownObjects, ListPart, Listed, MetaObject, ObjectKey, Sink, WholeList,
    meta_namespace_key,
};

use crate::hash::BuildIdHasher;
use crate::index::IndexValues;
use crate::{Error, IndexFunc, Indexer, IndexerWriter, Indexers};

/// The hasher for keys and indexed values, which come from the API server: foldhash's
/// quality variant with a random seed per map (as the workqueue's and the FIFOs' maps),
/// so that object names chosen to collide under one seed do not collide under another.
/// std's SipHash costs about four times as much on a 20-byte key.
type StrHash = foldhash::quality::RandomState;

/// The default [`Indexer`]: a thread-safe store with indices (client-go's
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

/// Everything behind the lock.
struct State<K> {
    /// key → slot id and object. The object is here as well as in `objs` so that a `get`
    /// reads one map entry, and keys up to 46 bytes sit in the entry itself, so that
    /// comparing them follows no pointer (a 64-byte entry: one or two cache lines).
    keys: HashMap<MapKey, Entry<K>, StrHash>,
    /// The objects by slot id (`None` for a free slot). Index sets hold slot ids, so a
    /// `by_index` reaches each object by position in this small, dense array instead of by
    /// a second key lookup. Eight bytes a slot: it stays in cache where a map would not.
    objs: Vec<Option<Arc<K>>>,
    /// The values each slot is filed under, by slot id then index position, kept so that
    /// an update or delete finds the old values without calling an index function on the
    /// old object (which could fail, and would read cold memory).
    slot_values: Vec<SlotValues>,
    /// Free slot ids, reused last in, first out.
    free: Vec<u32>,
    /// The index functions, by position. Shared so that `replace` can index outside the
    /// lock and then check that no indexer was added meanwhile.
    indexers: Arc<[NamedIndexFunc<K>]>,
    /// One per index function, same positions.
    indices: Vec<Index>,
    /// The last resource version seen.
    rv: String,
}

struct Entry<K> {
    id: u32,
    obj: Arc<K>,
}

/// Per-slot values of every index: two inline (most stores have one or two indices),
/// more on the heap.
enum SlotValues {
    Inline([Values; 2]),
    Heap(Box<[Values]>),
}

impl Default for SlotValues {
    fn default() -> Self {
        Self::Inline(Default::default())
    }
}

impl SlotValues {
    fn with_len(n: usize) -> Self {
        if n <= 2 {
            Self::default()
        } else {
            Self::Heap((0..n).map(|_| Values::default()).collect())
        }
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut Values> {
        match self {
            Self::Inline(vs) => vs.get_mut(i),
            Self::Heap(vs) => vs.get_mut(i),
        }
    }

    fn set(&mut self, i: usize, v: Values) {
        if self.get_mut(i).is_none() {
            let mut all: Vec<Values> = match mem::take(self) {
                Self::Inline(vs) => vs.into(),
                Self::Heap(vs) => vs.into(),
            };
            all.resize_with(i + 1, Values::default);
            *self = Self::Heap(all.into());
        }
        if let Some(cur) = self.get_mut(i) {
            *cur = v;
        }
    }

    fn as_slice(&self) -> &[Values] {
        match self {
            Self::Inline(vs) => vs,
            Self::Heap(vs) => vs,
        }
    }
}

struct NamedIndexFunc<K> {
    name: String,
    func: IndexFunc<K>,
}

/// One index: value → the slots filed under it.
struct Index {
    by_value: HashMap<Arc<str>, ValueSet, StrHash>,
    /// The values of slots filed under more than one value (rare: most index functions
    /// return one), so that the common case fits 16 bytes a slot.
    multi: HashMap<u32, Box<[Arc<str>]>, BuildIdHasher>,
    /// The marker a slot's `Values` holds when its values are in `multi`: an allocation
    /// of its own, recognised by address.
    many: Arc<str>,
}

impl Default for Index {
    fn default() -> Self {
        Self {
            by_value: HashMap::default(),
            multi: HashMap::default(),
            many: Arc::from(""),
        }
    }
}

struct ValueSet {
    /// The same allocation as the map key, handed to the slots' `Values`.
    value: Arc<str>,
    slots: HashSet<u32, BuildIdHasher>,
}

/// What one slot is filed under in one index: nothing, one value (shared with the index
/// map's key), or the index's `many` marker.
#[derive(Default)]
struct Values(Option<Arc<str>>);

impl Index {
    /// The values slot `id` is filed under, given its `cur` marker.
    fn values_of<'a>(&'a self, id: u32, cur: &'a Values) -> &'a [Arc<str>] {
        match &cur.0 {
            None => &[],
            Some(v) if Arc::ptr_eq(v, &self.many) => self.multi.get(&id).map_or(&[], |vs| &vs[..]),
            Some(v) => std::slice::from_ref(v),
        }
    }

    fn same_as(&self, id: u32, cur: &Values, new: &IndexValues<'_>) -> bool {
        let old = self.values_of(id, cur);
        match new {
            IndexValues::None => old.is_empty(),
            IndexValues::Borrowed(v) => matches!(old, [one] if **one == **v),
            IndexValues::Owned(vs) => {
                old.len() == vs.len() && old.iter().zip(vs).all(|(a, b)| **a == **b)
            }
        }
    }

    /// Files slot `id` under `new`, moving it out of `cur` (what it was filed under).
    fn file(&mut self, id: u32, cur: &mut Values, new: &IndexValues<'_>) {
        if self.same_as(id, cur, new) {
            return;
        }
        let old = mem::take(cur);
        self.unfile(id, &old);
        *cur = match new {
            IndexValues::None => Values(None),
            IndexValues::Borrowed(v) => Values(Some(self.insert(id, v))),
            IndexValues::Owned(vs) => match vs.as_slice() {
                [] => Values(None),
                [v] => Values(Some(self.insert(id, v))),
                vs => {
                    let all = vs.iter().map(|v| self.insert(id, v)).collect();
                    self.multi.insert(id, all);
                    Values(Some(Arc::clone(&self.many)))
                }
            },
        };
    }

    /// Takes slot `id` out of every set `old` says it is in.
    fn unfile(&mut self, id: u32, old: &Values) {
        match &old.0 {
            None => {}
            Some(v) if Arc::ptr_eq(v, &self.many) => {
                for v in self.multi.remove(&id).unwrap_or_default() {
                    self.unfile_value(id, &v);
                }
            }
            Some(v) => self.unfile_value(id, v),
        }
    }

    fn unfile_value(&mut self, id: u32, value: &str) {
        if let Some(set) = self.by_value.get_mut(value) {
            set.slots.remove(&id);
            // Empty sets go, or an index over short-lived values would grow forever
            // (kubernetes/kubernetes#84959).
            if set.slots.is_empty() {
                self.by_value.remove(value);
            }
        }
    }

    /// Adds slot `id` to `value`'s set and returns the shared value string.
    fn insert(&mut self, id: u32, value: &str) -> Arc<str> {
        if let Some(set) = self.by_value.get_mut(value) {
            set.slots.insert(id);
            return Arc::clone(&set.value);
        }
        let value: Arc<str> = Arc::from(value);
        let mut slots = HashSet::with_capacity_and_hasher(1, BuildIdHasher::default());
        slots.insert(id);
        self.by_value.insert(
            Arc::clone(&value),
            ValueSet {
                value: Arc::clone(&value),
                slots,
            },
        );
        value
    }
}

/// Index values of up to this many indices are gathered on the stack during a write.
const INLINE_INDICES: usize = 4;

impl<K: MetaObject> State<K> {
    fn new(indexers: Arc<[NamedIndexFunc<K>]>) -> Self {
        let indices = indexers.iter().map(|_| Index::default()).collect();
        Self {
            keys: HashMap::default(),
            objs: Vec::new(),
            slot_values: Vec::new(),
            free: Vec::new(),
            indexers,
            indices,
            rv: String::new(),
        }
    }

    fn position(&self, index_name: &str) -> Result<usize, Error> {
        self.indexers
            .iter()
            .position(|ix| ix.name == index_name)
            .ok_or_else(|| Error::UnknownIndex(index_name.to_owned()))
    }

    fn obj(&self, id: u32) -> Option<&Arc<K>> {
        self.objs.get(id as usize)?.as_ref()
    }

    /// Stores `obj` under `key`; returns the object it replaced. Computes every index
    /// value before changing anything, so an index function error (or panic) leaves `self`
    /// as it was.
    /// Runs every index function on `obj` as [`put`](Self::put) would, changing nothing:
    /// whether a put of it would fail.
    fn check(&self, key: &ObjectKey, obj: &K) -> Result<(), Error> {
        for ix in self.indexers.iter() {
            ix.func
                .store_values(obj)
                .map_err(|source| Error::IndexFunc {
                    index: ix.name.clone(),
                    key: Some(key.clone()),
                    source,
                })?;
        }
        Ok(())
    }

    fn put(&mut self, key: LookupKey, obj: &Arc<K>) -> Result<Option<Arc<K>>, Error> {
        let n = self.indexers.len();
        let mut inline = [const { IndexValues::None }; INLINE_INDICES];
        let mut spilled = Vec::new();
        let values = if n <= INLINE_INDICES {
            &mut inline[..n]
        } else {
            spilled.resize_with(n, || IndexValues::None);
            &mut spilled[..]
        };
        for (v, ix) in values.iter_mut().zip(self.indexers.iter()) {
            *v = ix
                .func
                .store_values(obj)
                .map_err(|source| Error::IndexFunc {
                    index: ix.name.clone(),
                    key: ObjectKey::parse(key.as_str()).ok(),
                    source,
                })?;
        }
        if let Some(entry) = self.keys.get_mut(key.as_bytes()) {
            let old = mem::replace(&mut entry.obj, Arc::clone(obj));
            let id = entry.id;
            if let Some(slot) = self.objs.get_mut(id as usize) {
                *slot = Some(Arc::clone(obj));
            }
            if let Some(cur) = self.slot_values.get_mut(id as usize) {
                file_all(&mut self.indices, id, cur, values);
            }
            return Ok(Some(old));
        }
        let key = MapKey::new(key.as_bytes());
        let id = match self.free.pop() {
            Some(id) => {
                if let Some(slot) = self.objs.get_mut(id as usize) {
                    *slot = Some(Arc::clone(obj));
                }
                id
            }
            None => {
                // More than u32::MAX objects would not fit in memory anyway.
                let id = u32::try_from(self.objs.len()).unwrap_or(u32::MAX);
                self.objs.push(Some(Arc::clone(obj)));
                self.slot_values.push(SlotValues::default());
                id
            }
        };
        if let Some(cur) = self.slot_values.get_mut(id as usize) {
            *cur = SlotValues::with_len(n);
            file_all(&mut self.indices, id, cur, values);
        }
        let obj = Arc::clone(obj);
        self.keys.insert(key, Entry { id, obj });
        Ok(None)
    }

    /// Removes the object under `key`; returns it.
    fn remove(&mut self, key: &str) -> Option<Arc<K>> {
        let entry = self.keys.remove(key.as_bytes())?;
        let id = entry.id as usize;
        if let Some(values) = self.slot_values.get_mut(id) {
            let values = mem::take(values);
            for (index, old) in self.indices.iter_mut().zip(values.as_slice()) {
                index.unfile(entry.id, old);
            }
        }
        if let Some(obj) = self.objs.get_mut(id) {
            *obj = None;
            self.free.push(entry.id);
        }
        Some(entry.obj)
    }

    fn ids_to_objects<'a>(&self, ids: impl Iterator<Item = &'a u32>, len: usize) -> Vec<Arc<K>> {
        let mut out = Vec::with_capacity(len);
        out.extend(ids.filter_map(|&id| self.obj(id).cloned()));
        out
    }
}

/// Files slot `id` under its new `values` in every index.
fn file_all(indices: &mut [Index], id: u32, cur: &mut SlotValues, values: &[IndexValues<'_>]) {
    for (i, (index, v)) in indices.iter_mut().zip(values).enumerate() {
        if let Some(cur) = cur.get_mut(i) {
            index.file(id, cur, v);
        }
    }
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

/// Room for a `namespace/name` key on the stack: a DNS-1123 subdomain name (253) plus a
/// namespace label (63) and the slash. Longer keys are allocated.
const KEY_BUF: usize = 320;

/// The key a write or lookup is for.
#[allow(
    clippy::large_enum_variant,
    reason = "a short-lived stack value; boxing the buffer would be the allocation it avoids"
)]
enum LookupKey {
    /// Made by a key function (or too long for the buffer).
    Owned(ObjectKey),
    /// The default `namespace/name` key, validated, written into `buf[..len]`.
    Parts { buf: [u8; KEY_BUF], len: usize },
}

impl LookupKey {
    fn as_bytes(&self) -> &[u8] {
        match self {
            LookupKey::Owned(key) => key.as_str().as_bytes(),
            LookupKey::Parts { buf, len } => buf.get(..*len).unwrap_or(&[]),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            LookupKey::Owned(key) => key.as_str(),
            // Concatenated from two `&str`s, so always UTF-8.
            LookupKey::Parts { .. } => std::str::from_utf8(self.as_bytes()).unwrap_or(""),
        }
    }
}

/// Longest key kept inline in a map entry.
const INLINE_KEY: usize = 46;

/// A key as the map holds it: up to [`INLINE_KEY`] bytes inside the entry, longer ones
/// boxed. Hashed and compared as bytes, and looked up with `key.as_bytes()`.
enum MapKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl MapKey {
    /// From the bytes of a valid key (so UTF-8).
    fn new(key: &[u8]) -> Self {
        let mut bytes = [0u8; INLINE_KEY];
        match (bytes.get_mut(..key.len()), u8::try_from(key.len())) {
            (Some(dst), Ok(len)) => {
                dst.copy_from_slice(key);
                Self::Inline { len, bytes }
            }
            _ => Self::Heap(key.into()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or(&[]),
            Self::Heap(s) => s,
        }
    }

    /// Stored keys were valid `ObjectKey`s, so this gives the same key back.
    fn to_object_key(&self) -> Option<ObjectKey> {
        ObjectKey::parse(std::str::from_utf8(self.as_bytes()).ok()?).ok()
    }
}

impl std::borrow::Borrow<[u8]> for MapKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl std::hash::Hash for MapKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for MapKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for MapKey {}

/// Writes. Each is the store's side of kinformer-core's [`Sink`] (which the store also
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
    /// [`last_sync_resource_version`](Indexer::last_sync_resource_version) (client-go's
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
    /// first, which is what a relist that changes little needs (a relist over
    /// kinformer-compact-store hands its unchanged objects over as keys). An object in
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

/// The store as the informer writes it. Errors other than a bad key arrive boxed in
/// [`kinformer_core::Error::Other`] (see the `From` impl on [`Error`]).
impl<K: MetaObject + Send + Sync + 'static> Sink<K> for ThreadSafeStore<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(ThreadSafeStore::add(self, obj)?)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(ThreadSafeStore::update(self, obj)?)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(ThreadSafeStore::delete(self, obj)?)
    }
    /// Gathers the list, then one write: unchanged objects (this store's own, listed by
    /// key) stay where they are ([`replace_keeping`](ThreadSafeStore::replace_keeping)).
    fn replace(&self, part: ListPart<K>) -> Result<(), kinformer_core::Error> {
        let Some((list, rv)) = self.lists.gather(part) else {
            return Ok(());
        };
        let (objects, unchanged) = Listed::split(list);
        if unchanged.is_empty() {
            Ok(ThreadSafeStore::replace(self, objects, &rv)?)
        } else {
            Ok(ThreadSafeStore::replace_keeping(
                self, objects, &unchanged, &rv,
            )?)
        }
    }
    /// Nothing to do for a cache (client-go's `Resync` of a plain store is a no-op too).
    fn resync(&self) -> Result<(), kinformer_core::Error> {
        Ok(())
    }
    fn bookmark(&self, resource_version: &str) -> Result<(), kinformer_core::Error> {
        set_rv(&mut self.write().rv, Some(resource_version));
        Ok(())
    }
}

/// Lookups by key, which the FIFOs also read (for tombstones on a relist and for resyncs).
/// Each takes the read lock once.
impl<K: MetaObject + Send + Sync + 'static> KnownObjects<K> for ThreadSafeStore<K> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        let state = self.read();
        let mut out = Vec::with_capacity(state.keys.len());
        out.extend(state.keys.keys().filter_map(MapKey::to_object_key));
        out
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.read()
            .keys
            .get(key.as_bytes())
            .map(|e| Arc::clone(&e.obj))
    }
    fn get_shared(&self, key: &str) -> Option<Arc<K>> {
        self.get_by_key(key)
    }
    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

impl<K: MetaObject + Send + Sync + 'static> Indexer<K> for ThreadSafeStore<K> {
    fn list(&self) -> Vec<Arc<K>> {
        let state = self.read();
        let mut out = Vec::with_capacity(state.keys.len());
        out.extend(state.objs.iter().flatten().cloned());
        out
    }

    fn last_sync_resource_version(&self) -> String {
        self.read().rv.clone()
    }

    fn len(&self) -> usize {
        self.read().keys.len()
    }

    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, Error>
    where
        K: MetaObject,
    {
        let state = self.read();
        let pos = state.position(index_name)?;
        let (Some(ix), Some(index)) = (state.indexers.get(pos), state.indices.get(pos)) else {
            return Err(Error::UnknownIndex(index_name.to_owned()));
        };
        let values = ix.func.values(obj).map_err(|source| Error::IndexFunc {
            index: index_name.to_owned(),
            key: self.key_of(obj).ok(),
            source,
        })?;
        let sets: Vec<&ValueSet> = values
            .iter()
            .filter_map(|v| index.by_value.get(v.as_str()))
            .collect();
        Ok(match sets.as_slice() {
            [] => Vec::new(),
            [one] => state.ids_to_objects(one.slots.iter(), one.slots.len()),
            many => {
                let mut ids: Vec<u32> = many.iter().flat_map(|s| s.slots.iter().copied()).collect();
                ids.sort_unstable();
                ids.dedup();
                state.ids_to_objects(ids.iter(), ids.len())
            }
        })
    }

    fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, Error> {
        let state = self.read();
        let pos = state.position(index_name)?;
        let Some(set) = state.indices.get(pos).and_then(|i| i.by_value.get(value)) else {
            return Ok(Vec::new());
        };
        let mut keys: Vec<ObjectKey> = set
            .slots
            .iter()
            .filter_map(|&id| self.key_of(state.obj(id)?).ok())
            .collect();
        drop(state);
        keys.sort_unstable();
        Ok(keys)
    }

    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        let state = self.read();
        let Ok(pos) = state.position(index_name) else {
            return Vec::new();
        };
        let mut values: Vec<String> = state
            .indices
            .get(pos)
            .map(|i| i.by_value.keys().map(|v| v.to_string()).collect())
            .unwrap_or_default();
        drop(state);
        values.sort_unstable();
        values
    }

    fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, Error> {
        let state = self.read();
        let pos = state.position(index_name)?;
        Ok(
            match state.indices.get(pos).and_then(|i| i.by_value.get(value)) {
                Some(set) => state.ids_to_objects(set.slots.iter(), set.slots.len()),
                None => Vec::new(),
            },
        )
    }

    fn get_indexers(&self) -> Indexers<K> {
        self.read()
            .indexers
            .iter()
            .map(|ix| (ix.name.clone(), ix.func.clone()))
            .collect()
    }
}

impl<K: MetaObject + Send + Sync + 'static> IndexerWriter<K> for ThreadSafeStore<K> {
    fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error> {
        let mut state = self.write();
        let conflicts: Vec<String> = indexers
            .keys()
            .filter(|name| state.indexers.iter().any(|ix| &ix.name == *name))
            .cloned()
            .collect();
        if !conflicts.is_empty() {
            return Err(Error::IndexerConflict(conflicts));
        }
        // Index every stored object before registering anything, so that a failing
        // function leaves the store as it was.
        let state = &mut *state;
        let mut built = Vec::with_capacity(indexers.len());
        for (name, func) in indexers {
            let mut by_id = Vec::new();
            by_id.resize_with(state.objs.len(), || None);
            for (key, entry) in &state.keys {
                match func.store_values(&entry.obj) {
                    Ok(v) => {
                        if let Some(slot) = by_id.get_mut(entry.id as usize) {
                            *slot = Some(v.into_owned());
                        }
                    }
                    Err(source) => {
                        return Err(Error::IndexFunc {
                            index: name,
                            key: key.to_object_key(),
                            source,
                        });
                    }
                }
            }
            built.push((NamedIndexFunc { name, func }, by_id));
        }
        let mut all: Vec<NamedIndexFunc<K>> = state
            .indexers
            .iter()
            .map(|ix| NamedIndexFunc {
                name: ix.name.clone(),
                func: ix.func.clone(),
            })
            .collect();
        for (named, by_id) in built {
            let pos = all.len();
            let mut index = Index::default();
            for (id, (v, slot)) in (0u32..).zip(by_id.iter().zip(&mut state.slot_values)) {
                if let Some(v) = v {
                    let mut cur = Values::default();
                    index.file(id, &mut cur, v);
                    slot.set(pos, cur);
                }
            }
            all.push(named);
            state.indices.push(index);
        }
        state.indexers = all.into();
        Ok(())
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
