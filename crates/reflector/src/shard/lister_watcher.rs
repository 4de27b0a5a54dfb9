//! The sharded lister-watcher: sends the shard selector with every list and watch, and keeps
//! only the shard's objects whatever the server did with it.

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use kinformer_core::BoxFuture;
use kinformer_core::MetaObject;

use tokio::sync::watch;

use super::ShardSelector;
use super::selection::{Selected, ShardSelection};
#[cfg(doc)]
use crate::Undecodable;
use crate::{
    Bookmark, Error, ListOptions, ListPage, ListerWatcher, ShardChange, WatchEvent, WatchOptions,
    WatchStream,
};

/// How a [`ShardedListerWatcher`] has found the server so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardFiltering {
    /// Nothing seen yet that tells.
    Unknown,
    /// The server applied the selector: a list page said so in `metadata.shardInfo`, and
    /// nothing outside the shard arrived.
    Server,
    /// The server ignored the selector (a list without `shardInfo`, or an object outside
    /// the shard): objects are filtered on the client.
    Client,
}

/// A [`ListerWatcher`] of one shard: sends `shardSelector` with every list and watch of the
/// lister-watcher it wraps, and keeps only the objects of the shard, whatever the server
/// sent.
///
/// A server that applied the selector says so in each list page's `metadata.shardInfo`
/// ([`ListPage::shard_selector`]), and sends only the shard's objects. A server with the
/// feature gate `ShardedListAndWatch` off (the default in 1.36), or older, ignores the
/// parameter and sends everything; then this filters every list page and every watch event
/// with the same hash and bounds, and says so once in the log; once it knows, a page asks
/// such a server for as many objects as hold the page size of the shard on average (at most
/// 16 times it), since most of a page is dropped. Filtering always runs, so a
/// shard's cache holds exactly its objects either way (for a server that applied the
/// selector it drops nothing and costs one hash of the uid or namespace per object).
/// Objects that do not decode ([`Undecodable`]) are filtered too, by their namespace or
/// uid, so that each is reported by its own shard only.
/// [`filtering`](Self::filtering) tells which case this is. A streaming list (watch list)
/// has no `metadata`: before the first one, while it does not know yet, this lists one
/// object (a consistent read with `limit=1`) to ask.
///
/// The shard key of an object (its uid or namespace) never changes, so an object never
/// moves between shards: a watch never needs to turn an update into a delete.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_reflector::fake::FakeListerWatcher;
/// use kinformer_reflector::{ShardKey, ShardSelector, ShardedListerWatcher};
///
/// // Shard 0 of 4 by uid, over any lister-watcher (kinformer-kube's `KubeListerWatcher`
/// // has `.sharded(shard)` for the same).
/// let shard = ShardSelector::index_of(ShardKey::Uid, 0, 4)?;
/// let pods = ShardedListerWatcher::new(FakeListerWatcher::<Pod>::new(), shard);
/// # let _ = pods;
/// # Ok::<(), kinformer_reflector::Error>(())
/// ```
pub struct ShardedListerWatcher<L> {
    inner: L,
    selection: ShardSelection,
    /// The generation of the selection the last list started with (the one at creation
    /// before the first): a later page or a watch under another generation must relist.
    listed: Arc<AtomicU64>,
    /// The last gain a watch reported ([`ShardChange::Widened`]): the generation
    /// of the selection then, and what it added. A list of that part alone is a list of
    /// that generation.
    widened: Arc<Mutex<Option<(u64, ShardSelector)>>>,
    state: Arc<AtomicU8>,
}

const UNKNOWN: u8 = 0;
const SERVER: u8 = 1;
const CLIENT: u8 = 2;

impl<L: Clone> Clone for ShardedListerWatcher<L> {
    fn clone(&self) -> Self {
        self.sharing(self.inner.clone())
    }
}

impl<L> fmt::Debug for ShardedListerWatcher<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardedListerWatcher")
            .field("selection", &self.selection)
            .field("filtering", &self.filtering())
            .finish_non_exhaustive()
    }
}

impl<L> ShardedListerWatcher<L> {
    /// The shard of `inner`'s objects that `selector` selects.
    pub fn new(inner: L, selector: ShardSelector) -> Self {
        Self::selected(inner, ShardSelection::new(Some(selector)))
    }

    /// The objects of `inner` that `selection` selects, whatever it selects at the time:
    /// a change that selects anything new ends the watch with
    /// [`ShardChange::Widened`], and the reflector lists only what is new (options
    /// with that part as their [`shard`](ListOptions::shard)); one that only selects less
    /// goes on under the narrower selector ([`ShardChange::Narrowed`]; see
    /// [`ShardSelection`]).
    pub fn selected(inner: L, selection: ShardSelection) -> Self {
        Self {
            inner,
            listed: Arc::new(AtomicU64::new(selection.generation())),
            widened: Arc::new(Mutex::new(None)),
            selection,
            state: Arc::new(AtomicU8::new(UNKNOWN)),
        }
    }

    /// The selector in force (`None`: nothing is selected).
    pub fn selector(&self) -> Option<ShardSelector> {
        self.selection.get()
    }

    /// The selection this lister-watcher follows.
    pub fn selection(&self) -> &ShardSelection {
        &self.selection
    }

    /// Whether the server applies the selector, as far as seen so far (shared by clones).
    pub fn filtering(&self) -> ShardFiltering {
        ShardFilteringHandle(Arc::clone(&self.state)).get()
    }

    /// The same shard of another lister-watcher's objects (the same source decoded another
    /// way), sharing the selection and what is seen of the server's filtering with this one.
    pub fn sharing<M>(&self, inner: M) -> ShardedListerWatcher<M> {
        ShardedListerWatcher {
            inner,
            selection: self.selection.clone(),
            listed: Arc::clone(&self.listed),
            widened: Arc::clone(&self.widened),
            state: Arc::clone(&self.state),
        }
    }

    /// A handle that reads [`filtering`](Self::filtering) after this lister-watcher has
    /// been handed to an informer.
    pub fn filtering_handle(&self) -> ShardFilteringHandle {
        ShardFilteringHandle(Arc::clone(&self.state))
    }
}

/// Reads a [`ShardedListerWatcher`]'s [`ShardFiltering`] from elsewhere (cheap to clone).
#[derive(Clone, Debug)]
pub struct ShardFilteringHandle(Arc<AtomicU8>);

impl ShardFilteringHandle {
    /// As [`ShardedListerWatcher::filtering`].
    pub fn get(&self) -> ShardFiltering {
        match self.0.load(Ordering::Relaxed) {
            SERVER => ShardFiltering::Server,
            CLIENT => ShardFiltering::Client,
            _ => ShardFiltering::Unknown,
        }
    }
}

/// Notes that the server did not filter, and says so the first time.
/// At most this many times the page size asked for, when the server ignores the selector.
const MAX_PAGE_SPREAD: u32 = 16;

/// The page size to ask a server that ignores the selector for: a page of everything, most of
/// it dropped here, so as many objects as hold `limit` of `selector`'s on average (at most
/// [`MAX_PAGE_SPREAD`] times `limit`). A list of a shard then takes about as many round trips,
/// and keeps about as many objects per page, as from a server that applies the selector;
/// at `limit` per page, the list of a gained shard took 200 round trips for 100,000 pods.
fn client_filtered_limit(limit: u32, selector: &ShardSelector) -> u32 {
    let spread = u32::try_from(selector.spread()).unwrap_or(u32::MAX);
    limit.saturating_mul(spread.clamp(1, MAX_PAGE_SPREAD))
}

fn server_ignored(state: &AtomicU8, wire: &str, why: &'static str) {
    if state.swap(CLIENT, Ordering::Relaxed) != CLIENT {
        tracing::warn!(
            shard_selector = wire,
            why,
            "the API server did not apply the shard selector (feature gate ShardedListAndWatch off, or a server older than 1.36): every object is sent and this shard's are kept on the client"
        );
    }
}

impl<L> ShardedListerWatcher<L> {
    /// A streaming list carries no `shardInfo`, nor does any watch event: before the first
    /// one, a list of one object asks the server whether it applies the selector. A
    /// consistent read (resourceVersion `""`), because the watch cache answers
    /// resourceVersion `0` with the whole shard whatever the limit. Only for
    /// [`filtering`](Self::filtering) and the log: a failed probe changes nothing, as
    /// filtering runs either way.
    async fn probe<K>(&self, selector: &ShardSelector)
    where
        K: MetaObject + Send + Sync + 'static,
        L: ListerWatcher<K>,
    {
        if let Err(e) = self
            .list_page(&ListOptions::new("", Some(1)), selector)
            .await
        {
            tracing::debug!(error = %e, "probing whether the API server applies the shard selector failed");
        }
    }

    /// Lists under the selection in force; the continue page of a list that began under
    /// another one fails with [`Error::ShardSelectionChanged`]. Options with a shard
    /// selector list only that part: what the watch said the selection gained
    /// ([`ShardChange::Widened`]), while the selection is still the one that
    /// gained it (else [`Error::ShardSelectionChanged`]).
    async fn list_selected<K>(&self, options: &ListOptions) -> Result<ListPage<K>, Error>
    where
        K: MetaObject + Send + Sync + 'static,
        L: ListerWatcher<K>,
    {
        let selected = self.selection.selected();
        if options.continue_token.is_none() {
            if let Some(part) = &options.shard {
                let widened = self.widened.lock().unwrap_or_else(PoisonError::into_inner);
                if widened.as_ref() != Some(&(selected.generation, part.clone())) {
                    return Err(Error::ShardSelectionChanged);
                }
            }
            self.listed.store(selected.generation, Ordering::Release);
        } else if self.listed.load(Ordering::Acquire) != selected.generation {
            return Err(Error::ShardSelectionChanged);
        }
        match (&options.shard, &selected.selector) {
            (Some(part), _) | (None, Some(part)) => self.list_page(options, part).await,
            (None, None) => self.list_nothing().await,
        }
    }

    /// Nothing is selected: one object is listed (a consistent read, which even the watch
    /// cache limits) for a resourceVersion to watch from, and dropped.
    async fn list_nothing<K>(&self) -> Result<ListPage<K>, Error>
    where
        K: MetaObject + Send + Sync + 'static,
        L: ListerWatcher<K>,
    {
        let mut options = ListOptions::new("", Some(1));
        options.shard = None;
        let mut page = self.inner.list(&options).await?;
        page.items.clear();
        page.undecodable.clear();
        page.continue_token = None;
        page.shard_selector = None;
        Ok(page)
    }

    async fn list_page<K>(
        &self,
        options: &ListOptions,
        selector: &ShardSelector,
    ) -> Result<ListPage<K>, Error>
    where
        K: MetaObject + Send + Sync + 'static,
        L: ListerWatcher<K>,
    {
        let wire = selector.to_string();
        let mut options = options.clone();
        options.shard = Some(selector.clone());
        if self.state.load(Ordering::Relaxed) == CLIENT {
            options.limit = options
                .limit
                .map(|limit| client_filtered_limit(limit, selector));
        }
        let mut page = self.inner.list(&options).await?;
        let before = page.items.len() + page.undecodable.len();
        page.items.retain(|o| selector.matches(&**o));
        // Another shard's object that does not decode is that shard's to report.
        page.undecodable
            .retain(|u| selector.may_match_undecodable(u));
        let dropped = before - page.items.len() - page.undecodable.len();
        match page.shard_selector.as_deref() {
            Some(echo) if echo == wire && dropped == 0 => {
                // Never back from Client: one page that said otherwise is enough to know.
                let _ = self.state.compare_exchange(
                    UNKNOWN,
                    SERVER,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            Some(echo) if echo != wire => {
                tracing::warn!(
                    sent = wire,
                    echoed = echo,
                    "the API server echoed another shard selector than the one sent; filtering on the client"
                );
                server_ignored(&self.state, &wire, "another selector echoed");
            }
            Some(_) => server_ignored(&self.state, &wire, "objects outside the shard"),
            None => server_ignored(&self.state, &wire, "no shardInfo in a list"),
        }
        Ok(page)
    }

    /// Watches under the selection in force, following it as it narrows, until it changes
    /// otherwise.
    async fn watch_selected<K>(&self, options: &WatchOptions) -> Result<WatchStream<K>, Error>
    where
        K: MetaObject + Send + Sync + 'static,
        L: ListerWatcher<K>,
    {
        let mut changes = self.selection.subscribe();
        let selected = changes.borrow_and_update().clone();
        if options.send_initial_events {
            // A streaming list is a list: it starts a generation.
            self.listed.store(selected.generation, Ordering::Release);
        } else if self.listed.load(Ordering::Acquire) != selected.generation {
            // The selection changed since the list this watch would follow: objects of a
            // new shard were never listed.
            return Err(Error::ShardSelectionChanged);
        }
        let generation = selected.generation;
        let (events, sent): (WatchStream<K>, _) = match selected.selector {
            // Nothing to watch: a stream that only waits for the next selection, after the
            // end of an empty streaming list (at a version listed for it) if one was asked.
            None if options.send_initial_events => {
                let listed: ListPage<K> = self.list_nothing().await?;
                let end = Bookmark::new(listed.resource_version, true);
                let events =
                    futures::stream::once(futures::future::ready(Ok(WatchEvent::Bookmark(end))))
                        .chain(futures::stream::pending());
                (Box::pin(events), None)
            }
            None => (Box::pin(futures::stream::pending()), None),
            Some(selector) => {
                let mut options = options.clone();
                options.shard = Some(selector.clone());
                if options.send_initial_events && self.state.load(Ordering::Relaxed) == UNKNOWN {
                    self.probe::<K>(&selector).await;
                }
                let stream = self.inner.watch(&options).await?;
                let wire = Arc::<str>::from(selector.to_string());
                (stream, Some((selector, wire)))
            }
        };
        Ok(Following {
            kept: sent.as_ref().map(|(selector, _)| selector.clone()),
            sent,
            events,
            changes: Some(changes),
            generation,
            listed: Arc::clone(&self.listed),
            widened: Arc::clone(&self.widened),
            state: Arc::clone(&self.state),
        }
        .into_stream())
    }
}

/// A watch under a selection, as it follows the selection's changes.
struct Following<K> {
    events: WatchStream<K>,
    /// `None` once the selection's owner is gone: it changes no more.
    changes: Option<watch::Receiver<Selected>>,
    /// The selector the watch was opened with, and its wire form: a server that applies
    /// it sends nothing outside it.
    sent: Option<(ShardSelector, Arc<str>)>,
    /// What is passed on: the selector sent, or a narrower one since.
    kept: Option<ShardSelector>,
    /// The generation of the selection this watch follows.
    generation: u64,
    listed: Arc<AtomicU64>,
    widened: Arc<Mutex<Option<(u64, ShardSelector)>>>,
    state: Arc<AtomicU8>,
}

/// How a watch follows a change of its selection.
enum Follow {
    /// The same selector again (a change and back): nothing to do.
    Same,
    /// A narrower one: [`ShardChange::Narrowed`], and the watch goes on.
    Narrower(ShardSelector),
    /// One that adds to what was kept: [`ShardChange::Widened`], the end.
    Wider {
        selector: ShardSelector,
        added: ShardSelector,
    },
    /// Nothing selected now, or a list under another generation since:
    /// [`ShardChange::Relist`], the end.
    Relist,
}

impl<K: MetaObject + Send + 'static> Following<K> {
    /// The events of the kept selector's objects, until the selection changes in a way
    /// the watch cannot follow. A narrowing (every object selected now was selected
    /// before) is followed: [`ShardChange::Narrowed`], and the watch goes on with
    /// the narrower selector, counting as listed under the new generation (nothing new
    /// needs listing). A change that selects something new ends the watch with
    /// [`ShardChange::Widened`], saying what is new, for the reflector to list
    /// only that; a change to nothing, with [`ShardChange::Relist`].
    fn into_stream(self) -> WatchStream<K> {
        Box::pin(futures::stream::unfold(
            Some(self),
            |following| async move {
                let mut f = following?;
                loop {
                    let changed = async {
                        match f.changes.as_mut() {
                            Some(rx) => rx.changed().await.is_ok(),
                            None => futures::future::pending().await,
                        }
                    };
                    tokio::select! {
                        biased;
                        alive = changed => {
                            let Some(rx) = f.changes.as_mut().filter(|_| alive) else {
                                // The owner is gone: the selection stays as it is.
                                f.changes = None;
                                continue;
                            };
                            let now = rx.borrow_and_update().clone();
                            let change = match f.follow(now) {
                                Follow::Same => continue,
                                Follow::Narrower(narrower) => ShardChange::Narrowed(narrower),
                                Follow::Wider { selector, added } => ShardChange::Widened { selector, added },
                                Follow::Relist => ShardChange::Relist,
                            };
                            // Only a narrowing lets the watch go on.
                            let next = matches!(change, ShardChange::Narrowed(_)).then_some(f);
                            return Some((Ok(WatchEvent::Shard(change)), next));
                        }
                        item = f.events.next() => {
                            let item = item?;
                            if f.keeps(&item) {
                                return Some((item, Some(f)));
                            }
                        }
                    }
                }
            },
        ))
    }

    /// How the watch follows the selection `now`. A narrowing moves the watch to the new
    /// generation (unless a list under another one was made since: relist); a gain
    /// records what was added, for the list of it alone.
    fn follow(&mut self, now: Selected) -> Follow {
        let Some(new) = now.selector else {
            return Follow::Relist;
        };
        let Some(kept) = self.kept.as_ref().filter(|kept| kept.covers(&new)) else {
            let added = match &self.kept {
                Some(kept) => new.without(kept),
                None => Some(new.clone()),
            };
            let Some(added) = added else {
                // Covered, though not range by range: nothing new, but list to be sure.
                return Follow::Relist;
            };
            *self.widened.lock().unwrap_or_else(PoisonError::into_inner) =
                Some((now.generation, added.clone()));
            return Follow::Wider {
                selector: new,
                added,
            };
        };
        if self
            .listed
            .compare_exchange(
                self.generation,
                now.generation,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            return Follow::Relist;
        }
        self.generation = now.generation;
        if *kept == new {
            return Follow::Same;
        }
        self.kept = Some(new.clone());
        Follow::Narrower(new)
    }

    /// Whether an item is passed on: bookmarks and errors are; an object only if the kept
    /// selector selects it. One outside the selector sent tells that the server ignored it.
    fn keeps(&self, item: &Result<WatchEvent<K>, Error>) -> bool {
        let (Some((sent, wire)), Some(kept)) = (&self.sent, &self.kept) else {
            return true;
        };
        let (sent_has, kept_has) = match item {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => {
                (sent.matches(o), kept.matches(o))
            }
            Err(Error::Undecodable { object, .. }) => (
                sent.may_match_undecodable(object),
                kept.may_match_undecodable(object),
            ),
            Ok(WatchEvent::Bookmark(_) | WatchEvent::Shard(_)) | Err(_) => return true,
        };
        if !sent_has {
            server_ignored(&self.state, wire, "a watch event outside the shard");
        }
        kept_has
    }
}

impl<K, L> ListerWatcher<K> for ShardedListerWatcher<L>
where
    K: MetaObject + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    fn list<'a>(&'a self, options: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<K>, Error>> {
        Box::pin(self.list_selected(options))
    }

    fn watch<'a>(
        &'a self,
        options: &'a WatchOptions,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        Box::pin(self.watch_selected(options))
    }

    fn supports_watch_list(&self) -> bool {
        self.inner.supports_watch_list()
    }
}

#[cfg(test)]
mod tests;
