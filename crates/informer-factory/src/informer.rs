//! The SharedIndexInformer: reflector → FIFO → indexer → listeners.

use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use kinformer_core::{
    BoxError, DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType, ErrorChain, KnownObjects,
    ListPart, Listed, MetaObject, ObjectKey, TransformFn, Unchanged, deletion_handling_key,
    meta_namespace_key,
};
use kinformer_deltafifo::{DeltaFifo, FifoQueue, FifoQueueExt, InOrderFifo, Item};
use kinformer_indexer::{Indexer, IndexerWriter, Indexers, Lister, namespace_indexers};
use kinformer_reflector::{
    Backoff, ListerWatcher, Reflector, ReflectorCounters, ReflectorStatus, ShardFiltering,
    ShardFilteringHandle, ShardSelector, ShardedListerWatcher, TaskHandle, WatchErrorHandler,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::listener::{Buffering, ListenerState, Notification, Processor};
use crate::{CacheKind, Error, ResourceEventHandler};

/// The shortest resync period a handler can have (client-go's `minimumResyncPeriod`).
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// Which of kinformer-deltafifo's queues sits between the reflector and the informer (see
/// that crate's docs for the trade-offs). For a queue of your own, see
/// [`SharedIndexInformerBuilder::custom_fifo`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FifoKind {
    /// client-go's `DeltaFIFO`: one pop per key with the key's whole history (client-go's
    /// informers used it until v1.33).
    DeltaFifo,
    /// client-go's `RealFIFO`, per object: one event per entry, global arrival order
    /// (client-go v1.33–v1.35's default: `InOrderInformers` on, `AtomicFIFO` off).
    InOrder,
    /// The default, as in client-go v1.36 (`InOrderInformers` GA, `AtomicFIFO` beta and
    /// on): the in-order FIFO in atomic mode, where a relist is one `ReplacedAll` applied
    /// to the store as one `replace`, and bookmarks travel in line. Unlike client-go, the
    /// first list reaches the store in parts as it arrives (rule 52 in ARCHITECTURE.md).
    #[default]
    InOrderAtomic,
}

/// Makes the informer's queue from the view of its store that a FIFO reads for tombstones
/// and resyncs; see [`SharedIndexInformerBuilder::custom_fifo`].
type MakeFifo<K> = Box<dyn FnOnce(Arc<dyn KnownObjects<K>>) -> Arc<dyn FifoQueue<K>> + Send>;

/// The queue an informer builds when it starts.
enum FifoChoice<K> {
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

/// A handler's resync period as client-go normalizes it: zero means none, anything under
/// [`MINIMUM_RESYNC_PERIOD`] becomes it.
fn normalize_resync(period: Duration) -> Option<Duration> {
    if period.is_zero() {
        None
    } else {
        Some(period.max(MINIMUM_RESYNC_PERIOD))
    }
}

struct Config<K> {
    started: bool,
    stopped: bool,
    transform: Option<TransformFn<K>>,
    on_error: Option<WatchErrorHandler>,
    /// How often the reflector asks whether a handler's resync is due (client-go's
    /// `resyncCheckPeriod`).
    resync_check: Option<Duration>,
    /// Taken when the informer starts.
    fifo: Option<FifoChoice<K>>,
}

struct Inner<K> {
    name: String,
    lw: Arc<dyn ListerWatcher<K>>,
    /// The write side of the cache: only the informer holds it; everybody else gets the
    /// read side ([`SharedIndexInformer::indexer`]).
    store: Arc<dyn IndexerWriter<K>>,
    processor: Arc<Processor<K>>,
    watch_list: bool,
    backoff: Backoff,
    default_resync: Option<Duration>,
    config: Mutex<Config<K>>,
    /// client-go's `blockDeltas`: held while an item is applied and distributed, and while
    /// a late handler takes its snapshot of the cache, so that it misses nothing and gets
    /// nothing twice. Never held across a handler call or an `.await`.
    deliver: Mutex<()>,
    /// Told after every popped item is applied: a reflector paced by the FIFO's backlog
    /// waits on it ([`Inner::caught_up`]).
    drained: tokio::sync::Notify,
    fifo: OnceLock<Arc<dyn FifoQueue<K>>>,
    status: OnceLock<ReflectorStatus>,
    /// For a sharded informer: whether the server filters by shard.
    shard: Option<ShardFilteringHandle>,
}

/// How a handler is registered: its resync period and its buffer
/// ([`SharedIndexInformer::add_event_handler_with_options`]).
///
/// ```
/// use std::time::Duration;
/// use kinformer_informer_factory::HandlerOptions;
///
/// // A handler that only enqueues keys: resync every 5 minutes, one pending notification
/// // per object however fast they change.
/// let options = HandlerOptions::new().resync(Duration::from_secs(300)).coalesce_by_key();
/// # let _ = options;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HandlerOptions {
    /// The handler's resync period; `None` (the default): the informer's default one.
    pub resync: Option<Duration>,
    /// Whether the buffer keeps at most one pending notification per object key (false by
    /// default: every notification, as client-go).
    pub coalesce: bool,
}

impl HandlerOptions {
    /// The informer's default resync, an unbounded buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// A resync period of the handler's own (zero: none).
    #[must_use]
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync = Some(period);
        self
    }

    /// Buffer at most one notification per object key while the handler is busy: what it
    /// gets is the change from what it last saw of an object to the object's latest state
    /// (an add then updates arrive as one add of the latest; updates as one update from the
    /// first old to the last new; anything then a delete as the delete; a delete then a
    /// re-create as an update). Keys come in the order they first became pending.
    ///
    /// Memory is then bounded by the number of objects, not the number of events: a handler
    /// stuck for a minute at 1,000 events a second holds at most one notification per
    /// object instead of 60,000. A handler that only enqueues keys (the controller's
    /// handlers use this mode) loses nothing; one that needs every intermediate state (an
    /// audit log) should keep the default. Not in client-go, whose buffers are unbounded.
    #[must_use]
    pub fn coalesce_by_key(mut self) -> Self {
        self.coalesce = true;
        self
    }
}

/// The key a coalescing listener files `n` under: the object's namespace/name.
fn notification_key<K: MetaObject>(n: &Notification<K>) -> Option<ObjectKey> {
    match n {
        Notification::Add { obj, .. } | Notification::Update { new: obj, .. } => {
            meta_namespace_key(obj.as_ref()).ok()
        }
        Notification::Delete(d) => deletion_handling_key(d).ok(),
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
    indexers: Indexers<K>,
    cache: CacheKind,
    store: Option<Arc<dyn IndexerWriter<K>>>,
    shard: Option<ShardFilteringHandle>,
}

impl<K> fmt::Debug for SharedIndexInformerBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformerBuilder")
            .field("name", &self.name)
            .field("resync", &self.resync)
            .field("fifo", &self.fifo)
            .field("cache", &self.cache)
            .field("indexers", &self.indexers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl<K: MetaObject + Send + Sync + 'static> SharedIndexInformerBuilder<K> {
    /// The name of the informer's and its reflector's tracing spans (e.g. `"pods"`).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
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
    /// applies every [`Item`] kind (see kinformer-deltafifo's `Item`); `has_synced` of the
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

    /// Index functions besides the namespace index, which is always there (listers use it).
    #[must_use]
    pub fn indexers(mut self, indexers: Indexers<K>) -> Self {
        self.indexers.extend(indexers);
        self
    }

    /// Which built-in cache the informer keeps (default [`CacheKind::Encoded`]: objects
    /// kept encoded, decoded when read; [`CacheKind::Decoded`] for client-go's cache of
    /// decoded objects). Ignored when a [`store`](Self::store) of your own is given.
    #[must_use]
    pub fn cache(mut self, kind: CacheKind) -> Self {
        self.cache = kind;
        self
    }

    /// A cache of your own instead of the built-in one ([`cache`](Self::cache)): any
    /// [`IndexerWriter`]. The informer keeps the write side to itself and hands out only
    /// the read side ([`SharedIndexInformer::indexer`], listers). Listers need the
    /// namespace index ([`namespace_indexers`]). The index functions given to
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
        let sharded = ShardedListerWatcher::new(Arc::clone(&self.lw), selector);
        self.shard = Some(sharded.filtering_handle());
        self.lw = Arc::new(sharded);
        self
    }
}

impl<K> SharedIndexInformerBuilder<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// The informer, not started.
    ///
    /// `K` must be serde's both ways (every Kubernetes object type is): the default cache
    /// keeps objects encoded.
    pub fn build(self) -> SharedIndexInformer<K> {
        let default_resync = normalize_resync(self.resync);
        let (cache, indexers) = (self.cache, self.indexers);
        let store = self.store.unwrap_or_else(|| cache.store(indexers));
        SharedIndexInformer {
            inner: Arc::new(Inner {
                name: self.name,
                lw: self.lw,
                store,
                processor: Arc::new(Processor::default()),
                watch_list: self.watch_list,
                backoff: self.backoff,
                default_resync,
                config: Mutex::new(Config {
                    started: false,
                    stopped: false,
                    transform: None,
                    on_error: None,
                    resync_check: default_resync,
                    fifo: Some(self.fifo),
                }),
                deliver: Mutex::new(()),
                drained: tokio::sync::Notify::new(),
                fifo: OnceLock::new(),
                status: OnceLock::new(),
                shard: self.shard,
            }),
        }
    }
}

/// Keeps a local, indexed cache of one resource in step with the API server and tells
/// every registered handler about each change (client-go's `SharedIndexInformer`).
///
/// Cloning is cheap and shares the informer. See the [crate docs](crate) for the pipeline,
/// its threads and its locks.
pub struct SharedIndexInformer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for SharedIndexInformer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

impl<K> SharedIndexInformer<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// An informer over `lister_watcher` with the default FIFO
    /// ([`FifoKind::InOrderAtomic`]), the default cache ([`CacheKind::Encoded`]), the
    /// namespace index and `resync` as the default handler resync period (zero: none).
    pub fn new(lister_watcher: impl ListerWatcher<K> + 'static, resync: Duration) -> Self {
        Self::builder(lister_watcher).resync_period(resync).build()
    }
}

impl<K: MetaObject + Send + Sync + 'static> SharedIndexInformer<K> {
    /// A builder: the in-order FIFO in atomic mode, streaming initial list, the encoded
    /// cache with the namespace index, no resync, named `"informer"`.
    pub fn builder(
        lister_watcher: impl ListerWatcher<K> + 'static,
    ) -> SharedIndexInformerBuilder<K> {
        SharedIndexInformerBuilder {
            lw: Arc::new(lister_watcher),
            name: String::from("informer"),
            resync: Duration::ZERO,
            fifo: FifoChoice::Kind(FifoKind::default()),
            watch_list: true,
            backoff: Backoff::default(),
            indexers: namespace_indexers(),
            cache: CacheKind::default(),
            store: None,
            shard: None,
        }
    }

    /// Whether `self` and `other` are the same informer (clones of one another).
    pub fn is_same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn config(&self) -> MutexGuard<'_, Config<K>> {
        self.inner
            .config
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `handler` with the informer's default resync period and an unbounded
    /// buffer; see [`add_event_handler_with_options`](Self::add_event_handler_with_options).
    ///
    /// # Errors
    /// As `add_event_handler_with_options`.
    pub fn add_event_handler<H>(&self, handler: H) -> Result<Registration<K>, Error>
    where
        H: ResourceEventHandler<K> + Send + 'static,
    {
        self.add_event_handler_with_options(handler, HandlerOptions::new())
    }

    /// Registers `handler` with its own `resync` period (client-go's
    /// `AddEventHandlerWithResyncPeriod`); see
    /// [`add_event_handler_with_options`](Self::add_event_handler_with_options).
    ///
    /// # Errors
    /// As `add_event_handler_with_options`.
    pub fn add_event_handler_with_resync<H>(
        &self,
        handler: H,
        resync: Duration,
    ) -> Result<Registration<K>, Error>
    where
        H: ResourceEventHandler<K> + Send + 'static,
    {
        self.add_event_handler_with_options(handler, HandlerOptions::new().resync(resync))
    }

    /// Registers `handler` on a listener of its own: a buffer and a thread, so that a slow
    /// handler delays nobody but itself.
    ///
    /// [`HandlerOptions::resync`]: zero means no resync; anything under
    /// [`MINIMUM_RESYNC_PERIOD`] becomes it. Before start, a shorter period makes the
    /// reflector check for due resyncs more often; after start, a period shorter than that
    /// check interval is raised to it (as in client-go), and an informer started without any
    /// resync never resyncs. [`HandlerOptions::coalesce_by_key`]: a buffer bounded by the
    /// number of objects instead of the number of events.
    ///
    /// Added after start, the handler first gets an `on_add(obj, true)` for every cached
    /// object, taken while no item is being applied: it misses no later event and sees none
    /// twice.
    ///
    /// # Errors
    /// [`Error::Stopped`] once the informer has stopped; [`Error::SpawnThread`] when the
    /// listener's thread cannot be started.
    pub fn add_event_handler_with_options<H>(
        &self,
        handler: H,
        options: HandlerOptions,
    ) -> Result<Registration<K>, Error>
    where
        H: ResourceEventHandler<K> + Send + 'static,
    {
        let period = options
            .resync
            .unwrap_or_else(|| self.inner.default_resync.unwrap_or_default());
        let mut resync = normalize_resync(period);
        let buffering = if options.coalesce {
            Buffering::CoalesceByKey(notification_key::<K>)
        } else {
            Buffering::Unbounded
        };
        // Held throughout, so that a concurrent stop cannot miss the new listener.
        let mut cfg = self.config();
        if cfg.stopped {
            return Err(Error::Stopped);
        }
        if let Some(period) = resync {
            match (cfg.started, cfg.resync_check) {
                (false, check) => {
                    cfg.resync_check = Some(check.map_or(period, |c| c.min(period)));
                }
                (true, Some(check)) if period < check => {
                    tracing::warn!(
                        informer = %self.inner.name,
                        requested_ms = period.as_millis() as u64,
                        check_ms = check.as_millis() as u64,
                        "the informer has started: a handler's resync period is raised to its resync check period"
                    );
                    resync = Some(check);
                }
                (true, Some(_)) => {}
                (true, None) => tracing::warn!(
                    informer = %self.inner.name,
                    "the informer was started without any resync: this handler will not be resynced"
                ),
            }
        }
        let (id, state) = if cfg.started {
            let _deliver = self.lock_deliver();
            let snapshot = self.inner.store.list();
            self.inner
                .processor
                .add(handler, resync, buffering, snapshot)?
        } else {
            self.inner
                .processor
                .add(handler, resync, buffering, Vec::new())?
        };
        drop(cfg);
        Ok(Registration {
            id,
            state,
            resync,
            inner: Arc::clone(&self.inner),
        })
    }

    fn lock_deliver(&self) -> MutexGuard<'_, ()> {
        self.inner.lock_deliver()
    }

    /// Sets the transform that runs once on every object from the server before it is
    /// queued (client-go's `SetTransform`), e.g. to drop `managedFields`.
    ///
    /// It runs in the reflector as each object arrives (`Reflector::transform`): with the
    /// default streaming list, one object at a time. A paged list is decoded page by page
    /// first; `KubeListerWatcher::modify` (which the factory's `transform_meta` uses)
    /// changes objects while they are decoded. Objects already cached (resyncs,
    /// tombstones) are not transformed again. An error skips a watch event and fails a
    /// list, which is retried.
    ///
    /// # Errors
    /// [`Error::AlreadyStarted`] once the informer has started.
    pub fn set_transform(
        &self,
        transform: impl Fn(Arc<K>) -> Result<Arc<K>, BoxError> + Send + Sync + 'static,
    ) -> Result<(), Error> {
        let mut cfg = self.config();
        if cfg.started {
            return Err(Error::AlreadyStarted);
        }
        cfg.transform = Some(Arc::new(transform));
        Ok(())
    }

    /// Sets the hook that receives every error of the informer's reflector (client-go's
    /// `SetWatchErrorHandler`). It runs on the reflector's task: keep it quick.
    ///
    /// # Errors
    /// [`Error::AlreadyStarted`] once the informer has started.
    pub fn set_watch_error_handler(
        &self,
        handler: impl Fn(&kinformer_reflector::Error) + Send + Sync + 'static,
    ) -> Result<(), Error> {
        let mut cfg = self.config();
        if cfg.started {
            return Err(Error::AlreadyStarted);
        }
        cfg.on_error = Some(Arc::new(handler));
        Ok(())
    }

    /// Adds index functions; the objects already cached are indexed at once.
    ///
    /// # Errors
    /// [`Error::Stopped`] once the informer has stopped, [`Error::Indexer`] for a duplicate
    /// name or an index function that fails on a cached object (nothing is added then).
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error> {
        if self.config().stopped {
            return Err(Error::Stopped);
        }
        self.inner.store.add_indexers(indexers)?;
        Ok(())
    }

    /// The informer's cache, for reads by key and by index: its read side only, so no
    /// reader can change what the informer keeps in step with the API server (client-go's
    /// `GetIndexer`, minus the writes).
    pub fn indexer(&self) -> Arc<dyn Indexer<K>> {
        Arc::clone(&self.inner.store) as Arc<dyn Indexer<K>>
    }

    /// A lister over the informer's cache.
    pub fn lister(&self) -> Lister<K> {
        Lister::from_dyn(self.indexer())
    }

    /// Whether the informer has started and the whole first list has been applied to the
    /// cache (its FIFO's `has_synced`).
    pub fn has_synced(&self) -> bool {
        self.inner.has_synced()
    }

    /// The resource version of the last list, watch event or bookmark the reflector got;
    /// empty before start.
    pub fn last_sync_resource_version(&self) -> String {
        self.inner
            .status
            .get()
            .map(ReflectorStatus::last_sync_resource_version)
            .unwrap_or_default()
    }

    /// The reflector's live progress (last resourceVersion, counters of lists, watches and
    /// events); `None` before start.
    pub fn reflector_status(&self) -> Option<ReflectorStatus> {
        self.inner.status.get().cloned()
    }

    /// A snapshot of the informer's state for metrics and health checks: cheap (a few
    /// atomic loads and the cache's size), safe to take at any time.
    pub fn stats(&self) -> InformerStats {
        let status = self.inner.status.get();
        InformerStats {
            name: self.inner.name.clone(),
            started: self.is_started(),
            synced: self.has_synced(),
            objects: self.inner.store.len(),
            last_sync_resource_version: status
                .map(ReflectorStatus::last_sync_resource_version)
                .unwrap_or_default(),
            reflector: status.map(ReflectorStatus::counters).unwrap_or_default(),
        }
    }

    /// For an informer of one shard ([`SharedIndexInformerBuilder::shard`]): whether the API
    /// server filters by shard ([`ShardFiltering::Server`]) or ignores the selector and the
    /// shard's objects are picked out here ([`ShardFiltering::Client`]), as far as seen;
    /// `None` for an informer of every object.
    pub fn shard_filtering(&self) -> Option<ShardFiltering> {
        self.inner.shard.as_ref().map(ShardFilteringHandle::get)
    }

    /// Whether [`run`](Self::run) or [`start`](Self::start) was called.
    pub fn is_started(&self) -> bool {
        self.config().started
    }

    /// Whether the informer has stopped.
    pub fn is_stopped(&self) -> bool {
        self.config().stopped
    }

    /// How many handlers are registered (removed ones and those of a stopped informer do
    /// not count).
    pub fn handler_count(&self) -> usize {
        self.inner.processor.len()
    }

    /// Runs the informer until `cancel` is cancelled, then stops it: the FIFO is closed,
    /// the reflector stopped and every listener told to end (a handler call in progress
    /// finishes on its thread; what is still buffered is dropped). Dropping the future
    /// stops it too.
    ///
    /// # Errors
    /// [`Error::AlreadyStarted`] when called twice, [`Error::Stopped`] after a stop,
    /// [`Error::Reflector`] outside a Tokio runtime.
    pub async fn run(&self, cancel: CancellationToken) -> Result<(), Error> {
        let prepared = self.prepare()?;
        run_prepared(Arc::clone(&self.inner), prepared, cancel).await
    }

    /// Starts the informer on a Tokio task; the handle stops it.
    ///
    /// # Errors
    /// As [`run`](Self::run), at once.
    pub fn start(&self) -> Result<InformerHandle, Error> {
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Reflector(kinformer_reflector::Error::NoRuntime))?;
        let prepared = self.prepare()?;
        let cancel = CancellationToken::new();
        let task = rt.spawn(run_prepared(
            Arc::clone(&self.inner),
            prepared,
            cancel.clone(),
        ));
        Ok(TaskHandle::new(cancel, task))
    }

    /// Marks the informer started and builds its FIFO and reflector.
    fn prepare(&self) -> Result<Prepared<K>, Error> {
        let mut cfg = self.config();
        if cfg.stopped {
            return Err(Error::Stopped);
        }
        if cfg.started {
            return Err(Error::AlreadyStarted);
        }
        let inner = &self.inner;
        let known = Arc::clone(&inner.store) as Arc<dyn KnownObjects<K>>;
        let fifo: Arc<dyn FifoQueue<K>> = match cfg.fifo.take() {
            Some(FifoChoice::Custom(make)) => make(known),
            Some(FifoChoice::Kind(FifoKind::DeltaFifo)) => {
                Arc::new(DeltaFifo::builder().known_objects(known).build())
            }
            Some(FifoChoice::Kind(FifoKind::InOrder)) => Arc::new(InOrderFifo::new(Some(known))),
            Some(FifoChoice::Kind(FifoKind::InOrderAtomic)) | None => Arc::new(
                InOrderFifo::builder()
                    .atomic(true)
                    .emit_bookmarks(true)
                    .build()?,
            ),
        };
        let mut reflector = Reflector::new(Arc::clone(&inner.lw), Arc::clone(&fifo))
            .name(inner.name.clone())
            .watch_list(inner.watch_list)
            .backoff(inner.backoff.clone())
            // Objects that do not decode keep their cached version (and can be deleted).
            .known_objects(Arc::clone(&inner.store) as Arc<dyn KnownObjects<K>>);
        if let Some(check) = cfg.resync_check {
            let processor = Arc::clone(&inner.processor);
            reflector = reflector
                .resync_period(check)
                .should_resync(move || processor.should_resync(Instant::now()));
        }
        if let Some(on_error) = cfg.on_error.clone() {
            reflector = reflector.on_watch_error(move |e| on_error(e));
        }
        // In the reflector, not the FIFO: a streaming list then never holds every object
        // untransformed at once (see `Reflector::transform`).
        if let Some(t) = cfg.transform.clone() {
            reflector = reflector.transform(t);
        }
        // A first list in parts goes no faster than the cache takes it: decoding outruns
        // encoding into the default cache, and the decoded objects waiting in the FIFO were
        // most of the sync's peak memory.
        let paced = (Arc::clone(&fifo), Arc::clone(inner));
        reflector = reflector.pace(Arc::new(move || {
            let (fifo, inner) = (Arc::clone(&paced.0), Arc::clone(&paced.1));
            Box::pin(async move { inner.caught_up(&*fifo).await })
        }));
        // The only place that sets them, under the config lock, once.
        let _ = inner.status.set(reflector.status());
        let _ = inner.fifo.set(Arc::clone(&fifo));
        cfg.started = true;
        Ok(Prepared { fifo, reflector })
    }
}

type InformerReflector<K> = Reflector<K, Arc<dyn ListerWatcher<K>>, Arc<dyn FifoQueue<K>>>;

struct Prepared<K> {
    fifo: Arc<dyn FifoQueue<K>>,
    reflector: InformerReflector<K>,
}

/// Closes the FIFO, ends every listener and marks the informer stopped, however `run`
/// ends (returned, or its future dropped).
struct StopGuard<K: MetaObject + Send + Sync + 'static> {
    inner: Arc<Inner<K>>,
    fifo: Arc<dyn FifoQueue<K>>,
}

impl<K: MetaObject + Send + Sync + 'static> Drop for StopGuard<K> {
    fn drop(&mut self) {
        self.inner
            .config
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stopped = true;
        self.fifo.close();
        self.inner.processor.stop_all();
        tracing::debug!(informer = %self.inner.name, "informer stopped");
    }
}

async fn run_prepared<K: MetaObject + Send + Sync + 'static>(
    inner: Arc<Inner<K>>,
    prepared: Prepared<K>,
    cancel: CancellationToken,
) -> Result<(), Error> {
    let Prepared { fifo, reflector } = prepared;
    let guard = StopGuard {
        inner: Arc::clone(&inner),
        fifo: Arc::clone(&fifo),
    };
    let reflector = reflector.spawn()?;
    let span = tracing::info_span!("informer", name = %inner.name);
    pop_loop(&inner, &*fifo, &cancel).instrument(span).await;
    let result = reflector.stop().await;
    drop(guard);
    match result {
        Err(e) if e.is_sink_closed() => Ok(()),
        other => other.map_err(Error::from),
    }
}

/// client-go's `processLoop`: pop, apply, tell the listeners, until cancelled.
async fn pop_loop<K: MetaObject + Send + Sync + 'static>(
    inner: &Inner<K>,
    fifo: &dyn FifoQueue<K>,
    cancel: &CancellationToken,
) {
    loop {
        let popped = tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            popped = fifo.pop_async() => match popped {
                Ok(p) => p,
                Err(_) => return, // closed
            },
        };
        inner.process(popped.item(), popped.is_in_initial_list());
        // Dropped after `process` released the delivery lock and every store lock (the
        // FIFO's documented rule): this marks the item applied.
        drop(popped);
        inner.drained.notify_waiters();
    }
}

/// How many entries the FIFO may hold before a reflector taking a list in parts waits for
/// the informer: one part beside the one being decoded keeps both tasks busy.
const PACED_BACKLOG: usize = kinformer_reflector::STREAMED_PART;

/// How long a paced reflector waits for the FIFO before it hands on the next part anyway:
/// a queue of your own ([`SharedIndexInformerBuilder::custom_fifo`]) whose `len` counts
/// entries it hands out only once the list ends must slow the list, not stall it.
const PACE_PATIENCE: Duration = Duration::from_secs(5);

impl<K: MetaObject + Send + Sync + 'static> Inner<K> {
    fn lock_deliver(&self) -> MutexGuard<'_, ()> {
        self.deliver.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn has_synced(&self) -> bool {
        self.fifo.get().is_some_and(|f| f.has_synced())
    }

    /// Resolves once `fifo` holds at most [`PACED_BACKLOG`] entries, or is closed, or
    /// after [`PACE_PATIENCE`].
    async fn caught_up(&self, fifo: &dyn FifoQueue<K>) {
        let deadline = tokio::time::Instant::now() + PACE_PATIENCE;
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            // Registered before the check, so that a pop between the two is not missed.
            drained.as_mut().enable();
            if fifo.len() <= PACED_BACKLOG || fifo.is_closed() {
                return;
            }
            if tokio::time::timeout_at(deadline, drained).await.is_err() {
                return;
            }
        }
    }

    /// Applies one popped item to the store and distributes its notifications, as
    /// client-go's `processDeltas` / `processReplacedAllInfo`.
    fn process(&self, item: &Item<K>, initial: bool) {
        let _deliver = self.lock_deliver();
        match item {
            Item::Deltas { key, deltas } => {
                for d in deltas {
                    self.apply(key, d, initial);
                }
            }
            Item::Batch(events) => {
                for (key, d) in events {
                    self.apply(key, d, initial);
                }
            }
            Item::ReplacedAll {
                objects,
                unchanged,
                resource_version,
            } => self.replace_all(objects, unchanged, resource_version, initial),
            Item::SyncAll => {
                for obj in self.store.list() {
                    let n = Notification::Update {
                        old: Arc::clone(&obj),
                        new: obj,
                    };
                    self.processor.distribute(&n, true);
                }
            }
            Item::Bookmark { resource_version } => {
                if let Err(err) = self.store.bookmark(resource_version) {
                    tracing::warn!(error = %ErrorChain(&err), resource_version, "cannot record a bookmark in the cache");
                }
            }
            other => tracing::warn!(kind = other.kind(), "unknown FIFO item ignored"),
        }
    }

    fn apply(&self, key: &ObjectKey, d: &Delta<K>, initial: bool) {
        let obj = d.object.object();
        if d.kind == DeltaType::Deleted {
            if let Err(err) = self.store.delete(Arc::clone(obj)) {
                tracing::warn!(%key, error = %ErrorChain(&err), "cannot delete from the cache");
                return;
            }
            self.processor
                .distribute(&Notification::Delete(d.object.clone()), false);
            return;
        }
        // Sync, Replaced, Added, Updated: update if present, else add.
        match self.stored_version(key, obj) {
            Some(old) => {
                if let Err(err) = self.store.update(Arc::clone(obj)) {
                    tracing::warn!(%key, error = %ErrorChain(&err), "cannot update the cache");
                    return;
                }
                self.notify_update(old, Arc::clone(obj));
            }
            None => {
                if let Err(err) = self.store.add(Arc::clone(obj)) {
                    tracing::warn!(%key, error = %ErrorChain(&err), "cannot add to the cache");
                    return;
                }
                let n = Notification::Add {
                    obj: Arc::clone(obj),
                    initial,
                };
                self.processor.distribute(&n, false);
            }
        }
    }

    /// What the store holds under `key`, the old version of `obj`: the stored object when
    /// the store can hand it out as it is ([`KnownObjects::get_shared`]); else `obj` itself
    /// when the store holds the same version (same non-empty resource version), which a
    /// store that keeps objects encoded answers without decoding, so that a relist or a
    /// resync does not decode a second copy of everything unchanged; else the stored object
    /// decoded.
    fn stored_version(&self, key: &ObjectKey, obj: &Arc<K>) -> Option<Arc<K>> {
        let key = key.as_str();
        if let Some(stored) = self.store.get_shared(key) {
            return Some(stored);
        }
        let same_version = obj
            .object_resource_version()
            .is_some_and(|rv| self.store.contains_version(key, rv));
        if same_version {
            Some(Arc::clone(obj))
        } else {
            self.store.get_by_key(key)
        }
    }

    /// An update whose resource version did not change is a resync: it goes only to the
    /// listeners whose resync is due (client-go's `OnUpdate`).
    fn notify_update(&self, old: Arc<K>, new: Arc<K>) {
        let is_sync = old.object_resource_version() == new.object_resource_version();
        self.processor
            .distribute(&Notification::Update { old, new }, is_sync);
    }

    /// client-go's `processReplacedAllInfo`: one `replace` of the store, then deletes
    /// (tombstones) for the keys that vanished, then adds / updates in list order. Objects
    /// listed as `unchanged` keys (the store holds that version) stay as the store holds
    /// them and are resync updates, so they reach only listeners whose resync is due, after
    /// the others.
    fn replace_all(
        &self,
        objects: &[(ObjectKey, Arc<K>)],
        unchanged: &[ObjectKey],
        rv: &str,
        initial: bool,
    ) {
        let listed: HashSet<&str> = objects
            .iter()
            .map(|(k, _)| k.as_str())
            .chain(unchanged.iter().map(ObjectKey::as_str))
            .collect();
        let deletions: Vec<DeletedFinalStateUnknown<K>> = self
            .store
            .list_keys()
            .into_iter()
            .filter(|k| !listed.contains(k.as_str()))
            .filter_map(|key| {
                let obj = self.store.get_by_key(key.as_str())?;
                Some(DeletedFinalStateUnknown { key, obj })
            })
            .collect();
        drop(listed);
        let replacements: Vec<(Option<Arc<K>>, Arc<K>)> = objects
            .iter()
            .map(|(k, o)| (self.stored_version(k, o), Arc::clone(o)))
            .collect();
        // Unchanged objects by key: the store keeps its entries (one that reads them back
        // gets its own objects).
        let cache = Arc::clone(&self.store) as Arc<dyn KnownObjects<K>>;
        let items: Vec<Listed<K>> = objects
            .iter()
            .map(|(_, o)| Listed::Object(Arc::clone(o)))
            .chain(
                unchanged
                    .iter()
                    .map(|k| Listed::Unchanged(Unchanged::new(k.clone(), Arc::clone(&cache)))),
            )
            .collect();
        let replaced = self
            .store
            .replace(ListPart::new(items, true, Some(rv.to_owned())));
        if let Err(err) = replaced {
            tracing::warn!(error = %ErrorChain(&err), resource_version = rv, "cannot replace the cache");
            return;
        }
        for t in deletions {
            self.processor
                .distribute(&Notification::Delete(DeltaObject::Tombstone(t)), false);
        }
        for (old, new) in replacements {
            match old {
                Some(old) => self.notify_update(old, new),
                None => self
                    .processor
                    .distribute(&Notification::Add { obj: new, initial }, false),
            }
        }
        if self.processor.any_syncing() {
            for key in unchanged {
                if let Some(obj) = self.store.get_by_key(key.as_str()) {
                    let n = Notification::Update {
                        old: Arc::clone(&obj),
                        new: obj,
                    };
                    self.processor.distribute(&n, true);
                }
            }
        }
    }
}

/// What an informer reports about itself: see [`SharedIndexInformer::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InformerStats {
    /// The informer's name (a factory's informers are named after their resource:
    /// `pods.v1 (default)`).
    pub name: String,
    /// Whether it was started.
    pub started: bool,
    /// Whether its first list has been applied to the cache.
    pub synced: bool,
    /// How many objects its cache holds.
    pub objects: usize,
    /// The resource version of the last list, event or bookmark; empty before start.
    pub last_sync_resource_version: String,
    /// What its reflector did: lists by reason, watches, events by type.
    pub reflector: ReflectorCounters,
}

/// A handler's registration with an informer (client-go's `ResourceEventHandlerRegistration`).
///
/// Dropping it does not remove the handler: call [`remove`](Self::remove).
pub struct Registration<K> {
    id: u64,
    state: Arc<ListenerState>,
    resync: Option<Duration>,
    inner: Arc<Inner<K>>,
}

impl<K> fmt::Debug for Registration<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("id", &self.id)
            .field("resync", &self.resync)
            .field("pending", &self.state.pending.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<K: MetaObject + Send + Sync + 'static> Registration<K> {
    /// Whether the informer has synced *and* this handler has handled every initial add
    /// it was given (the first list, or the cache replay of a late handler).
    pub fn has_synced(&self) -> bool {
        // The informer first: once it has synced, every initial add has been counted.
        self.inner.has_synced() && self.state.initial_pending.load(Ordering::Acquire) == 0
    }

    /// How many notifications wait in this handler's buffer or are being handled.
    pub fn pending(&self) -> usize {
        self.state.pending.load(Ordering::Acquire)
    }

    /// The effective resync period (after normalization): `None` for no resync.
    pub fn resync_period(&self) -> Option<Duration> {
        self.resync
    }

    /// Removes the handler: it gets no more notifications, and its thread ends after the
    /// call in progress, if any. Removing twice is harmless.
    pub fn remove(&self) {
        self.inner.processor.remove(self.id);
    }
}

/// A running informer, from [`SharedIndexInformer::start`]: its
/// [`cancellation_token`](TaskHandle::cancellation_token), [`is_finished`](TaskHandle::is_finished)
/// and [`stop`](TaskHandle::stop), which stops the informer, waits until its task has ended
/// and returns what [`SharedIndexInformer::run`] returned. Dropping it leaves the informer
/// running (as a Tokio `JoinHandle`, and as a client-go informer runs until its stop
/// channel closes), so `informer.start()?;` is safe; keep it to stop the informer.
pub type InformerHandle = TaskHandle<Error>;
