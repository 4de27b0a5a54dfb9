//! The informer driven by the reflector's in-memory `FakeListerWatcher` (no cluster):
//! Rules 27–32 (ARCHITECTURE.md), panic and slow-handler isolation, all three FIFOs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::*;
use kinformer_core::DeletedObject;
use kinformer_deltafifo::{DeltaFifo, FifoQueue, InOrderFifo};
use kinformer_indexer::{IndexFunc, Indexers, KnownObjects, parse_selector};
use kinformer_informer_factory::{
    Error, FifoKind, FilteringResourceEventHandler, ResourceEventHandler,
    ResourceEventHandlerFuncs, SharedIndexInformer,
};
use kinformer_reflector::fake::watch_channel;
use kinformer_reflector::{ApiStatus, ListPage, WatchEvent};
use kinformer_testenv::eventually;
use tokio_util::sync::CancellationToken;

const KINDS: [FifoKind; 3] = [
    FifoKind::DeltaFifo,
    FifoKind::InOrder,
    FifoKind::InOrderAtomic,
];

/// The informer over `fake` with the FIFO `kind`, built in by `.fifo(kind)` or, with
/// `decorated`, built as the informer builds it and handed in behind [`Forward`], a decorator that forwards every required call and nothing else.
fn informer_with(
    fake: kinformer_reflector::fake::FakeListerWatcher<Obj>,
    kind: FifoKind,
    decorated: bool,
) -> SharedIndexInformer<Obj> {
    let builder = SharedIndexInformer::builder(fake);
    if !decorated {
        return builder.fifo(kind).build();
    }
    builder
        .custom_fifo(move |known| -> Arc<dyn FifoQueue<Obj>> {
            match kind {
                FifoKind::DeltaFifo => {
                    Arc::new(Forward(DeltaFifo::builder().known_objects(known).build()))
                }
                FifoKind::InOrder => Arc::new(Forward(
                    InOrderFifo::builder()
                        .known_objects(known)
                        .build()
                        .expect("fifo"),
                )),
                _ => Arc::new(Forward(
                    InOrderFifo::builder()
                        .atomic(true)
                        .emit_bookmarks(true)
                        .build()
                        .expect("fifo"),
                )),
            }
        })
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_reach_the_store_and_the_handler_with_every_fifo_decorated_or_not() {
    for (kind, decorated) in KINDS.into_iter().flat_map(|k| [(k, false), (k, true)]) {
        let (fake, tx) = fake_with(vec![obj("a", "1"), obj("b", "1")], "1");
        let informer = informer_with(fake, kind, decorated);
        let rec = Recorder::new();
        let reg = informer.add_event_handler(rec.clone()).unwrap();
        assert!(!informer.has_synced() && !reg.has_synced());
        let handle = informer.start().unwrap();
        eventually("sync", SECS5, || reg.has_synced()).await;
        assert!(informer.has_synced());

        tx.send(Ok(WatchEvent::Modified(obj("a", "2"))));
        tx.send(Ok(WatchEvent::Deleted(obj("b", "3"))));
        tx.send(Ok(WatchEvent::Added(obj("c", "4"))));
        eventually("5 events", SECS5, || rec.len() == 5).await;

        let mut initial = rec.events()[..2].to_vec();
        initial.sort_by_key(|e| format!("{e:?}"));
        assert_eq!(
            initial,
            [add("a", "1", true), add("b", "1", true)],
            "{kind:?} decorated: {decorated}"
        );
        assert_eq!(
            rec.events()[2..],
            [
                update("a", "1", "2"),
                delete("b", "3", false),
                add("c", "4", false)
            ],
            "{kind:?} decorated: {decorated}"
        );
        let lister = informer.lister();
        assert_eq!(lister.namespaced("ns").get("a").unwrap().rv, "2");
        assert!(lister.namespaced("ns").get("b").unwrap_err().is_not_found());
        let all = lister.namespaced("ns").list(&parse_selector("").unwrap());
        assert_eq!(all.len(), 2);
        assert_eq!(informer.last_sync_resource_version(), "4");
        // Objects are shared with the cache, not copied.
        let a = informer.indexer().get_by_key("ns/a").unwrap();
        assert!(Arc::ptr_eq(&a, &lister.namespaced("ns").get("a").unwrap()));
        assert_eq!(reg.pending(), 0);
        handle.stop().await.unwrap();
        assert!(informer.is_stopped());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_turns_vanished_objects_into_tombstones() {
    for kind in KINDS {
        let fake = kinformer_reflector::fake::FakeListerWatcher::new();
        let lists = Arc::new(AtomicUsize::new(0));
        let l = Arc::clone(&lists);
        fake.on_list(move |_| {
            Ok(if l.fetch_add(1, Ordering::SeqCst) == 0 {
                ListPage::new(vec![obj("a", "1"), obj("b", "1")], "1")
            } else {
                ListPage::new(vec![obj("a", "1"), obj("c", "5")], "5")
            })
        });
        // The first watch fails with 410 Gone: the reflector relists.
        fake.push_watch(Err(kinformer_reflector::Error::Api(ApiStatus::new(
            410, "Expired", "too old",
        ))));
        let informer = SharedIndexInformer::builder(fake).fifo(kind).build();
        let rec = Recorder::new();
        informer.add_event_handler(rec.clone()).unwrap();
        let _handle = informer.start().unwrap();
        eventually("relist", SECS5, || rec.len() == 4).await;
        let events = rec.events();
        assert!(
            events.contains(&delete("b", "1", true)),
            "{kind:?}: {events:?}"
        );
        assert!(
            events.contains(&add("c", "5", false)),
            "{kind:?}: {events:?}"
        );
        // a was relisted unchanged: an equal-RV update goes to no handler without a due resync.
        assert!(
            !events.iter().any(|e| matches!(e, Ev::Update(..))),
            "{kind:?}: {events:?}"
        );
        let keys: Vec<_> = {
            let mut k = informer.indexer().list_keys();
            k.sort();
            k.into_iter().map(|k| k.as_str().to_string()).collect()
        };
        assert_eq!(keys, ["ns/a", "ns/c"], "{kind:?}");
    }
}

/// Rule 27: a handler added after start first gets an add, in the initial list, for every
/// cached object, then the events that follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_27_a_late_handler_first_gets_every_cached_object() {
    let (fake, tx) = fake_with(vec![obj("a", "1"), obj("b", "1")], "1");
    let informer = SharedIndexInformer::new(fake, Duration::ZERO);
    let _handle = informer.start().unwrap();
    eventually("sync", SECS5, || informer.has_synced()).await;

    let rec = Recorder::new();
    let reg = informer.add_event_handler(rec.clone()).unwrap();
    tx.send(Ok(WatchEvent::Added(obj("c", "2"))));
    eventually("3 events", SECS5, || rec.len() == 3).await;
    let mut initial = rec.events()[..2].to_vec();
    initial.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(initial, [add("a", "1", true), add("b", "1", true)]);
    assert_eq!(rec.events()[2], add("c", "2", false));
    assert!(reg.has_synced());
}

/// Rule 27 under load: handlers added while events stream in miss none and see none
/// twice (the snapshot is taken while no item is being applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_27_handlers_added_mid_stream_see_each_object_once() {
    const N: usize = 5000;
    let (fake, tx) = fake_with(vec![], "1");
    let informer = SharedIndexInformer::builder(fake)
        .fifo(FifoKind::InOrder)
        .build();
    let _handle = informer.start().unwrap();
    eventually("sync", SECS5, || informer.has_synced()).await;
    let sender = std::thread::spawn(move || {
        for i in 0..N {
            tx.send(Ok(WatchEvent::Added(obj(
                &format!("o{i}"),
                &(i + 2).to_string(),
            ))));
        }
        tx
    });
    let mut recorders = Vec::new();
    while !sender.is_finished() || recorders.len() < 5 {
        let rec = Recorder::new();
        informer.add_event_handler(rec.clone()).unwrap();
        recorders.push(rec);
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    let _tx = sender.join().unwrap();
    for rec in &recorders {
        eventually("all objects", SECS5, || rec.len() >= N).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    for rec in recorders {
        let mut names: Vec<String> = rec
            .events()
            .into_iter()
            .map(|e| match e {
                Ev::Add(n, ..) => n,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(names.len(), N, "an object was delivered twice");
        names.sort();
        names.dedup();
        assert_eq!(names.len(), N);
    }
}

/// Rule 28: 0 = no resync, under 1 s = 1 s; after start a shorter period is raised to the
/// informer's resync check period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_28_resync_periods_are_normalized() {
    let (fake, _tx) = fake_with(vec![], "1");
    let informer = SharedIndexInformer::new(fake, Duration::from_secs(3));
    let r = |d| {
        informer
            .add_event_handler_with_resync(Recorder::new(), d)
            .unwrap()
    };
    assert_eq!(r(Duration::ZERO).resync_period(), None);
    assert_eq!(
        r(Duration::from_millis(100)).resync_period(),
        Some(Duration::from_secs(1))
    );
    assert_eq!(
        r(Duration::from_secs(5)).resync_period(),
        Some(Duration::from_secs(5))
    );
    assert_eq!(
        informer
            .add_event_handler(Recorder::new())
            .unwrap()
            .resync_period(),
        Some(Duration::from_secs(3))
    );
    let _handle = informer.start().unwrap();
    // The check period is now 1 s (the shortest before start): 2 s stays, 500 ms becomes 1 s.
    assert_eq!(
        r(Duration::from_secs(2)).resync_period(),
        Some(Duration::from_secs(2))
    );
    assert_eq!(
        r(Duration::from_millis(500)).resync_period(),
        Some(Duration::from_secs(1))
    );
}

/// Rule 28: a resync (an update with equal RVs) reaches only the listeners whose period
/// is due; a real update reaches everyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_28_resync_reaches_only_due_listeners() {
    let (fake, tx) = fake_with(vec![obj("a", "1")], "1");
    let informer = SharedIndexInformer::new(fake, Duration::ZERO);
    let every_second = Recorder::new();
    let never = Recorder::new();
    informer
        .add_event_handler_with_resync(every_second.clone(), Duration::from_millis(10))
        .unwrap();
    informer.add_event_handler(never.clone()).unwrap();
    let start = Instant::now();
    let _handle = informer.start().unwrap();
    eventually("two resyncs", SECS5, || {
        every_second
            .events()
            .iter()
            .filter(|e| **e == update("a", "1", "1"))
            .count()
            >= 2
    })
    .await;
    // 10 ms was raised to 1 s: two resyncs need about two seconds, not 20 ms.
    assert!(
        start.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        start.elapsed()
    );
    tx.send(Ok(WatchEvent::Modified(obj("a", "2"))));
    eventually("the real update", SECS5, || {
        never.events().contains(&update("a", "1", "2"))
    })
    .await;
    assert_eq!(never.events(), [add("a", "1", true), update("a", "1", "2")]);
}

/// Rule 28 on the informer's clock: resyncs come when a fake clock is moved to them, not
/// while real time passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_28_resyncs_run_on_the_informers_clock() {
    let (fake, _tx) = fake_with(vec![obj("a", "1")], "1");
    let clock = kinformer_core::FakeClock::new();
    let informer = SharedIndexInformer::builder(fake)
        .clock(Arc::new(clock.clone()))
        .build();
    let rec = Recorder::new();
    let reg = informer
        .add_event_handler_with_resync(rec.clone(), Duration::from_secs(60))
        .unwrap();
    let _handle = informer.start().unwrap();
    eventually("sync", SECS5, || reg.has_synced()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        rec.events(),
        [add("a", "1", true)],
        "no resync before the clock moves"
    );
    clock.step(Duration::from_secs(59));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(rec.len(), 1, "59 s is not the period");
    clock.step(Duration::from_secs(1));
    eventually("the resync", SECS5, || {
        rec.events().contains(&update("a", "1", "1"))
    })
    .await;
}

/// Rule 29: a panicking handler is caught and its listener goes on; other listeners are
/// unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_29_a_panicking_handler_keeps_its_listener_and_spares_the_others() {
    let (fake, tx) = fake_with(vec![obj("boom", "1"), obj("a", "1")], "1");
    let informer = SharedIndexInformer::new(fake, Duration::ZERO);
    let after_panic = Recorder::new();
    let rec = after_panic.clone();
    let panicky = ResourceEventHandlerFuncs::<Obj>::new()
        .add_func(move |o, i| {
            rec.on_add(o, i);
            assert!(o.name != "boom", "handler panics on purpose");
        })
        .update_func(|_, _| panic!("update panics too"));
    let panicky_reg = informer.add_event_handler(panicky).unwrap();
    let calm = Recorder::new();
    informer.add_event_handler(calm.clone()).unwrap();
    let _handle = informer.start().unwrap();
    tx.send(Ok(WatchEvent::Modified(obj("a", "2"))));
    tx.send(Ok(WatchEvent::Added(obj("c", "3"))));
    eventually("calm handler", SECS5, || calm.len() == 4).await;
    eventually("panicky handler", SECS5, || after_panic.len() == 3).await;
    assert!(after_panic.events().contains(&add("c", "3", false)));
    // A panic counts as handled: has_synced does not hang on it.
    eventually("registration synced", SECS5, || panicky_reg.has_synced()).await;
    assert_eq!(panicky_reg.pending(), 0);
}

/// A handler that sleeps 1 s on every event does not delay another handler's events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_never_delays_another() {
    let (fake, tx) = fake_with(vec![], "1");
    let informer = SharedIndexInformer::new(fake, Duration::ZERO);
    let slow_rec = Recorder::new();
    let r = slow_rec.clone();
    let slow = ResourceEventHandlerFuncs::<Obj>::new().add_func(move |o, i| {
        std::thread::sleep(Duration::from_secs(1));
        r.on_add(o, i);
    });
    let slow_reg = informer.add_event_handler(slow).unwrap();
    let fast = Recorder::new();
    informer.add_event_handler(fast.clone()).unwrap();
    let _handle = informer.start().unwrap();
    eventually("sync", SECS5, || informer.has_synced()).await;

    let sent = Instant::now();
    for i in 0..5 {
        tx.send(Ok(WatchEvent::Added(obj(
            &format!("o{i}"),
            &(i + 2).to_string(),
        ))));
    }
    eventually("fast handler", SECS5, || fast.len() == 5).await;
    let fast_done = fast.timed().last().unwrap().0 - sent;
    // Serialized behind the slow handler it would take at least 1 s, and 5 s for all five.
    assert!(
        fast_done < Duration::from_millis(800),
        "fast handler took {fast_done:?}"
    );
    assert!(
        slow_reg.pending() >= 3,
        "slow pending {}",
        slow_reg.pending()
    );
    eventually("slow handler", Duration::from_secs(20), || {
        slow_rec.len() == 5
    })
    .await;
    let slow_done = slow_rec.timed().last().unwrap().0 - sent;
    assert!(
        slow_done >= Duration::from_secs(5),
        "slow handler took {slow_done:?}"
    );
    eventually("slow buffer empty", SECS5, || slow_reg.pending() == 0).await;
}

/// Rule 30: a registration has synced once the informer has *and* the handler has handled
/// every initial add, for a handler added before start and for one added late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_30_registration_syncs_after_its_initial_adds() {
    let (fake, _tx) = fake_with(vec![obj("a", "1"), obj("b", "1")], "1");
    let informer = SharedIndexInformer::new(fake, Duration::ZERO);
    let gated = |gate: crossbeam_channel::Receiver<()>| {
        ResourceEventHandlerFuncs::<Obj>::new().add_func(move |_, _| {
            let _ = gate.recv();
        })
    };
    let (open_early, gate) = crossbeam_channel::unbounded();
    let early = informer.add_event_handler(gated(gate)).unwrap();
    let _handle = informer.start().unwrap();
    eventually("informer sync", SECS5, || informer.has_synced()).await;
    assert!(!early.has_synced());
    open_early.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!early.has_synced(), "one initial add is still unhandled");
    open_early.send(()).unwrap();
    eventually("early registration", SECS5, || early.has_synced()).await;

    let (open_late, gate) = crossbeam_channel::unbounded();
    let late = informer.add_event_handler(gated(gate)).unwrap();
    assert!(!late.has_synced());
    assert_eq!(late.pending(), 2);
    drop(open_late); // every recv fails at once from now on
    eventually("late registration", SECS5, || late.has_synced()).await;
}

/// Rule 31: configuration is fixed at start, a stopped informer takes no handler, and
/// removing a handler twice is harmless.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_31_lifecycle_errors_and_removal() {
    let (fake, tx) = fake_with(vec![], "1");
    let informer = SharedIndexInformer::new(fake, Duration::ZERO);
    informer.set_transform(Ok).unwrap();
    informer.set_watch_error_handler(|_| {}).unwrap();
    let removed = Recorder::new();
    let kept = Recorder::new();
    let reg = informer.add_event_handler(removed.clone()).unwrap();
    informer.add_event_handler(kept.clone()).unwrap();

    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let informer = informer.clone();
        let cancel = cancel.clone();
        async move { informer.run(cancel).await }
    });
    eventually("start", SECS5, || informer.is_started()).await;
    assert!(matches!(
        informer.set_transform(Ok),
        Err(Error::AlreadyStarted)
    ));
    assert!(matches!(
        informer.set_watch_error_handler(|_| {}),
        Err(Error::AlreadyStarted)
    ));
    assert!(matches!(informer.start(), Err(Error::AlreadyStarted)));

    assert_eq!(informer.handler_count(), 2);
    reg.remove();
    reg.remove();
    assert_eq!(informer.handler_count(), 1);
    tx.send(Ok(WatchEvent::Added(obj("a", "2"))));
    eventually("kept handler", SECS5, || kept.len() == 1).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(removed.len(), 0);

    cancel.cancel();
    run.await.unwrap().unwrap();
    assert!(informer.is_stopped());
    assert!(matches!(
        informer.add_event_handler(Recorder::new()),
        Err(Error::Stopped)
    ));
    assert!(matches!(
        informer.add_indexers(Indexers::new()),
        Err(Error::Stopped)
    ));
    assert!(matches!(informer.start(), Err(Error::Stopped)));
    assert_eq!(informer.handler_count(), 0);
    reg.remove(); // still harmless
}

/// Rule 32 through the informer: an object that stops matching is deleted for the
/// filtered handler, one that starts matching is added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_32_filtering_handler_on_a_live_informer() {
    let (fake, tx) = fake_with(
        vec![labelled("a", "1", "web"), labelled("b", "1", "db")],
        "1",
    );
    let informer = SharedIndexInformer::new(fake, Duration::ZERO);
    let rec = Recorder::new();
    let web = |o: &Obj| o.labels.get("app").map(String::as_str) == Some("web");
    informer
        .add_event_handler(FilteringResourceEventHandler::new(web, rec.clone()))
        .unwrap();
    let _handle = informer.start().unwrap();
    tx.send(Ok(WatchEvent::Modified(labelled("a", "2", "db"))));
    tx.send(Ok(WatchEvent::Modified(labelled("b", "3", "web"))));
    tx.send(Ok(WatchEvent::Modified(labelled("b", "4", "web"))));
    tx.send(Ok(WatchEvent::Deleted(labelled("b", "5", "web"))));
    eventually("events", SECS5, || rec.len() == 5).await;
    assert_eq!(
        rec.events(),
        [
            add("a", "1", true),
            delete("a", "1", false),
            add("b", "3", false),
            update("b", "3", "4"),
            delete("b", "5", false),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transform_indexers_and_watch_errors() {
    let fake = kinformer_reflector::fake::FakeListerWatcher::new();
    let lists = Arc::new(AtomicUsize::new(0));
    let l = Arc::clone(&lists);
    fake.on_list(move |_| {
        if l.fetch_add(1, Ordering::SeqCst) == 0 {
            Err(kinformer_reflector::Error::Api(ApiStatus::new(
                500,
                "InternalError",
                "try again",
            )))
        } else {
            Ok(ListPage::new(
                vec![labelled("a", "1", "web"), labelled("b", "1", "db")],
                "1",
            ))
        }
    });
    let (_tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let mut by_app = Indexers::new();
    by_app.insert(
        "byApp".to_string(),
        IndexFunc::single(|o: &Obj| o.labels.get("app").map(String::as_str)),
    );
    let informer = SharedIndexInformer::builder(fake)
        .indexers(by_app)
        .name("objs")
        .build();
    let errors = Arc::new(AtomicUsize::new(0));
    let e = Arc::clone(&errors);
    informer
        .set_watch_error_handler(move |_| {
            e.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    informer
        .set_transform(|o: Arc<Obj>| {
            let mut o = (*o).clone();
            o.labels.insert("seen".into(), "yes".into());
            Ok(Arc::new(o))
        })
        .unwrap();
    let _handle = informer.start().unwrap();
    eventually("sync after the failed list", SECS5, || {
        informer.has_synced()
    })
    .await;
    assert!(errors.load(Ordering::SeqCst) >= 1);
    let indexer = informer.indexer();
    assert_eq!(indexer.by_index("byApp", "web").unwrap().len(), 1);
    assert_eq!(indexer.get_by_key("ns/b").unwrap().labels["seen"], "yes");
    let mut second = Indexers::new();
    second.insert(
        "bySeen".to_string(),
        IndexFunc::single(|o: &Obj| o.labels.get("seen").map(String::as_str)),
    );
    informer.add_indexers(second).unwrap();
    assert_eq!(indexer.by_index("bySeen", "yes").unwrap().len(), 2);
}

/// The handler trait's defaults ignore what is not implemented; `Box<dyn>` and `Arc`
/// handlers work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_behind_box_and_arc() {
    struct AddsOnly(Arc<AtomicUsize>);
    impl ResourceEventHandler<Obj> for AddsOnly {
        fn on_add(&self, _: &Arc<Obj>, _: bool) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let (fake, tx) = fake_with(vec![obj("a", "1")], "1");
    let informer = SharedIndexInformer::new(fake, Duration::ZERO);
    let count = Arc::new(AtomicUsize::new(0));
    let boxed: Box<dyn ResourceEventHandler<Obj> + Send> = Box::new(AddsOnly(Arc::clone(&count)));
    informer.add_event_handler(boxed).unwrap();
    informer
        .add_event_handler(Arc::new(AddsOnly(Arc::clone(&count))))
        .unwrap();
    let deletes = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&deletes);
    informer
        .add_event_handler(ResourceEventHandlerFuncs::new().delete_func(
            move |_: &DeletedObject<Obj>| {
                d.fetch_add(1, Ordering::SeqCst);
            },
        ))
        .unwrap();
    let _handle = informer.start().unwrap();
    tx.send(Ok(WatchEvent::Modified(obj("a", "2"))));
    tx.send(Ok(WatchEvent::Deleted(obj("a", "3"))));
    eventually("delete", SECS5, || deletes.load(Ordering::SeqCst) == 1).await;
    eventually("adds", SECS5, || count.load(Ordering::SeqCst) == 2).await;
}

/// Rule 52: the in-order FIFOs take the first list in parts, so the cache holds the first
/// pages while the last one is still being fetched; `has_synced` waits for the end and
/// every add of the list is in the initial list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule52_the_cache_fills_while_the_first_list_still_arrives() {
    for kind in [FifoKind::InOrder, FifoKind::InOrderAtomic] {
        let fake = kinformer_reflector::fake::FakeListerWatcher::new();
        let cache: Arc<std::sync::OnceLock<SharedIndexInformer<Obj>>> = Arc::default();
        let seen_at_last_page = Arc::new(AtomicUsize::new(usize::MAX));
        let (c, seen) = (Arc::clone(&cache), Arc::clone(&seen_at_last_page));
        fake.on_list(move |o| {
            let page =
                |p: &str| -> Vec<Obj> { (0..500).map(|i| obj(&format!("{p}{i}"), "1")).collect() };
            Ok(match o.continue_token.as_deref() {
                None => ListPage::new(page("a"), "7").with_continue("c1"),
                Some("c1") => ListPage::new(page("b"), "7").with_continue("c2"),
                Some(_) => {
                    // The reflector waits for this page: give the informer up to 5 s to
                    // cache the two before it (a whole list would cache none yet).
                    let informer = c.get().expect("built");
                    let start = Instant::now();
                    // Off the runtime's worker, so that the informer's task runs meanwhile.
                    tokio::task::block_in_place(|| {
                        while informer.indexer().list_keys().len() < 1000 && start.elapsed() < SECS5
                        {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                    });
                    seen.store(informer.indexer().list_keys().len(), Ordering::SeqCst);
                    assert!(!informer.has_synced());
                    ListPage::new(page("c"), "7")
                }
            })
        });
        let (tx, stream) = watch_channel();
        fake.push_watch(Ok(stream));
        let informer = SharedIndexInformer::builder(fake)
            .fifo(kind)
            .watch_list(false)
            .build();
        let _ = cache.set(informer.clone());
        let rec = Recorder::new();
        let reg = informer.add_event_handler(rec.clone()).unwrap();
        let handle = informer.start().unwrap();
        eventually("sync", 2 * SECS5, || reg.has_synced()).await;
        assert_eq!(seen_at_last_page.load(Ordering::SeqCst), 1000, "{kind:?}");
        assert_eq!(informer.indexer().list_keys().len(), 1500);
        let events = rec.events();
        assert_eq!(events.len(), 1500);
        assert!(
            events.iter().all(|e| matches!(e, Ev::Add(_, _, true))),
            "{kind:?}"
        );
        tx.send(Ok(WatchEvent::Added(obj("late", "8"))));
        eventually("the watch", SECS5, || rec.len() == 1501).await;
        assert_eq!(rec.events()[1500], add("late", "8", false));
        handle.stop().await.unwrap();
    }
}

/// A key function of the informer's own reaches every part that keys objects: the cache
/// holds objects under it, the reflector compares a relist with the cache by it (so an
/// unchanged object is kept, not lost as a key the cache does not hold), and a handler
/// that coalesces by key files notifications under it. With every FIFO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_function_of_its_own_keys_the_fifo_the_cache_the_relist_and_coalescing() {
    use kinformer_informer_factory::HandlerOptions;
    for kind in [
        FifoKind::InOrderAtomic,
        FifoKind::InOrder,
        FifoKind::DeltaFifo,
    ] {
        {
            let fake = kinformer_reflector::fake::FakeListerWatcher::new();
            let lists = Arc::new(AtomicUsize::new(0));
            let n = Arc::clone(&lists);
            fake.on_list(move |_| {
                Ok(if n.fetch_add(1, Ordering::SeqCst) == 0 {
                    ListPage::new([obj("a", "1"), obj("b", "1")], "1")
                } else {
                    ListPage::new([obj("a", "1"), obj("b", "2"), obj("c", "2")], "2")
                })
            });
            // The first watch answers 410 Gone: the reflector relists.
            fake.push_watch(Err(kinformer_reflector::Error::Api(ApiStatus::new(
                410, "Expired", "too old",
            ))));
            let (_tx, stream) = watch_channel();
            fake.push_watch(Ok(stream));
            let informer = SharedIndexInformer::builder(fake)
                .fifo(kind)
                .watch_list(false)
                .key_func(Arc::new(|o: &Obj| {
                    kinformer_core::ObjectKey::new(None, &format!("{}.ns", o.name))
                }))
                .build();
            let rec = Recorder::new();
            informer.add_event_handler(rec.clone()).unwrap();
            let coalesced = Recorder::new();
            informer
                .add_event_handler_with_options(
                    coalesced.clone(),
                    HandlerOptions::new().coalesce_by_key(),
                )
                .unwrap();
            let handle = informer.start().unwrap();
            let case = format!("{kind:?}");
            eventually(&case, SECS5, || rec.len() == 4).await;
            let mut keys: Vec<String> = informer
                .indexer()
                .list_keys()
                .iter()
                .map(|k| k.as_str().to_owned())
                .collect();
            keys.sort();
            assert_eq!(keys, ["a.ns", "b.ns", "c.ns"], "{case}");
            assert_eq!(
                rec.events(),
                [
                    add("a", "1", true),
                    add("b", "1", true),
                    update("b", "1", "2"),
                    add("c", "2", false)
                ],
                "{case}"
            );
            eventually(&case, SECS5, || coalesced.len() == 4).await;
            assert_eq!(
                informer.indexer().get_by_key("a.ns").map(|o| o.rv.clone()),
                Some("1".to_owned()),
                "{case}"
            );
            handle.stop().await.unwrap();
        }
    }
}

/// An informer of cached objects hands every handler and every reader the one `Arc` its
/// cache keeps, as client-go shares one pointer: two handlers, the lister and the indexer
/// see the same allocation, read in place, and nothing is decoded on the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_handler_and_reader_gets_the_object_the_cache_keeps() {
    use k8s_openapi::api::core::v1::{Pod, PodSpec};
    use kinformer_compact_store::Cached;
    use kinformer_reflector::fake::FakeListerWatcher;

    let mut pod = Pod::default();
    pod.metadata.name = Some("web-0".into());
    pod.metadata.namespace = Some("ns".into());
    pod.metadata.resource_version = Some("1".into());
    pod.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    pod.spec = Some(PodSpec {
        node_name: Some("node-1".into()),
        ..PodSpec::default()
    });
    let fake = FakeListerWatcher::new();
    let listed = Cached::new(&pod).unwrap();
    fake.on_list(move |_| Ok(ListPage::new(vec![listed.clone()], "1")));
    let (tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let informer = SharedIndexInformer::builder(fake).build();

    type Seen = Arc<std::sync::Mutex<Vec<Arc<Cached<Pod>>>>>;
    let (first, second): (Seen, Seen) = Default::default();
    let mut registrations = Vec::new();
    for seen in [&first, &second] {
        let seen = Arc::clone(seen);
        let handler = ResourceEventHandlerFuncs::new().add_func(move |p: &Arc<Cached<Pod>>, _| {
            assert_eq!(p.spec().and_then(|s| s.node_name()), Some("node-1"));
            seen.lock().unwrap().push(Arc::clone(p));
        });
        registrations.push(informer.add_event_handler(handler).unwrap());
    }
    let handle = informer.start().unwrap();
    eventually("sync", SECS5, || {
        registrations.iter().all(|r| r.has_synced())
    })
    .await;

    let a = first.lock().unwrap()[0].clone();
    let b = second.lock().unwrap()[0].clone();
    let read = informer.lister().namespaced("ns").get("web-0").unwrap();
    let by_namespace = informer.indexer().by_index("namespace", "ns").unwrap();
    assert!(Arc::ptr_eq(&a, &b) && Arc::ptr_eq(&a, &read) && Arc::ptr_eq(&a, &by_namespace[0]));
    assert_eq!(read.decode().unwrap(), pod);
    tx.send(Ok(WatchEvent::Deleted(Cached::new(&pod).unwrap())));
    eventually("the delete", SECS5, || informer.stats().objects == 0).await;
    handle.stop().await.unwrap();
}

/// The informer's transform runs in its reflector: what it refuses is handled as the
/// reflector's own transform handles it (a list fails and is retried, a watch event is
/// skipped), and what it returns is what is cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transform_fails_a_list_and_skips_a_watch_event_it_refuses() {
    let fake = kinformer_reflector::fake::FakeListerWatcher::new();
    let lists = Arc::new(AtomicUsize::new(0));
    let l = Arc::clone(&lists);
    fake.on_list(move |_| {
        // The first list holds an object the transform refuses, the next does not.
        let items = if l.fetch_add(1, Ordering::SeqCst) == 0 {
            vec![obj("a", "1"), obj("refused", "1")]
        } else {
            vec![obj("a", "1")]
        };
        Ok(ListPage::new(items, "1"))
    });
    let (tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let informer = SharedIndexInformer::builder(fake).watch_list(false).build();
    informer
        .set_transform(|o: Arc<Obj>| {
            if o.name == "refused" {
                return Err("refused".into());
            }
            let mut o = (*o).clone();
            o.labels.insert("seen".into(), "yes".into());
            Ok(Arc::new(o))
        })
        .unwrap();
    let rec = Recorder::new();
    informer.add_event_handler(rec.clone()).unwrap();
    let _handle = informer.start().unwrap();
    eventually("sync after the refused list", SECS5, || {
        informer.has_synced()
    })
    .await;
    assert!(lists.load(Ordering::SeqCst) >= 2);
    tx.send(Ok(WatchEvent::Added(obj("refused", "2"))));
    tx.send(Ok(WatchEvent::Added(obj("b", "3"))));
    eventually("b", SECS5, || informer.stats().objects == 2).await;
    let indexer = informer.indexer();
    assert!(indexer.get_by_key("ns/refused").is_none());
    assert_eq!(indexer.get_by_key("ns/b").unwrap().labels["seen"], "yes");
    // The handler hears of `b` on its own thread, after the cache has it.
    eventually("the handler's add of b", SECS5, || rec.len() == 2).await;
    assert_eq!(rec.events(), [add("a", "1", true), add("b", "3", false)]);
}

/// A bookmark moves the cache's resourceVersion forward, events or not: what read-your-writes
/// compares a write's version with (the controller's `CacheProgress` of an informer), so a
/// write whose own event this informer never sees (filtered out by its selector) is still
/// seen as applied once a bookmark passes it.
#[tokio::test]
async fn a_bookmark_moves_the_caches_resource_version_forward() {
    let (fake, tx) = fake_with(vec![obj("a", "1")], "5");
    let informer = SharedIndexInformer::new(fake, Duration::ZERO);
    let _handle = informer.start().unwrap();
    eventually("sync", SECS5, || informer.has_synced()).await;
    assert_eq!(informer.indexer().last_sync_resource_version(), "5");
    tx.send(Ok(WatchEvent::Bookmark(
        kinformer_reflector::Bookmark::new("9", false),
    )));
    eventually("the bookmark applied", SECS5, || {
        informer.indexer().last_sync_resource_version() == "9"
    })
    .await;
}
