//! What the store's lock guards: the objects by key and by slot, and every index.

use std::collections::{HashMap, HashSet};
use std::mem;
use std::sync::Arc;

use kinformer_core::{MetaObject, ObjectKey};

use crate::hash::BuildIdHasher;
use crate::index::IndexValues;
use crate::{Error, IndexFunc};

use super::keys::{LookupKey, MapKey};

/// The hasher for keys and indexed values, which come from the API server: foldhash's
/// quality variant with a random seed per map (as the workqueue's and the FIFOs' maps),
/// so that object names chosen to collide under one seed do not collide under another.
/// std's SipHash costs about four times as much on a 20-byte key.
pub(super) type StrHash = foldhash::quality::RandomState;

/// Everything behind the lock.
pub(super) struct State<K> {
    /// key → slot id and object. The object is here as well as in `objs` so that a `get`
    /// reads one map entry, and keys up to 46 bytes sit in the entry itself, so that
    /// comparing them follows no pointer (a 64-byte entry: one or two cache lines).
    pub(super) keys: HashMap<MapKey, Entry<K>, StrHash>,
    /// The objects by slot id (`None` for a free slot). Index sets hold slot ids, so a
    /// `by_index` reaches each object by position in this small, dense array instead of by
    /// a second key lookup. Eight bytes a slot: it stays in cache where a map would not.
    pub(super) objs: Vec<Option<Arc<K>>>,
    /// The values each slot is filed under, by slot id then index position, kept so that
    /// an update or delete finds the old values without calling an index function on the
    /// old object (which could fail, and would read cold memory).
    pub(super) slot_values: Vec<SlotValues>,
    /// Free slot ids, reused last in, first out.
    pub(super) free: Vec<u32>,
    /// The index functions, by position. Shared so that `replace` can index outside the
    /// lock and then check that no indexer was added meanwhile.
    pub(super) indexers: Arc<[NamedIndexFunc<K>]>,
    /// One per index function, same positions.
    pub(super) indices: Vec<Index>,
    /// The last resource version seen.
    pub(super) rv: String,
}

pub(super) struct Entry<K> {
    pub(super) id: u32,
    pub(super) obj: Arc<K>,
}

/// Per-slot values of every index: two inline (most stores have one or two indices),
/// more on the heap.
pub(super) enum SlotValues {
    Inline([Values; 2]),
    Heap(Box<[Values]>),
}

impl Default for SlotValues {
    fn default() -> Self {
        Self::Inline(Default::default())
    }
}

impl SlotValues {
    pub(super) fn with_len(n: usize) -> Self {
        if n <= 2 {
            Self::default()
        } else {
            Self::Heap((0..n).map(|_| Values::default()).collect())
        }
    }

    pub(super) fn get_mut(&mut self, i: usize) -> Option<&mut Values> {
        match self {
            Self::Inline(vs) => vs.get_mut(i),
            Self::Heap(vs) => vs.get_mut(i),
        }
    }

    pub(super) fn set(&mut self, i: usize, v: Values) {
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

    pub(super) fn as_slice(&self) -> &[Values] {
        match self {
            Self::Inline(vs) => vs,
            Self::Heap(vs) => vs,
        }
    }
}

pub(super) struct NamedIndexFunc<K> {
    pub(super) name: String,
    pub(super) func: IndexFunc<K>,
}

/// One index: value → the slots filed under it.
pub(super) struct Index {
    pub(super) by_value: HashMap<Arc<str>, ValueSet, StrHash>,
    /// The values of slots filed under more than one value (rare: most index functions
    /// return one), so that the common case fits 16 bytes a slot.
    pub(super) multi: HashMap<u32, Box<[Arc<str>]>, BuildIdHasher>,
    /// The marker a slot's `Values` holds when its values are in `multi`: an allocation
    /// of its own, recognised by address.
    pub(super) many: Arc<str>,
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

pub(super) struct ValueSet {
    /// The same allocation as the map key, handed to the slots' `Values`.
    pub(super) value: Arc<str>,
    pub(super) slots: HashSet<u32, BuildIdHasher>,
}

/// What one slot is filed under in one index: nothing, one value (shared with the index
/// map's key), or the index's `many` marker.
#[derive(Default)]
pub(super) struct Values(pub(super) Option<Arc<str>>);

impl Index {
    /// The values slot `id` is filed under, given its `cur` marker.
    pub(super) fn values_of<'a>(&'a self, id: u32, cur: &'a Values) -> &'a [Arc<str>] {
        match &cur.0 {
            None => &[],
            Some(v) if Arc::ptr_eq(v, &self.many) => self.multi.get(&id).map_or(&[], |vs| &vs[..]),
            Some(v) => std::slice::from_ref(v),
        }
    }

    pub(super) fn same_as(&self, id: u32, cur: &Values, new: &IndexValues<'_>) -> bool {
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
    pub(super) fn file(&mut self, id: u32, cur: &mut Values, new: &IndexValues<'_>) {
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
    pub(super) fn unfile(&mut self, id: u32, old: &Values) {
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

    pub(super) fn unfile_value(&mut self, id: u32, value: &str) {
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
    pub(super) fn insert(&mut self, id: u32, value: &str) -> Arc<str> {
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
pub(super) const INLINE_INDICES: usize = 4;

impl<K: MetaObject> State<K> {
    pub(super) fn new(indexers: Arc<[NamedIndexFunc<K>]>) -> Self {
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

    pub(super) fn position(&self, index_name: &str) -> Result<usize, Error> {
        self.indexers
            .iter()
            .position(|ix| ix.name == index_name)
            .ok_or_else(|| Error::UnknownIndex(index_name.to_owned()))
    }

    pub(super) fn obj(&self, id: u32) -> Option<&Arc<K>> {
        self.objs.get(id as usize)?.as_ref()
    }

    /// Stores `obj` under `key`; returns the object it replaced. Computes every index
    /// value before changing anything, so an index function error (or panic) leaves `self`
    /// as it was.
    /// Runs every index function on `obj` as [`put`](Self::put) would, changing nothing:
    /// whether a put of it would fail.
    pub(super) fn check(&self, key: &ObjectKey, obj: &K) -> Result<(), Error> {
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

    pub(super) fn put(&mut self, key: LookupKey, obj: &Arc<K>) -> Result<Option<Arc<K>>, Error> {
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
    pub(super) fn remove(&mut self, key: &str) -> Option<Arc<K>> {
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

    pub(super) fn ids_to_objects<'a>(
        &self,
        ids: impl Iterator<Item = &'a u32>,
        len: usize,
    ) -> Vec<Arc<K>> {
        let mut out = Vec::with_capacity(len);
        out.extend(ids.filter_map(|&id| self.obj(id).cloned()));
        out
    }
}

/// Files slot `id` under its new `values` in every index.
pub(super) fn file_all(
    indices: &mut [Index],
    id: u32,
    cur: &mut SlotValues,
    values: &[IndexValues<'_>],
) {
    for (i, (index, v)) in indices.iter_mut().zip(values).enumerate() {
        if let Some(cur) = cur.get_mut(i) {
            index.file(id, cur, v);
        }
    }
}
