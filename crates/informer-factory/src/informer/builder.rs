//! Building a [`SharedIndexInformer`]: its options and its layers, each chosen on its own.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kinformer_compact_store::Cached;
use kinformer_core::{Clock, KeyFunc, KnownObjects, MetaObject, TokioClock, meta_namespace_key};
use kinformer_deltafifo::FifoQueue;
use kinformer_indexer::{IndexerWriter, Indexers, ThreadSafeStore, namespace_indexers};
use kinformer_reflector::{
    Backoff, ListerWatcher, ShardSelection, ShardSelector, ShardedListerWatcher,
};

use super::core::{Inner, Pipeline};
use super::snapshot::{SnapshotOptions, Snapshots};
use super::{FifoKind, InformerIdentity, SharedIndexInformer, normalize_resync};

/// Makes the informer's queue from the view of its store that a FIFO reads for tombstones
/// and resyncs; see [`SharedIndexInformerBuilder::custom_fifo`].
pub(super) type MakeFifo<K> =
    Box<dyn FnOnce(Arc<dyn KnownObjects<K>>) -> Arc<dyn FifoQueue<K>> + Send>;

/// The queue an informer builds when it starts.
pub(super) enum FifoChoice<K> {
    Kind(FifoKind),
    Custom(MakeFifo<K>),
}

impl<K> fmt::Debug for FifoChoice<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Kind(kind) => kind.fmt(f),
            Self::Custom(_) => f.write_str("Custom"),
        }
    }
}

/// Builds a [`SharedIndexInformer`]; see [`SharedIndexInformer::builder`].
pub struct SharedIndexInformerBuilder<K> {
    lw: Arc<dyn ListerWatcher<K>>,
    name: String,
    resync: Duration,
    fifo: FifoChoice<K>,
    watch_list: bool,
    backoff: Backoff,
    clock: Arc<dyn Clock>,
    indexers: Indexers<K>,
    store: Option<Arc<dyn IndexerWriter<K>>>,
    key_func: Option<KeyFunc<K>>,
    shard: Option<ShardSelection>,
    identity: Option<InformerIdentity>,
    snapshots: Option<Snapshots<K>>,
}

impl<K> fmt::Debug for SharedIndexInformerBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformerBuilder")
            .field("name", &self.name)
            .field("resync", &self.resync)
            .field("fifo", &self.fifo)
            .field("indexers", &self.indexers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl<K: MetaObject + Send + Sync + 'static> SharedIndexInformerBuilder<K> {
    /// A builder of the defaults over `lw`.
    pub(super) fn new(lw: Arc<dyn ListerWatcher<K>>) -> Self {
        Self {
            lw,
            name: String::from("informer"),
            resync: Duration::ZERO,
            fifo: FifoChoice::Kind(FifoKind::default()),
            watch_list: true,
            backoff: Backoff::default(),
            clock: Arc::new(TokioClock),
            indexers: namespace_indexers(),
            store: None,
            key_func: None,
            shard: None,
            identity: None,
            snapshots: None,
        }
    }

    /// The name of the informer's and its reflector's tracing spans (e.g. `"pods"`).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Its identity in client-go 1.36's informer metrics (`informer_queued_items`,
    /// `informer_processing_latency_seconds`, `informer_store_resource_version`, labelled
    /// `name`, `group`, `version`, `resource`); a factory gives each of its informers one.
    /// Without one the informer is not in those metrics (as client-go's unnamed informers).
    #[must_use]
    pub fn identity(mut self, identity: InformerIdentity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// The resync period of handlers added with
    /// [`add_event_handler`](SharedIndexInformer::add_event_handler) (client-go's
    /// `defaultEventHandlerResyncPeriod`); zero (the default) means none.
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync = period;
        self
    }

    /// The queue between reflector and informer, one of kinformer-deltafifo's (default
    /// [`FifoKind::InOrderAtomic`], as client-go v1.36).
    #[must_use]
    pub fn fifo(mut self, kind: FifoKind) -> Self {
        self.fifo = FifoChoice::Kind(kind);
        self
    }

    /// A queue of your own between reflector and informer: any [`FifoQueue`]. `make` is
    /// called once, when the informer starts, with the read-only view of the informer's
    /// store that a FIFO consults for tombstones on a relist and for resyncs
    /// (kinformer-core's [`KnownObjects`]); use it or not. The reflector writes into the
    /// queue through its [`Sink`](kinformer_core::Sink) side, the informer pops from it and
    /// applies every [`Item`](kinformer_deltafifo::Item) kind (see kinformer-deltafifo's `Item`); `has_synced` of the
    /// informer is the queue's.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_deltafifo::{DeltaFifo, FifoQueue};
    /// use kinformer_informer_factory::SharedIndexInformer;
    /// use kinformer_reflector::fake::FakeListerWatcher;
    ///
    /// // Here a DeltaFIFO that queues `Sync` rather than `Replaced` on a relist.
    /// let informer = SharedIndexInformer::<Pod>::builder(FakeListerWatcher::new())
    ///     .custom_fifo(|known| {
    ///         Arc::new(DeltaFifo::builder().known_objects(known).emit_replaced(false).build())
    ///             as Arc<dyn FifoQueue<Pod>>
    ///     })
    ///     .build();
    /// # let _ = informer;
    /// ```
    #[must_use]
    pub fn custom_fifo(
        mut self,
        make: impl FnOnce(Arc<dyn KnownObjects<K>>) -> Arc<dyn FifoQueue<K>> + Send + 'static,
    ) -> Self {
        self.fifo = FifoChoice::Custom(Box::new(make));
        self
    }

    /// Whether the reflector gets the initial state with a streaming list
    /// (`sendInitialEvents`, one watch event per object) rather than a List: on by
    /// default, as client-go v0.36's `WatchListClient` gate, for lister-watchers that
    /// [support it](kinformer_reflector::ListerWatcher::supports_watch_list) (the
    /// Kubernetes one does). A server that refuses streaming lists gets List+Watch. A
    /// streaming list never holds a whole list response in memory.
    #[must_use]
    pub fn watch_list(mut self, on: bool) -> Self {
        self.watch_list = on;
        self
    }

    /// How the reflector spaces its retries when the server fails (default
    /// [`Backoff::default`]: client-go's 800 ms doubling to 30 s, but started over once a
    /// watch delivers and capped at 1 s while the server is unreachable, so that the cache
    /// catches up within seconds of a partition or an API server restart;
    /// [`Backoff::client_go`] for client-go's policy to the letter).
    ///
    /// ```
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_informer_factory::SharedIndexInformer;
    /// use kinformer_reflector::{fake::FakeListerWatcher, Backoff};
    ///
    /// let mut backoff = Backoff::default();
    /// backoff.max = Duration::from_secs(10);
    /// let informer = SharedIndexInformer::<Pod>::builder(FakeListerWatcher::new())
    ///     .backoff(backoff)
    ///     .build();
    /// # let _ = informer;
    /// ```
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The clock the informer's reflector and resyncs read and sleep on (default:
    /// [`TokioClock`], Tokio's time, which a paused test runtime drives; see
    /// [`Reflector::clock`](kinformer_reflector::Reflector::clock)). A test hands the same
    /// [`FakeClock`](kinformer_core::FakeClock) to the informer, the work queue and the
    /// elector to drive them all by hand.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Index functions besides the namespace index, which is always there (listers use it).
    #[must_use]
    pub fn indexers(mut self, indexers: Indexers<K>) -> Self {
        self.indexers.extend(indexers);
        self
    }

    /// How the informer keys objects, when not `namespace/name` (client-go's `KeyFunc`):
    /// its FIFO, its built-in cache, its reflector (which compares listed objects with the
    /// cache by key) and handlers that coalesce by key all use it. A cache of your own
    /// ([`store`](Self::store)) or a FIFO of your own ([`custom_fifo`](Self::custom_fifo))
    /// must key objects the same way. Listers' `namespaced(..).get(name)` looks objects up
    /// by `namespace/name`: with another key function, read through
    /// [`SharedIndexInformer::indexer`] by your keys.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_core::ObjectKey;
    /// use kinformer_informer_factory::SharedIndexInformer;
    /// use kinformer_reflector::fake::FakeListerWatcher;
    ///
    /// // Pods keyed by their uid.
    /// let informer = SharedIndexInformer::<Pod>::builder(FakeListerWatcher::new())
    ///     .key_func(Arc::new(|p: &Pod| {
    ///         ObjectKey::new(None, p.metadata.uid.as_deref().unwrap_or_default())
    ///     }))
    ///     .build();
    /// # let _ = informer;
    /// ```
    #[must_use]
    pub fn key_func(mut self, key_func: KeyFunc<K>) -> Self {
        self.key_func = Some(key_func);
        self
    }

    /// A cache of your own instead of the default [`ThreadSafeStore`]: any
    /// [`IndexerWriter`] of the informer's objects (kept as they come: `Cached<K>` from a
    /// cached lister-watcher, `K` from a decoding one). The informer keeps the write side to
    /// itself and hands out only the read side ([`SharedIndexInformer::indexer`],
    /// listers). Listers need the namespace index
    /// ([`namespace_indexers`](kinformer_indexer::namespace_indexers)). The index functions given to
    /// [`indexers`](Self::indexers) are ignored then: give them to your store.
    #[must_use]
    pub fn store(self, store: impl IndexerWriter<K> + 'static) -> Self {
        self.store_arc(Arc::new(store))
    }

    /// [`store`](Self::store) for a cache already behind an `Arc`.
    #[must_use]
    pub fn store_arc(mut self, store: Arc<dyn IndexerWriter<K>>) -> Self {
        self.store = Some(store);
        self
    }

    /// Only the objects of one shard (Kubernetes 1.36's sharded list and watch): the
    /// lister-watcher is wrapped in a
    /// [`ShardedListerWatcher`](kinformer_reflector::ShardedListerWatcher), which sends
    /// `shardSelector` with every list and watch and keeps only the shard's objects
    /// whatever the server sends (a server without the feature gate `ShardedListAndWatch`
    /// sends every object). [`SharedIndexInformer::shard_filtering`] says which happened.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_informer_factory::SharedIndexInformer;
    /// use kinformer_reflector::{ShardKey, ShardSelector, fake::FakeListerWatcher};
    ///
    /// let shard = ShardSelector::index_of(ShardKey::Uid, 2, 12)?;
    /// let informer = SharedIndexInformer::<Pod>::builder(FakeListerWatcher::new())
    ///     .shard(shard)
    ///     .build();
    /// # let _ = informer;
    /// # Ok::<(), kinformer_reflector::Error>(())
    /// ```
    #[must_use]
    pub fn shard(mut self, selector: ShardSelector) -> Self {
        self.shard = Some(ShardSelection::new(Some(selector)));
        self
    }

    /// The objects of whatever shards `selection` selects while the informer runs: the
    /// union of the shards a replica holds, one informer for all of them
    /// (kinformer-sharding's `ShardManager::selection` keeps one up to date). As
    /// [`shard`](Self::shard) otherwise. A change that selects new shards relists at once,
    /// one that only selects fewer narrows the running watch without a list: either way the
    /// objects of the shards no longer selected leave the cache with delete notifications
    /// (tombstones), those of new shards arrive as adds, and the objects of the shards still
    /// selected stay (see [`ShardSelection`]).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_informer_factory::SharedIndexInformer;
    /// use kinformer_reflector::{ShardKey, ShardSelection, ShardSelector, fake::FakeListerWatcher};
    ///
    /// let selection = ShardSelection::new(None); // nothing held yet
    /// let informer = SharedIndexInformer::<Pod>::builder(FakeListerWatcher::new())
    ///     .shards(selection.clone())
    ///     .build();
    /// // Later, holding shards 2 and 3 of 12:
    /// let held = (2..4).map(|i| kinformer_reflector::ShardRange::index_of(i, 12));
    /// selection.set(Some(ShardSelector::ranges(ShardKey::Uid, held.collect::<Result<Vec<_>, _>>()?)?));
    /// # let _ = informer;
    /// # Ok::<(), kinformer_reflector::Error>(())
    /// ```
    #[must_use]
    pub fn shards(mut self, selection: ShardSelection) -> Self {
        self.shard = Some(selection);
        self
    }
}

impl<K: Send + Sync + 'static> SharedIndexInformerBuilder<Cached<K>> {
    /// Keeps the cache on disk and starts from it (see [`SnapshotOptions`]): `identity`
    /// says what the informer lists and watches — resource, namespace, selectors, shards,
    /// wire format, the cluster — so that a snapshot of anything else is refused. A
    /// factory's informers get one made of their options
    /// ([`SharedInformerFactoryBuilder::snapshots`](crate::SharedInformerFactoryBuilder::snapshots)).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_compact_store::Cached;
    /// use kinformer_informer_factory::{SharedIndexInformer, SnapshotOptions};
    /// use kinformer_reflector::fake::FakeListerWatcher;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let informer = SharedIndexInformer::<Cached<Pod>>::builder(FakeListerWatcher::new())
    ///     .snapshot(SnapshotOptions::new(dir.path()), "v1/pods in my-cluster")
    ///     .build();
    /// # let _ = informer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn snapshot(mut self, options: SnapshotOptions, identity: impl Into<String>) -> Self {
        self.snapshots = Some(Snapshots::new(options, identity.into()));
        self
    }
}

impl<K: MetaObject + Send + Sync + 'static> SharedIndexInformerBuilder<K> {
    /// The informer, not started: each layer as chosen (the lister-watcher, with one
    /// shard's objects when [`shard`](Self::shard) or [`shards`](Self::shards) was given;
    /// the FIFO; the store, by default a [`ThreadSafeStore`] of the informer's objects with
    /// the [`indexers`](Self::indexers); the key function), none changing another.
    pub fn build(self) -> SharedIndexInformer<K> {
        let store = self.store.unwrap_or_else(|| match &self.key_func {
            // The default key is made on the stack for look-ups.
            None => Arc::new(ThreadSafeStore::new(self.indexers)),
            Some(f) => Arc::new(ThreadSafeStore::with_key_func(Arc::clone(f), self.indexers)),
        });
        let key_func = self
            .key_func
            .unwrap_or_else(|| Arc::new(|obj: &K| meta_namespace_key(obj)));
        let mut snapshots = self.snapshots;
        if let (Some(snapshots), Some(selection)) = (snapshots.as_mut(), &self.shard) {
            snapshots.shards = Some(selection.clone());
        }
        let (lw, shard) = match self.shard {
            None => (self.lw, None),
            Some(selection) => {
                let sharded = ShardedListerWatcher::selected(self.lw, selection);
                let handle = sharded.filtering_handle();
                (Arc::new(sharded) as Arc<dyn ListerWatcher<K>>, Some(handle))
            }
        };
        let pipeline = Pipeline {
            key_func,
            lw,
            store,
            fifo: self.fifo,
            shard,
            identity: self.identity,
            snapshots,
        };
        let core = Inner::new(
            self.name,
            self.watch_list,
            self.backoff,
            self.clock,
            normalize_resync(self.resync),
            pipeline,
        );
        SharedIndexInformer {
            core: Arc::new(core),
        }
    }
}
