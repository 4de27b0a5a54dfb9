//! The watch loop: watches from the last synced resourceVersion into the sink, re-watching
//! until a failure needs a relist, with the resync timer running alongside.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kinformer_core::{ErrorChain, Listed, MetaObject, Sink, Unchanged};
use tracing::Instrument;

use super::Reflector;
use super::run_state::RunState;
use crate::backoff::random_watch_timeout;
use crate::{
    Error, ListOptions, ListerWatcher, ShardChange, ShardSelector, WatchEvent, WatchOptions,
    WatchStream,
};

/// A watch that ends sooner than this without any event is a [`Error::VeryShortWatch`].
pub(super) const VERY_SHORT_WATCH: Duration = Duration::from_secs(1);
/// How long past its `timeoutSeconds` a watch may stay open before the reflector ends it
/// itself (a connection that died without a FIN never ends otherwise).
pub(super) const WATCH_GRACE: Duration = Duration::from_secs(30);

impl<K, L, S> Reflector<K, L, S>
where
    K: MetaObject + Send + Sync + 'static,
    L: ListerWatcher<K>,
    S: Sink<K>,
{
    /// Watches from the last synced RV, again and again, until a failure needs a relist.
    /// `first` is a watch already running (after a streaming list).
    pub(super) async fn watch(
        &self,
        st: &mut RunState,
        first: Option<(WatchStream<K>, Instant)>,
    ) -> Error {
        let mut resync = ResyncTimer::new(self.resync_period, self.clock.now());
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
                                self.clock.now() + timeout + WATCH_GRACE,
                                !(rv.is_empty() || rv == "0"),
                            )
                        }
                        Err(e) if e.is_retriable_watch_start() => {
                            self.report(&e);
                            let delay = st.backoff.next_delay(self.clock.now(), e.is_unreachable());
                            tracing::info!(error = %ErrorChain(&e), resource_version = %rv, delay_ms = delay.as_millis() as u64,
                                "watch did not start: backing off, then re-watching (no relist)");
                            if let Err(e) =
                                self.with_resync(&mut resync, self.clock.sleep(delay)).await
                            {
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
                Ok(summary)
                    if summary.events == 0
                        && !summary.widened
                        && summary.elapsed < VERY_SHORT_WATCH =>
                {
                    return Error::VeryShortWatch;
                }
                Ok(summary) => {
                    tracing::debug!(events = summary.events, resource_version = %st.last_sync_rv, "watch closed: re-watching");
                }
                Err(e) if e.is_too_many_requests() => {
                    self.report(&e);
                    let delay = st.backoff.next_delay(self.clock.now(), false);
                    tracing::info!(
                        delay_ms = delay.as_millis() as u64,
                        "watch answered 429: backing off, then re-watching (no relist)"
                    );
                    if let Err(e) = self.with_resync(&mut resync, self.clock.sleep(delay)).await {
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
        let start = self.clock.now();
        let mut events = 0u64;
        let mut past_initial_adds = false;
        // Two timers for the whole watch, not two per event.
        let mut timeout = self.clock.sleep_until(deadline);
        let mut resync_sleep = self.clock.sleep_until(resync.next.unwrap_or(start + NEVER));
        loop {
            let item = tokio::select! {
                biased;
                () = &mut resync_sleep, if resync.next.is_some() => {
                    self.resync_now()?;
                    resync.rearm(self.clock.now());
                    resync_sleep = self.clock.sleep_until(resync.next.unwrap_or(start + NEVER));
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
                        elapsed: self.clock.now().saturating_duration_since(start),
                        widened: false,
                    });
                }
                Some(Err(Error::Undecodable { object, deleted })) => {
                    if deleted {
                        self.delete_undecodable(&object.key)?;
                    }
                    self.report_undecodable(object, deleted);
                    continue;
                }
                Some(Ok(WatchEvent::Shard(ShardChange::Narrowed(selector)))) => {
                    self.narrow(st, &selector)?;
                    continue;
                }
                Some(Ok(WatchEvent::Shard(ShardChange::Widened { selector, added }))) => {
                    self.widen(st, &selector, &added).await?;
                    return Ok(WatchSummary {
                        events,
                        elapsed: self.clock.now().saturating_duration_since(start),
                        widened: true,
                    });
                }
                Some(Ok(WatchEvent::Shard(ShardChange::Relist))) => {
                    return Err(Error::ShardSelectionChanged);
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

    /// The selection narrowed to `selector` while the watch ran: the cache's objects it
    /// still selects are handed over as a list of unchanged objects at the last synced
    /// version, so the sink drops the rest as a relist's replace would (each one a
    /// deletion), and nothing is requested. Without the cache's keys
    /// ([`known_objects`](Self::known_objects)) it cannot tell: relist.
    fn narrow(&self, st: &RunState, selector: &ShardSelector) -> Result<(), Error> {
        let kept = self.still_selected(selector)?;
        tracing::debug!(kept = kept.len(), %selector, "the shard selection narrowed: dropping the rest of the cache without a relist");
        self.shared.narrowings.fetch_add(1, Ordering::Relaxed);
        self.hand_over(kept, true, Some(&st.last_sync_rv))
    }

    /// The selection changed to `selector`, which adds `added` to what the watch kept, and
    /// the watch ended. One list: the cache's objects `selector` still selects, as
    /// unchanged, then `added` listed at exactly the last synced version (so the watch
    /// that follows, from that version, misses nothing and repeats nothing), ended at that
    /// version; the sink drops the rest as a relist's replace would. A relist instead
    /// ([`Error::ShardSelectionChanged`]) without the cache's keys, without a version to
    /// list at, or when the exact list fails (the version compacted away, the selection
    /// changed again) or comes back at another version.
    async fn widen(
        &self,
        st: &RunState,
        selector: &ShardSelector,
        added: &ShardSelector,
    ) -> Result<(), Error> {
        let rv = st.last_sync_rv.clone();
        if rv.is_empty() || rv == "0" {
            return Err(Error::ShardSelectionChanged);
        }
        let kept = self.still_selected(selector)?;
        let (kept_count, started) = (kept.len(), Instant::now());
        // Paged, as after a paged list: without the gate the server sends every object for
        // this list, and unpaged they would all be held at once before the filter.
        let mut first = ListOptions::new(rv.clone(), self.page_size_for(&rv, true));
        first.shard = Some(added.clone());
        first.exact = true;
        self.hand_over(kept, true, None)?;
        let listed = match self.paged_list(first, true, false).await {
            Ok(listed) if listed.resource_version == rv => listed,
            Ok(listed) => {
                tracing::debug!(asked = %rv, listed = %listed.resource_version, "the gained shards were not listed at the version asked: relisting");
                return Err(Error::ShardSelectionChanged);
            }
            Err(e) if e.is_sink_closed() => return Err(e),
            Err(e) => {
                tracing::debug!(error = %ErrorChain(&e), "listing the gained shards failed: relisting");
                return Err(Error::ShardSelectionChanged);
            }
        };
        tracing::debug!(kept = kept_count, listed = listed.count, %added, resource_version = %rv,
            took_ms = started.elapsed().as_millis() as u64,
            "the shard selection gained shards: listed only those, at the version the watch had reached");
        self.hand_over(listed.items, false, Some(&rv))?;
        self.shared.widenings.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The cache's objects `selector` selects, each as unchanged. Without the cache's keys
    /// ([`known_objects`](Self::known_objects)): [`Error::ShardSelectionChanged`], a relist.
    fn still_selected(&self, selector: &ShardSelector) -> Result<Vec<Listed<K>>, Error> {
        let Some(known) = &self.known else {
            return Err(Error::ShardSelectionChanged);
        };
        Ok(known
            .list_keys()
            .into_iter()
            .filter(|key| {
                known
                    .get_shared(key.as_str())
                    .or_else(|| known.get_by_key(key.as_str()))
                    .is_some_and(|o| selector.matches(&*o))
            })
            .map(|key| Listed::Unchanged(Unchanged::new(key, Arc::clone(known))))
            .collect())
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
                () = self.sleep_until_opt(next) => {
                    self.resync_now()?;
                    resync.rearm(self.clock.now());
                }
            }
        }
    }

    /// Sleeps until `t` on the reflector's clock; never, without a `t`.
    async fn sleep_until_opt(&self, t: Option<Instant>) {
        match t {
            Some(t) => self.clock.sleep_until(t).await,
            None => std::future::pending().await,
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

fn rv_of<K: MetaObject>(o: &K) -> String {
    o.object_resource_version().unwrap_or_default().to_owned()
}

/// Far enough away to stand for "never" in a timer that is switched off.
const NEVER: Duration = Duration::from_secs(365 * 24 * 60 * 60);

struct WatchSummary {
    events: u64,
    elapsed: Duration,
    /// It ended as the shard selection gained shards, which were listed: not a short watch.
    widened: bool,
}

struct ResyncTimer {
    period: Option<Duration>,
    next: Option<Instant>,
}

impl ResyncTimer {
    fn new(period: Option<Duration>, now: Instant) -> Self {
        Self {
            period,
            next: period.map(|p| now + p),
        }
    }

    fn rearm(&mut self, now: Instant) {
        self.next = self.period.map(|p| now + p);
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
            // Followed before any transform (see `watch`).
            Self::Shard(_) => return Err(Error::ShardSelectionChanged),
        })
    }
}
