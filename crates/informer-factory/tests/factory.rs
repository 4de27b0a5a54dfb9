//! Rule 33 and the factory's types, end to end against the real etcd + kube-apiserver of
//! kinformer-testenv. Run with `cargo xtask test` (or `cargo test -p
//! kinformer-informer-factory --test integration factory:: -- --include-ignored` once the control plane is
//! built).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kinformer_compact_store::Cached;
use kinformer_informer_factory::{
    Error, InformerOptions, ResourceEventHandlerFuncs, SharedInformerFactory, wait_for_cache_sync,
    wait_for_cache_sync_until,
};
use kinformer_kube::{WireFormat, reflector_client};
use kinformer_testenv::{ControlPlane, eventually, pod};
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::discovery::Scope;
use kube::{Api, CustomResource};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(30);

async fn admin_factory(cp: &ControlPlane) -> (kube::Client, String) {
    let ns = cp.create_namespace("factory").await.unwrap();
    (reflector_client(cp.admin_config()).unwrap(), ns)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule_33_one_informer_per_type_namespace_and_options() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let (client, ns) = admin_factory(cp).await;
    let factory = SharedInformerFactory::builder(client)
        .namespace(&ns)
        .build();

    let pods = factory.informer::<Pod>();
    assert!(
        pods.is_same(&factory.informer::<Pod>()),
        "same type, same informer"
    );
    assert!(
        pods.is_same(&factory.clone().informer::<Pod>()),
        "clones share"
    );
    let elsewhere = factory.informer_with::<Pod>(InformerOptions::new().namespace("other"));
    assert!(
        !pods.is_same(&elsewhere),
        "another namespace, another informer"
    );
    let labelled =
        factory.informer_with::<Pod>(InformerOptions::new().namespace(&ns).label_selector("a=b"));
    assert!(
        !pods.is_same(&labelled),
        "other list options, another informer"
    );
    assert!(labelled.is_same(
        &factory.informer_with::<Pod>(InformerOptions::new().namespace(&ns).label_selector("a=b"))
    ));
    // A cluster-scoped type ignores the namespace.
    let nodes = factory.informer::<Node>();
    assert!(nodes.is_same(&factory.informer_with::<Node>(InformerOptions::new().namespace("x"))));
    // The typed and the dynamic view of one resource are two informers.
    let ar = ApiResource::erase::<Pod>(&());
    let dynamic = factory.dynamic_informer(&ar, &Scope::Namespaced);
    assert!(dynamic.is_same(&factory.dynamic_informer(&ar, &Scope::Namespaced)));
    // So are the cached and the decoded informer of one type.
    let decoded = factory.decoded_informer::<Pod>();
    assert!(decoded.is_same(&factory.decoded_informer::<Pod>()));

    let ids: Vec<String> = factory
        .informer_ids()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        ids,
        [
            format!("pods.v1 ({ns})"),
            "pods.v1 (other)".to_string(),
            format!("pods.v1 ({ns}, a=b)"),
            "nodes.v1".to_string(),
            format!("pods.v1 ({ns})"),
            format!("pods.v1 ({ns})"),
        ]
    );
    let type_names: Vec<&str> = factory
        .informer_ids()
        .iter()
        .map(|i| i.type_name())
        .collect();
    assert_eq!(type_names[0], std::any::type_name::<Cached<Pod>>());
    assert_eq!(
        type_names[4],
        std::any::type_name::<Cached<DynamicObject>>()
    );
    assert_eq!(type_names[5], std::any::type_name::<Pod>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule_33_start_starts_the_unstarted_also_those_requested_later() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let (client, ns) = admin_factory(cp).await;
    Api::<Pod>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &pod("p"))
        .await
        .unwrap();
    let factory = SharedInformerFactory::builder(client)
        .namespace(&ns)
        .build();

    let pods = factory.informer::<Pod>();
    // Started by hand before the factory: the factory leaves it alone (no error).
    let by_hand =
        factory.informer_with::<Pod>(InformerOptions::new().namespace(&ns).label_selector("x"));
    let by_hand_handle = by_hand.start().unwrap();
    factory.start().unwrap();
    assert!(pods.is_started());
    factory.start().unwrap(); // nothing left to start: harmless

    let config_maps = factory.informer::<ConfigMap>();
    assert!(
        !config_maps.is_started(),
        "requested after start: not started yet"
    );
    factory.start().unwrap();
    assert!(config_maps.is_started());

    let report = factory.wait_for_cache_sync(TIMEOUT).await;
    assert!(report.all_synced(), "{report}");
    assert_eq!(report.informers().len(), 3);
    assert!(pods.lister().namespaced(&ns).get("p").is_ok());
    factory.shutdown().await.unwrap();
    assert!(
        !by_hand.is_stopped(),
        "the factory stops only what it started"
    );
    by_hand_handle.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule_33_wait_for_cache_sync_reports_per_type() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("factory").await.unwrap();
    // The restricted user may list and watch pods, not config maps.
    let client = reflector_client(cp.restricted_config()).unwrap();
    let factory = SharedInformerFactory::builder(client)
        .namespace(&ns)
        .build();
    let pods = factory.informer::<Pod>();
    let config_maps = factory.informer::<ConfigMap>();
    factory.start().unwrap();

    let report = factory.wait_for_cache_sync(Duration::from_secs(3)).await;
    assert!(!report.all_synced());
    let per_type: Vec<(String, bool)> = report
        .informers()
        .iter()
        .map(|(id, synced)| (id.resource().to_string(), *synced))
        .collect();
    assert_eq!(
        per_type,
        [
            ("pods.v1".to_string(), true),
            ("configmaps.v1".to_string(), false)
        ]
    );
    assert_eq!(
        report
            .unsynced()
            .map(|id| id.resource())
            .collect::<Vec<_>>(),
        ["configmaps.v1"]
    );
    assert!(report.to_string().contains("configmaps.v1"), "{report}");
    // The free function, client-go's cache.WaitForCacheSync, over anything that syncs.
    assert!(wait_for_cache_sync(TIMEOUT, &[&pods]).await);
    assert!(!wait_for_cache_sync(Duration::from_millis(50), &[&pods, &config_maps]).await);
    // Without a timeout: until synced, or until told to stop (client-go's stop channel).
    let stop = CancellationToken::new();
    assert!(wait_for_cache_sync_until(stop.cancelled(), &[&pods]).await);
    let waiting = tokio::spawn({
        let (stop, factory) = (stop.clone(), factory.clone());
        async move { factory.wait_for_cache_sync_until(stop.cancelled()).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "no timeout of its own");
    stop.cancel();
    let report = waiting.await.unwrap();
    assert_eq!(report.unsynced().count(), 1, "{report}");
    factory.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn rule_33_shutdown_stops_all_and_waits() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let (client, ns) = admin_factory(cp).await;
    let factory = SharedInformerFactory::builder(client)
        .namespace(&ns)
        .build();
    let pods = factory.informer::<Pod>();
    let config_maps = factory.informer::<ConfigMap>();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync(TIMEOUT).await.all_synced());

    factory.shutdown().await.unwrap();
    // Waited: both are stopped when shutdown returns.
    assert!(pods.is_stopped() && config_maps.is_stopped());
    assert!(matches!(factory.start(), Err(Error::Stopped)));
    let late = pods
        .add_event_handler(ResourceEventHandlerFuncs::new().add_func(|_: &Arc<Cached<Pod>>, _| {}));
    assert!(matches!(late, Err(Error::Stopped)));
    factory.shutdown().await.unwrap(); // again: nothing to wait for
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn factory_list_options_and_transform_apply_to_its_informers() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let (client, ns) = admin_factory(cp).await;
    let api = Api::<Pod>::namespaced(client.clone(), &ns);
    let mut web = pod("web");
    web.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    let created = api.create(&PostParams::default(), &web).await.unwrap();
    assert!(
        created.metadata.managed_fields.is_some(),
        "the server records managedFields"
    );
    api.create(&PostParams::default(), &pod("other"))
        .await
        .unwrap();

    let factory = SharedInformerFactory::builder(client)
        .namespace(&ns)
        .tweak_list_options(|o| o.label_selector = Some("app=web".into()))
        .transform_meta(|meta| meta.managed_fields = None)
        .build();
    let pods = factory.informer::<Pod>();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync(TIMEOUT).await.all_synced());
    let cached = pods.lister().list(&kinformer_indexer::everything());
    assert_eq!(cached.len(), 1, "only the labelled pod is listed");
    assert_eq!(cached[0].metadata().name(), Some("web"));
    assert!(
        cached[0].metadata().managed_fields().is_none(),
        "transformed"
    );
    factory.shutdown().await.unwrap();
}

/// `drop_managed_fields`: the cached pods have none, on a server that sends them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_factory_drops_managed_fields_while_it_transcodes() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let (client, ns) = admin_factory(cp).await;
    let api = Api::<Pod>::namespaced(client.clone(), &ns);
    let created = api
        .create(&PostParams::default(), &pod("web"))
        .await
        .unwrap();
    assert!(created.metadata.managed_fields.is_some());
    let factory = SharedInformerFactory::builder(client)
        .namespace(&ns)
        .drop_managed_fields()
        .build();
    let pods = factory.informer::<Pod>();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync(TIMEOUT).await.all_synced());
    let cached = pods.lister().list(&kinformer_indexer::everything());
    assert_eq!(cached.len(), 1);
    assert!(cached[0].metadata().managed_fields().is_none());
    assert_eq!(cached[0].decode().unwrap().spec, created.spec);
    factory.shutdown().await.unwrap();
}

/// The factory's transform runs exactly once per object from the server: a transform that
/// is not idempotent (it appends a mark and counts its calls) leaves one mark on every
/// cached object, and runs once per listed object and once per watch event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_factory_transform_runs_exactly_once_per_object() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let (client, ns) = admin_factory(cp).await;
    let api = Api::<Pod>::namespaced(client.clone(), &ns);
    for name in ["t-0", "t-1", "t-2"] {
        api.create(&PostParams::default(), &pod(name))
            .await
            .unwrap();
    }

    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let factory = SharedInformerFactory::builder(client)
        .namespace(&ns)
        .transform_meta({
            let calls = Arc::clone(&calls);
            move |meta| {
                calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let marks = meta.annotations.get_or_insert_with(Default::default);
                let mark = marks.entry("kinformer.dev/transformed".into()).or_default();
                mark.push('x');
            }
        })
        .build();
    let pods = factory.informer::<Pod>();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync(TIMEOUT).await.all_synced());
    let marks =
        |pods: &kinformer_informer_factory::SharedIndexInformer<Cached<Pod>>| -> Vec<String> {
            let mut all: Vec<String> = pods
                .lister()
                .list(&kinformer_indexer::everything())
                .iter()
                .map(|p| {
                    let meta = p.metadata();
                    let name = meta.name().unwrap_or_default();
                    let annotations = meta.annotations();
                    let mark = annotations.and_then(|a| a.get("kinformer.dev/transformed"));
                    format!("{name}={}", mark.unwrap_or_default())
                })
                .collect();
            all.sort();
            all
        };
    assert_eq!(marks(&pods), ["t-0=x", "t-1=x", "t-2=x"]);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 3);

    // One watch event: one more call, still one mark.
    api.create(&PostParams::default(), &pod("t-3"))
        .await
        .unwrap();
    eventually("t-3 in the cache", TIMEOUT, || {
        pods.lister().list(&kinformer_indexer::everything()).len() == 4
    })
    .await;
    assert_eq!(marks(&pods), ["t-0=x", "t-1=x", "t-2=x", "t-3=x"]);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 4);
    factory.shutdown().await.unwrap();
}

/// A custom resource, typed through kube's derive (its schema is in the CRD below).
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize)]
#[kube(
    group = "kinformer.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    schema = "disabled"
)]
pub(crate) struct WidgetSpec {
    size: i32,
}

async fn install_widget_crd(client: &kube::Client) {
    let schema = serde_json::json!({
        "type": "object",
        "properties": { "spec": {
            "type": "object",
            "properties": { "size": { "type": "integer" } }
        } }
    });
    kinformer_testenv::create_crd(client, "kinformer.dev", "Widget", "widgets", Some(schema))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn factory_serves_custom_resources_typed_and_dynamic() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let (client, ns) = admin_factory(cp).await;
    install_widget_crd(&client).await;
    let widgets: Api<Widget> = Api::namespaced(client.clone(), &ns);
    widgets
        .create(
            &PostParams::default(),
            &Widget::new("w1", WidgetSpec { size: 3 }),
        )
        .await
        .unwrap();

    let factory = SharedInformerFactory::builder(client)
        .namespace(&ns)
        .build();
    let typed = factory.informer::<Widget>();
    let ar = ApiResource::erase::<Widget>(&());
    let dynamic = factory.dynamic_informer(&ar, &Scope::Namespaced);
    factory.start().unwrap();
    let report = factory.wait_for_cache_sync(TIMEOUT).await;
    assert!(report.all_synced(), "{report}");
    assert_eq!(
        report.informers()[0].0.resource(),
        "widgets.v1.kinformer.dev"
    );

    // A custom resource reads by field name, or decodes into its type.
    let w = typed.lister().namespaced(&ns).get("w1").unwrap();
    let size = |o: kinformer_compact_store::view::Object<'_>| {
        o.get("spec")
            .and_then(|s| s.get("size"))
            .and_then(|v| v.as_i64())
    };
    assert_eq!(size(w.object()), Some(3));
    assert_eq!(w.decode().unwrap().spec.size, 3);
    let d = dynamic.lister().namespaced(&ns).get("w1").unwrap();
    assert_eq!(size(d.object()), Some(3));
    assert_eq!(d.decode().unwrap().data["spec"]["size"], 3);
    // The decoded informer of the same type is another informer, typed all the way.
    let decoded = factory.decoded_informer::<Widget>();
    factory.start().unwrap();
    assert!(factory.wait_for_cache_sync(TIMEOUT).await.all_synced());
    assert_eq!(
        decoded
            .lister()
            .namespaced(&ns)
            .get("w1")
            .unwrap()
            .spec
            .size,
        3
    );

    widgets
        .create(
            &PostParams::default(),
            &Widget::new("w2", WidgetSpec { size: 4 }),
        )
        .await
        .unwrap();
    eventually("the second widget in both caches", TIMEOUT, || {
        typed.lister().namespaced(&ns).get("w2").is_ok()
            && dynamic.lister().namespaced(&ns).get("w2").is_ok()
    })
    .await;
    factory.shutdown().await.unwrap();
}

/// The factory's wire format reaches every informer: the same pods arrive either way, and
/// the responses were what was asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn the_factory_wire_format_reaches_its_informers() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let ns = cp.create_namespace("factory-wire").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
    kinformer_testenv::create_pods(&pods, "p", 5).await.unwrap();
    for format in [WireFormat::Protobuf, WireFormat::Json] {
        let (client, types) = kinformer_testenv::recording_client(cp.admin_config()).unwrap();
        let factory = SharedInformerFactory::builder(client)
            .namespace(&ns)
            .wire_format(format)
            .build();
        let informer = factory.informer::<Pod>();
        factory.start().unwrap();
        assert!(factory.wait_for_cache_sync(TIMEOUT).await.all_synced());
        assert_eq!(informer.indexer().len(), 5, "{format:?}");
        let want = match format {
            WireFormat::Protobuf => types.all_protobuf(),
            _ => types.all_json(),
        };
        assert!(want, "{format:?}: the responses were {:?}", types.seen());
        factory.shutdown().await.unwrap();
    }
}
