//! The indexer workload of the performance targets (ARCHITECTURE.md), the same one the client-go peer
//! runs on `ThreadSafeStore` (`cargo xtask bench indexer`): 100k pods across 100
//! namespaces and 1000 nodes, indexed by namespace and by node (`byNode`).
//!
//! Pod `i` is `ns-{i % 100}/pod-{i}` on `node-{(i / 100) % 1000}`, labelled
//! `app=app-{i % 50}` and `tier={web,db,cache}[i % 3]`, resourceVersion `i + 1`; `byNode`
//! is `IndexFunc::single` over `spec.nodeName`. Lookups
//! walk the keys with a stride (7919 for pods, 7 for nodes) so that consecutive operations
//! touch unrelated memory, as an informer's readers do. An update replaces pod `i` with its
//! other version (built up front as a separate allocation with resourceVersion
//! `100000 + i + 1`, same labels and node), alternating each pass over the keys, as watch
//! MODIFIED events do.
//!
//! Bench names are stable (the xtask pairs them with the Go side): `indexer/get`,
//! `indexer/by_index`, `indexer/update`, `indexer/list_selector_namespace`,
//! `indexer/list_selector_all`, `indexer/parse_selector`. Before measuring, the heap bytes
//! the store adds per entry are printed (resident-memory growth while 100k pods that
//! already exist are added, divided by 100k; Linux only).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_indexer::{
    IndexFunc, Indexer, KnownObjects, Lister, ThreadSafeStore, namespace_indexers, parse_selector,
};

#[path = "support/workload.rs"]
mod workload;
use workload::{NODES, PODS, keys, next_versions, node_of, nodes, pods};

const SELECTOR: &str = "app=app-7,tier in (web,db)";

fn store(pods: &[Arc<Pod>]) -> Arc<ThreadSafeStore<Pod>> {
    let mut indexers = namespace_indexers();
    indexers.insert("byNode".to_owned(), IndexFunc::single(node_of));
    let store = Arc::new(ThreadSafeStore::new(indexers));
    for p in pods {
        store.add(Arc::clone(p)).expect("valid pod");
    }
    store
}

/// Resident set size in bytes, from /proc (None elsewhere).
fn rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn heap_per_entry() {
    let pods = pods();
    let before = rss();
    let s = store(&pods);
    let after = rss();
    if let (Some(b), Some(a)) = (before, after) {
        eprintln!(
            "indexer/heap_bytes_per_entry: {:.1} (RSS growth adding {PODS} existing pods; size_of::<Pod>() = {})",
            a.saturating_sub(b) as f64 / PODS as f64,
            std::mem::size_of::<Pod>()
        );
    }
    drop(s);
}

fn benches(c: &mut Criterion) {
    heap_per_entry();
    let pods = pods();
    let next = next_versions();
    let versions = [&pods, &next];
    let s = store(&pods);
    let keys = keys();
    let nodes = nodes();
    let namespaces: Vec<String> = (0..3).map(|i| format!("ns-{}", 7 + i * 50)).collect();
    let lister = Lister::new(Arc::clone(&s));
    let selector = parse_selector(SELECTOR).expect("valid selector");

    let mut g = c.benchmark_group("indexer");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));

    let mut i = 0usize;
    g.bench_function("get", |b| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            black_box(s.get_by_key(&keys[i]).expect("stored"))
        })
    });
    let mut i = 0usize;
    g.bench_function("by_index", |b| {
        b.iter(|| {
            i = (i + 7) % NODES;
            let got = s.by_index("byNode", &nodes[i]).expect("known index");
            assert_eq!(got.len(), PODS / NODES);
            black_box(got)
        })
    });
    let (mut i, mut round) = (0usize, 1usize);
    g.bench_function("update", |b| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            round += usize::from(i < 7919);
            s.update(Arc::clone(&versions[round % 2][i]))
                .expect("valid pod")
        })
    });
    let mut i = 0usize;
    g.bench_function("list_selector_namespace", |b| {
        b.iter(|| {
            i = (i + 1) % namespaces.len();
            black_box(lister.namespaced(&namespaces[i]).list(&selector))
        })
    });
    g.bench_function("list_selector_all", |b| {
        b.iter(|| black_box(lister.list(&selector)))
    });
    g.bench_function("parse_selector", |b| {
        b.iter(|| black_box(parse_selector(black_box(SELECTOR)).expect("valid")))
    });
    g.finish();
}

mod group {
    #![allow(
        missing_docs,
        reason = "criterion_group! generates an undocumented pub fn"
    )]
    criterion::criterion_group!(indexer, super::benches);
}
criterion_main!(group::indexer);
