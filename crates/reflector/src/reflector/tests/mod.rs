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
    /// The name: what a shard selector by uid hashes.
    fn object_uid(&self) -> Option<&str> {
        self.object_name()
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

mod bad_input;
mod list;
mod narrow;
mod resume;
mod resync;
mod stream_list;
mod transform;
mod undecodable;
mod watch;
mod widen;
