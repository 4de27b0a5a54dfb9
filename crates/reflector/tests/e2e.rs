//! End-to-end: the reflector against the real etcd + kube-apiserver of kinformer-testenv,
//! faults included. Run with `cargo xtask test` (or `cargo test -p kinformer-reflector --
//! --include-ignored` once the control-plane binaries are built).
//!
//! Control planes: the shared one (watch cache on, as real clusters) for most tests; one
//! more for this binary with the watch cache off (deterministic `410` after compaction,
//! paged lists at RV "0") and the WatchList feature gate off (a server that refuses
//! streaming lists); and one per test that stops the API server.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kinformer_reflector::{
    Error, KubeListerWatcher, ListOptions, ListerWatcher, Reflector, WatchEvent, WatchOptions,
    reflector_client,
};
use kinformer_testenv::{ControlPlane, Options};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::core::PartialObjectMeta;

const MINUTE: Duration = Duration::from_secs(60);

static NO_CACHE: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();
/// Tests on the no-cache control plane take turns: one compacts etcd, which would expire
/// another's continue tokens mid-list.
static NO_CACHE_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The watch-cache-off, WatchList-off control plane of this test binary.
async fn no_cache() -> &'static ControlPlane {
    NO_CACHE
        .get_or_try_init(|| {
            ControlPlane::start_with(
                Options::default()
                    .watch_cache(false)
                    // Streaming lists work without the watch cache in 1.36; the gate
                    // makes the server refuse them (422), for the fallback test.
                    .apiserver_arg("--feature-gates=WatchList=false"),
            )
        })
        .await
        .expect("start the no-cache control plane")
}

fn ns_key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

// ------------------------------------------------------------------ initial sync

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn initial_sync_of_2000_pods_comes_in_4_pages_of_500() {
    init_tracing();
    let cp = no_cache().await;
    let _turn = NO_CACHE_TURN.lock().await;
    let ns = cp.create_namespace("paging").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(reflector_client(cp.admin_config()).unwrap(), &ns);
    create_pods(&pods, "p", 2000).await;

    let lw = Counting::new(KubeListerWatcher::new(pods.clone()));
    let sink = StateSink::new();
    let errors = Errors::default();
    let start = Instant::now();
    let h = Reflector::new(Arc::clone(&lw), Arc::clone(&sink))
        .name("pods")
        .on_watch_error(errors.handler())
        .spawn()
        .unwrap();
    eventually("the initial sync", MINUTE, || h.status().has_synced()).await;
    let took = start.elapsed();

    // The watch cache is off, so the server honours the limit at RV "0": 4 pages.
    let pages = lw.lists();
    assert_eq!(pages.len(), 4, "{pages:?}");
    assert_eq!(
        (
            pages[0].resource_version.as_str(),
            pages[0].limit,
            pages[0].continue_token.is_none()
        ),
        ("0", Some(500), true)
    );
    assert!(pages[1..].iter().all(|p| p.resource_version.is_empty()
        && p.continue_token.is_some()
        && p.limit == Some(500)));
    let replaces = sink.replaces();
    assert_eq!(replaces.len(), 1);
    assert_eq!(replaces[0].0.len(), 2000);
    // The watch starts at the list's RV.
    eventually("the watch", MINUTE, || !lw.watches().is_empty()).await;
    assert_eq!(lw.watches()[0].resource_version, replaces[0].1);
    create_pod(&pods, "after").await;
    eventually("the add after sync", MINUTE, || {
        sink.adds().contains(&ns_key(&ns, "after"))
    })
    .await;
    assert!(errors.texts().is_empty(), "{:?}", errors.texts());
    eprintln!("2000 pods listed in 4 pages and synced in {took:?}");
    h.stop().await.unwrap();
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn initial_sync_of_2000_pods_by_streaming_watch_list() {
    init_tracing();
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("streaming").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(reflector_client(cp.admin_config()).unwrap(), &ns);
    create_pods(&pods, "p", 2000).await;

    let lw = Counting::new(KubeListerWatcher::new(pods.clone()));
    let sink = StateSink::new();
    let start = Instant::now();
    let h = Reflector::new(Arc::clone(&lw), Arc::clone(&sink))
        .watch_list(true)
        .spawn()
        .unwrap();
    eventually("the streamed sync", MINUTE, || h.status().has_synced()).await;
    let took = start.elapsed();

    assert!(lw.lists().is_empty(), "a streaming sync lists nothing");
    let w = lw.watches();
    assert_eq!(w.len(), 1);
    assert!(w[0].send_initial_events && w[0].resource_version.is_empty());
    let replaces = sink.replaces();
    assert_eq!(replaces.len(), 1);
    assert_eq!(replaces[0].0.len(), 2000);
    assert!(
        !sink.log().iter().any(|c| matches!(c, Call::Add(_))),
        "initial events reach the sink only as the replace"
    );

    // The same watch goes on after the end bookmark.
    create_pod(&pods, "after").await;
    eventually("the add after sync", MINUTE, || {
        sink.adds().contains(&ns_key(&ns, "after"))
    })
    .await;
    assert_eq!(lw.watches().len(), 1, "no second watch");
    eprintln!("2000 pods streamed and synced in {took:?}");

    // For contrast, List+Watch on this server (watch cache on): the RV "0" list is
    // served from the cache, which ignores the limit: one page.
    let lw2 = Counting::new(KubeListerWatcher::new(pods.clone()));
    let sink2 = StateSink::new();
    let h2 = Reflector::new(Arc::clone(&lw2), Arc::clone(&sink2))
        .spawn()
        .unwrap();
    eventually("the listed sync", MINUTE, || h2.status().has_synced()).await;
    assert_eq!(lw2.lists().len(), 1);
    assert_eq!(lw2.lists()[0].limit, Some(500));
    assert_eq!(sink2.keys().len(), 2001);
    h.stop().await.unwrap();
    h2.stop().await.unwrap();
}

// ------------------------------------------------------------------ partitions

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn partition_then_heal_resumes_the_watch_from_its_rv_without_relist() {
    init_tracing();
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("partition").await.unwrap();
    let direct: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
    create_pods(&direct, "p", 5).await;
    let proxy = cp.proxy().unwrap();
    let through: Api<Pod> = Api::namespaced(reflector_client(proxy.admin_config()).unwrap(), &ns);
    let lw = Counting::new(KubeListerWatcher::new(through));
    let sink = StateSink::new();
    let errors = Errors::default();
    let h = Reflector::new(Arc::clone(&lw), Arc::clone(&sink))
        .on_watch_error(errors.handler())
        .spawn()
        .unwrap();
    eventually("the sync", MINUTE, || h.status().has_synced()).await;
    create_pod(&direct, "warmup").await;
    eventually("the watch to deliver", MINUTE, || {
        sink.adds().contains(&ns_key(&ns, "warmup"))
    })
    .await;

    proxy.partition();
    let rv_at_cut = h.status().last_sync_resource_version();
    let watches_before = lw.watches().len();
    create_pod(&direct, "new-1").await;
    create_pod(&direct, "new-2").await;
    label_pod(&direct, "p-0", "during").await;
    delete_pod(&direct, "p-1").await;
    delete_pod(&direct, "p-2").await;
    // The reflector notices the cut and fails to get through while partitioned.
    eventually("a failed re-watch", MINUTE, || {
        !errors.unreachable_times().is_empty()
    })
    .await;
    assert!(!sink.keys().contains(&ns_key(&ns, "new-1")));
    let watches_at_heal = lw.watches().len();
    proxy.heal();

    converge(&sink, &direct, 2 * MINUTE).await;
    assert_eq!(h.status().syncs(), 1, "no relist");
    assert_eq!(lw.list_starts().len(), 1, "no relist");
    // The attempts during the partition and the first one after the heal (the one that
    // delivered the changes) all start from the RV the reflector had at the cut.
    let all = lw.watches();
    let resumed = &all[watches_before..=watches_at_heal];
    assert!(
        resumed.iter().all(|w| w.resource_version == rv_at_cut),
        "every re-watch resumes from the RV at the cut ({rv_at_cut}): {resumed:?}"
    );
    let deletes = sink.deletes();
    assert!(
        deletes.contains(&ns_key(&ns, "p-1")) && deletes.contains(&ns_key(&ns, "p-2")),
        "the deletions arrive as real deletes: {deletes:?}"
    );
    assert!(
        errors.codes().iter().all(Option::is_none),
        "only transport errors: {:?}",
        errors.texts()
    );
    h.stop().await.unwrap();
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn partition_with_etcd_compacted_before_heal_relists_exactly_once() {
    init_tracing();
    let cp = no_cache().await;
    let _turn = NO_CACHE_TURN.lock().await;
    let ns = cp.create_namespace("compact").await.unwrap();
    let direct: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
    create_pods(&direct, "p", 5).await;
    let proxy = cp.proxy().unwrap();
    let through: Api<Pod> = Api::namespaced(reflector_client(proxy.admin_config()).unwrap(), &ns);
    let lw = Counting::new(KubeListerWatcher::new(through));
    let sink = StateSink::new();
    let errors = Errors::default();
    let h = Reflector::new(Arc::clone(&lw), Arc::clone(&sink))
        .on_watch_error(errors.handler())
        .spawn()
        .unwrap();
    eventually("the sync", MINUTE, || h.status().has_synced()).await;
    create_pod(&direct, "warmup").await;
    eventually("the watch to deliver", MINUTE, || {
        sink.adds().contains(&ns_key(&ns, "warmup"))
    })
    .await;

    proxy.partition();
    let rv_at_cut: i64 = h.status().last_sync_resource_version().parse().unwrap();
    delete_pod(&direct, "p-1").await;
    delete_pod(&direct, "p-2").await;
    create_pod(&direct, "new-1").await;
    label_pod(&direct, "p-0", "during").await;
    let compacted = cp.compact_etcd().await.unwrap();
    assert!(compacted > rv_at_cut + 1, "{compacted} vs {rv_at_cut}");
    proxy.heal();

    converge(&sink, &direct, 2 * MINUTE).await;
    eventually("the relist", MINUTE, || h.status().syncs() == 2).await;
    assert!(
        errors.codes().contains(&Some(410)),
        "the 410 reaches the handler as a typed error: {:?}",
        errors.texts()
    );
    let replaces = sink.replaces();
    assert_eq!(replaces.len(), 2, "exactly one relist");
    let (before, after) = (&replaces[0].0, &replaces[1].0);
    for gone in ["p-1", "p-2"] {
        let k = ns_key(&ns, gone);
        assert!(before.contains(&k));
        // Deleted while nobody watched: absent from the relist's replace, never sent
        // as a watch delete. A DeltaFIFO turns a known key missing from a replace into
        // a DeletedFinalStateUnknown tombstone (rule 14), so handlers get them as
        // tombstones; this plain recording sink just shows they are missing.
        assert!(!after.contains(&k), "{gone} in the relist");
        assert!(!sink.deletes().contains(&k));
    }
    assert!(after.contains(&ns_key(&ns, "new-1")));
    // The sink equals a fresh List (converge), and stays one relist.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(h.status().syncs(), 2);
    assert_eq!(sink.objects(), truth(&direct).await);
    h.stop().await.unwrap();
}

// ------------------------------------------------------------------ API server restart

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn apiserver_stopped_and_restarted_backoff_rewatch_converge() {
    init_tracing();
    let cp = ControlPlane::start().await.unwrap();
    let ns = cp.create_namespace("restart").await.unwrap();
    let direct: Api<Pod> = Api::namespaced(cp.client().unwrap(), &ns);
    create_pods(&direct, "p", 3).await;
    let pods: Api<Pod> = Api::namespaced(reflector_client(cp.admin_config()).unwrap(), &ns);
    let sink = StateSink::new();
    let errors = Errors::default();
    let h = Reflector::new(KubeListerWatcher::new(pods), Arc::clone(&sink))
        .on_watch_error(errors.handler())
        .spawn()
        .unwrap();
    eventually("the sync", MINUTE, || h.status().has_synced()).await;
    create_pod(&direct, "warmup").await;
    eventually("the watch to deliver", MINUTE, || {
        sink.adds().contains(&ns_key(&ns, "warmup"))
    })
    .await;

    cp.stop_apiserver().unwrap();
    eventually("three failed attempts", MINUTE, || {
        errors.unreachable_times().len() >= 3
    })
    .await;
    cp.start_apiserver().await.unwrap();
    create_pod(&direct, "after-restart").await;
    delete_pod(&direct, "p-0").await;
    converge(&sink, &direct, 2 * MINUTE).await;

    // While the server was down, attempts were spaced by the doubling backoff.
    let g = gaps(&errors.unreachable_times());
    for (i, gap) in g.iter().take(2).enumerate() {
        let lo = 0.8 * 2f64.powi(i as i32);
        assert!(
            *gap >= lo && *gap < 2.0 * lo + 0.5,
            "gap {i}: {gap} s, want [{lo}, {}): {g:?}",
            2.0 * lo
        );
    }
    assert!(!h.is_finished());
    eprintln!(
        "restart: {} failed attempts, gaps {g:?}, {} syncs",
        g.len() + 1,
        h.status().syncs()
    );
    h.stop().await.unwrap();
}

// ------------------------------------------------------------------ RBAC

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn forbidden_list_reaches_the_handler_as_403_and_retries_back_off() {
    init_tracing();
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("rbac").await.unwrap();
    // The restricted user may list pods only: configmaps answer 403.
    let cms: Api<ConfigMap> = Api::namespaced(cp.restricted_client().unwrap(), &ns);
    let errors = Errors::default();
    let h = Reflector::new(KubeListerWatcher::new(cms), StateSink::new())
        .on_watch_error(errors.handler())
        .spawn()
        .unwrap();
    eventually("four 403s", MINUTE, || errors.len() >= 4).await;
    assert!(
        errors.codes().iter().all(|c| *c == Some(403)),
        "{:?}",
        errors.texts()
    );
    let g = gaps(&errors.times());
    for (i, gap) in g.iter().take(3).enumerate() {
        let lo = 0.8 * 2f64.powi(i as i32);
        assert!(
            *gap >= lo && *gap < 2.0 * lo + 0.5,
            "retry {i} after {gap} s, want [{lo}, {}) s: {g:?}",
            2.0 * lo
        );
    }
    assert!(!h.status().has_synced());
    assert!(
        !h.is_finished(),
        "the reflector keeps trying, without panicking"
    );
    h.stop().await.unwrap();
}

// ------------------------------------------------------------------ WatchList fallback

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_server_refusing_streaming_lists_falls_back_to_list_and_watch() {
    init_tracing();
    let cp = no_cache().await;
    let _turn = NO_CACHE_TURN.lock().await;
    let ns = cp.create_namespace("fallback").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(reflector_client(cp.admin_config()).unwrap(), &ns);
    create_pods(&pods, "p", 3).await;

    // What the server says to a streaming list with the WatchList gate off.
    let direct = KubeListerWatcher::new(pods.clone());
    let mut streaming = WatchOptions::new("", Duration::from_secs(10));
    streaming.send_initial_events = true;
    match direct.watch(&streaming).await {
        Err(e @ Error::Api(_)) => assert_eq!(e.status_code(), Some(422), "{e}"),
        Err(e) => panic!("want a status, got {e}"),
        Ok(_) => panic!("the server accepted a streaming list"),
    }

    let lw = Counting::new(KubeListerWatcher::new(pods.clone()));
    let sink = StateSink::new();
    let h = Reflector::new(Arc::clone(&lw), Arc::clone(&sink))
        .watch_list(true)
        .spawn()
        .unwrap();
    eventually("the sync", MINUTE, || h.status().has_synced()).await;
    eventually("the plain watch", MINUTE, || lw.watches().len() >= 2).await;
    let w = lw.watches();
    assert!(w[0].send_initial_events);
    assert!(!w[1].send_initial_events);
    assert_eq!(lw.list_starts().len(), 1);
    assert_eq!(lw.lists()[0].resource_version, "0");
    assert_eq!(sink.keys().len(), 3);
    create_pod(&pods, "after").await;
    eventually("the add", MINUTE, || {
        sink.adds().contains(&ns_key(&ns, "after"))
    })
    .await;
    h.stop().await.unwrap();
}

// ------------------------------------------------------------------ the kube ListerWatcher

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn kube_lister_watcher_does_selectors_metadata_only_dynamic_objects_and_crds() {
    init_tracing();
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("lw").await.unwrap();
    let client = reflector_client(cp.admin_config()).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create_pod(&pods, "a").await;
    let mut other = pod("b");
    other.metadata.labels = Some([("app".to_string(), "other".to_string())].into());
    pods.create(&PostParams::default(), &other).await.unwrap();
    let first = ListOptions::new("0", Some(500));
    let names = |items: Vec<Arc<Pod>>| -> BTreeSet<String> {
        items
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    };

    // Label and field selectors.
    let by_label = KubeListerWatcher::new(pods.clone()).labels("app=kinformer");
    assert_eq!(
        names(by_label.list(&first).await.unwrap().items),
        ["a".to_string()].into()
    );
    let by_field = KubeListerWatcher::new(pods.clone()).fields("metadata.name=b");
    assert_eq!(
        names(by_field.list(&first).await.unwrap().items),
        ["b".to_string()].into()
    );
    // kube::Api<K> itself is a ListerWatcher.
    assert_eq!(
        ListerWatcher::list(&pods, &first)
            .await
            .unwrap()
            .items
            .len(),
        2
    );

    // Metadata only: a reflector over PartialObjectMeta<Pod>.
    let meta = KubeListerWatcher::metadata_only(pods.clone());
    let page = meta.list(&first).await.unwrap();
    let meta_names: BTreeSet<_> = page
        .items
        .iter()
        .filter_map(|p: &Arc<PartialObjectMeta<Pod>>| p.metadata.name.clone())
        .collect();
    assert_eq!(meta_names, ["a".to_string(), "b".to_string()].into());
    let meta_sink = StateSink::new();
    let hm = Reflector::new(meta, Arc::clone(&meta_sink))
        .spawn()
        .unwrap();

    // DynamicObject for pods.
    let pod_ar = ApiResource::erase::<Pod>(&());
    let dynamic = KubeListerWatcher::new_with(
        Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &pod_ar),
        &pod_ar,
    );
    let dyn_sink = StateSink::new();
    let hd = Reflector::new(dynamic, Arc::clone(&dyn_sink))
        .spawn()
        .unwrap();

    eventually("both synced", MINUTE, || {
        hm.status().has_synced() && hd.status().has_synced()
    })
    .await;
    create_pod(&pods, "c").await;
    let c = ns_key(&ns, "c");
    eventually("c in both", MINUTE, || {
        meta_sink.keys().contains(&c) && dyn_sink.keys().contains(&c)
    })
    .await;

    // A real server's object of another kind than expected is a typed error.
    let cm_ar = ApiResource::erase::<ConfigMap>(&());
    let mismatched = KubeListerWatcher::new_with(
        Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &pod_ar),
        &cm_ar,
    );
    let mut w = mismatched
        .watch(&WatchOptions::new("0", Duration::from_secs(30)))
        .await
        .unwrap();
    match w.next().await {
        Some(Err(Error::UnexpectedKind { expected, actual })) => {
            assert_eq!(
                (expected.as_str(), actual.as_str()),
                ("v1/ConfigMap", "v1/Pod")
            );
        }
        other => panic!("want UnexpectedKind, got {other:?}"),
    }

    // A CRD, through DynamicObject.
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": "widgets.kinformer.test" },
        "spec": {
            "group": "kinformer.test",
            "names": { "kind": "Widget", "plural": "widgets", "singular": "widget" },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true
                } }
            }]
        }
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let widget_ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kinformer.test", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &widget_ar);
    let w1 =
        DynamicObject::new("w1", &widget_ar).data(serde_json::json!({ "spec": { "size": 1 } }));
    let start = Instant::now();
    // The CRD takes a moment to be served.
    while widgets.create(&PostParams::default(), &w1).await.is_err() {
        assert!(start.elapsed() < MINUTE, "the CRD was never served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let crd_sink = StateSink::new();
    let hc = Reflector::new(
        KubeListerWatcher::new_with(widgets.clone(), &widget_ar),
        Arc::clone(&crd_sink),
    )
    .spawn()
    .unwrap();
    eventually("the widget", MINUTE, || {
        crd_sink.keys().contains(&ns_key(&ns, "w1"))
    })
    .await;
    let w2 =
        DynamicObject::new("w2", &widget_ar).data(serde_json::json!({ "spec": { "size": 2 } }));
    widgets.create(&PostParams::default(), &w2).await.unwrap();
    eventually("the second widget", MINUTE, || {
        crd_sink.adds().contains(&ns_key(&ns, "w2"))
    })
    .await;
    for h in [hm, hd, hc] {
        h.stop().await.unwrap();
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_watch_event_stream_from_the_real_server_decodes_every_event_kind() {
    init_tracing();
    let cp = ControlPlane::shared().await.unwrap();
    let ns = cp.create_namespace("events").await.unwrap();
    let pods: Api<Pod> = Api::namespaced(reflector_client(cp.admin_config()).unwrap(), &ns);
    let lw = KubeListerWatcher::new(pods.clone());
    let rv = lw
        .list(&ListOptions::new("", None))
        .await
        .unwrap()
        .resource_version;
    let mut w = lw
        .watch(&WatchOptions::new(rv, Duration::from_secs(60)))
        .await
        .unwrap();
    create_pod(&pods, "x").await;
    label_pod(&pods, "x", "1").await;
    delete_pod(&pods, "x").await;
    let mut seen = Vec::new();
    while seen.last() != Some(&"deleted") {
        let ev = tokio::time::timeout(MINUTE, w.next())
            .await
            .expect("an event within a minute")
            .expect("the watch stays open")
            .expect("a decodable event");
        seen.push(match ev {
            WatchEvent::Added(_) => "added",
            WatchEvent::Modified(_) => "modified",
            WatchEvent::Deleted(_) => "deleted",
            WatchEvent::Bookmark(_) => continue,
        });
    }
    assert_eq!(seen.first(), Some(&"added"));
    assert!(seen.contains(&"modified"));
}
