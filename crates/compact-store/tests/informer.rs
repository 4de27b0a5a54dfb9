//! The informer of `Cached` pods, fed by the reflector's in-memory lister-watcher: what a
//! relist keeps.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinformer_compact_store::Cached;
use kinformer_core::{KnownObjects as _, MetaObject};
use kinformer_informer_factory::{FifoKind, ResourceEventHandlerFuncs, SharedIndexInformer};
use kinformer_reflector::fake::{FakeListerWatcher, watch_channel};
use kinformer_reflector::{ApiStatus, Error, ListPage};
use kinformer_testenv::eventually;

fn pod(name: &str, rv: &str) -> Cached<Pod> {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(rv.into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    };
    Cached::new(&pod).unwrap()
}

/// A relist of 200 pods of which one changed: the changed one's update has the cached
/// version as its old object, and the cache reads every pod as listed. With the atomic FIFO
/// (the default, rule 53) the reflector hands on only the keys of unchanged pods, and the
/// cache keeps their objects: the very allocations readers held before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_keeps_the_cached_objects_of_unchanged_pods() {
    for kind in [
        FifoKind::InOrderAtomic,
        FifoKind::InOrder,
        FifoKind::DeltaFifo,
    ] {
        let fake = FakeListerWatcher::new();
        let relisted = Arc::new(AtomicBool::new(false));
        let r = Arc::clone(&relisted);
        fake.on_list(move |_| {
            let changed = if r.swap(true, Ordering::SeqCst) {
                "6"
            } else {
                "5"
            };
            let mut pods: Vec<Cached<Pod>> = (0..199).map(|i| pod(&format!("p{i}"), "5")).collect();
            pods.push(pod("last", changed));
            Ok(ListPage::new(pods, changed))
        });
        // The first watch ends with 410 Gone when told to: the reflector relists.
        let (first, stream) = watch_channel();
        fake.push_watch(Ok(stream));
        let (_tx, stream) = watch_channel();
        fake.push_watch(Ok(stream));
        let informer = SharedIndexInformer::builder(fake)
            .fifo(kind)
            .watch_list(false)
            .build();
        let updated = Arc::new(AtomicBool::new(false));
        let u = Arc::clone(&updated);
        informer
            .add_event_handler(ResourceEventHandlerFuncs::new().update_func(
                move |old: &Arc<Cached<Pod>>, new: &Arc<Cached<Pod>>| {
                    if new.object_name() == Some("last") {
                        assert_eq!(old.object_resource_version(), Some("5"));
                        u.store(true, Ordering::SeqCst);
                    }
                },
            ))
            .unwrap();
        let handle = informer.start().unwrap();
        eventually(
            &format!("{kind:?}: synced"),
            Duration::from_secs(10),
            || informer.has_synced(),
        )
        .await;
        let before = informer.indexer().get_by_key("ns/p0").unwrap();
        first.send(Err(Error::Api(ApiStatus::new(410, "Expired", "too old"))));
        eventually(
            &format!("{kind:?}: the relist"),
            Duration::from_secs(10),
            || updated.load(Ordering::SeqCst),
        )
        .await;
        let store = informer.indexer();
        assert_eq!(store.len(), 200);
        let rv = |k: &str| {
            store
                .get_by_key(k)
                .and_then(|p| p.object_resource_version().map(str::to_owned))
        };
        assert_eq!(rv("ns/p0").as_deref(), Some("5"), "{kind:?}");
        assert_eq!(rv("ns/last").as_deref(), Some("6"), "{kind:?}");
        if kind == FifoKind::InOrderAtomic {
            let after = store.get_by_key("ns/p0").unwrap();
            assert!(Arc::ptr_eq(&before, &after), "the unchanged pod was kept");
        }
        handle.stop().await.unwrap();
    }
}
