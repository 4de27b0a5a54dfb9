//! The controller kit on the real etcd + kube-apiserver of kinformer-testenv: owner
//! mapping (tombstones after a partition and a compaction included), finalizers (a deletion
//! while the controller is down included, and a stale cache refused), predicates that skip
//! status-only updates. Run with `cargo xtask test`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_controller::controller::{Action, Context, Controller};
use kinformer_controller::finalizer::{FinalizerError, FinalizerEvent, finalizer};
use kinformer_controller::owner::controller_ref;
use kinformer_controller::predicates;
use kinformer_core::{DeletedObject, ObjectKey};
use kinformer_indexer::Lister;
use kinformer_informer_factory::{InformerHandle, ResourceEventHandlerFuncs, SharedIndexInformer};
use kinformer_kube::{KubeListerWatcher, reflector_client};
use kinformer_testenv::{ControlPlane, Options, eventually, eventually_async, pod};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Lines appended by handlers and reconciles, in order.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }
    fn get(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    fn count(&self, line: &str) -> usize {
        self.get().iter().filter(|l| *l == line).count()
    }
}

/// A controller that logs `reconcile <key>` and does nothing else.
fn run_logging(
    controller: Controller<ObjectKey>,
    log: &Log,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        |key: ObjectKey, log: Context<Log>| async move {
            log.push(format!("reconcile {key}"));
            Ok::<_, std::convert::Infallible>(Action::Done)
        },
        log.clone(),
        cancel.clone(),
    ));
    (cancel, run)
}

async fn no_cache() -> &'static ControlPlane {
    static NO_CACHE: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();
    NO_CACHE
        .get_or_try_init(|| ControlPlane::start_with(Options::default().watch_cache(false)))
        .await
        .expect("start the no-cache control plane")
}

fn owned_by(name: &str, owner: &ConfigMap) -> Pod {
    let mut p = pod(name);
    let reference = controller_ref(owner).expect("the owner was created: it has a uid");
    p.metadata.owner_references = Some(vec![reference]);
    p
}

fn config_map(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn owns_maps_child_events_to_the_owner_tombstones_included() {
    let cp = no_cache().await;
    let ns = cp.create_namespace("owns").await.unwrap();
    let direct = cp.client().unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(direct.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(direct, &ns);
    let parent = cms
        .create(&PostParams::default(), &config_map("parent"))
        .await
        .unwrap();
    for name in ["child-0", "child-1"] {
        pods.create(&PostParams::default(), &owned_by(name, &parent))
            .await
            .unwrap();
    }
    pods.create(&PostParams::default(), &pod("orphan"))
        .await
        .unwrap();
    // Controlled by a `parent` of another uid: one deleted before this one was created.
    let mut earlier = parent.clone();
    earlier.metadata.uid = Some("00000000-0000-0000-0000-000000000001".into());
    pods.create(&PostParams::default(), &owned_by("stale", &earlier))
        .await
        .unwrap();

    // The informer reaches the server through a proxy the test can cut.
    let proxy = cp.proxy().unwrap();
    let through: Api<Pod> = Api::namespaced(reflector_client(proxy.admin_config()).unwrap(), &ns);
    let informer = SharedIndexInformer::builder(KubeListerWatcher::new(through)).build();
    let log = Log::default();
    informer
        .add_event_handler(ResourceEventHandlerFuncs::new().delete_func({
            let log = log.clone();
            move |obj: &DeletedObject<Pod>| {
                let name = obj.object().metadata.name.clone().unwrap_or_default();
                let how = if obj.tombstone().is_some() {
                    "tombstone"
                } else {
                    "event"
                };
                log.push(format!("delete {name} ({how})"));
            }
        }))
        .unwrap();
    // The owners' cache: `owns` enqueues only owners it holds.
    let owners = SharedIndexInformer::builder(KubeListerWatcher::new(cms.clone())).build();
    let controller = Controller::<ObjectKey>::new("owns-test");
    controller.watch(&owners).unwrap();
    controller.owns::<ConfigMap, Pod>(&informer).unwrap();
    let owners_handle = owners.start().unwrap();
    let handle = informer.start().unwrap();
    let (cancel, run) = run_logging(controller, &log);
    let parent_key = format!("reconcile {ns}/parent");
    eventually("the owner reconciled for its children", TIMEOUT, || {
        log.count(&parent_key) >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after_sync = log.count(&parent_key);

    // A child edited: its owner is reconciled.
    let label = Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}}));
    pods.patch("child-0", &PatchParams::default(), &label)
        .await
        .unwrap();
    eventually("the owner reconciled for the edit", TIMEOUT, || {
        log.count(&parent_key) > after_sync
    })
    .await;
    let after_edit = log.count(&parent_key);

    // A child deleted while the informer is cut off, and etcd compacted: the relist finds
    // it gone, the tombstone maps to the owner.
    proxy.partition();
    pods.delete("child-1", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    cp.compact_etcd().await.unwrap();
    proxy.heal();
    eventually("the tombstone", TIMEOUT, || {
        log.count("delete child-1 (tombstone)") == 1
    })
    .await;
    eventually("the owner reconciled for the tombstone", TIMEOUT, || {
        log.count(&parent_key) > after_edit
    })
    .await;

    // An object without an owner reference never reconciles anything, nor does one whose
    // owner has the name of a cached one but another uid.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after_tombstone = log.count(&parent_key);
    for name in ["orphan", "stale"] {
        pods.patch(name, &PatchParams::default(), &label)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        log.count(&parent_key),
        after_tombstone,
        "the stale child did not reconcile the new parent"
    );
    assert!(
        log.get()
            .iter()
            .all(|l| !l.starts_with("reconcile") || *l == parent_key),
        "only the owner is reconciled: {:?}",
        log.get()
    );
    cancel.cancel();
    run.await.unwrap();
    handle.stop().await.unwrap();
    owners_handle.stop().await.unwrap();
}

const FINALIZER: &str = "kinformer.dev/cleanup";

/// What the finalizer test's reconcile needs.
struct FinalizerCtx {
    api: Api<ConfigMap>,
    cache: Lister<ConfigMap>,
    log: Log,
}

async fn reconcile_with_finalizer(
    key: ObjectKey,
    ctx: Context<FinalizerCtx>,
) -> Result<Action, FinalizerError<std::convert::Infallible>> {
    let ns = key.namespace().unwrap_or_default();
    let Ok(cm) = ctx.cache.namespaced(ns).get(key.name()) else {
        return Ok(Action::Done);
    };
    let log = ctx.log.clone();
    finalizer(&ctx.api, FINALIZER, cm, |event| async move {
        match event {
            FinalizerEvent::Apply(cm) => log.push(format!(
                "apply {}",
                cm.metadata.name.clone().unwrap_or_default()
            )),
            FinalizerEvent::Cleanup(cm) => log.push(format!(
                "cleanup {}",
                cm.metadata.name.clone().unwrap_or_default()
            )),
        }
        Ok(Action::Done)
    })
    .await
}

/// An informer and a controller over the ConfigMaps of `ns`, with the finalizer.
fn start_finalizing(
    client: &kube::Client,
    ns: &str,
    log: &Log,
) -> (
    InformerHandle,
    CancellationToken,
    tokio::task::JoinHandle<()>,
) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let informer = SharedIndexInformer::builder(KubeListerWatcher::new(api.clone())).build();
    let controller = Controller::<ObjectKey>::new("finalizer-test");
    controller.watch(&informer).unwrap();
    let ctx = FinalizerCtx {
        api,
        cache: informer.lister(),
        log: log.clone(),
    };
    let handle = informer.start().unwrap();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(reconcile_with_finalizer, ctx, cancel.clone()));
    (handle, cancel, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_finalizer_is_added_then_cleans_up_even_after_a_deletion_while_the_controller_was_down() {
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("finalizer").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let log = Log::default();

    let (handle, cancel, run) = start_finalizing(&client, &ns, &log);
    cms.create(&PostParams::default(), &config_map("guarded"))
        .await
        .unwrap();
    eventually("the apply", TIMEOUT, || log.count("apply guarded") >= 1).await;
    let on_server = cms.get("guarded").await.unwrap();
    assert_eq!(
        on_server.metadata.finalizers.as_deref(),
        Some(&[FINALIZER.to_owned()][..])
    );
    cancel.cancel();
    run.await.unwrap();
    handle.stop().await.unwrap();

    // Deleted while no controller runs: the finalizer holds it.
    cms.delete("guarded", &DeleteParams::default())
        .await
        .unwrap();
    let held = cms.get("guarded").await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "terminating, not gone"
    );

    let (handle, cancel, run) = start_finalizing(&client, &ns, &log);
    eventually("the cleanup", TIMEOUT, || log.count("cleanup guarded") == 1).await;
    eventually_async("the object to be deleted", TIMEOUT, || async {
        cms.get_opt("guarded").await.unwrap().is_none()
    })
    .await;
    // (An apply may run in between: a list served from the watch cache can predate the
    // deletion. What matters is that the cleanup ran once and the object went.)
    assert_eq!(log.count("cleanup guarded"), 1);
    cancel.cancel();
    run.await.unwrap();
    handle.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_finalizer_write_from_a_stale_cache_is_refused() {
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("stale").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cp.client().unwrap(), &ns);
    let stale = cms
        .create(&PostParams::default(), &config_map("c"))
        .await
        .unwrap();
    // Someone else adds a finalizer after our cache saw the object.
    let theirs = Patch::Merge(json!({"metadata": {"finalizers": ["someone.else/keep"]}}));
    cms.patch("c", &PatchParams::default(), &theirs)
        .await
        .unwrap();

    let called = Arc::new(Mutex::new(false));
    let result = finalizer(&cms, FINALIZER, Arc::new(stale), |_| {
        let called = Arc::clone(&called);
        async move {
            *called.lock().unwrap() = true;
            Ok::<_, std::convert::Infallible>(Action::Done)
        }
    })
    .await;
    assert!(matches!(result, Err(FinalizerError::Add(_))), "{result:?}");
    assert!(
        !*called.lock().unwrap(),
        "no reconcile before the finalizer is in place"
    );
    let now = cms.get("c").await.unwrap();
    assert_eq!(
        now.metadata.finalizers.as_deref(),
        Some(&["someone.else/keep".to_owned()][..]),
        "theirs kept, ours not added over it"
    );
    // With the current object the finalizer goes in next to theirs, and the apply runs
    // at once, on the object as written.
    let current = Arc::new(now);
    let applied_with = Arc::new(Mutex::new(None));
    let added = finalizer(&cms, FINALIZER, current, |event| {
        let applied_with = Arc::clone(&applied_with);
        async move {
            match event {
                FinalizerEvent::Apply(cm) => {
                    *applied_with.lock().unwrap() = cm.metadata.finalizers.clone();
                    Ok(Action::Done)
                }
                FinalizerEvent::Cleanup(_) => Err("not being deleted"),
            }
        }
    })
    .await;
    assert!(added.is_ok(), "{added:?}");
    assert_eq!(
        applied_with.lock().unwrap().clone().unwrap_or_default(),
        ["someone.else/keep", FINALIZER],
        "applied at once, on the object as written"
    );
    let now = cms.get("c").await.unwrap();
    assert_eq!(
        now.metadata.finalizers.unwrap_or_default(),
        ["someone.else/keep", FINALIZER]
    );
    let release = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    cms.patch("c", &PatchParams::default(), &release)
        .await
        .unwrap();
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx"}]}
            }
        }
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn generation_changed_skips_status_only_updates() {
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("predicates").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client, &ns);
    deployments
        .create(&PostParams::default(), &deployment("web"))
        .await
        .unwrap();

    let informer =
        SharedIndexInformer::builder(KubeListerWatcher::new(deployments.clone())).build();
    let log = Log::default();
    informer
        .add_event_handler(ResourceEventHandlerFuncs::new().update_func({
            let log = log.clone();
            move |_: &Arc<Deployment>, _: &Arc<Deployment>| log.push("update seen".into())
        }))
        .unwrap();
    let controller = Controller::<ObjectKey>::new("predicate-test");
    controller
        .watch_with(&informer, predicates::generation_changed())
        .unwrap();
    let handle = informer.start().unwrap();
    let (cancel, run) = run_logging(controller, &log);
    let key = format!("reconcile {ns}/web");
    eventually("the initial reconcile", TIMEOUT, || log.count(&key) == 1).await;

    let status = Patch::Merge(json!({"status": {"observedGeneration": 1, "replicas": 0}}));
    deployments
        .patch_status("web", &PatchParams::default(), &status)
        .await
        .unwrap();
    eventually("the status update at the informer", TIMEOUT, || {
        log.count("update seen") == 1
    })
    .await;
    let spec = Patch::Merge(json!({"spec": {"replicas": 3}}));
    deployments
        .patch("web", &PatchParams::default(), &spec)
        .await
        .unwrap();
    eventually("the spec update at the informer", TIMEOUT, || {
        log.count("update seen") == 2
    })
    .await;
    eventually("the spec change reconciled", TIMEOUT, || {
        log.count(&key) == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        log.count(&key),
        2,
        "the status-only update was skipped: {:?}",
        log.get()
    );
    cancel.cancel();
    run.await.unwrap();
    handle.stop().await.unwrap();
}
