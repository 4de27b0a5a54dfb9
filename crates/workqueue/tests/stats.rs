//! `Queue::stats`: what each queue reports about itself, read from the bookkeeping its
//! metrics keep (start times), its own counts, and its delaying layer's retries.

use std::sync::Arc;
use std::time::Duration;

use kinformer_workqueue::{
    DelayingQueue, FakeClock, LOW_PRIORITY, NoopMetricsProvider, PriorityWorkQueue, Queue,
    QueueConfig, QueueStats, RateLimitingQueue, RateLimitingWorkQueue, WorkQueue,
    default_controller_rate_limiter_with_clock,
};

/// A named queue config on `clock` that records metrics (into nothing).
fn named(name: &str, clock: &FakeClock) -> QueueConfig {
    QueueConfig::new()
        .name(name)
        .metrics_provider(Arc::new(NoopMetricsProvider))
        .clock(clock.clone())
}

#[test]
fn a_rate_limited_queue_reports_depth_held_waiting_retries_and_processing_times() {
    let clock = FakeClock::new();
    let queue = RateLimitingWorkQueue::with_config(
        default_controller_rate_limiter_with_clock(clock.clone()),
        named("stats", &clock),
    );
    for key in ["a", "b", "c"] {
        queue.add(key);
    }
    assert_eq!(queue.get(), Some("a"));
    clock.step(Duration::from_secs(2));
    assert_eq!(queue.get(), Some("b"));
    clock.step(Duration::from_secs(1));
    queue.add_after("d", Duration::from_secs(10));
    queue.add_rate_limited("e");

    let stats = queue.stats();
    assert_eq!(stats.name, "stats");
    assert_eq!(stats.depth, 1, "c");
    assert!(stats.depth_by_priority.is_empty());
    assert_eq!(stats.processing, 2, "a and b");
    assert_eq!(stats.waiting, 2, "d, and e for its 5 ms");
    assert_eq!(stats.retries, 2);
    assert_eq!(stats.unfinished_work, Some(Duration::from_secs(3 + 1)));
    assert_eq!(
        stats.longest_running_processor,
        Some(Duration::from_secs(3))
    );
    assert!(!stats.shutting_down);

    // Behind an `Arc`, as a controller holds its queue: the same snapshot.
    let shared = Arc::new(queue.clone());
    assert_eq!(Queue::stats(&shared), stats);

    queue.done(&"a");
    clock.step(Duration::from_millis(5)); // e is due
    queue.shut_down();
    let stats = queue.stats();
    assert_eq!(
        (stats.depth, stats.processing, stats.waiting),
        (2, 1, 0),
        "c and e queued, b held; shutting down drops what waits"
    );
    assert_eq!(
        stats.longest_running_processor,
        Some(Duration::from_secs(1) + Duration::from_millis(5))
    );
    assert!(stats.shutting_down);
}

#[test]
fn a_queue_without_metrics_has_no_processing_times_but_counts_retries() {
    let clock = FakeClock::new();
    let queue = RateLimitingWorkQueue::with_config(
        default_controller_rate_limiter_with_clock(clock.clone()),
        QueueConfig::new().clock(clock.clone()),
    );
    queue.add(1);
    assert_eq!(queue.get(), Some(1));
    queue.add_rate_limited(2);
    let stats = queue.stats();
    assert_eq!(stats.name, "");
    assert_eq!((stats.depth, stats.processing, stats.waiting), (0, 1, 1));
    assert_eq!(stats.retries, 1);
    assert_eq!(stats.unfinished_work, None);
    assert_eq!(stats.longest_running_processor, None);
}

#[test]
fn a_priority_queue_reports_its_depth_by_priority_highest_first() {
    let clock = FakeClock::new();
    let queue = PriorityWorkQueue::with_config(
        default_controller_rate_limiter_with_clock(clock.clone()),
        named("prio", &clock),
    );
    for key in ["a", "b", "c"] {
        queue.add_with_priority(key, LOW_PRIORITY);
    }
    queue.add("c"); // raised to 0
    queue.add_with_priority("d", 10);
    queue.add_after_with_priority("e", Duration::from_secs(1), 10);
    assert_eq!(queue.get(), Some("d"));
    clock.step(Duration::from_millis(1500));

    let stats = queue.stats();
    assert_eq!(stats.name, "prio");
    assert_eq!(stats.depth, 4, "e readied, c, a, b");
    assert_eq!(
        stats.depth_by_priority,
        [(10, 1), (0, 1), (LOW_PRIORITY, 2)]
    );
    assert_eq!((stats.processing, stats.waiting, stats.retries), (1, 0, 1));
    assert_eq!(
        stats.longest_running_processor,
        Some(Duration::from_millis(1500))
    );
    assert_eq!(stats.unfinished_work, Some(Duration::from_millis(1500)));
}

#[test]
fn a_plain_queue_reports_what_it_has_and_a_custom_queue_the_defaults() {
    let clock = FakeClock::new();
    let queue = WorkQueue::with_config(named("plain", &clock));
    queue.add("x");
    queue.add("y");
    let stats = queue.stats();
    assert_eq!(
        (stats.name.as_str(), stats.depth, stats.retries),
        ("plain", 2, 0)
    );
    assert_eq!(stats.unfinished_work, Some(Duration::ZERO));

    /// A queue of its own that only counts: its `stats` is `QueueStats::basic`.
    struct Counting;
    impl Queue<u8> for Counting {
        fn add(&self, _: u8) {}
        fn add_with_priority(&self, item: u8, _: i32) {
            self.add(item);
        }
        fn len(&self) -> usize {
            7
        }
        fn get(&self) -> Option<u8> {
            None
        }
        fn get_async(&self) -> kinformer_workqueue::GetFuture<'_, u8> {
            kinformer_workqueue::GetFuture::from_future(async { None })
        }
        fn get_with_priority(&self) -> Option<(u8, i32)> {
            None
        }
        fn get_async_with_priority(&self) -> kinformer_workqueue::GetFuture<'_, (u8, i32)> {
            self.get_async().with_priority_zero()
        }
        fn stats(&self) -> QueueStats {
            QueueStats::basic(self.len(), self.shutting_down())
        }
        fn done(&self, _: &u8) {}
        fn shut_down(&self) {}
        fn shut_down_with_drain(&self) {}
        fn shutting_down(&self) -> bool {
            true
        }
    }
    let mut expected = QueueStats::default();
    expected.depth = 7;
    expected.shutting_down = true;
    assert_eq!(Counting.stats(), expected);
}
