//! Memory under a stuck handler at high churn, unbounded buffer against coalescing buffer,
//! through the real informer: 1,000 objects of about 1 KiB each, then 100 updates of each
//! (100,000 events) while the handler is stuck on its first notification. The heap is
//! measured exactly, by a counting allocator, as the bytes still allocated once the informer
//! has applied every event (the cache itself is the same in both modes).
//!
//! `cargo test -p kinformer-informer-factory --test stuck_handler -- --nocapture` prints the
//! figures.

mod common;

use std::alloc::System;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use cap::Cap;
use common::*;
use kinformer_core::DeletedObject;
use kinformer_informer_factory::{HandlerOptions, ResourceEventHandler, SharedIndexInformer};
use kinformer_reflector::WatchEvent;
use kinformer_testenv::eventually;

/// The system allocator, counting the bytes currently allocated.
#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// Bytes allocated now.
fn live() -> isize {
    isize::try_from(ALLOCATOR.allocated()).unwrap_or(isize::MAX)
}

const OBJECTS: usize = 1_000;
const UPDATES_PER_OBJECT: usize = 100;

/// A gate a listener thread waits at until the test opens it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

/// A handler stuck on its first notification until the gate opens.
struct Stuck(Arc<Gate>);

impl ResourceEventHandler<Obj> for Stuck {
    fn on_add(&self, _: &Arc<Obj>, _: bool) {
        self.0.wait();
    }
    fn on_update(&self, _: &Arc<Obj>, _: &Arc<Obj>) {
        self.0.wait();
    }
    fn on_delete(&self, _: &DeletedObject<Obj>) {
        self.0.wait();
    }
}

fn payload(name: &str, rv: usize) -> Obj {
    let mut labels = BTreeMap::new();
    labels.insert("payload".to_owned(), "x".repeat(1024));
    Obj {
        name: name.to_owned(),
        rv: rv.to_string(),
        labels,
    }
}

/// Bytes held beyond the cache, and notifications pending, once every event is applied
/// while the handler is stuck.
async fn stuck_run(options: HandlerOptions) -> (isize, usize) {
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("o{i}")).collect();
    let initial: Vec<Obj> = names.iter().map(|n| payload(n, 1)).collect();
    let (fake, tx) = fake_with(initial, "1");
    let informer = SharedIndexInformer::builder(fake).build();
    let gate = Arc::new(Gate::default());
    let registration = informer
        .add_event_handler_with_options(Stuck(Arc::clone(&gate)), options)
        .unwrap();
    let handle = informer.start().unwrap();
    eventually("the initial list in the cache", SECS5, || {
        informer.indexer().len() == OBJECTS
    })
    .await;
    let before = live();
    let mut rv = 1;
    for _ in 0..UPDATES_PER_OBJECT {
        for name in &names {
            rv += 1;
            tx.send(Ok(WatchEvent::Modified(payload(name, rv))));
        }
    }
    // The FIFO is in order: once the last event is in the cache, every event has been
    // applied and handed to the listener.
    let last = rv.to_string();
    let last_key = format!("ns/{}", names[OBJECTS - 1]);
    eventually("every event applied", Duration::from_secs(120), || {
        informer
            .indexer()
            .get_by_key(&last_key)
            .is_some_and(|o| o.rv == last)
    })
    .await;
    // Let the pop loop settle its last batch.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let held_bytes = live() - before;
    let pending = registration.pending();
    gate.open();
    eventually("the handler to catch up", Duration::from_secs(120), || {
        registration.pending() == 0
    })
    .await;
    handle.stop().await.unwrap();
    (held_bytes, pending)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coalescing_buffer_holds_one_notification_per_object_under_a_stuck_handler() {
    let (coalesced_bytes, coalesced_pending) =
        stuck_run(HandlerOptions::new().coalesce_by_key()).await;
    let (unbounded_bytes, unbounded_pending) = stuck_run(HandlerOptions::new()).await;
    let mib = |b: isize| b as f64 / (1024.0 * 1024.0);
    println!(
        "stuck handler, {OBJECTS} objects of ~1 KiB, {} updates: unbounded buffer {:.1} MiB held, {unbounded_pending} pending; coalescing buffer {:.1} MiB held, {coalesced_pending} pending",
        OBJECTS * UPDATES_PER_OBJECT,
        mib(unbounded_bytes),
        mib(coalesced_bytes),
    );
    // Unbounded: every event waits, each holding its object version.
    assert!(
        unbounded_pending >= OBJECTS * UPDATES_PER_OBJECT,
        "{unbounded_pending}"
    );
    assert!(
        mib(unbounded_bytes) > 80.0,
        "{:.1} MiB",
        mib(unbounded_bytes)
    );
    // Coalescing: at most one per object (and the one in the handler).
    assert!(coalesced_pending <= OBJECTS + 1, "{coalesced_pending}");
    assert!(
        mib(coalesced_bytes) < 8.0,
        "{:.1} MiB held with a coalescing buffer",
        mib(coalesced_bytes)
    );
}
