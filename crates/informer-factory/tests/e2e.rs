//! End-to-end: an informer on pods against the real etcd + kube-apiserver of
//! kinformer-testenv. Run with `cargo xtask test` (or `cargo test -p
//! kinformer-informer-factory -- --include-ignored` once the control plane is built).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{DeletedObject, deletion_handling_key};
use kinformer_indexer::parse_selector;
use kinformer_informer_factory::{
    FifoKind, FilteringResourceEventHandler, ResourceEventHandler, ResourceEventHandlerFuncs,
    SharedIndexInformer,
};
use kinformer_kube::{KubeListerWatcher, reflector_client};
use kinformer_testenv::{ControlPlane, Options, create_pods, eventually, pod};
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
        let name = new.metadata.name.clone().unwrap_or_default();
        let what = if old.metadata.resource_version == new.metadata.resource_version {
            "resync"
        } else {
            "update"
        };
        self.0.lock().unwrap().push(format!("{what} {name}"));
    }
    fn on_delete(&self, p: &DeletedObject<Pod>) {
        let key = deletion_handling_key(p).unwrap();
        let tombstone = if p.tombstone().is_some() {
            " (tombstone)"
        } else {
            ""
        };
        self.0
            .lock()
            .unwrap()
            .push(format!("delete {}{tombstone}", key.name()));
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
        eventually("the initial sync", TIMEOUT, || reg.has_synced()).await;
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
        eventually("the delete", TIMEOUT, || {
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

// ------------------------------------------------------------------ rules 27-32, live

/// An informer on the pods of a fresh namespace of the shared control plane, with
/// `names` created before it starts.
async fn pod_informer(prefix: &str, names: &[&str]) -> (SharedIndexInformer<Pod>, Api<Pod>) {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace(prefix).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(reflector_client(cp.admin_config()).unwrap(), &ns);
    for name in names {
        pods.create(&PostParams::default(), &pod(name))
            .await
            .unwrap();
    }
    let informer = SharedIndexInformer::new(KubeListerWatcher::new(pods.clone()), Duration::ZERO);
    (informer, pods)
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule_27_live_a_late_handler_first_gets_the_cached_pods_as_initial_adds() {
    let (informer, pods) = pod_informer("late", &["a", "b", "c"]).await;
    let handle = informer.start().unwrap();
    eventually("the sync", TIMEOUT, || informer.has_synced()).await;
    let log = Log::default();
    let reg = informer.add_event_handler(log.clone()).unwrap();
    eventually("three initial adds", TIMEOUT, || log.get().len() == 3).await;
    assert_eq!(
        sorted(log.get()),
        ["add a true", "add b true", "add c true"]
    );
    assert!(reg.has_synced());
    pods.create(&PostParams::default(), &pod("d"))
        .await
        .unwrap();
    eventually("the live add", TIMEOUT, || log.get().len() == 4).await;
    assert_eq!(log.get()[3], "add d false");
    handle.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule_28_live_resync_reaches_only_the_handler_whose_period_is_due() {
    let (informer, pods) = pod_informer("resync", &["a"]).await;
    let every_second = Log::default();
    let never = Log::default();
    informer
        .add_event_handler_with_resync(every_second.clone(), Duration::from_secs(1))
        .unwrap();
    informer.add_event_handler(never.clone()).unwrap();
    let handle = informer.start().unwrap();
    eventually("two resyncs", TIMEOUT, || {
        every_second
            .get()
            .iter()
            .filter(|e| *e == "resync a")
            .count()
            >= 2
    })
    .await;
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "metadata": { "labels": { "x": "y" } } })),
    )
    .await
    .unwrap();
    eventually("the real update", TIMEOUT, || never.get().len() == 2).await;
    assert_eq!(
        never.get(),
        ["add a true", "update a"],
        "no resync without a period"
    );
    handle.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule_29_live_a_panicking_handler_keeps_its_listener_and_spares_the_others() {
    let (informer, pods) = pod_informer("panic", &["a"]).await;
    let calls = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&calls);
    let panicky = ResourceEventHandlerFuncs::<Pod>::new().add_func(move |_, _| {
        *counted.lock().unwrap() += 1;
        panic!("this handler panics on every add, on purpose");
    });
    let panicky_reg = informer.add_event_handler(panicky).unwrap();
    let calm = Log::default();
    informer.add_event_handler(calm.clone()).unwrap();
    let handle = informer.start().unwrap();
    pods.create(&PostParams::default(), &pod("b"))
        .await
        .unwrap();
    eventually("the calm handler's two adds", TIMEOUT, || {
        calm.get().len() == 2
    })
    .await;
    eventually(
        "the panicking handler called again after its panic",
        TIMEOUT,
        || *calls.lock().unwrap() == 2,
    )
    .await;
    assert!(panicky_reg.has_synced(), "a panic counts as handled");
    handle.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule_30_live_a_registration_syncs_once_its_handler_took_the_initial_adds() {
    let (informer, _pods) = pod_informer("synced", &["a", "b", "c"]).await;
    let slow = ResourceEventHandlerFuncs::<Pod>::new()
        .add_func(|_, _| std::thread::sleep(Duration::from_millis(500)));
    let reg = informer.add_event_handler(slow).unwrap();
    let handle = informer.start().unwrap();
    eventually("the informer's sync", TIMEOUT, || informer.has_synced()).await;
    assert!(!reg.has_synced(), "three 500 ms adds are not handled yet");
    eventually("the registration's sync", TIMEOUT, || reg.has_synced()).await;
    assert_eq!(reg.pending(), 0);
    handle.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule_31_live_configuration_after_start_and_handlers_after_stop_are_errors() {
    let (informer, _pods) = pod_informer("lifecycle", &[]).await;
    let reg = informer.add_event_handler(Log::default()).unwrap();
    let handle = informer.start().unwrap();
    assert!(matches!(
        informer.set_transform(Ok),
        Err(kinformer_informer_factory::Error::AlreadyStarted)
    ));
    assert!(matches!(
        informer.set_watch_error_handler(|_| {}),
        Err(kinformer_informer_factory::Error::AlreadyStarted)
    ));
    reg.remove();
    reg.remove(); // harmless
    assert_eq!(informer.handler_count(), 0);
    handle.stop().await.unwrap();
    assert!(matches!(
        informer.add_event_handler(Log::default()),
        Err(kinformer_informer_factory::Error::Stopped)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule_32_live_a_filtering_handler_turns_label_changes_into_adds_and_deletes() {
    let (informer, pods) = pod_informer("filter", &["a"]).await;
    let log = Log::default();
    let is_web = |p: &Pod| {
        p.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.get("app").is_some_and(|v| v == "web"))
    };
    informer
        .add_event_handler(FilteringResourceEventHandler::new(is_web, log.clone()))
        .unwrap();
    let handle = informer.start().unwrap();
    eventually("the sync", TIMEOUT, || informer.has_synced()).await;
    for app in ["web", "db"] {
        let patch = serde_json::json!({ "metadata": { "labels": { "app": app } } });
        pods.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    eventually("the add and the delete", TIMEOUT, || log.get().len() == 2).await;
    assert_eq!(log.get(), ["add a false", "delete a"]);
    handle.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn live_a_handler_sleeping_1s_per_event_does_not_delay_another() {
    let (informer, pods) = pod_informer("slow", &[]).await;
    let slow_calls = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&slow_calls);
    let slow = ResourceEventHandlerFuncs::<Pod>::new().add_func(move |_, _| {
        std::thread::sleep(Duration::from_secs(1));
        *counted.lock().unwrap() += 1;
    });
    let slow_reg = informer.add_event_handler(slow).unwrap();
    let fast = Log::default();
    informer.add_event_handler(fast.clone()).unwrap();
    let handle = informer.start().unwrap();
    eventually("the sync", TIMEOUT, || informer.has_synced()).await;
    let start = Instant::now();
    create_pods(&pods, "p", 10).await.unwrap();
    eventually("ten adds for the fast handler", TIMEOUT, || {
        fast.get().len() == 10
    })
    .await;
    let took = start.elapsed();
    // The slow one needs ten seconds for them; the fast one is not held back.
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(*slow_calls.lock().unwrap() < 10);
    assert!(
        slow_reg.pending() > 0,
        "the slow handler's buffer holds the rest"
    );
    handle.stop().await.unwrap();
}

// ------------------------------------------------------------------ tombstones

/// A control plane without the watch cache, so that a compacted resource version is a
/// deterministic 410 and the informer must relist.
pub(crate) async fn no_cache() -> &'static ControlPlane {
    static NO_CACHE: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();
    NO_CACHE
        .get_or_try_init(|| ControlPlane::start_with(Options::default().watch_cache(false)))
        .await
        .expect("start the no-cache control plane")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn deletes_missed_in_a_partition_with_compaction_reach_on_delete_as_tombstones() {
    let cp = no_cache().await;
    for kind in [
        FifoKind::DeltaFifo,
        FifoKind::InOrder,
        FifoKind::InOrderAtomic,
    ] {
        let ns = cp.create_namespace("tombstone").await.unwrap();
        let direct: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
        create_pods(&direct, "p", 3).await.unwrap();
        let proxy = cp.proxy().unwrap();
        let through: Api<Pod> =
            Api::namespaced(reflector_client(proxy.admin_config()).unwrap(), &ns);
        let informer = SharedIndexInformer::builder(KubeListerWatcher::new(through))
            .fifo(kind)
            .build();
        let log = Log::default();
        informer.add_event_handler(log.clone()).unwrap();
        let handle = informer.start().unwrap();
        eventually("the sync", TIMEOUT, || informer.has_synced()).await;

        proxy.partition();
        for name in ["p-0", "p-1"] {
            direct
                .delete(name, &DeleteParams::default().grace_period(0))
                .await
                .unwrap();
        }
        direct
            .create(&PostParams::default(), &pod("new"))
            .await
            .unwrap();
        cp.compact_etcd().await.unwrap();
        proxy.heal();

        eventually("the relist's deletes and add", TIMEOUT, || {
            log.get().len() == 6
        })
        .await;
        let seen = sorted(log.get());
        assert_eq!(
            seen,
            [
                "add new false",
                "add p-0 true",
                "add p-1 true",
                "add p-2 true",
                "delete p-0 (tombstone)",
                "delete p-1 (tombstone)",
            ],
            "{kind:?}"
        );
        let lister = informer.lister();
        assert!(
            lister
                .namespaced(&ns)
                .get("p-0")
                .unwrap_err()
                .is_not_found()
        );
        assert!(lister.namespaced(&ns).get("new").is_ok());
        handle.stop().await.unwrap();
    }
}

// ------------------------------------------------------------------ an undecodable object

/// The Rust type of a custom resource whose CRD keeps any fields: `replicas` must be a
/// number here, while the server accepts anything.
#[derive(kube::CustomResource, Clone, Debug, serde::Serialize, serde::Deserialize)]
#[kube(
    group = "undecodable.kinformer.dev",
    version = "v1",
    kind = "Gadget",
    namespaced,
    schema = "disabled"
)]
pub(crate) struct GadgetSpec {
    replicas: i32,
}

/// Writes gadget `name` with `replicas` as given (a number, or a string the Rust type
/// cannot read), creating it if needed, through the dynamic API.
async fn put_gadget(api: &Api<kube::api::DynamicObject>, name: &str, replicas: serde_json::Value) {
    let patch = serde_json::json!({
        "apiVersion": "undecodable.kinformer.dev/v1",
        "kind": "Gadget",
        "metadata": { "name": name },
        "spec": { "replicas": replicas },
    });
    api.patch(
        name,
        &PatchParams::apply("kinformer-test").force(),
        &Patch::Apply(&patch),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn one_undecodable_object_is_reported_and_the_rest_of_the_cache_stays_live() {
    let cp = no_cache().await;
    let admin = cp.client().unwrap();
    let ar = kinformer_testenv::create_crd(
        &admin,
        "undecodable.kinformer.dev",
        "Gadget",
        "gadgets",
        None,
    )
    .await
    .unwrap();
    // Every FIFO, and both ways to list: streaming (the default) and paged.
    for (kind, watch_list) in [
        (FifoKind::DeltaFifo, true),
        (FifoKind::InOrder, false),
        (FifoKind::InOrderAtomic, true),
        (FifoKind::InOrderAtomic, false),
    ] {
        let ns = cp.create_namespace("undecodable").await.unwrap();
        let direct = Api::<kube::api::DynamicObject>::namespaced_with(admin.clone(), &ns, &ar);
        put_gadget(&direct, "good-1", 1.into()).await;
        put_gadget(&direct, "good-2", 2.into()).await;
        put_gadget(&direct, "bad", "three".into()).await;

        let proxy = cp.proxy().unwrap();
        let through: Api<Gadget> =
            Api::namespaced(reflector_client(proxy.admin_config()).unwrap(), &ns);
        let informer = SharedIndexInformer::builder(KubeListerWatcher::new(through))
            .fifo(kind)
            .watch_list(watch_list)
            .build();
        let reported = Arc::new(Mutex::new(Vec::<String>::new()));
        informer
            .set_watch_error_handler({
                let reported = Arc::clone(&reported);
                move |e| {
                    if let kinformer_reflector::Error::Undecodable { object, deleted } = e {
                        reported
                            .lock()
                            .unwrap()
                            .push(format!("{} deleted={deleted}", object.key.name()));
                    }
                }
            })
            .unwrap();
        let deletes = Arc::new(Mutex::new(Vec::<String>::new()));
        informer
            .add_event_handler(ResourceEventHandlerFuncs::new().delete_func({
                let deletes = Arc::clone(&deletes);
                move |g: &DeletedObject<Gadget>| {
                    let key = deletion_handling_key(g).unwrap();
                    deletes.lock().unwrap().push(key.name().to_owned());
                }
            }))
            .unwrap();
        let handle = informer.start().unwrap();
        let replicas = |name: &str| {
            informer
                .indexer()
                .get_by_key(&format!("{ns}/{name}"))
                .map(|g| g.spec.replicas)
        };

        // The list syncs without the bad object, which is reported by its key.
        eventually("the sync", TIMEOUT, || informer.has_synced()).await;
        assert_eq!(
            (replicas("good-1"), replicas("good-2")),
            (Some(1), Some(2)),
            "{kind:?}"
        );
        assert_eq!(replicas("bad"), None);
        eventually("the report", TIMEOUT, || {
            !reported.lock().unwrap().is_empty()
        })
        .await;
        assert_eq!(reported.lock().unwrap()[0], "bad deleted=false");

        // The rest of the cache is live; a fixed object comes in.
        put_gadget(&direct, "good-1", 10.into()).await;
        put_gadget(&direct, "bad", 3.into()).await;
        eventually("the update and the fix", TIMEOUT, || {
            replicas("good-1") == Some(10) && replicas("bad") == Some(3)
        })
        .await;

        // Broken again: the cache keeps its last good version, also through a relist
        // (a partition during which etcd is compacted, so the watch answers 410).
        put_gadget(&direct, "bad", "four".into()).await;
        eventually("the second report", TIMEOUT, || {
            reported.lock().unwrap().len() >= 2
        })
        .await;
        proxy.partition();
        put_gadget(&direct, "good-2", 20.into()).await;
        cp.compact_etcd().await.unwrap();
        proxy.heal();
        eventually("the relist", TIMEOUT, || replicas("good-2") == Some(20)).await;
        assert_eq!(
            replicas("bad"),
            Some(3),
            "{kind:?}: kept through the relist"
        );
        assert!(
            deletes.lock().unwrap().is_empty(),
            "{kind:?}: no false delete"
        );

        // Deleted while broken: the cache follows, with a delete for the handlers.
        direct
            .delete("bad", &DeleteParams::default())
            .await
            .unwrap();
        eventually("the delete", TIMEOUT, || replicas("bad").is_none()).await;
        // Handlers run on their own thread, after the cache.
        eventually("the delete notification", TIMEOUT, || {
            !deletes.lock().unwrap().is_empty()
        })
        .await;
        assert_eq!(*deletes.lock().unwrap(), ["bad"], "{kind:?}");
        assert!(informer.stats().reflector.undecodable >= 3, "{kind:?}");
        assert!(
            reported
                .lock()
                .unwrap()
                .iter()
                .any(|r| r == "bad deleted=true"),
            "{kind:?}: {:?}",
            reported.lock().unwrap()
        );
        handle.stop().await.unwrap();
    }
}
