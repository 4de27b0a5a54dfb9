//! The transform, and stopping the reflector.

use super::*;

// ---------------------------------------------------------------- transform

/// Renames every object to `<name>'` and refuses the one named `bad`.
fn prime() -> kinformer_core::TransformFn<Obj> {
    Arc::new(|o: Arc<Obj>| {
        if o.name == "bad" {
            return Err("refused on purpose".into());
        }
        Ok(Arc::new(Obj {
            name: format!("{}'", o.name),
            rv: o.rv.clone(),
        }))
    })
}

#[tokio::test(start_paused = true)]
async fn the_transform_runs_on_list_items_and_watch_events_and_a_refused_event_is_skipped() {
    let s = Setup::new();
    s.fake
        .on_list(|_| Ok(ListPage::new(vec![obj("a", 3), obj("b", 4)], "10")));
    let tx = open_watch(&s.fake);
    let h = spawn(s.reflector().transform(prime()));
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    tx.send(added("bad", 11));
    tx.send(added("c", 12));
    tx.send(Ok(WatchEvent::Deleted(obj("a", 13))));
    until("the delete", || s.sink.has("delete a'@13")).await;
    assert_eq!(
        s.sink.calls(),
        ["replace [a',b'] @10", "add c'@12", "delete a'@13"]
    );
    assert_eq!(
        s.errors.kinds(),
        ["the transform refused an object: refused on purpose"]
    );
    assert_eq!(
        s.fake.list_calls().len(),
        1,
        "a refused event is skipped, no relist"
    );
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_list_with_an_object_the_transform_refuses_fails_and_is_retried() {
    let s = Setup::new();
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&attempts);
    s.fake.on_list(move |_| {
        let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
        let name = if first { "bad" } else { "good" };
        Ok(ListPage::new(vec![obj(name, 3)], "10"))
    });
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector().transform(prime()));
    until("the retried list", || s.sink.has("replace [good'] @10")).await;
    assert_eq!(
        s.sink.calls(),
        ["replace [good'] @10"],
        "nothing of the failed list"
    );
    assert_eq!(
        s.errors.kinds(),
        ["the transform refused an object: refused on purpose"]
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn the_transform_runs_on_each_object_of_a_streaming_list_as_it_arrives() {
    let s = Setup::new();
    let tx = open_watch(&s.fake);
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&seen);
    let count_then_prime: kinformer_core::TransformFn<Obj> = Arc::new(move |o| {
        counted.fetch_add(1, Ordering::SeqCst);
        prime()(o)
    });
    s.fake.serve_watch_list(true);
    let h = spawn(s.reflector().transform(count_then_prime));
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    tx.send(added("a", 5));
    tx.send(added("b", 6));
    until("both transformed before the end bookmark", || {
        seen.load(Ordering::SeqCst) == 2
    })
    .await;
    assert!(s.sink.calls().is_empty());
    tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("7", true))));
    until("the replace", || !s.sink.calls().is_empty()).await;
    assert_eq!(s.sink.calls(), ["replace [a',b'] @7"]);
    drop(h);
}

// ---------------------------------------------------------------- cancellation

#[tokio::test(start_paused = true)]
async fn dropping_the_handle_leaves_the_task_running_and_its_token_stops_it() {
    let s = Setup::new();
    let tx = open_watch(&s.fake);
    let lw = Arc::new(s.fake.clone());
    let weak = Arc::downgrade(&lw);
    let h = Reflector::new(lw, Arc::clone(&s.sink)).spawn().unwrap();
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    let token = h.cancellation_token();
    drop(h);
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    // Detached, as a Tokio `JoinHandle`: still watching.
    assert!(
        !tx.is_closed(),
        "a dropped handle must not stop the reflector"
    );
    tx.send(Ok(WatchEvent::Added(obj("late", 9))));
    until("the event after the drop", || {
        s.sink.calls().iter().any(|c| c.contains("late"))
    })
    .await;
    // Cancelled: within a few scheduler turns the task is gone, with everything it held.
    token.cancel();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(tx.is_closed(), "the watch stream was not dropped");
    assert!(
        weak.upgrade().is_none(),
        "the task still holds the lister-watcher"
    );
}

#[tokio::test(start_paused = true)]
async fn stop_returns_at_once_even_during_a_backoff() {
    let s = Setup::new();
    s.fake.on_list(|_| Err(status(500, "InternalError")));
    let h = spawn(s.reflector());
    until("two errors", || s.errors.kinds().len() == 2).await;
    let t = Instant::now();
    h.stop().await.unwrap();
    assert_eq!(t.elapsed(), Duration::ZERO, "stop waited for the backoff");
}

#[tokio::test(start_paused = true)]
async fn run_returns_when_its_token_is_cancelled() {
    let s = Setup::new();
    let _tx = open_watch(&s.fake);
    let token = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn(s.reflector().run(token.clone()));
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    token.cancel();
    let r = tokio::time::timeout(Duration::from_millis(1), run).await;
    assert!(matches!(r, Ok(Ok(Ok(())))), "{r:?}");
}

#[test]
fn spawn_outside_a_runtime_is_an_error_not_a_panic() {
    let s = Setup::new();
    assert!(matches!(s.reflector().spawn(), Err(Error::NoRuntime)));
}
