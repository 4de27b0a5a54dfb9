//! Rules 11-16 (ARCHITECTURE.md) on the DeltaFIFO, with the edge cases client-go's
//! delta_fifo_test.go pins down (named after them where they mirror one).

use kinformer_core::ListPart;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use crate::common::*;
use kinformer_core::{KnownObjects, MetaObject, ObjectKey, Sink};
use kinformer_deltafifo::{DeltaFifo, Error, FifoQueue, Item};

// ---- Rule 11: deltas gather per key; a key keeps its place; pop returns oldest first ----

#[test]
fn deltas_gather_per_key_and_pop_oldest_first() {
    // TestDeltaFIFO_addUpdate
    let f = delta_fifo(None, true);
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("foo", 12)).unwrap();
    f.delete(obj("foo", 15)).unwrap();
    assert_eq!(f.queued_keys(), [ObjectKey::parse("foo").unwrap()]);
    assert_eq!(
        drain_delta(&f),
        [s(&["Added foo=10", "Updated foo=12", "Deleted foo=15"])]
    );
    assert!(f.deltas_of("foo").is_none(), "popped key is gone");
}

#[test]
fn a_key_keeps_its_place_in_line() {
    // TestDeltaFIFO_detectLineJumpers
    let f = delta_fifo(None, true);
    f.add(obj("foo", 10)).unwrap();
    f.add(obj("bar", 1)).unwrap();
    f.add(obj("foo", 11)).unwrap();
    f.add(obj("foo", 13)).unwrap();
    f.add(obj("zab", 30)).unwrap();
    assert_eq!(
        pop_delta(&f).0,
        s(&["Added foo=10", "Added foo=11", "Added foo=13"])
    );
    f.add(obj("foo", 14)).unwrap(); // popped: goes to the back, not back in front
    assert_eq!(pop_delta(&f).0, s(&["Added bar=1"]));
    assert_eq!(pop_delta(&f).0, s(&["Added zab=30"]));
    assert_eq!(pop_delta(&f).0, s(&["Added foo=14"]));
    assert!(f.is_empty());
}

#[test]
fn concurrent_producers_each_keep_their_order() {
    // TestDeltaFIFO_basic: two producers of distinct keys; each one's values come out in order.
    let f = Arc::new(delta_fifo(None, true));
    const N: u32 = 500;
    let producers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|p| {
            let f = Arc::clone(&f);
            thread::spawn(move || {
                for i in 0..N {
                    f.add(obj(&format!("{p}{i}"), i + 1)).unwrap();
                }
            })
        })
        .collect();
    let mut last = [0u32; 2];
    for _ in 0..2 * N {
        let popped = f.pop().unwrap();
        let Item::Deltas { key, deltas } = popped.item() else {
            panic!("not deltas")
        };
        let producer = usize::from(key.as_str().starts_with('b'));
        let val = deltas[0].object.object().val;
        assert!(
            val > last[producer],
            "{key}: {val} after {}",
            last[producer]
        );
        last[producer] = val;
    }
    for p in producers {
        p.join().unwrap();
    }
    assert_eq!(last, [N, N]);
}

#[test]
fn pop_with_hands_one_keys_deltas_to_the_closure() {
    let f = delta_fifo(None, true);
    f.add(obj("a", 1)).unwrap();
    f.add(obj("b", 1)).unwrap();
    f.update(obj("a", 2)).unwrap();
    let got = f
        .pop_with(|item, in_initial| (show_item(item), in_initial))
        .unwrap();
    assert_eq!(got, (s(&["Added a=1", "Updated a=2"]), false));
    assert_eq!(f.len(), 1);
}

// ---- Rule 12: a delete for a key neither queued nor known is dropped ----

#[test]
fn delete_of_a_key_neither_queued_nor_known_is_dropped() {
    // TestDeltaFIFO_enqueueingNoLister, with no view and with an empty one.
    for known_view in [None, Some(known(&[]))] {
        let f = delta_fifo(known_view, true);
        f.add(obj("foo", 10)).unwrap();
        f.update(obj("bar", 15)).unwrap();
        f.add(obj("qux", 17)).unwrap();
        f.delete(obj("qux", 18)).unwrap();
        f.delete(obj("baz", 20)).unwrap(); // never seen: dropped
        assert_eq!(
            drain_delta(&f),
            [
                s(&["Added foo=10"]),
                s(&["Updated bar=15"]),
                s(&["Added qux=17", "Deleted qux=18"]),
            ]
        );
    }
}

#[test]
fn delete_of_a_known_key_is_queued() {
    // TestDeltaFIFO_enqueueingWithLister
    let f = delta_fifo(Some(known(&[("foo", 5), ("bar", 6), ("baz", 7)])), true);
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("bar", 15)).unwrap();
    f.delete(obj("baz", 20)).unwrap();
    assert_eq!(
        drain_delta(&f),
        [
            s(&["Added foo=10"]),
            s(&["Updated bar=15"]),
            s(&["Deleted baz=20"])
        ]
    );
}

#[test]
fn delete_of_a_queued_key_is_queued_even_if_unknown() {
    // TestDeltaFIFO_DeleteExistingNonPropagated
    let f = delta_fifo(Some(known(&[])), true);
    f.add(obj("foo", 5)).unwrap();
    f.delete(obj("foo", 6)).unwrap();
    assert_eq!(
        f.deltas_of("foo")
            .unwrap()
            .iter()
            .map(show)
            .collect::<Vec<_>>(),
        ["Added foo=5", "Deleted foo=6"]
    );
}

// ---- Rule 13: only two consecutive deletes collapse; a tombstone loses to a real delete ----

#[test]
fn two_consecutive_real_deletes_keep_the_first() {
    let f = delta_fifo(Some(known(&[("foo", 1)])), true);
    f.delete(obj("foo", 2)).unwrap();
    f.delete(obj("foo", 3)).unwrap();
    assert_eq!(drain_delta(&f), [s(&["Deleted foo=2"])]);
}

#[test]
fn deletes_separated_by_another_delta_do_not_collapse() {
    let f = delta_fifo(Some(known(&[("foo", 1)])), true);
    f.delete(obj("foo", 2)).unwrap();
    f.add(obj("foo", 3)).unwrap();
    f.delete(obj("foo", 4)).unwrap();
    assert_eq!(
        drain_delta(&f),
        [s(&["Deleted foo=2", "Added foo=3", "Deleted foo=4"])]
    );
}

#[test]
fn a_tombstone_loses_to_a_real_delete_in_either_order() {
    // Real delete then a relist's tombstone: the real delete stays
    // ("Deleted object should have only a single Delete").
    let f = delta_fifo(None, true);
    f.add(obj("foo", 2)).unwrap();
    f.delete(obj("foo", 2)).unwrap();
    f.replace(ListPart::whole(vec![], "0")).unwrap();
    assert_eq!(drain_delta(&f), [s(&["Added foo=2", "Deleted foo=2"])]);

    // Tombstone then a real delete: the real delete replaces it.
    let f = delta_fifo(None, true);
    f.add(obj("foo", 1)).unwrap();
    f.replace(ListPart::whole(vec![], "0")).unwrap();
    assert_eq!(
        f.deltas_of("foo")
            .unwrap()
            .iter()
            .map(show)
            .collect::<Vec<_>>(),
        ["Added foo=1", "Deleted ~foo=1"]
    );
    f.delete(obj("foo", 3)).unwrap();
    assert_eq!(drain_delta(&f), [s(&["Added foo=1", "Deleted foo=3"])]);
}

#[test]
fn two_tombstones_collapse_into_one() {
    // "Added objects should have a single delete on multiple Replaces"
    let f = delta_fifo(None, true);
    f.add(obj("foo", 2)).unwrap();
    f.replace(ListPart::whole(vec![], "0")).unwrap();
    f.replace(ListPart::whole(vec![], "1")).unwrap();
    assert_eq!(drain_delta(&f), [s(&["Added foo=2", "Deleted ~foo=2"])]);
}

// ---- Rule 14: replace queues Replaced/Sync; tombstones for keys queued or known but absent ----

#[test]
fn replace_queues_replaced_for_every_listed_object() {
    // TestDeltaFIFO_ReplaceDeltaType
    let f = delta_fifo(Some(known(&[("foo", 5)])), true);
    f.replace(ListPart::whole(vec![obj("foo", 5), obj("bar", 1)], "0"))
        .unwrap();
    assert_eq!(
        drain_delta(&f),
        [s(&["Replaced foo=5"]), s(&["Replaced bar=1"])]
    );
}

#[test]
fn replace_queues_sync_when_replaced_is_off() {
    let f = delta_fifo(Some(known(&[("foo", 5)])), false);
    f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
        .unwrap();
    assert_eq!(drain_delta(&f), [s(&["Sync foo=5"])]);
}

#[test]
fn replace_tombstones_keys_only_in_the_queue() {
    // TestDeltaFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue, with an empty view and none.
    type Ops = fn(&DeltaFifo<Obj>);
    let cases: [(&str, Ops, &[&str]); 6] = [
        (
            "added object deleted on replace",
            |f| {
                f.add(obj("foo", 2)).unwrap();
                f.replace(ListPart::whole(vec![], "0")).unwrap();
            },
            &["Added foo=2", "Deleted ~foo=2"],
        ),
        (
            "replaced object gets a single delete",
            |f| {
                f.add(obj("foo", 2)).unwrap();
                f.replace(ListPart::whole(vec![obj("foo", 2)], "0"))
                    .unwrap();
                f.replace(ListPart::whole(vec![], "0")).unwrap();
            },
            &["Added foo=2", "Replaced foo=2", "Deleted ~foo=2"],
        ),
        (
            "deleted object gets a single delete",
            |f| {
                f.add(obj("foo", 2)).unwrap();
                f.delete(obj("foo", 2)).unwrap();
                f.replace(ListPart::whole(vec![], "0")).unwrap();
            },
            &["Added foo=2", "Deleted foo=2"],
        ),
        (
            "replaced twice then deleted",
            |f| {
                f.add(obj("foo", 2)).unwrap();
                f.replace(ListPart::whole(vec![obj("foo", 2)], "0"))
                    .unwrap();
                f.replace(ListPart::whole(vec![obj("foo", 2)], "0"))
                    .unwrap();
                f.replace(ListPart::whole(vec![], "0")).unwrap();
            },
            &[
                "Added foo=2",
                "Replaced foo=2",
                "Replaced foo=2",
                "Deleted ~foo=2",
            ],
        ),
        (
            "single delete on multiple replaces",
            |f| {
                f.add(obj("foo", 2)).unwrap();
                f.replace(ListPart::whole(vec![], "0")).unwrap();
                f.replace(ListPart::whole(vec![], "1")).unwrap();
            },
            &["Added foo=2", "Deleted ~foo=2"],
        ),
        (
            "added, deleted, added again: the tombstone carries the newest",
            |f| {
                f.add(obj("foo", 2)).unwrap();
                f.delete(obj("foo", 2)).unwrap();
                f.add(obj("foo", 3)).unwrap();
                f.replace(ListPart::whole(vec![], "0")).unwrap();
            },
            &[
                "Added foo=2",
                "Deleted foo=2",
                "Added foo=3",
                "Deleted ~foo=3",
            ],
        ),
    ];
    for (name, ops, want) in cases {
        for view in [Some(known(&[])), None] {
            let f = delta_fifo(view, true);
            ops(&f);
            assert_eq!(drain_delta(&f), [s(want)], "{name}");
        }
    }
}

#[test]
fn replace_tombstones_known_keys_absent_from_the_list() {
    // TestDeltaFIFO_ReplaceMakesDeletions, first two scenarios.
    let view = || known(&[("foo", 5), ("bar", 6), ("baz", 7)]);

    let f = delta_fifo(Some(view()), false);
    f.delete(obj("baz", 10)).unwrap();
    f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
        .unwrap();
    assert_eq!(
        drain_delta(&f),
        [
            s(&["Deleted baz=10"]),
            s(&["Sync foo=5"]),
            s(&["Deleted ~bar=6"])
        ]
    );

    let f = delta_fifo(Some(view()), false);
    f.add(obj("baz", 10)).unwrap();
    f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
        .unwrap();
    assert_eq!(
        drain_delta(&f),
        [
            s(&["Added baz=10", "Deleted ~baz=10"]),
            s(&["Sync foo=5"]),
            s(&["Deleted ~bar=6"]),
        ]
    );

    // Without a view only queued keys get tombstones.
    let f = delta_fifo(None, false);
    f.add(obj("baz", 10)).unwrap();
    f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
        .unwrap();
    assert_eq!(
        drain_delta(&f),
        [s(&["Added baz=10", "Deleted ~baz=10"]), s(&["Sync foo=5"])]
    );
}

#[test]
fn tombstone_carries_the_newest_queued_object_else_the_known_one() {
    // TestDeltaFIFO_ReplaceMakesDeletions, last two scenarios.
    let view = || known(&[("foo", 5), ("bar", 6), ("baz", 7)]);

    let f = delta_fifo(Some(view()), false);
    f.delete(obj("bar", 6)).unwrap();
    f.add(obj("bar", 100)).unwrap();
    f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
        .unwrap();
    assert_eq!(
        drain_delta(&f),
        [
            s(&["Deleted bar=6", "Added bar=100", "Deleted ~bar=100"]),
            s(&["Sync foo=5"]),
            s(&["Deleted ~baz=7"]),
        ]
    );

    let f = delta_fifo(Some(view()), false);
    f.replace(ListPart::whole(vec![obj("bar", 100), obj("foo", 5)], "0"))
        .unwrap();
    f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
        .unwrap();
    assert_eq!(
        drain_delta(&f),
        [
            s(&["Sync bar=100", "Deleted ~bar=100"]),
            s(&["Sync foo=5", "Sync foo=5"]),
            s(&["Deleted ~baz=7"]),
        ]
    );
}

#[test]
fn replace_after_a_queued_delete_still_queues_the_listed_object() {
    // TestDeltaFIFO_replaceWithDeleteDeltaIn (kubernetes#83810)
    let f = delta_fifo(Some(known(&[("foo", 1)])), false);
    f.delete(obj("foo", 1)).unwrap();
    f.replace(ListPart::whole(vec![obj("foo", 2)], "")).unwrap();
    assert_eq!(drain_delta(&f), [s(&["Deleted foo=1", "Sync foo=2"])]);
}

#[test]
fn add_then_replace_pops_both_under_one_key() {
    // TestDeltaFIFO_addReplace
    let f = delta_fifo(None, true);
    f.add(obj("foo", 10)).unwrap();
    f.replace(ListPart::whole(vec![obj("foo", 15)], "0"))
        .unwrap();
    assert_eq!(drain_delta(&f), [s(&["Added foo=10", "Replaced foo=15"])]);
}

/// Lists a key its `get_by_key` no longer finds: the informer deleted it in between.
struct Vanishing;
impl KnownObjects<Obj> for Vanishing {
    fn list_keys(&self) -> Vec<ObjectKey> {
        vec![
            ObjectKey::parse("gone").unwrap(),
            ObjectKey::parse("kept").unwrap(),
        ]
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Obj>> {
        (key == "kept").then(|| obj("kept", 1))
    }
    fn get_shared(&self, key: &str) -> Option<Arc<Obj>> {
        self.get_by_key(key)
    }
    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

#[test]
fn replace_skips_a_known_key_the_store_no_longer_holds() {
    let f = delta_fifo(Some(Arc::new(Vanishing)), true);
    f.replace(ListPart::whole(vec![], "0")).unwrap();
    assert_eq!(drain_delta(&f), [s(&["Deleted ~kept=1"])]);
    assert!(
        f.has_synced(),
        "the initial count was the one tombstone queued"
    );
}

// ---- Rule 15: has_synced, and is_in_initial_list on pop ----

#[test]
fn has_synced_follows_client_gos_cases() {
    // TestDeltaFIFO_HasSynced
    type Ops = fn(&DeltaFifo<Obj>);
    let cases: [(Ops, bool); 7] = [
        (|_| {}, false),
        (|f| f.add(obj("a", 1)).unwrap(), true),
        (|f| f.replace(ListPart::whole(vec![], "0")).unwrap(), true),
        (
            |f| {
                f.replace(ListPart::whole(vec![obj("a", 1), obj("b", 2)], "0"))
                    .unwrap()
            },
            false,
        ),
        (
            |f| {
                f.replace(ListPart::whole(vec![obj("a", 1), obj("b", 2)], "0"))
                    .unwrap();
                drop(f.try_pop().unwrap());
            },
            false,
        ),
        (
            |f| {
                f.replace(ListPart::whole(vec![obj("a", 1), obj("b", 2)], "0"))
                    .unwrap();
                drop(f.try_pop().unwrap());
                drop(f.try_pop().unwrap());
            },
            true,
        ),
        (
            // A list with one key twice is one entry (an API server never sends it).
            |f| {
                f.replace(ListPart::whole(vec![obj("a", 1), obj("a", 2)], "0"))
                    .unwrap();
                drop(f.try_pop().unwrap());
            },
            true,
        ),
    ];
    for (i, (ops, want)) in cases.into_iter().enumerate() {
        let f = delta_fifo(None, true);
        ops(&f);
        assert_eq!(f.has_synced(), want, "case {i}");
    }
}

#[test]
fn has_synced_counts_tombstones_and_every_initial_pop_is_in_the_initial_list() {
    // TestDeltaFIFO_HasSyncedCorrectOnDeletion
    let f = delta_fifo(Some(known(&[("foo", 5), ("bar", 6), ("baz", 7)])), false);
    f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
        .unwrap();
    for want in [
        s(&["Sync foo=5"]),
        s(&["Deleted ~bar=6"]),
        s(&["Deleted ~baz=7"]),
    ] {
        assert!(!f.has_synced());
        assert_eq!(pop_delta(&f), (want, true));
    }
    assert!(f.has_synced());
    f.add(obj("new", 1)).unwrap();
    assert_eq!(pop_delta(&f), (s(&["Added new=1"]), false));
}

#[test]
fn has_synced_waits_until_the_last_initial_item_is_processed() {
    let f = delta_fifo(None, true);
    f.replace(ListPart::whole(vec![obj("a", 1)], "0")).unwrap();
    let popped = f.pop().unwrap();
    assert!(popped.is_in_initial_list());
    assert!(!f.has_synced(), "popped but not processed");
    drop(popped);
    assert!(f.has_synced());
}

#[test]
fn a_write_before_the_first_list_means_no_initial_list() {
    let f = delta_fifo(None, true);
    f.update(obj("a", 1)).unwrap();
    assert!(f.has_synced());
    f.replace(ListPart::whole(vec![obj("b", 1)], "0")).unwrap();
    assert!(!pop_delta(&f).1);
}

// ---- Rule 16: resync, transform, close ----

#[test]
fn resync_queues_sync_for_known_keys() {
    // TestDeltaFIFO_Resync
    let f = delta_fifo(Some(known(&[("foo", 5), ("bar", 6)])), true);
    f.resync().unwrap();
    assert_eq!(drain_delta(&f), [s(&["Sync foo=5"]), s(&["Sync bar=6"])]);
}

#[test]
fn resync_skips_keys_with_pending_deltas() {
    // TestDeltaFIFO_UpdateResyncRace: a Sync of the stored foo=5 would roll back foo=6.
    let f = delta_fifo(Some(known(&[("foo", 5)])), true);
    f.update(obj("foo", 6)).unwrap();
    f.resync().unwrap();
    assert_eq!(drain_delta(&f), [s(&["Updated foo=6"])]);

    // TestDeltaFIFO_ResyncNonExisting
    let f = delta_fifo(Some(known(&[("foo", 5)])), true);
    f.delete(obj("foo", 10)).unwrap();
    f.resync().unwrap();
    assert_eq!(drain_delta(&f), [s(&["Deleted foo=10"])]);
}

#[test]
fn resync_without_known_objects_does_nothing() {
    let f = delta_fifo(None, true);
    f.resync().unwrap();
    assert!(f.is_empty());
    assert!(!f.has_synced(), "resync does not populate");
}

/// An object that counts how often the transform saw it.
struct Counted {
    name: &'static str,
    rv: u32,
    transformed: AtomicU32,
}
impl MetaObject for Counted {
    fn object_name(&self) -> Option<&str> {
        Some(self.name)
    }
    fn object_namespace(&self) -> Option<&str> {
        None
    }
    fn object_resource_version(&self) -> Option<&str> {
        None
    }
}
fn counted(name: &'static str, rv: u32) -> Arc<Counted> {
    Arc::new(Counted {
        name,
        rv,
        transformed: AtomicU32::new(0),
    })
}

struct CountedStore(Vec<Arc<Counted>>);
impl KnownObjects<Counted> for CountedStore {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0
            .iter()
            .map(|o| ObjectKey::parse(o.name).unwrap())
            .collect()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Counted>> {
        self.0.iter().find(|o| o.name == key).cloned()
    }
    fn get_shared(&self, key: &str) -> Option<Arc<Counted>> {
        self.get_by_key(key)
    }
    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

#[test]
fn transform_runs_once_per_incoming_object_never_on_sync_or_tombstones() {
    // TestDeltaFIFO_transformer, plus a resync and a known-key tombstone.
    let calls = Arc::new(AtomicU32::new(0));
    let stored = counted("stored", 1);
    stored.transformed.store(1, Ordering::SeqCst); // the store holds transformed objects
    let c = Arc::clone(&calls);
    let f = DeltaFifo::builder()
        .known_objects(Arc::new(CountedStore(vec![Arc::clone(&stored)])))
        .transform(move |o: Arc<Counted>| {
            c.fetch_add(1, Ordering::SeqCst);
            o.transformed.fetch_add(1, Ordering::SeqCst);
            Ok(o)
        })
        .build();
    f.add(counted("foo", 10)).unwrap();
    f.add(counted("bar", 11)).unwrap();
    f.update(counted("foo", 12)).unwrap();
    f.delete(counted("foo", 15)).unwrap();
    f.delete(counted("never", 1)).unwrap(); // dropped: not transformed
    f.replace(ListPart::whole(vec![], "")).unwrap(); // tombstones for foo, bar and stored
    f.add(counted("bar", 16)).unwrap();
    f.replace(ListPart::whole(vec![], "")).unwrap();
    f.resync().unwrap(); // nothing without pending deltas: all keys are queued
    assert_eq!(
        calls.load(Ordering::SeqCst),
        5,
        "foo10 bar11 foo12 foo15 bar16"
    );
    let mut seen = Vec::new();
    while let Some(p) = f.try_pop().unwrap() {
        let Item::Deltas { deltas, .. } = p.item() else {
            panic!()
        };
        for d in deltas {
            let o = d.object.object();
            assert_eq!(
                o.transformed.load(Ordering::SeqCst),
                1,
                "{} rv {}",
                o.name,
                o.rv
            );
            seen.push(format!(
                "{}{}{}",
                d.kind,
                if d.object.tombstone().is_some() {
                    "~"
                } else {
                    " "
                },
                o.rv
            ));
        }
    }
    assert_eq!(
        seen,
        [
            "Added 10",
            "Updated 12",
            "Deleted 15", // foo: the tombstone lost to the delete
            "Added 11",
            "Deleted~11",
            "Added 16",
            "Deleted~16", // bar
            "Deleted~1",  // stored
        ]
    );
    // A resync now re-delivers the stored object untransformed.
    f.resync().unwrap();
    let p = f.try_pop().unwrap().unwrap();
    let Item::Deltas { deltas, .. } = p.item() else {
        panic!()
    };
    assert!(Arc::ptr_eq(deltas[0].object.object(), &stored));
    assert_eq!(stored.transformed.load(Ordering::SeqCst), 1);
}

#[test]
fn a_failing_transform_is_a_typed_error_and_queues_nothing() {
    let f = DeltaFifo::builder()
        .transform(|o: Arc<Obj>| {
            if o.val == 13 {
                Err("unlucky".into())
            } else {
                Ok(o)
            }
        })
        .build();
    f.add(obj("a", 1)).unwrap();
    let unlucky = |r: Result<(), kinformer_core::Error>| matches!(r, Err(kinformer_core::Error::Other(e)) if e.to_string() == "unlucky");
    assert!(unlucky(f.add(obj("b", 13))));
    assert!(unlucky(
        f.replace(ListPart::whole(vec![obj("c", 1), obj("d", 13)], "1"))
    ));
    assert_eq!(drain_delta(&f), [s(&["Added a=1"])]);
}

#[test]
fn close_wakes_blocked_pops_with_an_error() {
    // TestDeltaFIFO_PopShouldUnblockWhenClosed
    let f = Arc::new(delta_fifo(Some(known(&[("foo", 5)])), true));
    let (tx, rx) = mpsc::channel();
    for _ in 0..10 {
        let (f, tx) = (Arc::clone(&f), tx.clone());
        thread::spawn(move || tx.send(matches!(f.pop(), Err(Error::Closed))).unwrap());
    }
    thread::sleep(Duration::from_millis(20));
    f.close();
    for _ in 0..10 {
        assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap());
    }
    assert!(f.is_closed());
}

#[test]
fn a_closed_fifo_refuses_writes_and_still_hands_out_what_is_queued() {
    let f = delta_fifo(Some(known(&[("k", 1)])), true);
    f.add(obj("a", 1)).unwrap();
    f.close();
    assert!(matches!(
        f.add(obj("b", 1)),
        Err(kinformer_core::Error::Closed)
    ));
    assert!(matches!(
        f.delete(obj("a", 1)),
        Err(kinformer_core::Error::Closed)
    ));
    assert!(matches!(
        f.replace(ListPart::whole(vec![], "1")),
        Err(kinformer_core::Error::Closed)
    ));
    assert!(matches!(f.resync(), Err(kinformer_core::Error::Closed)));
    let sink: &dyn kinformer_core::Sink<Obj> = &f;
    assert!(matches!(
        sink.update(obj("a", 2)),
        Err(kinformer_core::Error::Closed)
    ));
    assert!(matches!(
        sink.bookmark("2"),
        Err(kinformer_core::Error::Closed)
    ));
    assert_eq!(show_item(f.pop().unwrap().item()), s(&["Added a=1"]));
    assert!(matches!(f.pop(), Err(Error::Closed)));
    assert!(matches!(f.try_pop(), Err(Error::Closed)));
}

// ---- Bad input ----

#[test]
fn an_object_without_a_key_is_a_typed_error_and_disturbs_nothing() {
    let f = delta_fifo(Some(known(&[("k", 1)])), true);
    assert!(is_key_error(f.add(nameless())));
    assert!(is_key_error(f.update(nameless())));
    assert!(is_key_error(f.delete(nameless())));
    assert!(
        !f.has_synced(),
        "a rejected write does not count as the first write"
    );
    f.replace(ListPart::whole(vec![obj("a", 1)], "1")).unwrap();
    f.update(obj("a", 2)).unwrap();
    assert!(is_key_error(
        f.replace(ListPart::whole(vec![obj("b", 1), nameless()], "2"))
    ));
    assert!(is_key_error(f.add(nameless())));
    assert_eq!(
        drain_delta(&f),
        [s(&["Replaced a=1", "Updated a=2"]), s(&["Deleted ~k=1"])]
    );
    let sink: &dyn kinformer_core::Sink<Obj> = &f;
    assert!(matches!(
        sink.add(nameless()),
        Err(kinformer_core::Error::MissingName)
    ));
}

#[test]
fn a_custom_key_function_keys_the_queue() {
    let f = kinformer_deltafifo::DeltaFifoBuilder::with_key_fn(|o: &Obj| {
        ObjectKey::new(Some("by-val"), &o.val.to_string())
    })
    .build();
    f.add(obj("x", 7)).unwrap();
    f.add(obj("y", 7)).unwrap();
    assert_eq!(f.queued_keys(), [ObjectKey::parse("by-val/7").unwrap()]);
    assert_eq!(f.deltas_of("by-val/7").unwrap().len(), 2);
}
