//! The models (see the crate docs).

use std::sync::Arc;

use kinformer_workqueue::{Queue, WorkQueue};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

fn model(body: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(5);
    }
    builder.check(body);
}

/// Two workers, two items, one re-added while held: never two holders of an item, every
/// item added before the shutdown is handed out, and the drain returns.
#[test]
fn two_workers_never_share_an_item_and_drain_terminates() {
    model(|| {
        let queue = WorkQueue::new();
        let holders = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let handled = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        queue.add(0usize);
        queue.add(1usize);
        let workers: Vec<_> = (0..2)
            .map(|worker| {
                let (queue, holders, handled) = (queue.clone(), holders.clone(), handled.clone());
                thread::spawn(move || {
                    let mut readded = false;
                    while let Some(item) = queue.get() {
                        assert_eq!(
                            holders[item].fetch_add(1, Ordering::SeqCst),
                            0,
                            "two holders of item {item}"
                        );
                        if worker == 0 && !readded {
                            readded = true;
                            queue.add(item); // dirty while held
                        }
                        holders[item].fetch_sub(1, Ordering::SeqCst);
                        handled[item].fetch_add(1, Ordering::SeqCst);
                        queue.done(&item);
                    }
                })
            })
            .collect();
        queue.shut_down_with_drain();
        for worker in workers {
            worker.join().unwrap();
        }
        for item in 0..2 {
            assert!(
                handled[item].load(Ordering::SeqCst) >= 1,
                "item {item} was lost"
            );
        }
        assert_eq!(queue.len(), 0);
    });
}

/// An add racing a blocked get is never lost: the getter wakes and takes it.
#[test]
fn add_wakes_a_blocked_getter() {
    model(|| {
        let queue = WorkQueue::new();
        let getter = {
            let queue = queue.clone();
            thread::spawn(move || queue.get())
        };
        queue.add(7u8);
        assert_eq!(getter.join().unwrap(), Some(7));
    });
}

/// A drain waiting on a held item is released by a concurrent `shut_down` or by `done`. (A
/// `shut_down` that lands before the drain starts does not stop it from waiting, as in
/// client-go: loom found that interleaving, hence the `done` before the join.)
#[test]
fn shut_down_or_done_releases_a_draining_thread() {
    model(|| {
        let queue = WorkQueue::new();
        queue.add(1u8);
        let held = queue.get().unwrap();
        let drainer = {
            let queue = queue.clone();
            thread::spawn(move || queue.shut_down_with_drain())
        };
        let stopper = {
            let queue = queue.clone();
            thread::spawn(move || queue.shut_down())
        };
        stopper.join().unwrap();
        queue.done(&held);
        drainer.join().unwrap();
        assert_eq!(queue.get(), None);
    });
}

/// Two getters, one item, then shutdown: exactly one gets the item, the other sees the end.
#[test]
fn one_item_goes_to_exactly_one_of_two_getters() {
    model(|| {
        let queue = WorkQueue::new();
        let getters: Vec<_> = (0..2)
            .map(|_| {
                let queue = queue.clone();
                thread::spawn(move || {
                    let item = queue.get();
                    if let Some(item) = item {
                        queue.done(&item);
                    }
                    item
                })
            })
            .collect();
        queue.add(3u8);
        queue.shut_down();
        let results: Vec<_> = getters.into_iter().map(|g| g.join().unwrap()).collect();
        let got: Vec<_> = results.iter().flatten().collect();
        // The add may land after the shutdown in no interleaving (same thread, in order).
        assert_eq!(got, [&3], "results: {results:?}");
    });
}
