//! Rule 69 end to end: a factory restarted with its snapshots on the real API server
//! resumes without a list inside the watch cache's window, and past a compaction lists
//! once and hands handlers only what changed. `cargo xtask test` runs them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_compact_store::Cached;
use kinformer_core::{DeletedObject, MetaObject};
use kinformer_informer_factory::{
    ResourceEventHandler, SharedInformerFactory, SnapshotOptions, SnapshotStart,
};
use kinformer_kube::reflector_client;
use kinformer_testenv::{ControlPlane, create_pods, eventually, pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};

const TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone, Default)]
struct Heard(Arc<Mutex<Vec<String>>>);

impl Heard {
    fn sorted(&self) -> Vec<String> {
        let mut v = self.0.lock().unwrap().clone();
        v.sort();
        v
    }
}

impl ResourceEventHandler<Cached<Pod>> for Heard {
    fn on_add(&self, o: &Arc<Cached<Pod>>, _: bool) {
        self.0
            .lock()
            .unwrap()
            .push(format!("add {}", o.object_name().unwrap()));
    }
    fn on_update(&self, old: &Arc<Cached<Pod>>, new: &Arc<Cached<Pod>>) {
        if old.object_resource_version() != new.object_resource_version() {
            self.0
                .lock()
                .unwrap()
                .push(format!("update {}", new.object_name().unwrap()));
        }
    }
    fn on_delete(&self, o: &DeletedObject<Cached<Pod>>) {
        let t = if o.tombstone().is_some() {
            " (tombstone)"
        } else {
            ""
        };
        self.0
            .lock()
            .unwrap()
            .push(format!("delete {}{t}", o.object().object_name().unwrap()));
    }
}

fn factory(cp: &ControlPlane, ns: &str, dir: &std::path::Path) -> SharedInformerFactory {
    SharedInformerFactory::builder(reflector_client(cp.admin_config()).unwrap())
        .namespace(ns)
        .snapshots(SnapshotOptions::new(dir).start(SnapshotStart::ChangesOnly))
        .build()
}

/// The namespace's pods on the server: name → resourceVersion.
async fn server_state(api: &Api<Pod>) -> BTreeMap<String, String> {
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap(),
                p.metadata.resource_version.unwrap(),
            )
        })
        .collect()
}

/// Runs a factory, writes its snapshot by shutting it down, changes the namespace (one
/// delete, one update, one create), then `between` (a compaction, or nothing), then restarts;
/// returns what the restarted one's handler heard and its informer's stats.
async fn restart(
    cp: &ControlPlane,
    count: usize,
    between: impl AsyncFnOnce(),
) -> (Vec<String>, kinformer_informer_factory::InformerStats) {
    let ns = cp.create_namespace("snapshot").await.unwrap();
    let api: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
    create_pods(&api, "p", count).await.unwrap();
    let dir = tempfile::tempdir().unwrap();

    let first = factory(cp, &ns, dir.path());
    let pods = first.informer::<Pod>();
    first.start().unwrap();
    assert!(first.wait_for_cache_sync(TIMEOUT).await.all_synced());
    first.shutdown().await.unwrap();
    let written = pods
        .stats()
        .snapshot
        .unwrap()
        .last_written
        .expect("written at shutdown");
    assert_eq!(written.objects, count);

    api.delete("p-0", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let patch = serde_json::json!({"metadata": {"labels": {"changed": "yes"}}});
    api.patch("p-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    api.create(&PostParams::default(), &pod("new"))
        .await
        .unwrap();
    between().await;

    let second = factory(cp, &ns, dir.path());
    let pods = second.informer::<Pod>();
    let heard = Heard::default();
    pods.add_event_handler(heard.clone()).unwrap();
    second.start().unwrap();
    assert!(second.wait_for_cache_sync(TIMEOUT).await.all_synced());
    eventually("the handler", TIMEOUT, || heard.sorted().len() >= 3).await;
    // The cache is the server's state, in full.
    let cached: BTreeMap<String, String> = pods
        .indexer()
        .list()
        .iter()
        .map(|p| {
            (
                p.object_name().unwrap().to_owned(),
                p.object_resource_version().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(cached, server_state(&api).await);
    let stats = pods.stats();
    second.shutdown().await.unwrap();
    (heard.sorted(), stats)
}

/// The handlers heard only the differences, after one list that a 410 made.
fn listed_once_after_a_410(heard: &[String], stats: &kinformer_informer_factory::InformerStats) {
    assert_eq!(heard, ["add new", "delete p-0 (tombstone)", "update p-1"]);
    assert_eq!(
        (stats.reflector.resumed, stats.reflector.resume_failures),
        (0, 1),
        "{stats:?}"
    );
    let expired = stats
        .reflector
        .lists
        .iter()
        .find(|(r, _)| *r == "expired")
        .map(|(_, n)| *n);
    assert_eq!(expired, Some(1), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule69_a_restart_inside_the_watch_window_resumes_without_a_list() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let (heard, stats) = restart(cp, 20, async || {}).await;
    assert_eq!(heard, ["add new", "delete p-0 (tombstone)", "update p-1"]);
    assert_eq!(
        (stats.reflector.resumed, stats.reflector.resume_failures),
        (1, 0),
        "{stats:?}"
    );
    let lists: u64 = stats.reflector.lists.iter().map(|(_, n)| n).sum();
    assert_eq!(lists, 0, "no list: {stats:?}");
    assert_eq!(stats.snapshot.unwrap().loaded.unwrap().objects, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule69_a_restart_past_a_compaction_lists_once_and_hands_on_only_the_differences() {
    // Without the watch cache a compacted version is a 410 for certain.
    let cp = crate::e2e::no_cache().await;
    let (heard, stats) = restart(cp, 20, async || {
        cp.compact_etcd().await.unwrap();
    })
    .await;
    listed_once_after_a_410(&heard, &stats);
}

/// With the watch cache on, a compacted version may still be in the cache's window; an API
/// server restart (its cache starts over) takes it out of both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule69_a_restart_past_a_compaction_and_an_api_server_restart_with_the_watch_cache() {
    let cp = ControlPlane::start_with(kinformer_testenv::Options::default())
        .await
        .expect("a control plane of its own: its API server restarts");
    let (heard, stats) = restart(&cp, 100, async || {
        cp.compact_etcd().await.unwrap();
        cp.stop_apiserver().unwrap();
        cp.start_apiserver().await.unwrap();
    })
    .await;
    // The restarted API server's watch cache starts past the snapshot's version: a 410.
    listed_once_after_a_410(&heard, &stats);
}
