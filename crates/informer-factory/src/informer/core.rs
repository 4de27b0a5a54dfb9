//! The informer's state, [`Inner`], generic over what its pipeline carries and hands out
//! (`Cached<K>` for the default cache, `K` for a decoded one): what a
//! [`SharedIndexInformer`](super::SharedIndexInformer) holds.
//!
//! Its fields are private to this module and its child `process`, the informer's task that
//! applies what the reflector queues: the two jobs that change the state. The builder hands
//! it a [`Pipeline`], the public API reads it through methods.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use kinformer_core::{Clock, KeyFunc, KnownObjects, MetaObject, ObjectKey, TransformFn};
use kinformer_deltafifo::{DeltaFifo, FifoQueue, InOrderFifo};
use kinformer_indexer::{IndexerWriter, Indexers};
use kinformer_reflector::{
    Backoff, ListerWatcher, Reflector, ReflectorStatus, ShardFiltering, ShardFilteringHandle,
    WatchErrorHandler,
};

use crate::listener::{Buffering, ListenerState, Processor};
use crate::{Error, ResourceEventHandler};

use super::builder::FifoChoice;
use super::snapshot::Snapshots;
use super::stats::{InformerIdentity, LatencyRecorder};
mod process;

use super::{FifoKind, HandlerOptions, normalize_resync};
pub(super) use process::run_prepared;
use process::{Prepared, notification_key};

/// A handler as the informer is given it.
pub(super) type BoxHandler<T> = Box<dyn ResourceEventHandler<T> + Send>;

struct Config<T> {
    started: bool,
    stopped: bool,
    transform: Option<TransformFn<T>>,
    on_error: Option<WatchErrorHandler>,
    /// How often the reflector asks whether a handler's resync is due (client-go's
    /// `resyncCheckPeriod`).
    resync_check: Option<Duration>,
    /// Taken when the informer starts.
    fifo: Option<FifoChoice<T>>,
}

impl<T> Config<T> {
    fn new(default_resync: Option<Duration>, fifo: FifoChoice<T>) -> Self {
        Self {
            started: false,
            stopped: false,
            transform: None,
            on_error: None,
            resync_check: default_resync,
            fifo: Some(fifo),
        }
    }
}

/// The informer. `T` is what its pipeline (lister-watcher, reflector, FIFO, cache,
/// listeners) carries and its readers get.
pub(super) struct Inner<T> {
    name: String,
    /// How the FIFO, the cache, the reflector and coalescing handlers key objects.
    key_func: KeyFunc<T>,
    lw: Arc<dyn ListerWatcher<T>>,
    /// The cache: only the informer holds its write side; readers get its read side.
    store: Arc<dyn IndexerWriter<T>>,
    processor: Arc<Processor<T>>,
    watch_list: bool,
    backoff: Backoff,
    /// What the reflector and the handlers' resyncs read and sleep on.
    clock: Arc<dyn Clock>,
    default_resync: Option<Duration>,
    config: Mutex<Config<T>>,
    /// client-go's `blockDeltas`: held while an item is applied and distributed, and while
    /// a late handler takes its snapshot of the cache, so that it misses nothing and gets
    /// nothing twice. Never held across a handler call or an `.await`.
    deliver: Mutex<()>,
    /// Told after every popped item is applied: a reflector paced by the FIFO's backlog
    /// waits on it ([`Inner::caught_up`]).
    drained: tokio::sync::Notify,
    fifo: OnceLock<Arc<dyn FifoQueue<T>>>,
    status: OnceLock<ReflectorStatus>,
    /// For a sharded informer: whether the server filters by shard.
    shard: Option<ShardFilteringHandle>,
    /// Its identity in client-go's informer metrics.
    identity: Option<InformerIdentity>,
    /// How long each popped entry took to apply and hand out.
    pub(super) latency: LatencyRecorder,
    /// Its cache on disk, if kept there.
    snapshots: Option<Snapshots<T>>,
}

/// The parts of an [`Inner`] its builder chooses.
pub(super) struct Pipeline<T> {
    pub(super) key_func: KeyFunc<T>,
    pub(super) lw: Arc<dyn ListerWatcher<T>>,
    pub(super) store: Arc<dyn IndexerWriter<T>>,
    pub(super) fifo: FifoChoice<T>,
    pub(super) shard: Option<ShardFilteringHandle>,
    pub(super) identity: Option<InformerIdentity>,
    pub(super) snapshots: Option<Snapshots<T>>,
}

impl<T> Inner<T> {
    /// An informer, not started, of `pipeline`.
    pub(super) fn new(
        name: String,
        watch_list: bool,
        backoff: Backoff,
        clock: Arc<dyn Clock>,
        default_resync: Option<Duration>,
        pipeline: Pipeline<T>,
    ) -> Self {
        let Pipeline {
            key_func,
            lw,
            store,
            fifo,
            shard,
            identity,
            snapshots,
        } = pipeline;
        Self {
            name,
            key_func,
            lw,
            store,
            processor: Arc::new(Processor::default()),
            watch_list,
            backoff,
            clock,
            default_resync,
            config: Mutex::new(Config::new(default_resync, fifo)),
            deliver: Mutex::new(()),
            drained: tokio::sync::Notify::new(),
            fifo: OnceLock::new(),
            status: OnceLock::new(),
            shard,
            identity,
            latency: LatencyRecorder::default(),
            snapshots,
        }
    }

    /// Its snapshot on disk, if it keeps one.
    pub(super) fn snapshots(&self) -> Option<&Snapshots<T>> {
        self.snapshots.as_ref()
    }

    /// The reflector's last synced resourceVersion; empty before it started.
    pub(super) fn last_sync_resource_version(&self) -> String {
        self.status
            .get()
            .map(ReflectorStatus::last_sync_resource_version)
            .unwrap_or_default()
    }

    /// Its identity in client-go's informer metrics, if it has one.
    pub(super) fn identity(&self) -> Option<&InformerIdentity> {
        self.identity.as_ref()
    }

    /// How many entries wait in its FIFO (0 before it starts).
    pub(super) fn queued_items(&self) -> usize {
        self.fifo.get().map_or(0, |fifo| fifo.len())
    }

    /// The informer's name (its spans', metrics' and logs').
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// The cache (its read side is what readers get).
    pub(super) fn store(&self) -> &Arc<dyn IndexerWriter<T>> {
        &self.store
    }

    /// The reflector's status, once the informer has started.
    pub(super) fn status(&self) -> Option<&ReflectorStatus> {
        self.status.get()
    }

    fn config(&self) -> MutexGuard<'_, Config<T>> {
        self.config.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: MetaObject + Send + Sync + 'static> Inner<T> {
    /// Registers a handler: its listener id and state, and its effective resync period.
    pub(super) fn add_handler(
        &self,
        handler: BoxHandler<T>,
        options: &HandlerOptions,
    ) -> Result<(u64, Arc<ListenerState>, Option<Duration>), Error> {
        let period = options
            .resync
            .unwrap_or_else(|| self.default_resync.unwrap_or_default());
        let mut resync = normalize_resync(period);
        let buffering = if options.coalesce {
            let key_func = Arc::clone(&self.key_func);
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
                        informer = %self.name,
                        requested_ms = period.as_millis() as u64,
                        check_ms = check.as_millis() as u64,
                        "the informer has started: a handler's resync period is raised to its resync check period"
                    );
                    resync = Some(check);
                }
                (true, Some(_)) => {}
                (true, None) => tracing::warn!(
                    informer = %self.name,
                    "the informer was started without any resync: this handler will not be resynced"
                ),
            }
        }
        let (id, state) = if cfg.started {
            let _deliver = self.lock_deliver();
            let snapshot = self.store.list();
            self.processor
                .add(handler, resync, buffering, snapshot, self.clock.now())?
        } else {
            self.processor
                .add(handler, resync, buffering, Vec::new(), self.clock.now())?
        };
        drop(cfg);
        Ok((id, state, resync))
    }

    pub(super) fn remove_handler(&self, id: u64) {
        self.processor.remove(id);
    }

    pub(super) fn set_transform(&self, transform: TransformFn<T>) -> Result<(), Error> {
        let mut cfg = self.config();
        if cfg.started {
            return Err(Error::AlreadyStarted);
        }
        cfg.transform = Some(transform);
        Ok(())
    }

    pub(super) fn set_watch_error_handler(&self, handler: WatchErrorHandler) -> Result<(), Error> {
        let mut cfg = self.config();
        if cfg.started {
            return Err(Error::AlreadyStarted);
        }
        cfg.on_error = Some(handler);
        Ok(())
    }

    pub(super) fn add_indexers(&self, indexers: Indexers<T>) -> Result<(), Error> {
        if self.config().stopped {
            return Err(Error::Stopped);
        }
        self.store.add_indexers(indexers)?;
        Ok(())
    }

    pub(super) fn shard_filtering(&self) -> Option<ShardFiltering> {
        self.shard.as_ref().map(ShardFilteringHandle::get)
    }

    pub(super) fn is_started(&self) -> bool {
        self.config().started
    }

    pub(super) fn is_stopped(&self) -> bool {
        self.config().stopped
    }

    pub(super) fn handler_count(&self) -> usize {
        self.processor.len()
    }

    /// Marks the informer started and builds its FIFO and reflector.
    pub(super) fn prepare(self: &Arc<Self>) -> Result<Prepared<T>, Error> {
        let mut cfg = self.config();
        if cfg.stopped {
            return Err(Error::Stopped);
        }
        if cfg.started {
            return Err(Error::AlreadyStarted);
        }
        let known = Arc::clone(&self.store) as Arc<dyn KnownObjects<T>>;
        let fifo: Arc<dyn FifoQueue<T>> = match cfg.fifo.take() {
            Some(FifoChoice::Custom(make)) => make(known),
            Some(FifoChoice::Kind(FifoKind::DeltaFifo)) => Arc::new(
                DeltaFifo::builder()
                    .key_fn(key_fn(&self.key_func))
                    .known_objects(known)
                    .build(),
            ),
            Some(FifoChoice::Kind(FifoKind::InOrder)) => Arc::new(
                InOrderFifo::builder()
                    .key_fn(key_fn(&self.key_func))
                    .known_objects(known)
                    .build()?,
            ),
            Some(FifoChoice::Kind(FifoKind::InOrderAtomic)) | None => Arc::new(
                InOrderFifo::builder()
                    .key_fn(key_fn(&self.key_func))
                    .atomic(true)
                    .emit_bookmarks(true)
                    .build()?,
            ),
        };
        let mut reflector = Reflector::new(Arc::clone(&self.lw), Arc::clone(&fifo))
            .name(self.name.clone())
            .watch_list(self.watch_list)
            .backoff(self.backoff.clone())
            .clock(Arc::clone(&self.clock))
            .key_func(Arc::clone(&self.key_func))
            // Objects that do not decode keep their cached version (and can be deleted).
            .known_objects(Arc::clone(&self.store) as Arc<dyn KnownObjects<T>>);
        if let Some(check) = cfg.resync_check {
            let processor = Arc::clone(&self.processor);
            let clock = Arc::clone(&self.clock);
            reflector = reflector
                .resync_period(check)
                .should_resync(move || processor.should_resync(clock.now()));
        }
        if let Some(on_error) = cfg.on_error.clone() {
            reflector = reflector.on_watch_error(move |e| on_error(e));
        }
        // In the reflector, not the FIFO: a streaming list then never holds every object
        // untransformed at once (see `Reflector::transform`).
        if let Some(t) = cfg.transform.clone() {
            reflector = reflector.transform(t);
        }
        // A first list in parts goes no faster than the cache takes it: the objects
        // waiting in the FIFO would be most of the sync's peak memory.
        let paced = (Arc::clone(&fifo), Arc::clone(self));
        reflector = reflector.pace(Arc::new(move || {
            let (fifo, inner) = (Arc::clone(&paced.0), Arc::clone(&paced.1));
            Box::pin(async move { inner.caught_up(&*fifo).await })
        }));
        // The only place that sets them, under the config lock, once.
        let _ = self.status.set(reflector.status());
        let _ = self.fifo.set(Arc::clone(&fifo));
        cfg.started = true;
        Ok(Prepared { fifo, reflector })
    }
}

/// `key_func` as a FIFO builder takes it.
fn key_fn<T>(
    key_func: &KeyFunc<T>,
) -> impl Fn(&T) -> Result<ObjectKey, kinformer_core::Error> + Send + Sync + 'static
where
    T: 'static,
{
    let f = Arc::clone(key_func);
    move |obj: &T| f(obj)
}
