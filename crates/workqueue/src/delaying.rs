//! The delaying layer: `add_after`, a heap of waiting items, and what fires them.

use std::collections::hash_map::Entry;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};

use crate::HashMap;
use crate::metrics::Retries;
use crate::{Clock, GetFuture, Item, Queue, QueueConfig, QueueStats, TimeListener, WorkQueue};

/// A [`Queue`] that can add an item later: client-go's `TypedDelayingInterface`.
///
/// Why a trait: the rate-limited layer needs only "add this after that long" from the layer
/// beneath it, so any delaying queue (a fake one in a test, one on another timer) can sit
/// there. [`DelayingWorkQueue`] is the default.
pub trait DelayingQueue<T>: Queue<T> {
    /// Adds `item` once `delay` has passed. A zero delay is a plain [`add`](Queue::add).
    /// If the item is already waiting, the earlier of the two ready times is kept. Waiting
    /// items are not counted by [`len`](Queue::len) until they fire, and fire in ready-time
    /// order. Ignored once the queue is shutting down. A delay too large to represent means
    /// "never" (the item waits until shutdown).
    ///
    /// Items due at the same instant have no promised order here;
    /// [`DelayingWorkQueue`] gives them client-go's (that of its heap).
    fn add_after(&self, item: T, delay: Duration);

    /// [`add_after`](DelayingQueue::add_after) with a priority for when the item is ready
    /// (controller-runtime's `AddWithOpts{After, Priority}`): see
    /// [`PriorityWorkQueue`](crate::PriorityWorkQueue); [`DelayingWorkQueue`] keeps it with
    /// the waiting item and adds the item at it when it is ready. Required (see
    /// [`Queue::add_with_priority`]); a queue without priorities calls `add_after`.
    fn add_after_with_priority(&self, item: T, delay: Duration, priority: i32);
}

macro_rules! forward_delaying {
    ($($ty:ty),*) => {$(
        impl<T, Q: DelayingQueue<T> + ?Sized> DelayingQueue<T> for $ty {
            fn add_after(&self, item: T, delay: Duration) {
                (**self).add_after(item, delay)
            }
            fn add_after_with_priority(&self, item: T, delay: Duration, priority: i32) {
                (**self).add_after_with_priority(item, delay, priority)
            }
        }
    )*};
}

forward_delaying!(Arc<Q>, Box<Q>, &Q);

/// How long the timer thread sleeps at most, even with nothing due (client-go's `maxWait`
/// heartbeat): insurance against a clock that jumps, and the bound on how late it notices a
/// shutdown made on the queue beneath it directly.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(10);

/// The default [`DelayingQueue`]: wraps any [`Queue`] (by default a [`WorkQueue`]).
///
/// Waiting items sit in a min-heap by ready time under their own mutex (never the queue's),
/// with a map from item to its heap entry for the earliest-wins rule: a lowered ready time
/// moves the entry up in place. `add_after` takes that mutex for one map lookup and one heap
/// push (or move), and wakes the timer only when the item became the earliest.
///
/// The heap is client-go's to the step (Go's `container/heap`, as client-go's
/// `waitForPriorityQueue` uses it, ordered by ready time alone), so items due at the same
/// instant fire in the order client-go fires them. That order is not insertion order (six
/// items added with one delay fire as 1, 6, 5, 4, 3, 2) and follows no simpler rule: it
/// depends on the heap's shape, i.e. on every add and firing before. Do not build on it.
///
/// What fires due items depends on the clock:
///
/// - Real clock: one timer thread per queue sleeps on a crossbeam channel with
///   `recv_timeout(until the earliest ready time, at most 10 s)`. A thread (not a tokio
///   timer) keeps the crate free of any runtime; a bounded(1) channel is the doorbell
///   because a full channel means "already rung" (no duplicate wake-ups), and because the
///   thread sees the channel disconnect when the last handle of the queue is dropped, so it
///   never outlives the queue. The thread holds only a `Weak` reference in between.
/// - [`FakeClock`](crate::FakeClock) (any clock whose [`Clock::subscribe`] accepts): no
///   thread. The queue subscribes to the clock, and every `step`/`set` fires due items
///   synchronously before returning, in ready-time order. [`fire_due`](Self::fire_due) does
///   the same on demand.
///
/// Firing takes a separate "firing" mutex, pops every due item under the heap's mutex, then
/// adds them to the queue beneath with no delaying lock held except the firing one, so two
/// concurrent firings cannot interleave their batches.
pub struct DelayingWorkQueue<T: Item, Q = WorkQueue<T>> {
    shared: Arc<DelayShared<T, Q>>,
}

impl<T: Item, Q> Clone for DelayingWorkQueue<T, Q> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T: Item, Q: Queue<T> + fmt::Debug> fmt::Debug for DelayingWorkQueue<T, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayingWorkQueue")
            .field("queue", &self.shared.queue)
            .field("waiting", &self.shared.waiting().index.len())
            .finish_non_exhaustive()
    }
}

struct DelayShared<T, Q> {
    queue: Q,
    clock: Arc<dyn Clock>,
    waiting: Mutex<Waiting<T>>,
    /// Serializes firings so that batches reach the queue in ready-time order.
    firing: Mutex<()>,
    /// Rings the timer thread; `None` when the clock drives firing.
    doorbell: Option<Sender<()>>,
    /// Whether the timer thread runs; if not (clock-driven, or the thread could not start),
    /// `add_after` fires an item that is already due itself.
    has_timer: AtomicBool,
    stopped: AtomicBool,
    retries: Retries,
    /// The name in `wrap`'s config, for [`QueueStats`] when the queue beneath has none.
    name: String,
}

/// When a waiting item becomes ready. `Never` sorts after every instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Deadline {
    At(Instant),
    Never,
}

/// The waiting items: client-go's `waitForPriorityQueue` (a `container/heap` min-heap by
/// ready time, each entry knowing its heap index) plus its `waitingEntryByData` map.
///
/// The heap runs Go's `container/heap` algorithm step for step: the same comparisons (strict
/// "earlier than", nothing else, so no tie-breaker), the same sift-up and sift-down, `Pop`
/// moving the last entry to the top and sifting it down, and `Fix` for an entry whose ready
/// time was lowered. The shape of the heap, and so the order in which items due at the same
/// instant fire, is therefore client-go's. (A tie-breaker such as insertion order would be
/// more predictable, but it would be an order client-go's users never see.)
///
/// Where Go swaps pointers and updates each entry's `index` field, the heap here holds
/// `Copy` entries (ready time, slot) and moves them into a hole, as std's `BinaryHeap`
/// does: the same comparisons, fewer writes. Items live in `slots`, which never move, so
/// the map from item to slot is hashed once per insert and once per pop, never per sift
/// step; each slot records its entry's current heap position for `Fix`.
struct Waiting<T> {
    heap: Vec<HeapEntry>,
    slots: Vec<Slot<T>>,
    /// Slots freed by a pop, reused before `slots` grows.
    free: Vec<usize>,
    /// Each waiting item's slot.
    index: HashMap<T, usize>,
}

#[derive(Clone, Copy)]
struct HeapEntry {
    deadline: Deadline,
    slot: usize,
}

struct Slot<T> {
    /// `None` once popped (the slot is then on the free list).
    item: Option<T>,
    /// The priority the item is added at when it is ready: the highest it was added with
    /// while it waited (controller-runtime's priority queue keeps the highest too).
    priority: i32,
    /// Where the slot's entry is in `heap`.
    pos: usize,
}

impl<T: Item> Waiting<T> {
    fn new() -> Self {
        Self {
            heap: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            index: HashMap::default(),
        }
    }

    /// client-go's `insert`: a new item is pushed; a waiting one moves earlier if
    /// `deadline` is before its ready time (and is fixed in place), else nothing changes.
    /// The waiting item keeps the higher of its priority and `priority`.
    /// Returns whether the item is now at the top of the heap (the earliest to fire).
    fn insert(&mut self, item: T, deadline: Deadline, priority: i32) -> bool {
        let pos = match self.index.entry(item) {
            Entry::Occupied(waiting) => {
                let slot = &mut self.slots[*waiting.get()];
                slot.priority = slot.priority.max(priority);
                let pos = slot.pos;
                if self.heap[pos].deadline <= deadline {
                    return false;
                }
                self.heap[pos].deadline = deadline;
                self.fix(pos)
            }
            Entry::Vacant(new) => {
                let item = Some(new.key().clone());
                let slot = match self.free.pop() {
                    Some(slot) => {
                        self.slots[slot].item = item;
                        self.slots[slot].priority = priority;
                        slot
                    }
                    None => {
                        self.slots.push(Slot {
                            item,
                            priority,
                            pos: 0,
                        });
                        self.slots.len() - 1
                    }
                };
                new.insert(slot);
                self.heap.push(HeapEntry { deadline, slot });
                self.up(self.heap.len() - 1)
            }
        };
        pos == 0
    }

    /// Pops every item due at `now` (ready time not after it), in heap order: client-go's
    /// waiting loop, `heap.Pop` while the top's ready time is not after now.
    fn pop_due(&mut self, now: Instant, due: &mut Vec<(T, i32)>) {
        while self
            .heap
            .first()
            .is_some_and(|top| top.deadline <= Deadline::At(now))
        {
            // Go's `heap.Pop`: swap the top with the last entry, sift the new top down over
            // the others, remove the old top. `swap_remove(0)` is the swap and the removal.
            let top = self.heap.swap_remove(0);
            if !self.heap.is_empty() {
                self.down(0);
            }
            let slot = &mut self.slots[top.slot];
            if let Some(item) = slot.item.take() {
                self.index.remove(&item);
                due.push((item, slot.priority));
            }
            self.free.push(top.slot);
        }
    }

    /// The earliest ready time.
    fn next_deadline(&self) -> Option<Deadline> {
        self.heap.first().map(|top| top.deadline)
    }

    fn clear(&mut self) {
        self.heap.clear();
        self.slots.clear();
        self.free.clear();
        self.index.clear();
    }

    /// Places `entry` at heap position `pos` and tells its slot.
    fn place(&mut self, pos: usize, entry: HeapEntry) {
        self.heap[pos] = entry;
        self.slots[entry.slot].pos = pos;
    }

    /// Go's `up`: moves the entry at `pos` towards the top while it is strictly earlier
    /// than its parent. Returns where it ended.
    fn up(&mut self, mut pos: usize) -> usize {
        let entry = self.heap[pos];
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if entry.deadline >= self.heap[parent].deadline {
                break;
            }
            self.place(pos, self.heap[parent]);
            pos = parent;
        }
        self.place(pos, entry);
        pos
    }

    /// Go's `down` over the whole heap: moves the entry at `start` below the earlier of its
    /// children (the right one only when strictly earlier than the left) while that child is
    /// strictly earlier. Returns where it ended.
    fn down(&mut self, start: usize) -> usize {
        let entry = self.heap[start];
        let len = self.heap.len();
        let mut pos = start;
        loop {
            let left = 2 * pos + 1;
            if left >= len {
                break;
            }
            let right = left + 1;
            let child = if right < len && self.heap[right].deadline < self.heap[left].deadline {
                right
            } else {
                left
            };
            if self.heap[child].deadline >= entry.deadline {
                break;
            }
            self.place(pos, self.heap[child]);
            pos = child;
        }
        self.place(pos, entry);
        pos
    }

    /// Go's `heap.Fix`: down, and up only if down did not move the entry.
    fn fix(&mut self, pos: usize) -> usize {
        match self.down(pos) {
            moved if moved > pos => moved,
            _ => self.up(pos),
        }
    }
}

impl<T: Item> DelayingWorkQueue<T> {
    /// An unnamed delaying queue over a new [`WorkQueue`], on the real clock.
    pub fn new() -> Self {
        Self::with_config(QueueConfig::new())
    }

    /// A delaying queue over a new [`WorkQueue`] built from the same `config`.
    pub fn with_config(config: QueueConfig) -> Self {
        Self::wrap(WorkQueue::with_config(config.clone()), config)
    }
}

impl<T: Item> Default for DelayingWorkQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item, Q: Queue<T> + 'static> DelayingWorkQueue<T, Q> {
    /// Puts the delaying layer over `queue`. `config` gives the clock that times delays and
    /// the name and provider of the `retries` metric; `queue` keeps its own configuration.
    pub fn wrap(queue: Q, config: QueueConfig) -> Self {
        let retries = Retries::new(config.metrics.as_ref(), &config.name);
        let name = config.name;
        let clock = config.clock;
        let mut rings = None;
        let shared = Arc::new_cyclic(|weak: &Weak<DelayShared<T, Q>>| {
            let clock_driven = clock.subscribe(weak.clone() as Weak<dyn TimeListener>);
            let doorbell = (!clock_driven).then(|| {
                let (doorbell, receiver) = crossbeam_channel::bounded(1);
                rings = Some(receiver);
                doorbell
            });
            DelayShared {
                queue,
                clock: clock.clone(),
                waiting: Mutex::new(Waiting::new()),
                firing: Mutex::new(()),
                doorbell,
                has_timer: AtomicBool::new(false),
                stopped: AtomicBool::new(false),
                retries,
                name: name.clone(),
            }
        });
        if let Some(rings) = rings
            && spawn_timer(Arc::downgrade(&shared), rings, &name)
        {
            shared.has_timer.store(true, AtomicOrdering::Release);
        }
        Self { shared }
    }

    /// The queue beneath this layer.
    pub fn inner(&self) -> &Q {
        &self.shared.queue
    }

    /// How many items are waiting for their ready time (not yet in the queue).
    pub fn waiting_len(&self) -> usize {
        self.shared.waiting().index.len()
    }

    /// Moves every waiting item whose ready time has come (by the queue's clock) into the
    /// queue now, in ready-time order, and returns how many moved. The timer thread, or the
    /// fake clock's `step`, does this by itself; call it when driving a custom clock.
    pub fn fire_due(&self) -> usize {
        self.shared.fire_due().0
    }
}

/// Starts the timer thread. It holds a `Weak` between wake-ups, so dropping the last
/// handle of the queue drops the doorbell and ends the thread.
fn spawn_timer<T: Item, Q: Queue<T> + 'static>(
    weak: Weak<DelayShared<T, Q>>,
    rings: Receiver<()>,
    name: &str,
) -> bool {
    let spawned = thread::Builder::new()
        .name(crate::thread_name("wq-timer", name))
        .spawn(move || {
            loop {
                let wait = {
                    let Some(shared) = weak.upgrade() else {
                        return;
                    };
                    if shared.stopped.load(AtomicOrdering::Acquire) || shared.queue.shutting_down()
                    {
                        return;
                    }
                    match shared.fire_due().1 {
                        Some(Deadline::At(at)) => at
                            .saturating_duration_since(shared.clock.now())
                            .min(MAX_WAIT),
                        Some(Deadline::Never) | None => MAX_WAIT,
                    }
                };
                if let Err(RecvTimeoutError::Disconnected) = rings.recv_timeout(wait) {
                    return;
                }
            }
        });
    match spawned {
        Ok(_) => true,
        Err(error) => {
            tracing::error!(%error, queue = name, "cannot start the delaying queue's timer thread; due items fire on later add_after calls only");
            false
        }
    }
}

impl<T: Item, Q: Queue<T>> DelayShared<T, Q> {
    fn waiting(&self) -> MutexGuard<'_, Waiting<T>> {
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Fires due items; returns how many, and the next deadline left.
    fn fire_due(&self) -> (usize, Option<Deadline>) {
        let _firing = self
            .firing
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = self.clock.now();
        let mut due = Vec::new();
        let next = {
            let mut waiting = self.waiting();
            waiting.pop_due(now, &mut due);
            waiting.next_deadline()
        };
        let fired = due.len();
        for (item, priority) in due {
            self.queue.add_with_priority(item, priority);
        }
        (fired, next)
    }

    fn ring(&self) {
        if let Some(doorbell) = &self.doorbell {
            match doorbell.try_send(()) {
                Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
            }
        }
    }

    fn stop(&self) {
        self.stopped.store(true, AtomicOrdering::Release);
        self.waiting().clear();
        self.ring();
    }
}

impl<T: Item, Q: Queue<T>> TimeListener for DelayShared<T, Q> {
    fn time_advanced(&self, _now: Instant) {
        if !self.stopped.load(AtomicOrdering::Acquire) {
            self.fire_due();
        }
    }
}

impl<T: Item, Q: Queue<T> + 'static> Queue<T> for DelayingWorkQueue<T, Q> {
    fn add(&self, item: T) {
        self.shared.queue.add(item);
    }
    fn add_with_priority(&self, item: T, priority: i32) {
        self.shared.queue.add_with_priority(item, priority);
    }
    fn len(&self) -> usize {
        self.shared.queue.len()
    }
    fn is_empty(&self) -> bool {
        self.shared.queue.is_empty()
    }
    fn get(&self) -> Option<T> {
        self.shared.queue.get()
    }
    fn get_async(&self) -> GetFuture<'_, T> {
        self.shared.queue.get_async()
    }
    fn get_with_priority(&self) -> Option<(T, i32)> {
        self.shared.queue.get_with_priority()
    }
    fn get_async_with_priority(&self) -> GetFuture<'_, (T, i32)>
    where
        T: Send,
    {
        self.shared.queue.get_async_with_priority()
    }
    fn done(&self, item: &T) {
        self.shared.queue.done(item);
    }
    fn shut_down(&self) {
        self.shared.queue.shut_down();
        self.shared.stop();
    }
    fn shut_down_with_drain(&self) {
        self.shared.stop();
        self.shared.queue.shut_down_with_drain();
    }
    fn shutting_down(&self) -> bool {
        self.shared.queue.shutting_down()
    }
    /// The queue beneath's, with this layer's waiting items and retries.
    fn stats(&self) -> QueueStats {
        let mut stats = self.shared.queue.stats();
        stats.waiting += self.waiting_len();
        stats.retries += self.shared.retries.get();
        if stats.name.is_empty() {
            stats.name.clone_from(&self.shared.name);
        }
        stats
    }
}

impl<T: Item, Q: Queue<T> + 'static> DelayingQueue<T> for DelayingWorkQueue<T, Q> {
    fn add_after(&self, item: T, delay: Duration) {
        self.add_after_with_priority(item, delay, 0);
    }

    fn add_after_with_priority(&self, item: T, delay: Duration, priority: i32) {
        let shared = &*self.shared;
        if shared.queue.shutting_down() || shared.stopped.load(AtomicOrdering::Acquire) {
            return;
        }
        shared.retries.inc();
        if delay.is_zero() {
            shared.queue.add_with_priority(item, priority);
            return;
        }
        let deadline = shared
            .clock
            .now()
            .checked_add(delay)
            .map_or(Deadline::Never, Deadline::At);
        let earliest = shared.waiting().insert(item, deadline, priority);
        if earliest {
            shared.ring();
        }
        if !shared.has_timer.load(AtomicOrdering::Acquire)
            && deadline <= Deadline::At(shared.clock.now())
        {
            // Clock-driven (or no timer thread): the clock may have moved past the deadline
            // between reading it and inserting, and no later step may come to fire it.
            shared.fire_due();
        }
    }
}
