//! The FIFO's lock is not held while an item is processed, and the decisions that read
//! the store (replace, resync, delete) stay right while an item is in flight.

use kinformer_core::ListPart;
use std::collections::BTreeMap;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use crate::common::*;
use kinformer_core::{KnownObjects, Sink};
use kinformer_deltafifo::{DeltaFifo, Error, FifoQueue, InOrderFifo};

/// Runs `f` on a thread and fails (instead of hanging) if it does not finish in time.
fn within_5s(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("deadlock: the FIFO's lock was held while processing")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the checked code panicked"),
    }
}

#[test]
fn processing_runs_without_the_fifo_lock() {
    within_5s(|| {
        let f = DeltaFifo::new(None);
        f.add(obj("a", 1)).unwrap();
        f.pop_with(|_, _| {
            // Both would deadlock if the pop held the lock.
            f.add(obj("b", 1)).unwrap();
            assert_eq!(f.len(), 1);
        })
        .unwrap();
        let f = InOrderFifo::new(None);
        f.add(obj("a", 1)).unwrap();
        f.pop_with(|_, _| {
            f.replace(ListPart::whole(vec![obj("b", 1)], "2")).unwrap();
            assert_eq!(f.len(), 1);
        })
        .unwrap();
    });
}

fn store_view(store: &Arc<Store>) -> Arc<dyn KnownObjects<Obj>> {
    Arc::clone(store) as Arc<dyn KnownObjects<Obj>>
}

#[test]
fn a_relist_during_processing_tombstones_the_key_in_flight() {
    // Popped, not yet stored: the store does not list it, yet it will hold it.
    let store = Arc::new(Store::default());
    let fifos: [Box<dyn FifoQueue<Obj>>; 2] = [
        Box::new(DeltaFifo::new(Some(store_view(&store)))),
        Box::new(InOrderFifo::new(Some(store_view(&store)))),
    ];
    for f in fifos {
        f.add(obj("a", 1)).unwrap();
        let popped = f.pop().unwrap();
        f.replace(ListPart::whole(vec![], "2")).unwrap(); // the watch was down while "a" was deleted
        store.apply(popped.item());
        drop(popped);
        let tomb = f.try_pop().unwrap().expect("a tombstone");
        assert_eq!(show_item(tomb.item()), s(&["Deleted ~a=1"]));
        store.apply(tomb.item());
        drop(tomb);
        assert_eq!(store.snapshot(), BTreeMap::new(), "no stale object left");
    }
}

#[test]
fn a_delete_during_processing_is_kept_unless_the_key_is_being_deleted() {
    let store = Arc::new(Store::default());
    let f = DeltaFifo::new(Some(store_view(&store)));
    f.add(obj("a", 1)).unwrap();
    let popped = f.pop().unwrap();
    f.delete(obj("a", 1)).unwrap(); // neither queued nor stored yet: still news
    store.apply(popped.item());
    drop(popped);
    assert_eq!(drain_delta(&f), [s(&["Deleted a=1"])]);

    store.0.lock().unwrap().insert("b".into(), obj("b", 1));
    f.delete(obj("b", 1)).unwrap();
    let popped = f.pop().unwrap(); // deleting "b": the store still holds it meanwhile
    f.delete(obj("b", 1)).unwrap(); // already being delivered: dropped
    store.apply(popped.item());
    drop(popped);
    assert!(f.is_empty());
}

#[test]
fn a_resync_during_processing_syncs_the_object_being_applied() {
    // The store still holds a=1 while a=2 is applied; a Sync of a=1 would roll it back.
    let store = Arc::new(Store::default());
    let fifos: [Box<dyn FifoQueue<Obj>>; 2] = [
        Box::new(DeltaFifo::new(Some(store_view(&store)))),
        Box::new(InOrderFifo::new(Some(store_view(&store)))),
    ];
    for f in fifos {
        store.0.lock().unwrap().insert("a".into(), obj("a", 1));
        f.update(obj("a", 2)).unwrap();
        let popped = f.pop().unwrap();
        f.resync().unwrap();
        store.apply(popped.item());
        drop(popped);
        let sync = f.try_pop().unwrap().expect("a sync");
        assert_eq!(show_item(sync.item()), s(&["Sync a=2"]));
        store.apply(sync.item());
        drop(sync);
        assert_eq!(store.snapshot(), BTreeMap::from([("a".to_string(), 2)]));
        store.0.lock().unwrap().clear();
    }
}

#[test]
fn a_key_popped_twice_stays_in_flight_until_both_are_done() {
    let store = Arc::new(Store::default());
    let f = InOrderFifo::builder()
        .batch_size(1)
        .known_objects(store_view(&store))
        .build()
        .unwrap();
    f.add(obj("a", 1)).unwrap();
    f.update(obj("a", 2)).unwrap();
    let first = f.pop().unwrap();
    let second = f.pop().unwrap();
    drop(first);
    f.replace(ListPart::whole(vec![], "3")).unwrap(); // "a" is still in flight: a=2 will be stored
    store.apply(second.item());
    drop(second);
    assert_eq!(flat_drain(&f), s(&["Deleted ~a=2"]));
}

fn flat_drain(f: &InOrderFifo<Obj>) -> Vec<String> {
    drain_in_order(f).into_iter().flatten().collect()
}

/// A tiny xorshift generator, so the stress test needs no dependency and replays by seed.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One reflector thread writes random operations while one informer thread pops and
/// applies them to the store the FIFO reads; at the end the store equals the model.
fn stress(make: impl Fn(Arc<dyn KnownObjects<Obj>>) -> Arc<dyn FifoQueue<Obj>>, seed: u64) {
    let store = Arc::new(Store::default());
    let fifo = make(store_view(&store));
    let consumer = {
        let (fifo, store) = (Arc::clone(&fifo), Arc::clone(&store));
        thread::spawn(move || {
            let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
            loop {
                match fifo.pop() {
                    Ok(p) => {
                        // Widen the window in which the item is popped but not applied.
                        match rng.below(4) {
                            0 => thread::sleep(Duration::from_micros(20)),
                            1 => thread::yield_now(),
                            _ => {}
                        }
                        store.apply(p.item());
                    }
                    Err(Error::Closed) => return,
                    Err(e) => panic!("{e}"),
                }
            }
        })
    };
    let mut rng = Rng(seed);
    const KEYS: u64 = 24;
    let mut model: BTreeMap<String, u32> = BTreeMap::new();
    let sink: &dyn Sink<Obj> = &*fifo;
    for v in 0..8_000u32 {
        let key = format!("k{}", rng.below(KEYS));
        match rng.below(100) {
            0..=39 => {
                sink.add(obj(&key, v)).unwrap();
                model.insert(key, v);
            }
            40..=69 => {
                sink.update(obj(&key, v)).unwrap();
                model.insert(key, v);
            }
            70..=89 => {
                sink.delete(obj(&key, v)).unwrap();
                model.remove(&key);
            }
            90..=95 => {
                let list: Vec<_> = (0..KEYS)
                    .filter(|_| rng.below(2) == 0)
                    .map(|i| (format!("k{i}"), v))
                    .collect();
                sink.replace(ListPart::whole(
                    list.iter().map(|(k, v)| obj(k, *v)).collect(),
                    v.to_string(),
                ))
                .unwrap();
                model = list.into_iter().collect();
            }
            _ => sink.resync().unwrap(),
        }
        if rng.below(3) == 0 {
            // Let the informer catch up, so that the next write likely meets a key in
            // flight rather than one still queued.
            while !fifo.is_empty() {
                thread::yield_now();
            }
        }
    }
    fifo.close();
    consumer.join().unwrap();
    assert_eq!(store.snapshot(), model, "seed {seed}");
}

/// Seeds to run: 4, or `STRESS_SEEDS` (a longer hunt: `STRESS_SEEDS=500 cargo test --release`).
fn seeds() -> std::ops::RangeInclusive<u64> {
    let n = std::env::var("STRESS_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    1..=n
}

#[test]
fn concurrent_reflector_and_informer_converge_on_the_delta_fifo() {
    for seed in seeds() {
        stress(|k| Arc::new(DeltaFifo::new(Some(k))), seed);
    }
}

#[test]
fn concurrent_reflector_and_informer_converge_on_the_in_order_fifo() {
    for seed in seeds() {
        stress(|k| Arc::new(InOrderFifo::new(Some(k))), seed);
        stress(|_| Arc::new(InOrderFifo::atomic()), seed);
    }
}
