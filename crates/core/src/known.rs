use std::sync::Arc;

use crate::ObjectKey;

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
        }
    )*};
}

forward!(Arc<T>, Box<T>, &T);
