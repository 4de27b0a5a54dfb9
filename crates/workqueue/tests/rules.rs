//! The workqueue rules 1-10 (ARCHITECTURE.md), one or more named tests each. Every time-dependent test
//! runs on a `FakeClock`: nothing here sleeps to let time pass.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Duration;

use kinformer_workqueue::{
    BucketRateLimiter, CounterMetric, DelayingQueue, DelayingWorkQueue, FakeClock, GaugeMetric,
    HistogramMetric, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter,
    MetricsProvider, Queue, QueueConfig, QueueStorage, Queued, RateLimiter, RateLimitingQueue,
    RateLimitingWorkQueue, SettableGaugeMetric, WithMaxWaitRateLimiter, WorkQueue,
    default_controller_rate_limiter_with_clock,
};

const MS: Duration = Duration::from_millis(1);
const TIMEOUT: Duration = Duration::from_secs(10);

/// A FIFO that records what the queue asked of it.
#[derive(Default)]
struct TracingStorage {
    items: std::collections::VecDeque<Queued<&'static str>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl QueueStorage<&'static str> for TracingStorage {
    fn push(&mut self, item: Queued<&'static str>, _priority: i32) {
        self.log.lock().unwrap().push(format!("push {}", *item));
        self.items.push_back(item);
    }
    fn touch(&mut self, item: &&'static str, _priority: i32) {
        self.log.lock().unwrap().push(format!("touch {item}"));
    }
    fn pop(&mut self) -> Option<Queued<&'static str>> {
        self.items.pop_front()
    }
    fn len(&self) -> usize {
        self.items.len()
    }
}

fn traced_queue() -> (
    WorkQueue<&'static str, TracingStorage>,
    Arc<Mutex<Vec<String>>>,
) {
    let storage = TracingStorage::default();
    let log = storage.log.clone();
    (WorkQueue::with_storage(storage, QueueConfig::new()), log)
}

/// Polls a future once with a waker that does nothing.
fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    std::pin::Pin::new(future).poll(&mut cx)
}

// Rule 1 -------------------------------------------------------------------------------------

#[test]
fn add_of_queued_item_changes_nothing() {
    let (queue, log) = traced_queue();
    queue.add("a");
    queue.add("b");
    queue.add("a");
    assert_eq!(queue.len(), 2, "a duplicate add must not grow the queue");
    assert_eq!(
        *log.lock().unwrap(),
        ["push a", "push b", "touch a"],
        "the duplicate is touched, never pushed"
    );
    assert_eq!(queue.get(), Some("a"), "the duplicate keeps its place");
    assert_eq!(queue.get(), Some("b"));
    assert_eq!(queue.len(), 0);
}

// Rule 2 -------------------------------------------------------------------------------------

#[test]
fn add_of_processing_item_marks_it_dirty_only() {
    let (queue, log) = traced_queue();
    queue.add("a");
    assert_eq!(queue.get(), Some("a"));
    queue.add("a");
    queue.add("a");
    assert_eq!(queue.len(), 0, "a held item is not queued while held");
    assert_eq!(
        *log.lock().unwrap(),
        ["push a"],
        "no push and no touch while held"
    );
}

#[test]
fn done_puts_a_dirty_item_back_exactly_once() {
    let (queue, log) = traced_queue();
    queue.add("a");
    let item = queue.get().unwrap();
    queue.add("a");
    queue.add("a");
    queue.done(&item);
    assert_eq!(queue.len(), 1);
    queue.done(&item); // not held any more: nothing
    assert_eq!(queue.len(), 1);
    assert_eq!(*log.lock().unwrap(), ["push a", "push a"]);
    assert_eq!(queue.get(), Some("a"));
    queue.done(&"a");
    assert_eq!(queue.len(), 0);
    assert!(queue.is_empty());
}

// Rule 3 -------------------------------------------------------------------------------------

#[test]
fn held_item_is_not_handed_out_again_until_done() {
    let queue = WorkQueue::new();
    queue.add("a");
    let held = queue.get().unwrap();
    queue.add("a");
    let mut second = queue.get_async();
    assert!(
        poll_once(&mut second).is_pending(),
        "a second worker must not get the held item"
    );
    queue.done(&held);
    assert_eq!(poll_once(&mut second), Poll::Ready(Some("a")));
}

#[test]
fn two_workers_never_hold_the_same_item_at_the_same_time() {
    const WORKERS: usize = 8;
    const KEYS: u32 = 4;
    const ADDS: u32 = 20_000;
    let queue = WorkQueue::new();
    let holding: Arc<Mutex<HashSet<u32>>> = Arc::default();
    let violations = Arc::new(AtomicUsize::new(0));
    let handled = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (queue, holding, violations, handled) = (
                queue.clone(),
                holding.clone(),
                violations.clone(),
                handled.clone(),
            );
            thread::spawn(move || {
                while let Some(key) = queue.get() {
                    if !holding.lock().unwrap().insert(key) {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    thread::yield_now();
                    holding.lock().unwrap().remove(&key);
                    handled.fetch_add(1, Ordering::SeqCst);
                    queue.done(&key);
                }
            })
        })
        .collect();
    for i in 0..ADDS {
        queue.add(i % KEYS);
    }
    queue.shut_down_with_drain();
    for worker in workers {
        worker.join().unwrap();
    }
    assert_eq!(
        violations.load(Ordering::SeqCst),
        0,
        "an item had two holders"
    );
    assert!(handled.load(Ordering::SeqCst) >= KEYS as usize);
}

// Rule 4 -------------------------------------------------------------------------------------

#[test]
fn after_shut_down_get_drains_then_reports_shutdown_and_add_is_ignored() {
    let queue = WorkQueue::new();
    queue.add(1);
    queue.add(2);
    queue.shut_down();
    assert!(queue.shutting_down());
    queue.add(3);
    assert_eq!(queue.len(), 2, "add after shutdown is ignored");
    assert_eq!(queue.get(), Some(1));
    assert_eq!(queue.get(), Some(2));
    assert_eq!(queue.get(), None);
    assert_eq!(queue.get(), None);
}

#[test]
fn shut_down_wakes_blocked_getters() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    let (tx, rx) = mpsc::channel();
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let (queue, tx) = (queue.clone(), tx.clone());
            thread::spawn(move || tx.send(queue.get()).unwrap())
        })
        .collect();
    queue.shut_down();
    for _ in 0..3 {
        assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), None);
    }
    for getter in getters {
        getter.join().unwrap();
    }
}

// Rule 5 -------------------------------------------------------------------------------------

#[test]
fn shut_down_does_not_wait_for_held_items() {
    let queue = WorkQueue::new();
    queue.add("a");
    let _held = queue.get().unwrap();
    let (tx, rx) = mpsc::channel();
    let queue2 = queue.clone();
    thread::spawn(move || {
        queue2.shut_down();
        tx.send(()).unwrap();
    });
    rx.recv_timeout(TIMEOUT)
        .expect("shut_down returned while an item is still held");
}

#[test]
fn shut_down_with_drain_waits_until_nothing_is_held() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add("b");
    let a = queue.get().unwrap();
    let b = queue.get().unwrap();
    let returned = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let drainer = {
        let (queue, returned) = (queue.clone(), returned.clone());
        thread::spawn(move || {
            queue.shut_down_with_drain();
            returned.store(true, Ordering::SeqCst);
            tx.send(()).unwrap();
        })
    };
    while !queue.shutting_down() {
        thread::yield_now();
    }
    assert_eq!(
        queue.get(),
        None,
        "nothing queued: getters see the shutdown"
    );
    queue.done(&a);
    assert!(
        rx.recv_timeout(Duration::from_millis(50)).is_err(),
        "drain returned with an item still held"
    );
    assert!(!returned.load(Ordering::SeqCst));
    queue.done(&b);
    rx.recv_timeout(TIMEOUT)
        .expect("drain did not return once nothing was held");
    drainer.join().unwrap();
}

#[test]
fn concurrent_shut_down_releases_a_waiting_drain() {
    let queue = WorkQueue::new();
    queue.add("a");
    let _held = queue.get().unwrap();
    let (tx, rx) = mpsc::channel();
    let drainer = {
        let queue = queue.clone();
        thread::spawn(move || {
            queue.shut_down_with_drain();
            tx.send(()).unwrap();
        })
    };
    while !queue.shutting_down() {
        thread::yield_now();
    }
    queue.shut_down();
    rx.recv_timeout(TIMEOUT)
        .expect("shut_down did not release shut_down_with_drain");
    drainer.join().unwrap();
}

#[test]
fn dirty_item_requeued_during_drain_is_still_handed_out() {
    let queue = WorkQueue::new();
    queue.add("a");
    let held = queue.get().unwrap();
    queue.add("a"); // dirty while held, before the shutdown
    let (tx, rx) = mpsc::channel();
    let drainer = {
        let queue = queue.clone();
        thread::spawn(move || {
            queue.shut_down_with_drain();
            tx.send(()).unwrap();
        })
    };
    while !queue.shutting_down() {
        thread::yield_now();
    }
    queue.add("b");
    assert_eq!(queue.len(), 0, "adds during the drain are ignored");
    queue.done(&held);
    assert_eq!(queue.get(), Some("a"), "the dirty item is handed out again");
    queue.done(&"a");
    assert_eq!(queue.get(), None);
    rx.recv_timeout(TIMEOUT).expect("drain did not finish");
    drainer.join().unwrap();
}

// Rule 6 -------------------------------------------------------------------------------------

fn fake_delaying() -> (DelayingWorkQueue<&'static str>, FakeClock) {
    let clock = FakeClock::new();
    let queue = DelayingWorkQueue::with_config(QueueConfig::new().clock(clock.clone()));
    (queue, clock)
}

#[test]
fn add_after_zero_is_add() {
    let (queue, _clock) = fake_delaying();
    queue.add_after("a", Duration::ZERO);
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.waiting_len(), 0);
}

#[test]
fn delayed_item_is_not_counted_until_it_fires() {
    let (queue, clock) = fake_delaying();
    queue.add_after("a", 50 * MS);
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.waiting_len(), 1);
    clock.step(49 * MS);
    assert_eq!(queue.len(), 0);
    clock.step(MS);
    assert_eq!(queue.len(), 1, "fired by the step itself");
    assert_eq!(queue.waiting_len(), 0);
    assert_eq!(queue.get(), Some("a"));
    queue.done(&"a");
    clock.step(Duration::from_secs(60));
    assert_eq!(queue.len(), 0, "fires once");
}

#[test]
fn add_after_keeps_the_earliest_ready_time() {
    let (queue, clock) = fake_delaying();
    queue.add_after("a", 50 * MS);
    queue.add_after("a", 70 * MS); // later: ignored
    assert_eq!(queue.waiting_len(), 1);
    clock.step(60 * MS);
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get(), Some("a"));
    queue.done(&"a");
    clock.step(20 * MS);
    assert_eq!(queue.len(), 0, "the later ready time was dropped");

    queue.add_after("a", 50 * MS);
    queue.add_after("a", 30 * MS); // earlier: wins
    clock.step(40 * MS);
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get(), Some("a"));
    queue.done(&"a");
    clock.step(20 * MS);
    assert_eq!(
        queue.len(),
        0,
        "the replaced ready time does not fire again"
    );
}

#[test]
fn delayed_items_fire_in_ready_time_order() {
    let (queue, clock) = fake_delaying();
    queue.add_after("first", Duration::from_secs(1));
    queue.add_after("second", 500 * MS);
    queue.add_after("third", 250 * MS);
    queue.add_after("tie", 500 * MS);
    clock.step(Duration::from_secs(2));
    assert_eq!(queue.len(), 4);
    let order: Vec<_> = (0..4).map(|_| queue.get().unwrap()).collect();
    // client-go's heap: "tie" sits below "third" on the left after its push; popping "third"
    // moves "first" to the top, which sinks to the left, so "tie" comes up before "second".
    assert_eq!(order, ["third", "tie", "second", "first"]);
}

#[test]
fn items_due_at_the_same_instant_fire_in_client_go_heap_order() {
    // Equal ready times never move an entry in Go's heap (its comparisons are strict), so a
    // pop brings the last entry to the top and it stays there: first in, then last in first
    // out. xtask/traces/workqueue/delaying_ties_equal_delays.jsonl checks this on client-go.
    let (queue, clock) = fake_delaying();
    for item in ["a", "b", "c", "d", "e", "f"] {
        queue.add_after(item, 10 * MS);
    }
    clock.step(10 * MS);
    let order: Vec<_> = (0..6).map(|_| queue.get().unwrap()).collect();
    assert_eq!(order, ["a", "f", "e", "d", "c", "b"]);
}

#[test]
fn add_after_fires_between_two_steps_in_order() {
    let (queue, clock) = fake_delaying();
    queue.add_after("foo", Duration::from_secs(1));
    queue.add_after("bar", 50 * MS);
    clock.step(60 * MS);
    assert_eq!(queue.get(), Some("bar"));
    queue.add_after("baz", Duration::from_secs(2));
    clock.step(Duration::from_secs(1));
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get(), Some("foo"));
    clock.step(Duration::from_secs(2));
    assert_eq!(queue.get(), Some("baz"));
}

#[test]
fn add_after_after_shutdown_is_ignored() {
    let (queue, clock) = fake_delaying();
    queue.add_after("before", 10 * MS);
    queue.shut_down();
    queue.add_after("after", 10 * MS);
    queue.add_after("after-zero", Duration::ZERO);
    assert_eq!(queue.waiting_len(), 0, "shutdown drops waiting items");
    clock.step(Duration::from_secs(1));
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.get(), None);
}

#[test]
fn add_after_fires_on_the_real_clock() {
    let queue = DelayingWorkQueue::new();
    queue.add_after("soon", 5 * MS);
    queue.add_after("later", Duration::from_secs(3600));
    let (tx, rx) = mpsc::channel();
    let getter = {
        let queue = queue.clone();
        thread::spawn(move || tx.send(queue.get()).unwrap())
    };
    assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), Some("soon"));
    getter.join().unwrap();
    assert_eq!(queue.waiting_len(), 1);
    queue.shut_down();
    assert_eq!(queue.waiting_len(), 0);
}

// Rule 7 -------------------------------------------------------------------------------------

#[test]
fn exponential_limiter_doubles_per_failure_and_forget_resets() {
    let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));
    for expected in [1, 2, 4, 8, 16] {
        assert_eq!(limiter.when(&"one"), expected * MS);
    }
    assert_eq!(limiter.num_requeues(&"one"), 5);
    assert_eq!(limiter.when(&"two"), MS);
    assert_eq!(limiter.when(&"two"), 2 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);
    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), MS);
}

#[test]
fn exponential_limiter_caps_without_overflow() {
    let limiter = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1000));
    for _ in 0..5 {
        limiter.when(&"one");
    }
    assert_eq!(limiter.when(&"one"), 32 * MS);
    for _ in 0..1000 {
        limiter.when(&"overflow1");
    }
    assert_eq!(limiter.when(&"overflow1"), Duration::from_secs(1000));
    assert_eq!(limiter.num_requeues(&"overflow1"), 1001);

    let minute = Duration::from_secs(60);
    let limiter = ItemExponentialFailureRateLimiter::new(minute, 1000 * 60 * minute);
    limiter.when(&"two");
    limiter.when(&"two");
    assert_eq!(limiter.when(&"two"), 4 * minute);
    for _ in 0..1000 {
        limiter.when(&"overflow2");
    }
    assert_eq!(limiter.when(&"overflow2"), 1000 * 60 * minute);
}

#[test]
fn fast_slow_limiter_is_fast_for_the_first_n_then_slow() {
    let limiter = ItemFastSlowRateLimiter::new(5 * MS, Duration::from_secs(10), 3);
    for _ in 0..3 {
        assert_eq!(limiter.when(&"one"), 5 * MS);
    }
    assert_eq!(limiter.when(&"one"), Duration::from_secs(10));
    assert_eq!(limiter.when(&"one"), Duration::from_secs(10));
    assert_eq!(limiter.num_requeues(&"one"), 5);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);
    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), 5 * MS);
}

#[test]
fn max_of_limiter_takes_the_largest_delay_and_forgets_in_all() {
    let limiter = MaxOfRateLimiter::new(vec![
        Box::new(ItemFastSlowRateLimiter::new(
            5 * MS,
            Duration::from_secs(3),
            3,
        )),
        Box::new(ItemExponentialFailureRateLimiter::new(
            MS,
            Duration::from_secs(1),
        )),
    ]);
    for _ in 0..3 {
        assert_eq!(limiter.when(&"one"), 5 * MS);
    }
    assert_eq!(limiter.when(&"one"), Duration::from_secs(3));
    assert_eq!(limiter.when(&"one"), Duration::from_secs(3));
    assert_eq!(limiter.num_requeues(&"one"), 5);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.when(&"two"), 5 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);
    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(
        limiter.when(&"one"),
        5 * MS,
        "both children forgot: fast-slow is fast again, exponential back at 1 ms"
    );
}

/// client-go's StepRateLimiter: `base` for the first `threshold` calls, then `max`.
struct StepRateLimiter {
    count: AtomicUsize,
    threshold: usize,
    base: Duration,
    max: Duration,
}

impl RateLimiter<u32> for StepRateLimiter {
    fn when(&self, _: &u32) -> Duration {
        if self.count.fetch_add(1, Ordering::SeqCst) < self.threshold {
            self.base
        } else {
            self.max
        }
    }
    fn forget(&self, _: &u32) {}
    fn num_requeues(&self, _: &u32) -> usize {
        0
    }
}

#[test]
fn max_wait_wrapper_caps_the_delay() {
    let limiter = WithMaxWaitRateLimiter::new(
        StepRateLimiter {
            count: AtomicUsize::new(0),
            threshold: 100,
            base: 5 * MS,
            max: Duration::from_secs(1000),
        },
        Duration::from_secs(500),
    );
    for i in 0..100 {
        assert_eq!(limiter.when(&i), 5 * MS);
    }
    for i in 100..200 {
        assert_eq!(limiter.when(&i), Duration::from_secs(500));
    }
}

// Rule 8 -------------------------------------------------------------------------------------

#[test]
fn bucket_limiter_reserves_so_a_burst_is_spaced_one_over_qps_apart() {
    let clock = FakeClock::new();
    let limiter = BucketRateLimiter::with_clock(10.0, 100, clock.clone());
    for i in 0..100u32 {
        assert_eq!(
            limiter.when(&i),
            Duration::ZERO,
            "call {i} is within the burst"
        );
    }
    for n in 1..=5u32 {
        assert_eq!(
            limiter.when(&0u32),
            n * 100 * MS,
            "each call past the burst reserves the next token"
        );
    }
    assert_eq!(RateLimiter::<u32>::num_requeues(&limiter, &0), 0);
}

#[test]
fn bucket_limiter_refills_with_the_clock() {
    let clock = FakeClock::new();
    let limiter = BucketRateLimiter::with_clock(10.0, 3, clock.clone());
    let when = || RateLimiter::<&str>::when(&limiter, &"x");
    let burst: Vec<_> = (0..5).map(|_| when()).collect();
    assert_eq!(
        burst,
        [
            Duration::ZERO,
            Duration::ZERO,
            Duration::ZERO,
            100 * MS,
            200 * MS
        ]
    );
    clock.step(150 * MS);
    assert_eq!(when(), 150 * MS, "two tokens owed, 1.5 refilled");
    clock.step(Duration::from_secs(10));
    let refilled: Vec<_> = (0..4).map(|_| when()).collect();
    assert_eq!(
        refilled,
        [Duration::ZERO, Duration::ZERO, Duration::ZERO, 100 * MS],
        "refills to the burst, never beyond"
    );
}

#[test]
fn rate_limited_burst_past_the_bucket_fires_one_per_interval() {
    let clock = FakeClock::new();
    let queue = RateLimitingWorkQueue::with_config(
        BucketRateLimiter::with_clock(10.0, 2, clock.clone()),
        QueueConfig::new().clock(clock.clone()),
    );
    for i in 0..5u32 {
        queue.add_rate_limited(i);
    }
    assert_eq!(queue.len(), 2, "the burst goes straight in");
    assert_eq!(queue.inner().waiting_len(), 3);
    for expected_len in [3, 4, 5] {
        clock.step(100 * MS);
        assert_eq!(queue.len(), expected_len);
    }
    let order: Vec<_> = (0..5).map(|_| queue.get().unwrap()).collect();
    assert_eq!(order, [0, 1, 2, 3, 4]);
}

// Rule 9 -------------------------------------------------------------------------------------

#[test]
fn default_controller_limiter_is_max_of_exponential_and_bucket() {
    let clock = FakeClock::new();
    let limiter = default_controller_rate_limiter_with_clock::<String>(clock.clone());
    // Per-item exponential from 5 ms while the bucket (burst 100) still has tokens.
    assert_eq!(limiter.when(&"a".to_string()), 5 * MS);
    assert_eq!(limiter.when(&"a".to_string()), 10 * MS);
    assert_eq!(limiter.when(&"a".to_string()), 20 * MS);
    assert_eq!(limiter.num_requeues(&"a".to_string()), 3);
    // 97 more distinct items empty the bucket, each at its first-failure 5 ms.
    for i in 0..97 {
        assert_eq!(limiter.when(&format!("item-{i}")), 5 * MS);
    }
    // Past the burst the bucket's 10 qps (100 ms apart) dominates a first failure.
    assert_eq!(limiter.when(&"b".to_string()), 100 * MS);
    assert_eq!(limiter.when(&"c".to_string()), 200 * MS);
    // And the exponential cap is 1000 s.
    clock.step(Duration::from_secs(3600));
    let mut last = Duration::ZERO;
    for _ in 0..40 {
        last = limiter.when(&"d".to_string());
    }
    assert_eq!(last, Duration::from_secs(1000));
    limiter.forget(&"d".to_string());
    assert_eq!(limiter.num_requeues(&"d".to_string()), 0);
}

// Rule 10 ------------------------------------------------------------------------------------

#[derive(Default)]
struct Recorder {
    incs: Mutex<i64>,
    decs: Mutex<i64>,
    set: Mutex<f64>,
    observed: Mutex<Vec<f64>>,
}

impl Recorder {
    fn gauge(&self) -> i64 {
        *self.incs.lock().unwrap() - *self.decs.lock().unwrap()
    }
    fn value(&self) -> f64 {
        *self.set.lock().unwrap()
    }
    fn observations(&self) -> Vec<f64> {
        self.observed.lock().unwrap().clone()
    }
}

struct Handle(Arc<Recorder>);

impl GaugeMetric for Handle {
    fn inc(&self) {
        *self.0.incs.lock().unwrap() += 1;
    }
    fn dec(&self) {
        *self.0.decs.lock().unwrap() += 1;
    }
}
impl CounterMetric for Handle {
    fn inc(&self) {
        *self.0.incs.lock().unwrap() += 1;
    }
}
impl SettableGaugeMetric for Handle {
    fn set(&self, value: f64) {
        *self.0.set.lock().unwrap() = value;
    }
}
impl HistogramMetric for Handle {
    fn observe(&self, value: f64) {
        self.0.observed.lock().unwrap().push(value);
    }
}

#[derive(Default)]
struct TestProvider {
    names: Mutex<Vec<(String, &'static str)>>,
    depth: Arc<Recorder>,
    adds: Arc<Recorder>,
    latency: Arc<Recorder>,
    work_duration: Arc<Recorder>,
    unfinished: Arc<Recorder>,
    longest: Arc<Recorder>,
    retries: Arc<Recorder>,
}

impl TestProvider {
    fn made(&self, name: &str, metric: &'static str, recorder: &Arc<Recorder>) -> Box<Handle> {
        self.names.lock().unwrap().push((name.to_string(), metric));
        Box::new(Handle(recorder.clone()))
    }
}

impl MetricsProvider for TestProvider {
    fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric> {
        self.made(name, "depth", &self.depth)
    }
    fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        self.made(name, "adds", &self.adds)
    }
    fn new_latency_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        self.made(name, "queue_duration_seconds", &self.latency)
    }
    fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        self.made(name, "work_duration_seconds", &self.work_duration)
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric> {
        self.made(name, "unfinished_work_seconds", &self.unfinished)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        self.made(name, "longest_running_processor_seconds", &self.longest)
    }
    fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        self.made(name, "retries", &self.retries)
    }
}

fn assert_close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() < 1e-12,
        "expected {expected}, got {actual}"
    );
}

#[test]
fn metrics_follow_client_go_for_a_named_queue() {
    let provider = Arc::new(TestProvider::default());
    let clock = FakeClock::new();
    let queue = WorkQueue::with_config(
        QueueConfig::new()
            .name("test")
            .metrics_provider(provider.clone())
            .clock(clock.clone()),
    );
    let mut made: Vec<_> = provider.names.lock().unwrap().clone();
    made.sort();
    assert_eq!(
        made.iter().map(|(_, metric)| *metric).collect::<Vec<_>>(),
        [
            "adds",
            "depth",
            "longest_running_processor_seconds",
            "queue_duration_seconds",
            "unfinished_work_seconds",
            "work_duration_seconds"
        ]
    );
    assert!(made.iter().all(|(name, _)| name == "test"));

    queue.add("foo");
    assert_eq!(provider.adds.gauge(), 1);
    assert_eq!(provider.depth.gauge(), 1);

    clock.step(Duration::from_micros(50));
    assert_eq!(queue.get(), Some("foo"));
    assert_eq!(provider.depth.gauge(), 0);
    let latency = provider.latency.observations();
    assert_eq!(latency.len(), 1);
    assert_close(latency[0], 5e-5);

    for _ in 0..5 {
        queue.add("foo"); // deduplicated while held: one add
    }
    assert_eq!(provider.adds.gauge(), 2);
    assert_eq!(provider.depth.gauge(), 1);

    clock.step(Duration::from_micros(25));
    queue.done(&"foo");
    let work = provider.work_duration.observations();
    assert_eq!(work.len(), 1);
    assert_close(work[0], 2.5e-5);
    assert_eq!(provider.depth.gauge(), 1);

    assert_eq!(queue.get(), Some("foo"));
    let latency = provider.latency.observations();
    assert_eq!(latency.len(), 2);
    assert_close(latency[1], 2.5e-5);

    clock.step(MS);
    assert_close(provider.unfinished.value(), 0.001);
    assert_close(provider.longest.value(), 0.001);

    queue.done(&"foo");
    let work = provider.work_duration.observations();
    assert_eq!(work.len(), 2);
    assert_close(work[1], 0.001);
}

#[test]
fn unfinished_work_sums_held_items_and_longest_is_the_oldest() {
    let provider = Arc::new(TestProvider::default());
    let clock = FakeClock::new();
    let queue = WorkQueue::with_config(
        QueueConfig::new()
            .name("held")
            .metrics_provider(provider.clone())
            .clock(clock.clone()),
    );
    queue.add(1);
    queue.add(2);
    queue.get();
    clock.step(Duration::from_secs(2));
    queue.get();
    clock.step(Duration::from_secs(1));
    assert_close(provider.unfinished.value(), 3.0 + 1.0);
    assert_close(provider.longest.value(), 3.0);
    queue.shut_down();
    queue.done(&1);
    clock.step(Duration::from_secs(1));
    assert_close(provider.longest.value(), 3.0); // no updates after shutdown
}

#[test]
fn retries_metric_counts_add_after() {
    let provider = Arc::new(TestProvider::default());
    let clock = FakeClock::new();
    let queue = DelayingWorkQueue::with_config(
        QueueConfig::new()
            .name("retry")
            .metrics_provider(provider.clone())
            .clock(clock.clone()),
    );
    queue.add_after("a", Duration::ZERO);
    queue.add_after("b", MS);
    queue.add("c");
    assert_eq!(provider.retries.gauge(), 2);
    queue.shut_down();
    queue.add_after("d", MS);
    assert_eq!(
        provider.retries.gauge(),
        2,
        "no retries counted after shutdown"
    );
}

#[test]
fn unnamed_queue_records_no_metrics() {
    let provider = Arc::new(TestProvider::default());
    let clock = FakeClock::new();
    let queue = RateLimitingWorkQueue::with_config(
        BucketRateLimiter::with_clock(10.0, 10, clock.clone()),
        QueueConfig::new()
            .metrics_provider(provider.clone())
            .clock(clock.clone()),
    );
    queue.add("a");
    queue.add_rate_limited("b");
    let a = queue.get().unwrap();
    queue.done(&a);
    clock.step(Duration::from_secs(1));
    assert!(provider.names.lock().unwrap().is_empty());
    assert_eq!(provider.adds.gauge(), 0);
    assert_eq!(provider.retries.gauge(), 0);
}

#[test]
fn real_clock_refreshes_unfinished_work_in_the_background() {
    let provider = Arc::new(TestProvider::default());
    let queue = WorkQueue::with_config(
        QueueConfig::new()
            .name("ticker")
            .metrics_provider(provider.clone()),
    );
    queue.add(1);
    queue.get();
    let start = std::time::Instant::now();
    while provider.longest.value() == 0.0 {
        assert!(start.elapsed() < TIMEOUT, "the 500 ms ticker never ran");
        thread::sleep(10 * MS);
    }
    queue.shut_down();
}

#[test]
fn workers_started_together_all_see_the_items() {
    // A smoke test of the barrier-started worker pattern the examples use.
    let queue = WorkQueue::new();
    let barrier = Arc::new(Barrier::new(3));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (queue, barrier, seen) = (queue.clone(), barrier.clone(), seen.clone());
            thread::spawn(move || {
                barrier.wait();
                while let Some(item) = queue.get() {
                    seen.lock().unwrap().push(item);
                    queue.done(&item);
                }
            })
        })
        .collect();
    barrier.wait();
    for i in 0..100 {
        queue.add(i);
    }
    queue.shut_down_with_drain();
    for worker in workers {
        worker.join().unwrap();
    }
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
}

#[cfg(feature = "prometheus")]
#[test]
fn prometheus_provider_exposes_client_go_metric_names() {
    use kinformer_workqueue::PrometheusMetricsProvider;
    use prometheus_client::registry::Registry;

    let mut registry = Registry::default();
    let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
    let clock = FakeClock::new();
    let queue = DelayingWorkQueue::with_config(
        QueueConfig::new()
            .name("pods")
            .metrics_provider(provider)
            .clock(clock.clone()),
    );
    queue.add("a");
    queue.add("b");
    queue.add_after("c", MS);
    clock.step(Duration::from_micros(20));
    let a = queue.get().unwrap();
    clock.step(Duration::from_secs(2));
    queue.done(&a);
    let _b = queue.get().unwrap();
    clock.step(Duration::from_secs(3));

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for expected in [
        r#"workqueue_depth{name="pods"} 1"#, // "c" fired and waits
        r#"workqueue_adds_total{name="pods"} 3"#,
        r#"workqueue_retries_total{name="pods"} 1"#,
        r#"workqueue_queue_duration_seconds_count{name="pods"} 2"#,
        r#"workqueue_work_duration_seconds_count{name="pods"} 1"#,
        r#"workqueue_work_duration_seconds_sum{name="pods"} 2.0"#,
        r#"workqueue_unfinished_work_seconds{name="pods"} 3.0"#,
        r#"workqueue_longest_running_processor_seconds{name="pods"} 3.0"#,
        r#"workqueue_queue_duration_seconds_bucket{le="1e-8",name="pods"} 0"#,
        "# HELP workqueue_depth Current depth of workqueue.\n",
    ] {
        assert!(text.contains(expected), "missing {expected} in:\n{text}");
    }
}
