//! Test objects, stores and helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kinformer_core::{Delta, DeltaType, KnownObjects, MetaObject, ObjectKey};
use kinformer_deltafifo::{DeltaFifo, Error, FifoQueue, InOrderFifo, Item};

/// client-go's `testFifoObject`: a cluster-scoped name (the key) and a value.
#[derive(Debug, PartialEq, Eq)]
pub struct Obj {
    pub name: String,
    pub val: u32,
}

impl MetaObject for Obj {
    fn object_name(&self) -> Option<&str> {
        (!self.name.is_empty()).then_some(self.name.as_str())
    }
    fn object_namespace(&self) -> Option<&str> {
        None
    }
    fn object_resource_version(&self) -> Option<&str> {
        None
    }
}

pub fn obj(name: &str, val: u32) -> Arc<Obj> {
    Arc::new(Obj {
        name: name.to_string(),
        val,
    })
}

/// An object the default key function rejects (no name).
pub fn nameless() -> Arc<Obj> {
    obj("", 0)
}

/// client-go's `literalListerGetter`: a fixed set of known objects.
pub struct Literal(pub Vec<Arc<Obj>>);

impl KnownObjects<Obj> for Literal {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0
            .iter()
            .map(|o| ObjectKey::parse(&o.name).unwrap())
            .collect()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Obj>> {
        self.0.iter().find(|o| o.name == key).cloned()
    }

    fn get_shared(&self, key: &str) -> Option<Arc<Obj>> {
        self.get_by_key(key)
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

pub fn known(objs: &[(&str, u32)]) -> Arc<dyn KnownObjects<Obj>> {
    Arc::new(Literal(objs.iter().map(|(n, v)| obj(n, *v)).collect()))
}

/// The informer's store, as a sorted map; the FIFOs read it as their known objects.
#[derive(Default)]
pub struct Store(pub Mutex<BTreeMap<String, Arc<Obj>>>);

impl KnownObjects<Obj> for Store {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.0
            .lock()
            .unwrap()
            .keys()
            .map(|k| ObjectKey::parse(k).unwrap())
            .collect()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Obj>> {
        self.0.lock().unwrap().get(key).cloned()
    }

    fn get_shared(&self, key: &str) -> Option<Arc<Obj>> {
        self.get_by_key(key)
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

impl Store {
    /// What client-go's `processDeltas` does to the store for one delta.
    pub fn apply_delta(&self, key: &ObjectKey, d: &Delta<Obj>) {
        let mut m = self.0.lock().unwrap();
        match d.kind {
            DeltaType::Deleted => {
                m.remove(key.as_str());
            }
            _ => {
                m.insert(key.to_string(), Arc::clone(d.object.object()));
            }
        }
    }

    /// Applies a popped item the way the informer does.
    pub fn apply(&self, item: &Item<Obj>) {
        match item {
            Item::Deltas { key, deltas } => deltas.iter().for_each(|d| self.apply_delta(key, d)),
            Item::Batch(events) => events.iter().for_each(|(k, d)| self.apply_delta(k, d)),
            Item::ReplacedAll { objects, .. } => {
                let mut m = self.0.lock().unwrap();
                m.clear();
                for (k, o) in objects {
                    m.insert(k.to_string(), Arc::clone(o));
                }
            }
            _ => {}
        }
    }

    pub fn snapshot(&self) -> BTreeMap<String, u32> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.val))
            .collect()
    }
}

/// A delta as text: `Added foo=10`, and `Deleted ~foo=10` for a tombstone (whose stored
/// key must match the object's name).
pub fn show(d: &Delta<Obj>) -> String {
    let o = d.object.object();
    match d.object.tombstone() {
        Some(t) => {
            assert_eq!(t.key.as_str(), o.name, "tombstone key");
            format!("{} ~{}={}", d.kind, o.name, o.val)
        }
        None => format!("{} {}={}", d.kind, o.name, o.val),
    }
}

/// An item as text: one string per delta or event, atomic items by kind.
pub fn show_item(item: &Item<Obj>) -> Vec<String> {
    match item {
        Item::Deltas { key, deltas } => deltas
            .iter()
            .map(|d| {
                assert_eq!(key.as_str(), d.object.object().name, "item key");
                show(d)
            })
            .collect(),
        Item::Batch(events) => events.iter().map(|(_, d)| show(d)).collect(),
        Item::ReplacedAll {
            objects,
            resource_version,
            ..
        } => {
            let objs: Vec<_> = objects
                .iter()
                .map(|(_, o)| format!("{}={}", o.name, o.val))
                .collect();
            vec![format!(
                "ReplacedAll@{resource_version} [{}]",
                objs.join(" ")
            )]
        }
        Item::Bookmark { resource_version } => vec![format!("Bookmark@{resource_version}")],
        other => vec![other.kind().to_string()],
    }
}

/// Pops one item without waiting and returns it as text with its initial-list flag.
pub fn pop_delta(f: &DeltaFifo<Obj>) -> (Vec<String>, bool) {
    let p = f.try_pop().unwrap().expect("an item");
    (show_item(p.item()), p.is_in_initial_list())
}

/// Pops everything queued (until empty, or closed and empty), as text.
pub fn drain_delta(f: &DeltaFifo<Obj>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    loop {
        match f.try_pop() {
            Ok(Some(p)) => out.push(show_item(p.item())),
            Ok(None) | Err(Error::Closed) => return out,
            Err(e) => panic!("{e}"),
        }
    }
}

pub fn pop_in_order(f: &InOrderFifo<Obj>) -> (Vec<String>, bool) {
    let p = f.try_pop().unwrap().expect("an item");
    (show_item(p.item()), p.is_in_initial_list())
}

pub fn drain_in_order(f: &InOrderFifo<Obj>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    loop {
        match f.try_pop() {
            Ok(Some(p)) => out.push(show_item(p.item())),
            Ok(None) | Err(Error::Closed) => return out,
            Err(e) => panic!("{e}"),
        }
    }
}

/// `["Added foo=1", ...]` as owned strings.
pub fn s(items: &[&str]) -> Vec<String> {
    items.iter().map(|x| x.to_string()).collect()
}

/// A DeltaFIFO with client-go's test defaults: `Sync` on replace unless `replaced`.
pub fn delta_fifo(known: Option<Arc<dyn KnownObjects<Obj>>>, replaced: bool) -> DeltaFifo<Obj> {
    let b = DeltaFifo::builder().emit_replaced(replaced);
    match known {
        Some(k) => b.known_objects(k).build(),
        None => b.build(),
    }
}

/// A per-object in-order FIFO popping one event at a time (client-go's `Pop`).
pub fn in_order(known: Option<Arc<dyn KnownObjects<Obj>>>) -> InOrderFifo<Obj> {
    let b = InOrderFifo::builder().batch_size(1);
    match known {
        Some(k) => b.known_objects(k).build().unwrap(),
        None => b.build().unwrap(),
    }
}

pub fn is_key_error(r: Result<(), kinformer_core::Error>) -> bool {
    matches!(r, Err(kinformer_core::Error::MissingName))
}
