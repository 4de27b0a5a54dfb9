//! End-to-end: the factory's pod informer over a compact store, against the real etcd +
//! kube-apiserver of kinformer-testenv. Run with `cargo xtask test` (or `cargo test -p
//! kinformer-compact-store -- --include-ignored` once the control plane is built).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer_compact_store::{CompactStore, Encoded};
use kinformer_core::{DeletedObject, MetaObject, deletion_handling_key};
use kinformer_indexer::{IndexFunc, Lister, namespace_indexers, parse_selector};
use kinformer_informer_factory::{
    CacheKind, ResourceEventHandler, SharedIndexInformer, SharedInformerFactory,
};
use kinformer_reflector::{KubeListerWatcher, reflector_client};
use kinformer_testenv::{ControlPlane, create_pods, eventually};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};

const TIMEOUT: Duration = Duration::from_secs(30);

/// Records notifications as `"add name"`, `"update name tier"`, `"delete name"`.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn get(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

impl ResourceEventHandler<Pod> for Log {
    fn on_add(&self, p: &Arc<Pod>, _initial: bool) {
        self.0.lock().unwrap().push(format!("add {}", name(p)));
    }
    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        let tier = |p: &Pod| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("tier").cloned())
                .unwrap_or_else(|| "-".into())
        };
        // The old object comes out of the compact store: it must be the version before.
        self.0
            .lock()
            .unwrap()
            .push(format!("update {} {}->{}", name(new), tier(old), tier(new)));
    }
    fn on_delete(&self, p: &DeletedObject<Pod>) {
        let key = deletion_handling_key(p).unwrap();
        self.0
            .lock()
            .unwrap()
            .push(format!("delete {}", key.name()));
    }
}

fn node_of(p: &Pod) -> Vec<String> {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .into_iter()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_factory_informer_over_the_compact_store_syncs_serves_listers_and_indices_and_delivers_events()
 {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("compact").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_pods(&pods, "before", 20).await.unwrap();

    // The store the factory made, kept here to read its figures.
    let made: Arc<Mutex<Vec<Arc<CompactStore<Pod>>>>> = Arc::default();
    let seen = Arc::clone(&made);
    let factory = SharedInformerFactory::builder(client)
        .namespace(ns.clone())
        .transform_meta(|m| m.managed_fields = None)
        .store_for::<Pod, _>(move || {
            let mut indexers = namespace_indexers();
            indexers.insert("byNode".into(), IndexFunc::new(node_of));
            let store = Arc::new(CompactStore::new(indexers));
            seen.lock().unwrap().push(Arc::clone(&store));
            store
        })
        .build();
    let informer = factory.informer::<Pod>();
    let log = Log::default();
    informer.add_event_handler(log.clone()).unwrap();
    factory.start().unwrap();
    let report = factory.wait_for_cache_sync(TIMEOUT).await;
    assert!(report.all_synced(), "{report}");
    assert_eq!(made.lock().unwrap().len(), 1, "one store for one informer");
    let store = Arc::clone(&made.lock().unwrap()[0]);

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
    assert_eq!(store.stats().objects, 20);

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

    // Listers and indices read the compact store.
    let lister = informer.lister();
    let in_ns = lister.namespaced(&ns);
    let p3 = in_ns.get("before-3").unwrap();
    assert_eq!(
        p3.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("tier"))
            .map(String::as_str),
        Some("web")
    );
    assert!(p3.metadata.managed_fields.is_none(), "the transform ran");
    assert!(in_ns.get("before-4").unwrap_err().is_not_found());
    assert_eq!(in_ns.list(&parse_selector("tier=web").unwrap()).len(), 1);
    assert_eq!(
        in_ns.list(&parse_selector("app=kinformer").unwrap()).len(),
        20
    );
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

    let stats = store.stats();
    assert_eq!(stats.objects, 20);
    assert_eq!(stats.decode_failures, 0);
    assert!(stats.decodes > 0, "reads decoded: {stats:?}");
    // Every pod here has the same labels but one: two sets shared by 20 objects.
    assert_eq!(stats.label_sets, 2, "{stats:?}");
    assert!(
        stats.entry_bytes > 0 && stats.entry_bytes < 20 * 2048,
        "{stats:?}"
    );

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
async fn a_projection_is_the_informers_type_in_either_store_and_either_wire_format() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("projection").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_pods(&pods, "p", 5).await.unwrap();

    for wire in [
        kinformer_reflector::WireFormat::Auto,
        kinformer_reflector::WireFormat::Json,
    ] {
        for compact in [false, true] {
            let mut builder = SharedInformerFactory::builder(client.clone())
                .namespace(ns.clone())
                .wire_format(wire);
            if compact {
                builder =
                    builder.store_for::<PodView, _>(|| CompactStore::new(namespace_indexers()));
            }
            let factory = builder.build();
            let informer = factory.informer::<PodView>();
            factory.start().unwrap();
            let report = factory.wait_for_cache_sync(TIMEOUT).await;
            assert!(report.all_synced(), "{wire:?} compact={compact}: {report}");

            let lister: kinformer_indexer::Lister<PodView> = informer.lister();
            let p0 = lister.namespaced(&ns).get("p-0").unwrap();
            let spec = p0.spec.as_ref().unwrap();
            assert_eq!(spec.containers.len(), 1);
            assert_eq!(spec.containers[0].name, "c");
            assert_eq!(spec.containers[0].image.as_deref(), Some("busybox"));
            assert_eq!(
                p0.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Pending"),
                "{wire:?} compact={compact}"
            );
            assert_eq!(
                lister.list(&parse_selector("app=kinformer").unwrap()).len(),
                5
            );
            factory.shutdown().await.unwrap();
        }
    }
}

/// Records the names of added objects, and each update as `"name rv tier"`, from the
/// metadata of `Encoded` pods alone.
#[derive(Clone, Default)]
struct EncodedLog(Arc<Mutex<Vec<String>>>);

impl ResourceEventHandler<Encoded<Pod>> for EncodedLog {
    fn on_add(&self, p: &Arc<Encoded<Pod>>, _initial: bool) {
        let name = p.object_name().unwrap_or_default();
        self.0.lock().unwrap().push(format!("add {name}"));
    }
    fn on_update(&self, _old: &Arc<Encoded<Pod>>, new: &Arc<Encoded<Pod>>) {
        let tier = new
            .object_labels()
            .and_then(|l| l.get("tier"))
            .map_or("-", String::as_str);
        let name = new.object_name().unwrap_or_default();
        self.0.lock().unwrap().push(format!("update {name} {tier}"));
    }
    fn on_delete(&self, _p: &DeletedObject<Encoded<Pod>>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn an_informer_of_encoded_pods_syncs_from_protobuf_transcoded_and_decodes_what_is_read() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("encoded").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_pods(&pods, "e", 12).await.unwrap();

    // Protobuf transcoded into the encoding: no Pod is built on the way to the cache.
    let transcoded = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&transcoded);
    let lw = KubeListerWatcher::new(pods.clone()).decode_protobuf_with(move |object| {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Encoded::<Pod>::from_protobuf(object)
    });
    let informer = SharedIndexInformer::builder(lw)
        .cache(CacheKind::Decoded)
        .build();
    let log = EncodedLog::default();
    informer.add_event_handler(log.clone()).unwrap();
    let _handle = informer.start().unwrap();
    eventually("the informer synced", TIMEOUT, || informer.has_synced()).await;
    eventually("the initial adds", TIMEOUT, || {
        log.0.lock().unwrap().len() >= 12
    })
    .await;
    // Asked for and served in protobuf, so every pod was transcoded (JSON would have gone
    // through Encoded's Deserialize).
    assert!(transcoded.load(std::sync::atomic::Ordering::Relaxed) >= 12);

    // Selectors and keys from the metadata kept beside the bytes.
    let lister: Lister<Encoded<Pod>> = informer.lister();
    assert_eq!(
        lister.list(&parse_selector("app=kinformer").unwrap()).len(),
        12
    );
    // A read decodes exactly what the API server serves (in JSON, through kube).
    let cached = lister.namespaced(&ns).get("e-3").unwrap();
    assert_eq!(cached.decode().unwrap(), pods.get("e-3").await.unwrap());
    assert!(cached.encoded_len() > 0);

    // A watch event: transcoded too, the handler reads its labels without decoding.
    let patch = serde_json::json!({ "metadata": { "labels": { "tier": "web" } } });
    let patched = pods
        .patch("e-5", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("the update", TIMEOUT, || {
        log.0
            .lock()
            .unwrap()
            .contains(&"update e-5 web".to_string())
    })
    .await;
    let cached = lister.namespaced(&ns).get("e-5").unwrap();
    assert_eq!(
        cached.object_resource_version(),
        patched.metadata.resource_version.as_deref()
    );
    assert_eq!(cached.decode().unwrap(), patched);
}

/// Pods that count how often one is decoded (by serde: protobuf into a `Pod`, JSON, or the
/// store's encoding).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(transparent)]
struct CountedPod(Pod);

static DECODED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl<'de> serde::Deserialize<'de> for CountedPod {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        DECODED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Pod::deserialize(d).map(CountedPod)
    }
}

impl k8s_openapi::Resource for CountedPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for CountedPod {
    type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    fn metadata(&self) -> &Self::Ty {
        &self.0.metadata
    }
    fn metadata_mut(&mut self) -> &mut Self::Ty {
        &mut self.0.metadata
    }
}

fn decoded() -> usize {
    DECODED.load(std::sync::atomic::Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_default_informer_transcodes_from_protobuf_and_decodes_only_what_handlers_and_readers_take()
 {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("default-cache").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_pods(&pods, "d", 12).await.unwrap();

    // The defaults: no cache option, a Kubernetes lister-watcher (protobuf for pods).
    let counted: Api<CountedPod> = Api::namespaced(client, &ns);
    let informer = SharedIndexInformer::builder(KubeListerWatcher::new(counted)).build();
    let updates = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&updates);
    // A handler of updates alone: the first list reaches it as adds, which it lacks.
    informer
        .add_event_handler(
            kinformer_informer_factory::ResourceEventHandlerFuncs::new().update_func(
                move |_old, new: &Arc<CountedPod>| {
                    let tier = new.0.metadata.labels.as_ref().and_then(|l| l.get("tier"));
                    seen.lock().unwrap().push(tier.cloned().unwrap_or_default());
                },
            ),
        )
        .unwrap();
    let before = decoded();
    let _handle = informer.start().unwrap();
    eventually("the informer synced", TIMEOUT, || informer.has_synced()).await;
    assert_eq!(informer.stats().objects, 12);
    // Twelve pods listed and cached, one decoded: the store checks once that what it
    // keeps decodes as the informer's type.
    assert_eq!(decoded() - before, 1, "pods decoded during the sync");

    // Selectors, keys and the namespace index from the metadata kept beside the bytes;
    // a read decodes what it returns, equal to what the API server serves.
    let lister = informer.lister();
    let before = decoded();
    let one = lister.namespaced(&ns).get("d-3").unwrap();
    assert_eq!(one.0, pods.get("d-3").await.unwrap());
    assert_eq!(decoded() - before, 1);
    assert_eq!(
        informer
            .indexer()
            .index_keys("namespace", &ns)
            .unwrap()
            .len(),
        12
    );

    // A watch event: transcoded, then decoded for the update handler (old and new).
    let patch = serde_json::json!({ "metadata": { "labels": { "tier": "web" } } });
    let patched = pods
        .patch("d-5", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("the update", TIMEOUT, || {
        updates.lock().unwrap().contains(&"web".to_string())
    })
    .await;
    assert_eq!(lister.namespaced(&ns).get("d-5").unwrap().0, patched);
    assert_eq!(informer.stats().undecodable, 0);
}
