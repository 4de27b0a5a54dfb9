use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use kinformer_core::{
    ErrorChain, KnownObjects, ListPart, Listed, MetaObject, ObjectKey, Sink, TransformFn,
    Unchanged, meta_namespace_key,
};
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::backoff::{BackoffState, random_watch_timeout};
use crate::{
    Backoff, Error, ListOptions, ListerWatcher, TaskHandle, Undecodable, WatchEvent, WatchOptions,
    WatchStream,
};

/// client-go's page size for lists.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// How many objects of a streaming list the reflector hands to its sink at a time (a
/// [`ListPart`]; a paged list goes a page at a time). Small, because with
/// [`pace`](Reflector::pace) about two parts of decoded objects are in flight at once,
/// and a whole decoded pod is tens of KB; large enough that handing a part on (a lock, a
/// wake-up) costs nothing beside decoding it.
pub const STREAMED_PART: usize = 100;
/// The shortest watch timeout; each watch picks one at random in `[min, 2 * min]`.
pub const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(300);
/// A watch that ends sooner than this without any event is a [`Error::VeryShortWatch`].
const VERY_SHORT_WATCH: Duration = Duration::from_secs(1);
/// How often a streaming list that has not reached its end bookmark says so.
const END_BOOKMARK_WARNING: Duration = Duration::from_secs(10);
/// How long past its `timeoutSeconds` a watch may stay open before the reflector ends it
/// itself (a connection that died without a FIN never ends otherwise).
const WATCH_GRACE: Duration = Duration::from_secs(30);

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
    on_error: WatchErrorHandler,
    known: Option<Arc<dyn KnownObjects<K>>>,
    pace: Option<Pace>,
    shared: Arc<Shared>,
    _k: PhantomData<fn() -> K>,
}

/// What [`Reflector::pace`] awaits after each part of a list it hands on.
pub type Pace = Arc<dyn Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

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
            on_error: Arc::new(default_error_handler),
            known: None,
            pace: None,
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

    /// Waits for the consumer after a part of a list ([`pace`](Self::pace)).
    async fn paced(&self) {
        if let Some(ready) = &self.pace {
            ready().await;
        }
    }

    fn transformed(&self, obj: Arc<K>) -> Result<Arc<K>, Error> {
        match &self.transform {
            Some(t) => t(obj).map_err(|source| Error::Transform { source }),
            None => Ok(obj),
        }
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

    /// `obj` as listed; or, when the cache holds the same version (same key, same non-empty
    /// resource version: the same object version on the server), [`Listed::Unchanged`]:
    /// its key, the cache, and the listed copy. A sink that keeps the cache's entries (the
    /// atomic FIFO, the stores) drops the copy when the part reaches it, so a relist holds
    /// each unchanged object once, in the cache, rather than a decoded copy beside it
    /// until the cache is replaced; a sink that needs every object takes the cache's own
    /// allocation where the cache can share it, else the copy, and decodes nothing. This
    /// is the one place a listed object is compared with the cache. Called on listed objects only, after
    /// the transform, so the cached object (transformed when it was cached) stands for a
    /// transformed one.
    fn list_item(&self, obj: Arc<K>) -> Listed<K> {
        let Some(known) = &self.known else {
            return Listed::Object(obj);
        };
        let Some(rv) = obj.object_resource_version().filter(|rv| !rv.is_empty()) else {
            return Listed::Object(obj);
        };
        let Ok(key) = meta_namespace_key(&*obj) else {
            return Listed::Object(obj);
        };
        if known.contains_version(key.as_str(), rv) {
            Listed::Unchanged(Unchanged::new(key, Arc::clone(known)).with_listed(obj))
        } else {
            Listed::Object(obj)
        }
    }

    /// Hands a part of a list to the sink: the first part `starts` it, and `end` (the
    /// list's resource version) ends it.
    fn hand_over(
        &self,
        items: Vec<Listed<K>>,
        starts: bool,
        end: Option<&str>,
    ) -> Result<(), Error> {
        self.sink
            .replace(ListPart::new(items, starts, end.map(str::to_owned)))
            .map_err(Error::Sink)
    }

    /// Reports an object that did not decode, and counts it.
    fn report_undecodable(&self, object: Undecodable, deleted: bool) {
        self.shared.undecodable.fetch_add(1, Ordering::Relaxed);
        let e = Error::Undecodable { object, deleted };
        tracing::warn!(error = %ErrorChain(&e), "skipping an object that does not decode");
        self.report(&e);
    }

    /// The cached versions of `keys` (objects that did not decode), to keep them through a
    /// relist.
    fn still_cached(&self, keys: &[ObjectKey]) -> Vec<Arc<K>> {
        let Some(known) = &self.known else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|k| known.get_by_key(k.as_str()))
            .collect()
    }

    /// A deletion of an object that did not decode: deletes its cached version, if any.
    fn delete_undecodable(&self, key: &ObjectKey) -> Result<(), Error> {
        let Some(old) = self.known.as_ref().and_then(|k| k.get_by_key(key.as_str())) else {
            return Ok(());
        };
        match self.sink.delete(old) {
            Err(e) if matches!(e, kinformer_core::Error::Closed) => Err(Error::Sink(e)),
            Err(e) => {
                self.report(&Error::Sink(e));
                Ok(())
            }
            Ok(()) => Ok(()),
        }
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

    /// client-go's `Run`: list-and-watch, and after each failed round a backoff.
    async fn run_loop(&self) -> Result<(), Error> {
        let mut st = RunState::new(self.backoff.clone());
        loop {
            let err = self.list_and_watch(&mut st).await;
            self.report(&err);
            if err.is_sink_closed() {
                tracing::info!("the sink is closed: reflector stops");
                return Err(err);
            }
            st.reason = RelistReason::after(&err);
            if err.is_expired() {
                // The server answered: only its history is short. Relist soon.
                st.backoff.succeeded();
            }
            let delay = st.backoff.next_delay(Instant::now(), err.is_unreachable());
            tracing::info!(reason = %st.reason, delay_ms = delay.as_millis() as u64, "will relist after a backoff");
            sleep(delay).await;
        }
    }

    /// One round: the initial state (streaming list or paged list), then watches until
    /// one fails in a way that needs a relist. Returns why it gave up.
    async fn list_and_watch(&self, st: &mut RunState) -> Error {
        self.shared.count_list(&st.reason);
        let mut first = None;
        if self.watch_list && self.lw.supports_watch_list() {
            match self.stream_list(st).await {
                Ok(w) => first = Some(w),
                Err(e @ Error::Sink(_)) => return e,
                Err(e) => {
                    tracing::info!(error = %ErrorChain(&e), "streaming list failed: falling back to list + watch");
                }
            }
        }
        if first.is_none()
            && let Err(e) = self.list(st).await
        {
            return e;
        }
        self.watch(st, first).await
    }

    /// Picks the page size as client-go's reflector does.
    fn page_size_for(&self, rv: &str, paginated_before: bool) -> Option<u32> {
        match self.page_size {
            Some(0) => None,
            Some(n) => Some(n),
            None if paginated_before => Some(DEFAULT_PAGE_SIZE),
            // A relist at a known RV, unpaged, can be served by the watch cache.
            None if !rv.is_empty() && rv != "0" => None,
            None => Some(DEFAULT_PAGE_SIZE),
        }
    }

    /// A full list into the sink, at the RV [`RunState::relist_rv`] picks; an RV the
    /// server no longer (or not yet) has is retried at `""`.
    async fn list(&self, st: &mut RunState) -> Result<(), Error> {
        let rv = st.relist_rv().to_owned();
        let page_size = self.page_size_for(&rv, st.paginated_result);
        let span = tracing::info_span!(
            "list",
            reason = %st.reason,
            resource_version = %rv,
            page_size = page_size.unwrap_or(0),
            pages = tracing::field::Empty,
            items = tracing::field::Empty,
        );
        async {
            tracing::info!("listing");
            let listed = match self.paged_list(&rv, page_size).await {
                Err(e) if e.is_expired() || e.is_too_large_resource_version() => {
                    st.rv_unavailable = true;
                    tracing::info!(error = %ErrorChain(&e), "resourceVersion unavailable: relisting at \"\" (consistent read)");
                    self.paged_list(st.relist_rv(), page_size).await
                }
                other => other,
            }?;
            if rv == "0" && listed.paginated {
                st.paginated_result = true;
            }
            st.rv_unavailable = false;
            let span = tracing::Span::current();
            span.record("pages", listed.pages);
            span.record("items", listed.count);
            let mut items = listed.items;
            items.extend(self.still_cached(&listed.undecodable).into_iter().map(Listed::Object));
            self.hand_over(items, !listed.handed_parts, Some(&listed.resource_version))?;
            tracing::info!(resource_version = %listed.resource_version, "listed");
            st.set_last_sync(&self.shared, listed.resource_version);
            self.shared.synced_once();
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// client-go's pager: pages with continue tokens; a continue token that expired
    /// falls back to one unpaged list at the same RV, which starts the list over. Every
    /// page but the last goes to the sink as soon as it is decoded; the rest is in what it
    /// returns.
    async fn paged_list(&self, rv: &str, page_size: Option<u32>) -> Result<PagedList<K>, Error> {
        let mut opts = ListOptions::new(rv, page_size);
        let mut listed = PagedList {
            items: Vec::new(),
            handed_parts: false,
            count: 0,
            undecodable: Vec::new(),
            resource_version: String::new(),
            paginated: false,
            pages: 0,
        };
        loop {
            let page = match self.lw.list(&opts).await {
                Ok(page) => page,
                Err(e) if e.is_expired() && opts.continue_token.is_some() => {
                    tracing::info!(
                        pages = listed.pages,
                        "continue token expired: full list instead"
                    );
                    let full = self.lw.list(&ListOptions::new(rv, None)).await?;
                    listed.handed_parts = false;
                    listed.count = full.items.len();
                    listed.items = Vec::with_capacity(full.items.len());
                    for obj in full.items {
                        listed.items.push(self.list_item(self.transformed(obj)?));
                    }
                    listed.undecodable = self.undecodable_keys(full.undecodable);
                    listed.resource_version = full.resource_version;
                    listed.pages += 1;
                    return Ok(listed);
                }
                Err(e) => return Err(e),
            };
            if listed.pages == 0 {
                listed.resource_version = page.resource_version;
            }
            listed.pages += 1;
            listed.count += page.items.len();
            for obj in page.items {
                listed.items.push(self.list_item(self.transformed(obj)?));
            }
            let skipped = self.undecodable_keys(page.undecodable);
            listed.undecodable.extend(skipped);
            match page.continue_token {
                Some(token) => {
                    let part = std::mem::take(&mut listed.items);
                    self.hand_over(part, !listed.handed_parts, None)?;
                    listed.handed_parts = true;
                    self.paced().await;
                    opts.continue_token = Some(token);
                    // The server refuses an RV together with a continue token.
                    opts.resource_version.clear();
                    listed.paginated = true;
                }
                None => return Ok(listed),
            }
        }
    }

    /// Reports the objects of a page that did not decode; their keys.
    fn undecodable_keys(&self, objects: Vec<Undecodable>) -> Vec<ObjectKey> {
        objects
            .into_iter()
            .map(|o| {
                let key = o.key.clone();
                self.report_undecodable(o, false);
                key
            })
            .collect()
    }

    /// The streaming list (client-go's `watchList`): collects the initial events into a
    /// temporary store and replaces the sink at the `k8s.io/initial-events-end`
    /// bookmark, then hands the same watch on.
    async fn stream_list(&self, st: &mut RunState) -> Result<(WatchStream<K>, Instant), Error> {
        let span = tracing::info_span!("watch_list", reason = %st.reason);
        async {
            loop {
                let rv = st.rewatch_rv().to_owned();
                let timeout = random_watch_timeout(self.min_watch_timeout);
                let opts = WatchOptions {
                    resource_version: rv.clone(),
                    timeout,
                    allow_bookmarks: true,
                    send_initial_events: true,
                    shard: None,
                };
                tracing::info!(resource_version = %rv, "streaming list");
                let start = Instant::now();
                let deadline = start + timeout + WATCH_GRACE;
                let mut stream = match self.lw.watch(&opts).await {
                    Ok(s) => {
                        self.shared.watches.fetch_add(1, Ordering::Relaxed);
                        s
                    }
                    Err(e) => match self.stream_list_retry(st, e).await {
                        Some(e) => return Err(e),
                        None => continue,
                    },
                };
                let mut temp = TempStore::default();
                // Objects of the list that did not decode: kept at their cached version.
                let mut undecodable: Vec<ObjectKey> = Vec::new();
                let mut events = 0u64;
                let mut next_warning = start + END_BOOKMARK_WARNING;
                let failure = loop {
                    let item = tokio::select! {
                        biased;
                        () = sleep_until(deadline) => None,
                        () = sleep_until(next_warning) => {
                            tracing::warn!(events, waited_s = start.elapsed().as_secs(),
                                "streaming list: still no k8s.io/initial-events-end bookmark");
                            next_warning += END_BOOKMARK_WARNING;
                            continue;
                        }
                        item = stream.next() => item,
                    };
                    let ev = match item {
                        None => break None,
                        Some(Err(Error::Undecodable { object, deleted })) => {
                            if temp.was_handed(&object.key) {
                                break Some(Error::handed_twice());
                            }
                            if deleted {
                                undecodable.retain(|k| *k != object.key);
                                temp.remove_key(&object.key);
                            } else {
                                undecodable.push(object.key.clone());
                            }
                            self.report_undecodable(object, deleted);
                            continue;
                        }
                        Some(Err(e)) if e.skips_event() => {
                            tracing::warn!(error = %ErrorChain(&e), "skipping an event of the streaming list");
                            self.report(&e);
                            continue;
                        }
                        Some(Err(e)) => break Some(e),
                        Some(Ok(ev)) => ev,
                    };
                    events += 1;
                    self.shared.count_event(&ev);
                    match ev {
                        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                            let o = match self.transformed(Arc::new(o)) {
                                Ok(o) => self.list_item(o),
                                Err(e) => break Some(e),
                            };
                            match temp.put(o) {
                                Ok(true) => {}
                                Ok(false) => break Some(Error::handed_twice()),
                                Err(e) => {
                                    let e = Error::InvalidObject(e);
                                    tracing::warn!(error = %ErrorChain(&e), "skipping an object of the streaming list");
                                    self.report(&e);
                                }
                            }
                            if temp.len() >= STREAMED_PART {
                                let starts = !temp.handed_any();
                                self.hand_over(temp.take_part(), starts, None)?;
                                self.paced().await;
                            }
                        }
                        WatchEvent::Deleted(o) => {
                            if !temp.remove(&o) {
                                break Some(Error::handed_twice());
                            }
                        }
                        WatchEvent::Bookmark(b) if b.initial_events_end => {
                            let starts = !temp.handed_any();
                            let mut items = temp.into_items();
                            items.extend(self.still_cached(&undecodable).into_iter().map(Listed::Object));
                            let count = items.len();
                            self.hand_over(items, starts, Some(&b.resource_version))?;
                            tracing::info!(items = count, resource_version = %b.resource_version, "streaming list synced");
                            st.rv_unavailable = false;
                            st.set_last_sync(&self.shared, b.resource_version);
                            self.shared.synced_once();
                            st.backoff.succeeded();
                            return Ok((stream, deadline));
                        }
                        WatchEvent::Bookmark(_) => {}
                    }
                };
                match failure {
                    None if events == 0 && start.elapsed() < VERY_SHORT_WATCH => {
                        return Err(Error::VeryShortWatch);
                    }
                    None => {
                        tracing::info!(events, "streaming list ended before its end bookmark: retrying");
                    }
                    Some(e) => {
                        if let Some(e) = self.stream_list_retry(st, e).await {
                            return Err(e);
                        }
                    }
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Whether a failed streaming list is retried (`None`, after any backoff) or given
    /// up for a fallback to List+Watch (`Some`).
    async fn stream_list_retry(&self, st: &mut RunState, e: Error) -> Option<Error> {
        if e.is_retriable_watch_start() {
            self.report(&e);
            let delay = st.backoff.next_delay(Instant::now(), e.is_unreachable());
            tracing::info!(error = %ErrorChain(&e), delay_ms = delay.as_millis() as u64, "streaming list failed: backing off");
            sleep(delay).await;
            None
        } else if e.is_expired() || e.is_too_large_resource_version() {
            tracing::info!(error = %ErrorChain(&e), "resourceVersion unavailable: streaming at \"\" (consistent read)");
            st.rv_unavailable = true;
            None
        } else {
            Some(e)
        }
    }

    /// Watches from the last synced RV, again and again, until a failure needs a relist.
    /// `first` is a watch already running (after a streaming list).
    async fn watch(&self, st: &mut RunState, first: Option<(WatchStream<K>, Instant)>) -> Error {
        let mut resync = ResyncTimer::new(self.resync_period);
        let mut pending = first;
        loop {
            let (stream, deadline, propagate_from_start) = match pending.take() {
                Some((stream, deadline)) => (stream, deadline, true),
                None => {
                    let rv = st.last_sync_rv.clone();
                    let timeout = random_watch_timeout(self.min_watch_timeout);
                    let opts = WatchOptions::new(rv.clone(), timeout);
                    let span = tracing::debug_span!("watch_start", resource_version = %rv);
                    let started = match self
                        .with_resync(&mut resync, self.lw.watch(&opts).instrument(span))
                        .await
                    {
                        Ok(started) => started,
                        Err(e) => return e,
                    };
                    match started {
                        // A watch from "" or "0" starts with synthetic ADDED events in no
                        // RV order: their RVs are not progress.
                        Ok(stream) => {
                            self.shared.watches.fetch_add(1, Ordering::Relaxed);
                            (
                                stream,
                                Instant::now() + timeout + WATCH_GRACE,
                                !(rv.is_empty() || rv == "0"),
                            )
                        }
                        Err(e) if e.is_retriable_watch_start() => {
                            self.report(&e);
                            let delay = st.backoff.next_delay(Instant::now(), e.is_unreachable());
                            tracing::info!(error = %ErrorChain(&e), resource_version = %rv, delay_ms = delay.as_millis() as u64,
                                "watch did not start: backing off, then re-watching (no relist)");
                            if let Err(e) = self.with_resync(&mut resync, sleep(delay)).await {
                                return e;
                            }
                            continue;
                        }
                        Err(e) => return e,
                    }
                }
            };
            let watched = self
                .handle_watch(st, stream, deadline, propagate_from_start, &mut resync)
                .instrument(tracing::debug_span!("watch"))
                .await;
            match watched {
                Ok(summary) if summary.events == 0 && summary.elapsed < VERY_SHORT_WATCH => {
                    return Error::VeryShortWatch;
                }
                Ok(summary) => {
                    tracing::debug!(events = summary.events, resource_version = %st.last_sync_rv, "watch closed: re-watching");
                }
                Err(e) if e.is_too_many_requests() => {
                    self.report(&e);
                    let delay = st.backoff.next_delay(Instant::now(), false);
                    tracing::info!(
                        delay_ms = delay.as_millis() as u64,
                        "watch answered 429: backing off, then re-watching (no relist)"
                    );
                    if let Err(e) = self.with_resync(&mut resync, sleep(delay)).await {
                        return e;
                    }
                }
                Err(e) if e.is_unreachable() => {
                    self.report(&e);
                    tracing::info!(error = %ErrorChain(&e), resource_version = %st.last_sync_rv, "watch connection broke: re-watching (no relist)");
                }
                Err(e) => return e,
            }
        }
    }

    /// Consumes one watch into the sink until it closes (`Ok`) or fails (`Err`).
    async fn handle_watch(
        &self,
        st: &mut RunState,
        mut stream: WatchStream<K>,
        deadline: Instant,
        propagate_from_start: bool,
        resync: &mut ResyncTimer,
    ) -> Result<WatchSummary, Error> {
        let start = Instant::now();
        let mut events = 0u64;
        let mut past_initial_adds = false;
        // Two timers for the whole watch, not two per event.
        let timeout = sleep_until(deadline);
        let resync_sleep = sleep_until(resync.next.unwrap_or(start + NEVER));
        tokio::pin!(timeout, resync_sleep);
        loop {
            let item = tokio::select! {
                biased;
                () = &mut resync_sleep, if resync.next.is_some() => {
                    self.resync_now()?;
                    resync.rearm();
                    resync_sleep.as_mut().reset(resync.next.unwrap_or(start + NEVER));
                    continue;
                }
                () = &mut timeout => {
                    tracing::debug!("watch outlived its timeout: ending it");
                    None
                }
                item = stream.next() => item,
            };
            let ev = match item {
                None => {
                    return Ok(WatchSummary {
                        events,
                        elapsed: start.elapsed(),
                    });
                }
                Some(Err(Error::Undecodable { object, deleted })) => {
                    if deleted {
                        self.delete_undecodable(&object.key)?;
                    }
                    self.report_undecodable(object, deleted);
                    continue;
                }
                Some(Err(e)) if e.skips_event() => {
                    tracing::warn!(error = %ErrorChain(&e), "skipping a watch event");
                    self.report(&e);
                    continue;
                }
                Some(Err(e)) => return Err(e),
                Some(Ok(ev)) => ev,
            };
            self.shared.count_event(&ev);
            let ev = match ev.map_object(|o| self.transformed(Arc::new(o))) {
                Ok(ev) => ev,
                Err(e) => {
                    tracing::warn!(error = %ErrorChain(&e), "skipping a watch event");
                    self.report(&e);
                    continue;
                }
            };
            let (rv, written) = match ev {
                Transformed::Added(o) => (rv_of(&*o), self.sink.add(o)),
                Transformed::Modified(o) => {
                    past_initial_adds = true;
                    (rv_of(&*o), self.sink.update(o))
                }
                Transformed::Deleted(o) => {
                    past_initial_adds = true;
                    (rv_of(&*o), self.sink.delete(o))
                }
                Transformed::Bookmark(b) => {
                    past_initial_adds = true;
                    let written = self.sink.bookmark(&b.resource_version);
                    (b.resource_version, written)
                }
            };
            if let Err(e) = written {
                let e = Error::Sink(e);
                if e.is_sink_closed() {
                    return Err(e);
                }
                tracing::warn!(error = %ErrorChain(&e), resource_version = %rv, "the sink refused a watch event");
                self.report(&e);
            }
            if (propagate_from_start || past_initial_adds) && !rv.is_empty() {
                st.set_last_sync(&self.shared, rv);
            }
            if events == 0 {
                // The watch works: the server is back.
                st.backoff.succeeded();
            }
            events += 1;
        }
    }

    /// Runs `fut` while keeping the resync timer going.
    async fn with_resync<F: Future>(
        &self,
        resync: &mut ResyncTimer,
        fut: F,
    ) -> Result<F::Output, Error> {
        let mut fut = std::pin::pin!(fut);
        loop {
            let next = resync.next;
            tokio::select! {
                biased;
                out = &mut fut => return Ok(out),
                () = sleep_until_opt(next) => {
                    self.resync_now()?;
                    resync.rearm();
                }
            }
        }
    }

    fn resync_now(&self) -> Result<(), Error> {
        if self.should_resync.as_ref().is_none_or(|f| f()) {
            tracing::debug!("resync");
            self.sink.resync().map_err(Error::Sink)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

fn rv_of<K: MetaObject>(o: &K) -> String {
    o.object_resource_version().unwrap_or_default().to_owned()
}

/// Far enough away to stand for "never" in a timer that is switched off.
const NEVER: Duration = Duration::from_secs(365 * 24 * 60 * 60);

async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => sleep_until(t).await,
        None => std::future::pending().await,
    }
}

fn default_error_handler(e: &Error) {
    if e.is_expired() {
        tracing::info!(error = %ErrorChain(e), "resourceVersion expired");
    } else if e.is_unreachable() {
        tracing::warn!(error = %ErrorChain(e), "cannot reach the API server");
    } else {
        tracing::warn!(error = %ErrorChain(e), "list/watch failed");
    }
}

/// What a list collected.
struct PagedList<K> {
    /// What is left to hand to the sink.
    items: Vec<Listed<K>>,
    /// Whether parts of the list went to the sink already.
    handed_parts: bool,
    /// How many objects the list had, including those handed to the sink in parts.
    count: usize,
    /// Keys of the objects that did not decode.
    undecodable: Vec<ObjectKey>,
    resource_version: String,
    paginated: bool,
    pages: u32,
}

struct WatchSummary {
    events: u64,
    elapsed: Duration,
}

struct ResyncTimer {
    period: Option<Duration>,
    next: Option<Instant>,
}

impl ResyncTimer {
    fn new(period: Option<Duration>) -> Self {
        Self {
            period,
            next: period.map(|p| Instant::now() + p),
        }
    }

    fn rearm(&mut self) {
        self.next = self.period.map(|p| Instant::now() + p);
    }
}

/// A watch event whose object is in its `Arc` and transformed.
enum Transformed<K> {
    Added(Arc<K>),
    Modified(Arc<K>),
    Deleted(Arc<K>),
    Bookmark(crate::Bookmark),
}

impl<K> WatchEvent<K> {
    fn map_object(
        self,
        f: impl FnOnce(K) -> Result<Arc<K>, Error>,
    ) -> Result<Transformed<K>, Error> {
        Ok(match self {
            Self::Added(o) => Transformed::Added(f(o)?),
            Self::Modified(o) => Transformed::Modified(f(o)?),
            Self::Deleted(o) => Transformed::Deleted(f(o)?),
            Self::Bookmark(b) => Transformed::Bookmark(b),
        })
    }
}

/// The objects of a streaming list until they are handed to the sink (a part at a time),
/// in arrival order.
struct TempStore<K> {
    /// foldhash, seeded per map, as the FIFOs' and the store's maps of the same keys.
    index: HashMap<ObjectKey, usize, foldhash::fast::RandomState>,
    items: Vec<Option<Listed<K>>>,
    /// Keys of the objects handed over in parts ([`TempStore::take_part`]).
    handed: HashSet<ObjectKey, foldhash::fast::RandomState>,
}

impl<K> Default for TempStore<K> {
    fn default() -> Self {
        Self {
            index: HashMap::default(),
            items: Vec::new(),
            handed: HashSet::default(),
        }
    }
}

impl<K: MetaObject> TempStore<K> {
    /// Keeps `obj`, over an earlier version of it; `false` (and nothing kept) when a part
    /// handed it over already.
    fn put(&mut self, obj: Listed<K>) -> Result<bool, kinformer_core::Error> {
        let key = match &obj {
            Listed::Object(o) => meta_namespace_key(&**o)?,
            Listed::Unchanged(u) => u.key().clone(),
        };
        if self.handed.contains(&key) {
            return Ok(false);
        }
        match self.index.entry(key) {
            Entry::Occupied(e) => {
                if let Some(slot) = self.items.get_mut(*e.get()) {
                    *slot = Some(obj);
                }
            }
            Entry::Vacant(e) => {
                e.insert(self.items.len());
                self.items.push(Some(obj));
            }
        }
        Ok(true)
    }

    /// Forgets `obj`; `false` when a part handed it over already.
    fn remove(&mut self, obj: &K) -> bool {
        match meta_namespace_key(obj) {
            Ok(key) if self.handed.contains(&key) => false,
            Ok(key) => {
                self.remove_key(&key);
                true
            }
            Err(_) => true,
        }
    }

    fn remove_key(&mut self, key: &ObjectKey) {
        if let Some(i) = self.index.remove(key)
            && let Some(slot) = self.items.get_mut(i)
        {
            *slot = None;
        }
    }

    fn was_handed(&self, key: &ObjectKey) -> bool {
        self.handed.contains(key)
    }

    /// Whether a part was handed over.
    fn handed_any(&self) -> bool {
        !self.handed.is_empty()
    }

    /// How many objects it holds.
    fn len(&self) -> usize {
        self.index.len()
    }

    /// Everything it holds, to hand over as a part of the list; their keys are remembered.
    fn take_part(&mut self) -> Vec<Listed<K>> {
        self.handed.extend(self.index.drain().map(|(k, _)| k));
        std::mem::take(&mut self.items)
            .into_iter()
            .flatten()
            .collect()
    }

    fn into_items(self) -> Vec<Listed<K>> {
        self.items.into_iter().flatten().collect()
    }
}

/// Why the next list happens, for the `list` span.
#[derive(Clone, Debug)]
enum RelistReason {
    Initial,
    Expired,
    TooLargeResourceVersion,
    VeryShortWatch,
    Failed(String),
}

impl RelistReason {
    fn after(e: &Error) -> Self {
        if e.is_expired() {
            Self::Expired
        } else if e.is_too_large_resource_version() {
            Self::TooLargeResourceVersion
        } else if matches!(e, Error::VeryShortWatch) {
            Self::VeryShortWatch
        } else {
            Self::Failed(ErrorChain(e).to_string())
        }
    }

    /// Its position in [`LIST_REASONS`].
    fn label_index(&self) -> usize {
        match self {
            Self::Initial => 0,
            Self::Expired => 1,
            Self::TooLargeResourceVersion => 2,
            Self::VeryShortWatch => 3,
            Self::Failed(_) => 4,
        }
    }
}

impl fmt::Display for RelistReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Initial => f.write_str("initial list"),
            Self::Expired => f.write_str("the watch's resourceVersion expired (410 Gone)"),
            Self::TooLargeResourceVersion => {
                f.write_str("the resourceVersion is newer than the server's (too large)")
            }
            Self::VeryShortWatch => f.write_str("a watch closed at once without events"),
            Self::Failed(e) => write!(f, "the previous round failed: {e}"),
        }
    }
}

/// What the reflector remembers between rounds.
struct RunState {
    last_sync_rv: String,
    /// The last list or watch at `last_sync_rv` answered "expired" or "too large":
    /// the next one reads at `""`.
    rv_unavailable: bool,
    /// The first list (at RV "0") came back in pages: the watch cache is off, so later
    /// lists are paged too.
    paginated_result: bool,
    backoff: BackoffState,
    reason: RelistReason,
}

impl RunState {
    fn new(backoff: Backoff) -> Self {
        Self {
            last_sync_rv: String::new(),
            rv_unavailable: false,
            paginated_result: false,
            backoff: BackoffState::new(backoff),
            reason: RelistReason::Initial,
        }
    }

    /// client-go's `relistResourceVersion`: `""` after an unavailable RV, `"0"` at
    /// first, else the last synced RV.
    fn relist_rv(&self) -> &str {
        if self.rv_unavailable {
            ""
        } else if self.last_sync_rv.is_empty() {
            "0"
        } else {
            &self.last_sync_rv
        }
    }

    /// client-go's `rewatchResourceVersion`, for streaming lists: `""` (consistent) at
    /// first and after an unavailable RV, else the last synced RV.
    fn rewatch_rv(&self) -> &str {
        if self.rv_unavailable {
            ""
        } else {
            &self.last_sync_rv
        }
    }

    fn set_last_sync(&mut self, shared: &Shared, rv: String) {
        *shared
            .last_sync_rv
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = rv.clone();
        self.last_sync_rv = rv;
    }
}

#[derive(Default)]
struct Shared {
    last_sync_rv: Mutex<String>,
    synced: AtomicBool,
    syncs: AtomicU64,
    /// Lists started, by [`RelistReason::label`] position.
    lists: [AtomicU64; LIST_REASONS.len()],
    watches: AtomicU64,
    /// Watch events, by [`EVENT_TYPES`] position.
    events: [AtomicU64; EVENT_TYPES.len()],
    /// Objects skipped because they did not decode.
    undecodable: AtomicU64,
}

/// The `reason` labels of [`ReflectorCounters::lists`].
const LIST_REASONS: [&str; 5] = [
    "initial",
    "expired",
    "too_large_resource_version",
    "very_short_watch",
    "error",
];

/// The `type` labels of [`ReflectorCounters::events`].
const EVENT_TYPES: [&str; 4] = ["added", "modified", "deleted", "bookmark"];

impl Shared {
    fn synced_once(&self) {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.synced.store(true, Ordering::Release);
    }

    fn count_list(&self, reason: &RelistReason) {
        if let Some(n) = self.lists.get(reason.label_index()) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn count_event<K>(&self, ev: &WatchEvent<K>) {
        let i = match ev {
            WatchEvent::Added(_) => 0,
            WatchEvent::Modified(_) => 1,
            WatchEvent::Deleted(_) => 2,
            WatchEvent::Bookmark(_) => 3,
        };
        if let Some(n) = self.events.get(i) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What a reflector did since it started, counted as it went: read them at any time
/// through [`ReflectorStatus::counters`] (the facade's metrics do, at each scrape).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReflectorCounters {
    /// Lists (paged, or streaming) started, by why: `initial`, `expired` (410 Gone),
    /// `too_large_resource_version`, `very_short_watch`, `error` (any other failure).
    pub lists: Vec<(&'static str, u64)>,
    /// Watches started (a streaming list's watch included).
    pub watches: u64,
    /// Watch events received, by type: `added`, `modified`, `deleted`, `bookmark`
    /// (a streaming list's initial events included).
    pub events: Vec<(&'static str, u64)>,
    /// Lists that reached the sink (as [`ReflectorStatus::syncs`]).
    pub syncs: u64,
    /// Objects skipped because they did not decode ([`Error::Undecodable`]): list items
    /// and watch events.
    pub undecodable: u64,
}

/// A live view of a reflector's progress, cheap to clone.
#[derive(Clone)]
pub struct ReflectorStatus {
    shared: Arc<Shared>,
}

impl fmt::Debug for ReflectorStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReflectorStatus")
            .field(
                "last_sync_resource_version",
                &self.last_sync_resource_version(),
            )
            .field("has_synced", &self.has_synced())
            .field("syncs", &self.syncs())
            .finish()
    }
}

impl ReflectorStatus {
    /// The resourceVersion of the last list, watch event or bookmark the sink got
    /// (client-go's `LastSyncResourceVersion`); empty before the first list.
    pub fn last_sync_resource_version(&self) -> String {
        self.shared
            .last_sync_rv
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether a full list (or streaming list) has reached the sink at least once.
    pub fn has_synced(&self) -> bool {
        self.shared.synced.load(Ordering::Acquire)
    }

    /// How many full lists (or streaming lists) replaced the sink's content: 1 after the
    /// initial list, one more per relist.
    pub fn syncs(&self) -> u64 {
        self.shared.syncs.load(Ordering::Relaxed)
    }

    /// What the reflector did so far: lists by reason, watches, events by type.
    pub fn counters(&self) -> ReflectorCounters {
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        ReflectorCounters {
            lists: LIST_REASONS
                .iter()
                .zip(&self.shared.lists)
                .map(|(r, n)| (*r, load(n)))
                .collect(),
            watches: load(&self.shared.watches),
            events: EVENT_TYPES
                .iter()
                .zip(&self.shared.events)
                .map(|(t, n)| (*t, load(n)))
                .collect(),
            syncs: self.syncs(),
            undecodable: load(&self.shared.undecodable),
        }
    }
}

/// A reflector running on its own task: [`stop`](Self::stop) stops it and waits for it;
/// dropping the handle leaves it running (see [`TaskHandle`]).
#[must_use = "the handle is the way to stop the reflector and wait for it; dropping it leaves the reflector running"]
pub struct ReflectorHandle {
    task: TaskHandle<Error>,
    status: ReflectorStatus,
}

impl fmt::Debug for ReflectorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReflectorHandle")
            .field("status", &self.status)
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl ReflectorHandle {
    /// The reflector's progress.
    pub fn status(&self) -> &ReflectorStatus {
        &self.status
    }

    /// Whether the task has ended (stopped, or the sink was closed).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// The token that stops the reflector when cancelled (without waiting for it).
    pub fn cancellation_token(&self) -> CancellationToken {
        self.task.cancellation_token()
    }

    /// Stops the reflector and waits until its task has ended.
    ///
    /// # Errors
    /// `Err(Error::Sink(Closed))` if the reflector had already stopped because its sink
    /// was closed.
    ///
    /// # Panics
    /// Resumes a panic of the reflector's task (one raised by a sink or an error handler).
    pub async fn stop(self) -> Result<(), Error> {
        self.task.stop().await
    }
}
