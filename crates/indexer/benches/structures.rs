//! The measurement behind the store's structure: the same pod workload as `indexer.rs`
//! (get, by_index on `byNode`, update) on three candidate structures.
//!
//! - `structures/slab_one_lock/*`: `ThreadSafeStore` as shipped — one `RwLock` over a key
//!   map whose entries hold the object, its slot id and its index values, a dense array of
//!   objects by slot id, and indices that hold slot ids.
//! - `structures/keyed_one_lock/*`: client-go's `threadSafeMap` shape — one `RwLock` over
//!   `key → object` and `value → set of keys`; `by_index` looks every key up again, and an
//!   update calls the index functions on the old object to find its old values.
//! - `structures/sharded/*`: the items and each index in their own dashmap (sharded
//!   locks); cheaper locking, but a reader can see the index and the items at different
//!   moments, so `by_index` can return an object that no longer matches.
//!
//! Every candidate tracks the last resource version, as a store must. An update replaces
//! pod `i` with its other version (a separate allocation, as a watch event brings), so a
//! structure that recomputes the old object's index values pays for reading it.

use std::collections::{HashMap, HashSet};
use std::hint::black_box;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use criterion::{Criterion, criterion_main};
use dashmap::DashMap;
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{ObjectKey, meta_namespace_key};
use kinformer_indexer::{IndexFunc, Indexer, KnownObjects, ThreadSafeStore, namespace_indexers};

#[path = "support/workload.rs"]
mod workload;
use workload::{NODES, PODS, keys, next_versions, node_of, nodes, pods};

fn ns_of(p: &Pod) -> &str {
    p.metadata.namespace.as_deref().unwrap_or("")
}

/// client-go's structure: objects by key, index values to sets of keys.
#[derive(Default)]
struct Keyed {
    items: HashMap<ObjectKey, Arc<Pod>>,
    by_ns: HashMap<String, HashSet<ObjectKey>>,
    by_node: HashMap<String, HashSet<ObjectKey>>,
    rv: String,
}

fn move_key(
    index: &mut HashMap<String, HashSet<ObjectKey>>,
    key: &ObjectKey,
    old: Option<&str>,
    new: &str,
) {
    if old == Some(new) {
        return;
    }
    if let Some(old) = old
        && let Some(set) = index.get_mut(old)
    {
        set.remove(key);
        if set.is_empty() {
            index.remove(old);
        }
    }
    index.entry(new.to_owned()).or_default().insert(key.clone());
}

impl Keyed {
    fn update(&mut self, obj: Arc<Pod>) {
        let key = meta_namespace_key(&*obj).expect("valid");
        let old = self.items.insert(key.clone(), Arc::clone(&obj));
        let old = old.as_deref();
        move_key(&mut self.by_ns, &key, old.map(ns_of), ns_of(&obj));
        move_key(
            &mut self.by_node,
            &key,
            old.and_then(node_of),
            node_of(&obj).unwrap_or(""),
        );
        self.rv.clear();
        self.rv
            .push_str(obj.metadata.resource_version.as_deref().unwrap_or(""));
    }
}

/// Items and indices in separate sharded maps.
#[derive(Default)]
struct Sharded {
    items: DashMap<ObjectKey, Arc<Pod>>,
    by_ns: DashMap<String, HashSet<ObjectKey>>,
    by_node: DashMap<String, HashSet<ObjectKey>>,
    rv: std::sync::Mutex<String>,
}

fn move_key_sharded(
    index: &DashMap<String, HashSet<ObjectKey>>,
    key: &ObjectKey,
    old: Option<&str>,
    new: &str,
) {
    if old == Some(new) {
        return;
    }
    if let Some(old) = old {
        let empty = index.get_mut(old).is_some_and(|mut set| {
            set.remove(key);
            set.is_empty()
        });
        if empty {
            index.remove_if(old, |_, set| set.is_empty());
        }
    }
    index.entry(new.to_owned()).or_default().insert(key.clone());
}

impl Sharded {
    fn update(&self, obj: Arc<Pod>) {
        let key = meta_namespace_key(&*obj).expect("valid");
        let old = self.items.insert(key.clone(), Arc::clone(&obj));
        let old = old.as_deref();
        move_key_sharded(&self.by_ns, &key, old.map(ns_of), ns_of(&obj));
        move_key_sharded(
            &self.by_node,
            &key,
            old.and_then(node_of),
            node_of(&obj).unwrap_or(""),
        );
        let mut rv = self.rv.lock().expect("not poisoned");
        rv.clear();
        rv.push_str(obj.metadata.resource_version.as_deref().unwrap_or(""));
    }

    fn by_node(&self, node: &str) -> Vec<Arc<Pod>> {
        let Some(keys) = self.by_node.get(node) else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|k| self.items.get(k).map(|o| Arc::clone(&o)))
            .collect()
    }
}

fn benches(c: &mut Criterion) {
    let pods = pods();
    let next = next_versions();
    let versions = [&pods, &next];
    let keys = keys();
    let nodes = nodes();

    let mut indexers = namespace_indexers();
    indexers.insert("byNode".to_owned(), IndexFunc::single(node_of));
    let slab = ThreadSafeStore::new(indexers);
    let keyed = RwLock::new(Keyed::default());
    let sharded = Sharded::default();
    for p in &pods {
        slab.add(Arc::clone(p)).expect("valid");
        keyed.write().expect("not poisoned").update(Arc::clone(p));
        sharded.update(Arc::clone(p));
    }

    let mut g = c.benchmark_group("structures");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));

    let mut i = 0;
    g.bench_function("slab_one_lock/get", |b| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            black_box(slab.get_by_key(&keys[i]))
        })
    });
    let mut i = 0;
    g.bench_function("keyed_one_lock/get", |b| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            black_box(
                keyed
                    .read()
                    .expect("not poisoned")
                    .items
                    .get(keys[i].as_str())
                    .cloned(),
            )
        })
    });
    let mut i = 0;
    g.bench_function("sharded/get", |b| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            black_box(sharded.items.get(keys[i].as_str()).map(|o| Arc::clone(&o)))
        })
    });

    let mut i = 0;
    g.bench_function("slab_one_lock/by_index", |b| {
        b.iter(|| {
            i = (i + 7) % NODES;
            black_box(slab.by_index("byNode", &nodes[i]).expect("known"))
        })
    });
    let mut i = 0;
    g.bench_function("keyed_one_lock/by_index", |b| {
        b.iter(|| {
            i = (i + 7) % NODES;
            let s = keyed.read().expect("not poisoned");
            let got: Vec<Arc<Pod>> = s.by_node.get(&nodes[i]).map_or_else(Vec::new, |keys| {
                keys.iter()
                    .filter_map(|k| s.items.get(k).cloned())
                    .collect()
            });
            black_box(got)
        })
    });
    let mut i = 0;
    g.bench_function("sharded/by_index", |b| {
        b.iter(|| {
            i = (i + 7) % NODES;
            black_box(sharded.by_node(&nodes[i]))
        })
    });

    let (mut i, mut round) = (0, 1);
    g.bench_function("slab_one_lock/update", |b| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            round += usize::from(i < 7919);
            slab.update(Arc::clone(&versions[round % 2][i]))
                .expect("valid")
        })
    });
    let (mut i, mut round) = (0, 1);
    g.bench_function("keyed_one_lock/update", |b| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            round += usize::from(i < 7919);
            keyed
                .write()
                .expect("not poisoned")
                .update(Arc::clone(&versions[round % 2][i]))
        })
    });
    let (mut i, mut round) = (0, 1);
    g.bench_function("sharded/update", |b| {
        b.iter(|| {
            i = (i + 7919) % PODS;
            round += usize::from(i < 7919);
            sharded.update(Arc::clone(&versions[round % 2][i]))
        })
    });
    g.finish();
}

mod group {
    #![allow(
        missing_docs,
        reason = "criterion_group! generates an undocumented pub fn"
    )]
    criterion::criterion_group!(structures, super::benches);
}
criterion_main!(group::structures);
