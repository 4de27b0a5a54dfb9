//! The streaming list (`sendInitialEvents`, client-go's `watchList`): the initial events
//! into a temporary store, the sink replaced at the end bookmark, and the same watch handed on.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
#[cfg(doc)]
use kinformer_core::ListPart;
use kinformer_core::{ErrorChain, Listed, MetaObject, ObjectKey, Sink};
use tracing::Instrument;

use super::Reflector;
use super::run_state::RunState;
use super::temp_store::TempStore;
use super::watch::{VERY_SHORT_WATCH, WATCH_GRACE};
use crate::backoff::random_watch_timeout;
use crate::{Error, ListerWatcher, WatchEvent, WatchOptions, WatchStream};

/// How many objects of a streaming list the reflector hands to its sink at a time (a
/// [`ListPart`]; a paged list goes a page at a time). Small, because with
/// [`pace`](Reflector::pace) about two parts of decoded objects are in flight at once,
/// and a whole decoded pod is tens of KB; large enough that handing a part on (a lock, a
/// wake-up) costs nothing beside decoding it.
pub const STREAMED_PART: usize = 100;
/// How often a streaming list that has not reached its end bookmark says so.
const END_BOOKMARK_WARNING: Duration = Duration::from_secs(10);

impl<K, L, S> Reflector<K, L, S>
where
    K: MetaObject + Send + Sync + 'static,
    L: ListerWatcher<K>,
    S: Sink<K>,
{
    /// The streaming list (client-go's `watchList`): collects the initial events into a
    /// temporary store and replaces the sink at the `k8s.io/initial-events-end`
    /// bookmark, then hands the same watch on.
    pub(super) async fn stream_list(
        &self,
        st: &mut RunState,
    ) -> Result<(WatchStream<K>, Instant), Error> {
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
                let start = self.clock.now();
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
                // Two timers for the whole list, not two per event.
                let mut timeout = self.clock.sleep_until(deadline);
                let mut warning = self.clock.sleep_until(next_warning);
                let failure = loop {
                    let item = tokio::select! {
                        biased;
                        () = &mut timeout => None,
                        () = &mut warning => {
                            let waited = self.clock.now().saturating_duration_since(start);
                            tracing::warn!(events, waited_s = waited.as_secs(),
                                "streaming list: still no k8s.io/initial-events-end bookmark");
                            next_warning += END_BOOKMARK_WARNING;
                            warning = self.clock.sleep_until(next_warning);
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
                        // A transform that refuses an object fails a list, as the
                        // reflector's own transform does (a lister-watcher may run one).
                        Some(Err(e @ Error::Transform { .. })) => break Some(e),
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
                                Ok(o) if st.whole_lists => self.list_item(o).lightened(),
                                Ok(o) => self.list_item(o),
                                Err(e) => break Some(e),
                            };
                            match temp.put(o, |o| self.key_of(o)) {
                                Ok(true) => {}
                                Ok(false) => break Some(Error::handed_twice()),
                                Err(e) => {
                                    let e = Error::InvalidObject(e);
                                    tracing::warn!(error = %ErrorChain(&e), "skipping an object of the streaming list");
                                    self.report(&e);
                                }
                            }
                            if temp.len() >= STREAMED_PART && !st.whole_lists {
                                let starts = !temp.handed_any();
                                self.hand_over(temp.take_part(), starts, None)?;
                                self.paced().await;
                            }
                        }
                        WatchEvent::Deleted(o) => {
                            if !temp.remove(&o, |o| self.key_of(o)) {
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
                            st.whole_lists = false;
                            st.set_last_sync(&self.shared, b.resource_version);
                            self.shared.synced_once();
                            st.backoff.succeeded();
                            return Ok((stream, deadline));
                        }
                        WatchEvent::Bookmark(_) => {}
                        // The list in progress cannot follow the selection: list again.
                        WatchEvent::Shard(_) => break Some(Error::ShardSelectionChanged),
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
            let delay = st.backoff.next_delay(self.clock.now(), e.is_unreachable());
            tracing::info!(error = %ErrorChain(&e), delay_ms = delay.as_millis() as u64, "streaming list failed: backing off");
            self.clock.sleep(delay).await;
            None
        } else if e.is_expired() || e.is_too_large_resource_version() {
            tracing::info!(error = %ErrorChain(&e), "resourceVersion unavailable: streaming at \"\" (consistent read)");
            st.rv_unavailable = true;
            None
        } else {
            Some(e)
        }
    }
}
