//! The SharedIndexInformer: reflector → FIFO → indexer → listeners. Here the informer and
//! its public methods; its builder (`builder.rs`), its task and how popped items reach the
//! cache and the handlers (`process.rs`), what it reports (`stats.rs`).

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use kinformer_core::{BoxError, KeyFunc, KnownObjects, MetaObject, ObjectKey, TransformFn};
use kinformer_deltafifo::{DeltaFifo, FifoQueue, InOrderFifo};
use kinformer_indexer::{Indexer, IndexerWriter, Indexers, Lister, namespace_indexers};
use kinformer_reflector::{
    Backoff, ListerWatcher, Reflector, ReflectorStatus, ShardFiltering, ShardFilteringHandle,
    TaskHandle, WatchErrorHandler,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::listener::{Buffering, Processor};
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
    /// How the FIFO, the cache, the reflector and coalescing handlers key objects.
    key_func: KeyFunc<K>,
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
            key_func: None,
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
            let key_func = Arc::clone(&self.inner.key_func);
            Buffering::CoalesceByKey(Arc::new(move |n| notification_key(&key_func, n)))
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
            Some(FifoChoice::Kind(FifoKind::DeltaFifo)) => Arc::new(
                DeltaFifo::builder()
                    .key_fn(key_fn(&inner.key_func))
                    .known_objects(known)
                    .build(),
            ),
            Some(FifoChoice::Kind(FifoKind::InOrder)) => Arc::new(
                InOrderFifo::builder()
                    .key_fn(key_fn(&inner.key_func))
                    .known_objects(known)
                    .build()?,
            ),
            Some(FifoChoice::Kind(FifoKind::InOrderAtomic)) | None => Arc::new(
                InOrderFifo::builder()
                    .key_fn(key_fn(&inner.key_func))
                    .atomic(true)
                    .emit_bookmarks(true)
                    .build()?,
            ),
        };
        let mut reflector = Reflector::new(Arc::clone(&inner.lw), Arc::clone(&fifo))
            .name(inner.name.clone())
            .watch_list(inner.watch_list)
            .backoff(inner.backoff.clone())
            .key_func(Arc::clone(&inner.key_func))
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

/// `key_func` as a FIFO builder takes it.
fn key_fn<K>(
    key_func: &KeyFunc<K>,
) -> impl Fn(&K) -> Result<ObjectKey, kinformer_core::Error> + Send + Sync + 'static
where
    K: 'static,
{
    let f = Arc::clone(key_func);
    move |obj: &K| f(obj)
}

mod builder;
mod process;
mod stats;

use builder::FifoChoice;
pub use builder::SharedIndexInformerBuilder;
use process::{Prepared, notification_key, run_prepared};
pub use stats::{InformerHandle, InformerStats, Registration};
