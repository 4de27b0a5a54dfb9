//! Every queue layer and the rate limiter behind a minimal forwarding decorator, written
//! with the crate's forwarding macros, keeps what the layer does: the priority queue's order
//! and priorities through retries, the three layers' priorities through delays, the queue's
//! name and statistics, and the limiter's delays. A decorator that forwards only what the
//! traits require cannot lose any of it, because every call that carries a priority or a
//! statistic is required (the crate docs' rule for provided methods).

use std::future::Future;
use std::time::Duration;

use kinformer_workqueue::{
    DelayingQueue, DelayingWorkQueue, FakeClock, Item, ItemExponentialFailureRateLimiter,
    LOW_PRIORITY, PriorityStorage, PriorityWorkQueue, Queue, QueueConfig, RateLimiter,
    RateLimitingQueue, RateLimitingWorkQueue, WorkQueue, forward_delaying_queue, forward_queue,
    forward_rate_limiter, forward_rate_limiting_queue,
};

const MS: Duration = Duration::from_millis(1);

/// The decorator: every call forwarded, nothing changed. The model tests run the queues
/// behind it too (`model.rs`).
pub(crate) struct Forward<L> {
    inner: L,
}

impl<T: Item, Q: Queue<T>> Queue<T> for Forward<Q> {
    forward_queue!(T, inner: all);
}
impl<T: Item, Q: DelayingQueue<T>> DelayingQueue<T> for Forward<Q> {
    forward_delaying_queue!(T, inner: all);
}
impl<T: Item, Q: RateLimitingQueue<T>> RateLimitingQueue<T> for Forward<Q> {
    forward_rate_limiting_queue!(T, inner: all);
}
impl<T: Item, R: RateLimiter<T>> RateLimiter<T> for Forward<R> {
    forward_rate_limiter!(T, inner: all);
}

/// The item a `get` hands out now, with its priority; `None` where `get` would block (so a
/// wrong queue fails the test instead of hanging it).
fn take<Q: Queue<&'static str>>(queue: &Q) -> Option<(&'static str, i32)> {
    let mut future = queue.get_async_with_priority();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::Pin::new(&mut future).poll(&mut cx) {
        std::task::Poll::Ready(taken) => taken,
        std::task::Poll::Pending => None,
    }
}

pub(crate) fn forward<L>(inner: L) -> Forward<L> {
    Forward { inner }
}

fn limiter() -> Forward<ItemExponentialFailureRateLimiter<&'static str>> {
    forward(ItemExponentialFailureRateLimiter::new(
        5 * MS,
        Duration::from_secs(1),
    ))
}

/// What the rules below check, on any rate-limited queue that has priorities: order by
/// priority, a delayed add at its priority, a failed item retried at the priority it came
/// with after the limiter's delay, and the queue's name in its statistics.
fn keeps_priorities_and_name<Q: RateLimitingQueue<&'static str>>(queue: &Q, clock: &FakeClock) {
    queue.add_with_priority("initial", LOW_PRIORITY);
    queue.add("change");
    queue.add_after_with_priority("later", 10 * MS, 5);
    assert_eq!(take(queue), Some(("change", 0)));
    queue.done(&"change");
    clock.step(10 * MS);
    assert_eq!(take(queue), Some(("later", 5)));
    queue.done(&"later");
    let (item, priority) = take(queue).expect("the initial item");
    assert_eq!((item, priority), ("initial", LOW_PRIORITY));
    queue.add_rate_limited_with_priority(item, priority);
    queue.done(&item);
    assert_eq!(queue.num_requeues(&"initial"), 1);
    queue.add_with_priority("next", 1);
    clock.step(5 * MS); // the limiter's first delay
    assert_eq!(take(queue), Some(("next", 1)));
    assert_eq!(take(queue), Some(("initial", LOW_PRIORITY)));
    let stats = queue.stats();
    assert_eq!((stats.name.as_str(), stats.processing), ("decorated", 2));
}

#[test]
fn the_priority_queue_behind_a_forwarding_decorator_keeps_its_order_priorities_and_name() {
    let clock = FakeClock::new();
    let config = QueueConfig::new().clock(clock.clone()).name("decorated");
    let queue = forward(PriorityWorkQueue::with_config(limiter(), config));
    keeps_priorities_and_name(&queue, &clock);
}

#[test]
fn the_three_layers_behind_forwarding_decorators_keep_priorities_through_delays_and_retries() {
    let clock = FakeClock::new();
    let config = QueueConfig::new().clock(clock.clone()).name("decorated");
    let work = forward(WorkQueue::with_storage(
        PriorityStorage::new(),
        config.clone(),
    ));
    let delaying = forward(DelayingWorkQueue::wrap(work, config));
    let queue = forward(RateLimitingWorkQueue::wrap(delaying, limiter()));
    keeps_priorities_and_name(&queue, &clock);
}
