//! The store behind kinformer's traits: the informer's writes (`Sink`, `IndexerWriter`), the
//! FIFOs' lookups (`KnownObjects`) and the read side (`Indexer`).

use std::sync::Arc;

use kinformer_core::{KnownObjects, ListPart, Listed, MetaObject, ObjectKey, Sink};

use crate::{Error, Indexer, IndexerWriter, Indexers};

use super::keys::MapKey;
use super::state::*;
use super::{ThreadSafeStore, set_rv};

/// The store as the informer writes it. Errors other than a bad key arrive boxed in
/// [`kinformer_core::Error::Other`] (see the `From` impl on [`Error`]).
impl<K: MetaObject + Send + Sync + 'static> Sink<K> for ThreadSafeStore<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(ThreadSafeStore::add(self, obj)?)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(ThreadSafeStore::update(self, obj)?)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(ThreadSafeStore::delete(self, obj)?)
    }
    /// Gathers the list, then one write: unchanged objects (this store's own, listed by
    /// key) stay where they are ([`replace_keeping`](ThreadSafeStore::replace_keeping)).
    fn replace(&self, part: ListPart<K>) -> Result<(), kinformer_core::Error> {
        let Some((list, rv)) = self.lists.gather(part) else {
            return Ok(());
        };
        let (objects, unchanged) = Listed::split(list);
        if unchanged.is_empty() {
            Ok(ThreadSafeStore::replace(self, objects, &rv)?)
        } else {
            Ok(ThreadSafeStore::replace_keeping(
                self, objects, &unchanged, &rv,
            )?)
        }
    }
    /// Nothing to do for a cache (client-go's `Resync` of a plain store is a no-op too).
    fn resync(&self) -> Result<(), kinformer_core::Error> {
        Ok(())
    }
    fn bookmark(&self, resource_version: &str) -> Result<(), kinformer_core::Error> {
        set_rv(&mut self.write().rv, Some(resource_version));
        Ok(())
    }
}

/// Lookups by key, which the FIFOs also read (for tombstones on a relist and for resyncs).
/// Each takes the read lock once.
impl<K: MetaObject + Send + Sync + 'static> KnownObjects<K> for ThreadSafeStore<K> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        let state = self.read();
        let mut out = Vec::with_capacity(state.keys.len());
        out.extend(state.keys.keys().filter_map(MapKey::to_object_key));
        out
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.read()
            .keys
            .get(key.as_bytes())
            .map(|e| Arc::clone(&e.obj))
    }
    fn get_shared(&self, key: &str) -> Option<Arc<K>> {
        self.get_by_key(key)
    }
    fn contains_version(&self, key: &str, resource_version: &str) -> bool {
        kinformer_core::holds_version(self.get_by_key(key), resource_version)
    }
}

impl<K: MetaObject + Send + Sync + 'static> Indexer<K> for ThreadSafeStore<K> {
    fn list(&self) -> Vec<Arc<K>> {
        let state = self.read();
        let mut out = Vec::with_capacity(state.keys.len());
        out.extend(state.objs.iter().flatten().cloned());
        out
    }

    fn last_sync_resource_version(&self) -> String {
        self.read().rv.clone()
    }

    fn len(&self) -> usize {
        self.read().keys.len()
    }

    /// The key's bytes on the stack: a namespaced get allocates nothing.
    fn get_by_namespaced_name(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let mut buf = [0u8; 128];
        let len = namespace.len() + 1 + name.len();
        let Some(key) = buf.get_mut(..len) else {
            return self.get_by_key(&format!("{namespace}/{name}"));
        };
        let (ns, rest) = key.split_at_mut(namespace.len());
        ns.copy_from_slice(namespace.as_bytes());
        let (slash, rest) = rest.split_at_mut(1);
        slash[0] = b'/';
        rest.copy_from_slice(name.as_bytes());
        self.read().keys.get(&*key).map(|e| Arc::clone(&e.obj))
    }

    fn index(&self, index_name: &str, obj: &K) -> Result<Vec<Arc<K>>, Error>
    where
        K: MetaObject,
    {
        let state = self.read();
        let pos = state.position(index_name)?;
        let (Some(ix), Some(index)) = (state.indexers.get(pos), state.indices.get(pos)) else {
            return Err(Error::UnknownIndex(index_name.to_owned()));
        };
        let values = ix.func.values(obj).map_err(|source| Error::IndexFunc {
            index: index_name.to_owned(),
            key: self.key_of(obj).ok(),
            source,
        })?;
        let sets: Vec<&ValueSet> = values
            .iter()
            .filter_map(|v| index.by_value.get(v.as_str()))
            .collect();
        Ok(match sets.as_slice() {
            [] => Vec::new(),
            [one] => state.ids_to_objects(one.slots.iter(), one.slots.len()),
            many => {
                let mut ids: Vec<u32> = many.iter().flat_map(|s| s.slots.iter().copied()).collect();
                ids.sort_unstable();
                ids.dedup();
                state.ids_to_objects(ids.iter(), ids.len())
            }
        })
    }

    fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, Error> {
        let state = self.read();
        let pos = state.position(index_name)?;
        let Some(set) = state.indices.get(pos).and_then(|i| i.by_value.get(value)) else {
            return Ok(Vec::new());
        };
        let mut keys: Vec<ObjectKey> = set
            .slots
            .iter()
            .filter_map(|&id| self.key_of(state.obj(id)?).ok())
            .collect();
        drop(state);
        keys.sort_unstable();
        Ok(keys)
    }

    fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        let state = self.read();
        let Ok(pos) = state.position(index_name) else {
            return Vec::new();
        };
        let mut values: Vec<String> = state
            .indices
            .get(pos)
            .map(|i| i.by_value.keys().map(|v| v.to_string()).collect())
            .unwrap_or_default();
        drop(state);
        values.sort_unstable();
        values
    }

    fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, Error> {
        let state = self.read();
        let pos = state.position(index_name)?;
        Ok(
            match state.indices.get(pos).and_then(|i| i.by_value.get(value)) {
                Some(set) => state.ids_to_objects(set.slots.iter(), set.slots.len()),
                None => Vec::new(),
            },
        )
    }

    fn get_indexers(&self) -> Indexers<K> {
        self.read()
            .indexers
            .iter()
            .map(|ix| (ix.name.clone(), ix.func.clone()))
            .collect()
    }
}

impl<K: MetaObject + Send + Sync + 'static> IndexerWriter<K> for ThreadSafeStore<K> {
    fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error> {
        let mut state = self.write();
        let conflicts: Vec<String> = indexers
            .keys()
            .filter(|name| state.indexers.iter().any(|ix| &ix.name == *name))
            .cloned()
            .collect();
        if !conflicts.is_empty() {
            return Err(Error::IndexerConflict(conflicts));
        }
        // Index every stored object before registering anything, so that a failing
        // function leaves the store as it was.
        let state = &mut *state;
        let mut built = Vec::with_capacity(indexers.len());
        for (name, func) in indexers {
            let mut by_id = Vec::new();
            by_id.resize_with(state.objs.len(), || None);
            for (key, entry) in &state.keys {
                match func.store_values(&entry.obj) {
                    Ok(v) => {
                        if let Some(slot) = by_id.get_mut(entry.id as usize) {
                            *slot = Some(v.into_owned());
                        }
                    }
                    Err(source) => {
                        return Err(Error::IndexFunc {
                            index: name,
                            key: key.to_object_key(),
                            source,
                        });
                    }
                }
            }
            built.push((NamedIndexFunc { name, func }, by_id));
        }
        let mut all: Vec<NamedIndexFunc<K>> = state
            .indexers
            .iter()
            .map(|ix| NamedIndexFunc {
                name: ix.name.clone(),
                func: ix.func.clone(),
            })
            .collect();
        for (named, by_id) in built {
            let pos = all.len();
            let mut index = Index::default();
            for (id, (v, slot)) in (0u32..).zip(by_id.iter().zip(&mut state.slot_values)) {
                if let Some(v) = v {
                    let mut cur = Values::default();
                    index.file(id, &mut cur, v);
                    slot.set(pos, cur);
                }
            }
            all.push(named);
            state.indices.push(index);
        }
        state.indexers = all.into();
        Ok(())
    }
}
