//! The delaying layer: `add_after`, a heap of waiting items, and what fires them.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};

use crate::HashMap;
use crate::metrics::resolve_provider;
use crate::{Clock, CounterMetric, GetFuture, Item, Queue, QueueConfig, TimeListener, WorkQueue};

/// A [`Queue`] that can add an item later: client-go's `TypedDelayingInterface`.
///
/// Why a trait: the rate-limited layer needs only "add this after that long" from the layer
/// beneath it, so any delaying queue (a fake one in a test, one on another timer) can sit
/// there. [`DelayingWorkQueue`] is the default.
pub trait DelayingQueue<T>: Queue<T> {
    /// Adds `item` once `delay` has passed. A zero delay is a plain [`add`](Queue::add).
    /// If the item is already waiting, the earlier of the two ready times is kept. Waiting
    /// items are not counted by [`len`](Queue::len) until they fire, and fire in ready-time
    /// order (insertion order among equal times). Ignored once the queue is shutting down. A
    /// delay too large to represent means "never" (the item waits until shutdown).
    fn add_after(&self, item: T, delay: Duration);
}

macro_rules! forward_delaying {
    ($($ty:ty),*) => {$(
        impl<T, Q: DelayingQueue<T> + ?Sized> DelayingQueue<T> for $ty {
            fn add_after(&self, item: T, delay: Duration) {
                (**self).add_after(item, delay)
            }
        }
    )*};
}

forward_delaying!(Arc<Q>, Box<Q>, &Q);

/// How long the timer thread sleeps at most, even with nothing due (client-go's `maxWait`
/// heartbeat): insurance against a clock that jumps, and the bound on how late it notices a
/// shutdown made on the queue beneath it directly.
const MAX_WAIT: Duration = Duration::from_secs(10);

/// The default [`DelayingQueue`]: wraps any [`Queue`] (by default a [`WorkQueue`]).
///
/// Waiting items sit in a min-heap by ready time under their own mutex (never the queue's),
/// with a map from item to its current ready time for the earliest-wins rule; a lowered
/// ready time leaves the old heap entry behind to be skipped. `add_after` takes that mutex
/// for one map lookup and one heap push, and wakes the timer only when the new item became
/// the earliest.
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
    retries: Option<Box<dyn CounterMetric>>,
}

/// When a waiting item becomes ready. `Never` sorts after every instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Deadline {
    At(Instant),
    Never,
}

struct Waiting<T> {
    heap: BinaryHeap<Pending<T>>,
    /// Each waiting item's live heap entry.
    index: HashMap<T, (Deadline, u64)>,
    next_seq: u64,
}

struct Pending<T> {
    deadline: Deadline,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Pending<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<T> Eq for Pending<T> {}
impl<T> PartialOrd for Pending<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Pending<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: the max-heap then pops the earliest deadline, the first inserted on ties.
        (other.deadline, other.seq).cmp(&(self.deadline, self.seq))
    }
}

impl<T: Item> Waiting<T> {
    fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
            index: HashMap::default(),
            next_seq: 0,
        }
    }

    /// Inserts or moves `item` earlier; returns whether it is now the earliest of all.
    fn insert(&mut self, item: T, deadline: Deadline) -> bool {
        let seq = self.next_seq;
        match self.index.get_mut(&item) {
            Some(current) if current.0 <= deadline => return false,
            Some(current) => *current = (deadline, seq),
            None => {
                self.index.insert(item.clone(), (deadline, seq));
            }
        }
        self.next_seq = self.next_seq.wrapping_add(1);
        self.heap.push(Pending {
            deadline,
            seq,
            item,
        });
        if self.heap.len() > 2 * self.index.len() + 64 {
            let index = &self.index;
            self.heap.retain(|pending| {
                index.get(&pending.item) == Some(&(pending.deadline, pending.seq))
            });
        }
        self.heap.peek().is_some_and(|top| top.seq == seq)
    }

    /// Pops every live item due at `now`, in ready-time order.
    fn pop_due(&mut self, now: Instant, due: &mut Vec<T>) {
        while let Some(top) = self.heap.peek() {
            if top.deadline > Deadline::At(now) {
                break;
            }
            let Some(pending) = self.heap.pop() else {
                break;
            };
            if self.index.get(&pending.item) == Some(&(pending.deadline, pending.seq)) {
                self.index.remove(&pending.item);
                due.push(pending.item);
            }
        }
    }

    /// The earliest live deadline.
    fn next_deadline(&mut self) -> Option<Deadline> {
        while let Some(top) = self.heap.peek() {
            if self.index.get(&top.item) == Some(&(top.deadline, top.seq)) {
                return Some(top.deadline);
            }
            self.heap.pop();
        }
        None
    }

    fn clear(&mut self) {
        self.heap.clear();
        self.index.clear();
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
        let retries = if config.name.is_empty() {
            None
        } else {
            resolve_provider(config.metrics.as_ref())
                .map(|provider| provider.new_retries_metric(&config.name))
        };
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
        for item in due {
            self.queue.add(item);
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
}

impl<T: Item, Q: Queue<T> + 'static> DelayingQueue<T> for DelayingWorkQueue<T, Q> {
    fn add_after(&self, item: T, delay: Duration) {
        let shared = &*self.shared;
        if shared.queue.shutting_down() || shared.stopped.load(AtomicOrdering::Acquire) {
            return;
        }
        if let Some(retries) = &shared.retries {
            retries.inc();
        }
        if delay.is_zero() {
            shared.queue.add(item);
            return;
        }
        let deadline = shared
            .clock
            .now()
            .checked_add(delay)
            .map_or(Deadline::Never, Deadline::At);
        let earliest = shared.waiting().insert(item, deadline);
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
