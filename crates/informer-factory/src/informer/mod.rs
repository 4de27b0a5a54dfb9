//! The SharedIndexInformer: reflector → FIFO → indexer → listeners. Here the informer and
//! its public methods; its builder (`builder.rs`), its state and how it starts (`core.rs`),
//! what its pipeline carries, `K` or `Encoded<K>` (`carried.rs`), its task and how popped
//! items reach the cache and the handlers (`process.rs`), what it reports (`stats.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kinformer_compact_store::Cached;
use kinformer_core::{BoxError, MetaObject};
use kinformer_indexer::{Indexer, Indexers, Lister};
use kinformer_reflector::{ListerWatcher, ReflectorStatus, ShardFiltering, TaskHandle};
use serde::Serialize;
use serde::de::DeserializeOwned;
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
/// Cloning is cheap and shares the informer. See the [crate docs](crate) for the pipeline,
/// its threads and its locks.
pub struct SharedIndexInformer<K> {
    core: Arc<dyn Core<K>>,
    /// The default cache's reads in place, when the informer keeps it.
    cached: Option<Arc<dyn Indexer<Cached<K>>>>,
}

impl<K> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        Self {
            core: Arc::clone(&self.core),
            cached: self.cached.clone(),
        }
    }
}

impl<K> fmt::Debug for SharedIndexInformer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("name", &self.core.name())
            .finish_non_exhaustive()
    }
}

impl<K> SharedIndexInformer<K>
where
    K: MetaObject + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// An informer over `lister_watcher` with the default FIFO
    /// ([`FifoKind::InOrderAtomic`]), the default cache ([`CacheKind::Encoded`](crate::CacheKind::Encoded)), the
    /// namespace index and `resync` as the default handler resync period (zero: none).
    pub fn new(lister_watcher: impl ListerWatcher<K> + 'static, resync: Duration) -> Self {
        Self::builder(lister_watcher).resync_period(resync).build()
    }
}

impl<K: MetaObject + Send + Sync + 'static> SharedIndexInformer<K> {
    /// A builder: the in-order FIFO in atomic mode, streaming initial list, the encoded
    /// cache with the namespace index, no resync, named `"informer"`.
    pub fn builder<L: ListerWatcher<K> + 'static>(
        lister_watcher: L,
    ) -> SharedIndexInformerBuilder<K> {
        let lw = Arc::new(lister_watcher);
        SharedIndexInformerBuilder::new(Arc::clone(&lw) as Arc<dyn ListerWatcher<K>>, lw)
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
    /// With the default cache, objects travel encoded: the handler's thread decodes each
    /// one it is given, as far as the handler needs ([`ResourceEventHandler::needs`]).
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
        let (id, state, resync) = self.core.add_handler(Box::new(handler), &options)?;
        Ok(Registration {
            id,
            state,
            resync,
            core: Arc::clone(&self.core),
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
    /// list, which is retried. With the default cache, the transform runs on each object
    /// decoded from the wire, before it is encoded (a Kubernetes lister-watcher then
    /// decodes protobuf into `K` instead of transcoding it).
    ///
    /// # Errors
    /// [`Error::AlreadyStarted`] once the informer has started.
    pub fn set_transform(
        &self,
        transform: impl Fn(Arc<K>) -> Result<Arc<K>, BoxError> + Send + Sync + 'static,
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
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error> {
        self.core.add_indexers(indexers)
    }

    /// The informer's cache, for reads by key and by index: its read side only, so no
    /// reader can change what the informer keeps in step with the API server (client-go's
    /// `GetIndexer`, minus the writes).
    pub fn indexer(&self) -> Arc<dyn Indexer<K>> {
        self.core.indexer()
    }

    /// A lister over the informer's cache. With the default cache each object it returns
    /// is decoded (a few microseconds a pod); [`cached_lister`](Self::cached_lister) reads
    /// them where they lie.
    pub fn lister(&self) -> Lister<K> {
        Lister::from_dyn(self.indexer())
    }

    /// The informer's cache read without decoding, when it keeps the default cache
    /// ([`CacheKind::Encoded`](crate::CacheKind::Encoded); `None` with decoded objects or a
    /// store of your own): the same reads as [`indexer`](Self::indexer), handing out the
    /// cached entries themselves ([`Cached<K>`], read through their typed views), as
    /// client-go hands out its cached pointers. Index functions are answered from the
    /// values computed when each object was cached.
    pub fn cached(&self) -> Option<Arc<dyn Indexer<Cached<K>>>> {
        self.cached.clone()
    }

    /// A lister over [`cached`](Self::cached): gets and selector lists that build no object.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_informer_factory::SharedIndexInformer;
    /// use kinformer_reflector::fake::FakeListerWatcher;
    ///
    /// let informer = SharedIndexInformer::<Pod>::builder(FakeListerWatcher::new()).build();
    /// let pods = informer.cached_lister().expect("the default cache");
    /// // After the sync: `pods.namespaced("default").get("web-0")?.spec()?.node_name()`.
    /// assert!(pods.namespaced("default").get("web-0").unwrap_err().is_not_found());
    /// ```
    pub fn cached_lister(&self) -> Option<Lister<Cached<K>>> {
        self.cached.clone().map(Lister::from_dyn)
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

    /// A snapshot of the informer's state for metrics and health checks: cheap (a few
    /// atomic loads and the cache's size), safe to take at any time.
    pub fn stats(&self) -> InformerStats {
        let status = self.core.status();
        InformerStats {
            name: self.core.name().to_owned(),
            started: self.is_started(),
            synced: self.has_synced(),
            objects: self.core.objects(),
            last_sync_resource_version: status
                .map(ReflectorStatus::last_sync_resource_version)
                .unwrap_or_default(),
            reflector: status.map(ReflectorStatus::counters).unwrap_or_default(),
            undecodable: self.core.undecodable(),
            last_error: status.and_then(ReflectorStatus::last_error),
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
        Arc::clone(&self.core).run(cancel)?.await
    }

    /// Starts the informer on a Tokio task; the handle stops it.
    ///
    /// # Errors
    /// As [`run`](Self::run), at once.
    pub fn start(&self) -> Result<InformerHandle, Error> {
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Reflector(kinformer_reflector::Error::NoRuntime))?;
        let cancel = CancellationToken::new();
        let task = rt.spawn(Arc::clone(&self.core).run(cancel.clone())?);
        Ok(TaskHandle::new(cancel, task))
    }
}

mod builder;
mod carried;
mod core;
mod process;
mod stats;

use core::Core;

pub use builder::SharedIndexInformerBuilder;
pub use stats::{InformerHandle, InformerStats, Registration};
