//! What the default informer cache's reads cost — a `ThreadSafeStore` of `Cached<Pod>`s read
//! through their views — against the decoded cache (client-go's: a `ThreadSafeStore` of
//! `Pod`s), on 10k pods shaped like the API server's (metadata with uid, owner, timestamps;
//! one container with resources, env, mounts; status with conditions and a container
//! status), across 100 namespaces and 1000 nodes, indexed by namespace and by node (the
//! index function reads each side's object: a view, or the struct).
//!
//! Pod `i` is `ns-{i % 100}/pod-{i}` on `node-{i % 1000}`, labelled `app=app-{i % 50}` and
//! `tier={web,db,cache}[i % 3]`. Lookups walk the keys with a stride (7919) so that
//! consecutive reads touch unrelated entries; `get_repeat` reads one key over and over.
//!
//! Every read takes `spec.nodeName` of what it gets, as a reconcile reads a field: bench
//! names are `read/{decoded,cached}[+managedFields]/{lister_get_field, get_repeat_field,
//! by_index_field, list_selector_field, list_all_field}`, where `lister_get_field` is a
//! namespaced lister's `get(name)` (the key built as client-go's lister builds it) plus the
//! field, the figure the default cache is held to (≤ 250 ns). One cached pod read both
//! ways: `read/one/{view_field, decode_field}`. Before measuring, the heap bytes per pod of
//! each store are printed (RSS growth while the store is filled, divided by the pod count).
//!
//! `from_protobuf/pod/{decode_encode,transcode}`: one realistic pod (`benches/pod.pb`, a copy
//! of kinformer-protobuf's `tests/data/pod.pb`, written by Go's encoder: four containers,
//! probes, volumes, affinity, two managedFields entries, a running status) from its protobuf
//! body to the cache's entry: decoded into a `Pod` and encoded (what a decoding
//! lister-watcher's objects cost), against transcoded straight into the encoding
//! (`Cached::from_protobuf`, what the default informer does), no `Pod` built.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use k8s_openapi::api::core::v1::Pod;
use kinformer_compact_store::Cached;
use kinformer_core::MetaObject;
use kinformer_indexer::{
    IndexFunc, Indexer, Indexers, Lister, ThreadSafeStore, namespace_indexers, parse_selector,
};

const PODS: usize = 10_000;
const NAMESPACES: usize = 100;
const NODES: usize = 1000;
const SELECTOR: &str = "app=app-7,tier in (web,db)";

/// Pod `i` as the API server would send it, managedFields stripped.
fn pod(i: usize) -> Pod {
    let tiers = ["web", "db", "cache"];
    let json = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("pod-{i}"),
            "generateName": format!("web-{}-", i % 50),
            "namespace": format!("ns-{}", i % NAMESPACES),
            "uid": format!("0c1b6f2e-3d4a-4b5c-8d9e-{i:012}"),
            "resourceVersion": (1_000_000 + i).to_string(),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {
                "app": format!("app-{}", i % 50),
                "tier": tiers[i % 3],
                "pod-template-hash": format!("{:010x}", i % 50),
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": format!("web-{}", i % 50),
                "uid": format!("9f8e7d6c-5b4a-4321-8765-{:012}", i % 50),
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "nodeName": format!("node-{}", i % NODES),
            "containers": [{
                "name": "app",
                "image": "registry.example.com/team/app:1.2.3",
                "ports": [{ "containerPort": 8080, "protocol": "TCP" }],
                "env": [{ "name": "MODE", "value": "production" }],
                "resources": {
                    "requests": { "cpu": "100m", "memory": "128Mi" },
                    "limits": { "memory": "256Mi" },
                },
                "volumeMounts": [{
                    "name": "kube-api-access",
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "readOnly": true,
                }],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "tolerations": [
                { "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 },
                { "key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 },
            ],
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": [
                { "type": "Initialized", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z" },
                { "type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z" },
                { "type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z" },
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z" },
            ],
            "hostIP": format!("10.0.{}.{}", (i % NODES) / 250, (i % NODES) % 250),
            "podIP": format!("10.1.{}.{}", i / 250, i % 250),
            "startTime": "2026-01-01T00:00:01Z",
            "containerStatuses": [{
                "name": "app",
                "state": { "running": { "startedAt": "2026-01-01T00:00:04Z" } },
                "ready": true,
                "restartCount": 0,
                "image": "registry.example.com/team/app:1.2.3",
                "imageID": "registry.example.com/team/app@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
                "containerID": format!("containerd://{i:064x}"),
                "started": true,
            }],
            "qosClass": "Burstable",
        },
    });
    serde_json::from_value(json).expect("a valid pod")
}

/// Pod `i` with the `managedFields` a cluster keeps (every field of the spec and metadata
/// owned by the controller that applied them, the status by the kubelet, as server-side
/// apply writes them): what the default cache holds unless a transform strips them.
fn pod_with_managed_fields(i: usize) -> Pod {
    let mut p = pod(i);
    let f = |v: serde_json::Value| k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(v);
    let spec = serde_json::json!({
        "f:metadata": {
            "f:generateName": {},
            "f:labels": { ".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {} },
            "f:ownerReferences": { ".": {}, "k:{\"uid\":\"9f8e7d6c-5b4a-4321-8765-000000000007\"}": {} },
        },
        "f:spec": {
            "f:containers": { "k:{\"name\":\"app\"}": {
                ".": {}, "f:env": { ".": {}, "k:{\"name\":\"MODE\"}": { ".": {}, "f:name": {}, "f:value": {} } },
                "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                "f:ports": { ".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": { ".": {}, "f:containerPort": {}, "f:protocol": {} } },
                "f:resources": { ".": {}, "f:limits": { ".": {}, "f:memory": {} }, "f:requests": { ".": {}, "f:cpu": {}, "f:memory": {} } },
                "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {},
                "f:volumeMounts": { ".": {}, "k:{\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\"}": { ".": {}, "f:mountPath": {}, "f:name": {}, "f:readOnly": {} } },
            } },
            "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:nodeName": {}, "f:preemptionPolicy": {},
            "f:priority": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:serviceAccountName": {},
            "f:terminationGracePeriodSeconds": {},
            "f:tolerations": {},
        },
    });
    let status = serde_json::json!({
        "f:status": {
            "f:conditions": {
                "k:{\"type\":\"ContainersReady\"}": { ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {} },
                "k:{\"type\":\"Initialized\"}": { ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {} },
                "k:{\"type\":\"PodScheduled\"}": { ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {} },
                "k:{\"type\":\"Ready\"}": { ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {} },
            },
            "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {},
            "f:podIPs": { ".": {}, "k:{\"ip\":\"10.1.0.1\"}": { ".": {}, "f:ip": {} } },
            "f:startTime": {},
        },
    });
    p.metadata.managed_fields = Some(vec![
        serde_json::from_value(serde_json::json!({
            "manager": "kube-controller-manager", "operation": "Apply", "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
        }))
        .map(
            |mut e: k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry| {
                e.fields_v1 = Some(f(spec));
                e
            },
        )
        .expect("a valid entry"),
        serde_json::from_value(serde_json::json!({
            "manager": "kubelet", "operation": "Apply", "apiVersion": "v1",
            "time": "2026-01-01T00:00:05Z", "fieldsType": "FieldsV1", "subresource": "status",
        }))
        .map(
            |mut e: k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry| {
                e.fields_v1 = Some(f(status));
                e
            },
        )
        .expect("a valid entry"),
    ]);
    p
}

/// `spec.nodeName` of a decoded pod.
fn node_of(p: &Pod) -> Option<&str> {
    p.spec.as_ref()?.node_name.as_deref()
}

/// `spec.nodeName` of a cached pod, through its view.
fn view_node_of(p: &Cached<Pod>) -> Option<&str> {
    p.spec()?.node_name()
}

fn indexers<T: 'static>(node: for<'a> fn(&'a T) -> Option<&'a str>) -> Indexers<T> {
    let mut indexers = namespace_indexers();
    indexers.insert("byNode".to_owned(), IndexFunc::single(node));
    indexers
}

/// Resident set size in bytes, from /proc (None elsewhere).
fn rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// A store of `T` filled with pods made one at a time (as an informer does: nothing else
/// keeps them), printing its RSS growth per pod.
fn filled<T: MetaObject + Send + Sync + 'static>(
    name: &str,
    node: for<'a> fn(&'a T) -> Option<&'a str>,
    make: impl Fn(usize) -> T,
) -> Arc<ThreadSafeStore<T>> {
    let store = ThreadSafeStore::new(indexers(node));
    let before = rss();
    for i in 0..PODS {
        store.add(Arc::new(make(i))).expect("a valid pod");
    }
    if let (Some(b), Some(a)) = (before, rss()) {
        eprintln!(
            "store/{name}/rss_bytes_per_pod: {:.0}",
            a.saturating_sub(b) as f64 / PODS as f64
        );
    }
    Arc::new(store)
}

/// The read paths of one store, each reading `spec.nodeName` of what it gets.
fn bench_reads<T: MetaObject + Send + Sync + 'static>(
    c: &mut Criterion,
    name: &str,
    store: Arc<ThreadSafeStore<T>>,
    node: for<'a> fn(&'a T) -> Option<&'a str>,
) {
    let names: Vec<(String, String)> = (0..PODS)
        .map(|i| (format!("ns-{}", i % NAMESPACES), format!("pod-{i}")))
        .collect();
    let nodes: Vec<String> = (0..NODES).map(|i| format!("node-{i}")).collect();
    let lister = Lister::new(Arc::clone(&store));
    let selector = parse_selector(SELECTOR).expect("valid selector");
    let len = |n: Option<&str>| n.map_or(0, str::len);
    let mut g = c.benchmark_group(format!("read/{name}"));
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));

    let mut i = 0;
    g.bench_function("lister_get_field", |b| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            let (ns, name) = &names[i];
            let pod = lister.namespaced(ns).get(black_box(name)).expect("stored");
            black_box(len(node(&pod)))
        })
    });
    g.bench_function("get_repeat_field", |b| {
        b.iter(|| {
            let (ns, name) = &names[42];
            let pod = lister.namespaced(ns).get(black_box(name)).expect("stored");
            black_box(len(node(&pod)))
        })
    });
    let mut n = 0;
    g.bench_function("by_index_field", |b| {
        b.iter(|| {
            n = (n + 7) % NODES;
            let objs = store.by_index("byNode", &nodes[n]).expect("known index");
            black_box(objs.iter().map(|o| len(node(o))).sum::<usize>())
        })
    });
    g.bench_function("list_selector_field", |b| {
        b.iter(|| {
            let objs = lister.list(&selector);
            black_box(objs.iter().map(|o| len(node(o))).sum::<usize>())
        })
    });
    g.bench_function("list_all_field", |b| {
        b.iter(|| {
            let objs = store.list();
            black_box(objs.iter().map(|o| len(node(o))).sum::<usize>())
        })
    });
    g.finish();
}

/// One cached pod, its field read through the view and through a decode.
fn bench_one(c: &mut Criterion) {
    let one = Cached::new(&pod_with_managed_fields(42)).expect("encodes");
    let len = |n: Option<&str>| n.map_or(0, str::len);
    let mut g = c.benchmark_group("read/one");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    g.bench_function("view_field", |b| {
        b.iter(|| black_box(len(black_box(&one).spec().and_then(|s| s.node_name()))))
    });
    g.bench_function("decode_field", |b| {
        b.iter(|| {
            let pod = black_box(&one).decode().expect("decodes");
            black_box(len(node_of(&pod)))
        })
    });
    g.finish();
}

/// One pod's protobuf body.
const POD_PB: &[u8] = include_bytes!("pod.pb");

/// The pod from protobuf into the cache's entry: decoded then encoded, or transcoded.
fn bench_from_protobuf(c: &mut Criterion) {
    let decode_encode = |body: &[u8]| {
        let pod = kinformer_protobuf::from_slice::<Pod>(body).expect("pod");
        Cached::new(&pod).expect("encodes")
    };
    let transcode = |body: &[u8]| {
        let object = kinformer_protobuf::Object::from_bytes(body).expect("envelope");
        Cached::<Pod>::from_protobuf(&object).expect("transcodes")
    };
    // Both paths give entries that decode to the same pod.
    let decoded = kinformer_protobuf::from_slice::<Pod>(POD_PB).expect("pod");
    assert_eq!(transcode(POD_PB).decode().expect("decodes"), decoded);
    assert_eq!(decode_encode(POD_PB).decode().expect("decodes"), decoded);
    eprintln!(
        "from_protobuf/pod: protobuf body {} B; entry: decode then encode {} B, transcode {} B",
        POD_PB.len(),
        decode_encode(POD_PB).encoded_len(),
        transcode(POD_PB).encoded_len()
    );
    let mut g = c.benchmark_group("from_protobuf/pod");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    g.bench_function("decode_encode", |b| {
        b.iter(|| decode_encode(black_box(POD_PB)))
    });
    g.bench_function("transcode", |b| b.iter(|| transcode(black_box(POD_PB))));
    // `KubeListerWatcher::drop_managed_fields` where the server sends them anyway.
    g.bench_function("transcode_without_managed_fields", |b| {
        b.iter(|| {
            let object =
                kinformer_protobuf::Object::from_bytes(black_box(POD_PB)).expect("envelope");
            Cached::<Pod>::from_protobuf_without_managed_fields(&object).expect("transcodes")
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    bench_from_protobuf(c);
    bench_one(c);
    for (suffix, make) in [
        ("", pod as fn(usize) -> Pod),
        ("+managedFields", pod_with_managed_fields),
    ] {
        let pod_size = serde_json::to_vec(&make(0)).expect("encodes").len();
        eprintln!("store/pod_json_bytes{suffix}: {pod_size}");
        // The cached store first: memory the other store freed would hide its growth.
        let cached = filled(&format!("cached{suffix}"), view_node_of, |i| {
            Cached::new(&make(i)).expect("encodes")
        });
        let decoded = filled(&format!("decoded{suffix}"), node_of, make);
        bench_reads(c, &format!("decoded{suffix}"), decoded, node_of);
        bench_reads(c, &format!("cached{suffix}"), cached, view_node_of);
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
