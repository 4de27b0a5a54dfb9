//! Decoding protobuf against decoding JSON, in one run, into k8s-openapi's `Pod`.
//!
//! The pod is `tests/data/pod.pb` / `pod.json`, written by Go's encoders: three containers
//! and an init container with env (values and valueFrom), ports, liveness and readiness
//! probes, resources, volume mounts and security contexts; configMap, PVC, emptyDir and
//! projected volumes; tolerations, affinity, owner references, labels, annotations, two
//! managedFields entries, and a running status with container statuses and conditions.
//!
//! - `decode/pod/{protobuf,json}`: one pod, from its whole body (envelope included).
//! - `decode/pod_projection/{protobuf,json}`: the same body into a projection that names
//!   only what a controller keying on labels needs (name, namespace, resourceVersion,
//!   labels, nodeName, phase); the rest is skipped (protobuf skips a field by its length,
//!   JSON has to scan it).
//! - `decode/list500/{protobuf,json}`: a 500-pod list page, each item put in an `Arc` as the
//!   reflector does (protobuf: item by item through `List::items`; JSON: the page through
//!   serde_json, then the items into `Arc`s). The list items carry no apiVersion/kind in
//!   either format, as in the API server's lists.
//!
//! The transcoding into kinformer's cache entry is benched with the entry, in
//! kinformer-compact-store (`from_protobuf/pod`).
//!
//! Before measuring, the bytes per pod of each format are printed.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_protobuf::{MAGIC, Object};
use serde_json::Value;

const POD_PB: &[u8] = include_bytes!("../tests/data/pod.pb");
const POD_JSON: &[u8] = include_bytes!("../tests/data/pod.json");
const ITEMS: usize = 500;

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_varint(b: &[u8], at: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let byte = b[*at];
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn field(number: u64, payload: &[u8], out: &mut Vec<u8>) {
    varint(number << 3 | 2, out);
    varint(payload.len() as u64, out);
    out.extend_from_slice(payload);
}

/// The encoded Pod message inside the fixture's envelope (`runtime.Unknown` field 2).
fn pod_message() -> Vec<u8> {
    let b = &POD_PB[MAGIC.len()..];
    let mut at = 0;
    while at < b.len() {
        let key = read_varint(b, &mut at);
        let len = read_varint(b, &mut at) as usize;
        if key == (2 << 3 | 2) {
            return b[at..at + len].to_vec();
        }
        at += len;
    }
    panic!("the fixture has no raw object");
}

/// A PodList of `ITEMS` copies of the pod, in protobuf (envelope included).
fn list_protobuf() -> Vec<u8> {
    let pod = pod_message();
    let mut list = Vec::new();
    let mut meta = Vec::new();
    field(2, b"12345", &mut meta); // resourceVersion
    field(1, &meta, &mut list);
    for _ in 0..ITEMS {
        field(2, &pod, &mut list);
    }
    let mut type_meta = Vec::new();
    field(1, b"v1", &mut type_meta);
    field(2, b"PodList", &mut type_meta);
    let mut out = MAGIC.to_vec();
    field(1, &type_meta, &mut out);
    field(2, &list, &mut out);
    out
}

/// The same list in JSON.
fn list_json() -> Vec<u8> {
    let mut pod: Value = serde_json::from_slice(POD_JSON).expect("pod.json");
    if let Some(o) = pod.as_object_mut() {
        o.remove("apiVersion");
        o.remove("kind");
    }
    let list = serde_json::json!({
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "12345"},
        "items": vec![pod; ITEMS],
    });
    serde_json::to_vec(&list).expect("serialises")
}

/// What a controller that keys on labels and placement reads of a pod.
#[derive(serde::Deserialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "read by the benchmark only through PartialEq")]
struct Projection {
    metadata: ProjectedMeta,
    spec: ProjectedSpec,
    status: ProjectedStatus,
}

#[derive(serde::Deserialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "read by the benchmark only through PartialEq")]
struct ProjectedMeta {
    name: String,
    namespace: String,
    resource_version: String,
    labels: std::collections::BTreeMap<String, String>,
}

#[derive(serde::Deserialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "read by the benchmark only through PartialEq")]
struct ProjectedSpec {
    node_name: String,
}

#[derive(serde::Deserialize, Debug, PartialEq)]
#[allow(dead_code, reason = "read by the benchmark only through PartialEq")]
struct ProjectedStatus {
    phase: String,
}

fn decode_protobuf_list(body: &[u8]) -> Vec<Arc<Pod>> {
    let list = Object::from_bytes(body)
        .and_then(|o| o.list())
        .expect("list");
    let mut out = Vec::with_capacity(list.len());
    for pod in list.items::<Pod>() {
        out.push(Arc::new(pod.expect("pod")));
    }
    out
}

fn decode_json_list(body: &[u8]) -> Vec<Arc<Pod>> {
    let list: k8s_openapi::List<Pod> = serde_json::from_slice(body).expect("list");
    list.items.into_iter().map(Arc::new).collect()
}

fn benches(c: &mut Criterion) {
    let (list_pb, list_json) = (list_protobuf(), list_json());
    // Both decode to the same pods.
    assert_eq!(decode_protobuf_list(&list_pb), decode_json_list(&list_json));
    eprintln!(
        "decode/bytes_per_pod: protobuf {} (body {}), JSON {} (body {}); in a {ITEMS}-pod list: protobuf {:.0}, JSON {:.0}",
        pod_message().len(),
        POD_PB.len(),
        POD_JSON.len(),
        POD_JSON.len(),
        list_pb.len() as f64 / ITEMS as f64,
        list_json.len() as f64 / ITEMS as f64,
    );

    let mut g = c.benchmark_group("decode/pod");
    g.throughput(Throughput::Elements(1));
    g.bench_function("protobuf", |b| {
        b.iter(|| kinformer_protobuf::from_slice::<Pod>(black_box(POD_PB)).expect("pod"))
    });
    g.bench_function("json", |b| {
        b.iter(|| serde_json::from_slice::<Pod>(black_box(POD_JSON)).expect("pod"))
    });
    g.finish();

    assert_eq!(
        kinformer_protobuf::from_slice::<Projection>(POD_PB).expect("projection"),
        serde_json::from_slice::<Projection>(POD_JSON).expect("projection")
    );
    let mut g = c.benchmark_group("decode/pod_projection");
    g.throughput(Throughput::Elements(1));
    g.bench_function("protobuf", |b| {
        b.iter(|| kinformer_protobuf::from_slice::<Projection>(black_box(POD_PB)).expect("pod"))
    });
    g.bench_function("json", |b| {
        b.iter(|| serde_json::from_slice::<Projection>(black_box(POD_JSON)).expect("pod"))
    });
    g.finish();

    let mut g = c.benchmark_group("decode/list500");
    g.throughput(Throughput::Elements(ITEMS as u64));
    g.bench_function("protobuf", |b| {
        b.iter(|| decode_protobuf_list(black_box(&list_pb)))
    });
    g.bench_function("json", |b| {
        b.iter(|| decode_json_list(black_box(&list_json)))
    });
    g.finish();
}

mod group {
    #![allow(
        missing_docs,
        reason = "criterion_group! generates an undocumented pub fn"
    )]
    criterion::criterion_group! {
        name = decode;
        config = criterion::Criterion::default()
            .warm_up_time(std::time::Duration::from_secs(1))
            .measurement_time(std::time::Duration::from_secs(4));
        targets = super::benches
    }
}
criterion_main!(group::decode);
