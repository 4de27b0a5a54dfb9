//! controller-runtime's priority queue, made of this crate's three layers over
//! [`PriorityStorage`].

use std::fmt;

use crate::{
    DelayingQueue, DelayingWorkQueue, Item, MaxOfRateLimiter, PriorityStorage, Queue, QueueConfig,
    RateLimiter, RateLimitingQueue, RateLimitingWorkQueue, WorkQueue, forward_delaying_queue,
    forward_queue, forward_rate_limiting_queue,
};

/// The priority controller-runtime's handlers give adds from an informer's initial list and
/// from resyncs (an update whose resourceVersion did not change): `handler.LowPriority`.
/// Below the default of 0, so that a real change waits behind none of them.
pub const LOW_PRIORITY: i32 = -100;

/// The three layers the priority queue is made of.
type Layers<T, R> =
    RateLimitingWorkQueue<T, R, DelayingWorkQueue<T, WorkQueue<T, PriorityStorage<T>>>>;

/// controller-runtime's default controller queue (`priorityqueue.PriorityQueue`): a
/// [`RateLimitingQueue`] that hands out the highest priority first, FIFO among equal
/// priorities by when each item became ready at its priority.
///
/// Why: a controller that starts (or resyncs) queues every object it watches. In a FIFO a
/// change made a second later waits behind all of them: with 10,000 objects listed, the
/// 10,001st `get`. Its handlers add those list and resync keys at [`LOW_PRIORITY`] and real
/// changes at 0, so the change is the next `get` (see BENCHMARKS.md, "workqueue priority").
///
/// It is this crate's three layers and nothing else: a [`RateLimitingWorkQueue`] over a
/// [`DelayingWorkQueue`] over [`WorkQueue::with_priorities`] (a [`PriorityStorage`] with the
/// depth by priority), each layer carrying the priority. So:
///
/// - [`add_with_priority`](Queue::add_with_priority) (plain [`add`](Queue::add): priority 0)
///   of a queued item keeps one entry with the higher of the two priorities (never
///   lowered); a raised item goes behind the items already ready at its new priority.
/// - [`add_after_with_priority`](DelayingQueue::add_after_with_priority) and
///   [`add_rate_limited_with_priority`](RateLimitingQueue::add_rate_limited_with_priority)
///   (the delay from the rate limiter) wait in the delaying layer until their ready time by
///   the queue's [`Clock`](crate::Clock) (one waiting entry per item: the earlier ready
///   time, the higher priority), then queue behind the items already ready at their
///   priority. **An add without delay does not cancel a waiting one**: the delayed add
///   still comes at its time, as with client-go's queues. controller-runtime's queue merges
///   the two into one entry ready now, which loses a controller's `RequeueAfter` when an
///   event for the same key comes first.
/// - An item held by a worker (between `get` and [`done`](Queue::done)) is never handed out
///   again before `done`; added meanwhile, it is queued again by `done`, once (client-go's
///   dirty and processing sets).
/// - [`shut_down`](Queue::shut_down) drops waiting items and ignores later adds; `get` still
///   hands out what is ready, then returns `None` (the other queues' rules).
///
/// Swapping one part keeps the rest: [`with_config`](Self::with_config) takes any
/// [`RateLimiter`] and keeps the order, the name and the metrics (client-go's seven, the
/// depth labelled by priority when the provider supports it:
/// [`MetricsProvider::new_depth_with_priority_metric`](crate::MetricsProvider::new_depth_with_priority_metric));
/// other layers are composed by hand the same way ([`RateLimitingWorkQueue::wrap`],
/// [`DelayingWorkQueue::wrap`]).
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
    layers: Layers<T, R>,
}

impl<T: Item, R> Clone for PriorityWorkQueue<T, R> {
    fn clone(&self) -> Self {
        Self {
            layers: self.layers.clone(),
        }
    }
}

impl<T: Item, R: fmt::Debug> fmt::Debug for PriorityWorkQueue<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PriorityWorkQueue")
            .field("layers", &self.layers)
            .finish()
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
        let base = WorkQueue::with_priorities(config.clone());
        Self {
            layers: RateLimitingWorkQueue::wrap(DelayingWorkQueue::wrap(base, config), limiter),
        }
    }

    /// How many items wait for their ready time (not counted by [`len`](Queue::len)).
    pub fn waiting_len(&self) -> usize {
        self.layers.inner().waiting_len()
    }

    /// Readies every waiting item whose time has come by the queue's clock, and returns how
    /// many there were. The timer thread, or a [`FakeClock`](crate::FakeClock)'s step, does
    /// this by itself; call it when driving a clock of your own.
    pub fn fire_due(&self) -> usize {
        self.layers.inner().fire_due()
    }

    /// The rate limiter.
    pub fn limiter(&self) -> &R {
        self.layers.limiter()
    }
}

impl<T: Item, R: RateLimiter<T> + 'static> Queue<T> for PriorityWorkQueue<T, R> {
    forward_queue!(T, layers: all);
}

impl<T: Item, R: RateLimiter<T> + 'static> DelayingQueue<T> for PriorityWorkQueue<T, R> {
    forward_delaying_queue!(T, layers: all);
}

impl<T: Item, R: RateLimiter<T> + 'static> RateLimitingQueue<T> for PriorityWorkQueue<T, R> {
    forward_rate_limiting_queue!(T, layers: all);
}
