//! The order in which queued items are handed out: FIFO by default, or by priority.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use crate::{HashMap, Item};

/// The ordering storage behind a [`WorkQueue`](crate::WorkQueue): which queued item `get`
/// hands out next.
///
/// Why a trait: client-go's `Queue` interface lets a caller replace the FIFO slice, and
/// controller-runtime's priority queue is exactly such a replacement. The work queue keeps
/// the deduplication (dirty and processing sets) itself and calls the storage only for items
/// that are queued and not being processed, so a storage never sees the same item twice:
///
/// - [`push`](QueueStorage::push) gets an item that is not in the storage;
/// - [`touch`](QueueStorage::touch) is called when an item already in the storage is added
///   again (a priority storage may raise it);
/// - [`pop`](QueueStorage::pop) returns the next item, or `None` when empty;
/// - [`len`](QueueStorage::len) counts the items held.
///
/// All four run under the queue's lock: keep them short and never call back into the queue.
/// `priority` is what [`Queue::add_with_priority`](crate::Queue::add_with_priority) was given
/// (0 for a plain `add`); an ordering that has no priorities ignores it.
pub trait QueueStorage<T>: Send {
    /// Stores `item`, which is not in the storage yet.
    fn push(&mut self, item: T, priority: i32);
    /// `item`, already in the storage, was added again with `priority`.
    fn touch(&mut self, item: &T, priority: i32);
    /// Removes and returns the next item to hand out.
    fn pop(&mut self) -> Option<T>;
    /// How many items the storage holds.
    fn len(&self) -> usize;
    /// Whether the storage holds nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T, S: QueueStorage<T> + ?Sized> QueueStorage<T> for Box<S> {
    fn push(&mut self, item: T, priority: i32) {
        (**self).push(item, priority);
    }
    fn touch(&mut self, item: &T, priority: i32) {
        (**self).touch(item, priority);
    }
    fn pop(&mut self) -> Option<T> {
        (**self).pop()
    }
    fn len(&self) -> usize {
        (**self).len()
    }
}

/// First in, first out: client-go's default. Priorities are ignored; `touch` does nothing.
#[derive(Debug, Clone)]
pub struct FifoStorage<T> {
    items: VecDeque<T>,
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
    fn push(&mut self, item: T, _priority: i32) {
        self.items.push_back(item);
    }
    fn touch(&mut self, _item: &T, _priority: i32) {}
    fn pop(&mut self) -> Option<T> {
        self.items.pop_front()
    }
    fn len(&self) -> usize {
        self.items.len()
    }
}

/// Higher priority first, FIFO within a priority (controller-runtime's priority queue order).
///
/// Adding an item that is already queued with a higher priority raises it; a lower priority
/// leaves it where it is. A raised item keeps its original place among the items of its new
/// priority (its first add time), as controller-runtime does.
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
#[derive(Debug, Clone)]
pub struct PriorityStorage<T> {
    heap: BinaryHeap<Ranked<T>>,
    current: HashMap<T, (i32, u64)>,
    next_seq: u64,
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
    /// An empty priority storage.
    pub fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
            current: HashMap::default(),
            next_seq: 0,
        }
    }
}

impl<T> Default for PriorityStorage<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item> PriorityStorage<T> {
    /// Drops heap entries that a raise left behind once they outnumber the live ones.
    fn compact(&mut self) {
        if self.heap.len() > 2 * self.current.len() + 16 {
            let current = &self.current;
            self.heap
                .retain(|ranked| current.get(&ranked.item) == Some(&(ranked.priority, ranked.seq)));
        }
    }
}

impl<T: Item> QueueStorage<T> for PriorityStorage<T> {
    fn push(&mut self, item: T, priority: i32) {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.current.insert(item.clone(), (priority, seq));
        self.heap.push(Ranked {
            priority,
            seq,
            item,
        });
    }

    fn touch(&mut self, item: &T, priority: i32) {
        let Some(rank) = self.current.get_mut(item) else {
            return;
        };
        if priority <= rank.0 {
            return;
        }
        rank.0 = priority;
        let seq = rank.1;
        self.heap.push(Ranked {
            priority,
            seq,
            item: item.clone(),
        });
        self.compact();
    }

    fn pop(&mut self) -> Option<T> {
        while let Some(ranked) = self.heap.pop() {
            if self.current.get(&ranked.item) == Some(&(ranked.priority, ranked.seq)) {
                self.current.remove(&ranked.item);
                return Some(ranked.item);
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

    #[test]
    fn priority_storage_orders_by_priority_then_fifo() {
        let mut storage = PriorityStorage::new();
        storage.push("a", 0);
        storage.push("b", 5);
        storage.push("c", 0);
        storage.push("d", 5);
        storage.push("e", -1);
        let order: Vec<_> = std::iter::from_fn(|| storage.pop()).collect();
        assert_eq!(order, ["b", "d", "a", "c", "e"]);
        assert!(storage.is_empty());
    }

    #[test]
    fn touch_raises_but_never_lowers() {
        let mut storage = PriorityStorage::new();
        storage.push("low", 0);
        storage.push("mid", 1);
        storage.touch(&"low", 2);
        storage.touch(&"mid", -5);
        assert_eq!(storage.len(), 2);
        assert_eq!(storage.pop(), Some("low"));
        assert_eq!(storage.pop(), Some("mid"));
        assert_eq!(storage.pop(), None);
    }

    #[test]
    fn raised_item_keeps_its_first_add_place() {
        let mut storage = PriorityStorage::new();
        storage.push("first", 0);
        storage.push("second", 3);
        storage.touch(&"first", 3);
        assert_eq!(storage.pop(), Some("first"));
        assert_eq!(storage.pop(), Some("second"));
    }

    #[test]
    fn many_raises_stay_compact() {
        let mut storage = PriorityStorage::new();
        storage.push(1u32, 0);
        for priority in 1..10_000 {
            storage.touch(&1, priority);
        }
        assert!(storage.heap.len() < 64);
        assert_eq!(storage.pop(), Some(1));
        assert_eq!(storage.pop(), None);
    }
}
