//! The decoded objects the store hands out again without decoding: a small fixed-size
//! table, one slot per hash of the entry, each under its own lock.
//!
//! A slot holds the stored entry it was decoded from, so it can never hand out an older
//! version: a write stores a new entry (a new allocation), which the slot's entry is then
//! not. A slot's entry keeps that version's encoding alive until the slot is reused, which
//! bounds the cost at the table's size.

use std::sync::{Arc, Mutex, PoisonError};

use crate::view::Cached;

type Slot<K> = Mutex<Option<(Arc<Cached<K>>, Arc<K>)>>;

pub(crate) struct DecodeCache<K> {
    slots: Box<[Slot<K>]>,
}

impl<K> DecodeCache<K> {
    /// A table of `size` slots (none: no caching).
    pub(crate) fn new(size: usize) -> Self {
        Self {
            slots: (0..size).map(|_| Mutex::new(None)).collect(),
        }
    }

    fn slot(&self, entry: &Arc<Cached<K>>) -> Option<&Slot<K>> {
        if self.slots.is_empty() {
            return None;
        }
        // Allocations are at least 8-byte aligned; a multiplicative hash spreads the rest.
        let h = (Arc::as_ptr(entry) as usize >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as usize);
        let i = (h >> 16) % self.slots.len();
        self.slots.get(i)
    }

    /// The object decoded from this very entry, if the table still has it.
    pub(crate) fn get(&self, entry: &Arc<Cached<K>>) -> Option<Arc<K>> {
        let slot = self
            .slot(entry)?
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match &*slot {
            Some((e, obj)) if Arc::ptr_eq(e, entry) => Some(Arc::clone(obj)),
            _ => None,
        }
    }

    /// Remembers `obj` as what `entry` decodes to.
    pub(crate) fn put(&self, entry: Arc<Cached<K>>, obj: Arc<K>) {
        if let Some(slot) = self.slot(&entry) {
            let old = slot
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .replace((entry, obj));
            // Dropped after the slot's lock is released.
            drop(old);
        }
    }

    /// How many slots the table has.
    pub(crate) fn size(&self) -> usize {
        self.slots.len()
    }
}
