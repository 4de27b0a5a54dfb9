//! The rate-limited layer: `add_rate_limited`, `forget`, `num_requeues`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::{
    DelayingQueue, DelayingWorkQueue, GetFuture, Item, MaxOfRateLimiter, Queue, QueueConfig,
    QueueStats, RateLimiter,
};

/// A [`DelayingQueue`] that asks a [`RateLimiter`] how long to wait: client-go's
/// `TypedRateLimitingInterface`, the queue a controller's workers use.
///
/// Why a trait: a controller's worker loop (`get`, reconcile, then `forget` + `done` or
/// `add_rate_limited` + `done`) is written against this, and tests swap in their own.
/// [`RateLimitingWorkQueue`] is the default.
pub trait RateLimitingQueue<T>: DelayingQueue<T> {
    /// Adds `item` after the delay its rate limiter gives now (counting one more retry).
    fn add_rate_limited(&self, item: T);
    /// [`add_rate_limited`](RateLimitingQueue::add_rate_limited) with a priority for when the
    /// item is ready (controller-runtime's `AddWithOpts{RateLimited, Priority}`): a worker
    /// retries a failed item at the priority it was handed out with. Required (see
    /// [`Queue::add_with_priority`]); a queue without priorities calls `add_rate_limited`.
    fn add_rate_limited_with_priority(&self, item: T, priority: i32);
    /// Clears the rate limiter's memory of `item`; the item must still be marked
    /// [`done`](Queue::done) on the queue.
    fn forget(&self, item: &T);
    /// How many times `item` was retried since it was last forgotten.
    fn num_requeues(&self, item: &T) -> usize;
}

macro_rules! forward_rate_limiting {
    ($($ty:ty),*) => {$(
        impl<T, Q: RateLimitingQueue<T> + ?Sized> RateLimitingQueue<T> for $ty {
            fn add_rate_limited(&self, item: T) {
                (**self).add_rate_limited(item)
            }
            fn add_rate_limited_with_priority(&self, item: T, priority: i32) {
                (**self).add_rate_limited_with_priority(item, priority)
            }
            fn forget(&self, item: &T) {
                (**self).forget(item)
            }
            fn num_requeues(&self, item: &T) -> usize {
                (**self).num_requeues(item)
            }
        }
    )*};
}

forward_rate_limiting!(Arc<Q>, Box<Q>, &Q);

/// The default [`RateLimitingQueue`]: a rate limiter over any [`DelayingQueue`] (by default
/// a [`DelayingWorkQueue`] over a [`WorkQueue`](crate::WorkQueue)). A cheap handle: clones
/// share the same queue and limiter.
///
/// ```
/// use std::time::Duration;
/// use kinformer_workqueue::{
///     default_controller_rate_limiter_with_clock, FakeClock, Queue, QueueConfig,
///     RateLimitingQueue, RateLimitingWorkQueue,
/// };
///
/// let clock = FakeClock::new();
/// let queue = RateLimitingWorkQueue::with_config(
///     default_controller_rate_limiter_with_clock(clock.clone()),
///     QueueConfig::new().clock(clock.clone()),
/// );
/// queue.add("key");
/// let key = queue.get().unwrap();
/// queue.add_rate_limited(key); // failed: retry in 5 ms
/// queue.done(&key);
/// assert_eq!(queue.len(), 0);
/// clock.step(Duration::from_millis(5));
/// assert_eq!(queue.get(), Some("key"));
/// assert_eq!(queue.num_requeues(&"key"), 1);
/// queue.forget(&"key"); // succeeded
/// queue.done(&"key");
/// ```
pub struct RateLimitingWorkQueue<T: Item, R = MaxOfRateLimiter<T>, D = DelayingWorkQueue<T>> {
    shared: Arc<RateShared<D, R>>,
    _item: std::marker::PhantomData<fn(T) -> T>,
}

struct RateShared<D, R> {
    queue: D,
    limiter: R,
}

impl<T: Item, R, D> Clone for RateLimitingWorkQueue<T, R, D> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            _item: std::marker::PhantomData,
        }
    }
}

impl<T: Item, R: fmt::Debug, D: fmt::Debug> fmt::Debug for RateLimitingWorkQueue<T, R, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingWorkQueue")
            .field("queue", &self.shared.queue)
            .field("limiter", &self.shared.limiter)
            .finish()
    }
}

impl<T: Item, R: RateLimiter<T>> RateLimitingWorkQueue<T, R> {
    /// An unnamed rate-limited queue on the real clock. Remember to `forget` items that
    /// succeeded, or per-item limiters remember their failures forever.
    pub fn new(limiter: R) -> Self {
        Self::with_config(limiter, QueueConfig::new())
    }

    /// A rate-limited queue over a new [`DelayingWorkQueue`] built from `config`. The
    /// limiter keeps its own clock: give it the same one (see
    /// [`default_controller_rate_limiter_with_clock`](crate::default_controller_rate_limiter_with_clock)).
    pub fn with_config(limiter: R, config: QueueConfig) -> Self {
        Self::wrap(DelayingWorkQueue::with_config(config), limiter)
    }
}

impl<T: Item, R: RateLimiter<T>, D: DelayingQueue<T>> RateLimitingWorkQueue<T, R, D> {
    /// Puts the rate-limited layer over `queue`.
    pub fn wrap(queue: D, limiter: R) -> Self {
        Self {
            shared: Arc::new(RateShared { queue, limiter }),
            _item: std::marker::PhantomData,
        }
    }

    /// The delaying queue beneath this layer.
    pub fn inner(&self) -> &D {
        &self.shared.queue
    }

    /// The rate limiter.
    pub fn limiter(&self) -> &R {
        &self.shared.limiter
    }
}

impl<T: Item, R: RateLimiter<T>, D: DelayingQueue<T>> Queue<T> for RateLimitingWorkQueue<T, R, D> {
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
    }
    fn shut_down_with_drain(&self) {
        self.shared.queue.shut_down_with_drain();
    }
    fn shutting_down(&self) -> bool {
        self.shared.queue.shutting_down()
    }
    fn stats(&self) -> QueueStats {
        self.shared.queue.stats()
    }
}

impl<T: Item, R: RateLimiter<T>, D: DelayingQueue<T>> DelayingQueue<T>
    for RateLimitingWorkQueue<T, R, D>
{
    fn add_after(&self, item: T, delay: Duration) {
        self.shared.queue.add_after(item, delay);
    }
    fn add_after_with_priority(&self, item: T, delay: Duration, priority: i32) {
        self.shared
            .queue
            .add_after_with_priority(item, delay, priority);
    }
}

impl<T: Item, R: RateLimiter<T>, D: DelayingQueue<T>> RateLimitingQueue<T>
    for RateLimitingWorkQueue<T, R, D>
{
    fn add_rate_limited(&self, item: T) {
        let delay = self.shared.limiter.when(&item);
        self.shared.queue.add_after(item, delay);
    }

    fn add_rate_limited_with_priority(&self, item: T, priority: i32) {
        let delay = self.shared.limiter.when(&item);
        self.shared
            .queue
            .add_after_with_priority(item, delay, priority);
    }

    fn forget(&self, item: &T) {
        self.shared.limiter.forget(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.shared.limiter.num_requeues(item)
    }
}
