//! Bad input never panics, and every swap point takes a non-default implementation through
//! the public API.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use kinformer_workqueue::{
    BucketRateLimiter, Clock, DelayingQueue, DelayingWorkQueue, Error, FakeClock, GetFuture,
    ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter,
    NoopMetricsProvider, PriorityStorage, Queue, QueueConfig, QueueStats, RateLimiter,
    RateLimitingQueue, RateLimitingWorkQueue, TimeListener, WithMaxWaitRateLimiter, WorkQueue,
    default_controller_rate_limiter, set_metrics_provider,
};

const MS: Duration = Duration::from_millis(1);

// Bad input ----------------------------------------------------------------------------------

#[test]
fn add_after_with_an_unrepresentable_delay_waits_forever_without_panicking() {
    let clock = FakeClock::new();
    let queue = DelayingWorkQueue::with_config(QueueConfig::new().clock(clock.clone()));
    queue.add_after("never", Duration::MAX);
    queue.add_after("soon", MS);
    clock.step(Duration::from_secs(3600 * 24 * 365 * 100));
    assert_eq!(queue.get(), Some("soon"));
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.waiting_len(), 1);
    queue.add_after("never", MS); // an earlier time replaces "never"
    clock.step(MS);
    assert_eq!(queue.get(), Some("never"));

    let real = DelayingWorkQueue::new();
    real.add_after(1u8, Duration::MAX);
    real.add_after(2u8, Duration::from_secs(u64::MAX));
    assert_eq!(real.waiting_len(), 2);
    real.shut_down();
}

#[test]
fn queue_names_with_odd_characters_are_fine() {
    for name in [
        "with\0nul",
        "spaces and / slashes",
        "ünïcödé",
        &"long".repeat(100),
    ] {
        let queue = DelayingWorkQueue::with_config(
            QueueConfig::new()
                .name(name)
                .metrics_provider(Arc::new(NoopMetricsProvider)),
        );
        queue.add_after(1u8, MS);
        assert_eq!(queue.get(), Some(1));
        queue.shut_down();
    }
}

#[test]
fn limiters_survive_extreme_arguments() {
    let huge = ItemExponentialFailureRateLimiter::new(Duration::MAX, Duration::MAX);
    for _ in 0..200 {
        assert_eq!(huge.when(&1u8), Duration::MAX);
    }
    let zero = ItemExponentialFailureRateLimiter::new(Duration::ZERO, Duration::ZERO);
    for _ in 0..200 {
        assert_eq!(zero.when(&1u8), Duration::ZERO);
    }
    let inverted = ItemExponentialFailureRateLimiter::new(Duration::from_secs(10), MS);
    assert_eq!(
        inverted.when(&1u8),
        MS,
        "a base above the cap gives the cap"
    );

    let fast_slow = ItemFastSlowRateLimiter::new(Duration::MAX, Duration::ZERO, u64::MAX);
    assert_eq!(fast_slow.when(&1u8), Duration::MAX);
    let never_fast = ItemFastSlowRateLimiter::new(MS, Duration::from_secs(1), 0);
    assert_eq!(never_fast.when(&1u8), Duration::from_secs(1));

    let empty: MaxOfRateLimiter<u8> = MaxOfRateLimiter::new(Vec::new());
    assert_eq!(empty.when(&1), Duration::ZERO);
    assert_eq!(empty.num_requeues(&1), 0);
    empty.forget(&1);

    let capped = WithMaxWaitRateLimiter::new(huge, Duration::ZERO);
    assert_eq!(capped.when(&1u8), Duration::ZERO);
    assert_eq!(capped.num_requeues(&1u8), 201);
}

#[test]
fn bucket_limiter_edge_parameters_follow_rate_limiter() {
    let when = |qps: f64, burst: u32| {
        let limiter = BucketRateLimiter::with_clock(qps, burst, FakeClock::new());
        (0..3)
            .map(|_| RateLimiter::<u8>::when(&limiter, &0))
            .collect::<Vec<_>>()
    };
    let zero = Duration::ZERO;
    let never = Duration::MAX;
    assert_eq!(when(f64::INFINITY, 0), [zero, zero, zero], "infinite rate");
    assert_eq!(when(1e300, 1), [zero, zero, zero], "1/qps rounds to zero");
    assert_eq!(
        when(0.0, 2),
        [zero, zero, never],
        "no refill: the burst, then never"
    );
    assert_eq!(when(-5.0, 1), [zero, never, never]);
    assert_eq!(when(f64::NAN, 0), [never, never, never]);
    assert_eq!(
        when(f64::MIN_POSITIVE, 1),
        [zero, never, never],
        "1/qps overflows"
    );
    assert_eq!(when(10.0, 0), [never, never, never], "burst zero");
    assert_eq!(
        when(0.5, 1),
        [zero, Duration::from_secs(2), Duration::from_secs(4)],
        "fractional rates"
    );
}

#[test]
fn done_of_an_item_never_got_is_ignored() {
    let queue = WorkQueue::new();
    queue.done(&"ghost");
    queue.add("a");
    queue.done(&"a"); // queued, not held: client-go would queue it twice
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get(), Some("a"));
    queue.done(&"a");
    queue.done(&"a");
    assert_eq!(queue.len(), 0);
    queue.shut_down();
    assert_eq!(queue.get(), None);
}

#[test]
fn operations_after_shutdown_are_harmless() {
    let clock = FakeClock::new();
    let queue = RateLimitingWorkQueue::with_config(
        default_controller_rate_limiter_for_tests(&clock),
        QueueConfig::new().clock(clock.clone()),
    );
    queue.add("held");
    let held = queue.get().unwrap();
    queue.shut_down();
    queue.shut_down();
    queue.add("a");
    queue.add_with_priority("b", 9);
    queue.add_after("c", MS);
    queue.add_rate_limited("d");
    clock.step(Duration::from_secs(10));
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.get(), None);
    queue.done(&held);
    queue.forget(&held);
    assert_eq!(
        queue.num_requeues(&"d"),
        1,
        "the limiter still counted the retry"
    );
    queue.shut_down_with_drain();
    assert!(queue.shutting_down());
}

fn default_controller_rate_limiter_for_tests(clock: &FakeClock) -> MaxOfRateLimiter<&'static str> {
    kinformer_workqueue::default_controller_rate_limiter_with_clock(clock.clone())
}

#[test]
fn shut_down_with_drain_on_an_idle_queue_returns_at_once() {
    let queue: WorkQueue<u8> = WorkQueue::new();
    queue.add(1);
    queue.shut_down_with_drain(); // nothing held: returns, queued items stay for getters
    assert_eq!(queue.get(), Some(1));
    queue.done(&1);
    assert_eq!(queue.get(), None);
}

#[test]
fn global_metrics_provider_can_be_set_only_once() {
    let first = set_metrics_provider(Arc::new(NoopMetricsProvider));
    let second = set_metrics_provider(Arc::new(NoopMetricsProvider));
    assert!(first.is_ok() || first == Err(Error::MetricsProviderAlreadySet));
    assert_eq!(second, Err(Error::MetricsProviderAlreadySet));
    // A named queue on the (no-op) global provider works as any other.
    let queue = WorkQueue::with_config(QueueConfig::new().name("global"));
    queue.add(1);
    assert_eq!(queue.get(), Some(1));
}

#[test]
fn the_default_limiter_works_on_the_real_clock() {
    let limiter = default_controller_rate_limiter::<u32>();
    assert_eq!(limiter.when(&1), 5 * MS);
    assert_eq!(limiter.num_requeues(&1), 1);
}

// Swap points --------------------------------------------------------------------------------

#[test]
fn priority_storage_hands_out_higher_priority_first_and_fifo_within() {
    let queue = WorkQueue::with_storage(PriorityStorage::new(), QueueConfig::new());
    queue.add("low-1");
    queue.add_with_priority("high-1", 10);
    queue.add("low-2");
    queue.add_with_priority("high-2", 10);
    queue.add_with_priority("low-2", 20); // raised while queued
    queue.add_with_priority("high-1", -3); // never lowered
    let order: Vec<_> = (0..4).map(|_| queue.get().unwrap()).collect();
    assert_eq!(order, ["low-2", "high-1", "high-2", "low-1"]);
}

#[test]
fn priority_survives_a_requeue_by_done() {
    let queue = WorkQueue::with_storage(PriorityStorage::new(), QueueConfig::new());
    queue.add("held");
    let held = queue.get().unwrap();
    queue.add_with_priority("held", 1);
    queue.add_with_priority("held", 7); // the highest asked while held wins
    queue.add_with_priority("other", 5);
    queue.done(&held);
    assert_eq!(queue.get(), Some("held"));
    assert_eq!(queue.get(), Some("other"));
}

/// A limiter of our own: a fixed delay per item kind.
struct PerPrefix {
    calls: AtomicUsize,
}

impl RateLimiter<String> for PerPrefix {
    fn when(&self, item: &String) -> Duration {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if item.starts_with("slow/") {
            Duration::from_secs(60)
        } else {
            MS
        }
    }
    fn forget(&self, _: &String) {}
    fn num_requeues(&self, _: &String) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[test]
fn custom_rate_limiter_drives_add_rate_limited() {
    let clock = FakeClock::new();
    let queue = RateLimitingWorkQueue::with_config(
        PerPrefix {
            calls: AtomicUsize::new(0),
        },
        QueueConfig::new().clock(clock.clone()),
    );
    queue.add_rate_limited("fast/a".to_string());
    queue.add_rate_limited("slow/b".to_string());
    clock.step(MS);
    assert_eq!(queue.get().as_deref(), Some("fast/a"));
    assert_eq!(queue.len(), 0);
    clock.step(Duration::from_secs(60));
    assert_eq!(queue.get().as_deref(), Some("slow/b"));
    assert_eq!(queue.num_requeues(&"x".to_string()), 2);
}

/// A queue of our own (a mutex around a VecDeque, no dedup) with a blocking-free get.
#[derive(Default)]
struct PlainQueue {
    items: Mutex<VecDeque<u32>>,
    adds: AtomicUsize,
    down: Mutex<bool>,
}

impl Queue<u32> for PlainQueue {
    fn add(&self, item: u32) {
        if !*self.down.lock().unwrap() {
            self.adds.fetch_add(1, Ordering::SeqCst);
            self.items.lock().unwrap().push_back(item);
        }
    }
    fn len(&self) -> usize {
        self.items.lock().unwrap().len()
    }
    fn get(&self) -> Option<u32> {
        self.items.lock().unwrap().pop_front()
    }
    fn get_async(&self) -> GetFuture<'_, u32> {
        let item = self.get();
        GetFuture::from_future(async move { item })
    }
    fn add_with_priority(&self, item: u32, _: i32) {
        self.add(item);
    }
    fn get_with_priority(&self) -> Option<(u32, i32)> {
        self.get().map(|item| (item, 0))
    }
    fn get_async_with_priority(&self) -> GetFuture<'_, (u32, i32)> {
        self.get_async().with_priority_zero()
    }
    fn stats(&self) -> QueueStats {
        QueueStats::basic(self.len(), self.shutting_down())
    }
    fn done(&self, _: &u32) {}
    fn shut_down(&self) {
        *self.down.lock().unwrap() = true;
    }
    fn shut_down_with_drain(&self) {
        self.shut_down();
    }
    fn shutting_down(&self) -> bool {
        *self.down.lock().unwrap()
    }
}

#[test]
fn delaying_layer_wraps_a_custom_queue() {
    let clock = FakeClock::new();
    let queue = DelayingWorkQueue::wrap(
        Arc::new(PlainQueue::default()),
        QueueConfig::new().clock(clock.clone()),
    );
    queue.add_after(2, 20 * MS);
    queue.add_after(1, 10 * MS);
    clock.step(30 * MS);
    assert_eq!(queue.inner().adds.load(Ordering::SeqCst), 2);
    assert_eq!(queue.get(), Some(1));
    let mut future = queue.get_async();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert_eq!(
        std::pin::Pin::new(&mut future).poll(&mut cx),
        std::task::Poll::Ready(Some(2))
    );
}

/// A delaying queue of our own: records delays, adds at once.
#[derive(Default)]
struct RecordingDelays {
    queue: WorkQueue<u32>,
    delays: Mutex<Vec<Duration>>,
}

impl Queue<u32> for RecordingDelays {
    fn add(&self, item: u32) {
        self.queue.add(item);
    }
    fn len(&self) -> usize {
        self.queue.len()
    }
    fn get(&self) -> Option<u32> {
        self.queue.get()
    }
    fn get_async(&self) -> GetFuture<'_, u32> {
        self.queue.get_async()
    }
    fn add_with_priority(&self, item: u32, priority: i32) {
        self.queue.add_with_priority(item, priority);
    }
    fn get_with_priority(&self) -> Option<(u32, i32)> {
        self.queue.get_with_priority()
    }
    fn get_async_with_priority(&self) -> GetFuture<'_, (u32, i32)> {
        self.queue.get_async_with_priority()
    }
    fn stats(&self) -> QueueStats {
        self.queue.stats()
    }
    fn done(&self, item: &u32) {
        self.queue.done(item);
    }
    fn shut_down(&self) {
        self.queue.shut_down();
    }
    fn shut_down_with_drain(&self) {
        self.queue.shut_down_with_drain();
    }
    fn shutting_down(&self) -> bool {
        self.queue.shutting_down()
    }
}

impl DelayingQueue<u32> for RecordingDelays {
    fn add_after(&self, item: u32, delay: Duration) {
        self.add_after_with_priority(item, delay, 0);
    }
    fn add_after_with_priority(&self, item: u32, delay: Duration, priority: i32) {
        self.delays.lock().unwrap().push(delay);
        self.queue.add_with_priority(item, priority);
    }
}

#[test]
fn rate_limited_layer_wraps_a_custom_delaying_queue() {
    let queue = RateLimitingWorkQueue::wrap(
        RecordingDelays::default(),
        ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1)),
    );
    queue.add_rate_limited(7);
    queue.add_rate_limited(7);
    queue.add_rate_limited(7);
    assert_eq!(*queue.inner().delays.lock().unwrap(), [MS, 2 * MS, 4 * MS]);
    assert_eq!(queue.get(), Some(7));
    // Through a trait object, too.
    let dynamic: &dyn RateLimitingQueue<u32> = &queue;
    assert_eq!(dynamic.num_requeues(&7), 3);
    dynamic.forget(&7);
    assert_eq!(queue.num_requeues(&7), 0);
}

/// A manual clock of our own: it keeps listeners like `FakeClock` does.
#[derive(Clone)]
struct ManualClock {
    now: Arc<Mutex<Instant>>,
    listeners: Arc<Mutex<Vec<Weak<dyn TimeListener>>>>,
}

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualClock").finish_non_exhaustive()
    }
}

impl ManualClock {
    fn advance(&self, by: Duration) {
        let now = {
            let mut now = self.now.lock().unwrap();
            *now += by;
            *now
        };
        let listeners: Vec<_> = self
            .listeners
            .lock()
            .unwrap()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for listener in listeners {
            listener.time_advanced(now);
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.now.lock().unwrap()
    }
    fn wall_now(&self) -> std::time::SystemTime {
        kinformer_core::wall_time_at(self.now())
    }
    /// This test clock wakes no sleeper (nothing here sleeps on it): the delaying queue
    /// subscribes instead.
    fn sleep_until(&self, _deadline: Instant) -> kinformer_core::Sleep {
        Box::pin(std::future::pending())
    }
    fn subscribe(&self, listener: Weak<dyn TimeListener>) -> bool {
        self.listeners.lock().unwrap().push(listener);
        true
    }
}

#[test]
fn a_custom_manual_clock_drives_the_delaying_queue() {
    let clock = ManualClock {
        now: Arc::new(Mutex::new(Instant::now())),
        listeners: Arc::default(),
    };
    let queue = DelayingWorkQueue::with_config(QueueConfig::new().clock(clock.clone()));
    queue.add_after("x", Duration::from_secs(5));
    clock.advance(Duration::from_secs(4));
    assert_eq!(queue.len(), 0);
    clock.advance(Duration::from_secs(1));
    assert_eq!(queue.len(), 1);
}

/// A clock that moves by itself but is not `Instant::now` (offset by an hour), with no
/// subscription: the timer thread must still time delays by this clock.
#[derive(Debug)]
struct OffsetClock(Duration);

impl Clock for OffsetClock {
    fn now(&self) -> Instant {
        Instant::now() + self.0
    }
    fn wall_now(&self) -> std::time::SystemTime {
        kinformer_core::wall_time_at(self.now())
    }
    fn sleep_until(&self, deadline: Instant) -> kinformer_core::Sleep {
        kinformer_core::sleep_at_real_rate(self.now(), deadline)
    }
    fn subscribe(&self, _: Weak<dyn TimeListener>) -> bool {
        false
    }
}

#[test]
fn a_custom_real_time_clock_uses_the_timer_thread() {
    let queue = DelayingWorkQueue::with_config(
        QueueConfig::new().clock(OffsetClock(Duration::from_secs(3600))),
    );
    queue.add_after(1u8, 5 * MS);
    assert_eq!(queue.get(), Some(1), "fired by the timer thread");
    queue.add_after(2u8, Duration::from_secs(3600));
    assert_eq!(queue.fire_due(), 0, "not due yet by that clock");
    assert_eq!(queue.waiting_len(), 1);
    queue.shut_down();
}

/// A worker step written against the trait, as a controller would.
fn process_one(queue: &dyn RateLimitingQueue<String>, reconcile: impl Fn(&str) -> bool) -> bool {
    let Some(key) = queue.get() else {
        return false;
    };
    if reconcile(&key) {
        queue.forget(&key);
    } else {
        queue.add_rate_limited(key.clone());
    }
    queue.done(&key);
    true
}

/// A rate-limited queue of our own: a script of keys, and a log of what the worker did.
#[derive(Default)]
struct ScriptedQueue {
    script: Mutex<VecDeque<String>>,
    log: Mutex<Vec<String>>,
}

impl ScriptedQueue {
    fn record(&self, entry: String) {
        self.log.lock().unwrap().push(entry);
    }
}

impl Queue<String> for ScriptedQueue {
    fn add(&self, item: String) {
        self.record(format!("add {item}"));
    }
    fn len(&self) -> usize {
        self.script.lock().unwrap().len()
    }
    fn get(&self) -> Option<String> {
        self.script.lock().unwrap().pop_front()
    }
    fn get_async(&self) -> GetFuture<'_, String> {
        let item = self.get();
        GetFuture::from_future(std::future::ready(item))
    }
    fn add_with_priority(&self, item: String, _: i32) {
        self.add(item);
    }
    fn get_with_priority(&self) -> Option<(String, i32)> {
        self.get().map(|item| (item, 0))
    }
    fn get_async_with_priority(&self) -> GetFuture<'_, (String, i32)> {
        self.get_async().with_priority_zero()
    }
    fn stats(&self) -> QueueStats {
        QueueStats::basic(self.len(), self.shutting_down())
    }
    fn done(&self, item: &String) {
        self.record(format!("done {item}"));
    }
    fn shut_down(&self) {}
    fn shut_down_with_drain(&self) {}
    fn shutting_down(&self) -> bool {
        false
    }
}

impl DelayingQueue<String> for ScriptedQueue {
    fn add_after(&self, item: String, delay: Duration) {
        self.record(format!("add_after {item} {delay:?}"));
    }
    fn add_after_with_priority(&self, item: String, delay: Duration, _: i32) {
        self.add_after(item, delay);
    }
}

impl RateLimitingQueue<String> for ScriptedQueue {
    fn add_rate_limited(&self, item: String) {
        self.record(format!("add_rate_limited {item}"));
    }
    fn add_rate_limited_with_priority(&self, item: String, _: i32) {
        self.add_rate_limited(item);
    }
    fn forget(&self, item: &String) {
        self.record(format!("forget {item}"));
    }
    fn num_requeues(&self, _: &String) -> usize {
        0
    }
}

#[test]
fn a_worker_loop_runs_against_a_custom_rate_limiting_queue() {
    let queue = ScriptedQueue::default();
    queue
        .script
        .lock()
        .unwrap()
        .extend(["ok".to_string(), "fails".to_string()]);
    while process_one(&queue, |key| key == "ok") {}
    assert_eq!(
        *queue.log.lock().unwrap(),
        [
            "forget ok",
            "done ok",
            "add_rate_limited fails",
            "done fails"
        ]
    );
}
