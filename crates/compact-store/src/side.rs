//! The encoded side of a [`CompactStore`]: the same entries written and read as
//! [`Encoded<K>`], for an informer whose pipeline carries objects encoded from the wire to
//! the cache ([`CompactStore::encoded_side`]).

use std::sync::Arc;

use kinformer_core::{KnownObjects, ListPart, Listed, MetaObject, ObjectKey, Sink, WholeList};
use kinformer_indexer::{Error, IndexFunc, Indexer, IndexerWriter, Indexers};
use kube_core::Selector;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::encoded::Encoded;
use crate::store::{CompactStore, retain_selected};
use crate::view::Cached;

impl<K> CompactStore<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// This store as a store of [`Encoded<K>`]: writes take objects already encoded (kept
    /// as they are, not decoded and encoded again) and reads hand entries out encoded (a
    /// copy of the bytes, no `K` built). Both sides see the same entries: an informer
    /// writes through this side what its reflector transcoded from the wire, and readers
    /// read `K` from the store itself.
    ///
    /// An object written here is decoded only when the store needs a `K` from it: a key
    /// function of its own, an index function other than the namespace index (computed
    /// when the object is written), and once per store to check that the bytes decode as
    /// a `K`. Index functions over `Encoded<K>` (given to this side's `add_indexers`, or
    /// read back by its `get_indexers`) go through `K`: each call decodes or encodes.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_compact_store::{CompactStore, Encoded};
    /// use kinformer_core::{KnownObjects, MetaObject, Sink};
    /// use kinformer_indexer::namespace_indexers;
    ///
    /// let store = Arc::new(CompactStore::<Pod>::new(namespace_indexers()));
    /// let encoded = store.encoded_side();
    /// let mut pod = Pod::default();
    /// pod.metadata.name = Some("web-0".into());
    /// pod.metadata.namespace = Some("default".into());
    /// encoded.add(Arc::new(Encoded::new(&pod)?))?;
    /// // Read back as a `Pod` from the store, as `Encoded<Pod>` from the side.
    /// assert_eq!(*store.get_by_key("default/web-0").unwrap(), pod);
    /// assert_eq!(encoded.get_by_key("default/web-0").unwrap().object_name(), Some("web-0"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn encoded_side(self: &Arc<Self>) -> Arc<dyn IndexerWriter<Encoded<K>>> {
        Arc::new(EncodedSide {
            store: Arc::clone(self),
            lists: WholeList::default(),
        })
    }
}

struct EncodedSide<K> {
    store: Arc<CompactStore<K>>,
    /// The parts of a list written through [`Sink::replace`], until it ends.
    lists: WholeList<Encoded<K>>,
}

fn encoded_all<K>(entries: Vec<Arc<Cached<K>>>) -> Vec<Arc<Encoded<K>>> {
    entries
        .iter()
        .map(|e| Arc::new(Encoded::from_entry(e.entry())))
        .collect()
}

fn decode_error(e: crate::CodecError) -> Error {
    Error::Other(Box::new(e))
}

impl<K> Sink<Encoded<K>> for EncodedSide<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn add(&self, obj: Arc<Encoded<K>>) -> Result<(), kinformer_core::Error> {
        Ok(self.store.put_encoded(&obj)?)
    }
    fn update(&self, obj: Arc<Encoded<K>>) -> Result<(), kinformer_core::Error> {
        Ok(self.store.put_encoded(&obj)?)
    }
    fn delete(&self, obj: Arc<Encoded<K>>) -> Result<(), kinformer_core::Error> {
        Ok(self.store.remove_encoded(&obj)?)
    }
    /// As the store's: an unchanged object listed by key keeps its entry as it is.
    fn replace(&self, part: ListPart<Encoded<K>>) -> Result<(), kinformer_core::Error> {
        let Some((list, rv)) = self.lists.gather(part) else {
            return Ok(());
        };
        let (objects, unchanged) = Listed::split(list);
        Ok(self.store.replace_all_encoded(objects, &unchanged, &rv)?)
    }
    fn resync(&self) -> Result<(), kinformer_core::Error> {
        Ok(())
    }
    fn bookmark(&self, rv: &str) -> Result<(), kinformer_core::Error> {
        Sink::bookmark(&*self.store, rv)
    }
}

impl<K> KnownObjects<Encoded<K>> for EncodedSide<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn list_keys(&self) -> Vec<ObjectKey> {
        self.store.entries().list_keys()
    }
    fn get_by_key(&self, key: &str) -> Option<Arc<Encoded<K>>> {
        let entry = self.store.entries().get_by_key(key)?;
        Some(Arc::new(Encoded::from_entry(entry.entry())))
    }
    /// Never: every read is a copy of the entry.
    fn get_shared(&self, _key: &str) -> Option<Arc<Encoded<K>>> {
        None
    }
    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        KnownObjects::<K>::contains_version(&*self.store, key, resource_version)
    }
}

impl<K> Indexer<Encoded<K>> for EncodedSide<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn list(&self) -> Vec<Arc<Encoded<K>>> {
        encoded_all(self.store.entries().list())
    }
    fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<Encoded<K>>>, Error> {
        Ok(encoded_all(
            self.store.entries().by_index(index_name, value)?,
        ))
    }
    fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, Error> {
        self.store.index_keys(index_name, value)
    }
    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        self.store.list_index_func_values(index_name)
    }
    /// The store's index functions, each decoding the object it is given.
    fn get_indexers(&self) -> Indexers<Encoded<K>> {
        self.store
            .index_functions()
            .into_iter()
            .map(|(name, f)| {
                let func = if f.is_namespace() {
                    IndexFunc::namespace()
                } else {
                    IndexFunc::fallible(move |e: &Encoded<K>| f.values(&e.decode()?))
                };
                (name, func)
            })
            .collect()
    }
    fn last_sync_resource_version(&self) -> String {
        Indexer::<K>::last_sync_resource_version(&*self.store)
    }
    fn len(&self) -> usize {
        Indexer::<K>::len(&*self.store)
    }
    fn index(&self, index_name: &str, obj: &Encoded<K>) -> Result<Vec<Arc<Encoded<K>>>, Error> {
        let obj = obj.decode().map_err(decode_error)?;
        Ok(encoded_all(self.store.index_entries(index_name, &obj)?))
    }
    fn list_selected(&self, selector: &Selector) -> Vec<Arc<Encoded<K>>> {
        let mut entries = self.store.entries().list();
        retain_selected(&mut entries, selector);
        encoded_all(entries)
    }
    fn by_index_selected(
        &self,
        index_name: &str,
        value: &str,
        selector: &Selector,
    ) -> Result<Vec<Arc<Encoded<K>>>, Error> {
        let mut entries = self.store.entries().by_index(index_name, value)?;
        retain_selected(&mut entries, selector);
        Ok(encoded_all(entries))
    }
}

impl<K> IndexerWriter<Encoded<K>> for EncodedSide<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// Added to the store as functions of `K`, each encoding the object it is given:
    /// give index functions of `K` to the store itself where you can.
    fn add_indexers(&self, indexers: Indexers<Encoded<K>>) -> Result<(), Error> {
        let indexers = indexers
            .into_iter()
            .map(|(name, f)| {
                let func = if f.is_namespace() {
                    IndexFunc::namespace()
                } else {
                    IndexFunc::fallible(move |k: &K| f.values(&Encoded::new(k)?))
                };
                (name, func)
            })
            .collect();
        self.store.add_indexers(indexers)
    }
}
