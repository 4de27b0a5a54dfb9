//! The cache-reading client on the real API server: reads from the informer's cache, writes
//! to the server, a status written as the difference (removals included) or not at all,
//! a read-change-write that survives a concurrent writer, and the easy errors.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_controller::client::{Client, ignore_not_found};
use kinformer_controller::controller::Context;
use kinformer_informer_factory::SharedInformerFactory;
use kinformer_kube::reflector_client;
use kinformer_testenv::{ControlPlane, eventually};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(30);

fn context() -> Context<()> {
    Context::new(Arc::new(()), CancellationToken::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_client_reads_the_cache_writes_the_server_and_names_the_easy_errors() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("client").await.unwrap();
    let kube = cp.client().unwrap();
    let factory = SharedInformerFactory::builder(reflector_client(cp.admin_config()).unwrap())
        .namespace(&ns)
        .build();
    let informer = factory.informer::<ConfigMap>();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync(TIMEOUT).await.all_synced());
    let config_maps: Client<ConfigMap> = Client::new(kube.clone(), &informer);
    let ctx = context();

    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("settings".into());
    cm.metadata.namespace = Some(ns.clone());
    cm.data = Some([("mode".to_owned(), "a".to_owned())].into());
    let created = config_maps.create(&ctx, &cm).await.unwrap();
    let again = config_maps.create(&ctx, &cm).await.unwrap_err();
    assert!(again.is_already_exists() && !again.is_conflict(), "{again}");
    eventually("the cache to have it", TIMEOUT, || {
        config_maps.get(&ns, "settings").is_some()
    })
    .await;
    // From the cache, in place: the view reads the data without decoding.
    let cached = config_maps.get(&ns, "settings").unwrap();
    assert_eq!(cached.data().and_then(|d| d.get("mode")), Some("a"));
    assert_eq!(
        config_maps
            .list(&ns, &kinformer_indexer::everything())
            .len(),
        1
    );

    // An update at a stale version is a conflict; `update_with` reads again and wins.
    let mut stale = created.clone();
    let direct: Api<ConfigMap> = Api::namespaced(kube.clone(), &ns);
    let patch = json!({"data": {"other": "writer"}});
    direct
        .patch("settings", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    stale.data = Some([("mode".to_owned(), "b".to_owned())].into());
    let conflict = config_maps.update(&ctx, &stale).await.unwrap_err();
    assert!(conflict.is_conflict(), "{conflict}");

    // A writer that gets in between the read and the write, once: the change is made again
    // on the newest object, and both writes survive.
    let attempts = AtomicUsize::new(0);
    let (interloper, name) = (direct.clone(), "settings");
    let updated = config_maps
        .update_with(&ctx, &ns, name, |cm| {
            if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                let patch = json!({"data": {"interloper": "was here"}});
                tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(interloper.patch(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    ))
                })
                .unwrap();
            }
            cm.data
                .get_or_insert_with(Default::default)
                .insert("mode".into(), "c".into());
        })
        .await
        .unwrap();
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        2,
        "one conflict, one retry"
    );
    let data = updated.data.unwrap();
    assert_eq!(data.get("mode").map(String::as_str), Some("c"));
    assert_eq!(data.get("interloper").map(String::as_str), Some("was here"));
    assert_eq!(data.get("other").map(String::as_str), Some("writer"));

    // Deleting twice: the second is a "not found", which `ignore_not_found` makes nothing.
    config_maps.delete(&ctx, &ns, "settings").await.unwrap();
    let gone = config_maps.delete(&ctx, &ns, "settings").await;
    assert!(matches!(ignore_not_found(gone), Ok(None)));
    eventually("the cache to drop it", TIMEOUT, || {
        config_maps.get(&ns, "settings").is_none()
    })
    .await;
    factory.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn write_status_sends_the_difference_removals_as_null_and_nothing_when_unchanged() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("status").await.unwrap();
    let kube = cp.client().unwrap();
    let factory = SharedInformerFactory::builder(reflector_client(cp.admin_config()).unwrap())
        .namespace(&ns)
        .build();
    let informer = factory.informer::<Pod>();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync(TIMEOUT).await.all_synced());
    let pods: Client<Pod> = Client::new(kube.clone(), &informer);
    let ctx = context();

    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    }))
    .unwrap();
    let direct: Api<Pod> = Api::namespaced(kube, &ns);
    direct.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({"status": {"message": "starting", "reason": "Init", "phase": "Pending"}});
    direct
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    eventually("the cache to show the status", TIMEOUT, || {
        pods.get(&ns, "web")
            .and_then(|p| p.status().and_then(|s| s.message().map(str::to_owned)))
            .is_some()
    })
    .await;

    let before = pods.get_object(&ns, "web").unwrap().unwrap();
    assert_eq!(
        pods.write_status(&ctx, &before, &before).await.unwrap(),
        None,
        "nothing changed: nothing sent"
    );
    let mut after = before.clone();
    let s = after.status.as_mut().unwrap();
    s.message = None; // removed: must not survive on the server
    s.reason = Some("Scheduled".into());
    let written = pods
        .write_status(&ctx, &before, &after)
        .await
        .unwrap()
        .expect("a change: sent");
    let status = written.status.unwrap();
    assert_eq!(status.message, None, "the removal was sent as null");
    assert_eq!(status.reason.as_deref(), Some("Scheduled"));
    assert_eq!(
        status.phase.as_deref(),
        Some("Pending"),
        "untouched fields stay"
    );
    factory.shutdown().await.unwrap();
}

/// controller-runtime v0.25's read-your-writes `List`: `caught_up` waits until the cache has
/// every write made through the client, whatever its key; with the informer's watch cut, it
/// says no within its bound, and yes once the watch is back, when the list shows them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn caught_up_waits_for_every_write_made_through_the_client() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("caught-up").await.unwrap();
    let proxy = cp.proxy().unwrap();
    let factory = SharedInformerFactory::builder(reflector_client(proxy.admin_config()).unwrap())
        .namespace(&ns)
        .build();
    let informer = factory.informer::<ConfigMap>();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync(TIMEOUT).await.all_synced());
    // Writes go straight to the server; the cache's watch goes through the proxy.
    let config_maps: Client<ConfigMap> = Client::new(cp.client().unwrap(), &informer);
    assert!(
        config_maps.caught_up(Duration::ZERO).await,
        "nothing written yet"
    );

    proxy.partition();
    let ctx = context();
    for name in ["a", "b", "c"] {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some(ns.clone());
        config_maps.create(&ctx, &cm).await.unwrap();
    }
    assert!(
        !config_maps.caught_up(Duration::from_millis(300)).await,
        "the cache cannot have them: its watch is cut"
    );
    proxy.heal();
    assert!(config_maps.caught_up(TIMEOUT).await, "the watch is back");
    let everything = kinformer_indexer::everything();
    assert_eq!(
        config_maps.list(&ns, &everything).len(),
        3,
        "the list shows every write"
    );
    factory.shutdown().await.unwrap();
}
