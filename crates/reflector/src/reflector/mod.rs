//! The [`Reflector`] and its public surface: the builder and its options, the error handler,
//! the status, and `run` / `spawn`; the modules below do its jobs.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

#[cfg(doc)]
use kinformer_core::ListPart;
use kinformer_core::{
    Clock, ErrorChain, KeyFunc, KnownObjects, MetaObject, ObjectKey, Sink, TokioClock, TransformFn,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::{Backoff, Error, ListerWatcher, TaskHandle};

mod hand_over;
mod handle;
mod list;
mod resume;
mod run;
mod run_state;
mod status;
mod stream_list;
mod temp_store;
mod watch;

pub use handle::ReflectorHandle;
pub use list::DEFAULT_PAGE_SIZE;
pub use resume::{CATCH_UP_WATCH_TIMEOUT, Resume};
pub use status::{LastError, ReflectorCounters, ReflectorStatus};
pub use stream_list::STREAMED_PART;

use status::Shared;

/// The shortest watch timeout; each watch picks one at random in `[min, 2 * min]`.
pub const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(300);

/// The hook that receives every error the reflector meets (client-go's
/// `WatchErrorHandler`). It runs on the reflector's task: keep it quick.
pub type WatchErrorHandler = Arc<dyn Fn(&Error) + Send + Sync>;

type ShouldResync = Arc<dyn Fn() -> bool + Send + Sync>;

/// Keeps a [`Sink`] in step with the API server: lists, then watches, and recovers from
/// every failure (client-go's `Reflector`). See the [crate docs](crate) for the state
/// machine.
///
/// Configure it with the builder methods, then [`run`](Reflector::run) it on a task of
/// your own or [`spawn`](Reflector::spawn) it.
pub struct Reflector<K, L, S> {
    lw: L,
    sink: S,
    name: String,
    resync_period: Option<Duration>,
    should_resync: Option<ShouldResync>,
    page_size: Option<u32>,
    min_watch_timeout: Duration,
    watch_list: bool,
    transform: Option<TransformFn<K>>,
    backoff: Backoff,
    /// What the retries, the resync timer and the watch deadlines read and sleep on.
    clock: Arc<dyn Clock>,
    on_error: WatchErrorHandler,
    known: Option<Arc<dyn KnownObjects<K>>>,
    /// How the sink keys objects; `None` is `namespace/name`.
    key_func: Option<KeyFunc<K>>,
    pace: Option<Pace>,
    /// Where the first round starts instead of a list; taken by it.
    resume: std::sync::Mutex<Option<Resume<K>>>,
    shared: Arc<Shared>,
    _k: PhantomData<fn() -> K>,
}

/// What [`Reflector::pace`] awaits after each part of a list it hands on.
pub type Pace = Arc<dyn Fn() -> kinformer_core::BoxFuture<'static, ()> + Send + Sync>;

impl<K, L, S> fmt::Debug for Reflector<K, L, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reflector")
            .field("name", &self.name)
            .field("resync_period", &self.resync_period)
            .field("page_size", &self.page_size)
            .field("min_watch_timeout", &self.min_watch_timeout)
            .field("watch_list", &self.watch_list)
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

impl<K, L, S> Reflector<K, L, S>
where
    K: MetaObject + Send + Sync + 'static,
    L: ListerWatcher<K>,
    S: Sink<K>,
{
    /// A reflector that lists and watches through `lister_watcher` and writes to `sink`,
    /// with client-go v0.36's defaults: no resync, pages of 500, watch timeouts of
    /// 5–10 min, a streaming initial list when the lister-watcher supports it (else
    /// List+Watch), backoff 800 ms–30 s, errors logged.
    pub fn new(lister_watcher: L, sink: S) -> Self {
        Self {
            lw: lister_watcher,
            sink,
            name: String::from("reflector"),
            resync_period: None,
            should_resync: None,
            page_size: None,
            min_watch_timeout: MIN_WATCH_TIMEOUT,
            watch_list: true,
            transform: None,
            backoff: Backoff::default(),
            clock: Arc::new(TokioClock),
            on_error: Arc::new(default_error_handler),
            known: None,
            key_func: None,
            pace: None,
            resume: std::sync::Mutex::new(None),
            shared: Arc::new(Shared::default()),
            _k: PhantomData,
        }
    }

    /// The name in the reflector's tracing span (e.g. the resource: `"pods"`).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Calls the sink's `resync` every `period` while watching; zero turns it off.
    #[must_use]
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = (!period.is_zero()).then_some(period);
        self
    }

    /// Asked at each resync tick; the sink's `resync` runs only when it says `true`
    /// (the informer uses it to resync only when a handler is due).
    #[must_use]
    pub fn should_resync(mut self, f: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.should_resync = Some(Arc::new(f));
        self
    }

    /// The list page size, overriding client-go's choice (500, except unpaged for a
    /// relist at a known resourceVersion so that the watch cache can serve it). Zero
    /// turns paging off.
    #[must_use]
    pub fn page_size(mut self, size: u32) -> Self {
        self.page_size = Some(size);
        self
    }

    /// The shortest watch timeout; each watch picks one in `[min, 2 * min]`. Values under
    /// 5 minutes are raised to 5 minutes, as in client-go, to spare the API server.
    #[must_use]
    pub fn min_watch_timeout(mut self, min: Duration) -> Self {
        self.min_watch_timeout = min.max(MIN_WATCH_TIMEOUT);
        self
    }

    /// Whether to fetch the initial state with a streaming list (`sendInitialEvents`)
    /// instead of a paged list, falling back to List+Watch when the server refuses it. On
    /// by default, as client-go v0.36's `WatchListClient` gate; it takes effect only with
    /// a lister-watcher that [supports it](ListerWatcher::supports_watch_list), as client-go
    /// checks its lister-watcher too.
    #[must_use]
    pub fn watch_list(mut self, on: bool) -> Self {
        self.watch_list = on;
        self
    }

    /// Transforms every object that comes from the server (list items, watch events, the
    /// objects of a streaming list) once, as it arrives, before the sink sees it: client-go's
    /// `TransformFunc`, applied here rather than in the FIFO so that a streaming list never
    /// holds every object untransformed at once. Objects the sink already holds (resyncs,
    /// tombstones) are not transformed again. An error skips a watch event and fails a list
    /// ([`Error::Transform`]).
    #[must_use]
    pub fn transform(mut self, transform: TransformFn<K>) -> Self {
        self.transform = Some(transform);
        self
    }

    /// Back-pressure for lists, which reach the sink a part at a time ([`ListPart`]):
    /// after handing on each part but the last, the reflector awaits `ready()` before it
    /// reads and decodes more (the server then waits on the connection). Without it the
    /// reflector decodes as fast as the server sends, and a consumer slower than the
    /// decoding (one that encodes every object into its cache) lets decoded objects pile
    /// up in the sink: thousands of whole pods at once during a first list. Informers set
    /// it to wait while their FIFO holds more than a part. Watch events are not paced.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_core::{Error, ListPart, Sink};
    /// use kinformer_reflector::{Reflector, fake::FakeListerWatcher};
    ///
    /// struct Discard;
    /// impl Sink<Pod> for Discard {
    ///     fn add(&self, _: Arc<Pod>) -> Result<(), Error> { Ok(()) }
    ///     fn update(&self, _: Arc<Pod>) -> Result<(), Error> { Ok(()) }
    ///     fn delete(&self, _: Arc<Pod>) -> Result<(), Error> { Ok(()) }
    ///     fn replace(&self, _: ListPart<Pod>) -> Result<(), Error> { Ok(()) }
    ///     fn resync(&self) -> Result<(), Error> { Ok(()) }
    ///     fn bookmark(&self, _: &str) -> Result<(), Error> { Ok(()) }
    /// }
    ///
    /// let reflector = Reflector::new(FakeListerWatcher::<Pod>::new(), Discard)
    ///     // Here: a pause between parts.
    ///     .pace(Arc::new(|| Box::pin(tokio::time::sleep(Duration::from_millis(1)))));
    /// # let _ = reflector;
    /// ```
    #[must_use]
    pub fn pace(mut self, ready: Pace) -> Self {
        self.pace = Some(ready);
        self
    }

    /// A read-only view of what the sink's consumer has cached (the informer's store). A
    /// relist hands the sink the cached object, not the copy it just decoded, for every
    /// object whose resource version is unchanged (when the cache can give out the object it
    /// holds: [`KnownObjects::get_shared`]), so that it does not hold two copies of the
    /// cache. For objects that do not decode ([`Error::Undecodable`]): with it, such an object keeps
    /// its last cached version — a relist hands that version to the sink again instead of
    /// leaving it out, which would delete it — and a deletion of it still deletes it, with
    /// that version as its final state. Without it, a relist leaves such an object out and
    /// its deletion cannot be passed on. Informers set it to their store.
    #[must_use]
    pub fn known_objects(mut self, known: Arc<dyn KnownObjects<K>>) -> Self {
        self.known = Some(known);
        self
    }

    /// Starts from a snapshot of the cache instead of a list (see [`Resume`]): the first
    /// round watches from the snapshot's resourceVersion until it has caught up with what
    /// the server was at when it started, then hands the sink the snapshot with what
    /// changed as one list; a round that cannot lists as usual.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kinformer_reflector::{Reflector, Resume, fake::FakeListerWatcher};
    /// # use kinformer_core::{Error, ListPart, Sink};
    /// # struct Discard;
    /// # impl Sink<Pod> for Discard {
    /// #     fn add(&self, _: Arc<Pod>) -> Result<(), Error> { Ok(()) }
    /// #     fn update(&self, _: Arc<Pod>) -> Result<(), Error> { Ok(()) }
    /// #     fn delete(&self, _: Arc<Pod>) -> Result<(), Error> { Ok(()) }
    /// #     fn replace(&self, _: ListPart<Pod>) -> Result<(), Error> { Ok(()) }
    /// #     fn resync(&self) -> Result<(), Error> { Ok(()) }
    /// #     fn bookmark(&self, _: &str) -> Result<(), Error> { Ok(()) }
    /// # }
    ///
    /// // The objects of a snapshot taken at resourceVersion 1200 (here: none).
    /// let snapshot: Vec<Arc<Pod>> = Vec::new();
    /// let reflector = Reflector::new(FakeListerWatcher::<Pod>::new(), Discard)
    ///     .resume(Resume::with_objects("1200", snapshot));
    /// # let _ = reflector;
    /// ```
    #[must_use]
    pub fn resume(self, resume: Resume<K>) -> Self {
        *self
            .resume
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(resume);
        self
    }

    /// How the sink and its consumer's cache key objects, when not `namespace/name`
    /// (kinformer-core's [`meta_namespace_key`](kinformer_core::meta_namespace_key)): the
    /// reflector keys listed objects with it to compare them with the cache
    /// ([`known_objects`](Self::known_objects)) and to tell objects of a streaming list
    /// apart. Informers set it to their key function. Objects that do not decode are known
    /// by their `namespace/name` only (they have no `K` to key).
    #[must_use]
    pub fn key_func(mut self, key_func: KeyFunc<K>) -> Self {
        self.key_func = Some(key_func);
        self
    }

    /// `obj`'s key in the sink.
    pub(super) fn key_of(&self, obj: &K) -> Result<ObjectKey, kinformer_core::Error> {
        match &self.key_func {
            Some(f) => f(obj),
            None => kinformer_core::meta_namespace_key(obj),
        }
    }

    /// The clock the reflector reads and sleeps on: its retry backoff, resync timer and
    /// watch deadlines (default: [`TokioClock`], Tokio's time, which a paused test runtime
    /// drives). Hand it a [`FakeClock`](kinformer_core::FakeClock) to move its time by hand,
    /// the same clock as a work queue or an elector in the same test.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The retry backoff (default: client-go's).
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Receives every error, after which the reflector recovers on its own (see
    /// [`Error`] for which recovery each variant gets). The default logs it. The hook
    /// runs on the reflector's task: keep it quick.
    #[must_use]
    pub fn on_watch_error(mut self, f: impl Fn(&Error) + Send + Sync + 'static) -> Self {
        self.on_error = Arc::new(f);
        self
    }

    /// A live view of the reflector's progress, usable while it runs.
    pub fn status(&self) -> ReflectorStatus {
        ReflectorStatus {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Runs until `cancel` is cancelled (then returns `Ok`) or the sink is closed (then
    /// returns `Err(Error::Sink(Closed))`). Every other failure is handed to the error
    /// handler and recovered from.
    ///
    /// Dropping the returned future stops the reflector at once: it spawns no task of
    /// its own, so nothing keeps running.
    ///
    /// # Errors
    /// Only [`Error::Sink`] with [`kinformer_core::Error::Closed`].
    pub async fn run(self, cancel: CancellationToken) -> Result<(), Error> {
        let span = tracing::info_span!("reflector", name = %self.name);
        async {
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    tracing::debug!("reflector stopped");
                    Ok(())
                }
                r = self.run_loop() => r,
            }
        }
        .instrument(span)
        .await
    }

    /// Runs the reflector on a new Tokio task until [`ReflectorHandle::stop`] (or the sink
    /// closes). Dropping the handle leaves it running (see [`TaskHandle`]).
    ///
    /// # Errors
    /// [`Error::NoRuntime`] outside a Tokio runtime.
    pub fn spawn(self) -> Result<ReflectorHandle, Error>
    where
        L: 'static,
        S: 'static,
    {
        let rt = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let cancel = CancellationToken::new();
        let status = self.status();
        let task = rt.spawn(self.run(cancel.clone()));
        Ok(ReflectorHandle {
            task: TaskHandle::new(cancel, task),
            status,
        })
    }

    fn report(&self, e: &Error) {
        (self.on_error)(e);
    }
}

#[cfg(test)]
mod tests;

fn default_error_handler(e: &Error) {
    if e.is_shard_selection_changed() {
        tracing::debug!("the shard selection changed: relisting");
    } else if e.is_expired() {
        tracing::info!(error = %ErrorChain(e), "resourceVersion expired");
    } else if e.is_unreachable() {
        tracing::warn!(error = %ErrorChain(e), "cannot reach the API server");
    } else {
        tracing::warn!(error = %ErrorChain(e), "list/watch failed");
    }
}
