//! A small object type and a second `Indexer` implementation, shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use kinformer_compact_store::Cached;
use kinformer_core::{
    KnownObjects, ListPart, Listed, MetaObject, ObjectKey, Sink, Unchanged, WholeList,
    meta_namespace_key,
};
use kinformer_indexer::{Error, IndexFunc, Indexer, IndexerWriter, Indexers, ThreadSafeStore};

/// Not a Kubernetes type: the store works for anything with a name. Serde, shaped as a
/// Kubernetes object (its name and labels under `metadata`), so that the default informer
/// cache's `Cached` objects can hold it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(into = "Shape", from = "Shape")]
pub struct TestObj {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub rv: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// What the `byNode` index files the object under.
    pub node: String,
    /// What the multi-value `byUser` index files the object under.
    pub users: Vec<String>,
}

/// [`TestObj`] as a Kubernetes object.
#[derive(serde::Serialize, serde::Deserialize)]
struct Shape {
    metadata: ShapeMeta,
    node: String,
    users: Vec<String>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ShapeMeta {
    namespace: Option<String>,
    name: Option<String>,
    resource_version: Option<String>,
    labels: BTreeMap<String, String>,
}

impl From<TestObj> for Shape {
    fn from(o: TestObj) -> Self {
        Shape {
            metadata: ShapeMeta {
                namespace: o.namespace,
                name: o.name,
                resource_version: o.rv,
                labels: o.labels,
            },
            node: o.node,
            users: o.users,
        }
    }
}

impl From<Shape> for TestObj {
    fn from(s: Shape) -> Self {
        TestObj {
            namespace: s.metadata.namespace,
            name: s.metadata.name,
            rv: s.metadata.resource_version,
            labels: s.metadata.labels,
            node: s.node,
            users: s.users,
        }
    }
}

impl MetaObject for TestObj {
    fn object_name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    fn object_namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }
    fn object_resource_version(&self) -> Option<&str> {
        self.rv.as_deref()
    }
    fn object_labels(&self) -> Option<&BTreeMap<String, String>> {
        Some(&self.labels)
    }
}

/// `ns/name`, or a cluster-scoped `name` when `ns` is empty.
pub fn obj(ns: &str, name: &str) -> TestObj {
    TestObj {
        namespace: (!ns.is_empty()).then(|| ns.to_owned()),
        name: Some(name.to_owned()),
        ..TestObj::default()
    }
}

impl TestObj {
    pub fn on(mut self, node: &str) -> Self {
        self.node = node.to_owned();
        self
    }
    pub fn users(mut self, users: &[&str]) -> Self {
        self.users = users.iter().map(|u| u.to_string()).collect();
        self
    }
    pub fn rv(mut self, rv: &str) -> Self {
        self.rv = Some(rv.to_owned());
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.insert(k.to_owned(), v.to_owned());
        self
    }
    pub fn arc(self) -> Arc<TestObj> {
        Arc::new(self)
    }
}

pub fn by_node() -> IndexFunc<TestObj> {
    IndexFunc::new(|o: &TestObj| vec![o.node.clone()])
}

pub fn by_user() -> IndexFunc<TestObj> {
    IndexFunc::new(|o: &TestObj| o.users.clone())
}

/// The namespace, `byNode` and multi-value `byUser` indices.
pub fn test_indexers() -> Indexers<TestObj> {
    let mut ix = kinformer_indexer::namespace_indexers();
    ix.insert("byNode".into(), by_node());
    ix.insert("byUser".into(), by_user());
    ix
}

/// Each implementation under test, by name: the store of decoded objects, the naive one,
/// the default informer cache (a store of `Cached` objects, seen through [`OnCached`]),
/// and the built-in ones behind a decorator that forwards only the required methods.
pub type MakeIndexer = fn(Indexers<TestObj>) -> Arc<dyn IndexerWriter<TestObj>>;

pub fn implementations() -> Vec<(&'static str, MakeIndexer)> {
    vec![
        ("ThreadSafeStore", |ix| Arc::new(ThreadSafeStore::new(ix))),
        ("NaiveIndexer", |ix| Arc::new(NaiveIndexer::new(ix))),
        ("ThreadSafeStore<Cached>", |ix| Arc::new(OnCached::new(ix))),
        ("Forward<ThreadSafeStore>", |ix| {
            Arc::new(Forward(ThreadSafeStore::new(ix)))
        }),
        ("Forward<ThreadSafeStore<Cached>>", |ix| {
            Arc::new(Forward(OnCached::new(ix)))
        }),
    ]
}

/// The default informer cache — a `ThreadSafeStore` of kinformer-compact-store's `Cached`
/// objects, keyed, indexed and label-matched from what `Cached` found in the encoding —
/// seen as a store of `TestObj`: objects are encoded on the way in and decoded on the way
/// out, index functions read each cached object decoded. Every rule then runs on the
/// store an informer keeps by default.
pub struct OnCached {
    inner: Arc<ThreadSafeStore<Cached<TestObj>>>,
    /// The index functions as given, for `get_indexers`.
    indexers: Mutex<Indexers<TestObj>>,
}

impl OnCached {
    pub fn new(indexers: Indexers<TestObj>) -> Self {
        Self {
            inner: Arc::new(ThreadSafeStore::new(cached_indexers(&indexers))),
            indexers: Mutex::new(indexers),
        }
    }
}

fn cached_indexers(indexers: &Indexers<TestObj>) -> Indexers<Cached<TestObj>> {
    indexers
        .iter()
        .map(|(name, f)| {
            let f = f.clone();
            let on_cached = if f.is_namespace() {
                IndexFunc::namespace()
            } else {
                IndexFunc::fallible(move |c: &Cached<TestObj>| {
                    let obj = c.decode().map_err(|e| e.to_string())?;
                    f.values(&obj).map_err(|e| e.to_string())
                })
            };
            (name.clone(), on_cached)
        })
        .collect()
}

fn encoded(o: Arc<TestObj>) -> Arc<Cached<TestObj>> {
    Arc::new(Cached::new(&*o).expect("a TestObj encodes"))
}

fn decoded(c: Arc<Cached<TestObj>>) -> Arc<TestObj> {
    Arc::new(c.decode().expect("a cached TestObj decodes"))
}

impl Sink<TestObj> for OnCached {
    fn add(&self, obj: Arc<TestObj>) -> Result<(), kinformer_core::Error> {
        self.inner.add(encoded(obj))
    }
    fn update(&self, obj: Arc<TestObj>) -> Result<(), kinformer_core::Error> {
        self.inner.update(encoded(obj))
    }
    fn delete(&self, obj: Arc<TestObj>) -> Result<(), kinformer_core::Error> {
        self.inner.delete(encoded(obj))
    }
    fn replace(&self, part: ListPart<TestObj>) -> Result<(), kinformer_core::Error> {
        let cache: Arc<dyn KnownObjects<Cached<TestObj>>> = Arc::clone(&self.inner) as _;
        let items = part
            .items
            .into_iter()
            .map(|item| match item {
                Listed::Object(o) => Listed::Object(encoded(o)),
                Listed::Unchanged(u) => {
                    Listed::Unchanged(Unchanged::new(u.key().clone(), Arc::clone(&cache)))
                }
            })
            .collect();
        self.inner
            .replace(ListPart::new(items, part.starts, part.end))
    }
    fn resync(&self) -> Result<(), kinformer_core::Error> {
        self.inner.resync()
    }
    fn bookmark(&self, resource_version: &str) -> Result<(), kinformer_core::Error> {
        self.inner.bookmark(resource_version)
    }
}

impl KnownObjects<TestObj> for OnCached {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.inner.list_keys()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<TestObj>> {
        self.inner.get_by_key(key).map(decoded)
    }
    /// Decoded objects are never the cache's own.
    fn get_shared(&self, _key: &str) -> Option<Arc<TestObj>> {
        None
    }
    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        self.inner.contains_version(key, resource_version)
    }
}

impl Indexer<TestObj> for OnCached {
    fn list(&self) -> Vec<Arc<TestObj>> {
        self.inner.list().into_iter().map(decoded).collect()
    }
    fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<TestObj>>, Error> {
        Ok(self
            .inner
            .by_index(index_name, value)?
            .into_iter()
            .map(decoded)
            .collect())
    }
    fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, Error> {
        self.inner.index_keys(index_name, value)
    }
    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.inner.list_index_func_values(index_name)
    }
    fn get_indexers(&self) -> Indexers<TestObj> {
        self.indexers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
    fn last_sync_resource_version(&self) -> String {
        self.inner.last_sync_resource_version()
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    /// The cache's own label match, on what `Cached` found in the encoding.
    fn list_selected(&self, selector: &kinformer_indexer::Selector) -> Vec<Arc<TestObj>> {
        self.inner
            .list_selected(selector)
            .into_iter()
            .map(decoded)
            .collect()
    }
    fn by_index_selected(
        &self,
        index_name: &str,
        value: &str,
        selector: &kinformer_indexer::Selector,
    ) -> Result<Vec<Arc<TestObj>>, Error> {
        let found = self.inner.by_index_selected(index_name, value, selector)?;
        Ok(found.into_iter().map(decoded).collect())
    }
}

impl IndexerWriter<TestObj> for OnCached {
    fn add_indexers(&self, indexers: Indexers<TestObj>) -> Result<(), Error> {
        let mut given = self.indexers.lock().unwrap_or_else(PoisonError::into_inner);
        self.inner.add_indexers(cached_indexers(&indexers))?;
        given.extend(indexers);
        Ok(())
    }
}

/// A relist at `rv` of `objects`, with the objects under `unchanged` (keys) as the store
/// holds them: what an informer hands its store when the reflector found them unchanged.
pub fn relist(
    store: &Arc<dyn IndexerWriter<TestObj>>,
    objects: Vec<Arc<TestObj>>,
    unchanged: &[&str],
    rv: &str,
) -> ListPart<TestObj> {
    let cache: Arc<dyn KnownObjects<TestObj>> = Arc::clone(store) as _;
    let mut items: Vec<Listed<TestObj>> = objects.into_iter().map(Listed::Object).collect();
    items.extend(unchanged.iter().map(|k| {
        let key = ObjectKey::parse(k).expect("a valid key");
        Listed::Unchanged(Unchanged::new(key, Arc::clone(&cache)))
    }));
    ListPart::new(items, true, Some(rv.to_owned()))
}

/// A decorator that forwards only the required methods of every store trait, as a wrapper
/// written in a hurry would: every rule must hold through it (the provided methods fall
/// back to their defaults, which may cost more but never change what a read returns).
pub struct Forward<S>(pub S);

impl<K, S: Sink<K>> Sink<K> for Forward<S> {
    kinformer_indexer::forward_sink!(K, 0: all);
}

impl<K, S: KnownObjects<K>> KnownObjects<K> for Forward<S> {
    kinformer_indexer::forward_known_objects!(K, 0: all);
}

impl<K, S: Indexer<K>> Indexer<K> for Forward<S> {
    kinformer_indexer::forward_indexer!(K, 0: list, by_index, index_keys,
        list_index_func_values, get_indexers, last_sync_resource_version);
}

impl<K, S: IndexerWriter<K>> IndexerWriter<K> for Forward<S> {
    kinformer_indexer::forward_indexer_writer!(K, 0: all);
}

/// A deliberately different `Indexer`: one mutex over a `BTreeMap`, and no index
/// structures at all — every index query runs the index functions over every object.
/// Plugged in through the trait to show that the swap point works, and used as a model for
/// the default store.
pub struct NaiveIndexer<K> {
    state: Mutex<Naive<K>>,
    lists: WholeList<K>,
}

struct Naive<K> {
    items: BTreeMap<ObjectKey, Arc<K>>,
    indexers: Indexers<K>,
    rv: String,
}

impl<K: MetaObject> NaiveIndexer<K> {
    pub fn new(indexers: Indexers<K>) -> Self {
        Self {
            state: Mutex::new(Naive {
                items: BTreeMap::new(),
                indexers,
                rv: String::new(),
            }),
            lists: WholeList::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Naive<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K: MetaObject> Naive<K> {
    fn values(
        &self,
        name: &str,
        func: &IndexFunc<K>,
        key: Option<&ObjectKey>,
        obj: &K,
    ) -> Result<BTreeSet<String>, Error> {
        func.values(obj)
            .map(|v| v.into_iter().collect())
            .map_err(|source| Error::IndexFunc {
                index: name.to_owned(),
                key: key.cloned(),
                source,
            })
    }

    fn check(&self, key: &ObjectKey, obj: &K) -> Result<(), Error> {
        for (name, func) in &self.indexers {
            self.values(name, func, Some(key), obj)?;
        }
        Ok(())
    }

    fn matching(
        &self,
        index_name: &str,
        wanted: &BTreeSet<String>,
    ) -> Result<Vec<(ObjectKey, Arc<K>)>, Error> {
        let func = self
            .indexers
            .get(index_name)
            .ok_or_else(|| Error::UnknownIndex(index_name.to_owned()))?;
        let mut out = Vec::new();
        for (key, obj) in &self.items {
            let values = self.values(index_name, func, Some(key), obj)?;
            if !values.is_disjoint(wanted) {
                out.push((key.clone(), Arc::clone(obj)));
            }
        }
        Ok(out)
    }
}

impl<K: MetaObject + Send + Sync + 'static> NaiveIndexer<K> {
    fn put(&self, obj: Arc<K>) -> Result<(), Error> {
        let key = meta_namespace_key(&*obj)?;
        let mut s = self.lock();
        s.check(&key, &obj)?;
        s.rv = obj.object_resource_version().unwrap_or("").to_owned();
        s.items.insert(key, obj);
        Ok(())
    }

    fn replace_all(&self, list: Vec<Arc<K>>, rv: &str) -> Result<(), Error> {
        let mut s = self.lock();
        let mut items = BTreeMap::new();
        for obj in list {
            let key = meta_namespace_key(&*obj)?;
            s.check(&key, &obj)?;
            items.insert(key, obj);
        }
        s.items = items;
        s.rv = rv.to_owned();
        Ok(())
    }
}

impl<K: MetaObject + Send + Sync + 'static> Sink<K> for NaiveIndexer<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(self.put(obj)?)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(self.put(obj)?)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        let key = meta_namespace_key(&*obj)?;
        let mut s = self.lock();
        s.items.remove(&key);
        s.rv = obj.object_resource_version().unwrap_or("").to_owned();
        Ok(())
    }
    fn replace(&self, part: ListPart<K>) -> Result<(), kinformer_core::Error> {
        match self.lists.gather(part) {
            // Unchanged objects read back from this store before it is locked.
            Some((list, rv)) => Ok(self.replace_all(Listed::objects(list), &rv)?),
            None => Ok(()),
        }
    }
    fn resync(&self) -> Result<(), kinformer_core::Error> {
        Ok(())
    }
    fn bookmark(&self, rv: &str) -> Result<(), kinformer_core::Error> {
        self.lock().rv = rv.to_owned();
        Ok(())
    }
}

impl<K: MetaObject + Send + Sync + 'static> KnownObjects<K> for NaiveIndexer<K> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.lock().items.keys().cloned().collect()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.lock().items.get(key).cloned()
    }

    fn get_shared(&self, key: &str) -> Option<Arc<K>> {
        self.get_by_key(key)
    }

    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

impl<K: MetaObject + Send + Sync + 'static> Indexer<K> for NaiveIndexer<K> {
    fn list(&self) -> Vec<Arc<K>> {
        self.lock().items.values().cloned().collect()
    }
    fn last_sync_resource_version(&self) -> String {
        self.lock().rv.clone()
    }
    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, Error>
    where
        K: MetaObject,
    {
        let s = self.lock();
        let func = s
            .indexers
            .get(index_name)
            .ok_or_else(|| Error::UnknownIndex(index_name.to_owned()))?;
        let wanted = s.values(index_name, func, None, obj)?;
        Ok(s.matching(index_name, &wanted)?
            .into_iter()
            .map(|(_, o)| o)
            .collect())
    }
    fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, Error> {
        let s = self.lock();
        Ok(s.matching(index_name, &BTreeSet::from([value.to_owned()]))?
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    }
    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        let s = self.lock();
        let Some(func) = s.indexers.get(index_name) else {
            return Vec::new();
        };
        let mut all = BTreeSet::new();
        for (key, obj) in &s.items {
            if let Ok(v) = s.values(index_name, func, Some(key), obj) {
                all.extend(v);
            }
        }
        all.into_iter().collect()
    }
    fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, Error> {
        let s = self.lock();
        Ok(s.matching(index_name, &BTreeSet::from([value.to_owned()]))?
            .into_iter()
            .map(|(_, o)| o)
            .collect())
    }
    fn get_indexers(&self) -> Indexers<K> {
        self.lock().indexers.clone()
    }
}

impl<K: MetaObject + Send + Sync + 'static> IndexerWriter<K> for NaiveIndexer<K> {
    fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error> {
        let mut s = self.lock();
        let conflicts: Vec<String> = indexers
            .keys()
            .filter(|n| s.indexers.contains_key(*n))
            .cloned()
            .collect();
        if !conflicts.is_empty() {
            return Err(Error::IndexerConflict(conflicts));
        }
        for (name, func) in &indexers {
            for (key, obj) in &s.items {
                s.values(name, func, Some(key), obj)?;
            }
        }
        s.indexers.extend(indexers);
        Ok(())
    }
}

/// A write through the trait, with the error turned back into this crate's (lossless:
/// see the `From` impls on `Error`).
pub fn w(result: Result<(), kinformer_core::Error>) -> Result<(), Error> {
    result.map_err(Error::from)
}

/// The names of objects, sorted, for comparing results regardless of order.
pub fn names<K: MetaObject>(objs: &[Arc<K>]) -> Vec<String> {
    let mut n: Vec<String> = objs
        .iter()
        .map(|o| o.object_name().unwrap_or("").to_owned())
        .collect();
    n.sort();
    n
}

pub fn keys(keys: &[ObjectKey]) -> Vec<&str> {
    keys.iter().map(|k| k.as_str()).collect()
}
