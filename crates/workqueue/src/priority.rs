//! controller-runtime's priority queue: one queue that deduplicates, delays, rate limits and
//! hands out the highest priority first.

use std::cmp::Reverse;
use std::collections::{BTreeMap, VecDeque, hash_map};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::delaying::{Deadline, MAX_WAIT};
use crate::metrics::{QueueMetrics, Retries, UNFINISHED_WORK_UPDATE_PERIOD, resolve_provider};
use crate::queue::AsyncGet;
use crate::{
    Clock, DelayingQueue, GetFuture, HashMap, Item, MaxOfRateLimiter, Queue, QueueConfig,
    QueueStats, RateLimiter, RateLimitingQueue, TimeListener,
};

/// The priority controller-runtime's handlers give adds from an informer's initial list and
/// from resyncs (an update whose resourceVersion did not change): `handler.LowPriority`.
/// Below the default of 0, so that a real change waits behind none of them.
pub const LOW_PRIORITY: i32 = -100;

/// controller-runtime v0.23's default controller queue (`priorityqueue.PriorityQueue`): a
/// [`RateLimitingQueue`] that hands out the highest priority first, FIFO among equal
/// priorities by when each item became ready.
///
/// Why: a controller that starts (or resyncs) queues every object it watches. In a FIFO a
/// change made a second later waits behind all of them: with 10,000 objects listed, the
/// 10,001st `get`. Its handlers add those list and resync keys at [`LOW_PRIORITY`] and real
/// changes at 0, so the change is the next `get` (see BENCHMARKS.md, "workqueue priority").
///
/// Each item has one entry, whatever was asked of it:
///
/// - [`add_with_priority`](Queue::add_with_priority) (plain [`add`](Queue::add): priority 0)
///   of an item already queued or waiting keeps one entry, with the higher of the two
///   priorities (never lowered) and the earlier of the two ready times (now, for an add
///   without delay: a waiting item becomes ready at once). A raised item goes behind the
///   items already ready at its new priority, as in controller-runtime.
/// - [`add_after_with_priority`](DelayingQueue::add_after_with_priority) and
///   [`add_rate_limited_with_priority`](RateLimitingQueue::add_rate_limited_with_priority)
///   (the delay from the rate limiter) keep the item out of [`get`](Queue::get) until its
///   ready time by the queue's [`Clock`]; it then queues behind the items already ready at
///   its priority.
/// - An item held by a worker (between `get` and [`done`](Queue::done)) is never handed out
///   again before `done`; added meanwhile, it is queued again by `done`, once, in the place
///   its add gave it (client-go's dirty and processing sets).
/// - [`shut_down`](Queue::shut_down) drops waiting items and ignores later adds; `get` still
///   hands out what is ready, then returns `None` (the other queues' rules).
///
/// Adds, gets and dones cost O(log n): a map from each item to its entry, and two ordered
/// maps, one of the ready items keyed by (priority descending, ready sequence number) and one
/// of the waiting items keyed by (ready time, priority, sequence number). One mutex guards
/// them all; blocking getters sleep on a condition variable, async getters park a waker.
///
/// Metrics are client-go's seven, as for the other queues, with the depth labelled by
/// priority when the provider supports it
/// ([`MetricsProvider::new_depth_with_priority_metric`](crate::MetricsProvider::new_depth_with_priority_metric)).
///
/// ```
/// use std::time::Duration;
/// use kinformer_workqueue::{
///     default_controller_rate_limiter_with_clock, DelayingQueue, FakeClock, LOW_PRIORITY,
///     PriorityWorkQueue, Queue, QueueConfig,
/// };
///
/// let clock = FakeClock::new();
/// let queue = PriorityWorkQueue::with_config(
///     default_controller_rate_limiter_with_clock(clock.clone()),
///     QueueConfig::new().clock(clock.clone()),
/// );
/// // The initial list: every object at low priority.
/// for name in ["default/a", "default/b", "default/c"] {
///     queue.add_with_priority(name, LOW_PRIORITY);
/// }
/// // A real change, and a requeue for later at high priority.
/// queue.add("default/c"); // raised to 0: one entry
/// queue.add_after_with_priority("default/z", Duration::from_secs(1), 10);
///
/// assert_eq!(queue.get_with_priority(), Some(("default/c", 0)));
/// assert_eq!(queue.get(), Some("default/a"));
/// clock.step(Duration::from_secs(1)); // default/z is ready now and goes first
/// assert_eq!(queue.get_with_priority(), Some(("default/z", 10)));
/// assert_eq!(queue.get(), Some("default/b"));
/// ```
pub struct PriorityWorkQueue<T: Item, R = MaxOfRateLimiter<T>> {
    shared: Arc<Shared<T, R>>,
}

impl<T: Item, R> Clone for PriorityWorkQueue<T, R> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T: Item, R: fmt::Debug> fmt::Debug for PriorityWorkQueue<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state.lock();
        f.debug_struct("PriorityWorkQueue")
            .field("ready", &state.ready.len())
            .field("waiting", &state.waiting.len())
            .field("processing", &state.processing)
            .field("shutting_down", &state.shutting_down)
            .field("limiter", &self.shared.limiter)
            .finish_non_exhaustive()
    }
}

struct Shared<T, R> {
    state: Mutex<State<T>>,
    limiter: R,
    clock: Arc<dyn Clock>,
    /// Blocking getters wait here.
    items_ready: Condvar,
    /// `shut_down_with_drain` waits here.
    drained: Condvar,
    /// Rings the timer thread (an item became the earliest to wait); `None` when the clock
    /// drives firing.
    doorbell: Option<Sender<()>>,
    /// Whether a timer thread runs; if not, `add_after` fires an item already due itself.
    has_timer: AtomicBool,
    retries: Retries,
    /// The queue's name, for [`QueueStats`].
    name: String,
}

/// Where a ready item sits: higher priority first, then the earlier sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ReadyKey {
    priority: Reverse<i32>,
    seq: u64,
}

/// Where a waiting item sits: the earlier ready time first, then as among ready items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct WaitKey {
    at: Deadline,
    rank: ReadyKey,
}

/// What is asked of an item that is queued or waiting (or both held and added again).
#[derive(Debug, Clone, Copy)]
struct Pending {
    priority: i32,
    /// Its place among items of its priority: taken when it became ready (or was raised).
    seq: u64,
    /// `None`: ready.
    at: Option<Deadline>,
}

impl Pending {
    fn ready_key(&self) -> ReadyKey {
        ReadyKey {
            priority: Reverse(self.priority),
            seq: self.seq,
        }
    }

    fn wait_key(&self, at: Deadline) -> WaitKey {
        WaitKey {
            at,
            rank: self.ready_key(),
        }
    }
}

/// One item's state: held by a worker or not, and what is pending for it.
#[derive(Debug, Clone, Copy)]
struct Entry {
    held: bool,
    /// `None` with `held`: held and not added again (client-go's processing, not dirty).
    pending: Option<Pending>,
}

struct State<T> {
    entries: HashMap<T, Entry>,
    /// Ready items not held by a worker: what `get` hands out, first key first.
    ready: BTreeMap<ReadyKey, T>,
    /// Items waiting for their ready time, held or not.
    waiting: BTreeMap<WaitKey, T>,
    next_seq: u64,
    processing: usize,
    shutting_down: bool,
    drain: bool,
    /// Threads blocked in `get`.
    sleepers: usize,
    /// Threads blocked in `shut_down_with_drain`.
    drain_sleepers: usize,
    async_waiters: VecDeque<(u64, Waker)>,
    next_waiter: u64,
    metrics: Option<QueueMetrics<T>>,
}

/// Wake-ups decided under the lock and issued after it is released.
#[must_use]
#[derive(Default)]
struct Wake {
    threads: usize,
    wakers: Vec<Waker>,
}

impl Wake {
    fn run(self, condvar: &Condvar) {
        for _ in 0..self.threads {
            condvar.notify_one();
        }
        for waker in self.wakers {
            waker.wake();
        }
    }
}

impl<T: Item> State<T> {
    fn seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// One more item can be handed out: wake one sleeping thread and one parked task (a mix
    /// of thread and task getters never loses a wake-up; the extra one waits again).
    fn wake_one(&mut self, wake: &mut Wake) {
        if self.sleepers > wake.threads {
            wake.threads += 1;
        }
        if let Some((_, waker)) = self.async_waiters.pop_front() {
            wake.wakers.push(waker);
        }
    }

    /// Puts `pending` where it belongs for an item that is not held: the ready map (waking
    /// a getter) or the waiting map.
    fn place(&mut self, item: T, pending: Pending, wake: &mut Wake) {
        match pending.at {
            None => {
                self.ready.insert(pending.ready_key(), item);
                self.wake_one(wake);
            }
            Some(at) => {
                self.waiting.insert(pending.wait_key(at), item);
            }
        }
    }

    /// controller-runtime's `AddWithOpts` for one item, with `at` its ready time (`None`:
    /// now). Returns whether the item is now the earliest waiting one (the timer must be
    /// rung).
    fn add(&mut self, item: T, priority: i32, at: Option<Deadline>, wake: &mut Wake) -> bool {
        if self.shutting_down {
            return false;
        }
        let seq = self.next_seq;
        let entry = match self.entries.entry(item) {
            hash_map::Entry::Vacant(vacant) => {
                let item = vacant.key().clone();
                let pending = Pending { priority, seq, at };
                vacant.insert(Entry {
                    held: false,
                    pending: Some(pending),
                });
                self.next_seq += 1;
                if at.is_none()
                    && let Some(metrics) = &mut self.metrics
                {
                    metrics.add(&item, priority);
                }
                self.place(item, pending, wake);
                return at.is_some() && self.is_earliest(at);
            }
            hash_map::Entry::Occupied(occupied) => occupied,
        };
        let Entry { held, pending } = *entry.get();
        let item = entry.key().clone();
        let Some(old) = pending else {
            // Held, not added since it was handed out: dirty now (or waiting), queued by
            // `done` unless waiting then.
            entry.into_mut().pending = Some(Pending { priority, seq, at });
            self.next_seq += 1;
            match at {
                None => {
                    if let Some(metrics) = &mut self.metrics {
                        metrics.add(&item, priority);
                    }
                    return false;
                }
                Some(at) => {
                    let key = WaitKey {
                        at,
                        rank: ReadyKey {
                            priority: Reverse(priority),
                            seq,
                        },
                    };
                    self.waiting.insert(key, item);
                    return self.is_earliest(Some(at));
                }
            }
        };
        // Queued or waiting already: one entry, the higher priority, the earlier ready time.
        let at = match (old.at, at) {
            (None, _) | (_, None) => None,
            (Some(old_at), Some(new_at)) => Some(old_at.min(new_at)),
        };
        let raised = priority > old.priority;
        let becomes_ready = old.at.is_some() && at.is_none();
        if !raised && old.at == at {
            return false;
        }
        let new = Pending {
            priority: priority.max(old.priority),
            // A raised item goes behind those already ready at its new priority
            // (controller-runtime); one that becomes ready now goes behind those ready
            // before it.
            seq: if raised || becomes_ready {
                self.seq()
            } else {
                old.seq
            },
            at,
        };
        if let Some(entry) = self.entries.get_mut(&item) {
            entry.pending = Some(new);
        }
        if let Some(metrics) = &mut self.metrics {
            if becomes_ready {
                metrics.add(&item, new.priority);
            } else if old.at.is_none() {
                metrics.reprioritize(old.priority, new.priority);
            }
        }
        match old.at {
            Some(old_at) => {
                self.waiting.remove(&old.wait_key(old_at));
            }
            None if !held => {
                self.ready.remove(&old.ready_key());
            }
            // Held and dirty: in no map until `done`.
            None => return false,
        }
        if held {
            if let Some(at) = new.at {
                self.waiting.insert(new.wait_key(at), item);
                return self.is_earliest(new.at);
            }
            return false;
        }
        self.place(item, new, wake);
        self.is_earliest(new.at)
    }

    /// Whether `at` is the earliest ready time waiting.
    fn is_earliest(&self, at: Option<Deadline>) -> bool {
        at.is_some() && self.waiting.first_key_value().map(|(key, _)| key.at) == at
    }

    /// Hands out the first ready item with its priority.
    fn take(&mut self) -> Option<(T, i32)> {
        let (key, item) = self.ready.pop_first()?;
        let priority = key.priority.0;
        if let Some(entry) = self.entries.get_mut(&item) {
            entry.held = true;
            entry.pending = None;
        }
        self.processing += 1;
        if let Some(metrics) = &mut self.metrics {
            metrics.get(&item, priority);
        }
        Some((item, priority))
    }

    fn done(&mut self, item: &T, wake: &mut Wake) {
        let Some(entry) = self.entries.get_mut(item) else {
            return;
        };
        if !entry.held {
            // Not handed out: nothing to finish (as the other queues).
            return;
        }
        entry.held = false;
        self.processing -= 1;
        if let Some(metrics) = &mut self.metrics {
            metrics.done(item);
        }
        match entry.pending {
            None => {
                self.entries.remove(item);
            }
            // Added while held: ready now, in the place its add gave it.
            Some(pending @ Pending { at: None, .. }) => {
                self.ready.insert(pending.ready_key(), item.clone());
                self.wake_one(wake);
            }
            // Waiting: already in the waiting map; its ready time queues it.
            Some(_) => {}
        }
    }

    /// Moves every item due at `now` to the ready map (or marks it dirty if held), each
    /// behind the items ready before it. Returns the next ready time left.
    fn fire_due(&mut self, now: Instant, wake: &mut Wake) -> Option<Deadline> {
        while let Some(entry) = self.waiting.first_entry() {
            if entry.key().at > Deadline::At(now) {
                return Some(entry.key().at);
            }
            let (key, item) = entry.remove_entry();
            let seq = self.seq();
            let pending = Pending {
                priority: key.rank.priority.0,
                seq,
                at: None,
            };
            let held = match self.entries.get_mut(&item) {
                Some(entry) => {
                    entry.pending = Some(pending);
                    entry.held
                }
                None => continue,
            };
            if let Some(metrics) = &mut self.metrics {
                metrics.add(&item, pending.priority);
            }
            if !held {
                self.place(item, pending, wake);
            }
        }
        None
    }

    /// Starts a shutdown: waiting items are dropped; returns the parked wakers to wake.
    fn begin_shutdown(&mut self, drain: bool) -> VecDeque<(u64, Waker)> {
        self.shutting_down = true;
        self.drain = drain;
        for (_, item) in std::mem::take(&mut self.waiting) {
            let hash_map::Entry::Occupied(mut entry) = self.entries.entry(item) else {
                continue;
            };
            if entry.get().held {
                entry.get_mut().pending = None;
            } else {
                entry.remove();
            }
        }
        std::mem::take(&mut self.async_waiters)
    }
}

impl<T: Item, R: RateLimiter<T> + 'static> PriorityWorkQueue<T, R> {
    /// An unnamed priority queue on the real clock, retrying with `limiter` (usually
    /// [`default_controller_rate_limiter`](crate::default_controller_rate_limiter), as
    /// controller-runtime's controllers do).
    pub fn new(limiter: R) -> Self {
        Self::with_config(limiter, QueueConfig::new())
    }

    /// A priority queue built from `config`: its name labels the metrics, its clock times
    /// delays and the metrics. The limiter keeps its own clock: give it the same one (see
    /// [`default_controller_rate_limiter_with_clock`](crate::default_controller_rate_limiter_with_clock)).
    pub fn with_config(limiter: R, config: QueueConfig) -> Self {
        let provider = if config.name.is_empty() {
            None
        } else {
            resolve_provider(config.metrics.as_ref())
        };
        let metrics = provider.as_ref().map(|provider| {
            QueueMetrics::with_priority(&**provider, &config.name, config.clock.clone())
        });
        let retries = Retries::new(config.metrics.as_ref(), &config.name);
        let clock = config.clock;
        let mut rings = None;
        let shared = Arc::new_cyclic(|weak: &Weak<Shared<T, R>>| {
            let clock_driven = clock.subscribe(weak.clone() as Weak<dyn TimeListener>);
            let doorbell = (!clock_driven).then(|| {
                let (doorbell, receiver) = crossbeam_channel::bounded(1);
                rings = Some(receiver);
                doorbell
            });
            Shared {
                state: Mutex::new(State {
                    entries: HashMap::default(),
                    ready: BTreeMap::new(),
                    waiting: BTreeMap::new(),
                    next_seq: 0,
                    processing: 0,
                    shutting_down: false,
                    drain: false,
                    sleepers: 0,
                    drain_sleepers: 0,
                    async_waiters: VecDeque::new(),
                    next_waiter: 0,
                    metrics,
                }),
                limiter,
                clock: clock.clone(),
                items_ready: Condvar::new(),
                drained: Condvar::new(),
                doorbell,
                has_timer: AtomicBool::new(false),
                retries,
                name: config.name.clone(),
            }
        });
        if let Some(rings) = rings
            && spawn_timer(Arc::downgrade(&shared), rings, &config.name)
        {
            shared.has_timer.store(true, AtomicOrdering::Release);
        }
        Self { shared }
    }

    /// How many items wait for their ready time (not counted by [`len`](Queue::len)).
    pub fn waiting_len(&self) -> usize {
        self.shared.state.lock().waiting.len()
    }

    /// Readies every waiting item whose time has come by the queue's clock, and returns how
    /// many there were. The timer thread, or a [`FakeClock`](crate::FakeClock)'s step, does
    /// this by itself; call it when driving a clock of your own.
    pub fn fire_due(&self) -> usize {
        let before = self.waiting_len();
        self.shared.fire_due();
        before.saturating_sub(self.waiting_len())
    }

    /// The rate limiter.
    pub fn limiter(&self) -> &R {
        &self.shared.limiter
    }
}

/// The timer thread on a real clock: readies due items, refreshes the unfinished-work
/// gauges every 500 ms for a named queue, and sleeps until the earliest ready time (at most
/// 10 s) or a ring. It holds only a `Weak` in between, so it ends when the queue is shut down
/// or its last handle dropped (the doorbell disconnects).
fn spawn_timer<T: Item, R: RateLimiter<T> + 'static>(
    weak: Weak<Shared<T, R>>,
    rings: Receiver<()>,
    name: &str,
) -> bool {
    let spawned = thread::Builder::new()
        .name(crate::thread_name("wq-priority", name))
        .spawn(move || {
            let mut next_refresh = Instant::now();
            loop {
                let wait = {
                    let Some(shared) = weak.upgrade() else {
                        return;
                    };
                    let next = shared.fire_due();
                    let now = shared.clock.now();
                    let mut wait = match next {
                        Some(Deadline::At(at)) => at.saturating_duration_since(now).min(MAX_WAIT),
                        Some(Deadline::Never) | None => MAX_WAIT,
                    };
                    let mut state = shared.state.lock();
                    if state.shutting_down {
                        return;
                    }
                    if let Some(metrics) = &mut state.metrics {
                        let real_now = Instant::now();
                        if real_now >= next_refresh {
                            metrics.update_unfinished_work();
                            next_refresh = real_now + UNFINISHED_WORK_UPDATE_PERIOD;
                        }
                        wait = wait.min(next_refresh.saturating_duration_since(real_now));
                    }
                    wait
                };
                if let Err(RecvTimeoutError::Disconnected) = rings.recv_timeout(wait) {
                    return;
                }
            }
        });
    match spawned {
        Ok(_) => true,
        Err(error) => {
            tracing::error!(%error, queue = name, "cannot start the priority queue's timer thread; due items are readied on later add_after calls only");
            false
        }
    }
}

impl<T: Item, R> Shared<T, R> {
    /// Readies due items; returns the next ready time left.
    fn fire_due(&self) -> Option<Deadline> {
        let now = self.clock.now();
        let mut wake = Wake::default();
        let next = self.state.lock().fire_due(now, &mut wake);
        wake.run(&self.items_ready);
        next
    }

    fn ring(&self) {
        if let Some(doorbell) = &self.doorbell {
            match doorbell.try_send(()) {
                Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
            }
        }
    }

    fn add(&self, item: T, priority: i32, delay: Duration) {
        let at = (!delay.is_zero()).then(|| {
            self.clock
                .now()
                .checked_add(delay)
                .map_or(Deadline::Never, Deadline::At)
        });
        let mut wake = Wake::default();
        let earliest = self.state.lock().add(item, priority, at, &mut wake);
        wake.run(&self.items_ready);
        if earliest {
            self.ring();
        }
        if let Some(at) = at
            && !self.has_timer.load(AtomicOrdering::Acquire)
            && at <= Deadline::At(self.clock.now())
        {
            // Clock-driven (or no timer thread): the clock may have passed the ready time
            // since it was read, and no later step may come to ready it.
            self.fire_due();
        }
    }

    fn shut_down(&self, drain: bool) {
        let wakers = self.state.lock().begin_shutdown(drain);
        self.items_ready.notify_all();
        self.drained.notify_all();
        for (_, waker) in wakers {
            waker.wake();
        }
        self.ring();
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock()
    }

    fn poll_take(&self, cx: &mut Context<'_>, waiter: &mut Option<u64>) -> Poll<Option<(T, i32)>> {
        let mut state = self.lock();
        let taken = state.take();
        if taken.is_some() || state.shutting_down {
            if let Some(id) = waiter.take() {
                state.async_waiters.retain(|(other, _)| *other != id);
            }
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

    fn cancel(&self, waiter: u64) {
        let mut state = self.lock();
        if let Some(position) = state.async_waiters.iter().position(|(id, _)| *id == waiter) {
            state.async_waiters.remove(position);
            return;
        }
        // Woken for an item and going away without taking it: pass the wake-up on.
        if state.ready.is_empty() {
            return;
        }
        let mut wake = Wake::default();
        state.wake_one(&mut wake);
        drop(state);
        wake.run(&self.items_ready);
    }
}

impl<T: Item, R: Send + Sync> TimeListener for Shared<T, R> {
    fn time_advanced(&self, _now: Instant) {
        self.fire_due();
        let mut state = self.lock();
        if !state.shutting_down
            && let Some(metrics) = &mut state.metrics
        {
            metrics.update_unfinished_work();
        }
    }
}

impl<T: Item, R: Send + Sync> AsyncGet<T> for Shared<T, R> {
    fn poll_get(&self, cx: &mut Context<'_>, waiter: &mut Option<u64>) -> Poll<Option<T>> {
        self.poll_take(cx, waiter)
            .map(|taken| taken.map(|(item, _)| item))
    }
    fn cancel_get(&self, waiter: u64) {
        self.cancel(waiter);
    }
}

impl<T: Item, R: Send + Sync> AsyncGet<(T, i32)> for Shared<T, R> {
    fn poll_get(&self, cx: &mut Context<'_>, waiter: &mut Option<u64>) -> Poll<Option<(T, i32)>> {
        self.poll_take(cx, waiter)
    }
    fn cancel_get(&self, waiter: u64) {
        self.cancel(waiter);
    }
}

impl<T: Item, R: RateLimiter<T> + 'static> Queue<T> for PriorityWorkQueue<T, R> {
    fn add(&self, item: T) {
        self.shared.add(item, 0, Duration::ZERO);
    }

    /// Adds `item` now with `priority`: a new entry, or the one it has raised to the higher
    /// priority and made ready now.
    fn add_with_priority(&self, item: T, priority: i32) {
        self.shared.add(item, priority, Duration::ZERO);
    }

    fn len(&self) -> usize {
        self.shared.lock().ready.len()
    }

    fn get(&self) -> Option<T> {
        self.get_with_priority().map(|(item, _)| item)
    }

    fn get_with_priority(&self) -> Option<(T, i32)> {
        let shared = &*self.shared;
        let mut state = shared.lock();
        loop {
            if let Some(taken) = state.take() {
                return Some(taken);
            }
            if state.shutting_down {
                return None;
            }
            state.sleepers += 1;
            shared.items_ready.wait(&mut state);
            state.sleepers -= 1;
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
        let mut wake = Wake::default();
        let mut state = self.shared.lock();
        state.done(item, &mut wake);
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
        let mut state = self.shared.lock();
        while state.processing != 0 && state.drain {
            state.drain_sleepers += 1;
            self.shared.drained.wait(&mut state);
            state.drain_sleepers -= 1;
        }
    }

    fn shutting_down(&self) -> bool {
        self.shared.lock().shutting_down
    }

    /// With the depth by priority: one pass over the ready items, under the queue's lock.
    fn stats(&self) -> QueueStats {
        let state = self.shared.lock();
        let mut depth_by_priority: Vec<(i32, usize)> = Vec::new();
        // Ready keys sort by priority, highest first: equal priorities are adjacent.
        for key in state.ready.keys() {
            match depth_by_priority.last_mut() {
                Some((priority, n)) if *priority == key.priority.0 => *n += 1,
                _ => depth_by_priority.push((key.priority.0, 1)),
            }
        }
        let unfinished = state.metrics.as_ref().map(QueueMetrics::unfinished_work);
        QueueStats {
            name: self.shared.name.clone(),
            depth: state.ready.len(),
            depth_by_priority,
            processing: state.processing,
            waiting: state.waiting.len(),
            retries: self.shared.retries.get(),
            unfinished_work: unfinished.map(|(total, _)| total),
            longest_running_processor: unfinished.map(|(_, oldest)| oldest),
            shutting_down: state.shutting_down,
        }
    }
}

impl<T: Item, R: RateLimiter<T> + 'static> DelayingQueue<T> for PriorityWorkQueue<T, R> {
    fn add_after(&self, item: T, delay: Duration) {
        self.add_after_with_priority(item, delay, 0);
    }

    /// Adds `item` with `priority` once `delay` has passed (at once for a zero delay). An
    /// item already queued stays ready; one already waiting keeps the earlier ready time.
    fn add_after_with_priority(&self, item: T, delay: Duration, priority: i32) {
        if self.shared.lock().shutting_down {
            return;
        }
        self.shared.retries.inc();
        self.shared.add(item, priority, delay);
    }
}

impl<T: Item, R: RateLimiter<T> + 'static> RateLimitingQueue<T> for PriorityWorkQueue<T, R> {
    fn add_rate_limited(&self, item: T) {
        self.add_rate_limited_with_priority(item, 0);
    }

    fn add_rate_limited_with_priority(&self, item: T, priority: i32) {
        let delay = self.shared.limiter.when(&item);
        self.add_after_with_priority(item, delay, priority);
    }

    fn forget(&self, item: &T) {
        self.shared.limiter.forget(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.shared.limiter.num_requeues(item)
    }
}
