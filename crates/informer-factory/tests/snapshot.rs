//! Rule 69: an informer keeps its cache on disk and starts from it. Against the in-memory
//! lister-watcher, which plays the API server a restarted process meets.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_compact_store::Cached;
use kinformer_core::{DeletedObject, MetaObject};
use kinformer_informer_factory::{
    FifoKind, ResourceEventHandler, SharedIndexInformer, SnapshotOptions, SnapshotStart,
};
use kinformer_reflector::fake::{FakeListerWatcher, WatchSender, watch_channel};
use kinformer_reflector::{Bookmark, ListPage, WatchEvent};
use kinformer_testenv::eventually;

const SECS5: Duration = Duration::from_secs(5);
const IDENTITY: &str = "v1/pods test";
/// What handlers told only the changes hear after a restart from a..c@5 at 10 to the server
/// at 20 (b changed, c deleted, d created): part of the informer's first sync, so d's add is
/// one of the initial list, as after a list.
const CHANGES: [&str; 3] = [
    "add d@15 (initial)",
    "delete c@5 (tombstone)",
    "update b 5→12",
];

fn pod(name: &str, rv: u32) -> Cached<Pod> {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p.metadata.namespace = Some("ns".into());
    p.metadata.resource_version = Some(rv.to_string());
    Cached::new(&p).unwrap()
}

/// What handlers heard, as `add a@5 (initial)`, `update b 5→12`, `delete c@5 (tombstone)`.
#[derive(Clone, Default)]
struct Heard(Arc<Mutex<Vec<String>>>);

impl Heard {
    fn all(&self) -> Vec<String> {
        let mut v = self.0.lock().unwrap().clone();
        v.sort();
        v
    }
}

fn rv(p: &Cached<Pod>) -> &str {
    p.object_resource_version().unwrap_or_default()
}

impl ResourceEventHandler<Cached<Pod>> for Heard {
    fn on_add(&self, o: &Arc<Cached<Pod>>, initial: bool) {
        let s = format!(
            "add {}@{}{}",
            o.object_name().unwrap(),
            rv(o),
            if initial { " (initial)" } else { "" }
        );
        self.0.lock().unwrap().push(s);
    }
    fn on_update(&self, old: &Arc<Cached<Pod>>, new: &Arc<Cached<Pod>>) {
        let s = format!(
            "update {} {}→{}",
            new.object_name().unwrap(),
            rv(old),
            rv(new)
        );
        self.0.lock().unwrap().push(s);
    }
    fn on_delete(&self, o: &DeletedObject<Cached<Pod>>) {
        let x = o.object();
        let s = format!(
            "delete {}@{}{}",
            x.object_name().unwrap(),
            rv(x),
            if o.tombstone().is_some() {
                " (tombstone)"
            } else {
                ""
            }
        );
        self.0.lock().unwrap().push(s);
    }
}

fn informer(
    fake: &FakeListerWatcher<Cached<Pod>>,
    dir: &std::path::Path,
    start: SnapshotStart,
) -> SharedIndexInformer<Cached<Pod>> {
    informer_with(fake, dir, start, FifoKind::default())
}

fn informer_with(
    fake: &FakeListerWatcher<Cached<Pod>>,
    dir: &std::path::Path,
    start: SnapshotStart,
    fifo: FifoKind,
) -> SharedIndexInformer<Cached<Pod>> {
    SharedIndexInformer::builder(fake.clone())
        .fifo(fifo)
        .snapshot(
            SnapshotOptions::new(dir)
                .period(Duration::ZERO)
                .start(start),
            IDENTITY,
        )
        .build()
}

/// A first run: lists a, b, c at 10, writes its snapshot, stops (writing it again).
async fn first_run(dir: &std::path::Path) {
    let fake = FakeListerWatcher::new();
    fake.on_list(|_| {
        Ok(ListPage::new(
            vec![pod("a", 5), pod("b", 5), pod("c", 5)],
            "10",
        ))
    });
    let (_tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let inf = informer(&fake, dir, SnapshotStart::AsAdds);
    let h = inf.start().unwrap();
    eventually("the first sync", SECS5, || inf.has_synced()).await;
    let written = inf.write_snapshot().await.unwrap().expect("written");
    assert_eq!(written.objects, 3);
    h.stop().await.unwrap();
    let status = inf.stats().snapshot.unwrap();
    assert_eq!(status.last_written.unwrap().resource_version, "10");
    assert!(status.not_loaded.unwrap().contains("no snapshot"));
}

/// The server after the restart: at 20; since 10, b changed, c was deleted, d created.
fn restarted_server() -> (FakeListerWatcher<Cached<Pod>>, WatchSender<Cached<Pod>>) {
    let fake = FakeListerWatcher::new();
    fake.on_list(|o| {
        assert_eq!(
            o.limit,
            Some(1),
            "a list of everything after a resume from 10"
        );
        Ok(ListPage::new(vec![pod("a", 5)], "20"))
    });
    let (tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let (_later, rest) = watch_channel();
    std::mem::forget(_later);
    fake.push_watch(Ok(rest));
    (fake, tx)
}

fn catch_up(tx: &WatchSender<Cached<Pod>>) {
    tx.send(Ok(WatchEvent::Modified(pod("b", 12))));
    tx.send(Ok(WatchEvent::Deleted(pod("c", 13))));
    tx.send(Ok(WatchEvent::Added(pod("d", 15))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule69_a_restart_from_the_snapshot_hands_handlers_only_what_changed_once_caught_up() {
    // With every FIFO: a start from a snapshot asks nothing more of the layers.
    for fifo in [
        FifoKind::InOrderAtomic,
        FifoKind::InOrder,
        FifoKind::DeltaFifo,
    ] {
        changes_only_restart(fifo).await;
    }
}

async fn changes_only_restart(fifo: FifoKind) {
    let dir = tempfile::tempdir().unwrap();
    first_run(dir.path()).await;

    let (fake, tx) = restarted_server();
    let inf = informer_with(&fake, dir.path(), SnapshotStart::ChangesOnly, fifo);
    let heard = Heard::default();
    inf.add_event_handler(heard.clone()).unwrap();
    let h = inf.start().unwrap();
    // The snapshot is in the cache at once...
    eventually("the snapshot loaded", SECS5, || inf.indexer().len() == 3).await;
    catch_up(&tx);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // ...but the informer has not synced, nor told anyone, before it reached 20.
    assert!(!inf.has_synced());
    assert!(heard.all().is_empty());
    tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("20", false))));
    eventually("the sync", SECS5, || inf.has_synced()).await;
    eventually("the handler", SECS5, || heard.all().len() == 3).await;
    assert_eq!(heard.all(), CHANGES);
    let mut cached: Vec<String> = inf
        .indexer()
        .list()
        .iter()
        .map(|p| format!("{}@{}", p.object_name().unwrap(), rv(p)))
        .collect();
    cached.sort();
    assert_eq!(cached, ["a@5", "b@12", "d@15"]);
    let calls = fake.watch_calls();
    assert_eq!(calls[0].resource_version, "10");
    assert_eq!(
        fake.list_calls().len(),
        1,
        "the probe alone: nothing listed"
    );
    let stats = inf.stats();
    let loaded = stats.snapshot.unwrap().loaded.unwrap();
    assert_eq!(
        (loaded.resource_version.as_str(), loaded.objects),
        ("10", 3)
    );
    assert_eq!(stats.reflector.resumed, 1);
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule69_as_adds_every_object_reaches_handlers_as_a_first_lists_add() {
    let dir = tempfile::tempdir().unwrap();
    first_run(dir.path()).await;
    let (fake, tx) = restarted_server();
    let inf = informer(&fake, dir.path(), SnapshotStart::AsAdds);
    let heard = Heard::default();
    inf.add_event_handler(heard.clone()).unwrap();
    let h = inf.start().unwrap();
    catch_up(&tx);
    tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("20", false))));
    eventually("the handler", SECS5, || heard.all().len() == 3).await;
    assert!(inf.has_synced());
    assert_eq!(
        heard.all(),
        [
            "add a@5 (initial)",
            "add b@12 (initial)",
            "add d@15 (initial)"
        ]
    );
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule69_a_snapshot_of_another_identity_is_refused_and_the_informer_lists() {
    let dir = tempfile::tempdir().unwrap();
    first_run(dir.path()).await;
    // The file of the first run, under this informer's name.
    let first = SnapshotOptions::new(dir.path()).path_for(IDENTITY);
    let other = SnapshotOptions::new(dir.path()).path_for("v1/pods other");
    std::fs::copy(&first, &other).unwrap();
    let fake = FakeListerWatcher::new();
    fake.on_list(|_| Ok(ListPage::new(vec![pod("x", 30)], "30")));
    let (_tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let inf = SharedIndexInformer::builder(fake.clone())
        .snapshot(SnapshotOptions::new(dir.path()), "v1/pods other")
        .build();
    let h = inf.start().unwrap();
    eventually("the sync", SECS5, || inf.has_synced()).await;
    assert_eq!(inf.indexer().len(), 1);
    let status = inf.stats().snapshot.unwrap();
    assert!(status.loaded.is_none());
    assert!(
        status
            .not_loaded
            .unwrap()
            .contains("is of \"v1/pods test\"")
    );
    assert_eq!(
        fake.list_calls()[0].resource_version,
        "0",
        "a first list, as without a snapshot"
    );
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule69_past_compaction_the_list_is_compared_with_the_snapshot_and_nothing_is_falsely_deleted()
 {
    let dir = tempfile::tempdir().unwrap();
    first_run(dir.path()).await;
    let fake = FakeListerWatcher::new();
    fake.on_list(|o| {
        Ok(if o.limit == Some(1) {
            ListPage::new(vec![], "40")
        } else {
            // a unchanged, b changed, c gone, d new: at 40.
            ListPage::new(vec![pod("a", 5), pod("b", 12), pod("d", 15)], "40")
        })
    });
    fake.push_watch(Err(kinformer_reflector::Error::Api(
        kinformer_reflector::ApiStatus::new(410, "Expired", "too old"),
    )));
    let (_tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let inf = informer(&fake, dir.path(), SnapshotStart::ChangesOnly);
    let heard = Heard::default();
    inf.add_event_handler(heard.clone()).unwrap();
    let h = inf.start().unwrap();
    eventually("the sync", SECS5, || inf.has_synced()).await;
    eventually("the handler", SECS5, || heard.all().len() == 3).await;
    assert_eq!(heard.all(), CHANGES);
    assert_eq!(
        fake.list_calls().last().unwrap().resource_version,
        "",
        "a consistent list"
    );
    assert_eq!(inf.stats().reflector.resume_failures, 1);
    // The snapshot written at stop is at 40.
    h.stop().await.unwrap();
    assert_eq!(
        inf.stats()
            .snapshot
            .unwrap()
            .last_written
            .unwrap()
            .resource_version,
        "40"
    );
}

/// A replica's informer of the shards it holds: it starts from its snapshot when it holds
/// the same shards again, and lists when it holds others (rule 69, sharded replicas).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule69_a_snapshot_of_other_shards_is_refused_and_of_the_same_shards_resumed() {
    use kinformer_reflector::{ShardKey, ShardSelection, ShardSelector};
    let dir = tempfile::tempdir().unwrap();
    let all = ShardSelector::index_of(ShardKey::Uid, 0, 1).unwrap();
    let half = ShardSelector::index_of(ShardKey::Uid, 0, 2).unwrap();
    let with_uid = |name: &str, rv: u32| {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.uid = Some(format!("uid-{name}"));
        p.metadata.resource_version = Some(rv.to_string());
        Cached::new(&p).unwrap()
    };
    let run = |selector: ShardSelector, list_rv: u32| {
        let fake = FakeListerWatcher::new();
        let items = vec![with_uid("a", 5), with_uid("b", 5)];
        fake.on_list(move |o| {
            Ok(if o.limit == Some(1) {
                ListPage::new(vec![], "10")
            } else {
                ListPage::new(items.clone(), list_rv.to_string())
            })
        });
        let (tx, stream) = watch_channel();
        std::mem::forget(tx);
        fake.push_watch(Ok(stream));
        let inf = SharedIndexInformer::builder(fake.clone())
            .shards(ShardSelection::new(Some(selector)))
            .snapshot(
                SnapshotOptions::new(dir.path()).period(Duration::ZERO),
                IDENTITY,
            )
            .build();
        (fake, inf)
    };
    let (_, first) = run(all.clone(), 10);
    let h = first.start().unwrap();
    eventually("the first sync", SECS5, || first.has_synced()).await;
    h.stop().await.unwrap();
    assert!(first.stats().snapshot.unwrap().last_written.is_some());

    let (fake, other) = run(half, 10);
    let h = other.start().unwrap();
    eventually("the sync over other shards", SECS5, || other.has_synced()).await;
    let status = other.stats().snapshot.unwrap();
    assert!(
        status.not_loaded.unwrap().contains("shards="),
        "refused for its shards"
    );
    assert!(
        fake.list_calls().iter().any(|o| o.limit != Some(1)),
        "listed"
    );
    h.stop().await.unwrap();

    // The snapshot on disk is now of the other shards: the same shards as it are resumed.
    let (fake, same) = run(ShardSelector::index_of(ShardKey::Uid, 0, 2).unwrap(), 10);
    let h = same.start().unwrap();
    eventually("the sync from the snapshot", SECS5, || same.has_synced()).await;
    assert_eq!(same.stats().reflector.resumed, 1);
    assert!(
        fake.list_calls().iter().all(|o| o.limit == Some(1)),
        "nothing listed"
    );
    h.stop().await.unwrap();
}

/// A snapshot older than what the informer's cache has applied is not started from: a cache
/// never goes back in time (rule 69).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule69_a_snapshot_older_than_the_cache_is_refused() {
    use kinformer_indexer::{ThreadSafeStore, namespace_indexers};
    let dir = tempfile::tempdir().unwrap();
    first_run(dir.path()).await; // a snapshot at 10
    let store = ThreadSafeStore::new(namespace_indexers());
    store.replace(vec![Arc::new(pod("a", 50))], "50").unwrap();
    let fake = FakeListerWatcher::new();
    fake.on_list(|_| Ok(ListPage::new(vec![pod("a", 60)], "60")));
    let (_tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    let inf = SharedIndexInformer::builder(fake.clone())
        .store(store)
        .snapshot(
            SnapshotOptions::new(dir.path()).period(Duration::ZERO),
            IDENTITY,
        )
        .build();
    let h = inf.start().unwrap();
    eventually("the sync", SECS5, || inf.has_synced()).await;
    let status = inf.stats().snapshot.unwrap();
    assert!(status.loaded.is_none());
    assert!(
        status
            .not_loaded
            .unwrap()
            .contains("older than the 50 its cache has applied"),
        "refused as behind the cache"
    );
    assert_eq!(inf.stats().reflector.resumed, 0);
    h.stop().await.unwrap();
}
