//! The three event handlers: a recorder, one that panics on every 7th event, one that
//! sleeps 50 ms per event. Each gets its own listener (buffer and thread) from the
//! informer, so the last two must not delay the first.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer::compact_store::Cached;
use kinformer::core::{DeletedObject, MetaObject};
use kinformer::informer::ResourceEventHandler;
use serde_json::json;

use crate::output::{Out, unix_nanos};

/// The panicking handler panics on every `PANIC_EVERY`-th event.
const PANIC_EVERY: u64 = 7;
/// The slow handler's time per event.
const SLOW: Duration = Duration::from_millis(50);

/// How many events each handler got, and how many panics were thrown.
#[derive(Default)]
pub(crate) struct Counts {
    recorded: AtomicU64,
    panicky: AtomicU64,
    slow: AtomicU64,
    panics: AtomicU64,
}

impl Counts {
    pub(crate) fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }
    pub(crate) fn panicky(&self) -> u64 {
        self.panicky.load(Ordering::Relaxed)
    }
    pub(crate) fn slow(&self) -> u64 {
        self.slow.load(Ordering::Relaxed)
    }
    pub(crate) fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }
}

/// Hands every notification to the writer thread as an `event` line.
pub(crate) struct Recorder {
    out: Out,
    counts: Arc<Counts>,
}

impl Recorder {
    pub(crate) fn new(out: Out, counts: Arc<Counts>) -> Self {
        Self { out, counts }
    }

    fn record(&self, op: &str, name: &str, pod: &Cached<Pod>, tombstone: bool) {
        // The time first: what the driver measures is when the handler was called.
        let now = unix_nanos();
        self.out.send(json!({
            "type": "event",
            "op": op,
            "name": name,
            "rv": pod.object_resource_version().unwrap_or_default(),
            "tombstone": tombstone,
            "unix_ns": now,
        }));
        self.counts.recorded.fetch_add(1, Ordering::Relaxed);
    }
}

fn name(pod: &Cached<Pod>) -> &str {
    pod.object_name().unwrap_or_default()
}

impl ResourceEventHandler<Cached<Pod>> for Recorder {
    fn on_add(&self, obj: &Arc<Cached<Pod>>, _is_in_initial_list: bool) {
        self.record("add", name(obj), obj, false);
    }

    fn on_update(&self, _old: &Arc<Cached<Pod>>, new: &Arc<Cached<Pod>>) {
        self.record("update", name(new), new, false);
    }

    fn on_delete(&self, obj: &DeletedObject<Cached<Pod>>) {
        match obj.tombstone() {
            // The key is what a tombstone is sure of; its object may be stale.
            Some(t) => self.record("delete", t.key.name(), &t.obj, true),
            None => self.record("delete", name(obj.object()), obj.object(), false),
        }
    }
}

/// The payload of the panicking handler's panics, so the panic hook can keep them quiet.
struct DeliberatePanic;

/// Keeps the panicking handler's panics off stderr (a few per second would bury
/// everything else there); any other panic is reported as usual.
pub(crate) fn quiet_deliberate_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.payload().is::<DeliberatePanic>() {
            default(info);
        }
    }));
}

/// Runs the same work for every notification, whatever its kind.
pub(crate) struct EveryEvent<F>(F);

impl<F: Fn(), T> ResourceEventHandler<T> for EveryEvent<F> {
    fn on_add(&self, _obj: &Arc<T>, _is_in_initial_list: bool) {
        (self.0)();
    }

    fn on_update(&self, _old: &Arc<T>, _new: &Arc<T>) {
        (self.0)();
    }

    fn on_delete(&self, _obj: &DeletedObject<T>) {
        (self.0)();
    }
}

/// Panics on every 7th event it gets; the informer must catch it and go on.
pub(crate) fn panicky(counts: Arc<Counts>) -> EveryEvent<impl Fn()> {
    EveryEvent(move || {
        let n = counts.panicky.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_multiple_of(PANIC_EVERY) {
            counts.panics.fetch_add(1, Ordering::Relaxed);
            std::panic::panic_any(DeliberatePanic);
        }
    })
}

/// Sleeps 50 ms per event: a handler doing slow work on its listener's thread.
pub(crate) fn slow(counts: Arc<Counts>) -> EveryEvent<impl Fn()> {
    EveryEvent(move || {
        std::thread::sleep(SLOW);
        counts.slow.fetch_add(1, Ordering::Relaxed);
    })
}
