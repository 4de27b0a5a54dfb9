//! Bad input: events and objects the server or the sink refuse, undecodable objects.

use super::*;

// ---------------------------------------------------------------- bad input

#[tokio::test(start_paused = true)]
async fn an_undecodable_event_goes_to_the_handler_and_relists() {
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new(Vec::new(), "10")));
    s.fake.push_watch(Ok(watch_of(vec![
        added("a", 11),
        Err(Error::decode("watch event", "malformed JSON")),
    ])));
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the relist", || s.fake.list_calls().len() == 2).await;
    assert_eq!(s.errors.kinds(), ["decode"]);
    // The change is lost: the relist starts from the last good RV.
    assert_eq!(s.fake.list_calls()[1].resource_version, "11");
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn an_object_of_the_wrong_kind_is_reported_and_skipped_and_the_watch_goes_on() {
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new(Vec::new(), "10")));
    let tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    tx.send(Err(Error::UnexpectedKind {
        expected: "v1/Pod".into(),
        actual: "v1/ConfigMap".into(),
    }));
    tx.send(added("b", 12));
    until("the next add", || s.sink.has("add b@12")).await;
    assert_eq!(s.errors.kinds(), ["unexpected kind"]);
    assert_eq!(s.fake.list_calls().len(), 1, "no relist");
    assert_eq!(s.fake.watch_calls().len(), 1, "same watch");
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_server_error_event_goes_to_the_handler_and_relists() {
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new(Vec::new(), "10")));
    s.fake
        .push_watch(Ok(watch_of(vec![Err(status(500, "InternalError"))])));
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the relist", || s.fake.list_calls().len() == 2).await;
    assert_eq!(s.errors.kinds(), ["api 500"]);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_ends_at_once_without_events_is_a_very_short_watch_and_relists() {
    let s = Setup::new();
    s.fake.push_watch(Ok(watch_of(Vec::new())));
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the relist", || s.fake.list_calls().len() == 2).await;
    assert_eq!(s.errors.kinds(), ["very short watch"]);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn an_event_the_sink_refuses_is_reported_and_the_watch_goes_on() {
    let s = Setup::new();
    *s.sink.refuse.lock().unwrap() = Some("bad".into());
    let tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    tx.send(added("bad", 2));
    tx.send(added("good", 3));
    until("the good add", || s.sink.has("add good@3")).await;
    assert_eq!(s.errors.kinds(), ["sink"]);
    assert_eq!(s.fake.list_calls().len(), 1);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_closed_sink_stops_the_reflector() {
    let s = Setup::new();
    let tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    s.sink.closed.store(true, Ordering::SeqCst);
    tx.send(added("a", 2));
    until("the reflector to stop", || h.is_finished()).await;
    assert!(h.stop().await.unwrap_err().is_sink_closed());
    assert_eq!(s.errors.kinds(), ["sink closed"]);
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_object_without_a_name_is_reported_and_skipped() {
    let s = Setup::new();
    let tx = open_watch(&s.fake);
    s.fake.serve_watch_list(true);
    let h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    tx.send(added("", 2));
    tx.send(added("ok", 3));
    tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("4", true))));
    until("the replace", || !s.sink.calls().is_empty()).await;
    assert_eq!(s.sink.calls(), ["replace [ok] @4"]);
    assert_eq!(s.errors.kinds(), ["invalid object"]);
    drop(h);
}
