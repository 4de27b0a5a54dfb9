//! The informer's swap points, proven through the real `SharedIndexInformer`: a FIFO and a
//! cache written here from scratch (not wrappers of the built-in ones) carry the whole
//! pipeline — list, watch events, a relist with a vanished object, handlers, listers.
//! (The lister-watcher is swapped in every informer test: the fake is one.)

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::task::{Context, Poll, Waker};

use crate::common::*;
use kinformer_core::{
    DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType, KnownObjects, ListPart, Listed,
    MetaObject, ObjectKey, Sink, WholeList, meta_namespace_key,
};
use kinformer_deltafifo::{Error as FifoError, FifoQueue, Item, PopFuture, Popped};
use kinformer_indexer::{Error as IndexerError, Indexer, IndexerWriter, Indexers};
use kinformer_informer_factory::SharedIndexInformer;
use kinformer_reflector::fake::{FakeListerWatcher, watch_channel};
use kinformer_reflector::{ListPage, WatchEvent};
use kinformer_testenv::eventually;

/// The simplest FIFO that honours the `FifoQueue` contract: one entry per event in arrival
/// order, a relist queues its tombstones (from the known-objects view) then its objects,
/// `has_synced` once the first relist's entries have been popped. It counts its pops.
struct SimpleFifo {
    known: Arc<dyn KnownObjects<Obj>>,
    state: Mutex<SimpleState>,
    pops: AtomicUsize,
    lists: WholeList<Obj>,
}

#[derive(Default)]
struct SimpleState {
    entries: VecDeque<(ObjectKey, Delta<Obj>)>,
    /// Entries of the first relist not yet popped; `None` before it.
    initial_left: Option<usize>,
    closed: bool,
    waiter: Option<Waker>,
}

impl SimpleFifo {
    fn new(known: Arc<dyn KnownObjects<Obj>>) -> Self {
        Self {
            known,
            lists: WholeList::default(),
            state: Mutex::new(SimpleState::default()),
            pops: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SimpleState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, entries: Vec<(ObjectKey, Delta<Obj>)>) -> Result<(), kinformer_core::Error> {
        let waiter = {
            let mut st = self.lock();
            if st.closed {
                return Err(kinformer_core::Error::Closed);
            }
            st.entries.extend(entries);
            st.waiter.take()
        };
        if let Some(w) = waiter {
            w.wake();
        }
        Ok(())
    }

    fn event(&self, kind: DeltaType, obj: Arc<Obj>) -> Result<(), kinformer_core::Error> {
        let key = meta_namespace_key(&*obj)?;
        {
            let mut st = self.lock();
            // An event before any relist: there is no initial list to wait for.
            st.initial_left.get_or_insert(0);
        }
        self.push(vec![(key, Delta::new(kind, obj))])
    }
}

impl Sink<Obj> for SimpleFifo {
    fn add(&self, obj: Arc<Obj>) -> Result<(), kinformer_core::Error> {
        self.event(DeltaType::Added, obj)
    }
    fn update(&self, obj: Arc<Obj>) -> Result<(), kinformer_core::Error> {
        self.event(DeltaType::Updated, obj)
    }
    fn delete(&self, obj: Arc<Obj>) -> Result<(), kinformer_core::Error> {
        self.event(DeltaType::Deleted, obj)
    }
    fn replace(&self, part: ListPart<Obj>) -> Result<(), kinformer_core::Error> {
        let Some((list, _rv)) = self.lists.gather(part) else {
            return Ok(());
        };
        let mut listed = BTreeMap::new();
        for obj in Listed::objects(list) {
            listed.insert(meta_namespace_key(&*obj)?, obj);
        }
        let mut entries = Vec::new();
        for key in self.known.list_keys() {
            if !listed.contains_key(&key)
                && let Some(last) = self.known.get_by_key(key.as_str())
            {
                let tombstone = DeletedFinalStateUnknown {
                    key: key.clone(),
                    obj: last,
                };
                let delta = Delta {
                    kind: DeltaType::Deleted,
                    object: DeltaObject::Tombstone(tombstone),
                };
                entries.push((key, delta));
            }
        }
        for (key, obj) in listed {
            entries.push((key, Delta::new(DeltaType::Replaced, obj)));
        }
        {
            let mut st = self.lock();
            if st.initial_left.is_none() {
                st.initial_left = Some(entries.len());
            }
        }
        self.push(entries)
    }
    fn resync(&self) -> Result<(), kinformer_core::Error> {
        Ok(())
    }
    fn bookmark(&self, _: &str) -> Result<(), kinformer_core::Error> {
        Ok(())
    }
}

impl SimpleFifo {
    /// Pops the oldest entry, or parks `cx`'s waker while there is none.
    fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Result<Popped<'_, Obj>, FifoError>> {
        let mut st = self.lock();
        if let Some((key, delta)) = st.entries.pop_front() {
            let initial = st.initial_left.is_none_or(|n| n > 0);
            if let Some(n) = st.initial_left.as_mut() {
                *n = n.saturating_sub(1);
            }
            self.pops.fetch_add(1, Ordering::Relaxed);
            let item = Item::Deltas {
                key,
                deltas: vec![delta],
            };
            return Poll::Ready(Ok(Popped::new(item, initial)));
        }
        if st.closed {
            return Poll::Ready(Err(FifoError::Closed));
        }
        st.waiter = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl FifoQueue<Obj> for SimpleFifo {
    fn pop_async(&self) -> PopFuture<'_, Obj> {
        PopFuture::from_future(std::future::poll_fn(move |cx| self.poll_pop(cx)))
    }
    // Synced once the first relist is popped. (The built-in FIFOs wait until it is also
    // applied; a FIFO that hands out items without a completion hook cannot, and the
    // informer then reports synced one item early at most.)
    fn has_synced(&self) -> bool {
        self.lock().initial_left == Some(0)
    }
    fn close(&self) {
        let waiter = {
            let mut st = self.lock();
            st.closed = true;
            st.waiter.take()
        };
        if let Some(w) = waiter {
            w.wake();
        }
    }
    fn is_closed(&self) -> bool {
        self.lock().closed
    }
    fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_written_from_scratch_carries_the_real_informer() {
    let fake = FakeListerWatcher::new();
    let lists = Arc::new(AtomicUsize::new(0));
    {
        let lists = Arc::clone(&lists);
        // The first list has a and b; the relist (after the first watch ends) only b.
        fake.on_list(move |_| {
            Ok(match lists.fetch_add(1, Ordering::SeqCst) {
                0 => ListPage::new(vec![obj("a", "1"), obj("b", "1")], "1"),
                _ => ListPage::new(vec![obj("b", "5")], "5"),
            })
        });
    }
    let (tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));

    let fifo_slot: Arc<Mutex<Option<Arc<SimpleFifo>>>> = Arc::default();
    let informer = SharedIndexInformer::builder(fake.clone())
        .custom_fifo({
            let slot = Arc::clone(&fifo_slot);
            move |known| {
                let fifo = Arc::new(SimpleFifo::new(known));
                *slot.lock().unwrap() = Some(Arc::clone(&fifo));
                fifo as Arc<dyn FifoQueue<Obj>>
            }
        })
        .build();
    let rec = Recorder::new();
    let reg = informer.add_event_handler(rec.clone()).unwrap();
    let handle = informer.start().unwrap();
    let fifo = fifo_slot.lock().unwrap().clone().expect("built at start");
    eventually("sync", SECS5, || reg.has_synced() && rec.len() == 2).await;

    tx.send(Ok(WatchEvent::Modified(obj("a", "2"))));
    tx.send(Ok(WatchEvent::Added(obj("c", "3"))));
    eventually("two watch events", SECS5, || rec.len() == 4).await;
    assert_eq!(
        rec.events()[2..],
        [update("a", "1", "2"), add("c", "3", false)]
    );
    assert_eq!(informer.lister().namespaced("ns").get("a").unwrap().rv, "2");

    // The watch fails with 410: a relist that lacks a and c, which this FIFO tombstones
    // from the informer's cache through the view the informer gave it.
    tx.send(Err(kinformer_reflector::Error::Api(
        kinformer_reflector::ApiStatus::new(410, "Expired", "too old"),
    )));
    eventually("the relist", SECS5, || rec.len() == 7).await;
    let mut after = rec.events()[4..].to_vec();
    after.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        after,
        [
            delete("a", "2", true),
            delete("c", "3", true),
            update("b", "1", "5")
        ]
    );
    let names: Vec<String> = informer
        .indexer()
        .list()
        .iter()
        .map(|o| o.name.clone())
        .collect();
    assert_eq!(names, ["b"]);
    assert!(
        fifo.pops.load(Ordering::Relaxed) >= 7,
        "every item popped from the custom FIFO"
    );
    handle.stop().await.unwrap();
    assert!(fifo.is_closed(), "stopping the informer closes its FIFO");
}

/// A cache written from scratch: a `BTreeMap` under a lock, indices computed by scanning
/// (no index structures at all). It counts the informer's writes.
#[derive(Default)]
struct ScanningCache {
    items: RwLock<BTreeMap<ObjectKey, Arc<Obj>>>,
    indexers: RwLock<Indexers<Obj>>,
    rv: RwLock<String>,
    writes: AtomicUsize,
    lists: WholeList<Obj>,
}

impl ScanningCache {
    fn with_namespace_index() -> Self {
        let cache = Self::default();
        *cache.indexers.write().unwrap() = kinformer_indexer::namespace_indexers();
        cache
    }

    fn wrote(&self, rv: Option<&str>) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        *self.rv.write().unwrap() = rv.unwrap_or("").to_owned();
    }

    fn matching(
        &self,
        index: &str,
        value: &str,
    ) -> Result<Vec<(ObjectKey, Arc<Obj>)>, IndexerError> {
        let indexers = self.indexers.read().unwrap();
        let func = indexers
            .get(index)
            .ok_or_else(|| IndexerError::UnknownIndex(index.to_owned()))?;
        let items = self.items.read().unwrap();
        Ok(items
            .iter()
            .filter(|(_, o)| func.values(o).is_ok_and(|vs| vs.iter().any(|v| v == value)))
            .map(|(k, o)| (k.clone(), Arc::clone(o)))
            .collect())
    }
}

impl KnownObjects<Obj> for ScanningCache {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.items.read().unwrap().keys().cloned().collect()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Obj>> {
        self.items.read().unwrap().get(key).cloned()
    }

    fn get_shared(&self, key: &str) -> Option<Arc<Obj>> {
        self.get_by_key(key)
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

impl Indexer<Obj> for ScanningCache {
    fn list(&self) -> Vec<Arc<Obj>> {
        self.items.read().unwrap().values().cloned().collect()
    }
    fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<Obj>>, IndexerError> {
        Ok(self
            .matching(index, value)?
            .into_iter()
            .map(|(_, o)| o)
            .collect())
    }
    fn index_keys(&self, index: &str, value: &str) -> Result<Vec<ObjectKey>, IndexerError> {
        Ok(self
            .matching(index, value)?
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    }
    fn list_index_func_values(&self, index: &str) -> Vec<String> {
        let indexers = self.indexers.read().unwrap();
        let Some(func) = indexers.get(index) else {
            return Vec::new();
        };
        let mut all: Vec<String> = self
            .list()
            .iter()
            .flat_map(|o| func.values(o).unwrap_or_default())
            .collect();
        all.sort();
        all.dedup();
        all
    }
    fn get_indexers(&self) -> Indexers<Obj> {
        self.indexers.read().unwrap().clone()
    }
    fn last_sync_resource_version(&self) -> String {
        self.rv.read().unwrap().clone()
    }
}

impl Sink<Obj> for ScanningCache {
    fn add(&self, obj: Arc<Obj>) -> Result<(), kinformer_core::Error> {
        let key = meta_namespace_key(&*obj)?;
        self.wrote(obj.object_resource_version());
        self.items.write().unwrap().insert(key, obj);
        Ok(())
    }
    fn update(&self, obj: Arc<Obj>) -> Result<(), kinformer_core::Error> {
        self.add(obj)
    }
    fn delete(&self, obj: Arc<Obj>) -> Result<(), kinformer_core::Error> {
        let key = meta_namespace_key(&*obj)?;
        self.wrote(obj.object_resource_version());
        self.items.write().unwrap().remove(&key);
        Ok(())
    }
    /// Unchanged objects (this cache's own) are read back before the write lock is taken.
    fn replace(&self, part: ListPart<Obj>) -> Result<(), kinformer_core::Error> {
        let Some((list, rv)) = self.lists.gather(part) else {
            return Ok(());
        };
        let mut items = BTreeMap::new();
        for obj in Listed::objects(list) {
            items.insert(meta_namespace_key(&*obj)?, obj);
        }
        self.wrote(Some(&rv));
        *self.items.write().unwrap() = items;
        Ok(())
    }
    fn resync(&self) -> Result<(), kinformer_core::Error> {
        Ok(())
    }
    fn bookmark(&self, rv: &str) -> Result<(), kinformer_core::Error> {
        *self.rv.write().unwrap() = rv.to_owned();
        Ok(())
    }
}

impl IndexerWriter<Obj> for ScanningCache {
    fn add_indexers(&self, indexers: Indexers<Obj>) -> Result<(), IndexerError> {
        let mut mine = self.indexers.write().unwrap();
        let taken: Vec<String> = indexers
            .keys()
            .filter(|n| mine.contains_key(*n))
            .cloned()
            .collect();
        if !taken.is_empty() {
            return Err(IndexerError::IndexerConflict(taken));
        }
        mine.extend(indexers);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_written_from_scratch_sits_behind_the_real_informer() {
    for kind in [
        kinformer_informer_factory::FifoKind::DeltaFifo,
        kinformer_informer_factory::FifoKind::InOrder,
        kinformer_informer_factory::FifoKind::InOrderAtomic,
    ] {
        let (fake, tx) = fake_with(
            vec![labelled("a", "1", "web"), labelled("b", "1", "db")],
            "1",
        );
        let cache = Arc::new(ScanningCache::with_namespace_index());
        let informer = SharedIndexInformer::builder(fake)
            .store(Arc::clone(&cache))
            .fifo(kind)
            .build();
        let rec = Recorder::new();
        let reg = informer.add_event_handler(rec.clone()).unwrap();
        let handle = informer.start().unwrap();
        eventually("sync", SECS5, || reg.has_synced()).await;

        tx.send(Ok(WatchEvent::Added(labelled("c", "2", "web"))));
        tx.send(Ok(WatchEvent::Deleted(labelled("b", "3", "db"))));
        eventually("the watch events", SECS5, || rec.len() == 4).await;

        // Listers and the read side read the custom cache.
        let web = informer
            .lister()
            .namespaced("ns")
            .list(&kinformer_indexer::parse_selector("app=web").unwrap());
        let mut names: Vec<&str> = web.iter().map(|o| o.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["a", "c"], "{kind:?}");
        assert!(informer.indexer().get_by_key("ns/b").is_none(), "{kind:?}");
        assert!(cache.writes.load(Ordering::Relaxed) >= 3, "{kind:?}");
        // Index functions added through the informer land in the custom cache.
        let mut by_app = Indexers::new();
        by_app.insert(
            "byApp".into(),
            kinformer_indexer::IndexFunc::new(|o: &Obj| o.labels.values().cloned().collect()),
        );
        informer.add_indexers(by_app).unwrap();
        assert_eq!(
            informer.indexer().by_index("byApp", "web").unwrap().len(),
            2
        );
        handle.stop().await.unwrap();
    }
}

/// The retry policy reaches the informer's reflector: lists that fail are retried on the
/// given schedule, not on the default one (800 ms first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backoff_policy_is_the_informers_to_choose() {
    let fake = FakeListerWatcher::<Obj>::new();
    fake.on_list(|_| {
        Err(kinformer_reflector::Error::Api(
            kinformer_reflector::ApiStatus::new(500, "InternalError", "down"),
        ))
    });
    let mut backoff = kinformer_reflector::Backoff::default();
    backoff.initial = std::time::Duration::from_millis(20);
    backoff.max = std::time::Duration::from_millis(80);
    backoff.jitter = 0.0;
    let informer = SharedIndexInformer::builder(fake.clone())
        .backoff(backoff)
        .build();
    let handle = informer.start().unwrap();
    eventually("five lists", SECS5, || fake.list_times().len() >= 5).await;
    handle.stop().await.unwrap();
    let times = fake.list_times();
    let gaps: Vec<u128> = times
        .windows(2)
        .take(4)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    for (gap, want) in gaps.iter().zip([20, 40, 80, 80]) {
        assert!(
            (want..want + 500).contains(gap),
            "gaps {gaps:?}, want 20, 40, 80, 80 ms"
        );
    }
}

/// Rules 52 and 53 hold through decorators that forward only the required methods: the
/// informer's own atomic in-order FIFO and its store, each wrapped. The first list
/// reaches the cache a page at a time while the last page is still being fetched (52),
/// and a relist in which one object changed keeps the cached allocations of the unchanged
/// ones (53): nothing is asked of the sink, so a wrapper cannot forget to forward a
/// capability.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_52_and_53_hold_through_decorators_forwarding_only_required_methods() {
    let fake = FakeListerWatcher::new();
    let built: Arc<std::sync::OnceLock<SharedIndexInformer<Obj>>> = Arc::default();
    let seen_at_last_page = Arc::new(AtomicUsize::new(usize::MAX));
    let lists = Arc::new(AtomicUsize::new(0));
    // An unchanged object as the cache held it before the relist.
    let before: Arc<std::sync::OnceLock<Arc<Obj>>> = Arc::default();
    let (b, seen, n, kept) = (
        Arc::clone(&built),
        Arc::clone(&seen_at_last_page),
        Arc::clone(&lists),
        Arc::clone(&before),
    );
    fake.on_list(move |o| {
        let page =
            |p: &str| -> Vec<Obj> { (0..500).map(|i| obj(&format!("{p}{i}"), "1")).collect() };
        if n.load(Ordering::SeqCst) >= 1 {
            if let Some(b0) = b.get().and_then(|i| i.indexer().get_by_key("ns/b0")) {
                let _ = kept.set(b0);
            }
            // The relist, unpaged: one object changed.
            let mut all: Vec<Obj> = ["a", "b", "c"].into_iter().flat_map(page).collect();
            all.push(obj("a0", "9"));
            all.swap_remove(0);
            return Ok(ListPage::new(all, "9"));
        }
        Ok(match o.continue_token.as_deref() {
            None => ListPage::new(page("a"), "7").with_continue("c1"),
            Some("c1") => ListPage::new(page("b"), "7").with_continue("c2"),
            Some(_) => {
                let informer = b.get().expect("built");
                let start = std::time::Instant::now();
                tokio::task::block_in_place(|| {
                    while informer.indexer().list_keys().len() < 1000 && start.elapsed() < SECS5 {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                });
                seen.store(informer.indexer().list_keys().len(), Ordering::SeqCst);
                n.store(1, Ordering::SeqCst);
                ListPage::new(page("c"), "7")
            }
        })
    });
    // The first watch answers 410 Gone: the reflector relists.
    fake.push_watch(Err(kinformer_reflector::Error::Api(
        kinformer_reflector::ApiStatus::new(410, "Expired", "too old"),
    )));
    let (_tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let store = Arc::new(kinformer_indexer::ThreadSafeStore::<Obj>::new(
        kinformer_indexer::namespace_indexers(),
    ));
    let informer = SharedIndexInformer::builder(fake)
        .watch_list(false)
        .custom_fifo(|_known| Arc::new(Forward(kinformer_deltafifo::InOrderFifo::<Obj>::atomic())))
        .store(Forward(Arc::clone(&store)))
        .build();
    let _ = built.set(informer.clone());
    let rec = Recorder::new();
    let reg = informer.add_event_handler(rec.clone()).unwrap();
    let handle = informer.start().unwrap();
    eventually("sync", 2 * SECS5, || reg.has_synced()).await;
    assert_eq!(seen_at_last_page.load(Ordering::SeqCst), 1000, "rule 52");
    eventually("the relist's update", 2 * SECS5, || {
        rec.events().contains(&update("a0", "1", "9"))
    })
    .await;
    assert_eq!(informer.indexer().list_keys().len(), 1500);
    let b0 = informer.indexer().get_by_key("ns/b0").unwrap();
    assert!(
        Arc::ptr_eq(before.get().expect("read before the relist"), &b0),
        "rule 53"
    );
    handle.stop().await.unwrap();
}
