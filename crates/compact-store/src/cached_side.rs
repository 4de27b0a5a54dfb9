//! The cached side of a [`CompactStore`]: its entries read as they are, as [`Cached<K>`].

use std::sync::Arc;

use kinformer_core::{KnownObjects, MetaObject, ObjectKey};
use kinformer_indexer::{Error, Indexer, Indexers};
use kube_core::Selector;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::store::{CompactStore, retain_selected};
use crate::view::Cached;

impl<K> CompactStore<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// This store's reads without decoding: every read hands out the stored entries
    /// themselves (`Arc<Cached<K>>`, a reference count each), to be read through their
    /// views ([`Cached`]). Wrap it in a kinformer-indexer [`Lister`](kinformer_indexer::Lister)
    /// (`Lister::from_dyn(store.cached_side())`) for namespaced gets and selector lists.
    ///
    /// Index functions ([`get_indexers`](Indexer::get_indexers), [`index`](Indexer::index))
    /// answer from the values computed when each object was written: a query object must
    /// be one of the store's own entries.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::{Pod, PodSpec};
    /// use kinformer_compact_store::CompactStore;
    /// use kinformer_core::Sink;
    /// use kinformer_indexer::{IndexFunc, Indexer, namespace_indexers};
    ///
    /// let mut indexers = namespace_indexers();
    /// indexers.insert(
    ///     "byNode".into(),
    ///     IndexFunc::new(|p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect()),
    /// );
    /// let store = Arc::new(CompactStore::<Pod>::new(indexers));
    /// let mut pod = Pod::default();
    /// pod.metadata.name = Some("web-0".into());
    /// pod.spec = Some(PodSpec { node_name: Some("node-1".into()), ..Default::default() });
    /// store.add(Arc::new(pod))?;
    ///
    /// let cached = store.cached_side();
    /// let on_node = cached.by_index("byNode", "node-1")?;
    /// assert_eq!(on_node[0].metadata().name(), Some("web-0"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cached_side(self: &Arc<Self>) -> Arc<dyn Indexer<Cached<K>>> {
        Arc::new(CachedSide {
            store: Arc::clone(self),
        })
    }
}

struct CachedSide<K> {
    store: Arc<CompactStore<K>>,
}

impl<K> KnownObjects<Cached<K>> for CachedSide<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.store.entries().list_keys()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Cached<K>>> {
        self.store.entries().get_by_key(key)
    }
    /// The stored entry: every read shares it.
    fn get_shared(&self, key: &str) -> Option<Arc<Cached<K>>> {
        self.store.entries().get_by_key(key)
    }
    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        KnownObjects::<K>::contains_version(&*self.store, key, resource_version)
    }
}

impl<K> Indexer<Cached<K>> for CachedSide<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn list(&self) -> Vec<Arc<Cached<K>>> {
        self.store.entries().list()
    }
    fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<Cached<K>>>, Error> {
        self.store.entries().by_index(index_name, value)
    }
    fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, Error> {
        self.store.entries().index_keys(index_name, value)
    }
    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.store.entries().list_index_func_values(index_name)
    }
    /// The entries' own index functions: each reads the values its entry was written with.
    fn get_indexers(&self) -> Indexers<Cached<K>> {
        self.store.entries().get_indexers()
    }
    fn last_sync_resource_version(&self) -> String {
        self.store.entries().last_sync_resource_version()
    }
    fn len(&self) -> usize {
        self.store.entries().len()
    }
    fn index(&self, index_name: &str, obj: &Cached<K>) -> Result<Vec<Arc<Cached<K>>>, Error> {
        self.store.entries().index(index_name, obj)
    }
    fn list_selected(&self, selector: &Selector) -> Vec<Arc<Cached<K>>> {
        let mut entries = self.store.entries().list();
        retain_selected(&mut entries, selector);
        entries
    }
    fn by_index_selected(
        &self,
        index_name: &str,
        value: &str,
        selector: &Selector,
    ) -> Result<Vec<Arc<Cached<K>>>, Error> {
        let mut entries = self.store.entries().by_index(index_name, value)?;
        retain_selected(&mut entries, selector);
        Ok(entries)
    }
}
