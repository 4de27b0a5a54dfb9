//! Rules 11-17 (ARCHITECTURE.md) on the in-order FIFO, with the edge cases client-go's
//! the_real_fifo_test.go pins down (named after them where they mirror one).

use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use crate::common::*;
use kinformer_core::{KnownObjects, ListPart, Listed, ObjectKey, Sink, Unchanged};
use kinformer_deltafifo::{DEFAULT_BATCH_SIZE, Error, FifoQueue, InOrderFifo, Item};

fn flat(items: Vec<Vec<String>>) -> Vec<String> {
    items.into_iter().flatten().collect()
}

// ---- Rule 17: one entry per event, global arrival order, no coalescing ----

#[test]
fn every_event_is_its_own_entry_in_global_arrival_order() {
    // TestRealFIFO_addUpdate and TestRealFIFO_detectLineJumpers
    let f = in_order(Some(known(&[])));
    f.add(obj("foo", 10)).unwrap();
    f.add(obj("bar", 1)).unwrap();
    f.add(obj("foo", 11)).unwrap();
    f.add(obj("foo", 13)).unwrap();
    f.add(obj("zab", 30)).unwrap();
    assert_eq!(f.len(), 5);
    assert_eq!(pop_in_order(&f).0, s(&["Added foo=10"]));
    f.add(obj("foo", 14)).unwrap();
    assert_eq!(
        flat(drain_in_order(&f)),
        s(&[
            "Added bar=1",
            "Added foo=11",
            "Added foo=13",
            "Added zab=30",
            "Added foo=14"
        ])
    );
}

#[test]
fn concurrent_producers_each_keep_their_order() {
    // TestRealFIFO_basic
    let f = Arc::new(in_order(Some(known(&[]))));
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
            panic!("batch of 1")
        };
        let producer = usize::from(key.as_str().starts_with('b'));
        let val = deltas[0].object.object().val;
        assert!(val > last[producer]);
        last[producer] = val;
    }
    producers.into_iter().for_each(|p| p.join().unwrap());
    assert_eq!(last, [N, N]);
}

// ---- Rule 12 does not apply: the in-order FIFO queues every delete, as RealFIFO ----

#[test]
fn every_delete_is_queued_even_of_an_unknown_key() {
    // TestRealFIFO_enqueueingNoLister
    let f = in_order(Some(known(&[])));
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("bar", 15)).unwrap();
    f.add(obj("qux", 17)).unwrap();
    f.delete(obj("qux", 18)).unwrap();
    f.delete(obj("baz", 20)).unwrap();
    assert_eq!(
        flat(drain_in_order(&f)),
        s(&[
            "Added foo=10",
            "Updated bar=15",
            "Added qux=17",
            "Deleted qux=18",
            "Deleted baz=20"
        ])
    );
    // TestRealFIFO_enqueueingWithLister
    let f = in_order(Some(known(&[("foo", 5), ("bar", 6), ("baz", 7)])));
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("bar", 15)).unwrap();
    f.delete(obj("baz", 20)).unwrap();
    assert_eq!(
        flat(drain_in_order(&f)),
        s(&["Added foo=10", "Updated bar=15", "Deleted baz=20"])
    );
}

// ---- Rule 14 / 17: replace; tombstones before the new objects ----

#[test]
fn replace_tombstones_keys_only_in_the_queue() {
    // TestRealFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue
    type Ops = fn(&InOrderFifo<Obj>);
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
            "deleted object gets no second delete",
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
        (
            "bookmarks are ignored without atomic mode",
            |f| {
                f.bookmark("123").unwrap();
                f.replace(ListPart::whole(vec![], "0")).unwrap();
                f.replace(ListPart::whole(vec![], "1")).unwrap();
            },
            &[],
        ),
    ];
    for (name, ops, want) in cases {
        for view in [Some(known(&[])), None] {
            let f = in_order(view);
            ops(&f);
            assert_eq!(flat(drain_in_order(&f)), s(want), "{name}");
        }
    }
}

#[test]
fn replace_queues_tombstones_before_the_new_objects() {
    // TestRealFIFO_ReplaceMakesDeletions
    let view = || known(&[("foo", 5), ("bar", 6), ("baz", 7)]);
    type Ops = fn(&InOrderFifo<Obj>);
    let cases: [(Ops, &[&str]); 4] = [
        (
            |f| {
                f.delete(obj("baz", 10)).unwrap();
                f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
                    .unwrap();
            },
            &["Deleted baz=10", "Deleted ~bar=6", "Replaced foo=5"],
        ),
        (
            |f| {
                f.add(obj("baz", 10)).unwrap();
                f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
                    .unwrap();
            },
            &[
                "Added baz=10",
                "Deleted ~baz=10",
                "Deleted ~bar=6",
                "Replaced foo=5",
            ],
        ),
        (
            |f| {
                f.delete(obj("bar", 6)).unwrap();
                f.add(obj("bar", 100)).unwrap();
                f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
                    .unwrap();
            },
            &[
                "Deleted bar=6",
                "Added bar=100",
                "Deleted ~bar=100",
                "Deleted ~baz=7",
                "Replaced foo=5",
            ],
        ),
        (
            |f| {
                f.replace(ListPart::whole(vec![obj("bar", 100), obj("foo", 5)], "0"))
                    .unwrap();
                f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
                    .unwrap();
            },
            &[
                "Deleted ~baz=7",
                "Replaced bar=100",
                "Replaced foo=5",
                "Deleted ~bar=100",
                "Replaced foo=5",
            ],
        ),
    ];
    for (i, (ops, want)) in cases.into_iter().enumerate() {
        let f = in_order(Some(view()));
        ops(&f);
        assert_eq!(flat(drain_in_order(&f)), s(want), "case {i}");
    }
    // No view: only queued keys.
    let f = in_order(Some(known(&[])));
    f.add(obj("baz", 10)).unwrap();
    f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
        .unwrap();
    assert_eq!(
        flat(drain_in_order(&f)),
        s(&["Added baz=10", "Deleted ~baz=10", "Replaced foo=5"])
    );
}

#[test]
fn replace_after_a_queued_delete_still_queues_the_listed_object() {
    // TestRealFIFO_replaceWithDeleteDeltaIn
    let f = in_order(Some(known(&[("foo", 1)])));
    f.delete(obj("foo", 1)).unwrap();
    f.replace(ListPart::whole(vec![obj("foo", 2)], "")).unwrap();
    assert_eq!(
        flat(drain_in_order(&f)),
        s(&["Deleted foo=1", "Replaced foo=2"])
    );
}

#[test]
fn the_transform_runs_once_per_incoming_object() {
    // TestRealFIFO_transformer: count calls; the tombstones carry transformed objects.
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let c = Arc::clone(&calls);
    let f = InOrderFifo::builder()
        .batch_size(1)
        .known_objects(known(&[]))
        .transform(move |o: Arc<Obj>| {
            c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(Arc::new(Obj {
                name: o.name.clone(),
                val: o.val + 1000,
            }))
        })
        .build()
        .unwrap();
    f.add(obj("foo", 10)).unwrap();
    f.add(obj("bar", 11)).unwrap();
    f.update(obj("foo", 12)).unwrap();
    f.delete(obj("foo", 15)).unwrap();
    f.replace(ListPart::whole(vec![], "")).unwrap();
    f.add(obj("bar", 16)).unwrap();
    f.replace(ListPart::whole(vec![], "")).unwrap();
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 5);
    assert_eq!(
        flat(drain_in_order(&f)),
        s(&[
            "Added foo=1010",
            "Added bar=1011",
            "Updated foo=1012",
            "Deleted foo=1015",
            "Deleted ~bar=1011",
            "Added bar=1016",
            "Deleted ~bar=1016",
        ])
    );
}

// ---- Rule 15: has_synced and is_in_initial_list ----

#[test]
fn has_synced_follows_client_gos_cases() {
    // TestRealFIFO_HasSynced
    type Ops = fn(&InOrderFifo<Obj>);
    fn pop(f: &InOrderFifo<Obj>) {
        drop(f.try_pop().unwrap().expect("an item"));
    }
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
                pop(f);
            },
            false,
        ),
        (
            |f| {
                f.replace(ListPart::whole(vec![obj("a", 1), obj("b", 2)], "0"))
                    .unwrap();
                pop(f);
                pop(f);
            },
            true,
        ),
        (
            // One key listed twice is two events: two pops.
            |f| {
                f.replace(ListPart::whole(vec![obj("a", 1), obj("a", 2)], "0"))
                    .unwrap();
                pop(f);
                pop(f);
            },
            true,
        ),
    ];
    for (i, (ops, want)) in cases.into_iter().enumerate() {
        let f = in_order(Some(known(&[])));
        ops(&f);
        assert_eq!(f.has_synced(), want, "case {i}");
    }
}

#[test]
fn has_synced_counts_tombstones_and_every_initial_pop_is_in_the_initial_list() {
    // TestRealFIFO_HasSyncedCorrectOnDeletion
    let f = in_order(Some(known(&[("foo", 5), ("bar", 6), ("baz", 7)])));
    f.replace(ListPart::whole(vec![obj("foo", 5)], "0"))
        .unwrap();
    for want in [
        s(&["Deleted ~bar=6"]),
        s(&["Deleted ~baz=7"]),
        s(&["Replaced foo=5"]),
    ] {
        assert!(!f.has_synced());
        assert_eq!(pop_in_order(&f), (want, true));
    }
    assert!(f.has_synced());
}

// ---- Rule 16: resync and close ----

#[test]
fn resync_queues_sync_only_for_known_keys_with_nothing_queued() {
    // TestRealFIFO_Resync, TestRealFIFO_UpdateResyncRace, TestRealFIFO_ResyncNonExisting
    let f = in_order(Some(known(&[("foo", 5)])));
    f.resync().unwrap();
    assert_eq!(flat(drain_in_order(&f)), s(&["Sync foo=5"]));

    let f = in_order(Some(known(&[("foo", 5)])));
    f.update(obj("foo", 6)).unwrap();
    f.resync().unwrap();
    assert_eq!(flat(drain_in_order(&f)), s(&["Updated foo=6"]));

    let f = in_order(Some(known(&[("foo", 5)])));
    f.delete(obj("foo", 10)).unwrap();
    f.resync().unwrap();
    assert_eq!(flat(drain_in_order(&f)), s(&["Deleted foo=10"]));

    let f = in_order(None);
    f.resync().unwrap();
    assert!(f.is_empty());
}

#[test]
fn close_wakes_blocked_pops_with_an_error() {
    // TestRealFIFO_PopShouldUnblockWhenClosed
    let f = Arc::new(in_order(Some(known(&[("foo", 5)]))));
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
}

#[test]
fn a_closed_fifo_refuses_writes_and_still_hands_out_what_is_queued() {
    for f in [
        in_order(Some(known(&[("k", 1)]))),
        atomic(true),
        atomic(false),
    ] {
        f.add(obj("a", 1)).unwrap();
        f.close();
        assert!(matches!(
            f.update(obj("b", 1)),
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
        assert!(matches!(
            f.bookmark("1"),
            Err(kinformer_core::Error::Closed)
        ));
        let sink: &dyn Sink<Obj> = &f;
        assert!(matches!(
            sink.add(obj("c", 1)),
            Err(kinformer_core::Error::Closed)
        ));
        assert_eq!(flat(drain_in_order(&f)), s(&["Added a=1"]));
        assert!(matches!(f.try_pop(), Err(Error::Closed)));
    }
}

// ---- Rule 17: the atomic mode ----

fn atomic(bookmarks: bool) -> InOrderFifo<Obj> {
    InOrderFifo::builder()
        .atomic(true)
        .emit_bookmarks(bookmarks)
        .build()
        .unwrap()
}

#[test]
fn atomic_replace_queues_one_replaced_all() {
    // TestRealFIFO_ReplaceAtomic
    let f = atomic(true);
    f.replace(ListPart::whole(vec![], "123")).unwrap();
    assert_eq!(flat(drain_in_order(&f)), s(&["ReplacedAll@123 []"]));

    let f = atomic(true);
    f.add(obj("foo", 2)).unwrap();
    f.replace(ListPart::whole(vec![obj("foo", 2)], "10"))
        .unwrap();
    f.replace(ListPart::whole(vec![obj("foo", 2)], "20"))
        .unwrap();
    f.replace(ListPart::whole(vec![], "56")).unwrap();
    assert_eq!(
        drain_in_order(&f),
        [
            s(&["Added foo=2"]),
            s(&["ReplacedAll@10 [foo=2]"]),
            s(&["ReplacedAll@20 [foo=2]"]),
            s(&["ReplacedAll@56 []"]),
        ]
    );

    let f = atomic(true);
    f.bookmark("123").unwrap();
    f.replace(ListPart::whole(vec![], "1234")).unwrap();
    assert_eq!(
        drain_in_order(&f),
        [s(&["Bookmark@123"]), s(&["ReplacedAll@1234 []"])]
    );
}

#[test]
fn atomic_replace_is_the_initial_list_and_pops_alone() {
    // TestRealFIFO_ReplaceAtomicPop
    let f = atomic(false);
    f.replace(ListPart::whole(vec![obj("foo", 15), obj("bar", 1)], "20"))
        .unwrap();
    f.add(obj("baz", 1)).unwrap();
    assert!(!f.has_synced());
    let p = f.try_pop().unwrap().unwrap();
    assert_eq!(show_item(p.item()), s(&["ReplacedAll@20 [foo=15 bar=1]"]));
    let Item::ReplacedAll { objects, .. } = p.item() else {
        panic!()
    };
    assert_eq!(objects[0].0.as_str(), "foo", "objects come keyed");
    assert!(p.is_in_initial_list());
    drop(p);
    assert!(f.has_synced());
    assert_eq!(pop_in_order(&f), (s(&["Added baz=1"]), false));
}

#[test]
fn atomic_resync_queues_one_sync_all() {
    // TestRealFIFO_ResyncAtomic
    let f = atomic(false);
    f.add(obj("foo", 2)).unwrap();
    f.resync().unwrap();
    f.bookmark("5").unwrap(); // ignored: bookmarks off
    assert_eq!(drain_in_order(&f), [s(&["Added foo=2"]), s(&["SyncAll"])]);
}

#[test]
fn options_that_do_not_go_together_are_a_config_error() {
    let known_and_atomic = InOrderFifo::<Obj>::builder()
        .atomic(true)
        .known_objects(known(&[]))
        .build();
    assert!(matches!(known_and_atomic, Err(Error::Config(_))));
    let bookmarks_per_object = InOrderFifo::<Obj>::builder().emit_bookmarks(true).build();
    assert!(matches!(bookmarks_per_object, Err(Error::Config(_))));
    assert!(matches!(
        InOrderFifo::<Obj>::builder().batch_size(0).build(),
        Err(Error::Config(_))
    ));
    assert!(InOrderFifo::<Obj>::atomic().is_atomic());
}

// ---- Rule 17: batch pop ----

fn batching(known_objs: &[(&str, u32)], batch: usize) -> InOrderFifo<Obj> {
    InOrderFifo::builder()
        .known_objects(known(known_objs))
        .batch_size(batch)
        .build()
        .unwrap()
}

/// Pops everything as batches, with the initial-list flag of each.
fn batches(f: &InOrderFifo<Obj>) -> Vec<(Vec<String>, bool)> {
    let mut out = Vec::new();
    while let Some(p) = f.try_pop().unwrap() {
        out.push((show_item(p.item()), p.is_in_initial_list()));
    }
    out
}

#[test]
fn batch_pop_splits_as_client_go_does() {
    // TestRealFIFO_PopMultipleDeltaInBatch
    const UNLIMITED: usize = 999_999;
    struct Case {
        name: &'static str,
        initial: &'static [&'static str],
        updates: &'static [&'static str],
        batch: usize,
        want: &'static [&'static [&'static str]],
    }
    let cases = [
        Case {
            name: "unique items in one batch",
            initial: &["foo1", "foo2", "foo3"],
            updates: &[],
            batch: UNLIMITED,
            want: &[&["foo1", "foo2", "foo3"]],
        },
        Case {
            name: "split at the end of the initial list",
            initial: &["foo1", "foo2"],
            updates: &["foo3", "foo4"],
            batch: 2,
            want: &[&["foo1", "foo2"], &["foo3", "foo4"]],
        },
        Case {
            name: "split at a repeated key (1)",
            initial: &["foo1"],
            updates: &["foo1", "foo1"],
            batch: UNLIMITED,
            want: &[&["foo1"], &["foo1"], &["foo1"]],
        },
        Case {
            name: "split at a repeated key (2)",
            initial: &["foo1", "foo2"],
            updates: &["foo2", "foo3"],
            batch: UNLIMITED,
            want: &[&["foo1", "foo2"], &["foo2", "foo3"]],
        },
        Case {
            name: "split at a repeated key (3)",
            initial: &["foo1", "foo2", "foo3"],
            updates: &["foo2"],
            batch: UNLIMITED,
            want: &[&["foo1", "foo2", "foo3"], &["foo2"]],
        },
        Case {
            name: "initial list split by batch size",
            initial: &["foo1", "foo2", "foo3"],
            updates: &[],
            batch: 2,
            want: &[&["foo1", "foo2"], &["foo3"]],
        },
        Case {
            name: "later events split by batch size",
            initial: &[],
            updates: &["foo1", "foo2", "foo3"],
            batch: 2,
            want: &[&["foo1", "foo2"], &["foo3"]],
        },
        Case {
            name: "initial and later mixed",
            initial: &["foo1", "foo2", "foo3"],
            updates: &["foo4"],
            batch: 2,
            want: &[&["foo1", "foo2"], &["foo3"], &["foo4"]],
        },
    ];
    for c in cases {
        let view: Vec<(&str, u32)> = c.initial.iter().map(|n| (*n, 5)).collect();
        let f = batching(&view, c.batch);
        f.replace(ListPart::whole(
            c.initial.iter().map(|n| obj(n, 5)).collect(),
            "123",
        ))
        .unwrap();
        for n in c.updates {
            f.update(obj(n, 5)).unwrap();
        }
        let got: Vec<(Vec<String>, bool)> = batches(&f);
        let want: Vec<(Vec<String>, bool)> = {
            let mut left = c.initial.len();
            c.want
                .iter()
                .map(|names| {
                    let initial = left > 0;
                    left = left.saturating_sub(names.len());
                    let kind = if initial { "Replaced" } else { "Updated" };
                    (
                        names.iter().map(|n| format!("{kind} {n}=5")).collect(),
                        initial,
                    )
                })
                .collect()
        };
        assert_eq!(got, want, "{}", c.name);
    }
}

#[test]
fn batch_pop_takes_at_most_a_thousand_events() {
    let f = InOrderFifo::new(None);
    for i in 0..2500 {
        f.add(obj(&format!("k{i}"), i)).unwrap();
    }
    let sizes: Vec<usize> = std::iter::from_fn(|| f.try_pop().unwrap().map(|p| p.len())).collect();
    assert_eq!(sizes, [DEFAULT_BATCH_SIZE, DEFAULT_BATCH_SIZE, 500]);
}

#[test]
fn atomic_entries_pop_alone_and_end_a_batch() {
    let f = atomic(true);
    f.add(obj("a", 1)).unwrap();
    f.add(obj("b", 1)).unwrap();
    f.resync().unwrap();
    f.bookmark("7").unwrap();
    f.add(obj("c", 1)).unwrap();
    let kinds: Vec<(&str, usize)> =
        std::iter::from_fn(|| f.try_pop().unwrap().map(|p| (p.kind(), p.len()))).collect();
    assert_eq!(
        kinds,
        [("Batch", 2), ("SyncAll", 1), ("Bookmark", 1), ("Deltas", 1)]
    );
}

// ---- Bad input ----

#[test]
fn an_object_without_a_key_is_a_typed_error_and_disturbs_nothing() {
    for f in [in_order(Some(known(&[]))), atomic(true)] {
        assert!(is_key_error(f.add(nameless())));
        assert!(is_key_error(f.update(nameless())));
        assert!(is_key_error(f.delete(nameless())));
        assert!(is_key_error(
            f.replace(ListPart::whole(vec![obj("a", 1), nameless()], "1"))
        ));
        assert!(!f.has_synced());
        assert!(f.is_empty());
        f.add(obj("b", 1)).unwrap();
        assert!(is_key_error(f.update(nameless())));
        assert_eq!(flat(drain_in_order(&f)), s(&["Added b=1"]));
    }
}

#[test]
fn bookmarks_go_through_the_sink_trait() {
    let f = atomic(true);
    let sink: &dyn Sink<Obj> = &f;
    sink.bookmark("9").unwrap();
    sink.replace(ListPart::whole(vec![obj("a", 1)], "10"))
        .unwrap();
    assert_eq!(
        drain_in_order(&f),
        [s(&["Bookmark@9"]), s(&["ReplacedAll@10 [a=1]"])]
    );
}

/// A view whose listing names keys its lookups no longer find.
struct Vanishing;
impl KnownObjects<Obj> for Vanishing {
    fn list_keys(&self) -> Vec<ObjectKey> {
        vec![ObjectKey::parse("gone").unwrap()]
    }
    fn get_by_key(&self, _: &str) -> Option<Arc<Obj>> {
        None
    }
    fn get_shared(&self, key: &str) -> Option<Arc<Obj>> {
        self.get_by_key(key)
    }
    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

#[test]
fn replace_and_resync_skip_a_known_key_the_store_no_longer_holds() {
    let f = in_order(Some(Arc::new(Vanishing)));
    f.replace(ListPart::whole(vec![], "0")).unwrap();
    f.resync().unwrap();
    assert!(f.is_empty());
    assert!(f.has_synced());
}

#[test]
fn pop_with_reports_the_initial_list_flag() {
    let f = in_order(None);
    f.replace(ListPart::whole(vec![obj("a", 1)], "1")).unwrap();
    f.add(obj("b", 1)).unwrap();
    let first = f
        .pop_with(|item, initial| (show_item(item), initial))
        .unwrap();
    assert_eq!(first, (s(&["Replaced a=1"]), true));
    let second = f
        .pop_with(|item, initial| (show_item(item), initial))
        .unwrap();
    assert_eq!(second, (s(&["Added b=1"]), false));
}

// ---- Rule 52: the first list in parts ----

/// The part that starts a list.
fn first(objects: Vec<Arc<Obj>>) -> ListPart<Obj> {
    ListPart::new(
        objects.into_iter().map(Listed::Object).collect(),
        true,
        None,
    )
}

/// A part in the middle of a list.
fn part(objects: Vec<Arc<Obj>>) -> ListPart<Obj> {
    ListPart::new(
        objects.into_iter().map(Listed::Object).collect(),
        false,
        None,
    )
}

/// The part that ends a list at `rv`.
fn end(items: Vec<Listed<Obj>>, rv: &str) -> ListPart<Obj> {
    ListPart::new(items, false, Some(rv.to_owned()))
}

fn listed(objects: Vec<Arc<Obj>>) -> Vec<Listed<Obj>> {
    objects.into_iter().map(Listed::Object).collect()
}

/// `name`, listed unchanged: as `cache` holds it.
fn unchanged(name: &str, cache: &Arc<dyn KnownObjects<Obj>>) -> Listed<Obj> {
    Listed::Unchanged(Unchanged::new(
        ObjectKey::parse(name).unwrap(),
        Arc::clone(cache),
    ))
}

/// Both modes queue the parts of a first list as they come and sync at its end, once every
/// part has been processed too — including a part still being processed when the list
/// ends. A relist is gathered until it ends.
#[test]
fn rule52_the_first_list_in_parts_is_queued_as_it_comes_and_syncs_once_all_is_processed() {
    for (f, relisted) in [
        (InOrderFifo::new(Some(known(&[]))), "Replaced a=2"),
        (atomic(true), "ReplacedAll@11 [a=2]"),
    ] {
        f.replace(first(vec![obj("a", 1), obj("b", 1)])).unwrap();
        let first_part = f.try_pop().unwrap().expect("the first part");
        assert_eq!(
            show_item(first_part.item()),
            s(&["Replaced a=1", "Replaced b=1"])
        );
        assert!(first_part.is_in_initial_list());
        f.replace(part(vec![obj("c", 1)])).unwrap();
        f.replace(end(listed(vec![obj("d", 1)]), "10")).unwrap();
        let rest = f.try_pop().unwrap().expect("the rest");
        assert_eq!(show_item(rest.item()), s(&["Replaced c=1", "Replaced d=1"]));
        assert!(rest.is_in_initial_list());
        drop(rest);
        assert!(!f.has_synced(), "the first part is still being processed");
        drop(first_part);
        assert!(f.has_synced());
        f.replace(first(vec![obj("a", 2)])).unwrap();
        assert!(f.is_empty(), "a relist is gathered until it ends");
        f.replace(end(vec![], "11")).unwrap();
        assert_eq!(pop_in_order(&f), (s(&[relisted]), false));
    }
}

/// A list that ends without any part queued (one page) is a plain first replace: in
/// atomic mode one `ReplacedAll`, as client-go queues it.
#[test]
fn rule52_a_list_in_parts_that_queued_no_part_ends_as_a_plain_replace() {
    let f = atomic(true);
    f.replace(first(vec![])).unwrap();
    f.replace(end(listed(vec![obj("a", 1)]), "5")).unwrap();
    assert_eq!(pop_in_order(&f), (s(&["ReplacedAll@5 [a=1]"]), true));
    assert!(f.has_synced());
}

/// A list started again after a part of the one before was queued (the reflector lost it
/// midway) is gathered whole, so that its replace tombstones what the lost list's parts
/// left and the new list does not have; so is every list after it until one ends.
#[test]
fn rule52_a_list_begun_again_after_a_queued_part_comes_whole() {
    let f = in_order(Some(known(&[])));
    f.replace(first(vec![obj("gone", 1), obj("kept", 1)]))
        .unwrap();
    f.replace(first(vec![obj("lost", 1)])).unwrap();
    assert_eq!(f.len(), 2, "the list started again is gathered");
    f.replace(first(vec![obj("x", 1)])).unwrap();
    f.replace(end(listed(vec![obj("kept", 2)]), "20")).unwrap();
    assert_eq!(
        flat(drain_in_order(&f)),
        s(&[
            "Replaced gone=1",
            "Replaced kept=1",
            "Deleted ~gone=1",
            "Replaced x=1",
            "Replaced kept=2"
        ])
    );
    assert!(f.has_synced());

    let f = atomic(true);
    f.replace(first(vec![obj("gone", 1)])).unwrap();
    f.replace(first(vec![])).unwrap();
    f.replace(end(listed(vec![obj("kept", 2)]), "20")).unwrap();
    assert_eq!(
        drain_in_order(&f),
        [s(&["Replaced gone=1"]), s(&["ReplacedAll@20 [kept=2]"])]
    );
}

#[test]
fn rule52_a_part_checks_every_key_first_and_a_closed_fifo_refuses_it() {
    let f = atomic(true);
    assert!(is_key_error(
        f.replace(first(vec![obj("a", 1), nameless()]))
    ));
    assert!(f.is_empty(), "nothing of a refused part is queued");
    f.close();
    assert!(matches!(
        f.replace(first(vec![obj("a", 1)])),
        Err(kinformer_core::Error::Closed)
    ));
}

/// Through `dyn Sink`, the in-order FIFO queues a first part at once; the DeltaFIFO, which
/// takes lists whole as client-go does, gathers it.
#[test]
fn rule52_the_sink_trait_reaches_the_parts() {
    let f = Arc::new(atomic(false));
    let sink: Arc<dyn Sink<Obj>> = f.clone();
    sink.replace(first(vec![obj("a", 1)])).unwrap();
    assert_eq!(f.len(), 1);
    let d = Arc::new(delta_fifo(Some(known(&[])), true));
    let sink: Arc<dyn Sink<Obj>> = d.clone();
    sink.replace(first(vec![obj("a", 1)])).unwrap();
    assert!(d.is_empty());
    sink.replace(end(vec![], "3")).unwrap();
    assert_eq!(d.len(), 1);
}

// ---- Rule 53: unchanged objects as keys ----

#[test]
fn rule53_the_atomic_fifo_queues_unchanged_objects_as_keys_in_its_one_replaced_all() {
    let f = atomic(false);
    let cache = known(&[("a", 1)]);
    f.replace(ListPart::new(
        vec![Listed::Object(obj("b", 2)), unchanged("a", &cache)],
        true,
        Some("10".into()),
    ))
    .unwrap();
    let p = f.try_pop().unwrap().expect("the relist");
    let Item::ReplacedAll {
        objects,
        unchanged,
        resource_version,
    } = p.item()
    else {
        panic!("{:?}", p.item().kind())
    };
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0].0.as_str(), "b");
    assert_eq!(
        unchanged.iter().map(ObjectKey::as_str).collect::<Vec<_>>(),
        ["a"]
    );
    assert_eq!(resource_version, "10");
    drop(p);
    assert!(f.has_synced());
}

/// While a relist is gathered until it ends, no FIFO keeps the copy the reflector listed of
/// an unchanged object: the atomic FIFO holds its key alone, per-object mode and the
/// DeltaFIFO the cache's own object, which the cache hands out. Else a relist held a second
/// copy of everything unchanged until its end (the memory bench's relist rows: twice the
/// steady state).
#[test]
fn rule53_a_relist_gathered_in_parts_keeps_no_listed_copy_of_an_unchanged_object() {
    let cache = known(&[("a", 1)]);
    let copy = obj("a", 1);
    let relist_part = || {
        let key = ObjectKey::parse("a").unwrap();
        let item = Unchanged::new(key, Arc::clone(&cache)).with_listed(Arc::clone(&copy));
        ListPart::new(vec![Listed::Unchanged(item)], true, None)
    };
    let per_object = InOrderFifo::new(Some(Arc::clone(&cache)));
    let atomic = atomic(false);
    for f in [&per_object, &atomic] {
        f.replace(ListPart::whole(vec![], "1")).unwrap();
        drain_in_order(f);
        f.replace(relist_part()).unwrap();
        assert!(f.is_empty(), "a relist is gathered");
        assert_eq!(Arc::strong_count(&copy), 1, "the listed copy was dropped");
        f.replace(end(vec![], "2")).unwrap();
    }
    let d = delta_fifo(Some(Arc::clone(&cache)), true);
    d.replace(relist_part()).unwrap();
    assert_eq!(Arc::strong_count(&copy), 1, "the listed copy was dropped");
    d.replace(end(vec![], "2")).unwrap();
    assert_eq!(d.len(), 1, "a, as the cache holds it");
}

/// Per-object mode, the end of a first list taken in parts and the DeltaFIFO queue an
/// event per object, so they read unchanged ones from the cache, in list order; one the
/// cache no longer holds counts as not listed.
#[test]
fn rule53_where_every_object_is_needed_unchanged_ones_are_read_from_the_cache() {
    let cache = known(&[("a", 1)]);
    let relist = || {
        ListPart::new(
            vec![
                Listed::Object(obj("b", 2)),
                unchanged("a", &cache),
                unchanged("vanished", &cache),
            ],
            true,
            Some("10".into()),
        )
    };
    let f = InOrderFifo::new(Some(Arc::clone(&cache)));
    f.replace(relist()).unwrap();
    assert_eq!(
        flat(drain_in_order(&f)),
        s(&["Replaced b=2", "Replaced a=1"])
    );

    let d = delta_fifo(Some(Arc::clone(&cache)), true);
    d.replace(relist()).unwrap();
    assert_eq!(d.len(), 2, "b and a, nothing for the vanished key");

    let f = atomic(false);
    f.replace(first(vec![obj("c", 1)])).unwrap();
    f.replace(end(
        vec![Listed::Object(obj("b", 2)), unchanged("a", &cache)],
        "10",
    ))
    .unwrap();
    assert_eq!(
        flat(drain_in_order(&f)),
        s(&["Replaced c=1", "Replaced b=2", "Replaced a=1"])
    );
}
