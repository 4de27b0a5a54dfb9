use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use kinformer_core::{Delta, ObjectKey};

/// What one pop hands to the informer.
///
/// A [`DeltaFifo`](crate::DeltaFifo) always pops [`Item::Deltas`]. An
/// [`InOrderFifo`](crate::InOrderFifo) pops single events as [`Item::Deltas`] with one
/// delta, runs of events on distinct keys as [`Item::Batch`], and in atomic mode
/// [`Item::ReplacedAll`], [`Item::SyncAll`] and [`Item::Bookmark`] on their own.
///
/// How the informer applies each (client-go's `processDeltas` and `processDeltasInBatch`):
///
/// | item | store | handlers |
/// | --- | --- | --- |
/// | `Added` / `Updated` / `Replaced` / `Sync` delta | add, or update if the key is stored | `on_add`, or `on_update(old, new)` |
/// | `Deleted` delta | delete | `on_delete` (the object or the tombstone) |
/// | `Batch` | the same per event, as one store transaction | after the transaction |
/// | `ReplacedAll` | replace the whole store in one transaction | deletes (tombstones) first, then adds/updates in list order |
/// | `SyncAll` | nothing | `on_update(obj, obj)` for every stored object |
/// | `Bookmark` | record the resource version | nothing |
#[derive(Debug)]
#[non_exhaustive]
pub enum Item<K> {
    /// One key's deltas, oldest first. Never empty.
    Deltas {
        /// The key all the deltas belong to.
        key: ObjectKey,
        /// The deltas, oldest first.
        deltas: Vec<Delta<K>>,
    },
    /// Two or more events on distinct keys, in arrival order (in-order FIFO batch pop).
    /// Distinct keys make the batch safe to apply as one store transaction.
    Batch(Vec<(ObjectKey, Delta<K>)>),
    /// Atomic mode: a full relist at `resource_version`. The objects are already
    /// transformed and keyed; store keys absent from them and from `unchanged` were deleted
    /// while nobody watched.
    ReplacedAll {
        /// The listed objects with their keys, in list order.
        objects: Vec<(ObjectKey, Arc<K>)>,
        /// Listed objects the store holds at the listed version already, by key, given
        /// instead of the objects ([`Listed::Unchanged`](kinformer_core::Listed::Unchanged)):
        /// the store keeps what it has (rule 53).
        unchanged: Vec<ObjectKey>,
        /// The resource version of the list.
        resource_version: String,
    },
    /// Atomic mode: a periodic resync of everything the store holds.
    SyncAll,
    /// Atomic mode with bookmarks: the watch reached `resource_version`. Queued in line
    /// so that the store's version never runs ahead of the events it has applied.
    Bookmark {
        /// The resource version the watch reached.
        resource_version: String,
    },
}

impl<K> Item<K> {
    /// client-go's name for the item (`"Deltas"`, `"Batch"`, `"ReplacedAll"`, `"SyncAll"`,
    /// `"Bookmark"`), for logs and conformance traces.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Deltas { .. } => "Deltas",
            Self::Batch(_) => "Batch",
            Self::ReplacedAll { .. } => "ReplacedAll",
            Self::SyncAll => "SyncAll",
            Self::Bookmark { .. } => "Bookmark",
        }
    }

    /// The keys the item carries deltas for: one for `Deltas`, one per event for `Batch`,
    /// none for the atomic items.
    pub fn keys(&self) -> impl Iterator<Item = &ObjectKey> {
        let (one, many): (Option<&ObjectKey>, &[(ObjectKey, Delta<K>)]) = match self {
            Self::Deltas { key, .. } => (Some(key), &[]),
            Self::Batch(events) => (None, events),
            _ => (None, &[]),
        };
        one.into_iter().chain(many.iter().map(|(k, _)| k))
    }

    /// How many queue entries the item took: the number of deltas of a `Deltas`, the
    /// number of events of a `Batch`, 1 for the atomic items.
    pub fn len(&self) -> usize {
        match self {
            Self::Deltas { deltas, .. } => deltas.len(),
            Self::Batch(events) => events.len(),
            _ => 1,
        }
    }

    /// Always false: a popped item carries at least one delta or one atomic entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Told when the consumer is done with a [`Popped`] item.
///
/// The FIFOs of this crate use it to learn that the informer has applied an item: only
/// then does the item count towards [`has_synced`](crate::FifoQueue::has_synced), and
/// only then do its keys stop counting as in flight (see the crate docs). A custom
/// [`FifoQueue`](crate::FifoQueue) that needs no such bookkeeping hands out items with
/// [`Popped::new`] alone.
pub trait PopDone<K>: Sync {
    /// The consumer is done with `item`; `token` is what was given to
    /// [`Popped::with_done`].
    fn pop_done(&self, item: &Item<K>, token: usize);
}

/// A popped item on loan to the consumer: read it, apply it, then drop it.
///
/// Dropping it (or calling [`Popped::finish`]) tells the queue that the item has been
/// processed. Process it before dropping, and drop it *after* releasing any lock that the
/// FIFO's [`KnownObjects`](kinformer_core::KnownObjects) view takes: the FIFO takes its
/// own lock on completion, and it holds that lock while it reads the view during
/// replace, resync and delete.
#[must_use = "dropping a Popped marks it processed; process the item first"]
pub struct Popped<'q, K> {
    item: Item<K>,
    is_in_initial_list: bool,
    done: Option<(&'q dyn PopDone<K>, usize)>,
}

impl<'q, K> Popped<'q, K> {
    /// An item as a queue hands it out. `is_in_initial_list` is true while the items of
    /// the first list have not all been popped (client-go's `isInInitialList`).
    pub fn new(item: Item<K>, is_in_initial_list: bool) -> Self {
        Self {
            item,
            is_in_initial_list,
            done: None,
        }
    }

    /// Calls `done.pop_done(item, token)` when the consumer is done with the item.
    pub fn with_done(mut self, done: &'q dyn PopDone<K>, token: usize) -> Self {
        self.done = Some((done, token));
        self
    }

    /// The popped item.
    pub fn item(&self) -> &Item<K> {
        &self.item
    }

    /// Whether the item belongs to the initial list: the informer passes it to `on_add`
    /// so that handlers can tell the initial population from later adds.
    pub fn is_in_initial_list(&self) -> bool {
        self.is_in_initial_list
    }

    /// Marks the item processed now and hands it over.
    pub fn finish(mut self) -> Item<K> {
        self.complete();
        // `SyncAll` is a free placeholder: `self` is dropped right after, completed.
        std::mem::replace(&mut self.item, Item::SyncAll)
    }

    fn complete(&mut self) {
        if let Some((done, token)) = self.done.take() {
            done.pop_done(&self.item, token);
        }
    }
}

impl<K> Deref for Popped<'_, K> {
    type Target = Item<K>;
    fn deref(&self) -> &Item<K> {
        &self.item
    }
}

impl<K> Drop for Popped<'_, K> {
    fn drop(&mut self) {
        self.complete();
    }
}

impl<K: fmt::Debug> fmt::Debug for Popped<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Popped")
            .field("item", &self.item)
            .field("is_in_initial_list", &self.is_in_initial_list)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use kinformer_core::DeltaType;

    use super::*;

    #[derive(Default)]
    struct Record(Mutex<Vec<(String, usize)>>);
    impl PopDone<u32> for Record {
        fn pop_done(&self, item: &Item<u32>, token: usize) {
            self.0
                .lock()
                .unwrap()
                .push((item.kind().to_string(), token));
        }
    }

    fn deltas(key: &str) -> Item<u32> {
        Item::Deltas {
            key: ObjectKey::parse(key).unwrap(),
            deltas: vec![Delta::new(DeltaType::Added, Arc::new(1))],
        }
    }

    #[test]
    fn dropping_a_popped_item_completes_it_once() {
        let rec = Record::default();
        {
            let p = Popped::new(deltas("a"), true).with_done(&rec, 7);
            assert!(p.is_in_initial_list());
            assert_eq!(p.keys().map(ObjectKey::as_str).collect::<Vec<_>>(), ["a"]);
        }
        let item = Popped::new(deltas("b"), false).with_done(&rec, 8).finish();
        assert_eq!(item.len(), 1);
        assert_eq!(
            *rec.0.lock().unwrap(),
            [("Deltas".to_string(), 7), ("Deltas".to_string(), 8)]
        );
    }

    #[test]
    fn keys_of_each_kind() {
        let batch: Item<u32> = Item::Batch(vec![
            (
                ObjectKey::parse("a").unwrap(),
                Delta::new(DeltaType::Updated, Arc::new(1)),
            ),
            (
                ObjectKey::parse("b").unwrap(),
                Delta::new(DeltaType::Updated, Arc::new(2)),
            ),
        ]);
        assert_eq!(batch.keys().count(), 2);
        assert_eq!(batch.len(), 2);
        assert!(!batch.is_empty());
        let all: Item<u32> = Item::ReplacedAll {
            objects: vec![],
            unchanged: vec![],
            resource_version: "1".into(),
        };
        assert_eq!(all.keys().count(), 0);
        assert_eq!(all.len(), 1);
        assert_eq!(all.kind(), "ReplacedAll");
        assert_eq!(Item::<u32>::SyncAll.kind(), "SyncAll");
    }
}
