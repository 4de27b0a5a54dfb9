//! Rule 20 (ARCHITECTURE.md): the consistency guarantee readers get while a writer runs.
//!
//! The guarantee (see the crate docs): each read sees the store between two writes. So a
//! `by_index(name, v)` never returns an object whose current version is not filed under
//! `v`, a `get_by_key(k)` returns the object stored under `k`, `list()` never sees half a
//! `replace`, and an index added by `add_indexers` is complete the moment it can be queried.
//!
//! The stress check runs one writer and three readers for a bounded time. It is run against
//! `ThreadSafeStore` of decoded and of `Cached` objects (no violation allowed) and
//! against `TornIndexer`, a store that updates
//! its index and its items under separate locks, to show that the check does catch a store
//! that breaks the guarantee.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{Forward, OnCached, TestObj, by_node, obj, relist};
use kinformer_core::{KnownObjects, ListPart, Listed, ObjectKey, Sink, meta_namespace_key};
use kinformer_indexer::{
    Error, IndexFunc, Indexer, IndexerWriter, Indexers, ThreadSafeStore, namespace_indexers,
};

const OBJECTS: usize = 200;
const NODES: usize = 8;

fn node(i: usize) -> String {
    format!("n{}", i % NODES)
}

fn initial() -> Vec<Arc<TestObj>> {
    (0..OBJECTS)
        .map(|i| {
            obj(&format!("ns{}", i % 4), &format!("o{i}"))
                .on(&node(i))
                .rv("1")
                .arc()
        })
        .collect()
}

/// What the readers saw.
#[derive(Debug, Default)]
struct Report {
    reads: usize,
    writes: usize,
    violations: Vec<String>,
}

/// Runs one writer and three readers against `store` for `duration` (or, with
/// `until_violation`, until the first violation), and reports what the readers saw.
fn stress(
    store: Arc<dyn IndexerWriter<TestObj>>,
    duration: Duration,
    until_violation: bool,
) -> Report {
    store
        .replace(ListPart::whole(initial(), "1"))
        .expect("valid objects");
    let stop = AtomicBool::new(false);
    let reads = AtomicUsize::new(0);
    let writes = AtomicUsize::new(0);
    let violations = Mutex::new(Vec::new());
    let deadline = Instant::now() + duration;
    let violation = |v: String| {
        let mut all = violations.lock().expect("not poisoned");
        if all.len() < 10 {
            all.push(v);
        }
        if until_violation {
            stop.store(true, Ordering::Relaxed);
        }
    };

    thread::scope(|s| {
        // The writer: moves objects between nodes one at a time, sometimes relists all of
        // them at once, and now and then adds an index. The object count stays OBJECTS.
        s.spawn(|| {
            let mut round = 0usize;
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                round += 1;
                let i = round.wrapping_mul(7919) % OBJECTS;
                let rv = round.to_string();
                if round.is_multiple_of(97) {
                    let list = (0..OBJECTS)
                        .map(|j| {
                            obj(&format!("ns{}", j % 4), &format!("o{j}"))
                                .on(&node(j + round))
                                .rv(&rv)
                                .arc()
                        })
                        .collect();
                    store
                        .replace(ListPart::whole(list, &rv))
                        .expect("valid objects");
                } else if round.is_multiple_of(89) {
                    // A relist that keeps the odd objects as they are (rule 53).
                    let (mut list, mut keep) = (Vec::new(), Vec::new());
                    for j in 0..OBJECTS {
                        let (ns, name) = (format!("ns{}", j % 4), format!("o{j}"));
                        if j % 2 == 0 {
                            list.push(obj(&ns, &name).on(&node(j + round)).rv(&rv).arc());
                        } else {
                            keep.push(format!("{ns}/{name}"));
                        }
                    }
                    let keep: Vec<&str> = keep.iter().map(String::as_str).collect();
                    store
                        .replace(relist(&store, list, &keep, &rv))
                        .expect("valid objects");
                } else if round.is_multiple_of(251) {
                    let mut extra = Indexers::new();
                    extra.insert(format!("byNode{round}"), by_node());
                    store.add_indexers(extra).expect("a new name");
                } else {
                    let o = obj(&format!("ns{}", i % 4), &format!("o{i}"))
                        .on(&node(i + round))
                        .rv(&rv);
                    store.update(o.arc()).expect("valid object");
                }
                writes.fetch_add(1, Ordering::Relaxed);
            }
            stop.store(true, Ordering::Relaxed);
        });

        for r in 0..3 {
            let (store, stop, reads) = (&store, &stop, &reads);
            let violation = &violation;
            s.spawn(move || {
                let mut k = r;
                while !stop.load(Ordering::Relaxed) {
                    k += 1;
                    let n = node(k);
                    for o in store.by_index("byNode", &n).expect("known index") {
                        if o.node != n {
                            violation(format!(
                                "by_index(byNode, {n}) returned {:?} on {}",
                                o.name, o.node
                            ));
                        }
                    }
                    let ns = format!("ns{}", k % 4);
                    for o in store.by_index("namespace", &ns).expect("known index") {
                        if o.namespace.as_deref() != Some(ns.as_str()) {
                            violation(format!("by_index(namespace, {ns}) returned {:?}", o.name));
                        }
                    }
                    let probe = obj("", "probe").on(&n);
                    for o in store.index("byNode", &probe).expect("known index") {
                        if o.node != n {
                            violation(format!(
                                "index(byNode, {n}) returned {:?} on {}",
                                o.name, o.node
                            ));
                        }
                    }
                    let key = format!("ns{}/o{}", k % 4, (k * 4 + k % 4) % OBJECTS);
                    if let Some(o) = store.get_by_key(&key)
                        && meta_namespace_key(&*o)
                            .map(|mk| mk.as_str() != key)
                            .unwrap_or(true)
                    {
                        violation(format!("get_by_key({key}) returned {:?}", o.name));
                    }
                    let all = store.list();
                    if all.len() != OBJECTS {
                        violation(format!("list() saw {} objects", all.len()));
                    }
                    // An added index is complete as soon as it is visible.
                    let extra: Vec<String> = store
                        .get_indexers()
                        .into_keys()
                        .filter(|name| name.starts_with("byNode") && name != "byNode")
                        .collect();
                    if let Some(name) = extra.last() {
                        let filed: usize = (0..NODES)
                            .map(|j| store.by_index(name, &node(j)).map_or(0, |v| v.len()))
                            .sum();
                        // Not one snapshot across the calls, but every object is on some
                        // node, so a complete index never loses more than the writer moves.
                        if filed == 0 {
                            violation(format!("index {name} was visible but empty"));
                        }
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });

    Report {
        reads: reads.into_inner(),
        writes: writes.into_inner(),
        violations: violations.into_inner().expect("not poisoned"),
    }
}

#[test]
fn rule20_readers_beside_a_writer_see_whole_writes_only() {
    check_whole_writes_only(Arc::new(ThreadSafeStore::new(indexers())));
}

/// The same check on the default informer cache, a store of `Cached` objects (read here
/// through `crate::common::OnCached`, which decodes what it hands out).
#[test]
fn rule20_the_default_informer_cache_sees_whole_writes_only() {
    check_whole_writes_only(Arc::new(OnCached::new(indexers())));
}

/// The same check through a decorator that forwards only the required methods of every
/// store trait (`crate::common::Forward`): what such a wrapper loses must never be a rule.
#[test]
fn rule20_stores_behind_a_forwarding_decorator_see_whole_writes_only() {
    check_whole_writes_only(Arc::new(Forward(ThreadSafeStore::new(indexers()))));
    check_whole_writes_only(Arc::new(Forward(OnCached::new(indexers()))));
}

fn indexers() -> Indexers<TestObj> {
    let mut ix = namespace_indexers();
    ix.insert("byNode".into(), by_node());
    ix
}

fn check_whole_writes_only(store: Arc<dyn IndexerWriter<TestObj>>) {
    let report = stress(store.clone(), Duration::from_millis(1500), false);
    eprintln!("{} reads beside {} writes", report.reads, report.writes);
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    assert!(
        report.writes > 100 && report.reads > 100,
        "the threads barely ran: {report:?}"
    );

    // Afterwards: no empty value set survived all that moving around (rule 18).
    for value in store.list_index_func_values("byNode") {
        assert!(
            !store.by_index("byNode", &value).unwrap().is_empty(),
            "empty set for {value}"
        );
    }
    let filed: usize = (0..NODES)
        .map(|j| store.by_index("byNode", &node(j)).unwrap().len())
        .sum();
    assert_eq!(filed, OBJECTS);
}

#[test]
fn rule20_the_stress_check_catches_a_store_that_tears() {
    let report = stress(
        Arc::new(TornIndexer::default()),
        Duration::from_secs(3),
        true,
    );
    eprintln!(
        "{} reads beside {} writes; first violations: {:?}",
        report.reads, report.writes, report.violations
    );
    assert!(
        !report.violations.is_empty(),
        "a torn store went unnoticed: {report:?}"
    );
}

/// A store that breaks the guarantee: its `byNode` index and its items sit under separate
/// locks, and an update refiles the key before it replaces the object, so a reader can
/// find a key under a node its object is not on (yet).
#[derive(Default)]
struct TornIndexer {
    items: RwLock<BTreeMap<ObjectKey, Arc<TestObj>>>,
    by_node: RwLock<BTreeMap<String, BTreeSet<ObjectKey>>>,
    extra: Mutex<Indexers<TestObj>>,
}

impl TornIndexer {
    fn objects(&self, keys: impl IntoIterator<Item = ObjectKey>) -> Vec<Arc<TestObj>> {
        let items = self.items.read().unwrap();
        keys.into_iter()
            .filter_map(|k| items.get(&k).cloned())
            .collect()
    }
}

impl Sink<TestObj> for TornIndexer {
    fn add(&self, obj: Arc<TestObj>) -> Result<(), kinformer_core::Error> {
        self.update(obj)
    }
    fn update(&self, obj: Arc<TestObj>) -> Result<(), kinformer_core::Error> {
        let key = meta_namespace_key(&*obj)?;
        {
            let mut index = self.by_node.write().unwrap();
            for set in index.values_mut() {
                set.remove(&key);
            }
            index
                .entry(obj.node.clone())
                .or_default()
                .insert(key.clone());
        }
        thread::yield_now();
        self.items.write().unwrap().insert(key, obj);
        Ok(())
    }
    fn delete(&self, obj: Arc<TestObj>) -> Result<(), kinformer_core::Error> {
        let key = meta_namespace_key(&*obj)?;
        self.items.write().unwrap().remove(&key);
        Ok(())
    }
    fn replace(&self, part: ListPart<TestObj>) -> Result<(), kinformer_core::Error> {
        let list = Listed::objects(part.items);
        let mut items = self.items.write().unwrap();
        let mut index = self.by_node.write().unwrap();
        items.clear();
        index.clear();
        for o in list {
            let key = meta_namespace_key(&*o)?;
            index.entry(o.node.clone()).or_default().insert(key.clone());
            items.insert(key, o);
        }
        Ok(())
    }
    fn resync(&self) -> Result<(), kinformer_core::Error> {
        Ok(())
    }
    fn bookmark(&self, _: &str) -> Result<(), kinformer_core::Error> {
        Ok(())
    }
}

impl KnownObjects<TestObj> for TornIndexer {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.items.read().unwrap().keys().cloned().collect()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<TestObj>> {
        self.items.read().unwrap().get(key).cloned()
    }

    fn get_shared(&self, key: &str) -> Option<Arc<TestObj>> {
        self.get_by_key(key)
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

impl Indexer<TestObj> for TornIndexer {
    fn list(&self) -> Vec<Arc<TestObj>> {
        self.items.read().unwrap().values().cloned().collect()
    }
    fn last_sync_resource_version(&self) -> String {
        String::new()
    }
    fn index(&self, index_name: &str, obj: &TestObj) -> Result<Vec<Arc<TestObj>>, Error> {
        self.by_index(index_name, &obj.node)
    }
    fn index_keys(&self, _index_name: &str, value: &str) -> Result<Vec<ObjectKey>, Error> {
        Ok(self
            .by_node
            .read()
            .unwrap()
            .get(value)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default())
    }
    fn list_index_func_values(&self, _index_name: &str) -> Vec<String> {
        self.by_node.read().unwrap().keys().cloned().collect()
    }
    fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<TestObj>>, Error> {
        if index_name == "namespace" {
            return Ok(self
                .list()
                .into_iter()
                .filter(|o| o.namespace.as_deref() == Some(value))
                .collect());
        }
        let keys = self.index_keys(index_name, value)?;
        Ok(self.objects(keys))
    }
    fn get_indexers(&self) -> Indexers<TestObj> {
        let mut all = self.extra.lock().unwrap().clone();
        all.insert("byNode".into(), by_node());
        all.insert("namespace".into(), IndexFunc::namespace());
        all
    }
}

impl IndexerWriter<TestObj> for TornIndexer {
    fn add_indexers(&self, indexers: Indexers<TestObj>) -> Result<(), Error> {
        self.extra.lock().unwrap().extend(indexers);
        Ok(())
    }
}
