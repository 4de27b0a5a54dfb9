//! The temporary store of a streaming list: its objects until they reach the sink.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use kinformer_core::{Listed, ObjectKey};

/// The objects of a streaming list until they are handed to the sink (a part at a time),
/// in arrival order.
pub(super) struct TempStore<K> {
    /// foldhash, seeded per map, as the FIFOs' and the store's maps of the same keys.
    index: HashMap<ObjectKey, usize, foldhash::fast::RandomState>,
    items: Vec<Option<Listed<K>>>,
    /// Keys of the objects handed over in parts ([`TempStore::take_part`]).
    handed: HashSet<ObjectKey, foldhash::fast::RandomState>,
}

impl<K> Default for TempStore<K> {
    fn default() -> Self {
        Self {
            index: HashMap::default(),
            items: Vec::new(),
            handed: HashSet::default(),
        }
    }
}

impl<K> TempStore<K> {
    /// Keeps `obj`, over an earlier version of it; `false` (and nothing kept) when a part
    /// handed it over already.
    pub(super) fn put(
        &mut self,
        obj: Listed<K>,
        key_of: impl Fn(&K) -> Result<ObjectKey, kinformer_core::Error>,
    ) -> Result<bool, kinformer_core::Error> {
        let key = match &obj {
            Listed::Object(o) => key_of(o)?,
            Listed::Unchanged(u) => u.key().clone(),
        };
        if self.handed.contains(&key) {
            return Ok(false);
        }
        match self.index.entry(key) {
            Entry::Occupied(e) => {
                if let Some(slot) = self.items.get_mut(*e.get()) {
                    *slot = Some(obj);
                }
            }
            Entry::Vacant(e) => {
                e.insert(self.items.len());
                self.items.push(Some(obj));
            }
        }
        Ok(true)
    }

    /// Forgets `obj`; `false` when a part handed it over already.
    pub(super) fn remove(
        &mut self,
        obj: &K,
        key_of: impl Fn(&K) -> Result<ObjectKey, kinformer_core::Error>,
    ) -> bool {
        match key_of(obj) {
            Ok(key) if self.handed.contains(&key) => false,
            Ok(key) => {
                self.remove_key(&key);
                true
            }
            Err(_) => true,
        }
    }

    pub(super) fn remove_key(&mut self, key: &ObjectKey) {
        if let Some(i) = self.index.remove(key)
            && let Some(slot) = self.items.get_mut(i)
        {
            *slot = None;
        }
    }

    pub(super) fn was_handed(&self, key: &ObjectKey) -> bool {
        self.handed.contains(key)
    }

    /// Whether a part was handed over.
    pub(super) fn handed_any(&self) -> bool {
        !self.handed.is_empty()
    }

    /// How many objects it holds.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// Everything it holds, to hand over as a part of the list; their keys are remembered.
    pub(super) fn take_part(&mut self) -> Vec<Listed<K>> {
        self.handed.extend(self.index.drain().map(|(k, _)| k));
        std::mem::take(&mut self.items)
            .into_iter()
            .flatten()
            .collect()
    }

    pub(super) fn into_items(self) -> Vec<Listed<K>> {
        self.items.into_iter().flatten().collect()
    }
}
