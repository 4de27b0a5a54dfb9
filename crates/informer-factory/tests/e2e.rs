//! End-to-end: an informer on pods against the real etcd + kube-apiserver of
//! kinformer-testenv. Run with `cargo xtask test` (or `cargo test -p
//! kinformer-informer-factory -- --include-ignored` once the control plane is built).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{DeletedObject, deletion_handling_key};
use kinformer_indexer::parse_selector;
use kinformer_informer_factory::{FifoKind, ResourceEventHandler, SharedIndexInformer};
use kinformer_reflector::{KubeListerWatcher, reflector_client};
use kinformer_testenv::{ControlPlane, pod};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};

const TIMEOUT: Duration = Duration::from_secs(30);

/// Records notifications as `"add name initial"`, `"update name"`, `"delete name"`.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn get(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl ResourceEventHandler<Pod> for Log {
    fn on_add(&self, p: &Arc<Pod>, initial: bool) {
        let name = p.metadata.name.clone().unwrap_or_default();
        self.0.lock().unwrap().push(format!("add {name} {initial}"));
    }
    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        if old.metadata.resource_version != new.metadata.resource_version {
            let name = new.metadata.name.clone().unwrap_or_default();
            self.0.lock().unwrap().push(format!("update {name}"));
        }
    }
    fn on_delete(&self, p: &DeletedObject<Pod>) {
        let key = deletion_handling_key(p).unwrap();
        self.0
            .lock()
            .unwrap()
            .push(format!("delete {}", key.name()));
    }
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < TIMEOUT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_pod_informer_sees_add_update_delete_and_its_lister_serves_them() {
    let cp = ControlPlane::shared().await.expect("control plane");
    for kind in [FifoKind::DeltaFifo, FifoKind::InOrderAtomic] {
        let ns = cp.create_namespace("informer").await.unwrap();
        let client = reflector_client(cp.admin_config()).unwrap();
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        pods.create(&PostParams::default(), &pod("before"))
            .await
            .unwrap();

        let informer = SharedIndexInformer::builder(KubeListerWatcher::new(pods.clone()))
            .name("pods")
            .fifo(kind)
            .build();
        let log = Log::default();
        let reg = informer.add_event_handler(log.clone()).unwrap();
        let handle = informer.start().unwrap();
        eventually("the initial sync", || reg.has_synced()).await;
        assert_eq!(log.get(), ["add before true"], "{kind:?}");

        pods.create(&PostParams::default(), &pod("after"))
            .await
            .unwrap();
        let patch = serde_json::json!({ "metadata": { "labels": { "tier": "web" } } });
        pods.patch("after", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        pods.delete("before", &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
        eventually("the delete", || {
            log.get().iter().any(|e| e == "delete before")
        })
        .await;
        // A graceful delete may first show up as an update (deletionTimestamp set).
        let seen: Vec<String> = log
            .get()
            .into_iter()
            .filter(|e| e != "update before")
            .collect();
        assert_eq!(
            seen,
            [
                "add before true",
                "add after false",
                "update after",
                "delete before"
            ],
            "{kind:?}"
        );

        let lister = informer.lister();
        let after = lister.namespaced(&ns).get("after").unwrap();
        assert_eq!(
            after
                .metadata
                .labels
                .as_ref()
                .unwrap()
                .get("tier")
                .map(String::as_str),
            Some("web")
        );
        assert!(
            lister
                .namespaced(&ns)
                .get("before")
                .unwrap_err()
                .is_not_found()
        );
        let web = lister
            .namespaced(&ns)
            .list(&parse_selector("tier=web").unwrap());
        assert_eq!(web.len(), 1);
        assert!(Arc::ptr_eq(&web[0], &after));
        assert!(!informer.last_sync_resource_version().is_empty());
        handle.stop().await.unwrap();
    }
}
