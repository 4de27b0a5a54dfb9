//! The order in which queued items are handed out: FIFO by default, or by priority.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::ops::Deref;

use crate::{HashMap, Item};

/// The ordering storage behind a [`WorkQueue`](crate::WorkQueue): which queued item `get`
/// hands out next.
///
/// Why a trait: client-go's `Queue` interface lets a caller replace the FIFO slice, and
/// controller-runtime's priority queue is exactly such a replacement. The work queue keeps
/// the deduplication (dirty and processing sets) itself and calls the storage only for items
/// that are queued and not being processed, so a storage never sees the same item twice:
///
/// - [`push`](QueueStorage::push) gets an item that is not in the storage, wrapped in a
///   [`Queued`] (read the item through it; give it back from `pop` as it is);
/// - [`touch`](QueueStorage::touch) is called when an item already in the storage is added
///   again (a priority storage may raise it);
/// - [`pop`](QueueStorage::pop) returns the next item, or `None` when empty;
/// - [`len`](QueueStorage::len) counts the items held.
///
/// All four run under the queue's lock: keep them short and never call back into the queue.
/// `priority` is what [`Queue::add_with_priority`](crate::Queue::add_with_priority) was given
/// (0 for a plain `add`); an ordering that has no priorities ignores it.
///
/// ```
/// use kinformer_workqueue::{Queue, QueueConfig, QueueStorage, Queued, WorkQueue};
///
/// /// Last in, first out.
/// struct Lifo<T>(Vec<Queued<T>>);
///
/// impl<T: Send> QueueStorage<T> for Lifo<T> {
///     fn push(&mut self, item: Queued<T>, _priority: i32) {
///         self.0.push(item);
///     }
///     fn touch(&mut self, _item: &T, _priority: i32) {}
///     fn pop(&mut self) -> Option<Queued<T>> {
///         self.0.pop()
///     }
///     fn len(&self) -> usize {
///         self.0.len()
///     }
/// }
///
/// let queue = WorkQueue::with_storage(Lifo(Vec::new()), QueueConfig::new());
/// queue.add("a");
/// queue.add("b");
/// assert_eq!(queue.get(), Some("b"));
/// ```
pub trait QueueStorage<T>: Send {
    /// Stores `item`, which is not in the storage yet.
    fn push(&mut self, item: Queued<T>, priority: i32);
    /// `item`, already in the storage, was added again with `priority`.
    fn touch(&mut self, item: &T, priority: i32);
    /// Removes and returns the next item to hand out.
    fn pop(&mut self) -> Option<Queued<T>>;
    /// How many items the storage holds.
    fn len(&self) -> usize;
    /// Whether the storage holds nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T, S: QueueStorage<T> + ?Sized> QueueStorage<T> for Box<S> {
    fn push(&mut self, item: Queued<T>, priority: i32) {
        (**self).push(item, priority);
    }
    fn touch(&mut self, item: &T, priority: i32) {
        (**self).touch(item, priority);
    }
    fn pop(&mut self) -> Option<Queued<T>> {
        (**self).pop()
    }
    fn len(&self) -> usize {
        (**self).len()
    }
}

/// An item in a queue's ordering storage: the item, plus where the queue keeps its state.
///
/// Why not the bare item: `get` then finds the popped item's state without hashing it again
/// (a third of the hash-table work of an add+get+done). Only the queue creates one, and it is
/// not `Clone`, so a [`QueueStorage`] can hand each item back at most once; one given to a
/// queue other than the one that made it is dropped, not handed out.
///
/// Read the item with [`item`](Queued::item) or through `Deref`.
///
/// ```compile_fail
/// fn copyable<C: Clone>() {}
/// copyable::<kinformer_workqueue::Queued<u32>>(); // a storage cannot duplicate an item
/// ```
pub struct Queued<T> {
    item: T,
    /// The item's index in the queue's state table.
    slot: usize,
    /// Which queue created it.
    queue: u64,
}

impl<T> Queued<T> {
    pub(crate) fn new(item: T, slot: usize, queue: u64) -> Self {
        Self { item, slot, queue }
    }

    pub(crate) fn into_parts(self) -> (T, usize, u64) {
        (self.item, self.slot, self.queue)
    }

    /// The queued item.
    pub fn item(&self) -> &T {
        &self.item
    }
}

impl<T> Deref for Queued<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.item
    }
}

impl<T: fmt::Debug> fmt::Debug for Queued<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Queued").field(&self.item).finish()
    }
}

/// First in, first out: client-go's default. Priorities are ignored; `touch` does nothing.
#[derive(Debug)]
pub struct FifoStorage<T> {
    items: VecDeque<Queued<T>>,
}

impl<T> FifoStorage<T> {
    /// An empty FIFO.
    pub fn new() -> Self {
        Self {
            items: VecDeque::new(),
        }
    }
}

impl<T> Default for FifoStorage<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send> QueueStorage<T> for FifoStorage<T> {
    fn push(&mut self, item: Queued<T>, _priority: i32) {
        self.items.push_back(item);
    }
    fn touch(&mut self, _item: &T, _priority: i32) {}
    fn pop(&mut self) -> Option<Queued<T>> {
        self.items.pop_front()
    }
    fn len(&self) -> usize {
        self.items.len()
    }
}

/// Higher priority first, FIFO within a priority: the order of controller-runtime's priority
/// queue, for a base [`WorkQueue`](crate::WorkQueue) alone. For a controller's queue (delays
/// and rate-limited retries with a priority, the depth metric by priority) use
/// [`PriorityWorkQueue`](crate::PriorityWorkQueue).
///
/// Adding an item that is already queued with a higher priority raises it; a lower priority
/// leaves it where it is. A raised item goes behind the items already queued at its new
/// priority (it became ready at that priority last), as in controller-runtime v0.23.
///
/// **No starvation** ([`fair_every`](Self::fair_every)): strict priority order lets a steady
/// stream of changes at priority 0 hold the items of an initial list or a resync (at
/// [`LOW_PRIORITY`](crate::LOW_PRIORITY)) back for ever (controller-runtime #3496). With
/// `fair_every(n)`, every `n`-th pop takes the item queued longest instead, whatever its
/// priority, so the `k`-th oldest item is handed out within `k × n` pops; the others keep
/// the priority order. [`PriorityWorkQueue`](crate::PriorityWorkQueue) uses
/// [`DEFAULT_FAIR_EVERY`]; [`new`](Self::new) never (strict order).
///
/// ```
/// use kinformer_workqueue::{PriorityStorage, Queue, QueueConfig, WorkQueue};
///
/// let queue = WorkQueue::with_storage(PriorityStorage::new(), QueueConfig::new());
/// queue.add("background");
/// queue.add_with_priority("urgent", 10);
/// assert_eq!(queue.get(), Some("urgent"));
/// assert_eq!(queue.get(), Some("background"));
/// ```
#[derive(Debug)]
pub struct PriorityStorage<T> {
    /// Every rank an item was given; a raise leaves the old one behind, skipped by `pop`.
    heap: BinaryHeap<Ranked<T>>,
    /// Each stored item's live rank, when it was queued, and the item itself.
    current: HashMap<T, Entry<T>>,
    next_seq: u64,
    /// Every `fair_every`-th pop takes the oldest item; 0: never.
    fair_every: u32,
    /// Pops since the last one that took the oldest item.
    pops: u32,
    /// The items in the order they were queued, for the fair pops (only when `fair_every`
    /// is set); entries of items gone since, or queued again, are skipped.
    by_age: VecDeque<(u64, T)>,
}

/// How often a [`PriorityWorkQueue`](crate::PriorityWorkQueue) hands out the item queued
/// longest whatever its priority: one pop in 10 (see [`PriorityStorage::fair_every`]).
pub const DEFAULT_FAIR_EVERY: u32 = 10;

#[derive(Debug)]
struct Entry<T> {
    priority: i32,
    seq: u64,
    /// The sequence number of the push that queued it (a raise keeps it).
    queued_at: u64,
    queued: Queued<T>,
}

#[derive(Debug, Clone)]
struct Ranked<T> {
    priority: i32,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Ranked<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<T> Eq for Ranked<T> {}
impl<T> PartialOrd for Ranked<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Ranked<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        // A max-heap: higher priority first, then the earlier sequence number.
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl<T> PriorityStorage<T> {
    /// An empty priority storage, in strict priority order.
    pub fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
            current: HashMap::default(),
            next_seq: 0,
            fair_every: 0,
            pops: 0,
            by_age: VecDeque::new(),
        }
    }

    /// Every `n`-th pop hands out the item queued longest, whatever its priority (0: never):
    /// see the type's docs, "No starvation".
    ///
    /// ```
    /// use kinformer_workqueue::{LOW_PRIORITY, PriorityStorage, Queue, QueueConfig, WorkQueue};
    ///
    /// let queue = WorkQueue::with_storage(PriorityStorage::new().fair_every(3), QueueConfig::new());
    /// queue.add_with_priority("listed", LOW_PRIORITY);
    /// // A steady stream of changes: without fairness "listed" would wait for ever.
    /// let mut handed_out = Vec::new();
    /// for i in 0..3 {
    ///     queue.add(["a", "b", "c"][i]);
    ///     let item = queue.get().unwrap();
    ///     handed_out.push(item);
    ///     queue.done(&item);
    /// }
    /// assert_eq!(handed_out, ["a", "b", "listed"]);
    /// ```
    #[must_use]
    pub fn fair_every(mut self, n: u32) -> Self {
        self.fair_every = n;
        self
    }
}

impl<T> Default for PriorityStorage<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item> PriorityStorage<T> {
    /// Drops heap and age entries that raises and pops left behind once they outnumber the
    /// live ones.
    fn compact(&mut self) {
        let current = &self.current;
        if self.heap.len() > 2 * current.len() + 16 {
            self.heap.retain(|ranked| {
                current
                    .get(&ranked.item)
                    .is_some_and(|live| (live.priority, live.seq) == (ranked.priority, ranked.seq))
            });
        }
        if self.by_age.len() > 2 * current.len() + 16 {
            self.by_age
                .retain(|(at, item)| current.get(item).is_some_and(|live| live.queued_at == *at));
        }
    }

    /// The item queued longest, if this pop (of a storage holding something) is a fair one.
    fn pop_oldest(&mut self) -> Option<Queued<T>> {
        if self.fair_every == 0 {
            return None;
        }
        self.pops += 1;
        if self.pops < self.fair_every {
            return None;
        }
        self.pops = 0;
        while let Some((at, item)) = self.by_age.pop_front() {
            if self
                .current
                .get(&item)
                .is_some_and(|live| live.queued_at == at)
            {
                return self.current.remove(&item).map(|entry| entry.queued);
            }
        }
        None
    }
}

impl<T: Item> QueueStorage<T> for PriorityStorage<T> {
    fn push(&mut self, item: Queued<T>, priority: i32) {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.heap.push(Ranked {
            priority,
            seq,
            item: item.item().clone(),
        });
        if self.fair_every > 0 {
            self.by_age.push_back((seq, item.item().clone()));
        }
        let entry = Entry {
            priority,
            seq,
            queued_at: seq,
            queued: item,
        };
        self.current.insert(entry.queued.item().clone(), entry);
        self.compact();
    }

    fn touch(&mut self, item: &T, priority: i32) {
        let Some(entry) = self.current.get_mut(item) else {
            return;
        };
        if priority <= entry.priority {
            return;
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        (entry.priority, entry.seq) = (priority, seq);
        self.heap.push(Ranked {
            priority,
            seq,
            item: item.clone(),
        });
        self.compact();
    }

    fn pop(&mut self) -> Option<Queued<T>> {
        if self.current.is_empty() {
            // An empty pop is no pop: it does not count towards the fair one.
            return None;
        }
        if let Some(oldest) = self.pop_oldest() {
            return Some(oldest);
        }
        while let Some(ranked) = self.heap.pop() {
            let live = self
                .current
                .get(&ranked.item)
                .is_some_and(|live| (live.priority, live.seq) == (ranked.priority, ranked.seq));
            if live {
                return self.current.remove(&ranked.item).map(|entry| entry.queued);
            }
        }
        None
    }

    fn len(&self) -> usize {
        self.current.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stands in for the queue: wraps items as it would.
    trait PushItem<T> {
        fn push_item(&mut self, item: T, priority: i32);
        fn pop_item(&mut self) -> Option<T>;
    }

    impl<T, S: QueueStorage<T>> PushItem<T> for S {
        fn push_item(&mut self, item: T, priority: i32) {
            self.push(Queued::new(item, 0, 0), priority);
        }
        fn pop_item(&mut self) -> Option<T> {
            self.pop().map(|queued| queued.into_parts().0)
        }
    }

    #[test]
    fn priority_storage_orders_by_priority_then_fifo() {
        let mut storage = PriorityStorage::new();
        storage.push_item("a", 0);
        storage.push_item("b", 5);
        storage.push_item("c", 0);
        storage.push_item("d", 5);
        storage.push_item("e", -1);
        let order: Vec<_> = std::iter::from_fn(|| storage.pop_item()).collect();
        assert_eq!(order, ["b", "d", "a", "c", "e"]);
        assert!(storage.is_empty());
    }

    #[test]
    fn touch_raises_but_never_lowers() {
        let mut storage = PriorityStorage::new();
        storage.push_item("low", 0);
        storage.push_item("mid", 1);
        storage.touch(&"low", 2);
        storage.touch(&"mid", -5);
        assert_eq!(storage.len(), 2);
        assert_eq!(storage.pop_item(), Some("low"));
        assert_eq!(storage.pop_item(), Some("mid"));
        assert_eq!(storage.pop_item(), None);
    }

    #[test]
    fn a_raised_item_goes_behind_those_already_at_its_new_priority() {
        let mut storage = PriorityStorage::new();
        storage.push_item("first", 0);
        storage.push_item("second", 3);
        storage.touch(&"first", 3);
        storage.push_item("third", 3);
        assert_eq!(storage.pop_item(), Some("second"));
        assert_eq!(storage.pop_item(), Some("first"));
        assert_eq!(storage.pop_item(), Some("third"));
    }

    #[test]
    fn many_raises_stay_compact() {
        let mut storage = PriorityStorage::new();
        storage.push_item(1u32, 0);
        for priority in 1..10_000 {
            storage.touch(&1, priority);
        }
        assert!(storage.heap.len() < 64);
        assert_eq!(storage.pop_item(), Some(1));
        assert_eq!(storage.pop_item(), None);
    }
}
