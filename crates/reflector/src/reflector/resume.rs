//! Resuming from a snapshot of the cache instead of listing ([`Resume`]): what the server
//! is at, a watch from the snapshot's version until it has caught up with that, and the
//! snapshot with what changed handed to the sink as one list.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use kinformer_core::{
    BoxError, BoxFuture, ErrorChain, Listed, MetaObject, ObjectKey, Sink, Unchanged,
};
use tracing::Instrument;

use super::Reflector;
use super::run_state::{RelistReason, RunState};
use super::watch::WATCH_GRACE;
use crate::{Error, ListOptions, ListerWatcher, WatchEvent, WatchOptions};

/// `timeoutSeconds` of the watch that catches up from a snapshot's version: the shortest
/// that gets a bookmark from the API server's watch cache, which sends one two seconds
/// before a watch's deadline (and about every minute otherwise). A cluster where nothing
/// changed since the process asked what the server is at still proves it has caught up
/// about a second in.
pub const CATCH_UP_WATCH_TIMEOUT: Duration = Duration::from_secs(3);

/// Where a reflector starts instead of a list: a snapshot of its sink's consumer's cache at a
/// resourceVersion, from a process that ran before ([`Reflector::resume`]).
///
/// The reflector asks the server what it is at (a list of one object, a consistent read),
/// watches from the snapshot's version until an event or bookmark reaches that, and only
/// then hands the sink one list: the snapshot with what changed since applied. Its consumer
/// has synced when that list is processed, so nothing reads a cache older than the server
/// was when the reflector started. When it cannot (the version is compacted away: `410`;
/// the watch ends before it reaches the server's version, as a server without a watch cache
/// sends no bookmarks; versions that are not integers), it lists at `""`, and the sink
/// compares that list with the cache as with any relist.
///
/// Two ways to hold the snapshot's objects:
/// - [`from_known`](Self::from_known): the sink's consumer's cache holds them already
///   ([`Reflector::known_objects`]); the list it gets names each unchanged one by its key
///   ([`Listed::Unchanged`]), so its handlers see only what changed since the snapshot
///   (updates, deletes as tombstones, adds);
/// - [`with_objects`](Self::with_objects): the reflector holds them until it has caught
///   up, and hands every one on as listed: handlers see them all as the adds of a first
///   list.
///
/// Either can still be loading when the reflector starts ([`loading`](Self::loading),
/// [`loading_into_known`](Self::loading_into_known)): it asks the server and watches
/// meanwhile, and waits for them only to hand them on, so that reading a large snapshot
/// from disk and waiting for the server's bookmark overlap. A load that fails lists
/// instead, as when the reflector cannot catch up.
pub struct Resume<K> {
    resource_version: String,
    objects: Objects<K>,
}

/// Where a resumed reflector's snapshot objects are, or will be.
enum Objects<K> {
    /// The reflector hands them on.
    Held(BoxFuture<'static, Result<Vec<Arc<K>>, BoxError>>),
    /// The known objects hold them once this resolves.
    Known(BoxFuture<'static, Result<(), BoxError>>),
}

impl<K> std::fmt::Debug for Resume<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resume")
            .field("resource_version", &self.resource_version)
            .field("from_known", &self.is_from_known())
            .finish_non_exhaustive()
    }
}

impl<K: Send + Sync + 'static> Resume<K> {
    /// Resume from `resource_version`, the cache ([`Reflector::known_objects`]) holding the
    /// snapshot's objects.
    pub fn from_known(resource_version: impl Into<String>) -> Self {
        Self::loading_into_known(resource_version, async { Ok(()) })
    }

    /// Resume from `resource_version`, the cache holding the snapshot's objects once
    /// `loaded` resolves (`Err`: they could not be loaded; the cache is as before).
    pub fn loading_into_known(
        resource_version: impl Into<String>,
        loaded: impl Future<Output = Result<(), BoxError>> + Send + 'static,
    ) -> Self {
        Self {
            resource_version: resource_version.into(),
            objects: Objects::Known(Box::pin(loaded)),
        }
    }

    /// Resume from `resource_version` with the snapshot's `objects`, handed on as the
    /// objects of a first list.
    pub fn with_objects(resource_version: impl Into<String>, objects: Vec<Arc<K>>) -> Self {
        Self::loading(resource_version, async move { Ok(objects) })
    }

    /// Resume from `resource_version` with the snapshot's objects `objects` resolves to.
    pub fn loading(
        resource_version: impl Into<String>,
        objects: impl Future<Output = Result<Vec<Arc<K>>, BoxError>> + Send + 'static,
    ) -> Self {
        Self {
            resource_version: resource_version.into(),
            objects: Objects::Held(Box::pin(objects)),
        }
    }
}

impl<K> Resume<K> {
    /// The snapshot's resourceVersion.
    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    /// Whether the cache holds the snapshot's objects ([`from_known`](Self::from_known)).
    pub fn is_from_known(&self) -> bool {
        matches!(self.objects, Objects::Known(_))
    }
}

/// What the catch-up watch saw, by key: the newest version, `None` once deleted.
struct Changes<K> {
    by_key: HashMap<ObjectKey, Option<Arc<K>>>,
}

impl<K> Default for Changes<K> {
    fn default() -> Self {
        Self {
            by_key: HashMap::new(),
        }
    }
}

impl<K, L, S> Reflector<K, L, S>
where
    K: MetaObject + Send + Sync + 'static,
    L: ListerWatcher<K>,
    S: Sink<K>,
{
    /// A round that starts from `resume` (taken) rather than a list: caught up, then
    /// watching; when it cannot catch up, the round lists (consistently) instead. A server
    /// that cannot be reached or answers `429` before the resume needed the snapshot's
    /// objects leaves it in `resume` for the next round, after the backoff: a blip at start
    /// does not cost the snapshot. Returns why the round gave up, as
    /// [`list_and_watch`](Self::list_and_watch).
    pub(super) async fn resume_and_watch(
        &self,
        st: &mut RunState,
        resume: &mut Option<Resume<K>>,
    ) -> Error {
        let Some(Resume {
            resource_version: from,
            objects,
        }) = resume.take()
        else {
            return self.list_and_watch(st).await;
        };
        let mut objects = Some(objects);
        let span = tracing::info_span!("resume", resource_version = %from, caught_up_at = tracing::field::Empty);
        let caught_up = self
            .catch_up(st, &from, &mut objects)
            .instrument(span)
            .await;
        let caught_up = match caught_up {
            Err(e) if (e.is_unreachable() || e.is_too_many_requests()) && objects.is_some() => {
                tracing::info!(error = %ErrorChain(&e), resource_version = %from,
                    "cannot reach the API server to resume: retrying the resume after a backoff");
                *resume = objects.take().map(|objects| Resume {
                    resource_version: from,
                    objects,
                });
                return e;
            }
            other => other,
        };
        // A cache still being filled must be full before a list is compared with it; held
        // objects a failed resume did not hand on are dropped before the list, not kept
        // beside it.
        match objects.take() {
            Some(Objects::Known(loaded)) => {
                if let Err(e) = loaded.await {
                    tracing::info!(error = %ErrorChain(&*e), "the snapshot could not be loaded into the cache");
                }
            }
            Some(Objects::Held(held)) => drop(held),
            None => {}
        }
        match caught_up {
            Ok(()) => self.watch(st, None).await,
            Err(e @ (Error::Sink(_) | Error::ShardSelectionChanged)) => e,
            Err(e) => {
                self.shared.resume_failures.fetch_add(1, Ordering::Relaxed);
                tracing::info!(error = %ErrorChain(&e), resource_version = %from,
                    "cannot resume from the snapshot: listing (consistent read), handing on only what changed");
                self.report(&e);
                st.reason = RelistReason::after(&e);
                // A consistent read: at least as new as the server was when we started.
                st.rv_unavailable = true;
                self.list_and_watch(st).await
            }
        }
    }

    /// Catches up from `from`; takes `objects` once it needs them (left there when it
    /// fails before).
    async fn catch_up(
        &self,
        st: &mut RunState,
        from: &str,
        objects: &mut Option<Objects<K>>,
    ) -> Result<(), Error> {
        let not_resumed = |why: &'static str| Error::NotResumed {
            resource_version: from.to_owned(),
            why,
        };
        let Ok(from_n) = from.parse::<u64>() else {
            return Err(not_resumed(
                "the snapshot's resourceVersion is not an integer",
            ));
        };
        // What the server is at now: a consistent read of one object.
        let probe = self.lw.list(&ListOptions::new("", Some(1))).await?;
        let Ok(target) = probe.resource_version.parse::<u64>() else {
            return Err(not_resumed(
                "the server's resourceVersion is not an integer",
            ));
        };
        drop(probe);
        let mut changes = Changes::default();
        let mut reached = from.to_owned();
        if from_n < target {
            reached = self.watch_until(from, target, &mut changes).await?;
        }
        tracing::Span::current().record("caught_up_at", reached.as_str());
        let changed = changes.by_key.len();
        let base = match objects.take() {
            Some(Objects::Held(loading)) => Some(loading.await.map_err(|e| {
                tracing::info!(error = %ErrorChain(&*e), "the snapshot could not be loaded");
                not_resumed("the snapshot could not be loaded")
            })?),
            Some(Objects::Known(loading)) => {
                loading.await.map_err(|e| {
                    tracing::info!(error = %ErrorChain(&*e), "the snapshot could not be loaded into the cache");
                    not_resumed("the snapshot could not be loaded")
                })?;
                None
            }
            None => return Err(not_resumed("no snapshot objects")),
        };
        let items = self.resumed_list(from, base, changes)?;
        tracing::info!(objects = items.len(), changed, resource_version = %reached, server_was_at = target,
            "caught up from the snapshot");
        // Counted first: the sink may have applied the list before this task goes on.
        self.shared.resumed.fetch_add(1, Ordering::Relaxed);
        self.hand_over(items, true, Some(&reached))?;
        st.whole_lists = false;
        st.set_last_sync(&self.shared, reached);
        self.shared.synced_once();
        st.backoff.succeeded();
        Ok(())
    }

    /// Watches from `from` until an event or bookmark reaches `target`, gathering what
    /// changed; the version reached.
    async fn watch_until(
        &self,
        from: &str,
        target: u64,
        changes: &mut Changes<K>,
    ) -> Result<String, Error> {
        let opts = WatchOptions::new(from, CATCH_UP_WATCH_TIMEOUT);
        let mut stream = self.lw.watch(&opts).await?;
        self.shared.watches.fetch_add(1, Ordering::Relaxed);
        let mut timeout = self
            .clock
            .sleep_until(self.clock.now() + CATCH_UP_WATCH_TIMEOUT + WATCH_GRACE);
        let mut reached = from.to_owned();
        loop {
            let item = tokio::select! {
                biased;
                () = &mut timeout => None,
                item = stream.next() => item,
            };
            let rv = match item {
                None => {
                    return Err(Error::NotResumed {
                        resource_version: from.to_owned(),
                        why: "the watch ended before it reached the server's version (no bookmark: is the watch cache off?)",
                    });
                }
                Some(Ok(WatchEvent::Shard(_))) => return Err(Error::ShardSelectionChanged),
                Some(Ok(ev)) => {
                    self.shared.count_event(&ev);
                    match ev {
                        WatchEvent::Bookmark(b) => b.resource_version,
                        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                            match self.transformed(Arc::new(o)) {
                                Ok(o) => changes.put(self, o, true),
                                Err(e) => {
                                    tracing::warn!(error = %ErrorChain(&e), "skipping a watch event");
                                    self.report(&e);
                                    continue;
                                }
                            }
                        }
                        WatchEvent::Deleted(o) => changes.put(self, Arc::new(o), false),
                        WatchEvent::Shard(_) => return Err(Error::ShardSelectionChanged),
                    }
                }
                Some(Err(Error::Undecodable { object, deleted })) => {
                    if deleted {
                        changes.by_key.insert(object.key.clone(), None);
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
            };
            if !rv.is_empty() {
                reached = rv;
            }
            if reached.parse::<u64>().is_ok_and(|r| r >= target) {
                return Ok(reached);
            }
        }
    }

    /// The list the sink gets: the snapshot (`base`, or the known objects) with `changes`
    /// applied.
    fn resumed_list(
        &self,
        from: &str,
        base: Option<Vec<Arc<K>>>,
        mut changes: Changes<K>,
    ) -> Result<Vec<Listed<K>>, Error> {
        let mut items = Vec::new();
        match base {
            Some(objects) if changes.by_key.is_empty() => {
                items = objects.into_iter().map(Listed::Object).collect();
            }
            Some(objects) => {
                items.reserve(objects.len());
                for obj in objects {
                    let key = self.key_of(&obj).map_err(Error::InvalidObject)?;
                    match changes.by_key.remove(&key) {
                        None => items.push(Listed::Object(obj)),
                        Some(Some(newer)) => items.push(Listed::Object(newer)),
                        Some(None) => {}
                    }
                }
            }
            None => {
                let Some(known) = &self.known else {
                    return Err(Error::NotResumed {
                        resource_version: from.to_owned(),
                        why: "resumed from the cache, but the reflector has no known objects",
                    });
                };
                let keys = known.list_keys();
                items.reserve(keys.len());
                for key in keys {
                    match changes.by_key.remove(&key) {
                        None => {
                            items.push(Listed::Unchanged(Unchanged::new(key, Arc::clone(known))))
                        }
                        Some(Some(newer)) => items.push(Listed::Object(newer)),
                        Some(None) => {}
                    }
                }
            }
        }
        // What the snapshot did not have: created since.
        items.extend(changes.by_key.into_values().flatten().map(Listed::Object));
        Ok(items)
    }
}

impl<K: MetaObject + Send + Sync + 'static> Changes<K> {
    /// Notes `obj` (its final state when not `kept`); its resourceVersion. An object
    /// without a usable key is skipped, as a watch skips it.
    fn put<L, S>(&mut self, reflector: &Reflector<K, L, S>, obj: Arc<K>, kept: bool) -> String
    where
        L: ListerWatcher<K>,
        S: Sink<K>,
    {
        let rv = obj.object_resource_version().unwrap_or_default().to_owned();
        match reflector.key_of(&obj) {
            Ok(key) => {
                self.by_key.insert(key, kept.then_some(obj));
            }
            Err(e) => {
                let e = Error::InvalidObject(e);
                tracing::warn!(error = %ErrorChain(&e), "skipping a watch event");
                reflector.report(&e);
            }
        }
        rv
    }
}
