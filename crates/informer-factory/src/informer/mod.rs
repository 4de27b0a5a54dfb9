//! The SharedIndexInformer: reflector → FIFO → indexer → listeners. Here the informer and
//! its public methods; its builder (`builder.rs`), its state and how it starts (`core.rs`),
//! its task and how popped items reach the cache and the handlers (`core/process.rs`, the
//! only other code that sees the state's fields), what it reports (`stats.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kinformer_core::{BoxError, MetaObject};
use kinformer_indexer::{Indexer, Indexers, Lister};
use kinformer_reflector::{ListerWatcher, ReflectorStatus, ShardFiltering, TaskHandle};
use tokio_util::sync::CancellationToken;

use crate::{Error, ResourceEventHandler};

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

/// A handler's resync period as client-go normalizes it: zero means none, anything under
/// [`MINIMUM_RESYNC_PERIOD`] becomes it.
fn normalize_resync(period: Duration) -> Option<Duration> {
    if period.is_zero() {
        None
    } else {
        Some(period.max(MINIMUM_RESYNC_PERIOD))
    }
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

/// Keeps a local, indexed cache of one resource in step with the API server and tells
/// every registered handler about each change (client-go's `SharedIndexInformer`).
///
/// `T` is what it keeps and hands out — its cache's objects, its handlers' arguments, its
/// listers' results — and what its lister-watcher yields, so the lister-watcher chooses it:
///
/// - **[`Cached<K>`](kinformer_compact_store::Cached), the default** (a factory's
///   [`informer`](crate::SharedInformerFactory::informer); `KubeListerWatcher::cached`):
///   objects kept encoded, about their size on the wire, transcoded from protobuf without
///   building a `K`, and read in place through typed views (`pod.spec()?.node_name()`).
///   Every handler and reader gets the cached `Arc` itself; a read builds nothing.
///   `decode()` gives the `K` for code that changes it.
/// - **`K`, decoded** (a factory's [`decoded_informer`](crate::SharedInformerFactory::decoded_informer);
///   `KubeListerWatcher::new`, or any lister-watcher of `K`): client-go's cache of
///   decoded objects, shared as `Arc<K>`; several times the memory, and the sync decodes
///   every object.
///
/// Its other layers are chosen on the [builder](SharedIndexInformerBuilder), each on its
/// own: the FIFO, the store, the key function, the index functions.
///
/// Cloning is cheap and shares the informer. See the [crate docs](crate) for the pipeline,
/// its threads and its locks.
pub struct SharedIndexInformer<T> {
    core: Arc<Inner<T>>,
}

impl<T> Clone for SharedIndexInformer<T> {
    fn clone(&self) -> Self {
        Self {
            core: Arc::clone(&self.core),
        }
    }
}

impl<T> fmt::Debug for SharedIndexInformer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("name", &self.core.name())
            .finish_non_exhaustive()
    }
}

impl<T: MetaObject + Send + Sync + 'static> SharedIndexInformer<T> {
    /// An informer over `lister_watcher` with the default FIFO
    /// ([`FifoKind::InOrderAtomic`]), a [`ThreadSafeStore`](kinformer_indexer::ThreadSafeStore)
    /// of `T` with the namespace index, and `resync` as the default handler resync period
    /// (zero: none).
    pub fn new(lister_watcher: impl ListerWatcher<T> + 'static, resync: Duration) -> Self {
        Self::builder(lister_watcher).resync_period(resync).build()
    }

    /// A builder: the in-order FIFO in atomic mode, streaming initial list, a
    /// `ThreadSafeStore` of `T` with the namespace index, no resync, named `"informer"`.
    pub fn builder<L: ListerWatcher<T> + 'static>(
        lister_watcher: L,
    ) -> SharedIndexInformerBuilder<T> {
        SharedIndexInformerBuilder::new(Arc::new(lister_watcher))
    }

    /// Whether `self` and `other` are the same informer (clones of one another).
    pub fn is_same(&self, other: &Self) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.core), Arc::as_ptr(&other.core))
    }

    /// Registers `handler` with the informer's default resync period and an unbounded
    /// buffer; see [`add_event_handler_with_options`](Self::add_event_handler_with_options).
    ///
    /// # Errors
    /// As `add_event_handler_with_options`.
    pub fn add_event_handler<H>(&self, handler: H) -> Result<Registration<T>, Error>
    where
        H: ResourceEventHandler<T> + Send + 'static,
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
    ) -> Result<Registration<T>, Error>
    where
        H: ResourceEventHandler<T> + Send + 'static,
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
    /// twice. Every handler gets the same `Arc` of an object, the one the cache keeps.
    ///
    /// # Errors
    /// [`Error::Stopped`] once the informer has stopped; [`Error::SpawnThread`] when the
    /// listener's thread cannot be started.
    pub fn add_event_handler_with_options<H>(
        &self,
        handler: H,
        options: HandlerOptions,
    ) -> Result<Registration<T>, Error>
    where
        H: ResourceEventHandler<T> + Send + 'static,
    {
        let (id, state, resync) = self.core.add_handler(Box::new(handler), &options)?;
        Ok(Registration {
            id,
            state,
            resync,
            inner: Arc::clone(&self.core),
        })
    }

    /// Sets the transform that runs once on every object from the server before it is
    /// queued (client-go's `SetTransform`), e.g. to drop `managedFields`.
    ///
    /// It runs in the reflector as each object arrives (`Reflector::transform`): with the
    /// default streaming list, one object at a time. A paged list is decoded page by page
    /// first; `KubeListerWatcher::modify` (which the factory's `transform_meta` uses)
    /// changes objects while they are decoded. Objects already cached (resyncs,
    /// tombstones) are not transformed again. An error skips a watch event and fails a
    /// list, which is retried. A transform of cached objects changes the decoded object
    /// and encodes it again (`Cached::map`): it costs a decode of every object.
    ///
    /// # Errors
    /// [`Error::AlreadyStarted`] once the informer has started.
    pub fn set_transform(
        &self,
        transform: impl Fn(Arc<T>) -> Result<Arc<T>, BoxError> + Send + Sync + 'static,
    ) -> Result<(), Error> {
        self.core.set_transform(Arc::new(transform))
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
        self.core.set_watch_error_handler(Arc::new(handler))
    }

    /// Adds index functions; the objects already cached are indexed at once.
    ///
    /// # Errors
    /// [`Error::Stopped`] once the informer has stopped, [`Error::Indexer`] for a duplicate
    /// name or an index function that fails on a cached object (nothing is added then).
    pub fn add_indexers(&self, indexers: Indexers<T>) -> Result<(), Error> {
        self.core.add_indexers(indexers)
    }

    /// The informer's cache, for reads by key and by index: its read side only, so no
    /// reader can change what the informer keeps in step with the API server (client-go's
    /// `GetIndexer`, minus the writes). Reads hand out the cached objects themselves.
    pub fn indexer(&self) -> Arc<dyn Indexer<T>> {
        Arc::clone(self.core.store()) as Arc<dyn Indexer<T>>
    }

    /// A lister over the informer's cache: gets by name, lists by label selector,
    /// namespaced or not. With the default cache each result is the cached
    /// `Arc<Cached<K>>`, read through its view: a get is a map look-up and a reference
    /// count, a list builds no object.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_compact_store::Cached;
    /// use kinformer_informer_factory::SharedIndexInformer;
    /// use kinformer_reflector::fake::FakeListerWatcher;
    ///
    /// let informer = SharedIndexInformer::builder(FakeListerWatcher::<Cached<Pod>>::new()).build();
    /// let pods = informer.lister();
    /// // After the sync: `pods.namespaced("default").get("web-0")?.spec()?.node_name()`.
    /// assert!(pods.namespaced("default").get("web-0").unwrap_err().is_not_found());
    /// ```
    pub fn lister(&self) -> Lister<T> {
        Lister::from_dyn(self.indexer())
    }

    /// Whether the informer has started and the whole first list has been applied to the
    /// cache (its FIFO's `has_synced`).
    pub fn has_synced(&self) -> bool {
        self.core.has_synced()
    }

    /// The resource version of the last list, watch event or bookmark the reflector got;
    /// empty before start.
    pub fn last_sync_resource_version(&self) -> String {
        self.core
            .status()
            .map(|s| s.last_sync_resource_version())
            .unwrap_or_default()
    }

    /// The reflector's live progress (last resourceVersion, counters of lists, watches and
    /// events); `None` before start.
    pub fn reflector_status(&self) -> Option<ReflectorStatus> {
        self.core.status().cloned()
    }

    /// Its identity in client-go 1.36's informer metrics, if it has one (a factory's
    /// informers have one).
    pub fn identity(&self) -> Option<&InformerIdentity> {
        self.core.identity()
    }

    /// A snapshot of the informer's state for metrics and health checks: cheap (a few
    /// atomic loads and the cache's size), safe to take at any time.
    pub fn stats(&self) -> InformerStats {
        let status = self.core.status();
        InformerStats {
            name: self.core.name().to_owned(),
            started: self.is_started(),
            synced: self.has_synced(),
            objects: self.core.store().len(),
            last_sync_resource_version: status
                .map(ReflectorStatus::last_sync_resource_version)
                .unwrap_or_default(),
            reflector: status.map(ReflectorStatus::counters).unwrap_or_default(),
            last_error: status.and_then(ReflectorStatus::last_error),
            identity: self.core.identity().cloned(),
            queued_items: self.core.queued_items(),
            processing_latency: self.core.latency.snapshot(),
            snapshot: self.core.snapshots().map(|s| s.status()),
        }
    }

    /// For an informer of one shard ([`SharedIndexInformerBuilder::shard`]): whether the API
    /// server filters by shard ([`ShardFiltering::Server`]) or ignores the selector and the
    /// shard's objects are picked out here ([`ShardFiltering::Client`]), as far as seen;
    /// `None` for an informer of every object.
    pub fn shard_filtering(&self) -> Option<ShardFiltering> {
        self.core.shard_filtering()
    }

    /// Whether [`run`](Self::run) or [`start`](Self::start) was called.
    pub fn is_started(&self) -> bool {
        self.core.is_started()
    }

    /// Whether the informer has stopped.
    pub fn is_stopped(&self) -> bool {
        self.core.is_stopped()
    }

    /// How many handlers are registered (removed ones and those of a stopped informer do
    /// not count).
    pub fn handler_count(&self) -> usize {
        self.core.handler_count()
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
        let prepared = self.core.prepare()?;
        run_prepared(Arc::clone(&self.core), prepared, cancel).await
    }

    /// Writes the informer's snapshot now (see [`SnapshotOptions`]): the cache at the last
    /// synced resourceVersion, taken when nothing waits in its FIFO (waiting up to 2 s for
    /// such a moment). `Ok(None)` without a snapshot configured or before the informer has
    /// synced. A running informer also writes one every period and when it stops.
    ///
    /// # Errors
    /// [`Error::Snapshot`] when the file cannot be written, or the informer never had
    /// nothing queued for 2 s.
    pub async fn write_snapshot(
        &self,
    ) -> Result<Option<kinformer_compact_store::snapshot::Written>, Error> {
        snapshot::write(&self.core, snapshot::QUIET_PATIENCE).await
    }

    /// Starts the informer on a Tokio task; the handle stops it.
    ///
    /// # Errors
    /// As [`run`](Self::run), at once.
    pub fn start(&self) -> Result<InformerHandle, Error> {
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Reflector(kinformer_reflector::Error::NoRuntime))?;
        let cancel = CancellationToken::new();
        let prepared = self.core.prepare()?;
        let task = rt.spawn(run_prepared(
            Arc::clone(&self.core),
            prepared,
            cancel.clone(),
        ));
        Ok(TaskHandle::new(cancel, task))
    }
}

mod builder;
mod core;
mod snapshot;
mod stats;

use core::Inner;
use core::run_prepared;

pub use builder::SharedIndexInformerBuilder;
pub use snapshot::{
    DEFAULT_SNAPSHOT_PERIOD, LastWritten, Loaded, SnapshotOptions, SnapshotStart, SnapshotStatus,
};
pub use stats::{
    InformerHandle, InformerIdentity, InformerStats, LatencyHistogram, PROCESSING_LATENCY_BUCKETS,
    Registration,
};
