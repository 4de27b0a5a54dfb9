//! End-to-end: the factory's default pod informer, whose cache keeps `Cached` pods, against
//! the real etcd + kube-apiserver of kinformer-testenv. Run with `cargo xtask test` (or
//! `cargo test -p kinformer-compact-store -- --include-ignored` once the control plane is
//! built).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_compact_store::Cached;
use kinformer_core::{DeletedObject, MetaObject, deletion_handling_key};
use kinformer_indexer::{IndexFunc, Lister, parse_selector};
use kinformer_informer_factory::{
    ResourceEventHandler, SharedIndexInformer, SharedInformerFactory,
};
use kinformer_kube::{KubeListerWatcher, reflector_client};
use kinformer_testenv::{ControlPlane, create_pods, eventually};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};

const TIMEOUT: Duration = Duration::from_secs(30);

/// Records notifications as `"add name"`, `"update name tier"`, `"delete name"`, reading
/// the cached pods through their views.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn get(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

fn name(p: &Cached<Pod>) -> String {
    p.metadata().name().unwrap_or_default().to_owned()
}

impl ResourceEventHandler<Cached<Pod>> for Log {
    fn on_add(&self, p: &Arc<Cached<Pod>>, _initial: bool) {
        self.0.lock().unwrap().push(format!("add {}", name(p)));
    }
    fn on_update(&self, old: &Arc<Cached<Pod>>, new: &Arc<Cached<Pod>>) {
        let tier = |p: &Cached<Pod>| {
            let labels = p.metadata().labels();
            labels.and_then(|l| l.get("tier")).unwrap_or("-").to_owned()
        };
        // The old object is the one the cache held: the version before.
        self.0
            .lock()
            .unwrap()
            .push(format!("update {} {}->{}", name(new), tier(old), tier(new)));
    }
    fn on_delete(&self, p: &DeletedObject<Cached<Pod>>) {
        let key = deletion_handling_key(p).unwrap();
        self.0
            .lock()
            .unwrap()
            .push(format!("delete {}", key.name()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_factory_informer_of_cached_pods_syncs_serves_listers_and_indices_and_delivers_events()
{
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("compact").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_pods(&pods, "before", 20).await.unwrap();

    let factory = SharedInformerFactory::builder(client)
        .namespace(ns.clone())
        .transform_meta(|m| m.managed_fields = None)
        .build();
    let informer = factory.informer::<Pod>();
    // An index function reading the node through the view, added before start.
    let mut by_node = kinformer_indexer::Indexers::new();
    by_node.insert(
        "byNode".into(),
        IndexFunc::single(|p: &Cached<Pod>| p.spec()?.node_name()),
    );
    informer.add_indexers(by_node).unwrap();
    let log = Log::default();
    informer.add_event_handler(log.clone()).unwrap();
    factory.start().unwrap();
    let report = factory.wait_for_cache_sync(TIMEOUT).await;
    assert!(report.all_synced(), "{report}");

    // Synced: every pod added, once, and in the cache. The cache is synced when the informer
    // has applied the list; the handler gets its adds from its own listener, soon after.
    eventually("the handler got the initial adds", TIMEOUT, || {
        log.get().len() >= 20
    })
    .await;
    let mut adds = log.get();
    adds.sort();
    let mut want: Vec<String> = (0..20).map(|i| format!("add before-{i}")).collect();
    want.sort();
    assert_eq!(adds, want);
    assert_eq!(informer.indexer().len(), 20);

    // Watch events: an update, a delete, a new pod on a node (pods can be created bound).
    let patch = serde_json::json!({ "metadata": { "labels": { "tier": "web" } } });
    pods.patch("before-3", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    pods.delete("before-4", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let mut bound = kinformer_testenv::pod("bound");
    if let Some(spec) = bound.spec.as_mut() {
        spec.node_name = Some("node-1".into());
    }
    pods.create(&Default::default(), &bound).await.unwrap();
    eventually("the update, the delete and the add", TIMEOUT, || {
        let l = log.get();
        l.contains(&"update before-3 -->web".to_string())
            && l.contains(&"delete before-4".to_string())
            && l.contains(&"add bound".to_string())
    })
    .await;

    // Listers and indices hand out the cached pods.
    let lister = informer.lister();
    let in_ns = lister.namespaced(&ns);
    let p3 = in_ns.get("before-3").unwrap();
    assert_eq!(
        p3.metadata().labels().and_then(|l| l.get("tier")),
        Some("web")
    );
    assert!(
        p3.metadata().managed_fields().is_none(),
        "the transform ran"
    );
    // Two reads hand out one allocation, as client-go hands out its cached pointer.
    assert!(Arc::ptr_eq(&p3, &in_ns.get("before-3").unwrap()));
    assert_eq!(
        p3.decode().unwrap(),
        pods.get("before-3")
            .await
            .map(|mut p| {
                p.metadata.managed_fields = None;
                p
            })
            .unwrap()
    );
    assert!(in_ns.get("before-4").unwrap_err().is_not_found());
    assert_eq!(in_ns.list(&parse_selector("tier=web").unwrap()).len(), 1);
    let all = in_ns.list(&parse_selector("app=kinformer").unwrap());
    assert_eq!(all.len(), 20);
    let on_node = informer.indexer().by_index("byNode", "node-1").unwrap();
    assert_eq!(
        on_node.iter().map(|p| name(p)).collect::<Vec<_>>(),
        ["bound"]
    );
    assert_eq!(
        informer
            .indexer()
            .index_keys("namespace", &ns)
            .unwrap()
            .len(),
        20
    );
    // Pods with the same labels share one copy of them.
    let labels = |n: &str| in_ns.get(n).unwrap();
    let (a, b) = (labels("before-0"), labels("before-1"));
    assert!(std::ptr::eq(
        a.object_labels().unwrap(),
        b.object_labels().unwrap()
    ));

    factory.shutdown().await.unwrap();
}

/// A projection of a pod, as the facade's docs show it: metadata, node, containers' names
/// and images, phase.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize, kube::Resource)]
#[resource(inherit = Pod)]
struct PodView {
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: Option<PodViewSpec>,
    status: Option<PodViewStatus>,
}

#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct PodViewSpec {
    node_name: Option<String>,
    #[serde(default)]
    containers: Vec<ContainerView>,
}

#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
struct ContainerView {
    name: String,
    image: Option<String>,
}

#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
struct PodViewStatus {
    phase: Option<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_projection_is_the_informers_type_cached_or_decoded_in_either_wire_format() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("projection").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_pods(&pods, "p", 5).await.unwrap();

    for wire in [
        kinformer_kube::WireFormat::Auto,
        kinformer_kube::WireFormat::Json,
    ] {
        let factory = SharedInformerFactory::builder(client.clone())
            .namespace(ns.clone())
            .wire_format(wire)
            .build();
        let cached = factory.informer::<PodView>();
        let decoded = factory.decoded_informer::<PodView>();
        factory.start().unwrap();
        let report = factory.wait_for_cache_sync(TIMEOUT).await;
        assert!(report.all_synced(), "{wire:?}: {report}");

        let cached: Lister<Cached<PodView>> = cached.lister();
        let decoded: Lister<PodView> = decoded.lister();
        let from_cache = cached.namespaced(&ns).get("p-0").unwrap();
        // A custom type reads its metadata and fields by name, or decodes.
        assert_eq!(from_cache.meta().name(), Some("p-0"));
        let phase = from_cache
            .object()
            .get("status")
            .and_then(|s| s.get("phase"));
        assert_eq!(phase.and_then(|p| p.as_str()), Some("Pending"));
        for p0 in [
            from_cache.decode().unwrap(),
            (*decoded.namespaced(&ns).get("p-0").unwrap()).clone(),
        ] {
            let spec = p0.spec.as_ref().unwrap();
            assert_eq!(spec.containers.len(), 1);
            assert_eq!(spec.containers[0].name, "c");
            assert_eq!(spec.containers[0].image.as_deref(), Some("busybox"));
            assert_eq!(
                p0.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Pending"),
                "{wire:?}"
            );
        }
        let selector = parse_selector("app=kinformer").unwrap();
        assert_eq!(cached.list(&selector).len(), 5);
        assert_eq!(decoded.list(&selector).len(), 5);
        factory.shutdown().await.unwrap();
    }
}

/// Pods that count how often one is decoded (by serde: protobuf into a `Pod`, JSON, or the
/// store's encoding), in counter `C` (one per test: tests run at the same time).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(transparent)]
struct CountedPod<const C: usize = 0>(Pod);

static DECODED: [std::sync::atomic::AtomicUsize; 3] = [
    std::sync::atomic::AtomicUsize::new(0),
    std::sync::atomic::AtomicUsize::new(0),
    std::sync::atomic::AtomicUsize::new(0),
];

impl<'de, const C: usize> serde::Deserialize<'de> for CountedPod<C> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        DECODED[C].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Pod::deserialize(d).map(CountedPod)
    }
}

impl<const C: usize> k8s_openapi::Resource for CountedPod<C> {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl<const C: usize> k8s_openapi::Metadata for CountedPod<C> {
    type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    fn metadata(&self) -> &Self::Ty {
        &self.0.metadata
    }
    fn metadata_mut(&mut self) -> &mut Self::Ty {
        &mut self.0.metadata
    }
}

fn decoded() -> usize {
    DECODED[0].load(std::sync::atomic::Ordering::SeqCst)
}

/// `modify` given before `cached()`: every cached pod changed, and in protobuf decoded once
/// (not transcoded, then decoded again to be changed); a JSON pod is decoded into the
/// cache, then decoded, changed and encoded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn modify_before_cached_changes_every_object_and_decodes_a_protobuf_one_once() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("modify-cached").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    create_pods(&Api::<Pod>::namespaced(client.clone(), &ns), "m", 6)
        .await
        .unwrap();
    let counted = || DECODED[1].load(std::sync::atomic::Ordering::SeqCst);
    for (wire, decodes_per_pod) in [
        (kinformer_kube::WireFormat::Auto, 1),
        (kinformer_kube::WireFormat::Json, 2),
    ] {
        let api: Api<CountedPod<1>> = Api::namespaced(client.clone(), &ns);
        let lw = KubeListerWatcher::new(api)
            .wire_format(wire)
            .modify(|p: &mut CountedPod<1>| p.0.metadata.managed_fields = None)
            .cached();
        let before = counted();
        let informer = SharedIndexInformer::builder(lw).build();
        let handle = informer.start().unwrap();
        eventually("the informer synced", TIMEOUT, || informer.has_synced()).await;
        assert_eq!(counted() - before, 6 * decodes_per_pod, "{wire:?}");
        let all = informer.lister().list(&parse_selector("").unwrap());
        assert_eq!(all.len(), 6, "{wire:?}");
        for p in all {
            assert!(
                p.meta().managed_fields().is_none(),
                "{wire:?}: {:?}",
                p.meta().name()
            );
        }
        handle.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_default_informer_transcodes_from_protobuf_and_builds_no_object_for_handlers_or_readers()
 {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("default-cache").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_pods(&pods, "d", 12).await.unwrap();

    // What the factory builds: a Kubernetes lister-watcher of cached objects (protobuf for
    // pods), the default store and FIFO.
    let counted: Api<CountedPod> = Api::namespaced(client, &ns);
    let informer = SharedIndexInformer::builder(KubeListerWatcher::new(counted).cached()).build();
    let updates = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&updates);
    let adds = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let added = Arc::clone(&adds);
    // A handler of every kind, reading what it needs in place.
    informer
        .add_event_handler(
            kinformer_informer_factory::ResourceEventHandlerFuncs::new()
                .add_func(move |p: &Arc<Cached<CountedPod>>, _| {
                    assert!(p.meta().name().is_some_and(|n| n.starts_with("d-")));
                    added.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                })
                .update_func(move |_old, new: &Arc<Cached<CountedPod>>| {
                    let tier = new.meta().labels().and_then(|l| l.get("tier"));
                    seen.lock()
                        .unwrap()
                        .push(tier.unwrap_or_default().to_owned());
                }),
        )
        .unwrap();
    let before = decoded();
    let _handle = informer.start().unwrap();
    eventually("the informer synced", TIMEOUT, || informer.has_synced()).await;
    eventually("the initial adds", TIMEOUT, || {
        adds.load(std::sync::atomic::Ordering::SeqCst) == 12
    })
    .await;
    assert_eq!(informer.stats().objects, 12);
    assert_eq!(decoded() - before, 0, "pods decoded during the sync");

    // Selectors, keys, the namespace index and reads through views build nothing; a decode
    // gives what the API server serves.
    let lister = informer.lister();
    assert_eq!(
        lister.list(&parse_selector("app=kinformer").unwrap()).len(),
        12
    );
    let one = lister.namespaced(&ns).get("d-3").unwrap();
    assert_eq!(one.meta().name(), Some("d-3"));
    assert_eq!(decoded() - before, 0, "pods decoded by reads");
    assert_eq!(one.decode().unwrap().0, pods.get("d-3").await.unwrap());
    assert_eq!(decoded() - before, 1);

    // A watch event: transcoded, read in place by the update handler.
    let patch = serde_json::json!({ "metadata": { "labels": { "tier": "web" } } });
    let patched = pods
        .patch("d-5", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("the update", TIMEOUT, || {
        updates.lock().unwrap().contains(&"web".to_string())
    })
    .await;
    assert_eq!(decoded() - before, 1, "pods decoded by the watch");
    let d5 = lister.namespaced(&ns).get("d-5").unwrap();
    assert_eq!(
        d5.object_resource_version(),
        patched.metadata.resource_version.as_deref()
    );
    assert_eq!(d5.decode().unwrap().0, patched);
}

/// A decorator a user writes around the default lister-watcher (counting calls, as a
/// metrics or recording wrapper would): every method forwarded, nothing else known.
struct CountingCalls<L> {
    inner: L,
    lists: std::sync::atomic::AtomicUsize,
    streaming_watches: std::sync::atomic::AtomicUsize,
}

impl<K, L: kinformer_reflector::ListerWatcher<K>> kinformer_reflector::ListerWatcher<K>
    for CountingCalls<L>
{
    fn list<'a>(
        &'a self,
        options: &'a kinformer_reflector::ListOptions,
    ) -> kinformer_reflector::BoxFuture<
        'a,
        Result<kinformer_reflector::ListPage<K>, kinformer_reflector::Error>,
    > {
        self.lists.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.list(options)
    }
    fn watch<'a>(
        &'a self,
        options: &'a kinformer_reflector::WatchOptions,
    ) -> kinformer_reflector::BoxFuture<
        'a,
        Result<kinformer_reflector::WatchStream<K>, kinformer_reflector::Error>,
    > {
        if options.send_initial_events {
            self.streaming_watches
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.inner.watch(options)
    }
    kinformer_reflector::forward_lister_watcher!(K, inner: supports_watch_list);
}

/// Swapping one layer keeps the rest: the default lister-watcher behind a decorator still
/// transcodes protobuf into the cache (no pod decoded) and still streams its initial list
/// (no List call), because the carried type is in the types (`Cached<K>`, chosen by
/// `cached()`, not found by a downcast) and `supports_watch_list` is a required method the
/// decorator forwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_decorated_cached_lister_watcher_keeps_transcoding_and_streaming_lists() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("decorated-lw").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    create_pods(&Api::<Pod>::namespaced(client.clone(), &ns), "w", 8)
        .await
        .unwrap();
    let counted: Api<CountedPod<2>> = Api::namespaced(client, &ns);
    let lw = Arc::new(CountingCalls {
        inner: KubeListerWatcher::new(counted).cached(),
        lists: std::sync::atomic::AtomicUsize::new(0),
        streaming_watches: std::sync::atomic::AtomicUsize::new(0),
    });
    let informer = SharedIndexInformer::builder(Arc::clone(&lw)).build();
    let decoded = || DECODED[2].load(std::sync::atomic::Ordering::SeqCst);
    let handle = informer.start().unwrap();
    eventually("the informer synced", TIMEOUT, || informer.has_synced()).await;
    assert_eq!(informer.stats().objects, 8);
    assert_eq!(decoded(), 0, "pods decoded: the decorator lost transcoding");
    assert_eq!(
        lw.lists.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a List call: the decorator lost streaming lists"
    );
    assert!(
        lw.streaming_watches
            .load(std::sync::atomic::Ordering::SeqCst)
            >= 1
    );
    let one = informer.lister().namespaced(&ns).get("w-2").unwrap();
    assert_eq!(one.meta().name(), Some("w-2"));
    handle.stop().await.unwrap();
}
