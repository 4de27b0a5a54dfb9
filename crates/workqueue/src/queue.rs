//! The base queue: deduplication, the dirty and processing sets, blocking and async `get`.

use std::collections::{VecDeque, hash_map};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Instant;

use crossbeam_channel::{RecvTimeoutError, Sender};

use crate::HashMap;
use crate::metrics::{QueueMetrics, UNFINISHED_WORK_UPDATE_PERIOD, resolve_provider};
use crate::sync::{Condvar, Mutex, lock, wait};
use crate::{
    FifoStorage, Item, PriorityStorage, QueueConfig, QueueStats, QueueStorage, Queued, TimeListener,
};

/// A work queue: client-go's `TypedInterface`.
///
/// Why a trait: the three layers (queue, delaying, rate limited) wrap one another like tower
/// layers, and each wrapper only needs "some queue" beneath it; a controller can also take
/// `&dyn RateLimitingQueue<K>` and be tested against a fake. [`WorkQueue`] is the default.
///
/// The contract, for every implementation:
///
/// - An item is in at most one of three places at a time, as seen by workers: queued, held
///   by exactly one worker (between `get` and `done`), or nowhere.
/// - [`add`](Queue::add) of a queued item changes nothing; of a held item marks it dirty,
///   and [`done`](Queue::done) then queues it again, once.
/// - After [`shut_down`](Queue::shut_down), adds are ignored and `get` keeps handing out
///   what is queued, then returns `None`.
///
/// No method panics on any argument: `done` of an item never handed out does nothing.
pub trait Queue<T>: Send + Sync {
    /// Marks `item` as needing processing. Ignored once the queue is shutting down.
    fn add(&self, item: T);

    /// [`add`](Queue::add) with a priority (controller-runtime's `AddWithOpts{Priority}`):
    /// a [`PriorityWorkQueue`](crate::PriorityWorkQueue), or a [`WorkQueue`] over a
    /// [`PriorityStorage`](crate::PriorityStorage), hands higher priorities out first and
    /// raises an already queued item; a FIFO hands items out in arrival order, with the
    /// priority each came with ([`get_with_priority`](Queue::get_with_priority)). A
    /// controller adds the keys of an
    /// initial list and of resyncs at [`LOW_PRIORITY`](crate::LOW_PRIORITY).
    ///
    /// Required, like every method here that carries a priority or a statistic: a default
    /// that dropped it would silently take the priority away when a decorator over a
    /// priority queue did not forward this method (the crate docs' rule for provided
    /// methods). A queue without priorities calls `add`.
    fn add_with_priority(&self, item: T, priority: i32);

    /// How many items are queued (not counting held or delayed ones). Informational: do not
    /// gate `add` or `get` on it.
    fn len(&self) -> usize;

    /// Whether nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Blocks the calling thread until an item can be handed out and returns it, or returns
    /// `None` once the queue is shut down and empty. Call [`done`](Queue::done) with the item
    /// when finished. From async code use [`get_async`](Queue::get_async) instead.
    fn get(&self) -> Option<T>;

    /// The async form of [`get`](Queue::get): waits without blocking the thread (a waker is
    /// parked in the queue), so it is safe on a tokio worker. Dropping the future before it
    /// completes takes nothing and passes on any wake-up it had received.
    fn get_async(&self) -> GetFuture<'_, T>;

    /// [`get`](Queue::get), with the priority the item was queued at (controller-runtime's
    /// `GetWithPriority`): a worker re-queues a failed item at the priority it came with.
    /// A queue without priorities gives every item 0. Required (see
    /// [`add_with_priority`](Queue::add_with_priority)).
    fn get_with_priority(&self) -> Option<(T, i32)>;

    /// The async form of [`get_with_priority`](Queue::get_with_priority); this crate's
    /// queues allocate nothing. A queue without priorities can return
    /// [`GetFuture::with_priority_zero`]`(self.get_async())`. Required (see
    /// [`add_with_priority`](Queue::add_with_priority)).
    fn get_async_with_priority(&self) -> GetFuture<'_, (T, i32)>
    where
        T: Send;

    /// Marks `item` as finished. If it was added again while held, it is queued again now.
    /// Does nothing for an item that is not held.
    fn done(&self, item: &T);

    /// Ignores every later add; `get` drains what is queued, then returns `None`. Does not
    /// wait for held items. Safe to call more than once.
    fn shut_down(&self);

    /// Like [`shut_down`](Queue::shut_down), then blocks until no item is held (every `get`
    /// matched by a `done`). A `shut_down` made while it waits releases it early (one made
    /// before it started does not). Items still queued are not waited for: workers keep
    /// getting them after this returns. Calling it from a worker that still holds an item
    /// blocks forever, as in client-go.
    fn shut_down_with_drain(&self);

    /// Whether a shutdown has begun.
    fn shutting_down(&self) -> bool;

    /// A snapshot for status pages and diagnostics: the depth, the items held and waiting,
    /// the retries, and how long the held items have been processed, from the bookkeeping the
    /// metrics read (see [`QueueStats`]). Takes the queue's lock once, like
    /// [`len`](Queue::len). Required (see [`add_with_priority`](Queue::add_with_priority)):
    /// a decorator reports what it wraps; a queue that keeps no bookkeeping can return
    /// [`QueueStats::basic`]`(self.len(), self.shutting_down())`.
    fn stats(&self) -> QueueStats;
}

macro_rules! forward_queue {
    ($($ty:ty),*) => {$(
        impl<T, Q: Queue<T> + ?Sized> Queue<T> for $ty {
            fn add(&self, item: T) {
                (**self).add(item)
            }
            fn add_with_priority(&self, item: T, priority: i32) {
                (**self).add_with_priority(item, priority)
            }
            fn len(&self) -> usize {
                (**self).len()
            }
            fn is_empty(&self) -> bool {
                (**self).is_empty()
            }
            fn get(&self) -> Option<T> {
                (**self).get()
            }
            fn get_async(&self) -> GetFuture<'_, T> {
                (**self).get_async()
            }
            fn get_with_priority(&self) -> Option<(T, i32)> {
                (**self).get_with_priority()
            }
            fn get_async_with_priority(&self) -> GetFuture<'_, (T, i32)>
            where
                T: Send,
            {
                (**self).get_async_with_priority()
            }
            fn done(&self, item: &T) {
                (**self).done(item)
            }
            fn shut_down(&self) {
                (**self).shut_down()
            }
            fn shut_down_with_drain(&self) {
                (**self).shut_down_with_drain()
            }
            fn shutting_down(&self) -> bool {
                (**self).shutting_down()
            }
            fn stats(&self) -> QueueStats {
                (**self).stats()
            }
        }
    )*};
}

forward_queue!(Arc<Q>, Box<Q>, &Q);

/// The future returned by [`Queue::get_async`]: resolves to the next item, or `None` once the
/// queue is shut down and empty.
///
/// The default queues return it without allocating. A custom [`Queue`] implementation
/// wraps its own future with [`GetFuture::from_future`].
#[must_use = "futures do nothing unless polled"]
pub struct GetFuture<'a, T> {
    inner: GetInner<'a, T>,
}

enum GetInner<'a, T> {
    Native {
        queue: &'a dyn AsyncGet<T>,
        waiter: Option<u64>,
    },
    Boxed(Pin<Box<dyn Future<Output = Option<T>> + Send + 'a>>),
    /// Completed: polling again must not take another item.
    Finished,
}

impl<'a, T> GetFuture<'a, T> {
    /// Wraps any future (boxing it): for [`Queue`] implementations other than this crate's.
    pub fn from_future(future: impl Future<Output = Option<T>> + Send + 'a) -> Self {
        Self {
            inner: GetInner::Boxed(Box::pin(future)),
        }
    }

    /// This future's item with priority 0 (boxing it): the
    /// [`get_async_with_priority`](Queue::get_async_with_priority) of a queue without
    /// priorities.
    pub fn with_priority_zero(self) -> GetFuture<'a, (T, i32)>
    where
        T: Send + 'a,
    {
        GetFuture::from_future(async move { self.await.map(|item| (item, 0)) })
    }

    pub(crate) fn native(queue: &'a dyn AsyncGet<T>) -> Self {
        Self {
            inner: GetInner::Native {
                queue,
                waiter: None,
            },
        }
    }
}

impl<T> Future for GetFuture<'_, T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        let polled = match &mut this.inner {
            GetInner::Native { queue, waiter } => queue.poll_get(cx, waiter),
            GetInner::Boxed(future) => future.as_mut().poll(cx),
            // A completed future stays pending rather than handing out a second item.
            GetInner::Finished => return Poll::Pending,
        };
        if polled.is_ready() {
            this.inner = GetInner::Finished;
        }
        polled
    }
}

impl<T> Drop for GetFuture<'_, T> {
    fn drop(&mut self) {
        if let GetInner::Native {
            queue,
            waiter: Some(id),
        } = &self.inner
        {
            queue.cancel_get(*id);
        }
    }
}

impl<T> fmt::Debug for GetFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GetFuture").finish_non_exhaustive()
    }
}

/// The queue side of [`GetFuture`]'s native form.
pub(crate) trait AsyncGet<T>: Sync {
    /// Takes an item, or parks `cx`'s waker under the id in `waiter` (allocating one).
    fn poll_get(&self, cx: &mut Context<'_>, waiter: &mut Option<u64>) -> Poll<Option<T>>;
    /// The future with this waiter id is gone.
    fn cancel_get(&self, waiter: u64);
}

/// The default [`Queue`]: client-go's `Typed` queue, with a pluggable ordering storage.
///
/// A cheap handle: clones share the same queue. One mutex guards the whole state (ordering
/// storage, the item table that plays the dirty and processing sets, the waiter lists and
/// the metrics), held only for the few map and storage operations of one call; wake-ups are
/// issued after it is released. Blocking `get` spins briefly, then sleeps on a condition
/// variable; `get_async` parks a waker; an add wakes at most one of each (see the crate
/// docs, "Waking as few threads as the work needs").
///
/// ```
/// use kinformer_workqueue::{Queue, WorkQueue};
///
/// let queue = WorkQueue::new();
/// queue.add("a");
/// queue.add("a"); // already queued: nothing changes
/// assert_eq!(queue.len(), 1);
/// let item = queue.get().unwrap();
/// queue.add(item); // held: only marked dirty
/// assert_eq!(queue.len(), 0);
/// queue.done(&item); // dirty: queued again, once
/// assert_eq!(queue.len(), 1);
/// ```
pub struct WorkQueue<T: Item, S = FifoStorage<T>> {
    shared: Arc<Shared<T, S>>,
}

impl<T: Item, S> Clone for WorkQueue<T, S> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T: Item, S: QueueStorage<T>> fmt::Debug for WorkQueue<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.shared.state);
        f.debug_struct("WorkQueue")
            .field("queued", &state.queued())
            .field("processing", &state.processing)
            .field("shutting_down", &state.shutting_down)
            .finish_non_exhaustive()
    }
}

struct Shared<T, S> {
    state: Mutex<State<T, S>>,
    /// Blocking getters wait here.
    items_ready: Condvar,
    /// `shut_down_with_drain` waits here.
    drained: Condvar,
    /// 1 when something is queued, 0 when not, readable without the lock: what a spinning
    /// getter watches.
    queued_hint: AtomicUsize,
    /// Dropping this sender stops the unfinished-work metrics thread.
    ticker: std::sync::Mutex<Option<Sender<()>>>,
    /// The queue's name, for [`QueueStats`].
    name: String,
    /// Whether [`QueueStats::depth_by_priority`] is reported (a queue made by
    /// [`WorkQueue::with_priorities`]).
    by_priority: bool,
}

/// Where an item stands: one slot of the state table per item in the item table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Not in use (on the free list).
    Free,
    /// Dirty and in the ordering storage, at this priority (the highest it was added at
    /// since it was last handed out): what `get_with_priority` reports.
    Queued(i32),
    /// Held by a worker, not dirty.
    Processing,
    /// Held by a worker and added again meanwhile: `done` queues it with this priority.
    ProcessingDirty(i32),
}

/// Gives each queue the id its [`Queued`] items carry.
static NEXT_QUEUE_ID: AtomicU64 = AtomicU64::new(0);

struct State<T, S> {
    storage: S,
    /// Each queued or held item, with the index of its slot in `slots`. The ordering
    /// storage holds the slot index too (in [`Queued`]), so `get` reaches the popped item's
    /// state without hashing it again.
    entries: HashMap<T, usize>,
    slots: Vec<Slot>,
    /// Indices of the `Free` slots.
    free_slots: Vec<usize>,
    /// This queue's id, carried by its [`Queued`] items.
    id: u64,
    processing: usize,
    shutting_down: bool,
    drain: bool,
    /// Threads blocked in `get`, and how many of them were already sent a notification.
    sleepers: usize,
    notified: usize,
    /// Threads in `get` spinning briefly before they sleep.
    spinners: usize,
    /// Whether `queued_hint` last said "something is queued".
    hinted_nonempty: bool,
    /// Threads blocked in `shut_down_with_drain`.
    drain_sleepers: usize,
    async_waiters: VecDeque<(u64, Waker)>,
    next_waiter: u64,
    metrics: Option<QueueMetrics<T>>,
}

/// Wake-ups decided under the lock and issued after it is released.
#[must_use]
struct Wake {
    thread: bool,
    waker: Option<Waker>,
}

impl Wake {
    const NONE: Wake = Wake {
        thread: false,
        waker: None,
    };

    /// Inlined: the common case (nothing to wake) is then two tests, not a call.
    #[inline]
    fn run(self, condvar: &Condvar) {
        if self.thread {
            condvar.notify_one();
        }
        if let Some(waker) = self.waker {
            waker.wake();
        }
    }
}

impl<T: Item, S: QueueStorage<T>> State<T, S> {
    fn queued(&self) -> usize {
        self.storage.len()
    }

    /// Tells spinning getters whether anything is queued. Written only when that changes:
    /// a store on every operation would pull the hint's cache line away from every spinner
    /// each time.
    fn publish_queued(&mut self, hint: &AtomicUsize) {
        let nonempty = !self.storage.is_empty();
        if nonempty != self.hinted_nonempty {
            self.hinted_nonempty = nonempty;
            hint.store(usize::from(nonempty), Ordering::Relaxed);
        }
    }

    /// One more item can be handed out: wake one parked task, and one sleeping thread
    /// unless a thread is already on its way to the queue (spinning, or notified and not
    /// yet running). Whoever takes an item wakes the next sleeper if more is queued (see
    /// [`take`](Self::take)), so a burst still reaches every worker, while a steady stream
    /// that a spinning worker keeps up with makes no futex call at all. Waking a thread and
    /// a task, rather than choosing, means a mix of thread and task workers never loses a
    /// wake-up; the extra one parks again.
    fn wake_one(&mut self) -> Wake {
        Wake {
            thread: self.wake_thread(),
            waker: self.async_waiters.pop_front().map(|(_, waker)| waker),
        }
    }

    fn wake_thread(&mut self) -> bool {
        let wake = self.spinners == 0 && self.notified == 0 && self.sleepers > 0;
        if wake {
            self.notified += 1;
        }
        wake
    }

    fn add(&mut self, item: T, priority: i32) -> Wake {
        if self.shutting_down {
            return Wake::NONE;
        }
        // One lookup whatever the outcome: the entry API hashes `item` once.
        let vacant = match self.entries.entry(item) {
            hash_map::Entry::Vacant(vacant) => vacant,
            hash_map::Entry::Occupied(occupied) => {
                match &mut self.slots[*occupied.get()] {
                    Slot::Queued(queued_priority) => {
                        if priority > *queued_priority {
                            if let Some(metrics) = &mut self.metrics {
                                metrics.reprioritize(*queued_priority, priority);
                            }
                            *queued_priority = priority;
                        }
                        self.storage.touch(occupied.key(), priority);
                    }
                    Slot::ProcessingDirty(queued_priority) => {
                        if priority > *queued_priority {
                            if let Some(metrics) = &mut self.metrics {
                                metrics.reprioritize(*queued_priority, priority);
                            }
                            *queued_priority = priority;
                        }
                    }
                    slot @ Slot::Processing => {
                        *slot = Slot::ProcessingDirty(priority);
                        if let Some(metrics) = &mut self.metrics {
                            metrics.add(occupied.key(), priority);
                        }
                    }
                    // Never: an item in the table has a slot in use.
                    Slot::Free => {}
                }
                return Wake::NONE;
            }
        };
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.slots[slot] = Slot::Queued(priority);
                slot
            }
            None => {
                self.slots.push(Slot::Queued(priority));
                self.slots.len() - 1
            }
        };
        let item = vacant.key().clone();
        vacant.insert(slot);
        if let Some(metrics) = &mut self.metrics {
            metrics.add(&item, priority);
        }
        self.storage
            .push(Queued::new(item, slot, self.id), priority);
        self.wake_one()
    }

    /// Hands out the next queued item, if any, with the wake-up of the next sleeper when
    /// more items are queued.
    fn take(&mut self) -> (Option<(T, i32)>, Wake) {
        while let Some(queued) = self.storage.pop() {
            let (item, slot, queue) = queued.into_parts();
            // An item from this queue's `Queued` is queued exactly while its slot says so:
            // `Queued` is not `Clone`, and a slot leaves `Queued` only when its item is
            // popped here. No hashing needed.
            let slot = self.slots.get_mut(slot).filter(|_| queue == self.id);
            match slot {
                Some(slot) if matches!(slot, Slot::Queued(_)) => {
                    let priority = match std::mem::replace(slot, Slot::Processing) {
                        Slot::Queued(priority) => priority,
                        _ => 0,
                    };
                    self.processing += 1;
                    if let Some(metrics) = &mut self.metrics {
                        metrics.get(&item, priority);
                    }
                    let wake = Wake {
                        thread: !self.storage.is_empty() && self.wake_thread(),
                        waker: None,
                    };
                    return (Some((item, priority)), wake);
                }
                // A custom storage returned another queue's item: handing it out could give
                // one item to two workers, so it is dropped.
                _ => tracing::warn!("workqueue storage returned an item that was not queued"),
            }
        }
        (None, Wake::NONE)
    }

    fn done(&mut self, item: &T) -> Wake {
        // Remove first: the common case (held, not dirty) then costs one lookup.
        let Some((key, index)) = self.entries.remove_entry(item) else {
            return Wake::NONE;
        };
        let wake = match self.slots[index] {
            Slot::Processing => {
                self.slots[index] = Slot::Free;
                self.free_slots.push(index);
                Wake::NONE
            }
            Slot::ProcessingDirty(priority) => {
                self.slots[index] = Slot::Queued(priority);
                let queued = Queued::new(key.clone(), index, self.id);
                self.entries.insert(key, index);
                self.storage.push(queued, priority);
                self.wake_one()
            }
            // Not held: client-go would queue a queued item a second time here; doing
            // nothing keeps "one holder per item" true whatever the caller does.
            Slot::Queued(_) | Slot::Free => {
                self.entries.insert(key, index);
                return Wake::NONE;
            }
        };
        self.processing -= 1;
        if let Some(metrics) = &mut self.metrics {
            metrics.done(item);
        }
        wake
    }

    /// Starts a shutdown; returns the parked wakers to wake.
    fn begin_shutdown(&mut self, drain: bool) -> VecDeque<(u64, Waker)> {
        self.shutting_down = true;
        self.drain = drain;
        std::mem::take(&mut self.async_waiters)
    }
}

impl<T: Item> WorkQueue<T> {
    /// An unnamed FIFO queue on the real clock.
    pub fn new() -> Self {
        Self::with_config(QueueConfig::new())
    }

    /// A FIFO queue built from `config`.
    pub fn with_config(config: QueueConfig) -> Self {
        Self::with_storage(FifoStorage::new(), config)
    }
}

impl<T: Item> Default for WorkQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item> WorkQueue<T, PriorityStorage<T>> {
    /// A queue that hands out the highest priority first ([`PriorityStorage`], one pop in
    /// [`DEFAULT_FAIR_EVERY`](crate::DEFAULT_FAIR_EVERY) taking the item queued longest, so
    /// that no priority starves), reporting its depth by priority: in
    /// [`QueueStats::depth_by_priority`], and in the depth metric when the provider makes a
    /// gauge labelled by priority
    /// ([`MetricsProvider::new_depth_with_priority_metric`](crate::MetricsProvider::new_depth_with_priority_metric)).
    /// The base of [`PriorityWorkQueue`](crate::PriorityWorkQueue).
    ///
    /// ```
    /// use kinformer_workqueue::{LOW_PRIORITY, Queue, QueueConfig, WorkQueue};
    ///
    /// let queue = WorkQueue::with_priorities(QueueConfig::new());
    /// queue.add_with_priority("listed", LOW_PRIORITY);
    /// queue.add("changed");
    /// assert_eq!(queue.stats().depth_by_priority, [(0, 1), (LOW_PRIORITY, 1)]);
    /// assert_eq!(queue.get(), Some("changed"));
    /// ```
    pub fn with_priorities(config: QueueConfig) -> Self {
        Self::build(
            PriorityStorage::new().fair_every(crate::DEFAULT_FAIR_EVERY),
            config,
            true,
        )
    }
}

impl<T: Item, S: QueueStorage<T> + 'static> WorkQueue<T, S> {
    /// A queue that orders items with `storage` (for example a
    /// [`PriorityStorage`]; [`with_priorities`](WorkQueue::with_priorities) also reports the
    /// depth by priority).
    pub fn with_storage(storage: S, config: QueueConfig) -> Self {
        Self::build(storage, config, false)
    }

    fn build(storage: S, config: QueueConfig, by_priority: bool) -> Self {
        let metrics = if config.name.is_empty() {
            None
        } else {
            resolve_provider(config.metrics.as_ref()).map(|provider| {
                let clock = config.clock.clone();
                if by_priority {
                    QueueMetrics::with_priority(&*provider, &config.name, clock)
                } else {
                    QueueMetrics::new(&*provider, &config.name, clock)
                }
            })
        };
        let has_metrics = metrics.is_some();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                storage,
                entries: HashMap::default(),
                slots: Vec::new(),
                free_slots: Vec::new(),
                id: NEXT_QUEUE_ID.fetch_add(1, Ordering::Relaxed),
                processing: 0,
                shutting_down: false,
                drain: false,
                sleepers: 0,
                notified: 0,
                spinners: 0,
                hinted_nonempty: false,
                drain_sleepers: 0,
                async_waiters: VecDeque::new(),
                next_waiter: 0,
                metrics,
            }),
            items_ready: Condvar::new(),
            drained: Condvar::new(),
            queued_hint: AtomicUsize::new(0),
            ticker: std::sync::Mutex::new(None),
            name: config.name.clone(),
            by_priority,
        });
        if has_metrics {
            let listener: Weak<dyn TimeListener> = Arc::downgrade(&shared) as _;
            if !config.clock.subscribe(listener) {
                let ticker = spawn_unfinished_work_ticker(&shared, &config.name);
                *shared
                    .ticker
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()) = ticker;
            }
        }
        Self { shared }
    }
}

/// Refreshes the unfinished-work gauges every 500 ms on a real clock, until the queue shuts
/// down or is dropped (either drops the sender).
fn spawn_unfinished_work_ticker<T: Item, S: QueueStorage<T> + 'static>(
    shared: &Arc<Shared<T, S>>,
    name: &str,
) -> Option<Sender<()>> {
    let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
    let weak = Arc::downgrade(shared);
    let spawned = thread::Builder::new()
        .name(crate::thread_name("wq-metrics", name))
        .spawn(move || {
            while let Err(RecvTimeoutError::Timeout) =
                stopped.recv_timeout(UNFINISHED_WORK_UPDATE_PERIOD)
            {
                match weak.upgrade() {
                    Some(shared) if shared.update_unfinished_work() => {}
                    _ => return,
                }
            }
        });
    match spawned {
        Ok(_) => Some(stop),
        Err(error) => {
            tracing::error!(%error, queue = name, "cannot start the workqueue metrics thread; unfinished-work gauges stay at zero");
            None
        }
    }
}

impl<T: Item, S: QueueStorage<T>> Shared<T, S> {
    /// Refreshes the unfinished-work gauges unless shutting down; returns whether it did.
    fn update_unfinished_work(&self) -> bool {
        let mut state = lock(&self.state);
        if state.shutting_down {
            return false;
        }
        if let Some(metrics) = &mut state.metrics {
            metrics.update_unfinished_work();
        }
        true
    }

    fn stop_ticker(&self) {
        self.ticker
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
    }

    fn shut_down(&self, drain: bool) {
        let mut state = lock(&self.state);
        let wakers = state.begin_shutdown(drain);
        drop(state);
        self.items_ready.notify_all();
        self.drained.notify_all();
        for (_, waker) in wakers {
            waker.wake();
        }
        self.stop_ticker();
    }
}

impl<T: Item, S: QueueStorage<T>> TimeListener for Shared<T, S> {
    fn time_advanced(&self, _now: Instant) {
        self.update_unfinished_work();
    }
}

impl<T: Item, S: QueueStorage<T>> AsyncGet<T> for Shared<T, S> {
    fn poll_get(&self, cx: &mut Context<'_>, waiter: &mut Option<u64>) -> Poll<Option<T>> {
        self.poll_take(cx, waiter)
            .map(|taken| taken.map(|(item, _)| item))
    }

    fn cancel_get(&self, waiter: u64) {
        self.cancel_take(waiter);
    }
}

impl<T: Item, S: QueueStorage<T>> AsyncGet<(T, i32)> for Shared<T, S> {
    fn poll_get(&self, cx: &mut Context<'_>, waiter: &mut Option<u64>) -> Poll<Option<(T, i32)>> {
        self.poll_take(cx, waiter)
    }

    fn cancel_get(&self, waiter: u64) {
        self.cancel_take(waiter);
    }
}

impl<T: Item, S: QueueStorage<T>> Shared<T, S> {
    /// Takes an item and its priority, or parks `cx`'s waker under the id in `waiter`.
    fn poll_take(&self, cx: &mut Context<'_>, waiter: &mut Option<u64>) -> Poll<Option<(T, i32)>> {
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        let (taken, wake) = state.take();
        if taken.is_some() || state.shutting_down {
            if let Some(id) = waiter.take() {
                state.async_waiters.retain(|(other, _)| *other != id);
            }
            state.publish_queued(&self.queued_hint);
            drop(guard);
            wake.run(&self.items_ready);
            return Poll::Ready(taken);
        }
        match waiter {
            Some(id) => match state
                .async_waiters
                .iter_mut()
                .find(|(other, _)| other == id)
            {
                Some((_, parked)) => parked.clone_from(cx.waker()),
                None => state.async_waiters.push_back((*id, cx.waker().clone())),
            },
            None => {
                let id = state.next_waiter;
                state.next_waiter = state.next_waiter.wrapping_add(1);
                state.async_waiters.push_back((id, cx.waker().clone()));
                *waiter = Some(id);
            }
        }
        Poll::Pending
    }

    fn cancel_take(&self, waiter: u64) {
        let mut state = lock(&self.state);
        if let Some(position) = state.async_waiters.iter().position(|(id, _)| *id == waiter) {
            state.async_waiters.remove(position);
            return;
        }
        // This future was woken for an item and is going away without taking it: pass the
        // wake-up on so the item does not sit in the queue while others wait.
        if state.storage.is_empty() {
            return;
        }
        let wake = state.wake_one();
        drop(state);
        wake.run(&self.items_ready);
    }
}

/// How long a blocking `get` spins on an empty queue before it sleeps (a few
/// microseconds). Zero under loom, whose model needs every wait to be a modelled one.
const SPIN_ITERATIONS: u32 = if cfg!(kinformer_loom) { 0 } else { 128 };

fn spin_until_queued(queued: &AtomicUsize) {
    for i in 0..SPIN_ITERATIONS {
        if queued.load(Ordering::Relaxed) > 0 {
            return;
        }
        if i % 32 == 31 {
            // Let a producer on this core run.
            thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

impl<T: Item, S: QueueStorage<T> + 'static> Queue<T> for WorkQueue<T, S> {
    fn add(&self, item: T) {
        self.add_with_priority(item, 0);
    }

    fn add_with_priority(&self, item: T, priority: i32) {
        let mut state = lock(&self.shared.state);
        let wake = state.add(item, priority);
        state.publish_queued(&self.shared.queued_hint);
        drop(state);
        wake.run(&self.shared.items_ready);
    }

    fn len(&self) -> usize {
        lock(&self.shared.state).queued()
    }

    fn get(&self) -> Option<T> {
        self.get_with_priority().map(|(item, _)| item)
    }

    /// [`get`](Queue::get), with the highest priority the item was added at since it was
    /// last handed out (0 for [`add`](Queue::add)). A FIFO storage hands items out in the
    /// order they came whatever their priority; the priority still travels with them, so
    /// a worker re-queues a failed item at the one it came with.
    fn get_with_priority(&self) -> Option<(T, i32)> {
        let shared = &*self.shared;
        let mut state = lock(&shared.state);
        let mut may_spin = SPIN_ITERATIONS > 0;
        loop {
            let (taken, wake) = state.take();
            if let Some(item) = taken {
                state.publish_queued(&shared.queued_hint);
                drop(state);
                wake.run(&shared.items_ready);
                return Some(item);
            }
            if state.shutting_down {
                return None;
            }
            if may_spin {
                // Going to sleep and being woken costs two system calls and a context
                // switch; a worker that comes back for more usually finds the next item
                // within microseconds. While it spins, adds wake no one (see `wake_one`);
                // it re-checks under the lock afterwards, so nothing added meanwhile waits.
                may_spin = false;
                state.spinners += 1;
                drop(state);
                spin_until_queued(&shared.queued_hint);
                state = lock(&shared.state);
                state.spinners -= 1;
                continue;
            }
            state.sleepers += 1;
            state = wait(&shared.items_ready, state);
            state.sleepers -= 1;
            state.notified = state.notified.saturating_sub(1);
        }
    }

    fn get_async(&self) -> GetFuture<'_, T> {
        GetFuture::native(&*self.shared as &dyn AsyncGet<T>)
    }

    fn get_async_with_priority(&self) -> GetFuture<'_, (T, i32)>
    where
        T: Send,
    {
        GetFuture::native(&*self.shared as &dyn AsyncGet<(T, i32)>)
    }

    fn done(&self, item: &T) {
        let mut state = lock(&self.shared.state);
        let wake = state.done(item);
        state.publish_queued(&self.shared.queued_hint);
        let release_drain = state.processing == 0 && state.drain_sleepers > 0;
        drop(state);
        wake.run(&self.shared.items_ready);
        if release_drain {
            self.shared.drained.notify_all();
        }
    }

    fn shut_down(&self) {
        self.shared.shut_down(false);
    }

    fn shut_down_with_drain(&self) {
        self.shared.shut_down(true);
        let mut state = lock(&self.shared.state);
        while state.processing != 0 && state.drain {
            state.drain_sleepers += 1;
            state = wait(&self.shared.drained, state);
            state.drain_sleepers -= 1;
        }
    }

    fn shutting_down(&self) -> bool {
        lock(&self.shared.state).shutting_down
    }

    /// With the depth by priority for a queue made by
    /// [`with_priorities`](WorkQueue::with_priorities): one pass over the item table.
    fn stats(&self) -> QueueStats {
        let state = lock(&self.shared.state);
        let unfinished = state.metrics.as_ref().map(QueueMetrics::unfinished_work);
        let mut depth_by_priority = Vec::new();
        if self.shared.by_priority {
            let mut counts = std::collections::BTreeMap::new();
            for slot in &state.slots {
                if let Slot::Queued(priority) = slot {
                    *counts.entry(std::cmp::Reverse(*priority)).or_insert(0) += 1;
                }
            }
            depth_by_priority = counts.into_iter().map(|(p, n)| (p.0, n)).collect();
        }
        QueueStats {
            name: self.shared.name.clone(),
            depth: state.queued(),
            depth_by_priority,
            processing: state.processing,
            unfinished_work: unfinished.map(|(total, _)| total),
            longest_running_processor: unfinished.map(|(_, oldest)| oldest),
            shutting_down: state.shutting_down,
            ..QueueStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_returning_another_queues_item_is_not_handed_out() {
        /// One FIFO shared by two queues: each may pop the other's items.
        #[derive(Clone, Default)]
        struct SharedFifo(Arc<std::sync::Mutex<VecDeque<Queued<u32>>>>);
        impl QueueStorage<u32> for SharedFifo {
            fn push(&mut self, item: Queued<u32>, _: i32) {
                self.0.lock().unwrap().push_back(item);
            }
            fn touch(&mut self, _: &u32, _: i32) {}
            fn pop(&mut self) -> Option<Queued<u32>> {
                self.0.lock().unwrap().pop_front()
            }
            fn len(&self) -> usize {
                self.0.lock().unwrap().len()
            }
        }
        let fifo = SharedFifo::default();
        let first = WorkQueue::with_storage(fifo.clone(), QueueConfig::new());
        let second = WorkQueue::with_storage(fifo, QueueConfig::new());
        first.add(7);
        second.add(8);
        assert_eq!(second.get(), Some(8), "the first queue's 7 is skipped");
        second.shut_down();
        assert_eq!(second.get(), None);
        second.add(7);
        assert_eq!(second.len(), 0);
    }
}
