//! Which cache an informer keeps when it is given no store of its own.

use std::sync::Arc;

use kinformer_compact_store::{Cached, CompactStore};
use kinformer_core::{KeyFunc, MetaObject};
use kinformer_indexer::{Indexer, IndexerWriter, Indexers, ThreadSafeStore};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The kind of cache an informer keeps when no store of your own is given
/// ([`SharedIndexInformerBuilder::cache`](crate::SharedIndexInformerBuilder::cache), and
/// the factory's `cache`).
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_informer_factory::{CacheKind, SharedIndexInformer};
/// use kinformer_reflector::fake::FakeListerWatcher;
///
/// // A program that lists most of its cache on every pass keeps it decoded.
/// let informer = SharedIndexInformer::<Pod>::builder(FakeListerWatcher::new())
///     .cache(CacheKind::Decoded)
///     .build();
/// # let _ = informer;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheKind {
    /// Objects kept encoded and decoded when read (kinformer-compact-store's
    /// [`CompactStore`]): a few KB per pod, about its size on the wire, with
    /// `managedFields` kept as the JSON text the server sent. The informer's objects travel
    /// encoded from the wire to the cache (protobuf is transcoded without building a `K`);
    /// each handler's thread decodes what its handler needs
    /// ([`ResourceEventHandler::needs`](crate::ResourceEventHandler::needs)), so handlers
    /// get their own copies. A read decodes what it returns and hands out a new `Arc` (two
    /// reads give equal objects, not one allocation); label selectors and index lookups
    /// are answered before decoding, and a small cache keeps recently read objects
    /// decoded. The default: most controllers read one object per reconcile.
    #[default]
    Encoded,
    /// Decoded objects shared as `Arc` (kinformer-indexer's [`ThreadSafeStore`], what
    /// client-go keeps): reads cost nothing and return the cached allocation, every
    /// handler gets the same `Arc`, the cache takes several times the memory and the
    /// sync decodes every object. Pick it when handlers or reconciles list most of the
    /// cache on every pass.
    Decoded,
}

/// The encoded cache's reads in place.
pub(crate) type CachedReads<K> = Arc<dyn Indexer<Cached<K>>>;

impl CacheKind {
    /// An empty cache of this kind with these index functions, and its reads in place
    /// (the encoded cache's).
    pub(crate) fn store<K>(
        self,
        indexers: Indexers<K>,
        key_func: Option<KeyFunc<K>>,
    ) -> (Arc<dyn IndexerWriter<K>>, Option<CachedReads<K>>)
    where
        K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
    {
        let compact = |store: CompactStore<K>| {
            let store = Arc::new(store);
            let side = store.cached_side();
            (store as Arc<dyn IndexerWriter<K>>, Some(side))
        };
        match (self, key_func) {
            (Self::Encoded, None) => compact(CompactStore::new(indexers)),
            (Self::Encoded, Some(f)) => compact(CompactStore::with_key_func(f, indexers)),
            (Self::Decoded, None) => (Arc::new(ThreadSafeStore::new(indexers)), None),
            (Self::Decoded, Some(f)) => {
                (Arc::new(ThreadSafeStore::with_key_func(f, indexers)), None)
            }
        }
    }
}
