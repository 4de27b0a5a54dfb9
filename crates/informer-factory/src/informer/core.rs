//! The informer's state, [`Inner`], generic over what its pipeline carries (`K`, or
//! `Encoded<K>` for the default cache), and [`Core`], the same informer seen as one of `K`
//! whatever it carries: what [`SharedIndexInformer`](super::SharedIndexInformer) holds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use kinformer_core::{Clock, KeyFunc, KnownObjects, MetaObject, ObjectKey, TransformFn};
use kinformer_deltafifo::{DeltaFifo, FifoQueue, InOrderFifo};
use kinformer_indexer::{Indexer, IndexerWriter, Indexers};
use kinformer_reflector::{
    Backoff, ListerWatcher, Reflector, ReflectorStatus, ShardFiltering, ShardFilteringHandle,
    WatchErrorHandler,
};
use tokio_util::sync::CancellationToken;

use crate::listener::{Buffering, ListenerState, Processor};
use crate::{Error, ResourceEventHandler};

use super::builder::FifoChoice;
use super::carried::{Carried, Decoding, carried_transform};
use super::process::{Prepared, notification_key, run_prepared};
use super::{FifoKind, HandlerOptions, normalize_resync};

/// Makes the lister-watcher that runs a transform before carrying objects.
pub(super) type TransformedLw<K, R> =
    Box<dyn Fn(TransformFn<K>) -> Arc<dyn ListerWatcher<R>> + Send + Sync>;

/// A handler as the informer is given it.
pub(super) type BoxHandler<K> = Box<dyn ResourceEventHandler<K> + Send>;

/// An informer of `K`, whatever its pipeline carries.
pub(super) trait Core<K>: Send + Sync {
    fn name(&self) -> &str;
    /// Registers a handler: its listener id and state, and its effective resync period.
    fn add_handler(
        &self,
        handler: BoxHandler<K>,
        options: &HandlerOptions,
    ) -> Result<(u64, Arc<ListenerState>, Option<Duration>), Error>;
    fn remove_handler(&self, id: u64);
    fn set_transform(&self, transform: TransformFn<K>) -> Result<(), Error>;
    fn set_watch_error_handler(&self, handler: WatchErrorHandler) -> Result<(), Error>;
    fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error>;
    fn indexer(&self) -> Arc<dyn Indexer<K>>;
    fn has_synced(&self) -> bool;
    fn status(&self) -> Option<&ReflectorStatus>;
    fn objects(&self) -> usize;
    /// Objects that did not decode for a handler.
    fn undecodable(&self) -> u64;
    fn shard_filtering(&self) -> Option<ShardFiltering>;
    fn is_started(&self) -> bool;
    fn is_stopped(&self) -> bool;
    fn handler_count(&self) -> usize;
    /// Marks the informer started and builds its FIFO and reflector; the future runs them
    /// until `cancel`.
    fn run(
        self: Arc<Self>,
        cancel: CancellationToken,
    ) -> Result<BoxFuture<'static, Result<(), Error>>, Error>;
}

pub(super) struct Config<K, R> {
    pub(super) started: bool,
    pub(super) stopped: bool,
    transform: Option<TransformFn<K>>,
    on_error: Option<WatchErrorHandler>,
    /// How often the reflector asks whether a handler's resync is due (client-go's
    /// `resyncCheckPeriod`).
    resync_check: Option<Duration>,
    /// Taken when the informer starts.
    fifo: Option<FifoChoice<R>>,
}

impl<K, R> Config<K, R> {
    fn new(default_resync: Option<Duration>, fifo: FifoChoice<R>) -> Self {
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

/// The informer. `R` is what its pipeline (lister-watcher, reflector, FIFO, the cache's
/// write side, listeners) carries: `K`, or `Encoded<K>`, which the handlers' threads
/// decode.
pub(super) struct Inner<K, R> {
    pub(super) name: String,
    /// How the FIFO, the cache, the reflector and coalescing handlers key objects.
    pub(super) key_func: KeyFunc<R>,
    pub(super) lw: Arc<dyn ListerWatcher<R>>,
    /// With a transform, where `lw` would have to decode what it carries for it: the
    /// lister-watcher whose objects are transformed, then carried.
    pub(super) transformed_lw: Option<TransformedLw<K, R>>,
    /// The write side of the cache, as the pipeline writes it: only the informer holds it.
    pub(super) store: Arc<dyn IndexerWriter<R>>,
    /// The same cache as readers see it ([`Core::indexer`]) and index functions are added
    /// to.
    pub(super) cache: Arc<dyn IndexerWriter<K>>,
    pub(super) processor: Arc<Processor<R>>,
    pub(super) watch_list: bool,
    pub(super) backoff: Backoff,
    /// What the reflector and the handlers' resyncs read and sleep on.
    pub(super) clock: Arc<dyn Clock>,
    pub(super) default_resync: Option<Duration>,
    pub(super) config: Mutex<Config<K, R>>,
    /// client-go's `blockDeltas`: held while an item is applied and distributed, and while
    /// a late handler takes its snapshot of the cache, so that it misses nothing and gets
    /// nothing twice. Never held across a handler call or an `.await`.
    pub(super) deliver: Mutex<()>,
    /// Told after every popped item is applied: a reflector paced by the FIFO's backlog
    /// waits on it ([`Inner::caught_up`]).
    pub(super) drained: tokio::sync::Notify,
    pub(super) fifo: OnceLock<Arc<dyn FifoQueue<R>>>,
    pub(super) status: OnceLock<ReflectorStatus>,
    /// For a sharded informer: whether the server filters by shard.
    pub(super) shard: Option<ShardFilteringHandle>,
    /// Objects that did not decode for a handler.
    pub(super) undecodable: Arc<AtomicU64>,
}

/// The parts of an [`Inner`] that differ with what its pipeline carries.
pub(super) struct Pipeline<K, R> {
    pub(super) key_func: KeyFunc<R>,
    pub(super) lw: Arc<dyn ListerWatcher<R>>,
    pub(super) transformed_lw: Option<TransformedLw<K, R>>,
    pub(super) store: Arc<dyn IndexerWriter<R>>,
    pub(super) cache: Arc<dyn IndexerWriter<K>>,
    pub(super) fifo: FifoChoice<R>,
    pub(super) shard: Option<ShardFilteringHandle>,
}

impl<K, R> Inner<K, R> {
    /// An informer, not started, of `pipeline`.
    pub(super) fn new(
        name: String,
        watch_list: bool,
        backoff: Backoff,
        clock: Arc<dyn Clock>,
        default_resync: Option<Duration>,
        pipeline: Pipeline<K, R>,
    ) -> Self {
        let Pipeline {
            key_func,
            lw,
            transformed_lw,
            store,
            cache,
            fifo,
            shard,
        } = pipeline;
        Self {
            name,
            key_func,
            lw,
            transformed_lw,
            store,
            cache,
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
            undecodable: Arc::default(),
        }
    }

    pub(super) fn config(&self) -> MutexGuard<'_, Config<K, R>> {
        self.config.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K, R> Core<K> for Inner<K, R>
where
    K: MetaObject + Send + Sync + 'static,
    R: Carried<K>,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn add_handler(
        &self,
        handler: BoxHandler<K>,
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
        let handler = Decoding::new(handler, Arc::clone(&self.undecodable));
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

    fn remove_handler(&self, id: u64) {
        self.processor.remove(id);
    }

    fn set_transform(&self, transform: TransformFn<K>) -> Result<(), Error> {
        let mut cfg = self.config();
        if cfg.started {
            return Err(Error::AlreadyStarted);
        }
        cfg.transform = Some(transform);
        Ok(())
    }

    fn set_watch_error_handler(&self, handler: WatchErrorHandler) -> Result<(), Error> {
        let mut cfg = self.config();
        if cfg.started {
            return Err(Error::AlreadyStarted);
        }
        cfg.on_error = Some(handler);
        Ok(())
    }

    fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), Error> {
        if self.config().stopped {
            return Err(Error::Stopped);
        }
        self.cache.add_indexers(indexers)?;
        Ok(())
    }

    fn indexer(&self) -> Arc<dyn Indexer<K>> {
        Arc::clone(&self.cache) as Arc<dyn Indexer<K>>
    }

    fn has_synced(&self) -> bool {
        Inner::has_synced(self)
    }

    fn status(&self) -> Option<&ReflectorStatus> {
        self.status.get()
    }

    fn objects(&self) -> usize {
        self.cache.len()
    }

    fn undecodable(&self) -> u64 {
        self.undecodable.load(Ordering::Relaxed)
    }

    fn shard_filtering(&self) -> Option<ShardFiltering> {
        self.shard.as_ref().map(ShardFilteringHandle::get)
    }

    fn is_started(&self) -> bool {
        self.config().started
    }

    fn is_stopped(&self) -> bool {
        self.config().stopped
    }

    fn handler_count(&self) -> usize {
        self.processor.len()
    }

    fn run(
        self: Arc<Self>,
        cancel: CancellationToken,
    ) -> Result<BoxFuture<'static, Result<(), Error>>, Error> {
        let prepared = self.prepare()?;
        Ok(run_prepared(self, prepared, cancel).boxed())
    }
}

impl<K, R> Inner<K, R>
where
    K: MetaObject + Send + Sync + 'static,
    R: Carried<K>,
{
    /// Marks the informer started and builds its FIFO and reflector.
    fn prepare(self: &Arc<Self>) -> Result<Prepared<R>, Error> {
        let mut cfg = self.config();
        if cfg.stopped {
            return Err(Error::Stopped);
        }
        if cfg.started {
            return Err(Error::AlreadyStarted);
        }
        let known = Arc::clone(&self.store) as Arc<dyn KnownObjects<R>>;
        let fifo: Arc<dyn FifoQueue<R>> = match cfg.fifo.take() {
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
        // A transform runs on `K`: before the objects are encoded where the pipeline
        // carries them encoded (no transcoding to decode again), else in the reflector.
        let (lw, transform) = match (cfg.transform.clone(), &self.transformed_lw) {
            (Some(t), Some(make)) => (make(t), None),
            (t, _) => (Arc::clone(&self.lw), t.map(carried_transform::<K, R>)),
        };
        let mut reflector = Reflector::new(lw, Arc::clone(&fifo))
            .name(self.name.clone())
            .watch_list(self.watch_list)
            .backoff(self.backoff.clone())
            .clock(Arc::clone(&self.clock))
            .key_func(Arc::clone(&self.key_func))
            // Objects that do not decode keep their cached version (and can be deleted).
            .known_objects(Arc::clone(&self.store) as Arc<dyn KnownObjects<R>>);
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
        if let Some(t) = transform {
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
fn key_fn<R>(
    key_func: &KeyFunc<R>,
) -> impl Fn(&R) -> Result<ObjectKey, kinformer_core::Error> + Send + Sync + 'static
where
    R: 'static,
{
    let f = Arc::clone(key_func);
    move |obj: &R| f(obj)
}
