//! End to end: the same reflectors in each [`WireFormat`] against the real etcd +
//! kube-apiserver of kinformer-testenv, side by side on the same objects. Each runs on a
//! client of its own that records the `Content-Type` of what it received, so a test shows
//! which format was really on the wire, and then that the formats agree: the same objects
//! in the sink, field by field, and the same calls on it (what an informer's handlers
//! would be told), through lists, paged lists, streaming lists, watches, partitions and a
//! compaction. Run with `cargo xtask test` (or `cargo test -p kinformer-reflector --
//! --include-ignored` once the control-plane binaries are built).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer_kube::{Compression, KubeListerWatcher, WireFormat};
use kinformer_reflector::{Error, ListOptions, ListerWatcher, WatchOptions};
use kinformer_testenv::eventually;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::core::PartialObjectMeta;
use serde::Serialize;

const FORMATS: [WireFormat; 3] = [WireFormat::Json, WireFormat::Auto, WireFormat::Protobuf];

/// A pod with a field of most kinds the protobuf decoder shows in its JSON form:
/// quantities, `IntOrString` ports (named and numbered), `tolerationSeconds`, zero values
/// that JSON omits, an owner reference, annotations, env from a field.
fn varied_pod(name: &str, i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": name,
            "labels": { "app": "kinformer", "i": i.to_string() },
            "annotations": { "note": format!("pod {i}"), "empty": "" },
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                "uid": "9d5e3a8e-0000-4000-8000-000000000001", "controller": true
            }]
        },
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "securityContext": { "runAsUser": 0, "runAsNonRoot": false },
            "containers": [{
                "name": "c",
                "image": "busybox",
                "ports": [{ "name": "http", "containerPort": 8080 }],
                "resources": {
                    "requests": { "cpu": "250m", "memory": "64Mi" },
                    "limits": { "cpu": "1", "memory": format!("{}Mi", 128 + i) }
                },
                "env": [
                    { "name": "PLAIN", "value": "v" },
                    { "name": "NODE", "valueFrom": { "fieldRef": { "fieldPath": "spec.nodeName" } } }
                ],
                "livenessProbe": { "httpGet": { "path": "/", "port": "http" }, "periodSeconds": 3 },
                "readinessProbe": { "tcpSocket": { "port": 8080 } }
            }],
            "tolerations": [
                { "key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30 },
                { "key": "z", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0 }
            ],
            "volumes": [{ "name": "scratch", "emptyDir": { "sizeLimit": "1Gi" } }]
        }
    }))
    .expect("a valid pod")
}

/// Asserts that two sinks' objects are equal, naming the first object that differs.
/// Compared as the JSON they serialize to: every field k8s-openapi (or kube) holds.
fn assert_same<K: Serialize>(
    what: &str,
    want: &BTreeMap<String, Arc<K>>,
    got: &BTreeMap<String, Arc<K>>,
) {
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>(),
        "{what}: other keys"
    );
    for (key, w) in want {
        let w = serde_json::to_value(&**w).unwrap();
        let g = serde_json::to_value(&*got[key]).unwrap();
        assert!(w == g, "{what}: {key} differs:\n want {w}\n  got {g}");
    }
}

/// One reflector of a comparison: what it is, its run, what its client received.
struct Contender {
    label: String,
    format: WireFormat,
    run: Run,
    types: ContentTypes,
}

impl Contender {
    /// Asserts that the client received what `format` asks for from a server that serves
    /// the type in protobuf.
    fn assert_format(&self) {
        let seen = self.types.seen();
        match self.format {
            WireFormat::Json => assert!(self.types.all_json(), "{}: {seen:?}", self.label),
            _ => assert!(self.types.all_protobuf(), "{}: {seen:?}", self.label),
        }
    }
}

/// Starts a reflector over the pods of `scene` in each format, with List+Watch
/// (`watch_list` false) or a streaming list, each on a recording client of its own.
fn pod_contenders(scene: &Scene, formats: &[WireFormat], watch_list: bool) -> Vec<Contender> {
    formats
        .iter()
        .map(|&format| {
            let (lw, types) = recorded(scene.config.clone(), format, |c| {
                KubeListerWatcher::new(Api::<Pod>::namespaced(c, &scene.ns))
            });
            Contender {
                label: format!("{format:?}, watch list {watch_list}"),
                format,
                run: reflect(lw, |r| r.watch_list(watch_list)),
                types,
            }
        })
        .collect()
}

/// JSON and protobuf reflectors over the pods of `scene` (List+Watch), once synced.
async fn json_and_protobuf(scene: &Scene) -> Vec<Contender> {
    let all = pod_contenders(scene, &[WireFormat::Json, WireFormat::Protobuf], false);
    for c in &all {
        c.run.synced().await;
    }
    all
}

async fn stop_all(all: Vec<Contender>) {
    for c in all {
        c.run.stop().await;
    }
}

/// Asserts that every contender holds the same pods as the first and made the same calls
/// from its `n`th replace on.
fn assert_agree(contenders: &[Contender], since_replace: usize) {
    let (first, rest) = contenders.split_first().expect("contenders");
    let want = first.run.sink.stored::<Pod>();
    let calls = first.run.sink.changes_since_replace(since_replace);
    for c in rest {
        let what = format!("{} against {}", c.label, first.label);
        assert_same(&what, &want, &c.run.sink.stored::<Pod>());
        assert_eq!(
            c.run.sink.changes_since_replace(since_replace),
            calls,
            "{what}: other calls"
        );
    }
}

// ------------------------------------------------------------------ typed objects

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn pods_in_every_wire_format_give_the_same_cache_and_the_same_calls() {
    let scene = Scene::new(shared().await, "wire", 0).await;
    for i in 0..20 {
        let pod = varied_pod(&format!("v-{i}"), i);
        scene
            .direct
            .create(&PostParams::default(), &pod)
            .await
            .expect("create a varied pod");
    }
    let mut all = pod_contenders(&scene, &FORMATS, false);
    all.extend(pod_contenders(&scene, &FORMATS, true));
    for c in &all {
        c.run.synced().await;
    }
    create_pod(&scene.direct, "new").await;
    label_pod(&scene.direct, "v-0", "changed").await;
    delete_pod(&scene.direct, "v-1").await;
    create_pod(&scene.direct, "short-lived").await;
    delete_pod(&scene.direct, "short-lived").await;
    for c in &all {
        converge(&c.run.sink, &scene.direct, MINUTE).await;
    }
    for c in &all {
        c.assert_format();
        assert!(
            c.run.errors.texts().is_empty(),
            "{}: {:?}",
            c.label,
            c.run.errors.texts()
        );
        assert_eq!(c.run.status().syncs(), 1, "{}: one sync", c.label);
    }
    // The same objects field by field, and the same calls, list and events alike.
    assert_agree(&all, 1);
    // Each delete (grace period 0) is an update setting deletionTimestamp, then the delete.
    let calls: Vec<Call> = all[0]
        .run
        .sink
        .changes_since_replace(1)
        .into_iter()
        .skip(1)
        .map(|(call, _rv)| call)
        .collect();
    let key = |name| scene.key(name);
    assert_eq!(
        calls,
        [
            Call::Add(key("new")),
            Call::Update(key("v-0")),
            Call::Update(key("v-1")),
            Call::Delete(key("v-1")),
            Call::Add(key("short-lived")),
            Call::Update(key("short-lived")),
            Call::Delete(key("short-lived")),
        ]
    );
    stop_all(all).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_paged_list_in_protobuf_comes_in_the_same_pages_as_json() {
    let (cp, _turn) = no_cache().await;
    let scene = Scene::new(cp, "wire-pages", 1200).await;
    let all = json_and_protobuf(&scene).await;
    for c in &all {
        c.assert_format();
        // The watch cache is off: the server honours the limit at RV "0".
        let pages = c.run.lw.lists();
        assert_eq!(pages.len(), 3, "{}: {pages:?}", c.label);
        assert!(pages[1..].iter().all(|p| p.continue_token.is_some()));
        assert_eq!(c.run.sink.replaces()[0].0.len(), 1200);
    }
    label_pod(&scene.direct, "p-7", "changed").await;
    for c in &all {
        converge(&c.run.sink, &scene.direct, MINUTE).await;
    }
    assert_agree(&all, 1);
    stop_all(all).await;
}

// ------------------------------------------------------------------ metadata only

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn metadata_only_in_protobuf_gives_what_json_gives() {
    let scene = Scene::new(shared().await, "wire-meta", 5).await;
    let mut all = Vec::new();
    for watch_list in [false, true] {
        for format in FORMATS {
            let (lw, types) = recorded(scene.config.clone(), format, |c| {
                KubeListerWatcher::metadata_only(Api::<Pod>::namespaced(c, &scene.ns))
            });
            all.push((
                format,
                watch_list,
                reflect(lw, |r| r.watch_list(watch_list)),
                types,
            ));
        }
    }
    for (_, _, run, _) in &all {
        run.synced().await;
    }
    label_pod(&scene.direct, "p-0", "changed").await;
    delete_pod(&scene.direct, "p-1").await;
    for (_, _, run, _) in &all {
        converge(&run.sink, &scene.direct, MINUTE).await;
    }
    let want = all[0].2.sink.stored::<PartialObjectMeta<Pod>>();
    let calls = all[0].2.sink.changes_since_replace(1);
    for (format, watch_list, run, types) in &all {
        let what = format!("{format:?}, watch list {watch_list}");
        let seen = types.seen();
        match format {
            WireFormat::Json => assert!(types.all_json(), "{what}: {seen:?}"),
            _ => assert!(types.all_protobuf(), "{what}: {seen:?}"),
        }
        assert_same(&what, &want, &run.sink.stored());
        assert_eq!(run.sink.changes_since_replace(1), calls, "{what}");
        let labels = run.sink.stored::<PartialObjectMeta<Pod>>()[&scene.key("p-0")]
            .metadata
            .labels
            .clone()
            .unwrap_or_default();
        assert_eq!(labels.get("touched").map(String::as_str), Some("changed"));
    }
    for (_, _, run, _) in all {
        run.stop().await;
    }
}

// ------------------------------------------------------------------ custom resources

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_custom_resource_is_json_on_the_wire_whatever_the_format_and_its_metadata_protobuf() {
    let scene = Scene::new(shared().await, "wire-crd", 0).await;
    let admin = scene.direct.clone().into_client();
    let ar =
        kinformer_testenv::create_crd(&admin, "wire.kinformer.test", "Gadget", "gadgets", None)
            .await
            .unwrap();
    let direct = Api::<DynamicObject>::namespaced_with(admin, &scene.ns, &ar);
    for i in 0..3 {
        let g = DynamicObject::new(&format!("g{i}"), &ar)
            .data(serde_json::json!({ "spec": { "size": i, "tags": ["a", "b"] } }));
        direct.create(&PostParams::default(), &g).await.unwrap();
    }
    let mut typed = Vec::new();
    let mut meta = Vec::new();
    for format in FORMATS {
        let (lw, types) = recorded(scene.config.clone(), format, |c| {
            KubeListerWatcher::<DynamicObject>::new_with(
                Api::namespaced_with(c, &scene.ns, &ar),
                &ar,
            )
        });
        typed.push((format, reflect(lw, |r| r), types));
        let (lw, types) = recorded(scene.config.clone(), format, |c| {
            KubeListerWatcher::<PartialObjectMeta<DynamicObject>>::new_with(
                Api::namespaced_with(c, &scene.ns, &ar),
                &ar,
            )
        });
        meta.push((format, reflect(lw, |r| r), types));
    }
    let g3 = DynamicObject::new("g3", &ar).data(serde_json::json!({ "spec": { "size": 3 } }));
    direct.create(&PostParams::default(), &g3).await.unwrap();
    let key = scene.key("g3");
    for (_, run, _) in typed.iter().chain(&meta) {
        eventually("g3", MINUTE, || run.sink.keys().contains(&key)).await;
    }
    let want = typed[0].1.sink.stored::<DynamicObject>();
    assert_eq!(want.len(), 4);
    for (format, run, types) in &typed {
        // The API server serves custom resources in JSON only: asked for protobuf
        // (Protobuf), it answers JSON, which is decoded as such.
        assert!(types.all_json(), "{format:?}: {:?}", types.seen());
        assert_same(&format!("{format:?}"), &want, &run.sink.stored());
        assert!(run.errors.texts().is_empty(), "{:?}", run.errors.texts());
    }
    // Their metadata is a built-in type: protobuf where asked for.
    let want = meta[0].1.sink.stored::<PartialObjectMeta<DynamicObject>>();
    for (format, run, types) in &meta {
        let seen = types.seen();
        match format {
            WireFormat::Json => assert!(types.all_json(), "{format:?}: {seen:?}"),
            _ => assert!(types.all_protobuf(), "{format:?}: {seen:?}"),
        }
        assert_same(&format!("metadata, {format:?}"), &want, &run.sink.stored());
    }
    for (_, run, _) in typed.into_iter().chain(meta) {
        run.stop().await;
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn an_object_of_another_kind_in_protobuf_is_unexpected_kind() {
    let scene = Scene::new(shared().await, "wire-kind", 1).await;
    // Pods, read as ConfigMaps: a wrong ApiResource for a dynamic type.
    let (pod_ar, cm_ar) = (
        ApiResource::erase::<Pod>(&()),
        ApiResource::erase::<ConfigMap>(&()),
    );
    let (lw, types) = recorded(scene.config.clone(), WireFormat::Protobuf, |c| {
        KubeListerWatcher::new_with(
            Api::<DynamicObject>::namespaced_with(c, &scene.ns, &pod_ar),
            &cm_ar,
        )
    });
    // The list's envelope says PodList.
    match lw.list(&ListOptions::new("0", None)).await {
        Err(Error::UnexpectedKind { expected, actual }) => {
            assert_eq!(
                (expected.as_str(), actual.as_str()),
                ("v1/ConfigMap", "v1/Pod")
            );
        }
        other => panic!("want UnexpectedKind, got {other:?}"),
    }
    // Each event's envelope says Pod.
    let mut w = lw
        .watch(&WatchOptions::new("0", Duration::from_secs(30)))
        .await
        .unwrap();
    match w.next().await {
        Some(Err(Error::UnexpectedKind { actual, .. })) => assert_eq!(actual, "v1/Pod"),
        other => panic!("want UnexpectedKind, got {other:?}"),
    }
    assert!(types.all_protobuf(), "{:?}", types.seen());
}

// ------------------------------------------------------------------ faults

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_partition_healed_resumes_each_format_without_relist() {
    let scene = Scene::behind_proxy(shared().await, "wire-partition", 5).await;
    let all = json_and_protobuf(&scene).await;
    scene.warm_up_each(all.iter().map(|c| &c.run)).await;
    scene.proxy().partition();
    let direct = &scene.direct;
    create_pod(direct, "new-1").await;
    label_pod(direct, "p-0", "during").await;
    delete_pod(direct, "p-1").await;
    for c in &all {
        eventually("a failed re-watch", MINUTE, || {
            !c.run.errors.unreachable_times().is_empty()
        })
        .await;
    }
    scene.proxy().heal();
    for c in &all {
        converge(&c.run.sink, direct, 2 * MINUTE).await;
        c.assert_format();
        assert_eq!(c.run.status().syncs(), 1, "{}: no relist", c.label);
        assert!(
            c.run.sink.deletes().contains(&scene.key("p-1")),
            "{}",
            c.label
        );
    }
    assert_agree(&all, 1);
    stop_all(all).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn a_compaction_during_a_partition_relists_each_format_exactly_once() {
    let (cp, _turn) = no_cache().await;
    let scene = Scene::behind_proxy(cp, "wire-compact", 5).await;
    let all = json_and_protobuf(&scene).await;
    scene.warm_up_each(all.iter().map(|c| &c.run)).await;
    scene.proxy().partition();
    let direct = &scene.direct;
    delete_pod(direct, "p-1").await;
    create_pod(direct, "new-1").await;
    label_pod(direct, "p-0", "during").await;
    cp.compact_etcd().await.unwrap();
    scene.proxy().heal();
    for c in &all {
        converge(&c.run.sink, direct, 2 * MINUTE).await;
        eventually("the relist", MINUTE, || c.run.status().syncs() == 2).await;
        c.assert_format();
        // The 410 came as a Status in the client's format, and kept its code.
        assert!(
            c.run.errors.codes().contains(&Some(410)),
            "{}: {:?}",
            c.label,
            c.run.errors.texts()
        );
        assert_eq!(c.run.sink.replaces().len(), 2, "{}: one relist", c.label);
        assert!(!c.run.sink.deletes().contains(&scene.key("p-1")));
    }
    // The same state after the relist, reached by the same calls.
    assert_agree(&all, 2);
    stop_all(all).await;
}

// ------------------------------------------------------------------ managedFields dropped

/// `drop_managed_fields` on a server without KEP-5958 (Kubernetes 1.37.2 has no
/// `ManagedFieldsOptOut`): the `drop` parameter is accepted and ignored, the server sends
/// `managedFields`, and the lister-watcher strips them itself — in every wire format, from
/// lists and from streaming lists and watch events — and says so.
#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn managed_fields_dropped_where_the_server_keeps_them_are_stripped_here_in_every_format() {
    let scene = Scene::new(shared().await, "wire-drop", 3).await;
    let with = scene.direct.get("p-0").await.unwrap();
    assert!(
        with.metadata.managed_fields.is_some(),
        "the server keeps them"
    );
    for format in FORMATS {
        let (client, types) = recording_client(scene.config.clone()).unwrap();
        let pods = KubeListerWatcher::new(Api::<Pod>::namespaced(client, &scene.ns))
            .wire_format(format)
            .drop_managed_fields();
        let counter = pods.clone();
        let lw = pods.cached();
        let page = lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
        assert_eq!(page.items.len(), 3, "{format:?}");
        assert!(
            page.items
                .iter()
                .all(|p| p.meta().managed_fields().is_none()),
            "{format:?}"
        );
        let mut options = WatchOptions::new("", Duration::from_secs(30));
        options.allow_bookmarks = true;
        options.send_initial_events = true;
        let mut events = lw.watch(&options).await.unwrap();
        let mut added = 0;
        while added < 3 {
            if let kinformer_reflector::WatchEvent::Added(p) = events.next().await.unwrap().unwrap()
            {
                assert!(p.meta().managed_fields().is_none(), "{format:?}");
                added += 1;
            }
        }
        let seen = counter.managed_fields_dropped();
        assert_eq!(
            (seen.stripped_here, seen.arrived_without),
            (6, 0),
            "{format:?}"
        );
        assert!(
            match format {
                WireFormat::Json => types.all_json(),
                _ => types.all_protobuf(),
            },
            "{format:?}: {:?}",
            types.seen()
        );
    }
}

// ------------------------------------------------------------------ gzip

/// `Compression::Gzip` on a 1.37 server: a list over 128 KiB and a streaming list come
/// gzipped (`WatchListCompression`, on by default in 1.37) and decode to the same objects in
/// fewer bytes, in each wire format; a change made after the streaming list's end arrives
/// on the same compressed response (a member per flush) without waiting for another.
#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn gzip_lists_and_streaming_lists_decode_to_the_same_objects_in_fewer_bytes() {
    let scene = Scene::new(shared().await, "wire-gzip", 400).await;
    for format in [WireFormat::Json, WireFormat::Auto] {
        let mut got = Vec::new();
        for compression in [Compression::None, Compression::Gzip] {
            let lw =
                KubeListerWatcher::new(Api::<Pod>::namespaced(scene.client.clone(), &scene.ns))
                    .wire_format(format)
                    .compression(compression);
            let page = lw.list(&ListOptions::new("0", None)).await.unwrap();
            let list_bytes = lw.bytes_received();
            let mut options = WatchOptions::new("", Duration::from_secs(60));
            options.allow_bookmarks = true;
            options.send_initial_events = true;
            let mut events = lw.watch(&options).await.unwrap();
            let mut streamed = BTreeMap::new();
            loop {
                match events.next().await.unwrap().unwrap() {
                    kinformer_reflector::WatchEvent::Added(p) => {
                        streamed.insert(p.metadata.name.clone().unwrap(), p);
                    }
                    kinformer_reflector::WatchEvent::Bookmark(b) if b.initial_events_end => break,
                    _ => {}
                }
            }
            let stream_bytes = lw.bytes_received() - list_bytes;
            label_pod(&scene.direct, "p-7", &format!("{compression:?}")).await;
            let changed = tokio::time::timeout(MINUTE, async {
                loop {
                    if let kinformer_reflector::WatchEvent::Modified(p) =
                        events.next().await.unwrap().unwrap()
                    {
                        return p;
                    }
                }
            })
            .await
            .expect("the change after the initial events arrives");
            assert_eq!(changed.metadata.name.as_deref(), Some("p-7"));
            let mut listed: Vec<Pod> = page.items.iter().map(|p| (**p).clone()).collect();
            listed.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            assert_eq!(listed.len(), 400);
            assert_eq!(streamed.len(), 400);
            got.push((
                listed,
                streamed.into_values().collect::<Vec<_>>(),
                list_bytes,
                stream_bytes,
            ));
        }
        let (plain, gzip) = (&got[0], &got[1]);
        assert_eq!(plain.0.len(), gzip.0.len());
        for (a, b) in plain
            .0
            .iter()
            .zip(&gzip.0)
            .chain(plain.1.iter().zip(&gzip.1))
        {
            assert_eq!(a.metadata.name, b.metadata.name, "{format:?}");
            assert_eq!(a.spec, b.spec, "{format:?}");
        }
        assert!(
            gzip.2 * 3 < plain.2,
            "{format:?}: list {} vs {} bytes",
            gzip.2,
            plain.2
        );
        assert!(
            gzip.3 * 3 < plain.3,
            "{format:?}: streaming list {} vs {} bytes",
            gzip.3,
            plain.3
        );
    }
}

// ------------------------------------------------------------------ CBOR

static CBOR_PLANE: tokio::sync::OnceCell<kinformer_testenv::ControlPlane> =
    tokio::sync::OnceCell::const_new();

/// A control plane serving CBOR (`CBORServingAndStorage`, alpha and off in 1.37).
async fn cbor_plane() -> &'static kinformer_testenv::ControlPlane {
    init_tracing();
    CBOR_PLANE
        .get_or_try_init(|| {
            kinformer_testenv::ControlPlane::start_with(
                kinformer_testenv::Options::default().feature_gate("CBORServingAndStorage", true),
            )
        })
        .await
        .expect("start the CBOR control plane")
}

fn all_cbor(types: &ContentTypes) -> bool {
    let seen = types.seen();
    !seen.is_empty()
        && seen
            .iter()
            .all(|t| t == "application/cbor" || t == "application/cbor-seq")
}

/// CBOR against JSON on a server that serves it: KEDA `ScaledObject`s (a custom resource,
/// whose only binary format CBOR is) and pods, listed, streamed and watched through adds,
/// changes and deletes, give the same objects and the same calls; every response was CBOR.
#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn custom_resources_and_pods_in_cbor_give_what_json_gives() {
    let scene = Scene::new(cbor_plane().await, "wire-cbor", 5).await;
    let admin = scene.direct.clone().into_client();
    let ar = kinformer_testenv::create_scaled_object_crd(&admin)
        .await
        .unwrap();
    let direct = Api::<DynamicObject>::namespaced_with(admin, &scene.ns, &ar);
    kinformer_testenv::apply_realistic_scaled_objects(&direct, "so", 20)
        .await
        .unwrap();
    let mut scaled = Vec::new();
    let mut pods = Vec::new();
    for format in [WireFormat::Json, WireFormat::Cbor] {
        for watch_list in [false, true] {
            let (lw, types) = recorded(scene.config.clone(), format, |c| {
                KubeListerWatcher::<DynamicObject>::new_with(
                    Api::namespaced_with(c, &scene.ns, &ar),
                    &ar,
                )
            });
            scaled.push((format, reflect(lw, |r| r.watch_list(watch_list)), types));
            let (lw, types) = recorded(scene.config.clone(), format, |c| {
                KubeListerWatcher::new(Api::<Pod>::namespaced(c, &scene.ns))
            });
            pods.push((format, reflect(lw, |r| r.watch_list(watch_list)), types));
        }
    }
    for (_, run, _) in scaled.iter().chain(&pods) {
        run.synced().await;
    }
    kinformer_testenv::apply_realistic_scaled_objects(&direct, "late", 1)
        .await
        .unwrap();
    direct.delete("so-3", &Default::default()).await.unwrap();
    label_pod(&scene.direct, "p-0", "changed").await;
    delete_pod(&scene.direct, "p-1").await;
    let (late, gone) = (scene.key("late-0"), scene.key("so-3"));
    for (_, run, _) in &scaled {
        eventually("the late object and the delete", MINUTE, || {
            let keys = run.sink.keys();
            keys.contains(&late) && !keys.contains(&gone)
        })
        .await;
    }
    for (_, run, _) in &pods {
        converge(&run.sink, &scene.direct, MINUTE).await;
    }
    let want = scaled[0].1.sink.stored::<DynamicObject>();
    assert_eq!(want.len(), 20);
    let calls = scaled[0].1.sink.changes_since_replace(1);
    for (format, run, types) in &scaled {
        match format {
            WireFormat::Cbor => assert!(all_cbor(types), "{:?}", types.seen()),
            _ => assert!(types.all_json(), "{:?}", types.seen()),
        }
        assert_same(
            &format!("scaled objects, {format:?}"),
            &want,
            &run.sink.stored(),
        );
        assert_eq!(run.sink.changes_since_replace(1), calls, "{format:?}");
        assert!(run.errors.texts().is_empty(), "{:?}", run.errors.texts());
    }
    let want = pods[0].1.sink.stored::<Pod>();
    for (format, run, types) in &pods {
        if *format == WireFormat::Cbor {
            assert!(all_cbor(types), "{:?}", types.seen());
        }
        assert_same(&format!("pods, {format:?}"), &want, &run.sink.stored());
        assert!(run.errors.texts().is_empty(), "{:?}", run.errors.texts());
    }
    for (_, run, _) in scaled.into_iter().chain(pods) {
        run.stop().await;
    }
}

/// A server without `CBORServingAndStorage` (1.37's default) answers a request for CBOR in
/// JSON, which is decoded as such: nothing fails.
#[tokio::test]
#[ignore = "needs the local control plane: cargo xtask test"]
async fn cbor_asked_of_a_server_without_it_is_answered_in_json() {
    let scene = Scene::new(shared().await, "wire-nocbor", 3).await;
    for watch_list in [false, true] {
        let (lw, types) = recorded(scene.config.clone(), WireFormat::Cbor, |c| {
            KubeListerWatcher::new(Api::<Pod>::namespaced(c, &scene.ns))
        });
        let run = reflect(lw, |r| r.watch_list(watch_list));
        run.synced().await;
        label_pod(&scene.direct, "p-0", &format!("{watch_list}")).await;
        converge(&run.sink, &scene.direct, MINUTE).await;
        assert!(types.all_json(), "{:?}", types.seen());
        assert!(run.errors.texts().is_empty(), "{:?}", run.errors.texts());
        run.stop().await;
    }
}
