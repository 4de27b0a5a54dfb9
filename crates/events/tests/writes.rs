//! How writes fail, are retried and are bounded, on a fake clock: client-go's
//! `recordEvent` / `attemptRecording` rules, and kinformer's bounds on top.

use std::time::{Duration, Instant};

use crate::common::*;
use kinformer_events::{Broadcaster, Config, Error, EventType, FakeClock};

fn publish(h: &Harness, name: &str, reason: &str) -> Result<(), Error> {
    h.recorder
        .publish(&pod(name), None, EventType::Normal, reason, "Bind", "")
}

/// Real time to wait for a call that should not come.
const QUIET: Duration = Duration::from_millis(100);

#[tokio::test]
async fn transport_failures_are_retried_twelve_times_ten_to_twelve_and_a_half_seconds_apart() {
    let mut h = Harness::new();
    h.sink.fail_always(Some(Fault::Transport));
    publish(&h, "web-0", "Scheduled").unwrap();
    assert_eq!(h.next_call().await.verb, Verb::Create);
    for try_ in 2..=12 {
        // Not before 10 s ...
        h.step(secs(10) - Duration::from_millis(1));
        assert!(
            h.call_within(QUIET).await.is_none(),
            "try {try_} came early"
        );
        // ... and by 12.5 s.
        h.step(Duration::from_millis(2_501));
        let call = h.next_call().await;
        assert_eq!(call.verb, Verb::Create, "try {try_}");
        assert!(call.answer.is_err());
    }
    h.step(mins(1));
    assert!(
        h.call_within(QUIET).await.is_none(),
        "gave up after 12 tries"
    );
    h.settle().await; // the write has ended
}

#[tokio::test]
async fn a_transport_failure_then_success_writes_the_event_once() {
    let mut h = Harness::new();
    h.sink.fail_next([Fault::Transport, Fault::Transport]);
    publish(&h, "web-0", "Scheduled").unwrap();
    for _ in 0..3 {
        h.next_call().await;
        h.step(Duration::from_millis(12_500));
    }
    h.settle().await;
    assert_eq!(h.sink.stored().len(), 1);
}

#[tokio::test]
async fn a_refusal_by_the_server_or_an_unbuildable_request_is_not_retried() {
    // Any status, even 429 and 500, is final in client-go's recordEvent.
    for fault in [
        Fault::Api(422, "Invalid"),
        Fault::Api(403, "Forbidden"),
        Fault::Api(429, "TooManyRequests"),
        Fault::Api(500, "InternalError"),
        Fault::Request,
    ] {
        let mut h = Harness::new();
        h.sink.fail_next([fault.clone()]);
        publish(&h, "web-0", "Scheduled").unwrap();
        let calls = h.settle().await;
        assert_eq!(calls.len(), 1, "{fault:?}");
        h.step(mins(1));
        assert!(h.settle().await.is_empty(), "{fault:?} was retried");
    }
}

#[tokio::test]
async fn already_exists_when_creating_a_new_event_is_not_retried() {
    let mut h = Harness::new();
    h.sink.fail_next([Fault::Api(409, "AlreadyExists")]);
    publish(&h, "web-0", "Scheduled").unwrap();
    assert_eq!(h.settle().await.len(), 1);
    h.step(mins(1));
    assert!(h.settle().await.is_empty());
}

#[tokio::test]
async fn a_series_patch_that_finds_no_event_creates_it_with_the_series() {
    let mut h = Harness::new();
    publish(&h, "web-0", "Scheduled").unwrap();
    h.settle().await;
    h.sink.delete_all();
    h.step(secs(1));
    publish(&h, "web-0", "Scheduled").unwrap();
    let calls = h.settle().await;
    let seen: Vec<_> = calls
        .iter()
        .map(|c| (c.verb, c.count(), c.answer.is_ok()))
        .collect();
    assert_eq!(
        seen,
        [(Verb::Patch, Some(2), false), (Verb::Create, Some(2), true)]
    );
    assert_eq!(calls[1].event.metadata.resource_version, None);
}

#[tokio::test]
async fn already_exists_when_creating_a_series_is_retried_and_the_retry_patches() {
    let mut h = Harness::new();
    publish(&h, "web-0", "Scheduled").unwrap();
    h.settle().await;
    // The race client-go's comment describes: the patch misses, the create then collides.
    h.sink.fail_next([
        Fault::Api(404, "NotFound"),
        Fault::Api(409, "AlreadyExists"),
    ]);
    h.step(secs(1));
    publish(&h, "web-0", "Scheduled").unwrap();
    assert_eq!(h.next_call().await.verb, Verb::Patch);
    assert_eq!(h.next_call().await.verb, Verb::Create);
    h.step(Duration::from_millis(12_500));
    let retry = h.next_call().await;
    assert_eq!((retry.verb, retry.count()), (Verb::Patch, Some(2)));
    assert!(retry.answer.is_ok());
}

#[tokio::test]
async fn a_finishing_write_that_may_pass_keeps_the_series_for_the_next_check() {
    let mut h = Harness::new();
    publish(&h, "web-0", "Scheduled").unwrap();
    h.step(secs(1));
    publish(&h, "web-0", "Scheduled").unwrap();
    h.settle().await;
    h.sink.fail_next([Fault::Transport]);
    h.step(mins(12));
    let calls = h.settle().await;
    assert_eq!(calls.len(), 1, "one try per check: {calls:?}");
    assert!(calls[0].answer.is_err());
    h.step(mins(6));
    let calls = h.settle().await;
    assert_eq!((calls[0].verb, calls[0].count()), (Verb::Patch, Some(2)));
    assert!(calls[0].answer.is_ok());
}

#[tokio::test]
async fn publish_never_waits_and_drops_what_does_not_fit_the_queue() {
    let mut h = Harness::with_config(|c| c.queue_capacity(4).max_writes_in_flight(1));
    // The sink never answers: the one write slot stays taken.
    h.sink.fail_always(Some(Fault::Hang));
    let started = Instant::now();
    // The task does not run while this (single-threaded) test publishes without awaiting,
    // so exactly the queue's capacity is taken.
    let results: Vec<_> = (0..50)
        .map(|i| publish(&h, "web-0", &format!("Reason{i}")))
        .collect();
    assert!(started.elapsed() < Duration::from_secs(1));
    let accepted = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(accepted, 4);
    assert!(
        results[4..]
            .iter()
            .all(|r| matches!(r, Err(Error::QueueFull)))
    );

    // The task takes one into the hung write and waits with the next for a slot; the
    // queue has room for two more, then is full again, and publish still does not wait.
    assert_eq!(h.next_call().await.verb, Verb::Create);
    tokio::task::yield_now().await;
    let started = Instant::now();
    let results: Vec<_> = (50..60)
        .map(|i| publish(&h, "web-0", &format!("Reason{i}")))
        .collect();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 2);
}

#[tokio::test]
async fn a_full_cache_writes_new_events_without_folding_their_repeats() {
    let mut h = Harness::with_config(|c| c.max_cached_events(2));
    publish(&h, "a", "Scheduled").unwrap();
    publish(&h, "b", "Scheduled").unwrap();
    publish(&h, "c", "Scheduled").unwrap();
    h.step(secs(1));
    publish(&h, "c", "Scheduled").unwrap();
    publish(&h, "a", "Scheduled").unwrap();
    let calls = h.settle().await;
    let seen: Vec<_> = calls
        .iter()
        .map(|c| {
            let name = c.event.regarding.as_ref().unwrap().name.clone().unwrap();
            (name, c.verb)
        })
        .collect();
    let expected = [
        ("a", Verb::Create),
        ("b", Verb::Create),
        ("c", Verb::Create),
        ("c", Verb::Create),
        ("a", Verb::Patch),
    ];
    assert_eq!(
        seen,
        expected.map(|(n, v)| (n.to_owned(), v)),
        "c is not cached, a still is"
    );
}

#[tokio::test]
async fn shutdown_writes_what_is_queued_then_refuses_events() {
    let h = Harness::new();
    for name in ["a", "b", "c"] {
        publish(&h, name, "Scheduled").unwrap();
    }
    let recorder = h.recorder.clone();
    let Harness {
        broadcaster, sink, ..
    } = h;
    broadcaster.shutdown().await;
    assert_eq!(sink.stored().len(), 3);
    assert!(matches!(
        recorder.publish(&pod("d"), None, EventType::Normal, "Scheduled", "Bind", ""),
        Err(Error::ShutDown)
    ));
}

#[tokio::test]
async fn shutdown_ends_the_sleep_before_a_retry() {
    let mut h = Harness::new();
    h.sink.fail_always(Some(Fault::Transport));
    publish(&h, "web-0", "Scheduled").unwrap();
    h.next_call().await;
    let Harness {
        broadcaster,
        recorder,
        ..
    } = h;
    // The clock never moves: only the cancelled sleep lets this return.
    tokio::time::timeout(Duration::from_secs(5), broadcaster.shutdown())
        .await
        .expect("shutdown returns without the retry");
    assert!(matches!(
        recorder.publish(&pod("x"), None, EventType::Normal, "R", "A", ""),
        Err(Error::ShutDown)
    ));
}

#[test]
fn a_broadcaster_needs_a_tokio_runtime() {
    let (sink, _calls) = FakeSink::new();
    let err = Broadcaster::with_sink(sink, Config::new().clock(FakeClock::new())).unwrap_err();
    assert!(matches!(err, Error::NoRuntime), "{err}");
}
