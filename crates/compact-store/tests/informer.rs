//! The informer over the compact store, fed by the reflector's in-memory lister-watcher:
//! what a relist costs in decodes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinformer_compact_store::CompactStore;
use kinformer_core::KnownObjects as _;
use kinformer_indexer::namespace_indexers;
use kinformer_informer_factory::{FifoKind, ResourceEventHandlerFuncs, SharedIndexInformer};
use kinformer_reflector::fake::{FakeListerWatcher, watch_channel};
use kinformer_reflector::{ApiStatus, Error, ListPage};
use kinformer_testenv::eventually;

fn pod(name: &str, rv: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(rv.into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

/// A relist of 200 pods of which one changed decodes at most that one's old version: the
/// old version of an unchanged object is the listed object itself, which the store answers
/// from its entry (`contains_version`) instead of decoding its copy; with the atomic FIFO
/// (rule 53) the reflector hands on only the keys of unchanged pods and the store keeps
/// their entries. With every FIFO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_decodes_no_unchanged_object() {
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
            let mut pods: Vec<Pod> = (0..199).map(|i| pod(&format!("p{i}"), "5")).collect();
            pods.push(pod("last", changed));
            Ok(ListPage::new(pods, changed))
        });
        // The first watch answers 410 Gone: the reflector relists.
        fake.push_watch(Err(Error::Api(ApiStatus::new(410, "Expired", "too old"))));
        let (_tx, stream) = watch_channel();
        fake.push_watch(Ok(stream));
        let store = Arc::new(CompactStore::<Pod>::new(namespace_indexers()));
        let informer = SharedIndexInformer::builder(fake)
            .fifo(kind)
            .watch_list(false)
            .store_arc(store.clone())
            .build();
        let updated = Arc::new(AtomicBool::new(false));
        let u = Arc::clone(&updated);
        informer
            .add_event_handler(ResourceEventHandlerFuncs::new().update_func(
                move |old: &Arc<Pod>, new: &Arc<Pod>| {
                    if new.metadata.name.as_deref() == Some("last") {
                        assert_eq!(old.metadata.resource_version.as_deref(), Some("5"));
                        u.store(true, Ordering::SeqCst);
                    }
                },
            ))
            .unwrap();
        let handle = informer.start().unwrap();
        eventually(
            &format!("{kind:?}: the relist"),
            Duration::from_secs(10),
            || updated.load(Ordering::SeqCst),
        )
        .await;
        let stats = store.stats();
        assert_eq!(stats.objects, 200);
        assert!(stats.decodes <= 1, "{kind:?}: {stats:?}");
        // What the relist kept reads back as it was listed.
        let rv = |k: &str| {
            store
                .get_by_key(k)
                .and_then(|p| p.metadata.resource_version.clone())
        };
        assert_eq!(rv("ns/p0").as_deref(), Some("5"), "{kind:?}");
        assert_eq!(rv("ns/last").as_deref(), Some("6"), "{kind:?}");
        handle.stop().await.unwrap();
    }
}
