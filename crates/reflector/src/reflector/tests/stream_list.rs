//! Rule 25: the streaming list (WatchList), and lists handed over in parts (rule 52).

use super::*;

// ---------------------------------------------------------------- rule 25

#[tokio::test(start_paused = true)]
async fn a_streaming_list_syncs_only_at_the_initial_events_end_bookmark_and_the_same_watch_goes_on()
{
    let s = Setup::new();
    let tx = open_watch(&s.fake);
    s.fake.serve_watch_list(true);
    let h = spawn(s.reflector());
    until("the streaming watch", || !s.fake.watch_calls().is_empty()).await;
    let w = &s.fake.watch_calls()[0];
    assert!(w.send_initial_events && w.allow_bookmarks);
    assert_eq!(
        w.resource_version, "",
        "the first streaming list is a consistent read"
    );

    tx.send(added("a", 5));
    tx.send(added("b", 6));
    tx.send(added("c", 4));
    tx.send(Ok(WatchEvent::Deleted(obj("c", 7))));
    tx.send(bookmark(7));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        s.sink.calls().is_empty(),
        "nothing reaches the sink before the end bookmark"
    );
    assert!(!h.status().has_synced());

    tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("8", true))));
    until("the replace", || !s.sink.calls().is_empty()).await;
    assert_eq!(s.sink.calls(), ["replace [a,b] @8"]);
    assert!(h.status().has_synced());
    assert_eq!(h.status().last_sync_resource_version(), "8");

    // The same watch carries on.
    tx.send(added("d", 9));
    until("the add", || s.sink.has("add d@9")).await;
    assert_eq!(h.status().last_sync_resource_version(), "9");
    assert_eq!(s.fake.watch_calls().len(), 1);
    assert!(s.fake.list_calls().is_empty(), "no list in streaming mode");
}

/// Rule 52: a streaming list reaches the sink `STREAMED_PART` objects at a time, before
/// its end bookmark; the bookmark ends it with the rest.
#[tokio::test(start_paused = true)]
async fn rule52_a_streaming_list_reaches_the_sink_a_part_at_a_time() {
    let s = Setup::new();
    let tx = open_watch(&s.fake);
    s.fake.serve_watch_list(true);
    let h = spawn(s.reflector());
    until("the streaming watch", || !s.fake.watch_calls().is_empty()).await;
    let n = 2 * STREAMED_PART + STREAMED_PART / 2;
    for i in 0..n {
        tx.send(added(&format!("p{i}"), 5));
    }
    // An object still held may change before the end; only what was handed on may not.
    tx.send(added(&format!("p{}", n - 1), 6));
    until("two parts", || s.sink.calls().len() == 3).await;
    let part = format!("part {STREAMED_PART} items");
    assert_eq!(s.sink.calls(), ["begin", part.as_str(), part.as_str()]);
    assert!(!h.status().has_synced());
    tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("8", true))));
    until("the end", || s.sink.calls().len() == 4).await;
    assert_eq!(
        s.sink.calls()[3],
        format!("replace {} items @8", STREAMED_PART / 2)
    );
    assert!(h.status().has_synced());
    assert!(s.errors.kinds().is_empty());
}

/// Back-pressure: with `pace`, the reflector hands on no further part of a streaming list
/// until the pace it awaits after a part resolves (the informer's FIFO has caught up).
#[tokio::test(start_paused = true)]
async fn a_paced_reflector_waits_for_its_consumer_after_each_part() {
    let s = Setup::new();
    let tx = open_watch(&s.fake);
    s.fake.serve_watch_list(true);
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let waits = Arc::new(AtomicUsize::new(0));
    let (g, w) = (Arc::clone(&gate), Arc::clone(&waits));
    let reflector = s.reflector().pace(Arc::new(move || {
        let (g, w) = (Arc::clone(&g), Arc::clone(&w));
        Box::pin(async move {
            w.fetch_add(1, Ordering::SeqCst);
            if let Ok(permit) = g.acquire().await {
                permit.forget();
            }
        })
    }));
    let h = spawn(reflector);
    until("the streaming watch", || !s.fake.watch_calls().is_empty()).await;
    for i in 0..3 * STREAMED_PART {
        tx.send(added(&format!("p{i}"), 5));
    }
    tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("8", true))));
    until("the first part", || s.sink.calls().len() == 2).await;
    // However long the consumer takes, nothing more is handed on.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(s.sink.calls().len(), 2);
    assert_eq!(waits.load(Ordering::SeqCst), 1);
    gate.add_permits(1);
    until("the second part", || s.sink.calls().len() == 3).await;
    gate.add_permits(2);
    until("the end", || h.status().has_synced()).await;
    let part = format!("part {STREAMED_PART} items");
    assert_eq!(
        s.sink.calls(),
        [
            "begin",
            part.as_str(),
            part.as_str(),
            part.as_str(),
            "replace [] @8"
        ]
    );
    assert_eq!(waits.load(Ordering::SeqCst), 3);
}

/// Rule 52: a second event for an object already handed on in a part (which an API server
/// does not send before the end bookmark) fails the streaming list, and the round falls
/// back to List+Watch, whose list starts over.
#[tokio::test(start_paused = true)]
async fn rule52_a_second_event_for_an_object_handed_on_falls_back_to_list_and_watch() {
    let s = Setup::new();
    s.fake
        .on_list(|_| Ok(ListPage::new(vec![obj("a", 3)], "10")));
    let tx = open_watch(&s.fake);
    let _after = open_watch(&s.fake);
    s.fake.serve_watch_list(true);
    let _h = spawn(s.reflector());
    until("the streaming watch", || !s.fake.watch_calls().is_empty()).await;
    for i in 0..STREAMED_PART {
        tx.send(added(&format!("p{i}"), 5));
    }
    tx.send(Ok(WatchEvent::Deleted(obj("p7", 6))));
    until("the list", || !s.fake.list_calls().is_empty()).await;
    until("the replace", || s.sink.has("replace [a] @10")).await;
    let part = format!("part {STREAMED_PART} items");
    assert_eq!(
        s.sink.calls(),
        ["begin", part.as_str(), "begin", "replace [a] @10"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_server_refusing_the_streaming_list_falls_back_to_list_and_watch() {
    let s = Setup::new();
    s.fake
        .on_list(|_| Ok(ListPage::new(vec![obj("a", 3)], "10")));
    s.fake.push_watch(Err(status(422, "Invalid")));
    let _tx = open_watch(&s.fake);
    s.fake.serve_watch_list(true);
    let h = spawn(s.reflector());
    until("the plain watch", || s.fake.watch_calls().len() == 2).await;
    let w = s.fake.watch_calls();
    assert!(w[0].send_initial_events);
    assert!(!w[1].send_initial_events);
    assert_eq!(w[1].resource_version, "10");
    assert_eq!(s.fake.list_calls()[0].resource_version, "0");
    assert_eq!(s.sink.calls(), ["replace [a] @10"]);
    // The fallback needs no backoff: it happens at once.
    assert_eq!(s.fake.list_times()[0], s.fake.watch_times()[0]);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_streaming_relist_uses_the_last_rv_and_an_expired_one_retries_at_rv_empty() {
    let s = Setup::new();
    // Round 1: streamed at "" up to 8, then the watch answers 410.
    s.fake.push_watch(Ok(watch_of(vec![
        added("a", 5),
        Ok(WatchEvent::Bookmark(Bookmark::new("8", true))),
        Err(status(410, "Expired")),
    ])));
    // Round 2: the stream at "8" is expired too: retried at "".
    s.fake.push_watch(Err(status(410, "Expired")));
    let tx = open_watch(&s.fake);
    s.fake.serve_watch_list(true);
    let h = spawn(s.reflector());
    until("three watches", || s.fake.watch_calls().len() == 3).await;
    let rvs: Vec<_> = s
        .fake
        .watch_calls()
        .into_iter()
        .map(|w| (w.resource_version, w.send_initial_events))
        .collect();
    assert_eq!(
        rvs,
        [
            (String::new(), true),
            ("8".to_string(), true),
            (String::new(), true)
        ]
    );
    tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("12", true))));
    until("the second sync", || h.status().syncs() == 2).await;
    assert_eq!(s.sink.calls(), ["replace [a] @8", "replace [] @12"]);
    assert!(s.fake.list_calls().is_empty());
}
