//! What a read of the compact store (the informers' default cache) costs against the
//! decoded store (kinformer-indexer's `ThreadSafeStore`), on 10k pods shaped
//! like the API server's (metadata with uid, owner, timestamps; one container with
//! resources, env, mounts; status with conditions and a container status; managedFields
//! stripped), across 100 namespaces and 1000 nodes, indexed by namespace and by node.
//!
//! Pod `i` is `ns-{i % 100}/pod-{i}` on `node-{i % 1000}`, labelled `app=app-{i % 50}` and
//! `tier={web,db,cache}[i % 3]`. Lookups walk the keys with a stride (7919) so that
//! consecutive reads touch unrelated entries (and miss the compact store's small decode
//! cache, as a controller reading many keys does); `get_repeat` reads one key over and
//! over (a reconcile reading its object again: a cache hit).
//!
//! The same again with the `managedFields` a cluster keeps (two server-side-apply entries:
//! the controller's spec and metadata, the kubelet's status), as the informers' default
//! cache holds pods unless a transform strips them.
//!
//! Bench names: `store/{decoded,compact}[+managedFields]/{get,get_repeat,by_index,
//! list_selector_namespace,list_selector_all}`.
//!
//! The read path as a reconcile writes it, every read taking `spec.nodeName` of what it
//! gets, with managedFields kept: `read/{decoded,compact-decode,compact-view}/{get_field,
//! by_index_field,list_all_field}` (the decoded store's `Arc<Pod>`, the compact store's
//! decoded copy, its cached side's view), and one cached pod read both ways:
//! `read/one/{view_field,decode_field}`. Before measuring, the heap bytes per pod of each store are printed
//! (RSS growth while the store is filled, divided by the pod count).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use k8s_openapi::api::core::v1::Pod;
use kinformer_compact_store::CompactStore;
use kinformer_indexer::{
    IndexFunc, Indexer, IndexerWriter, KnownObjects, Lister, ThreadSafeStore, namespace_indexers,
    parse_selector,
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

fn node_of(p: &Pod) -> Option<&str> {
    p.spec.as_ref()?.node_name.as_deref()
}

fn indexers() -> kinformer_indexer::Indexers<Pod> {
    let mut indexers = namespace_indexers();
    indexers.insert("byNode".to_owned(), IndexFunc::single(node_of));
    indexers
}

/// Resident set size in bytes, from /proc (None elsewhere).
fn rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Fills a store with pods decoded one at a time (as an informer does: nothing else keeps
/// them), printing its RSS growth per pod.
fn filled<S: IndexerWriter<Pod>>(name: &str, store: S, make: fn(usize) -> Pod) -> Arc<S> {
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

fn bench_store<S: IndexerWriter<Pod> + 'static>(c: &mut Criterion, name: &str, store: Arc<S>) {
    let keys: Vec<String> = (0..PODS)
        .map(|i| format!("ns-{}/pod-{i}", i % NAMESPACES))
        .collect();
    let nodes: Vec<String> = (0..NODES).map(|i| format!("node-{i}")).collect();
    let lister = Lister::new(Arc::clone(&store));
    let selector = parse_selector(SELECTOR).expect("valid selector");
    let mut g = c.benchmark_group(format!("store/{name}"));
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));

    let mut i = 0;
    g.bench_function("get", |b| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            black_box(store.get_by_key(&keys[i]))
        })
    });
    g.bench_function("get_repeat", |b| {
        b.iter(|| black_box(store.get_by_key(&keys[42])))
    });
    let mut n = 0;
    g.bench_function("by_index", |b| {
        b.iter(|| {
            n = (n + 7) % NODES;
            black_box(store.by_index("byNode", &nodes[n]).expect("known index"))
        })
    });
    g.bench_function("list_selector_namespace", |b| {
        b.iter(|| black_box(lister.namespaced("ns-7").list(&selector)))
    });
    g.bench_function("list_selector_all", |b| {
        b.iter(|| black_box(lister.list(&selector)))
    });
    g.finish();
}

fn view_node_of(p: &kinformer_compact_store::Cached<Pod>) -> Option<&str> {
    p.spec()?.node_name()
}

/// Reads `spec.nodeName` of every object the three read paths get.
fn bench_reads(c: &mut Criterion) {
    let keys: Vec<String> = (0..PODS)
        .map(|i| format!("ns-{}/pod-{i}", i % NAMESPACES))
        .collect();
    let nodes: Vec<String> = (0..NODES).map(|i| format!("node-{i}")).collect();
    let compact = filled(
        "compact+managedFields(read)",
        CompactStore::new(indexers()),
        pod_with_managed_fields,
    );
    let decoded = filled(
        "decoded+managedFields(read)",
        ThreadSafeStore::new(indexers()),
        pod_with_managed_fields,
    );
    let cached = compact.cached_side();
    let mut g = c.benchmark_group("read");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    let len = |n: Option<&str>| n.map_or(0, str::len);
    macro_rules! path {
        ($name:literal, $store:expr, $field:expr) => {{
            let store = $store;
            let mut i = 0;
            g.bench_function(concat!($name, "/get_field"), |b| {
                b.iter(|| {
                    i = (i + 7919) % PODS;
                    let obj = store.get_by_key(&keys[i]).expect("stored");
                    black_box(len($field(&*obj)))
                })
            });
            let mut n = 0;
            g.bench_function(concat!($name, "/by_index_field"), |b| {
                b.iter(|| {
                    n = (n + 7) % NODES;
                    let objs = store.by_index("byNode", &nodes[n]).expect("known index");
                    black_box(objs.iter().map(|o| len($field(&**o))).sum::<usize>())
                })
            });
            g.bench_function(concat!($name, "/list_all_field"), |b| {
                b.iter(|| {
                    let objs = store.list();
                    black_box(objs.iter().map(|o| len($field(&**o))).sum::<usize>())
                })
            });
        }};
    }
    path!("decoded", &decoded, node_of);
    path!("compact-decode", &compact, node_of);
    path!("compact-view", &cached, view_node_of);
    let one = cached.get_by_key(&keys[42]).expect("stored");
    g.bench_function("one/view_field", |b| {
        b.iter(|| black_box(len(one.spec().and_then(|s| s.node_name()))))
    });
    g.bench_function("one/decode_field", |b| {
        b.iter(|| {
            let pod = one.decode().expect("decodes");
            black_box(len(node_of(&pod)))
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    bench_reads(c);
    for (suffix, make) in [
        ("", pod as fn(usize) -> Pod),
        ("+managedFields", pod_with_managed_fields),
    ] {
        let pod_size = serde_json::to_vec(&make(0)).expect("encodes").len();
        eprintln!("store/pod_json_bytes{suffix}: {pod_size}");
        // The compact store first: memory the other store freed would hide its growth.
        let compact = filled(
            &format!("compact{suffix}"),
            CompactStore::new(indexers()),
            make,
        );
        let decoded = filled(
            &format!("decoded{suffix}"),
            ThreadSafeStore::new(indexers()),
            make,
        );
        let stats = compact.stats();
        eprintln!(
            "store/compact{suffix}/entry_bytes_per_pod: {:.0} (encoding, names, index values; {} label sets)",
            stats.entry_bytes as f64 / PODS as f64,
            stats.label_sets
        );
        bench_store(c, &format!("decoded{suffix}"), decoded);
        bench_store(c, &format!("compact{suffix}"), compact);
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
