//! Helpers for the informer tests: a small object type, a recording handler, a scripted
//! lister-watcher.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kinformer_core::{DeletedObject, MetaObject};
use kinformer_informer_factory::ResourceEventHandler;
use kinformer_reflector::ListPage;
use kinformer_reflector::fake::{FakeListerWatcher, WatchSender, watch_channel};

/// A namespaced object: name, resource version, labels.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Obj {
    pub name: String,
    pub rv: String,
    pub labels: BTreeMap<String, String>,
}

impl MetaObject for Obj {
    fn object_name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn object_namespace(&self) -> Option<&str> {
        Some("ns")
    }
    fn object_resource_version(&self) -> Option<&str> {
        Some(&self.rv)
    }
    fn object_labels(&self) -> Option<&BTreeMap<String, String>> {
        Some(&self.labels)
    }
}

pub fn obj(name: &str, rv: &str) -> Obj {
    Obj {
        name: name.into(),
        rv: rv.into(),
        labels: BTreeMap::new(),
    }
}

pub fn labelled(name: &str, rv: &str, app: &str) -> Obj {
    let mut o = obj(name, rv);
    o.labels.insert("app".into(), app.into());
    o
}

/// What a handler saw, in client-go's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ev {
    /// name, rv, is_in_initial_list
    Add(String, String, bool),
    /// name, old rv, new rv
    Update(String, String, String),
    /// name, rv, was a tombstone
    Delete(String, String, bool),
}

pub fn add(n: &str, rv: &str, initial: bool) -> Ev {
    Ev::Add(n.into(), rv.into(), initial)
}
pub fn update(n: &str, old: &str, new: &str) -> Ev {
    Ev::Update(n.into(), old.into(), new.into())
}
pub fn delete(n: &str, rv: &str, tombstone: bool) -> Ev {
    Ev::Delete(n.into(), rv.into(), tombstone)
}

/// Records every notification with the time it was handled.
#[derive(Clone, Default)]
pub struct Recorder {
    events: Arc<Mutex<Vec<(Instant, Ev)>>>,
}

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn events(&self) -> Vec<Ev> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|(_, e)| e.clone())
            .collect()
    }
    pub fn timed(&self) -> Vec<(Instant, Ev)> {
        self.events.lock().unwrap().clone()
    }
    pub fn len(&self) -> usize {
        self.events.lock().unwrap().len()
    }
    fn push(&self, e: Ev) {
        self.events.lock().unwrap().push((Instant::now(), e));
    }
}

impl ResourceEventHandler<Obj> for Recorder {
    fn on_add(&self, o: &Arc<Obj>, initial: bool) {
        self.push(Ev::Add(o.name.clone(), o.rv.clone(), initial));
    }
    fn on_update(&self, old: &Arc<Obj>, new: &Arc<Obj>) {
        self.push(Ev::Update(new.name.clone(), old.rv.clone(), new.rv.clone()));
    }
    fn on_delete(&self, o: &DeletedObject<Obj>) {
        let x = o.object();
        self.push(Ev::Delete(
            x.name.clone(),
            x.rv.clone(),
            o.tombstone().is_some(),
        ));
    }
}

/// A fake whose every list answers `items` at `rv`, and whose first watch is fed by the
/// returned sender (later watches never yield).
pub fn fake_with(items: Vec<Obj>, rv: &str) -> (FakeListerWatcher<Obj>, WatchSender<Obj>) {
    let fake = FakeListerWatcher::new();
    let rv = rv.to_string();
    fake.on_list(move |_| Ok(ListPage::new(items.clone(), rv.clone())));
    let (tx, stream) = watch_channel();
    fake.push_watch(Ok(stream));
    (fake, tx)
}

pub const SECS5: Duration = Duration::from_secs(5);

/// A decorator that forwards only the required methods of every trait it wraps (a FIFO's
/// or a store's), as a wrapper written in a hurry would, with the crates' forwarding
/// macros.
pub struct Forward<S>(pub S);

impl<K, S: kinformer_core::Sink<K>> kinformer_core::Sink<K> for Forward<S> {
    kinformer_core::forward_sink!(K, 0: all);
}

impl<K, S: kinformer_deltafifo::FifoQueue<K>> kinformer_deltafifo::FifoQueue<K> for Forward<S> {
    kinformer_deltafifo::forward_fifo_queue!(K, 0: pop_async, has_synced, close, is_closed, len);
}

impl<K, S: kinformer_core::KnownObjects<K>> kinformer_core::KnownObjects<K> for Forward<S> {
    kinformer_core::forward_known_objects!(K, 0: all);
}

impl<K, S: kinformer_indexer::Indexer<K>> kinformer_indexer::Indexer<K> for Forward<S> {
    kinformer_indexer::forward_indexer!(K, 0: list, by_index, index_keys,
        list_index_func_values, get_indexers, last_sync_resource_version);
}

impl<K, S: kinformer_indexer::IndexerWriter<K>> kinformer_indexer::IndexerWriter<K> for Forward<S> {
    kinformer_indexer::forward_indexer_writer!(K, 0: all);
}
