//! End-to-end: the reflector against the real etcd + kube-apiserver of kinformer-testenv,
//! faults included. Run with `cargo xtask test` (or `cargo test -p kinformer-reflector --
//! --include-ignored` once the control-plane binaries are built).
//!
//! Control planes: the shared one (watch cache on, as real clusters) for most tests; one
//! more for this binary with the watch cache off (deterministic `410` after compaction,
//! paged lists at RV "0") and the WatchList feature gate off (a server that refuses
//! streaming lists); and one per test that stops the API server.
//!
//! Each test sets up its run with [`Scene`] (a namespace, its pods, the reflector's
//! client, straight or through a proxy) and [`reflect`] (a reflector recording its
//! calls, its sink and its errors), and states only what it varies.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_kube::KubeListerWatcher;
use kinformer_reflector::{Error, ListOptions, ListerWatcher, WatchEvent, WatchOptions};
use kinformer_testenv::{ControlPlane, eventually};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::core::PartialObjectMeta;

// ------------------------------------------------------------------ initial sync

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn initial_sync_of_2000_pods_comes_in_4_pages_of_500() {
    let (cp, _turn) = no_cache().await;
    let scene = Scene::new(cp, "paging", 2000).await;
    let run = scene.reflect_with(|r| r.name("pods"));
    let took = run.synced().await;

    // The watch cache is off, so the server honours the limit at RV "0": 4 pages.
    let pages = run.lw.lists();
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
    let replaces = run.sink.replaces();
    assert_eq!(replaces.len(), 1);
    assert_eq!(replaces[0].0.len(), 2000);
    // The watch starts at the list's RV.
    eventually("the watch", MINUTE, || !run.lw.watches().is_empty()).await;
    assert_eq!(run.lw.watches()[0].resource_version, replaces[0].1);
    create_pod(&scene.direct, "after").await;
    run.added(&scene.key("after")).await;
    assert!(run.errors.texts().is_empty(), "{:?}", run.errors.texts());
    eprintln!("2000 pods listed in 4 pages and synced in {took:?}");
    run.stop().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn initial_sync_of_2000_pods_by_streaming_watch_list() {
    let scene = Scene::new(shared().await, "streaming", 2000).await;
    let run = scene.reflect_with(|r| r.watch_list(true));
    let took = run.synced().await;

    assert!(run.lw.lists().is_empty(), "a streaming sync lists nothing");
    let w = run.lw.watches();
    assert_eq!(w.len(), 1);
    assert!(w[0].send_initial_events && w[0].resource_version.is_empty());
    let replaces = run.sink.replaces();
    assert_eq!(replaces.len(), 1);
    assert_eq!(replaces[0].0.len(), 2000);
    assert!(
        !run.sink.log().iter().any(|c| matches!(c, Call::Add(_))),
        "initial events reach the sink only as the replace"
    );

    // The same watch goes on after the end bookmark.
    create_pod(&scene.direct, "after").await;
    run.added(&scene.key("after")).await;
    assert_eq!(run.lw.watches().len(), 1, "no second watch");
    eprintln!("2000 pods streamed and synced in {took:?}");

    // For contrast, List+Watch on this server (watch cache on): the RV "0" list is
    // served from the cache, which ignores the limit: one page.
    let listed = scene.reflect();
    listed.synced().await;
    assert_eq!(listed.lw.lists().len(), 1);
    assert_eq!(listed.lw.lists()[0].limit, Some(500));
    assert_eq!(listed.sink.keys().len(), 2001);
    run.stop().await;
    listed.stop().await;
}

// ------------------------------------------------------------------ partitions
//
// A partition healed (rule 23) and a compaction during one (rule 22) are replays of streams
// recorded here (kinformer-replay's `tests/partitions.rs`: milliseconds, not seconds, and
// the same every time); `wire_format.rs` runs both live, in every wire format.

// ------------------------------------------------------------------ API server restart

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn apiserver_stopped_and_restarted_backoff_rewatch_converge() {
    init_tracing();
    let cp = ControlPlane::start().await.unwrap();
    let scene = Scene::new(&cp, "restart", 3).await;
    let run = scene.reflect();
    run.synced().await;
    scene.warm_up(&run).await;

    cp.stop_apiserver().unwrap();
    eventually("three failed attempts", MINUTE, || {
        run.errors.unreachable_times().len() >= 3
    })
    .await;
    cp.start_apiserver().await.unwrap();
    create_pod(&scene.direct, "after-restart").await;
    delete_pod(&scene.direct, "p-0").await;
    converge(&run.sink, &scene.direct, 2 * MINUTE).await;

    // While the server was down, attempts were spaced by the backoff, capped at about a
    // second for a server that cannot be reached.
    let g = assert_doubling_backoff(&run.errors.unreachable_times(), 2, 1.0);
    assert!(!run.is_finished());
    eprintln!(
        "restart: {} failed attempts, gaps {g:?}, {} syncs",
        g.len() + 1,
        run.status().syncs()
    );
    run.stop().await;
}

// ------------------------------------------------------------------ RBAC

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn forbidden_list_reaches_the_handler_as_403_and_retries_back_off() {
    let cp = shared().await;
    let scene = Scene::new(cp, "rbac", 0).await;
    // The restricted user may list pods only: configmaps answer 403.
    let cms: Api<ConfigMap> = Api::namespaced(cp.restricted_client().unwrap(), &scene.ns);
    let run = reflect(KubeListerWatcher::new(cms), |r| r);
    eventually("four 403s", MINUTE, || run.errors.len() >= 4).await;
    assert!(
        run.errors.codes().iter().all(|c| *c == Some(403)),
        "{:?}",
        run.errors.texts()
    );
    // Each retry waits for the backoff.
    assert_doubling_backoff(&run.errors.times(), 3, 30.0);
    assert!(!run.status().has_synced());
    assert!(
        !run.is_finished(),
        "the reflector keeps trying, without panicking"
    );
    run.stop().await;
}

// ------------------------------------------------------------------ WatchList fallback

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_server_refusing_streaming_lists_falls_back_to_list_and_watch() {
    let (cp, _turn) = no_cache().await;
    let scene = Scene::new(cp, "fallback", 3).await;

    // What the server says to a streaming list with the WatchList gate off.
    let direct = KubeListerWatcher::new(scene.pods.clone());
    let mut streaming = WatchOptions::new("", Duration::from_secs(10));
    streaming.send_initial_events = true;
    match direct.watch(&streaming).await {
        Err(e @ Error::Api(_)) => assert_eq!(e.status_code(), Some(422), "{e}"),
        Err(e) => panic!("want a status, got {e}"),
        Ok(_) => panic!("the server accepted a streaming list"),
    }

    let run = scene.reflect_with(|r| r.watch_list(true));
    run.synced().await;
    eventually("the plain watch", MINUTE, || run.lw.watches().len() >= 2).await;
    let w = run.lw.watches();
    assert!(w[0].send_initial_events);
    assert!(!w[1].send_initial_events);
    assert_eq!(run.lw.list_starts().len(), 1);
    assert_eq!(run.lw.lists()[0].resource_version, "0");
    assert_eq!(run.sink.keys().len(), 3);
    create_pod(&scene.direct, "after").await;
    run.added(&scene.key("after")).await;
    run.stop().await;
}

// ------------------------------------------------------------------ the kube ListerWatcher

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn kube_lister_watcher_does_selectors_metadata_only_dynamic_objects_and_crds() {
    let scene = Scene::new(shared().await, "lw", 0).await;
    let (ns, client, pods) = (&scene.ns, &scene.client, &scene.pods);
    create_pod(pods, "a").await;
    let mut other = pod("b");
    other.metadata.labels = Some([("app".to_string(), "other".to_string())].into());
    pods.create(&PostParams::default(), &other).await.unwrap();
    // A consistent list (resourceVersion ""), not "0": the watch cache may not hold the
    // objects just created yet, and what is tested here is what is asked and decoded.
    let first = ListOptions::new("", Some(500));
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
    // Without selectors: the namespace's pods.
    assert_eq!(
        KubeListerWatcher::new(pods.clone())
            .list(&first)
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
    let by_meta = reflect(meta, |r| r);

    // DynamicObject for pods.
    let pod_ar = ApiResource::erase::<Pod>(&());
    let dynamic = KubeListerWatcher::new_with(
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &pod_ar),
        &pod_ar,
    );
    let by_dynamic = reflect(dynamic, |r| r);

    eventually("both synced", MINUTE, || {
        by_meta.status().has_synced() && by_dynamic.status().has_synced()
    })
    .await;
    create_pod(pods, "c").await;
    let c = scene.key("c");
    eventually("c in both", MINUTE, || {
        by_meta.sink.keys().contains(&c) && by_dynamic.sink.keys().contains(&c)
    })
    .await;

    // A real server's object of another kind than expected is a typed error.
    let cm_ar = ApiResource::erase::<ConfigMap>(&());
    let mismatched = KubeListerWatcher::new_with(
        Api::<DynamicObject>::namespaced_with(client.clone(), ns, &pod_ar),
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
    let widget_ar =
        kinformer_testenv::create_crd(client, "kinformer.test", "Widget", "widgets", None)
            .await
            .unwrap();
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &widget_ar);
    let w1 =
        DynamicObject::new("w1", &widget_ar).data(serde_json::json!({ "spec": { "size": 1 } }));
    widgets.create(&PostParams::default(), &w1).await.unwrap();
    let by_crd = reflect(
        KubeListerWatcher::new_with(widgets.clone(), &widget_ar),
        |r| r,
    );
    eventually("the widget", MINUTE, || {
        by_crd.sink.keys().contains(&scene.key("w1"))
    })
    .await;
    let w2 =
        DynamicObject::new("w2", &widget_ar).data(serde_json::json!({ "spec": { "size": 2 } }));
    widgets.create(&PostParams::default(), &w2).await.unwrap();
    by_crd.added(&scene.key("w2")).await;
    for run in [by_meta, by_dynamic, by_crd] {
        run.stop().await;
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_watch_event_stream_from_the_real_server_decodes_every_event_kind() {
    let scene = Scene::new(shared().await, "events", 0).await;
    let pods = &scene.pods;
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
    create_pod(pods, "x").await;
    label_pod(pods, "x", "1").await;
    delete_pod(pods, "x").await;
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
            WatchEvent::Bookmark(_) | WatchEvent::Shard(_) => continue,
        });
    }
    assert_eq!(seen.first(), Some(&"added"));
    assert!(seen.contains(&"modified"));
}
