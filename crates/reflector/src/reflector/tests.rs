//! The reflector's state machine on the in-memory fake, one test per behaviour of rules
//! 21–26 (ARCHITECTURE.md), on Tokio's paused clock: backoffs and resyncs are checked on
//! virtual timestamps, never by sleeping.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kinformer_core::{
    Error as SinkError, KnownObjects, ListPart, Listed, MetaObject, ObjectKey, Sink,
};
use tokio::time::Instant;

use crate::fake::{FakeListerWatcher, WatchSender, watch_channel, watch_of};
use crate::{
    ApiStatus, Backoff, Bookmark, Error, ListPage, Reflector, ReflectorHandle, STREAMED_PART,
    WatchEvent,
};

#[derive(Clone, Debug, PartialEq)]
struct Obj {
    name: String,
    rv: String,
}

impl MetaObject for Obj {
    fn object_name(&self) -> Option<&str> {
        (!self.name.is_empty()).then_some(self.name.as_str())
    }
    fn object_namespace(&self) -> Option<&str> {
        Some("ns")
    }
    fn object_resource_version(&self) -> Option<&str> {
        Some(&self.rv)
    }
}

fn obj(name: &str, rv: u32) -> Obj {
    Obj {
        name: name.into(),
        rv: rv.to_string(),
    }
}

fn objs(prefix: &str, n: usize) -> Vec<Obj> {
    (0..n).map(|i| obj(&format!("{prefix}{i}"), 1)).collect()
}

fn added(name: &str, rv: u32) -> Result<WatchEvent<Obj>, Error> {
    Ok(WatchEvent::Added(obj(name, rv)))
}

fn bookmark(rv: u32) -> Result<WatchEvent<Obj>, Error> {
    Ok(WatchEvent::Bookmark(Bookmark::new(rv.to_string(), false)))
}

fn status(code: u16, reason: &str) -> Error {
    Error::Api(ApiStatus::new(code, reason, "from the test"))
}

/// A sink that records every call as a line of text.
#[derive(Default)]
struct Rec {
    calls: Mutex<Vec<String>>,
    /// The objects of the last `replace` that ended a list, and all its items.
    replaced: Mutex<Vec<Arc<Obj>>>,
    listed: Mutex<Vec<Listed<Obj>>>,
    /// Parts of a list were handed on and it has not ended.
    open: AtomicBool,
    refuse: Mutex<Option<String>>,
    closed: AtomicBool,
    resyncs: Mutex<Vec<Instant>>,
}

impl Rec {
    fn push(&self, s: String) -> Result<(), SinkError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(SinkError::Closed);
        }
        self.calls.lock().unwrap().push(s);
        Ok(())
    }
    fn check(&self, o: &Obj) -> Result<(), SinkError> {
        if self.refuse.lock().unwrap().as_deref() == Some(o.name.as_str()) {
            return Err(SinkError::MissingName);
        }
        Ok(())
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
    fn has(&self, call: &str) -> bool {
        self.calls().iter().any(|c| c == call)
    }
}

impl Sink<Obj> for Rec {
    fn add(&self, o: Arc<Obj>) -> Result<(), SinkError> {
        self.check(&o)?;
        self.push(format!("add {}@{}", o.name, o.rv))
    }
    fn update(&self, o: Arc<Obj>) -> Result<(), SinkError> {
        self.push(format!("update {}@{}", o.name, o.rv))
    }
    fn delete(&self, o: Arc<Obj>) -> Result<(), SinkError> {
        self.push(format!("delete {}@{}", o.name, o.rv))
    }
    /// Records a list as a sink taking it in parts would see it: `begin` and `part N
    /// items` for the parts before its end, then `replace [...] @rv` for the end (a list
    /// that comes whole: only that), with the keys of unchanged objects apart.
    fn replace(&self, part: ListPart<Obj>) -> Result<(), SinkError> {
        // A list begun again while parts of one were handed on shows as a `begin` too.
        let was_open = self.open.swap(part.end.is_none(), Ordering::SeqCst);
        if part.starts && (part.end.is_none() || was_open) {
            self.push("begin".into())?;
        }
        let Some(rv) = part.end else {
            return self.push(format!("part {} items", part.items.len()));
        };
        self.listed.lock().unwrap().clone_from(&part.items);
        let (list, unchanged) = Listed::split(part.items);
        self.replaced.lock().unwrap().clone_from(&list);
        let names: Vec<_> = list.iter().map(|o| o.name.as_str()).collect();
        let keys: Vec<_> = unchanged.iter().map(ObjectKey::as_str).collect();
        if names.len() > 10 {
            self.push(format!("replace {} items @{rv}", names.len()))
        } else if keys.is_empty() {
            self.push(format!("replace [{}] @{rv}", names.join(",")))
        } else {
            self.push(format!(
                "replace [{}] + unchanged [{}] @{rv}",
                names.join(","),
                keys.join(",")
            ))
        }
    }
    fn resync(&self) -> Result<(), SinkError> {
        self.resyncs.lock().unwrap().push(Instant::now());
        self.push("resync".into())
    }
    fn bookmark(&self, rv: &str) -> Result<(), SinkError> {
        self.push(format!("bookmark {rv}"))
    }
}

/// What the error handler saw: when, and a short description of the error.
#[derive(Clone, Default)]
struct Errors(Arc<Mutex<Vec<(Instant, String)>>>);

impl Errors {
    fn handler(&self) -> impl Fn(&Error) + Send + Sync + 'static {
        let me = self.clone();
        move |e: &Error| {
            let what = match e {
                Error::Api(s) => format!("api {}", s.code),
                Error::Unreachable { .. } => "unreachable".into(),
                Error::Decode { .. } => "decode".into(),
                Error::UnexpectedKind { .. } => "unexpected kind".into(),
                Error::InvalidObject(_) => "invalid object".into(),
                Error::VeryShortWatch => "very short watch".into(),
                Error::Sink(SinkError::Closed) => "sink closed".into(),
                Error::Sink(_) => "sink".into(),
                other => kinformer_core::ErrorChain(other).to_string(),
            };
            me.0.lock().unwrap().push((Instant::now(), what));
        }
    }
    fn kinds(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, k)| k.clone())
            .collect()
    }
    fn times(&self) -> Vec<Instant> {
        self.0.lock().unwrap().iter().map(|(t, _)| *t).collect()
    }
}

struct Setup {
    fake: FakeListerWatcher<Obj>,
    sink: Arc<Rec>,
    errors: Errors,
}

impl Setup {
    fn new() -> Self {
        Self {
            fake: FakeListerWatcher::new(),
            sink: Arc::new(Rec::default()),
            errors: Errors::default(),
        }
    }

    fn reflector(&self) -> Reflector<Obj, FakeListerWatcher<Obj>, Arc<Rec>> {
        Reflector::new(self.fake.clone(), Arc::clone(&self.sink))
            .name("test")
            .on_watch_error(self.errors.handler())
    }
}

/// Waits (on the paused clock) until `f` holds; fails after an hour of virtual time.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(3600),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn secs_between(times: &[Instant]) -> Vec<f64> {
    times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect()
}

/// Asserts each gap lies in `[base * 2^i, 2 * base * 2^i)` plus a little slack: the
/// jittered, doubling backoff.
/// Each gap is the doubling backoff from `base`, capped at `cap`, jittered by up to itself.
fn assert_backoff(gaps: &[f64], base: f64, cap: f64) {
    for (i, g) in gaps.iter().enumerate() {
        let lo = (base * 2f64.powi(i as i32)).min(cap);
        assert!(
            *g >= lo && *g < 2.0 * lo + 0.05,
            "gap {i} = {g} s, want [{lo}, {}) (all: {gaps:?})",
            2.0 * lo
        );
    }
}

/// Queues a watch that stays open and returns its sender.
fn open_watch(fake: &FakeListerWatcher<Obj>) -> WatchSender<Obj> {
    let (tx, rx) = watch_channel();
    fake.push_watch(Ok(rx));
    tx
}

fn spawn(r: Reflector<Obj, FakeListerWatcher<Obj>, Arc<Rec>>) -> ReflectorHandle {
    r.spawn().unwrap()
}

// ---------------------------------------------------------------- rule 21

#[tokio::test(start_paused = true)]
async fn first_list_is_at_rv_0_in_pages_of_500_with_continue_tokens_then_watches_from_its_rv() {
    let s = Setup::new();
    s.fake.on_list(|o| {
        Ok(match o.continue_token.as_deref() {
            None => ListPage::new(objs("a", 500), "100").with_continue("c1"),
            Some("c1") => ListPage::new(objs("b", 500), "999").with_continue("c2"),
            Some(_) => ListPage::new(objs("c", 200), "999"),
        })
    });
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;

    let lists = s.fake.list_calls();
    let got: Vec<_> = lists
        .iter()
        .map(|o| {
            (
                o.resource_version.as_str(),
                o.limit,
                o.continue_token.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("0", Some(500), None),
            // The RV is cleared on continue pages: the server refuses both at once.
            ("", Some(500), Some("c1")),
            ("", Some(500), Some("c2")),
        ]
    );
    // Each page as it comes, the list's end at the first page's RV.
    assert_eq!(
        s.sink.calls(),
        [
            "begin",
            "part 500 items",
            "part 500 items",
            "replace 200 items @100"
        ]
    );
    let w = &s.fake.watch_calls()[0];
    assert_eq!(w.resource_version, "100");
    assert!(w.allow_bookmarks && !w.send_initial_events);
    assert!(
        w.timeout >= Duration::from_secs(300) && w.timeout <= Duration::from_secs(600),
        "{:?}",
        w.timeout
    );
    assert_eq!(h.status().last_sync_resource_version(), "100");
    assert!(h.status().has_synced());
    assert_eq!(h.status().syncs(), 1);
}

/// Rule 52: the sink gets every page but the last as soon as it is decoded, and the last
/// page ends the list.
#[tokio::test(start_paused = true)]
async fn rule52_a_paged_list_reaches_the_sink_page_by_page() {
    let s = Setup::new();
    s.fake.on_list(|o| {
        Ok(match o.continue_token.as_deref() {
            None => ListPage::new(objs("a", 500), "100").with_continue("c1"),
            Some("c1") => ListPage::new(objs("b", 500), "999").with_continue("c2"),
            Some(_) => ListPage::new(objs("c", 200), "999"),
        })
    });
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    assert_eq!(
        s.sink.calls(),
        [
            "begin",
            "part 500 items",
            "part 500 items",
            "replace 200 items @100"
        ]
    );
    assert_eq!(s.fake.watch_calls()[0].resource_version, "100");
    assert!(h.status().has_synced());
}

/// Rule 52: the full list after an expired continue token starts the list over, so a sink
/// that had parts takes it whole.
#[tokio::test(start_paused = true)]
async fn rule52_an_expired_continue_token_starts_a_list_in_parts_over() {
    let s = Setup::new();
    s.fake
        .on_list(|o| match (o.continue_token.as_deref(), o.limit) {
            (None, Some(500)) => Ok(ListPage::new(objs("a", 2), "10").with_continue("c1")),
            (Some("c1"), _) => Err(status(410, "Expired")),
            (None, None) => Ok(ListPage::new(objs("full", 3), "12")),
            other => panic!("unexpected list {other:?}"),
        });
    let _tx = open_watch(&s.fake);
    let _h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;
    assert_eq!(
        s.sink.calls(),
        [
            "begin",
            "part 2 items",
            "begin",
            "replace [full0,full1,full2] @12"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_expired_continue_token_falls_back_to_one_full_list_at_the_same_rv() {
    let s = Setup::new();
    s.fake
        .on_list(|o| match (o.continue_token.as_deref(), o.limit) {
            (None, Some(500)) => Ok(ListPage::new(objs("a", 2), "10").with_continue("c1")),
            (Some("c1"), _) => Err(status(410, "Expired")),
            (None, None) => Ok(ListPage::new(objs("full", 3), "12")),
            other => panic!("unexpected list {other:?}"),
        });
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the watch", || !s.fake.watch_calls().is_empty()).await;

    let got: Vec<_> = s
        .fake
        .list_calls()
        .iter()
        .map(|o| {
            (
                o.resource_version.clone(),
                o.limit,
                o.continue_token.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("0".into(), Some(500), None),
            (String::new(), Some(500), Some("c1".into())),
            ("0".into(), None, None),
        ]
    );
    // The full list starts the list over: the sink drops the first page.
    assert_eq!(
        s.sink.calls(),
        [
            "begin",
            "part 2 items",
            "begin",
            "replace [full0,full1,full2] @12"
        ]
    );
    assert_eq!(s.fake.watch_calls()[0].resource_version, "12");
    // The fallback is the pager's business: no error for the handler.
    assert!(s.errors.kinds().is_empty());
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_relist_at_a_known_rv_is_unpaged_unless_the_first_list_came_back_paged() {
    for paged in [false, true] {
        let s = Setup::new();
        let calls = AtomicUsize::new(0);
        s.fake.on_list(move |o| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            Ok(match (n, paged) {
                (0, true) => ListPage::new(objs("a", 1), "10").with_continue("c"),
                (0, false) => ListPage::new(objs("a", 1), "10"),
                _ if o.continue_token.is_some() => ListPage::new(Vec::new(), "10"),
                _ => ListPage::new(objs("a", 1), "20"),
            })
        });
        // The first watch fails with 410: a relist at the last RV follows.
        s.fake.push_watch(Ok(watch_of(vec![
            added("b", 11),
            Err(status(410, "Expired")),
        ])));
        let _tx = open_watch(&s.fake);
        let h = spawn(s.reflector());
        until("the second watch", || s.fake.watch_calls().len() == 2).await;

        let relist = s
            .fake
            .list_calls()
            .into_iter()
            .rfind(|o| o.continue_token.is_none())
            .unwrap();
        // A watch 410 relists at the last RV seen (not ""): "not older than" is safe.
        assert_eq!(relist.resource_version, "11", "paged={paged}");
        let want = if paged { Some(500) } else { None };
        assert_eq!(relist.limit, want, "paged={paged}");
        assert_eq!(h.status().syncs(), 2);
        assert_eq!(s.errors.kinds(), ["api 410"]);
    }
}

#[tokio::test(start_paused = true)]
async fn page_size_zero_lists_unpaged_and_a_custom_size_is_used_as_is() {
    for (size, want) in [(0, None), (50, Some(50))] {
        let s = Setup::new();
        let _tx = open_watch(&s.fake);
        let h = spawn(s.reflector().page_size(size));
        until("the watch", || !s.fake.watch_calls().is_empty()).await;
        assert_eq!(s.fake.list_calls()[0].limit, want);
        drop(h);
    }
}

#[tokio::test(start_paused = true)]
async fn watch_timeouts_are_random_between_5_and_10_minutes() {
    let s = Setup::new();
    let n = AtomicUsize::new(0);
    // Each watch sends one bookmark and closes: the reflector re-watches at once.
    s.fake.on_watch(move |_| {
        if n.fetch_add(1, Ordering::SeqCst) < 30 {
            Ok(watch_of(vec![bookmark(5)]))
        } else {
            Ok(Box::pin(futures::stream::pending()))
        }
    });
    let h = spawn(s.reflector());
    until("31 watches", || s.fake.watch_calls().len() > 30).await;
    let timeouts: Vec<_> = s.fake.watch_calls().iter().map(|w| w.timeout).collect();
    assert!(
        timeouts
            .iter()
            .all(|t| *t >= Duration::from_secs(300) && *t <= Duration::from_secs(600)),
        "{timeouts:?}"
    );
    assert!(timeouts.iter().any(|t| *t != timeouts[0]), "not randomized");
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_watch_the_server_never_ends_is_ended_after_its_timeout() {
    let s = Setup::new();
    let _tx1 = open_watch(&s.fake);
    let _tx2 = open_watch(&s.fake);
    let h = spawn(s.reflector());
    until("the first watch", || s.fake.watch_calls().len() == 1).await;
    let timeout = s.fake.watch_calls()[0].timeout;
    until("the second watch", || s.fake.watch_calls().len() == 2).await;
    let t = s.fake.watch_times();
    let open = t[1] - t[0];
    assert!(
        open >= timeout && open <= timeout + Duration::from_secs(31),
        "{open:?}"
    );
    assert_eq!(s.fake.list_calls().len(), 1, "no relist");
    drop(h);
}

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
            ("error", 0)
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

// ---------------------------------------------------------------- rule 26

#[tokio::test(start_paused = true)]
async fn resync_runs_on_its_period_while_watching_and_asks_should_resync() {
    let s = Setup::new();
    let _tx = open_watch(&s.fake);
    let allow = Arc::new(AtomicBool::new(true));
    let a = Arc::clone(&allow);
    let h = spawn(
        s.reflector()
            .resync_period(Duration::from_secs(30))
            .should_resync(move || a.load(Ordering::SeqCst)),
    );
    until("three resyncs", || {
        s.sink.resyncs.lock().unwrap().len() == 3
    })
    .await;
    let watch_start = s.fake.watch_times()[0];
    let at: Vec<f64> = s
        .sink
        .resyncs
        .lock()
        .unwrap()
        .iter()
        .map(|t| (*t - watch_start).as_secs_f64())
        .collect();
    assert_eq!(at, [30.0, 60.0, 90.0]);

    allow.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(100)).await;
    assert_eq!(
        s.sink.resyncs.lock().unwrap().len(),
        3,
        "should_resync said no"
    );
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn resync_keeps_its_period_through_watch_restarts_and_backoffs() {
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new(Vec::new(), "10")));
    // Watches that fail to start for a long while: the resync timer still runs.
    for _ in 0..5 {
        s.fake.push_watch(Err(status(429, "TooManyRequests")));
    }
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector().resync_period(Duration::from_secs(5)));
    until("the watch", || s.fake.watch_calls().len() == 6).await;
    assert!(!s.sink.resyncs.lock().unwrap().is_empty());
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn no_resync_without_a_period() {
    let s = Setup::new();
    let _tx = open_watch(&s.fake);
    let h = spawn(s.reflector().resync_period(Duration::ZERO));
    tokio::time::sleep(Duration::from_secs(250)).await;
    assert!(s.sink.resyncs.lock().unwrap().is_empty());
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn a_failed_resync_goes_to_the_handler_and_relists() {
    struct FailingResync(Rec);
    impl Sink<Obj> for FailingResync {
        fn add(&self, o: Arc<Obj>) -> Result<(), SinkError> {
            self.0.add(o)
        }
        fn update(&self, o: Arc<Obj>) -> Result<(), SinkError> {
            self.0.update(o)
        }
        fn delete(&self, o: Arc<Obj>) -> Result<(), SinkError> {
            self.0.delete(o)
        }
        fn replace(&self, part: ListPart<Obj>) -> Result<(), SinkError> {
            self.0.replace(part)
        }
        fn resync(&self) -> Result<(), SinkError> {
            Err(SinkError::Other("resync failed".into()))
        }
        fn bookmark(&self, rv: &str) -> Result<(), SinkError> {
            self.0.bookmark(rv)
        }
    }
    let fake = FakeListerWatcher::<Obj>::new();
    let errors = Errors::default();
    let _tx = open_watch(&fake);
    let h = Reflector::new(fake.clone(), FailingResync(Rec::default()))
        .resync_period(Duration::from_secs(10))
        .on_watch_error(errors.handler())
        .spawn()
        .unwrap();
    until("the relist", || fake.list_calls().len() == 2).await;
    assert_eq!(errors.kinds()[0], "sink");
    drop(h);
}

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

// ---------------------------------------------------------------- undecodable objects

/// What the consumer has cached, as the reflector's known-objects view sees it.
#[derive(Default)]
struct Cached(Mutex<Vec<Obj>>);

impl Cached {
    fn with(objs: Vec<Obj>) -> Arc<Self> {
        Arc::new(Self(Mutex::new(objs)))
    }
}

impl KnownObjects<Obj> for Cached {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|o| ObjectKey::new(Some("ns"), &o.name).unwrap())
            .collect()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Obj>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .find(|o| format!("ns/{}", o.name) == key)
            .cloned()
            .map(Arc::new)
    }

    fn get_shared(&self, key: &str) -> Option<Arc<Obj>> {
        self.get_by_key(key)
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

/// A cache that hands out the allocations it holds, as the thread-safe store does.
struct Held(Vec<Arc<Obj>>);

impl KnownObjects<Obj> for Held {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0
            .iter()
            .map(|o| ObjectKey::new(Some("ns"), &o.name).unwrap())
            .collect()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Obj>> {
        self.0
            .iter()
            .find(|o| format!("ns/{}", o.name) == key)
            .cloned()
    }

    fn get_shared(&self, key: &str) -> Option<Arc<Obj>> {
        self.get_by_key(key)
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

/// A cache that keeps objects encoded, as the compact store does: every read is a new
/// copy, and it cannot hand out what it holds without making one.
struct Encoded(Held);

impl KnownObjects<Obj> for Encoded {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0.list_keys()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Obj>> {
        self.0.get_by_key(key).map(|o| Arc::new((*o).clone()))
    }
    fn get_shared(&self, _: &str) -> Option<Arc<Obj>> {
        None
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        self.0.contains_version(key, resource_version)
    }
}

/// Rule 53: a relist compares every listed object with the cache, once, and hands on
/// those at the cached version as keys with the cache (the decoded copy dropped), in both
/// list modes, over a cache that shares what it holds (then the sink that needs the
/// object gets the cached `Arc`) and one that keeps objects encoded.
#[tokio::test(start_paused = true)]
async fn rule53_a_relist_hands_on_unchanged_objects_as_keys_with_the_cache() {
    for (watch_list, encoded) in [(false, false), (true, false), (false, true), (true, true)] {
        let s = Setup::new();
        let held = vec![Arc::new(obj("a", 3)), Arc::new(obj("b", 3))];
        let tx = open_watch(&s.fake);
        if watch_list {
            s.fake.serve_watch_list(true);
        } else {
            // a unchanged, b changed, c new.
            s.fake
                .on_list(|_| Ok(ListPage::new([obj("a", 3), obj("b", 7), obj("c", 8)], "10")));
        }
        let cache: Arc<dyn KnownObjects<Obj>> = if encoded {
            Arc::new(Encoded(Held(held.clone())))
        } else {
            Arc::new(Held(held.clone()))
        };
        let h = spawn(s.reflector().watch_list(watch_list).known_objects(cache));
        if watch_list {
            until("the streaming watch", || !s.fake.watch_calls().is_empty()).await;
            for ev in [added("a", 3), added("b", 7), added("c", 8)] {
                tx.send(ev);
            }
            tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("10", true))));
        }
        until("the replace", || !s.sink.calls().is_empty()).await;
        let case = format!("watch list: {watch_list}, encoded: {encoded}");
        assert_eq!(
            s.sink.calls(),
            ["replace [b,c] + unchanged [ns/a] @10"],
            "{case}"
        );
        let listed = s.sink.listed.lock().unwrap().clone();
        let a = listed
            .into_iter()
            .find(|l| matches!(l, Listed::Unchanged(_)))
            .and_then(Listed::into_object)
            .expect("a, read from the cache");
        assert_eq!(a.rv, "3", "{case}");
        assert_eq!(Arc::ptr_eq(&a, &held[0]), !encoded, "{case}");
        drop(h);
    }
}

fn undecodable(name: &str) -> crate::Undecodable {
    crate::Undecodable::new(ObjectKey::new(Some("ns"), name).unwrap(), "invalid type")
}

#[tokio::test(start_paused = true)]
async fn an_undecodable_list_item_is_reported_and_kept_at_its_cached_version() {
    for known in [true, false] {
        let s = Setup::new();
        s.fake
            .on_list(|_| Ok(ListPage::new([obj("a", 5)], "10").with_undecodable(undecodable("b"))));
        let _tx = open_watch(&s.fake);
        let mut r = s.reflector().watch_list(false);
        if known {
            r = r.known_objects(Cached::with(vec![obj("b", 3)]));
        }
        let h = spawn(r);
        until("the replace", || !s.sink.calls().is_empty()).await;
        let want = if known {
            "replace [a,b] @10"
        } else {
            "replace [a] @10"
        };
        assert_eq!(s.sink.calls(), [want], "known view: {known}");
        assert_eq!(
            s.errors.kinds(),
            ["cannot decode object ns/b: invalid type"]
        );
        assert_eq!(h.status().counters().undecodable, 1);
        // Reported, not relisted: the watch goes on.
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(s.fake.list_calls().len(), 1);
        drop(h);
    }
}

#[tokio::test(start_paused = true)]
async fn an_undecodable_watch_event_is_skipped_and_its_deletion_deletes_the_cached_version() {
    let s = Setup::new();
    s.fake.on_list(|_| Ok(ListPage::new([obj("b", 3)], "10")));
    let tx = open_watch(&s.fake);
    let h = spawn(
        s.reflector()
            .watch_list(false)
            .known_objects(Cached::with(vec![obj("b", 3)])),
    );
    until("the list", || !s.sink.calls().is_empty()).await;
    tx.send(Err(Error::Undecodable {
        object: undecodable("b"),
        deleted: false,
    }));
    tx.send(added("c", 12));
    tx.send(Err(Error::Undecodable {
        object: undecodable("b"),
        deleted: true,
    }));
    until("the delete", || s.sink.calls().len() == 3).await;
    assert_eq!(
        s.sink.calls(),
        [
            "replace [] + unchanged [ns/b] @10",
            "add c@12",
            "delete b@3"
        ],
        "the modification is skipped, the deletion deletes the cached version"
    );
    assert_eq!(s.fake.list_calls().len(), 1, "no relist");
    assert_eq!(s.fake.watch_calls().len(), 1, "the same watch");
    assert_eq!(h.status().counters().undecodable, 2);
    drop(h);
}

#[tokio::test(start_paused = true)]
async fn an_undecodable_object_of_a_streaming_list_is_kept_at_its_cached_version() {
    let s = Setup::new();
    let tx = open_watch(&s.fake);
    s.fake.serve_watch_list(true);
    let h = spawn(
        s.reflector()
            .known_objects(Cached::with(vec![obj("b", 3), obj("c", 3)])),
    );
    until("the streaming watch", || !s.fake.watch_calls().is_empty()).await;
    tx.send(added("a", 5));
    for (name, deleted) in [("b", false), ("c", false), ("c", true)] {
        tx.send(Err(Error::Undecodable {
            object: undecodable(name),
            deleted,
        }));
    }
    tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("8", true))));
    until("the replace", || !s.sink.calls().is_empty()).await;
    // b kept at its cached version; c deleted during the list, so left out.
    assert_eq!(s.sink.calls(), ["replace [a,b] @8"]);
    assert_eq!(h.status().counters().undecodable, 3);
    drop(h);
}
