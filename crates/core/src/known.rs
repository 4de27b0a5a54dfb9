use std::sync::Arc;

use crate::{MetaObject, ObjectKey};

/// A read-only view of what the informer's store holds, for the FIFOs: client-go's
/// `KeyListerGetter`. A relist (`replace`) uses it to find keys that vanished while
/// nobody watched, and `resync` to re-deliver what is known.
///
/// The indexer implements it; any store can. The FIFO calls it from the reflector's
/// side while the informer may be writing, so a key listed by [`list_keys`] may be gone
/// by the time [`get_by_key`] asks for it: the FIFO then skips it (the deletion was
/// delivered already).
///
/// [`list_keys`]: KnownObjects::list_keys
/// [`get_by_key`]: KnownObjects::get_by_key
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::{Arc, RwLock};
/// use kinformer_core::{KnownObjects, ObjectKey};
///
/// struct Map(RwLock<BTreeMap<ObjectKey, Arc<String>>>);
/// impl KnownObjects<String> for Map {
///     fn list_keys(&self) -> Vec<ObjectKey> { self.0.read().unwrap().keys().cloned().collect() }
///     fn get_by_key(&self, key: &str) -> Option<Arc<String>> { self.0.read().unwrap().get(key).cloned() }
///     // It holds the `Arc`s it hands out.
///     fn get_shared(&self, key: &str) -> Option<Arc<String>> { self.get_by_key(key) }
///     // A `String` has no resource version: every listed object counts as changed.
///     fn contains_version(&self, _key: &str, _resource_version: &str) -> bool { false }
/// }
/// let m = Map(RwLock::new(BTreeMap::from([(ObjectKey::parse("ns/a")?, Arc::new("a".to_string()))])));
/// assert_eq!(m.list_keys().len(), 1);
/// assert_eq!(m.get_by_key("ns/a").as_deref().map(String::as_str), Some("a"));
/// # Ok::<(), kinformer_core::Error>(())
/// ```
pub trait KnownObjects<K>: Send + Sync {
    /// Every key the store holds.
    fn list_keys(&self) -> Vec<ObjectKey>;
    /// The object stored under `key`, if any.
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;

    /// The object stored under `key` if the store can hand out the very allocation it
    /// keeps, without making one: what a relist needs to keep an unchanged object's cached
    /// `Arc` instead of the copy it just decoded, so as not to hold two copies of the cache,
    /// and what the informer passes as an update's old version. A store of decoded `Arc`s
    /// returns [`get_by_key`](Self::get_by_key); a store that keeps objects in another
    /// form (encoded) returns what it can give without building a new object, or `None`.
    ///
    /// Required, as [`contains_version`](Self::contains_version) is, so that a wrapper
    /// that forwards only what it must cannot turn a cheap answer into a decode.
    fn get_shared(&self, key: &str) -> Option<Arc<K>>;

    /// Whether the object stored under `key` has this (non-empty) resource version: the
    /// same version of the same object, which is how a relist tells an unchanged object
    /// (the reflector compares every listed object with the cache here, once). A store of
    /// decoded objects reads it from the object ([`holds_version`]); one that keeps objects
    /// encoded answers without decoding; one whose objects have no resource version
    /// answers `false` (every listed object is then taken as changed).
    fn contains_version(&self, key: &str, resource_version: &str) -> bool;
}

/// Whether `obj` has this non-empty resource version: [`KnownObjects::contains_version`]
/// for a store that holds decoded objects, from what its `get_by_key` returns.
pub fn holds_version<K: MetaObject>(obj: Option<Arc<K>>, resource_version: &str) -> bool {
    !resource_version.is_empty()
        && obj.is_some_and(|o| o.object_resource_version() == Some(resource_version))
}

macro_rules! forward {
    ($($ptr:ty),*) => {$(
        impl<K, T: KnownObjects<K> + ?Sized> KnownObjects<K> for $ptr {
            fn list_keys(&self) -> Vec<ObjectKey> {
                (**self).list_keys()
            }
            fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
                (**self).get_by_key(key)
            }
            fn get_shared(&self, key: &str) -> Option<Arc<K>> {
                (**self).get_shared(key)
            }
            fn contains_version(&self, key: &str, resource_version: &str) -> bool {
                (**self).contains_version(key, resource_version)
            }
        }
    )*};
}

forward!(Arc<T>, Box<T>, &T);
