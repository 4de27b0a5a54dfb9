//! Rules 22–24: rewatching, relisting and backing off, and the resource version a watch reaches.

use super::*;

// ---------------------------------------------------------------- rule 22

#[tokio::test(start_paused = true)]
async fn a_watch_that_closes_cleanly_rewatches_from_the_last_rv_without_relist() {
    let s = Setup::new();
    s.fake
        .on_list(|_| Ok(ListPage::new(vec![obj("a", 10)], "10")));
    s.fake.push_watch(Ok(watch_of(vec![
        added("b", 11),
        Ok(WatchEvent::Modified(obj("b", 12))),
        Ok(WatchEvent::Deleted(obj("a", 13))),
    ])));
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the re-watch", || s.fake.watch_calls().len() == 2).await;

    let rvs: Vec<_> = s
        .fake
        .watch_calls()
        .into_iter()
        .map(|w| w.resource_version)
        .collect();
    assert_eq!(rvs, ["10", "13"]);
    assert_eq!(
        s.fake.list_calls().len(),
        1,
        "a clean close must not relist"
    );
    assert_eq!(
        s.sink.calls(),
        ["replace [a] @10", "add b@11", "update b@12", "delete a@13"]
    );
    // No backoff before a re-watch after a clean close.
    let t = s.fake.watch_times();
    assert_eq!(t[1], t[0]);
    assert!(s.errors.kinds().is_empty());
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_410_in_the_watch_relists_after_a_backoff_and_watches_from_the_new_list() {
    let s = Setup::new();
    let n = AtomicUsize::new(0);
    s.fake.on_list(move |_| {
        Ok(match n.fetch_add(1, Ordering::SeqCst) {
            0 => ListPage::new(vec![obj("a", 10), obj("gone", 9)], "10"),
            _ => ListPage::new(vec![obj("a", 10), obj("new", 30)], "30"),
        })
    });
    s.fake
        .push_watch(Ok(watch_of(vec![Err(status(410, "Expired"))])));
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the second watch", || s.fake.watch_calls().len() == 2).await;

    assert_eq!(
        s.sink.calls(),
        ["replace [a,gone] @10", "replace [a,new] @30"],
        "the relist replaces: the sink turns `gone` into a tombstone"
    );
    assert_eq!(s.fake.watch_calls()[1].resource_version, "30");
    assert_eq!(s.errors.kinds(), ["api 410"]);
    let gap = (s.fake.list_times()[1] - s.errors.times()[0]).as_secs_f64();
    assert!((0.8..1.6).contains(&gap), "relist after {gap} s");
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn counters_count_lists_by_reason_watches_and_events_by_type() {
    let s = Setup::new();
    let n = AtomicUsize::new(0);
    s.fake.on_list(move |_| {
        Ok(match n.fetch_add(1, Ordering::SeqCst) {
            0 => ListPage::new(vec![obj("a", 10)], "10"),
            _ => ListPage::new(vec![obj("a", 12)], "12"),
        })
    });
    s.fake.push_watch(Ok(watch_of(vec![
        Ok(WatchEvent::Added(obj("b", 11))),
        Ok(WatchEvent::Modified(obj("a", 11))),
        Ok(WatchEvent::Deleted(obj("b", 11))),
        bookmark(11),
        Err(status(410, "Expired")),
    ])));
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the second watch", || s.fake.watch_calls().len() == 2).await;
    let c = h.status().counters();
    assert_eq!(
        c.lists,
        [
            ("initial", 1),
            ("expired", 1),
            ("too_large_resource_version", 0),
            ("very_short_watch", 0),
            ("error", 0),
            ("shard_selection_changed", 0)
        ]
    );
    assert_eq!(c.watches, 2);
    assert_eq!(
        c.events,
        [
            ("added", 1),
            ("modified", 1),
            ("deleted", 1),
            ("bookmark", 1)
        ]
    );
    assert_eq!(c.syncs, 2);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_list_answering_410_is_retried_at_rv_empty_a_consistent_read() {
    let s = Setup::new();
    s.fake.on_list(|o| match o.resource_version.as_str() {
        "0" => Ok(ListPage::new(objs("a", 4), "10")),
        "10" => Err(status(410, "Expired")),
        "" => Ok(ListPage::new(objs("a", 8), "11")),
        other => panic!("list at {other}"),
    });
    s.fake
        .push_watch(Ok(watch_of(vec![Err(status(410, "Expired"))])));
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the second watch", || s.fake.watch_calls().len() == 2).await;

    let rvs: Vec<_> = s
        .fake
        .list_calls()
        .into_iter()
        .map(|o| o.resource_version)
        .collect();
    assert_eq!(rvs, ["0", "10", ""]);
    assert_eq!(h.status().last_sync_resource_version(), "11");
    assert_eq!(s.fake.watch_calls()[1].resource_version, "11");
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_too_large_rv_is_retried_at_rv_empty_in_each_server_format() {
    let too_large = [
        Error::Api(
            ApiStatus::new(
                504,
                "Timeout",
                "Timeout: Too large resource version: 20, current: 5",
            )
            .with_cause("ResourceVersionTooLarge", "Too large resource version"),
        ),
        Error::Api(
            ApiStatus::new(504, "Timeout", "x").with_cause("", "Too large resource version"),
        ),
        Error::Api(ApiStatus::new(504, "Timeout", "Too large resource version")),
    ];
    for err in too_large {
        let s = Setup::new();
        let err = Mutex::new(Some(err));
        s.fake.on_list(move |o| match o.resource_version.as_str() {
            "0" => Ok(ListPage::new(Vec::new(), "20")),
            "20" => Err(err.lock().unwrap().take().unwrap()),
            "" => Ok(ListPage::new(Vec::new(), "30")),
            other => panic!("list at {other}"),
        });
        // A watch that ends with "too large" too (a lagging watch cache).
        s.fake.push_watch(Ok(watch_of(vec![Err(Error::Api(
            ApiStatus::new(504, "Timeout", "t").with_cause("ResourceVersionTooLarge", ""),
        ))])));
        let _tx = open_watch(&s.fake);
        let h = spawn(s.reflector());
        until("the second watch", || s.fake.watch_calls().len() == 2).await;
        let rvs: Vec<_> = s
            .fake
            .list_calls()
            .into_iter()
            .map(|o| o.resource_version)
            .collect();
        assert_eq!(rvs, ["0", "20", ""]);
        assert_eq!(s.fake.watch_calls()[1].resource_version, "30");
        drop(h);
    }
}

// ---------------------------------------------------------------- rule 23

#[tokio::test(start_paused = true)]
async fn a_429_or_an_unreachable_server_on_watch_start_backs_off_and_rewatches_without_relist() {
    for failure in ["429", "unreachable"] {
        let s = Setup::new();
        s.fake.on_list(|_| Ok(ListPage::new(Vec::new(), "10")));
        for _ in 0..4 {
            s.fake.push_watch(Err(match failure {
                "429" => status(429, "TooManyRequests"),
                _ => Error::unreachable("connection refused"),
            }));
        }
        let _tx = open_watch(&s.fake);
        let h = spawn(s.reflector());
        until("the fifth watch", || s.fake.watch_calls().len() == 5).await;

        assert_eq!(s.fake.list_calls().len(), 1, "{failure}: no relist");
        assert!(
            s.fake
                .watch_calls()
                .iter()
                .all(|w| w.resource_version == "10"),
            "{failure}: every re-watch from the last RV"
        );
        // An unreachable server is retried within a second or two (kinformer's
        // `max_unreachable`); one that answers 429 keeps the full escalation.
        let cap = if failure == "429" { 30.0 } else { 1.0 };
        assert_backoff(&secs_between(&s.fake.watch_times()), 0.8, cap);
        let want = if failure == "429" {
            "api 429"
        } else {
            "unreachable"
        };
        assert_eq!(s.errors.kinds(), vec![want; 4]);
        drop(h);
    }
}

#[tokio::test(start_paused = true)]
async fn a_429_inside_the_watch_stream_backs_off_and_rewatches_without_relist() {
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new(Vec::new(), "10")));
    s.fake.push_watch(Ok(watch_of(vec![
        added("a", 11),
        Err(status(429, "TooManyRequests")),
    ])));
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the re-watch", || s.fake.watch_calls().len() == 2).await;
    assert_eq!(s.fake.list_calls().len(), 1);
    assert_eq!(s.fake.watch_calls()[1].resource_version, "11");
    let gap = secs_between(&s.fake.watch_times())[0];
    assert!((0.8..1.6).contains(&gap), "{gap}");
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_connection_cut_mid_watch_rewatches_at_once_without_relist() {
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new(Vec::new(), "10")));
    s.fake.push_watch(Ok(watch_of(vec![
        added("a", 11),
        Err(Error::unreachable("TLS record corrupted")),
    ])));
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the re-watch", || s.fake.watch_calls().len() == 2).await;
    assert_eq!(s.fake.list_calls().len(), 1);
    assert_eq!(s.fake.watch_calls()[1].resource_version, "11");
    assert_eq!(s.errors.kinds(), ["unreachable"]);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn failed_lists_reach_the_handler_and_are_retried_on_the_growing_backoff() {
    let s = Setup::new();
    s.fake.on_list(|_| Err(status(403, "Forbidden")));
    let h = spawn(s.reflector());
    until("six errors", || s.errors.kinds().len() == 6).await;
    assert!(s.errors.kinds().iter().all(|k| k == "api 403"));
    assert_backoff(&secs_between(&s.errors.times()), 0.8, 30.0);
    assert!(s.fake.watch_calls().is_empty(), "no watch without a list");
    assert!(!h.status().has_synced());
    // Every retry is the initial list again.
    assert!(
        s.fake
            .list_calls()
            .iter()
            .all(|o| o.resource_version == "0")
    );
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_custom_backoff_is_used() {
    let s = Setup::new();
    s.fake.on_list(|_| Err(status(500, "InternalError")));
    let fast = Backoff {
        initial: Duration::from_millis(10),
        max: Duration::from_millis(40),
        jitter: 0.0,
        ..Backoff::default()
    };
    let h = spawn(s.reflector().backoff(fast));
    until("five errors", || s.errors.kinds().len() == 5).await;
    let gaps: Vec<u128> = s
        .errors
        .times()
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    assert_eq!(gaps, [10, 20, 40, 40]);
    drop(h);
}

/// The status keeps the failure that ended the last failed round and the backoff after it,
/// also once the reflector has recovered.
#[tokio::test(start_paused = true)]
async fn the_status_keeps_the_last_failure_and_the_backoff_after_it() {
    let s = Setup::new();
    let failures = Arc::new(AtomicUsize::new(0));
    s.fake.on_list({
        let failures = Arc::clone(&failures);
        move |_| {
            if failures.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(status(500, "InternalError"))
            } else {
                Ok(ListPage::new(objs("a", 1), "5"))
            }
        }
    });
    let _tx = open_watch(&s.fake);
    let fast = Backoff {
        initial: Duration::from_millis(10),
        jitter: 0.0,
        ..Backoff::default()
    };
    let before = std::time::SystemTime::now();
    let h = spawn(s.reflector().backoff(fast));
    until("the watch after two failed lists", || {
        !s.fake.watch_calls().is_empty()
    })
    .await;
    assert!(h.status().has_synced());
    let last = h.status().last_error().expect("two rounds failed");
    assert!(last.message.contains("InternalError"), "{}", last.message);
    assert_eq!(
        last.backoff,
        Duration::from_millis(20),
        "the second failure's"
    );
    assert_eq!(last.relist_reason, "error");
    assert!(last.at >= before && last.at <= std::time::SystemTime::now());
    assert_eq!(
        h.status().counters().lists,
        [
            ("initial", 1),
            ("expired", 0),
            ("too_large_resource_version", 0),
            ("very_short_watch", 0),
            ("error", 2),
            ("shard_selection_changed", 0)
        ]
    );
    drop(h);
}

/// The clock is a swap point: on a fake clock that stands still, a failed list waits for the
/// clock to be moved, however much of the runtime's time passes, and retries on each move
/// that reaches the backoff.
#[tokio::test(start_paused = true)]
async fn the_backoff_sleeps_on_the_reflectors_clock() {
    let s = Setup::new();
    s.fake.on_list(|_| Err(status(500, "InternalError")));
    let clock = kinformer_core::FakeClock::new();
    let backoff = Backoff {
        initial: Duration::from_secs(10),
        jitter: 0.0,
        ..Backoff::default()
    };
    let h = spawn(
        s.reflector()
            .backoff(backoff)
            .clock(Arc::new(clock.clone())),
    );
    until("the first error", || s.errors.kinds().len() == 1).await;
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(
        s.fake.list_calls().len(),
        1,
        "Tokio's hour is not the reflector's"
    );
    clock.step(Duration::from_secs(10));
    until("the first retry", || s.errors.kinds().len() == 2).await;
    clock.step(Duration::from_secs(19));
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(s.fake.list_calls().len(), 2, "the second delay is 20 s");
    clock.step(Duration::from_secs(1));
    until("the second retry", || s.errors.kinds().len() == 3).await;
    drop(h);
}

// The backoff policy: where kinformer parts from client-go (see `Backoff`).

/// A list that works and a watch that starts with `fail` `n` times, then one that delivers
/// an event and ends with `fail` again, then one that stays open.
fn failing_watches_then_one_that_delivers(
    s: &Setup,
    fail: fn() -> Error,
    n: usize,
) -> WatchSender<Obj> {
    s.fake.on_list(|_| Ok(ListPage::new(Vec::new(), "10")));
    for _ in 0..n {
        s.fake.push_watch(Err(fail()));
    }
    s.fake
        .push_watch(Ok(watch_of(vec![added("a", 11), Err(fail())])));
    open_watch(&s.fake)
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_delivers_starts_the_next_backoff_over() {
    let s = Setup::new();
    let _tx = failing_watches_then_one_that_delivers(&s, || status(429, "TooManyRequests"), 4);
    let h = spawn(s.reflector());
    until("the sixth watch", || s.fake.watch_calls().len() == 6).await;
    let gaps = secs_between(&s.fake.watch_times());
    // 0.8, 1.6, 3.2, 6.4 (each up to twice that), then the watch delivered: 0.8 again.
    assert_backoff(&gaps[..4], 0.8, 30.0);
    assert_backoff(&gaps[4..], 0.8, 30.0);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn with_client_gos_backoff_a_watch_that_delivers_changes_nothing() {
    let s = Setup::new();
    let _tx = failing_watches_then_one_that_delivers(&s, || status(429, "TooManyRequests"), 4);
    let h = spawn(s.reflector().backoff(Backoff::client_go()));
    until("the sixth watch", || s.fake.watch_calls().len() == 6).await;
    assert_backoff(&secs_between(&s.fake.watch_times()), 0.8, 30.0);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_list_that_works_does_not_reset_the_backoff_when_the_watch_is_refused() {
    // RBAC that allows list but not watch: client-go's spacing, not a relist every second.
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new(Vec::new(), "10")));
    s.fake.on_watch(|_| Err(status(403, "Forbidden")));
    let h = spawn(s.reflector());
    until("six lists", || s.fake.list_calls().len() == 6).await;
    assert_backoff(&secs_between(&s.fake.list_times()), 0.8, 30.0);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_410_after_failures_relists_after_the_initial_delay() {
    // A partition long enough for the server to compact: once it is back it answers 410, and
    // the relist comes within 0.8-1.6 s, not after the escalated backoff.
    let s = Setup::new();
    let lists = Mutex::new(0);
    s.fake.on_list(move |_| {
        let mut n = lists.lock().unwrap();
        *n += 1;
        match *n {
            1 => Ok(ListPage::new(Vec::new(), "10")),
            2..=5 => Err(status(500, "InternalError")),
            _ => Ok(ListPage::new(Vec::new(), "50")),
        }
    });
    s.fake
        .push_watch(Ok(watch_of(vec![Err(status(500, "InternalError"))])));
    s.fake
        .push_watch(Ok(watch_of(vec![Err(status(410, "Expired"))])));
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the seventh list", || s.fake.list_calls().len() == 7).await;
    let gaps = secs_between(&s.fake.list_times());
    // 500s: 0.8, 1.6, 3.2, 6.4, 12.8; then the 410.
    assert_backoff(&gaps[..5], 0.8, 30.0);
    assert!((0.8..1.6).contains(&gaps[5]), "{gaps:?}");
    drop(h);
}

// ---------------------------------------------------------------- rule 24

#[tokio::test(start_paused = true)]
async fn every_event_and_every_bookmark_advances_last_sync_resource_version() {
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new(Vec::new(), "10")));
    let tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    let st = h.status().clone();
    for (ev, rv) in [
        (added("a", 11), "11"),
        (bookmark(15), "15"),
        (Ok(WatchEvent::Modified(obj("a", 16))), "16"),
        (bookmark(20), "20"),
        (Ok(WatchEvent::Deleted(obj("a", 21))), "21"),
    ] {
        tx.send(ev);
        until(rv, || st.last_sync_resource_version() == rv).await;
    }
    assert_eq!(
        s.sink.calls(),
        [
            "replace [] @10",
            "add a@11",
            "bookmark 15",
            "update a@16",
            "bookmark 20",
            "delete a@21"
        ]
    );
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_watch_from_rv_empty_ignores_the_rvs_of_its_synthetic_adds_until_another_event() {
    let s = Setup::new();
    // A list without a resourceVersion: the watch must start from "".
    s.fake.on_list(|_| Ok(ListPage::new(Vec::new(), "")));
    let tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    assert_eq!(s.fake.watch_calls()[0].resource_version, "");
    tx.send(added("x", 7));
    tx.send(added("y", 3));
    until("two adds", || s.sink.calls().len() == 3).await;
    assert_eq!(h.status().last_sync_resource_version(), "");
    tx.send(bookmark(9));
    until("the bookmark", || {
        h.status().last_sync_resource_version() == "9"
    })
    .await;
    tx.send(added("z", 10));
    until("the next add", || {
        h.status().last_sync_resource_version() == "10"
    })
    .await;
}
