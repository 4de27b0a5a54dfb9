//! Rule 67: a reflector resumed from a snapshot catches up with a watch from the
//! snapshot's version and hands the sink one list; when it cannot, it lists consistently.

use crate::{CATCH_UP_WATCH_TIMEOUT, Resume};

use super::*;

fn modified(name: &str, rv: u32) -> Result<WatchEvent<Obj>, Error> {
    Ok(WatchEvent::Modified(obj(name, rv)))
}

fn deleted(name: &str, rv: u32) -> Result<WatchEvent<Obj>, Error> {
    Ok(WatchEvent::Deleted(obj(name, rv)))
}

fn snapshot() -> Vec<Arc<Obj>> {
    ["a", "b", "c"]
        .iter()
        .map(|n| Arc::new(obj(n, 5)))
        .collect()
}

/// Answers the probe (a consistent list of one) at `server_rv`, and any other list with
/// `listed` at `list_rv`.
fn server(s: &Setup, server_rv: u32, listed: Vec<Obj>, list_rv: u32) {
    s.fake.on_list(move |o| {
        Ok(if o.limit == Some(1) {
            assert_eq!(o.resource_version, "", "the probe is a consistent read");
            ListPage::new(vec![obj("whatever", 1)], server_rv.to_string())
        } else {
            ListPage::new(listed.clone(), list_rv.to_string())
        })
    });
}

/// A reflector resumed from version 10, the cache holding the snapshot's `a`, `b`, `c`.
fn resumed_from_the_cache(s: &Setup) -> Reflector<Obj, FakeListerWatcher<Obj>, Arc<Rec>> {
    let known = Cached::with(snapshot().iter().map(|o| (**o).clone()).collect());
    s.reflector()
        .known_objects(known)
        .resume(Resume::from_known("10"))
}

fn watch_rvs(s: &Setup) -> Vec<String> {
    s.fake
        .watch_calls()
        .into_iter()
        .map(|w| w.resource_version)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn rule67_a_resumed_reflector_watches_from_the_snapshot_until_it_reaches_the_server_and_hands_on_one_list()
 {
    let s = Setup::new();
    server(&s, 20, vec![], 0);
    s.fake.push_watch(Ok(watch_of(vec![
        modified("b", 12),
        deleted("c", 13),
        added("d", 15),
        bookmark(20),
        // After the version the server was at: the next watch's.
        added("late", 21),
    ])));
    let tx = open_watch(&s.fake);
    let h = spawn(s.reflector().resume(Resume::with_objects("10", snapshot())));
    until("the watch after catching up", || {
        s.fake.watch_calls().len() == 2
    })
    .await;

    // Nothing reached the sink before the version the server was at: then one list, the
    // snapshot with the changes.
    assert_eq!(s.sink.calls(), ["replace [a,b,d] @20"]);
    let replaced: Vec<String> = s
        .sink
        .replaced
        .lock()
        .unwrap()
        .iter()
        .map(|o| format!("{}@{}", o.name, o.rv))
        .collect();
    assert_eq!(replaced, ["a@5", "b@12", "d@15"]);
    assert_eq!(watch_rvs(&s), ["10", "20"]);
    assert_eq!(s.fake.watch_calls()[0].timeout, CATCH_UP_WATCH_TIMEOUT);
    assert!(s.fake.watch_calls()[0].allow_bookmarks);
    assert_eq!(s.fake.list_calls().len(), 1, "one probe, no list");
    let c = h.status().counters();
    assert_eq!((c.resumed, c.resume_failures, c.syncs), (1, 0, 1));
    assert!(h.status().has_synced());
    assert_eq!(h.status().last_sync_resource_version(), "20");
    // From here the reflector watches as after any list.
    tx.send(added("e", 22));
    until("the event after", || s.sink.has("add e@22")).await;
    assert!(s.errors.kinds().is_empty(), "{:?}", s.errors.kinds());
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn rule67_resumed_from_the_cache_only_what_changed_is_listed_and_the_rest_by_key() {
    let s = Setup::new();
    server(&s, 20, vec![], 0);
    s.fake.push_watch(Ok(watch_of(vec![
        modified("b", 12),
        deleted("c", 13),
        added("d", 15),
        // An event at the server's version proves it as a bookmark does.
        modified("a", 20),
    ])));
    let _tx = open_watch(&s.fake);
    let h = spawn(resumed_from_the_cache(&s));
    until("the watch after catching up", || {
        s.fake.watch_calls().len() == 2
    })
    .await;
    assert_eq!(s.sink.calls(), ["replace [a,b,d] @20"]);
    drop(h);

    let s = Setup::new();
    server(&s, 20, vec![], 0);
    s.fake.push_watch(Ok(watch_of(vec![
        modified("b", 12),
        deleted("c", 13),
        added("d", 15),
        bookmark(20),
    ])));
    let _tx = open_watch(&s.fake);
    let h = spawn(resumed_from_the_cache(&s));
    until("the watch after catching up", || {
        s.fake.watch_calls().len() == 2
    })
    .await;
    // `a` is unchanged: by its key; `c` is left out, so the sink deletes it.
    assert_eq!(s.sink.calls(), ["replace [b,d] + unchanged [ns/a] @20"]);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn rule67_a_server_still_at_the_snapshots_version_needs_no_catch_up_watch() {
    let s = Setup::new();
    server(&s, 10, vec![], 0);
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector().resume(Resume::with_objects("10", snapshot())));
    until("the watch", || s.fake.watch_calls().len() == 1).await;
    assert_eq!(s.sink.calls(), ["replace [a,b,c] @10"]);
    assert_eq!(watch_rvs(&s), ["10"]);
    assert_ne!(
        s.fake.watch_calls()[0].timeout,
        CATCH_UP_WATCH_TIMEOUT,
        "a normal watch"
    );
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn rule67_a_compacted_snapshot_version_lists_consistently_at_once_and_compares_with_the_cache()
 {
    let s = Setup::new();
    // `a` unchanged, `b` changed, `c` gone, `d` new.
    server(&s, 20, vec![obj("a", 5), obj("b", 12), obj("d", 15)], 30);
    s.fake.push_watch(Err(status(410, "Expired")));
    let _tx = open_watch(&s.fake);
    let h = spawn(resumed_from_the_cache(&s));
    until("the watch after the list", || {
        s.fake.watch_calls().len() == 2
    })
    .await;
    assert_eq!(s.sink.calls(), ["replace [b,d] + unchanged [ns/a] @30"]);
    let lists = s.fake.list_calls();
    assert_eq!(lists.len(), 2, "the probe, then the list");
    assert_eq!(
        lists[1].resource_version, "",
        "a consistent list: never older than the server was"
    );
    assert_eq!(watch_rvs(&s), ["10", "30"]);
    assert_eq!(s.errors.kinds(), ["api 410"]);
    // No backoff: the list follows the 410 at once.
    assert_eq!(s.fake.list_times()[1], s.errors.times()[0]);
    let c = h.status().counters();
    assert_eq!((c.resumed, c.resume_failures), (0, 1));
    assert_eq!(
        c.lists
            .iter()
            .find(|(r, _)| *r == "expired")
            .map(|(_, n)| *n),
        Some(1)
    );
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn rule67_a_watch_that_ends_short_of_the_servers_version_lists_instead() {
    let s = Setup::new();
    server(&s, 20, vec![obj("a", 5)], 25);
    // A server without a watch cache sends no bookmark: the watch times out short of 20.
    s.fake.push_watch(Ok(watch_of(vec![modified("b", 12)])));
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector().resume(Resume::with_objects("10", snapshot())));
    until("the watch after the list", || {
        s.fake.watch_calls().len() == 2
    })
    .await;
    // The held snapshot is dropped: the list is a first list, as without a snapshot.
    assert_eq!(s.sink.calls(), ["replace [a] @25"]);
    assert_eq!(s.fake.list_calls()[1].resource_version, "");
    assert_eq!(h.status().counters().resume_failures, 1);
    assert!(
        s.errors.kinds()[0].contains("cannot resume from resourceVersion 10"),
        "{:?}",
        s.errors.kinds()
    );
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn rule67_a_snapshot_version_that_is_no_integer_is_not_resumed_from() {
    let s = Setup::new();
    server(&s, 20, vec![obj("a", 5)], 25);
    let _tx = open_watch(&s.fake);
    let h = spawn(
        s.reflector()
            .resume(Resume::with_objects("abc", snapshot())),
    );
    until("the watch after the list", || {
        s.fake.watch_calls().len() == 1
    })
    .await;
    assert_eq!(s.sink.calls(), ["replace [a] @25"]);
    assert_eq!(watch_rvs(&s), ["25"]);
    drop(h);
}

/// The cache holds the snapshot: the list after a failed resume reaches the sink whole,
/// never in parts (a sink that queues a first list's parts as they come would not
/// reconcile it with the cache), for a paged list and a streaming one.
#[tokio::test(start_paused = true)]
async fn rule67_the_list_after_a_failed_resume_from_the_cache_comes_whole() {
    let s = Setup::new();
    s.fake.on_list(|o| {
        Ok(match (o.limit, o.continue_token.as_deref()) {
            (Some(1), _) => ListPage::new(vec![], "20"),
            (_, None) => ListPage::new(vec![obj("a", 5)], "30").with_continue("t"),
            (_, Some(_)) => ListPage::new(vec![obj("d", 15)], "30"),
        })
    });
    s.fake.push_watch(Err(status(410, "Expired")));
    let _tx = open_watch(&s.fake);
    let h = spawn(resumed_from_the_cache(&s));
    until("the watch after the list", || {
        s.fake.watch_calls().len() == 2
    })
    .await;
    assert_eq!(s.sink.calls(), ["replace [d] + unchanged [ns/a] @30"]);
    drop(h);

    let s = Setup::new();
    s.fake.serve_watch_list(true);
    server(&s, 20, vec![], 0);
    s.fake.push_watch(Err(status(410, "Expired")));
    let mut stream: Vec<_> = (0..2 * STREAMED_PART as u32)
        .map(|i| added(&format!("n{i}"), 30 + i))
        .collect();
    stream.push(added("a", 5));
    stream.push(Ok(WatchEvent::Bookmark(Bookmark::new("300", true))));
    s.fake.push_watch(Ok(watch_of(stream)));
    let _tx = open_watch(&s.fake);
    let h = spawn(resumed_from_the_cache(&s));
    until("the watch after the streaming list", || {
        s.fake.watch_calls().len() == 3
    })
    .await;
    assert_eq!(s.sink.calls(), ["replace 200 items @300"]);
    assert_eq!(
        s.fake.watch_calls()[1].resource_version,
        "",
        "a consistent streaming list"
    );
    let listed = s.sink.listed.lock().unwrap();
    assert!(matches!(listed.last(), Some(Listed::Unchanged(u)) if u.key().as_str() == "ns/a"));
    drop(listed);
    drop(h);
}

/// The snapshot loads while the reflector catches up; one that fails to load lists instead.
#[tokio::test(start_paused = true)]
async fn rule67_the_snapshot_loads_while_catching_up_and_one_that_fails_lists_instead() {
    let s = Setup::new();
    server(&s, 20, vec![], 0);
    s.fake.push_watch(Ok(watch_of(vec![bookmark(20)])));
    let _tx = open_watch(&s.fake);
    let (loaded_tx, loaded_rx) = tokio::sync::oneshot::channel::<Vec<Arc<Obj>>>();
    let resume = Resume::loading("10", async move { Ok(loaded_rx.await?) });
    let h = spawn(s.reflector().resume(resume));
    until("the catch-up watch", || !s.fake.watch_calls().is_empty()).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(s.sink.calls().is_empty(), "waits for the snapshot");
    loaded_tx.send(snapshot()).unwrap();
    until("the hand-off", || !s.sink.calls().is_empty()).await;
    assert_eq!(s.sink.calls(), ["replace [a,b,c] @20"]);
    drop(h);

    let s = Setup::new();
    server(&s, 20, vec![obj("a", 5)], 25);
    s.fake.push_watch(Ok(watch_of(vec![bookmark(20)])));
    let _tx = open_watch(&s.fake);
    let resume = Resume::loading("10", async { Err("the file is corrupt".into()) });
    let h = spawn(s.reflector().resume(resume));
    until("the list", || !s.sink.calls().is_empty()).await;
    assert_eq!(s.sink.calls(), ["replace [a] @25"]);
    assert_eq!(h.status().counters().resume_failures, 1);
    drop(h);
}

/// A server that cannot be reached when the reflector starts costs a backoff, not the
/// snapshot: the next round resumes again.
#[tokio::test(start_paused = true)]
async fn rule67_an_unreachable_server_at_start_keeps_the_resume_for_the_next_round() {
    let s = Setup::new();
    let probes = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&probes);
    s.fake.on_list(move |o| {
        assert_eq!(o.limit, Some(1), "nothing but probes: no list");
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(Error::unreachable("connection refused"));
        }
        Ok(ListPage::new(vec![], "20"))
    });
    s.fake
        .push_watch(Ok(watch_of(vec![modified("b", 12), bookmark(20)])));
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector().resume(Resume::with_objects("10", snapshot())));
    until("the watch after catching up", || {
        s.fake.watch_calls().len() == 2
    })
    .await;
    assert_eq!(probes.load(Ordering::SeqCst), 2);
    assert_eq!(s.sink.calls(), ["replace [a,b,c] @20"]);
    assert_eq!(s.errors.kinds(), ["unreachable"]);
    let c = h.status().counters();
    assert_eq!((c.resumed, c.resume_failures), (1, 0));
    drop(h);
}
