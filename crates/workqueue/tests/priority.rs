//! The priority queue (controller-runtime v0.23's default controller queue): order, one
//! entry per item, ready times on a `FakeClock`, the dirty and processing rules, shutdown,
//! rate-limited retries, metrics by priority, and the measurement BENCHMARKS.md records.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Duration;

use kinformer_workqueue::{
    CounterMetric, DelayingQueue, FakeClock, GaugeMetric, HistogramMetric,
    ItemExponentialFailureRateLimiter, LOW_PRIORITY, MetricsProvider, PriorityGaugeMetric,
    PriorityWorkQueue, Queue, QueueConfig, RateLimitingQueue, RateLimitingWorkQueue,
    SettableGaugeMetric, default_controller_rate_limiter_with_clock,
};

const MS: Duration = Duration::from_millis(1);
const TIMEOUT: Duration = Duration::from_secs(10);

type Limiter = ItemExponentialFailureRateLimiter<&'static str>;

/// A priority queue on a fake clock, retrying after 5 ms doubling (controller-runtime's
/// default per-item backoff).
fn fake_queue() -> (PriorityWorkQueue<&'static str, Limiter>, FakeClock) {
    let clock = FakeClock::new();
    let queue = PriorityWorkQueue::with_config(
        ItemExponentialFailureRateLimiter::new(5 * MS, Duration::from_secs(1000)),
        QueueConfig::new().clock(clock.clone()),
    );
    (queue, clock)
}

/// The item `get` hands out now, with its priority, or `None` where `get` would block (so a
/// test of a wrong queue fails instead of hanging).
fn take<T: Send, Q: Queue<T> + ?Sized>(queue: &Q) -> Option<(T, i32)> {
    match poll_once(&mut queue.get_async_with_priority()) {
        Poll::Ready(taken) => taken,
        Poll::Pending => None,
    }
}

/// [`take`] without the priority.
fn next<T: Send, Q: Queue<T> + ?Sized>(queue: &Q) -> Option<T> {
    take(queue).map(|(item, _)| item)
}

/// Takes everything ready now, marking each done; with each item's priority.
fn drain<Q: Queue<&'static str> + ?Sized>(queue: &Q) -> Vec<(&'static str, i32)> {
    let mut got = Vec::new();
    while let Some((item, priority)) = take(queue) {
        queue.done(&item);
        got.push((item, priority));
    }
    got
}

fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    std::pin::Pin::new(future).poll(&mut cx)
}

#[test]
fn higher_priority_is_handed_out_first() {
    let (queue, _) = fake_queue();
    queue.add_with_priority("low", LOW_PRIORITY);
    queue.add("normal");
    queue.add_with_priority("high", 10);
    queue.add_with_priority("lowest", i32::MIN);
    assert_eq!(
        drain(&queue),
        [
            ("high", 10),
            ("normal", 0),
            ("low", LOW_PRIORITY),
            ("lowest", i32::MIN)
        ]
    );
}

#[test]
fn equal_priorities_leave_in_the_order_they_became_ready() {
    let (queue, _) = fake_queue();
    for item in ["a", "b", "c", "d"] {
        queue.add_with_priority(item, 3);
    }
    queue.add("zero");
    queue.add_with_priority("e", 3);
    let order: Vec<_> = drain(&queue).into_iter().map(|(item, _)| item).collect();
    assert_eq!(order, ["a", "b", "c", "d", "e", "zero"]);
}

#[test]
fn re_adding_raises_the_priority_never_lowers_it_and_keeps_one_entry() {
    let (queue, _) = fake_queue();
    queue.add_with_priority("a", LOW_PRIORITY);
    queue.add_with_priority("b", LOW_PRIORITY);
    queue.add("c");
    queue.add("b"); // raised to 0: behind "c", which was ready at 0 before it
    queue.add_with_priority("c", LOW_PRIORITY); // never lowered; keeps its place
    queue.add_with_priority("a", LOW_PRIORITY); // the same priority: nothing changes
    assert_eq!(queue.len(), 3);
    assert_eq!(drain(&queue), [("c", 0), ("b", 0), ("a", LOW_PRIORITY)]);
    assert!(queue.get_async().finds_nothing());
}

/// `GetFuture` helper: whether a first poll finds nothing.
trait PendingNow {
    fn finds_nothing(self) -> bool;
}

impl<T> PendingNow for kinformer_workqueue::GetFuture<'_, T> {
    fn finds_nothing(mut self) -> bool {
        poll_once(&mut self).is_pending()
    }
}

#[test]
fn add_after_with_priority_is_ready_on_the_clock_and_then_goes_first() {
    let (queue, clock) = fake_queue();
    queue.add_after_with_priority("later", 10 * MS, 5);
    queue.add("now");
    assert_eq!((queue.len(), queue.waiting_len()), (1, 1));
    assert_eq!(next(&queue), Some("now"));
    clock.step(9 * MS);
    assert!(queue.is_empty(), "not ready before its time");
    assert!(queue.get_async().finds_nothing());
    queue.add("zero");
    clock.step(MS);
    assert_eq!((queue.len(), queue.waiting_len()), (2, 0));
    assert_eq!(take(&queue), Some(("later", 5)));
    assert_eq!(next(&queue), Some("zero"));
}

#[test]
fn add_after_is_readied_by_the_timer_thread_on_the_real_clock() {
    let queue = PriorityWorkQueue::new(ItemExponentialFailureRateLimiter::new(MS, MS));
    let (got_tx, got) = mpsc::channel();
    let getter = {
        let queue = queue.clone();
        thread::spawn(move || {
            let taken = queue.get_with_priority();
            got_tx.send(std::time::Instant::now()).unwrap();
            taken
        })
    };
    let start = std::time::Instant::now();
    queue.add_after_with_priority("later", Duration::from_secs(3600), 0);
    queue.add_after_with_priority("soon", 20 * MS, 3); // earlier: rings the timer thread
    let at = got
        .recv_timeout(TIMEOUT)
        .expect("the timer thread readies it");
    assert!(at - start >= 20 * MS, "not before its time");
    assert_eq!(getter.join().unwrap(), Some(("soon", 3)));
    assert_eq!(queue.waiting_len(), 1);
    queue.shut_down();
    assert_eq!(queue.waiting_len(), 0);
}

#[test]
fn an_item_ready_by_its_delay_queues_behind_those_ready_before_it() {
    let (queue, clock) = fake_queue();
    queue.add_after("delayed", 5 * MS); // added first, ready last
    queue.add("a");
    clock.step(2 * MS);
    queue.add("b");
    clock.step(3 * MS);
    queue.add("c");
    let order: Vec<_> = drain(&queue).into_iter().map(|(item, _)| item).collect();
    assert_eq!(order, ["a", "b", "delayed", "c"]);

    // Made ready by an add rather than by its delay: the same, behind those ready before.
    queue.add_after("delayed", 5 * MS);
    queue.add("d");
    queue.add("delayed");
    let order: Vec<_> = drain(&queue).into_iter().map(|(item, _)| item).collect();
    assert_eq!(order, ["d", "delayed"]);
}

#[test]
fn the_earlier_ready_time_wins_and_an_add_does_not_cancel_a_waiting_one() {
    let (queue, clock) = fake_queue();
    queue.add_after("x", 10 * MS);
    queue.add_after("x", 3 * MS); // earlier: wins
    queue.add_after("x", 20 * MS); // later: ignored
    assert_eq!(queue.waiting_len(), 1);
    clock.step(3 * MS);
    assert_eq!(next(&queue), Some("x"));
    queue.done(&"x");
    clock.step(Duration::from_secs(1));
    assert!(queue.is_empty(), "one waiting entry: handed out once");

    // A controller's `RequeueAfter` (a delayed add), then an event for the same key (an add
    // now): the event is handled now and the delayed add still comes at its time, as with
    // client-go's queues (controller-runtime's queue merges them and loses the second).
    queue.add_after_with_priority("y", 10 * MS, 1);
    queue.add_with_priority("y", LOW_PRIORITY);
    assert_eq!((queue.len(), queue.waiting_len()), (1, 1));
    assert_eq!(take(&queue), Some(("y", LOW_PRIORITY)));
    queue.done(&"y");
    clock.step(10 * MS);
    assert_eq!(
        take(&queue),
        Some(("y", 1)),
        "the delayed add came, at its priority"
    );
    queue.done(&"y");

    // A delayed add of an item already queued, once due, finds it queued: still one entry.
    queue.add("z");
    queue.add_after("z", 5 * MS);
    clock.step(5 * MS);
    assert_eq!((queue.len(), queue.waiting_len()), (1, 0));
}

#[test]
fn a_held_item_added_again_is_queued_once_after_done() {
    let (queue, _) = fake_queue();
    queue.add("a");
    let held = next(&queue).unwrap();
    queue.add_with_priority("a", 1);
    queue.add("a");
    queue.add("b");
    assert_eq!(queue.len(), 1, "the held item is not queued twice");
    assert_eq!(next(&queue), Some("b"), "and not handed out while held");
    assert!(queue.get_async().finds_nothing());
    queue.done(&held);
    assert_eq!(queue.len(), 1);
    assert_eq!(take(&queue), Some(("a", 1)));
    queue.done(&"a");
    queue.done(&"b");
    queue.done(&"a"); // not held: nothing
    assert!(queue.is_empty());
}

#[test]
fn a_held_item_whose_delay_passes_is_handed_out_only_after_done() {
    let (queue, clock) = fake_queue();
    queue.add("a");
    let held = next(&queue).unwrap();
    queue.add_after_with_priority("a", 5 * MS, 2);
    clock.step(5 * MS);
    assert!(queue.is_empty(), "held: dirty, not queued");
    queue.done(&held);
    assert_eq!(take(&queue), Some(("a", 2)));
    queue.done(&"a");

    // Done before the delay: it waits for its time, then is queued.
    let held = {
        queue.add("b");
        next(&queue).unwrap()
    };
    queue.add_after("b", 5 * MS);
    queue.done(&held);
    assert_eq!((queue.len(), queue.waiting_len()), (0, 1));
    clock.step(5 * MS);
    assert_eq!(next(&queue), Some("b"));
}

#[test]
fn two_workers_never_hold_the_same_item() {
    let queue =
        PriorityWorkQueue::new(default_controller_rate_limiter_with_clock(FakeClock::new()));
    let holding = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let handled = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (queue, holding, handled) = (queue.clone(), holding.clone(), handled.clone());
            thread::spawn(move || {
                while let Some((item, _)) = queue.get_with_priority() {
                    assert!(holding.lock().unwrap().insert(item), "{item} held twice");
                    thread::yield_now();
                    assert!(holding.lock().unwrap().remove(&item));
                    queue.done(&item);
                    handled.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for round in 0..2_000u32 {
        queue.add_with_priority(round % 16, (round % 3) as i32 - 1);
    }
    queue.shut_down_with_drain();
    for worker in workers {
        worker.join().unwrap();
    }
    assert!(handled.load(Ordering::Relaxed) >= 16);
}

#[test]
fn after_shut_down_get_drains_the_ready_items_drops_the_waiting_and_ignores_adds() {
    let (queue, clock) = fake_queue();
    queue.add_with_priority("low", LOW_PRIORITY);
    queue.add("a");
    queue.add_after("waiting", MS);
    let held = next(&queue).unwrap();
    queue.add(held); // dirty
    queue.shut_down();
    assert!(queue.shutting_down());
    queue.add_with_priority("ignored", 100);
    queue.add_after("ignored", MS);
    queue.add_rate_limited("ignored");
    assert_eq!((queue.len(), queue.waiting_len()), (1, 0));
    clock.step(Duration::from_secs(1));
    assert_eq!(next(&queue), Some("low"));
    queue.done(&held); // a dirty item re-queued during the drain is still handed out
    assert_eq!(next(&queue), Some("a"));
    assert_eq!(next(&queue), None);
    let mut get = queue.get_async();
    assert_eq!(poll_once(&mut get), Poll::Ready(None));
}

#[test]
fn shut_down_wakes_blocked_getters_and_drain_waits_for_held_items() {
    let (queue, _) = fake_queue();
    let getter = {
        let queue = queue.clone();
        thread::spawn(move || queue.get())
    };
    thread::sleep(10 * MS); // let it block
    queue.add("a");
    assert_eq!(getter.join().unwrap(), Some("a"));

    let blocked = {
        let queue = queue.clone();
        thread::spawn(move || queue.get())
    };
    let (drained_tx, drained) = mpsc::channel();
    let drainer = {
        let queue = queue.clone();
        thread::spawn(move || {
            queue.shut_down_with_drain();
            drained_tx.send(()).unwrap();
        })
    };
    assert_eq!(blocked.join().unwrap(), None);
    assert!(
        drained.recv_timeout(50 * MS).is_err(),
        "\"a\" is still held: the drain waits"
    );
    queue.done(&"a");
    drained.recv_timeout(TIMEOUT).unwrap();
    drainer.join().unwrap();
}

#[test]
fn add_rate_limited_with_priority_waits_the_limiters_delay_and_keeps_the_priority() {
    let (queue, clock) = fake_queue();
    queue.add("a");
    queue.add("b");
    let failed = next(&queue).unwrap();
    queue.add_rate_limited_with_priority(failed, 7);
    queue.done(&failed);
    assert_eq!((queue.len(), queue.waiting_len()), (1, 1));
    clock.step(4 * MS);
    assert_eq!(queue.waiting_len(), 1, "5 ms: not before");
    clock.step(MS);
    assert_eq!(take(&queue), Some(("a", 7)), "ahead of b");
    assert_eq!(queue.num_requeues(&"a"), 1);
    queue.add_rate_limited("a"); // second failure: 10 ms, priority 0
    queue.done(&"a");
    clock.step(9 * MS);
    assert_eq!(queue.waiting_len(), 1);
    clock.step(MS);
    assert_eq!(queue.num_requeues(&"a"), 2);
    queue.forget(&"a");
    assert_eq!(queue.num_requeues(&"a"), 0);
    assert_eq!(drain(&queue), [("b", 0), ("a", 0)]);
}

#[test]
fn get_async_with_priority_waits_for_an_item_and_a_dropped_future_passes_its_wake_on() {
    let (queue, _) = fake_queue();
    let mut first = queue.get_async_with_priority();
    let mut second = queue.get_async_with_priority();
    assert!(poll_once(&mut first).is_pending());
    assert!(poll_once(&mut second).is_pending());
    queue.add_with_priority("a", LOW_PRIORITY);
    drop(first); // woken for "a", gone: the wake-up goes to `second`
    assert_eq!(
        poll_once(&mut second),
        Poll::Ready(Some(("a", LOW_PRIORITY)))
    );
    assert!(
        poll_once(&mut second).is_pending(),
        "a finished future takes nothing more"
    );
}

#[test]
fn the_priority_survives_the_trait_objects_and_wrappers_a_controller_holds() {
    let (queue, clock) = fake_queue();
    let shared: Arc<dyn RateLimitingQueue<&'static str>> = Arc::new(queue.clone());
    shared.add_with_priority("low", LOW_PRIORITY);
    shared.add_after_with_priority("soon", MS, 1);
    shared.add_rate_limited_with_priority("retry", 2);
    clock.step(5 * MS);
    assert_eq!(
        drain(&shared),
        [("retry", 2), ("soon", 1), ("low", LOW_PRIORITY)]
    );
    // A rate-limited layer over the priority queue passes priorities down too.
    let wrapped = RateLimitingWorkQueue::wrap(
        queue.clone(),
        ItemExponentialFailureRateLimiter::new(MS, MS),
    );
    wrapped.add_with_priority("x", LOW_PRIORITY);
    wrapped.add_rate_limited_with_priority("y", 3);
    clock.step(MS);
    assert_eq!(drain(&wrapped), [("y", 3), ("x", LOW_PRIORITY)]);
}

/// client-go's FIFO queue takes the priority calls in arrival order (it does not reorder)
/// and hands each item out with the priority it came with, through the delaying and the
/// rate-limited layers, so a worker retries it at that priority.
#[test]
fn the_fifo_queue_keeps_arrival_order_and_reports_each_items_priority() {
    let clock = FakeClock::new();
    let queue = RateLimitingWorkQueue::with_config(
        ItemExponentialFailureRateLimiter::new(MS, MS),
        QueueConfig::new().clock(clock.clone()),
    );
    queue.add_with_priority("a", LOW_PRIORITY);
    queue.add("z");
    queue.add_after_with_priority("b", MS, 5);
    clock.step(MS);
    queue.add_rate_limited_with_priority("c", 7);
    clock.step(MS);
    assert_eq!(
        drain(&queue),
        [("a", LOW_PRIORITY), ("z", 0), ("b", 5), ("c", 7)]
    );
    let mut future = queue.get_async_with_priority();
    queue.add("d");
    assert_eq!(poll_once(&mut future), Poll::Ready(Some(("d", 0))));
}

// Metrics ------------------------------------------------------------------------------------

/// Records the depth gauge per priority, and every other metric by name.
#[derive(Default)]
struct ByPriority {
    depth: Mutex<std::collections::BTreeMap<i32, i64>>,
    plain_depth: Arc<AtomicUsize>,
    counters: Mutex<std::collections::BTreeMap<&'static str, usize>>,
    offer_priority_gauge: bool,
}

struct Depth(Arc<ByPriority>);
struct Counter(Arc<ByPriority>, &'static str);
struct Ignored;

impl PriorityGaugeMetric for Depth {
    fn inc(&self, priority: i32) {
        *self.0.depth.lock().unwrap().entry(priority).or_default() += 1;
    }
    fn dec(&self, priority: i32) {
        *self.0.depth.lock().unwrap().entry(priority).or_default() -= 1;
    }
}
impl GaugeMetric for Counter {
    fn inc(&self) {
        self.0.plain_depth.fetch_add(1, Ordering::Relaxed);
    }
    fn dec(&self) {
        self.0.plain_depth.fetch_sub(1, Ordering::Relaxed);
    }
}
impl CounterMetric for Counter {
    fn inc(&self) {
        *self.0.counters.lock().unwrap().entry(self.1).or_default() += 1;
    }
}
impl HistogramMetric for Ignored {
    fn observe(&self, _: f64) {}
}
impl SettableGaugeMetric for Ignored {
    fn set(&self, _: f64) {}
}

/// The provider, shared with the metrics it makes.
struct Provider(Arc<ByPriority>);

impl MetricsProvider for Provider {
    fn new_depth_metric(&self, _: &str) -> Box<dyn GaugeMetric> {
        Box::new(Counter(self.0.clone(), "depth"))
    }
    fn new_adds_metric(&self, _: &str) -> Box<dyn CounterMetric> {
        Box::new(Counter(self.0.clone(), "adds"))
    }
    fn new_latency_metric(&self, _: &str) -> Box<dyn HistogramMetric> {
        Box::new(Ignored)
    }
    fn new_work_duration_metric(&self, _: &str) -> Box<dyn HistogramMetric> {
        Box::new(Ignored)
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Box<dyn SettableGaugeMetric> {
        Box::new(Ignored)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        Box::new(Ignored)
    }
    fn new_retries_metric(&self, _: &str) -> Box<dyn CounterMetric> {
        Box::new(Counter(self.0.clone(), "retries"))
    }
    fn new_depth_with_priority_metric(&self, _: &str) -> Option<Box<dyn PriorityGaugeMetric>> {
        self.0
            .offer_priority_gauge
            .then(|| Box::new(Depth(self.0.clone())) as _)
    }
}

fn metered(
    offer_priority_gauge: bool,
) -> (
    PriorityWorkQueue<&'static str, Limiter>,
    FakeClock,
    Arc<ByPriority>,
) {
    let recorded = Arc::new(ByPriority {
        offer_priority_gauge,
        ..ByPriority::default()
    });
    let clock = FakeClock::new();
    let queue = PriorityWorkQueue::with_config(
        ItemExponentialFailureRateLimiter::new(MS, MS),
        QueueConfig::new()
            .name("q")
            .metrics_provider(Arc::new(Provider(recorded.clone())))
            .clock(clock.clone()),
    );
    (queue, clock, recorded)
}

#[test]
fn the_depth_is_counted_per_priority_and_follows_a_raise() {
    let (queue, clock, recorded) = metered(true);
    let depth = || {
        recorded
            .depth
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, n)| **n != 0)
            .map(|(p, n)| (*p, *n))
            .collect::<Vec<_>>()
    };
    queue.add_with_priority("a", LOW_PRIORITY);
    queue.add_with_priority("b", LOW_PRIORITY);
    queue.add_after_with_priority("c", MS, 4);
    assert_eq!(
        depth(),
        [(LOW_PRIORITY, 2)],
        "waiting items are not counted"
    );
    queue.add("b"); // raised
    assert_eq!(depth(), [(LOW_PRIORITY, 1), (0, 1)]);
    clock.step(MS);
    assert_eq!(depth(), [(LOW_PRIORITY, 1), (0, 1), (4, 1)]);
    assert_eq!(take(&queue), Some(("c", 4)));
    assert_eq!(depth(), [(LOW_PRIORITY, 1), (0, 1)]);
    queue.add_with_priority("c", 9); // held: dirty, counted at once
    assert_eq!(depth(), [(LOW_PRIORITY, 1), (0, 1), (9, 1)]);
    queue.done(&"c");
    drain(&queue);
    assert_eq!(depth(), []);
    assert_eq!(recorded.plain_depth.load(Ordering::Relaxed), 0);
    let counters = recorded.counters.lock().unwrap().clone();
    assert_eq!(counters.get("adds"), Some(&4), "a, b, c ready, c again");
    assert_eq!(counters.get("retries"), Some(&1));
}

#[test]
fn a_provider_without_a_priority_gauge_gets_the_depth_in_its_plain_gauge() {
    let (queue, _, recorded) = metered(false);
    queue.add_with_priority("a", LOW_PRIORITY);
    queue.add("b");
    queue.add("a");
    assert_eq!(recorded.plain_depth.load(Ordering::Relaxed), 2);
    next(&queue);
    assert_eq!(recorded.plain_depth.load(Ordering::Relaxed), 1);
    assert!(recorded.depth.lock().unwrap().is_empty());
}

#[cfg(feature = "prometheus")]
#[test]
fn prometheus_labels_the_priority_queues_depth_by_priority_and_leaves_other_queues_alone() {
    use kinformer_workqueue::{PrometheusMetricsProvider, WorkQueue};
    use prometheus_client::registry::Registry;

    let mut registry = Registry::default();
    let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
    let clock = FakeClock::new();
    let queue = PriorityWorkQueue::with_config(
        ItemExponentialFailureRateLimiter::new(MS, MS),
        QueueConfig::new()
            .name("widgets")
            .metrics_provider(provider.clone())
            .clock(clock.clone()),
    );
    let plain = WorkQueue::with_config(QueueConfig::new().name("pods").metrics_provider(provider));
    plain.add("x");
    queue.add_with_priority("a", LOW_PRIORITY);
    queue.add_with_priority("b", LOW_PRIORITY);
    queue.add("c");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for expected in [
        r#"workqueue_depth{name="widgets",priority="-100"} 2"#,
        r#"workqueue_depth{name="widgets",priority="0"} 1"#,
        r#"workqueue_depth{name="pods"} 1"#,
        r#"workqueue_adds_total{name="widgets"} 3"#,
    ] {
        assert!(text.contains(expected), "missing {expected} in:\n{text}");
    }

    // More than 25 priorities: the rest share one label, as in controller-runtime.
    for priority in 1..=30 {
        queue.add_with_priority("p", priority);
    }
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(r#"priority="exceeded_cardinality_limit""#),
        "{text}"
    );
    assert!(!text.contains(r#"priority="30""#), "{text}");
}

// The measurement in BENCHMARKS.md -----------------------------------------------------------

/// How many `get`s until `changed` is handed out, after `listed` keys were queued by the
/// initial list (at `LOW_PRIORITY`, which a FIFO ignores) and then `changed` was added at the
/// default priority.
fn gets_until_changed<Q: RateLimitingQueue<String>>(queue: &Q, listed: usize) -> usize {
    for i in 0..listed {
        queue.add_with_priority(format!("default/listed-{i}"), LOW_PRIORITY);
    }
    let changed = "default/changed".to_string();
    queue.add(changed.clone());
    let mut gets = 0;
    loop {
        let item = queue.get().unwrap();
        gets += 1;
        queue.done(&item);
        if item == changed {
            return gets;
        }
    }
}

#[test]
fn a_change_after_an_initial_list_of_10000_is_the_first_get_not_the_10001st() {
    let fifo =
        RateLimitingWorkQueue::new(default_controller_rate_limiter_with_clock(FakeClock::new()));
    let priority =
        PriorityWorkQueue::new(default_controller_rate_limiter_with_clock(FakeClock::new()));
    assert_eq!(gets_until_changed(&fifo, 10_000), 10_001);
    assert_eq!(gets_until_changed(&priority, 10_000), 1);
}

/// The three layers composed over priority storage carry the priority through the delaying
/// heap and the rate limiter: an item added later at a higher priority, or retried at the
/// priority it was handed out with, comes out in priority order with that priority.
#[test]
fn the_layers_over_priority_storage_keep_priorities_through_delays_and_retries() {
    let clock = FakeClock::new();
    let config = QueueConfig::new().clock(clock.clone());
    let work = kinformer_workqueue::WorkQueue::with_storage(
        kinformer_workqueue::PriorityStorage::new(),
        config.clone(),
    );
    let delaying = kinformer_workqueue::DelayingWorkQueue::wrap(work, config);
    let queue = RateLimitingWorkQueue::wrap(
        delaying,
        ItemExponentialFailureRateLimiter::new(5 * MS, Duration::from_secs(1)),
    );

    // Delayed items fire at the priority they were added with (the highest while waiting).
    queue.add_after_with_priority("low", 10 * MS, LOW_PRIORITY);
    queue.add_after_with_priority("raised", 10 * MS, LOW_PRIORITY);
    queue.add_after_with_priority("raised", 20 * MS, 5);
    queue.add_after("plain", 10 * MS);
    clock.step(10 * MS);
    assert_eq!(
        drain(&queue),
        [("raised", 5), ("plain", 0), ("low", LOW_PRIORITY)]
    );

    // A failed item is retried at the priority it was handed out with.
    queue.add_with_priority("a", LOW_PRIORITY);
    queue.add_with_priority("b", 3);
    let (first, priority) = take(&queue).expect("b is ready");
    assert_eq!((first, priority), ("b", 3));
    queue.add_rate_limited_with_priority(first, priority);
    queue.done(&first);
    let (second, priority) = take(&queue).expect("a is ready");
    assert_eq!((second, priority), ("a", LOW_PRIORITY));
    queue.add_rate_limited_with_priority(second, priority);
    queue.done(&second);
    clock.step(5 * MS);
    assert_eq!(drain(&queue), [("b", 3), ("a", LOW_PRIORITY)]);

    // A blocking get reports the priority too.
    queue.add_with_priority("c", 7);
    assert_eq!(queue.get_with_priority(), Some(("c", 7)));
}

/// Issue 38's starvation: a steady stream of changes at priority 0 (one added before every
/// get) holds a listed key back for ever in strict priority order; the priority queue hands
/// out the key queued longest once every `DEFAULT_FAIR_EVERY` gets, so the `k`-th listed key
/// is out within `k × DEFAULT_FAIR_EVERY` gets.
#[test]
fn no_listed_key_starves_under_a_steady_stream_of_changes() {
    fn gets_until_last_listed(
        queue: &dyn Queue<String>,
        listed: usize,
        cap: usize,
    ) -> Option<usize> {
        for i in 0..listed {
            queue.add_with_priority(format!("listed-{i}"), LOW_PRIORITY);
        }
        let last = format!("listed-{}", listed - 1);
        for gets in 1..=cap {
            queue.add(format!("changed-{gets}"));
            let key = queue.get()?;
            queue.done(&key);
            if key == last {
                return Some(gets);
            }
        }
        None
    }
    let strict = kinformer_workqueue::WorkQueue::with_storage(
        kinformer_workqueue::PriorityStorage::new(),
        QueueConfig::new(),
    );
    assert_eq!(
        gets_until_last_listed(&strict, 100, 10_000),
        None,
        "strict order starves it"
    );
    let queue =
        PriorityWorkQueue::new(default_controller_rate_limiter_with_clock(FakeClock::new()));
    let fair_every = kinformer_workqueue::DEFAULT_FAIR_EVERY as usize;
    let gets = gets_until_last_listed(&queue, 100, 10_000).expect("handed out");
    assert_eq!(
        gets,
        100 * fair_every,
        "one listed key every {fair_every} gets, oldest first"
    );
}
