//! The sharded lister-watcher: sends the shard selector with every list and watch, and keeps
//! only the shard's objects whatever the server did with it.

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use futures::future::BoxFuture;
use kinformer_core::MetaObject;

use tokio::sync::watch;

use super::ShardSelector;
use super::selection::{Selected, ShardSelection};
#[cfg(doc)]
use crate::Undecodable;
use crate::{
    Bookmark, Error, ListOptions, ListPage, ListerWatcher, WatchEvent, WatchOptions, WatchStream,
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
/// ```no_run
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_reflector::{KubeListerWatcher, ShardKey, ShardSelector, reflector_client};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = reflector_client(kube::Config::infer().await?)?;
/// let shard = ShardSelector::index_of(ShardKey::Uid, 0, 4)?;
/// let pods = KubeListerWatcher::new(kube::Api::<Pod>::all(client)).sharded(shard);
/// # let _ = pods;
/// # Ok(())
/// # }
/// ```
pub struct ShardedListerWatcher<L> {
    inner: L,
    selection: ShardSelection,
    /// The generation of the selection the last list started with (the one at creation
    /// before the first): a later page or a watch under another generation must relist.
    listed: Arc<AtomicU64>,
    /// The last gain a watch reported ([`Error::ShardSelectionWidened`]): the generation
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
    /// [`Error::ShardSelectionWidened`], and the reflector lists only what is new (options
    /// with that part as their [`shard`](ListOptions::shard)); one that only selects less
    /// goes on under the narrower selector ([`Error::ShardSelectionNarrowed`]; see
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

#[cfg(feature = "kube")]
impl<K> crate::KubeListerWatcher<K> {
    /// This lister-watcher, restricted to one shard: see [`ShardedListerWatcher`].
    pub fn sharded(self, selector: ShardSelector) -> ShardedListerWatcher<Self> {
        ShardedListerWatcher::new(self, selector)
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
/// with `limit` per page, a gained shard of 12 took 200 round trips for 100,000 pods.
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
    /// ([`Error::ShardSelectionWidened`]), while the selection is still the one that
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
    /// A narrower one: [`Error::ShardSelectionNarrowed`], and the watch goes on.
    Narrower(ShardSelector),
    /// One that adds to what was kept: [`Error::ShardSelectionWidened`], the end.
    Wider {
        selector: ShardSelector,
        added: ShardSelector,
    },
    /// Nothing selected now, or a list under another generation since:
    /// [`Error::ShardSelectionChanged`], the end.
    Relist,
}

impl<K: MetaObject + Send + 'static> Following<K> {
    /// The events of the kept selector's objects, until the selection changes in a way
    /// the watch cannot follow. A narrowing (every object selected now was selected
    /// before) is followed: [`Error::ShardSelectionNarrowed`], and the watch goes on with
    /// the narrower selector, counting as listed under the new generation (nothing new
    /// needs listing). A change that selects something new ends the watch with
    /// [`Error::ShardSelectionWidened`], saying what is new, for the reflector to list
    /// only that; a change to nothing, with [`Error::ShardSelectionChanged`].
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
                            match f.follow(now) {
                                Follow::Same => continue,
                                Follow::Narrower(narrower) => {
                                    return Some((Err(Error::ShardSelectionNarrowed(narrower)), Some(f)));
                                }
                                Follow::Wider { selector, added } => {
                                    return Some((Err(Error::ShardSelectionWidened { selector, added }), None));
                                }
                                Follow::Relist => return Some((Err(Error::ShardSelectionChanged), None)),
                            }
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
            Ok(WatchEvent::Bookmark(_)) | Err(_) => return true,
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
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fake::{FakeListerWatcher, watch_channel};
    use crate::{Bookmark, ShardKey, ShardRange};

    /// An object with a uid and a namespace.
    #[derive(Clone, Debug, PartialEq)]
    struct Obj {
        uid: String,
        ns: &'static str,
    }

    impl MetaObject for Obj {
        fn object_name(&self) -> Option<&str> {
            Some(&self.uid)
        }
        fn object_namespace(&self) -> Option<&str> {
            Some(self.ns)
        }
        fn object_resource_version(&self) -> Option<&str> {
            None
        }
        fn object_uid(&self) -> Option<&str> {
            Some(&self.uid)
        }
    }

    /// `n` objects with random uids (as the API server's: sequential strings differ only
    /// in their last bytes, which FNV-1a spreads poorly over the top bits).
    fn objs(n: usize) -> Vec<Obj> {
        let mut rng = fastrand::Rng::with_seed(3);
        (0..n)
            .map(|i| Obj {
                uid: (0..32).map(|_| rng.digit(16)).collect(),
                ns: if i % 2 == 0 { "a" } else { "default" },
            })
            .collect()
    }

    fn uids(items: &[Arc<Obj>]) -> Vec<String> {
        items.iter().map(|o| o.uid.clone()).collect()
    }

    #[tokio::test]
    async fn a_list_the_server_filtered_passes_and_says_so_one_that_it_did_not_is_filtered_here() {
        let shard = ShardSelector::index_of(ShardKey::Uid, 1, 3).unwrap();
        let mine: Vec<Obj> = objs(60).into_iter().filter(|o| shard.matches(o)).collect();
        assert!(!mine.is_empty() && mine.len() < 60);

        // A gated server: only the shard, and shardInfo echoing the selector.
        let fake = FakeListerWatcher::new();
        let (wire, answer) = (shard.to_string(), mine.clone());
        fake.on_list(move |_| Ok(ListPage::new(answer.clone(), "5").with_shard_info(wire.clone())));
        let lw = ShardedListerWatcher::new(fake.clone(), shard.clone());
        assert_eq!(lw.filtering(), ShardFiltering::Unknown);
        let page = lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
        assert_eq!(page.items.len(), mine.len());
        assert_eq!(lw.filtering(), ShardFiltering::Server);
        assert_eq!(fake.list_calls()[0].shard.as_ref(), Some(&shard));

        // A server without the gate: everything, no shardInfo.
        let fake = FakeListerWatcher::new();
        fake.on_list(|_| Ok(ListPage::new(objs(60), "5")));
        let lw = ShardedListerWatcher::new(fake.clone(), shard.clone());
        let page = lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
        let want: Vec<String> = mine.iter().map(|o| o.uid.clone()).collect();
        assert_eq!(uids(&page.items), want);
        assert_eq!(lw.filtering(), ShardFiltering::Client);
        // A later page cannot turn it back.
        let fake2 = fake.clone();
        fake2.on_list(move |_| {
            Ok(ListPage::new(Vec::new(), "6").with_shard_info(shard.to_string()))
        });
        lw.list(&ListOptions::new("6", None)).await.unwrap();
        assert_eq!(lw.filtering_handle().get(), ShardFiltering::Client);
    }

    #[tokio::test]
    async fn without_the_gate_a_page_asks_for_as_many_objects_as_hold_a_page_of_the_shard() {
        let limits = |fake: &FakeListerWatcher<Obj>| -> Vec<Option<u32>> {
            fake.list_calls().iter().map(|o| o.limit).collect()
        };
        // A server without the gate: the first page tells, the next ones ask for more.
        for (shard, want) in [
            (ShardSelector::index_of(ShardKey::Uid, 1, 3).unwrap(), 1500),
            // Two ranges of 12: a sixth of the space.
            (
                ShardSelector::ranges(
                    ShardKey::Uid,
                    [
                        ShardRange::index_of(0, 12).unwrap(),
                        ShardRange::index_of(5, 12).unwrap(),
                    ],
                )
                .unwrap(),
                3000,
            ),
            // One of 40: at most 16 times the page.
            (ShardSelector::index_of(ShardKey::Uid, 7, 40).unwrap(), 8000),
        ] {
            let fake = FakeListerWatcher::new();
            fake.on_list(|_| Ok(ListPage::new(objs(60), "5")));
            let lw = ShardedListerWatcher::new(fake.clone(), shard);
            lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
            lw.list(&ListOptions::new("5", Some(500))).await.unwrap();
            lw.list(&ListOptions::new("5", None)).await.unwrap();
            assert_eq!(limits(&fake), [Some(500), Some(want), None]);
        }

        // A gated server: the page asked for.
        let shard = ShardSelector::index_of(ShardKey::Uid, 1, 3).unwrap();
        let mine: Vec<Obj> = objs(60).into_iter().filter(|o| shard.matches(o)).collect();
        let fake = FakeListerWatcher::new();
        let wire = shard.to_string();
        fake.on_list(move |_| Ok(ListPage::new(mine.clone(), "5").with_shard_info(wire.clone())));
        let lw = ShardedListerWatcher::new(fake.clone(), shard);
        lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
        lw.list(&ListOptions::new("5", Some(500))).await.unwrap();
        assert_eq!(limits(&fake), [Some(500), Some(500)]);
    }

    #[tokio::test]
    async fn watch_events_outside_the_shard_are_dropped_bookmarks_and_errors_pass() {
        let shard = ShardSelector::index_of(ShardKey::Namespace, 0, 2).unwrap();
        // "a" (0xaf63…) is in shard 1 of 2, "default" (0xebad…) too; "ns-07" (0x7e7e…) in 0.
        let inside = Obj {
            uid: "x".into(),
            ns: "ns-07",
        };
        let outside = Obj {
            uid: "y".into(),
            ns: "default",
        };
        let fake = FakeListerWatcher::new();
        let (tx, stream) = watch_channel();
        fake.push_watch(Ok(stream));
        let lw = ShardedListerWatcher::new(fake.clone(), shard.clone());
        let mut watch = lw
            .watch(&WatchOptions::new("5", Duration::from_secs(60)))
            .await
            .unwrap();
        assert_eq!(fake.watch_calls()[0].shard.as_ref(), Some(&shard));
        tx.send(Ok(WatchEvent::Added(outside.clone())));
        tx.send(Ok(WatchEvent::Added(inside.clone())));
        tx.send(Ok(WatchEvent::Modified(outside.clone())));
        tx.send(Ok(WatchEvent::Bookmark(Bookmark::new("9", false))));
        tx.send(Err(Error::VeryShortWatch));
        tx.send(Ok(WatchEvent::Deleted(outside)));
        tx.send(Ok(WatchEvent::Deleted(inside.clone())));
        drop(tx);
        let mut seen = Vec::new();
        while let Some(item) = watch.next().await {
            seen.push(item);
        }
        assert!(matches!(&seen[0], Ok(WatchEvent::Added(o)) if *o == inside));
        assert!(matches!(&seen[1], Ok(WatchEvent::Bookmark(b)) if b.resource_version == "9"));
        assert!(matches!(&seen[2], Err(Error::VeryShortWatch)));
        assert!(matches!(&seen[3], Ok(WatchEvent::Deleted(o)) if *o == inside));
        assert_eq!(seen.len(), 4);
        assert_eq!(lw.filtering(), ShardFiltering::Client);
    }

    #[tokio::test]
    async fn before_the_first_streaming_list_one_object_is_listed_to_learn_what_the_server_does() {
        let shard = ShardSelector::index_of(ShardKey::Uid, 0, 2).unwrap();
        let fake = FakeListerWatcher::new();
        let wire = shard.to_string();
        fake.on_list(move |_| Ok(ListPage::new(Vec::<Obj>::new(), "5").with_shard_info(&*wire)));
        let lw = ShardedListerWatcher::new(fake.clone(), shard.clone());
        let mut streaming = WatchOptions::new("", Duration::from_secs(60));
        streaming.send_initial_events = true;
        for _ in 0..2 {
            let (_tx, stream) = watch_channel::<Obj>();
            fake.push_watch(Ok(stream));
            drop(lw.watch(&streaming).await.unwrap());
        }
        // One probe, a consistent read of one object of the shard; none once known.
        let probes = fake.list_calls();
        assert_eq!(probes.len(), 1);
        assert_eq!(probes[0].resource_version, "");
        assert_eq!(probes[0].limit, Some(1));
        assert_eq!(probes[0].shard.as_ref(), Some(&shard));
        assert_eq!(lw.filtering(), ShardFiltering::Server);

        // A plain watch (after a list) never probes; nor does a failed probe fail the watch.
        let fake = FakeListerWatcher::<Obj>::new();
        fake.on_list(|_| Err(Error::VeryShortWatch));
        let lw = ShardedListerWatcher::new(fake.clone(), shard);
        let (_tx, stream) = watch_channel();
        fake.push_watch(Ok(stream));
        drop(
            lw.watch(&WatchOptions::new("5", Duration::from_secs(60)))
                .await
                .unwrap(),
        );
        assert!(fake.list_calls().is_empty());
        let (_tx, stream) = watch_channel();
        fake.push_watch(Ok(stream));
        drop(lw.watch(&streaming).await.unwrap());
        assert_eq!(fake.list_calls().len(), 1);
        assert_eq!(lw.filtering(), ShardFiltering::Unknown);
    }

    #[tokio::test]
    async fn a_selection_change_ends_the_watch_and_refuses_a_page_or_a_watch_of_the_old_one() {
        let (zero, one) = (
            ShardSelector::index_of(ShardKey::Uid, 0, 2).unwrap(),
            ShardSelector::index_of(ShardKey::Uid, 1, 2).unwrap(),
        );
        let all = objs(40);
        let fake = FakeListerWatcher::new();
        let answer = all.clone();
        fake.on_list(move |o| {
            let page = ListPage::new(answer.clone(), "5");
            Ok(if o.continue_token.is_none() {
                page.with_continue("more")
            } else {
                page
            })
        });
        let selection = ShardSelection::new(Some(zero.clone()));
        let lw = ShardedListerWatcher::selected(fake.clone(), selection.clone());

        // A list begun under shard 0 cannot go on under shard 1.
        let first = lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
        assert!(first.items.iter().all(|o| zero.matches(&**o)));
        selection.set(Some(one.clone()));
        let mut next = ListOptions::new("", Some(500));
        next.continue_token = Some("more".into());
        assert!(matches!(
            lw.list(&next).await,
            Err(Error::ShardSelectionChanged)
        ));
        // Nor can a watch follow that list: shard 1's objects were never listed.
        let watch_opts = WatchOptions::new("5", Duration::from_secs(60));
        assert!(matches!(
            lw.watch(&watch_opts).await,
            Err(Error::ShardSelectionChanged)
        ));
        assert!(fake.watch_calls().is_empty());

        // Relisted under shard 1: its objects, then a watch under it, until the next change.
        let page = lw.list(&ListOptions::new("5", Some(500))).await.unwrap();
        assert!(!page.items.is_empty() && page.items.iter().all(|o| one.matches(&**o)));
        assert_eq!(fake.list_calls().last().unwrap().shard.as_ref(), Some(&one));
        let (tx, stream) = watch_channel();
        fake.push_watch(Ok(stream));
        let mut watch = lw.watch(&watch_opts).await.unwrap();
        assert_eq!(fake.watch_calls()[0].shard.as_ref(), Some(&one));
        let (mine, other) = (
            all.iter().find(|o| one.matches(*o)).unwrap().clone(),
            all.iter().find(|o| zero.matches(*o)).unwrap().clone(),
        );
        tx.send(Ok(WatchEvent::Added(other)));
        tx.send(Ok(WatchEvent::Added(mine.clone())));
        assert!(matches!(watch.next().await, Some(Ok(WatchEvent::Added(o))) if o == mine));
        selection.set(Some(one.clone())); // the same selector: no change
        selection.set(None);
        assert!(matches!(
            watch.next().await,
            Some(Err(Error::ShardSelectionChanged))
        ));
        assert!(watch.next().await.is_none(), "the watch ends at the change");
    }

    #[tokio::test]
    async fn a_narrowing_goes_on_under_the_narrower_selector_and_a_gain_ends_the_watch_saying_what_is_new()
     {
        let quarter = |i| ShardSelector::index_of(ShardKey::Uid, i, 4).unwrap();
        let half = ShardSelector::range(
            ShardKey::Uid,
            ShardRange::new(
                quarter(0).range_list()[0].start(),
                quarter(1).range_list()[0].end(),
            )
            .unwrap(),
        );
        let all = objs(80);
        let of = |q: u32| all.iter().find(|o| quarter(q).matches(*o)).unwrap().clone();
        let fake = FakeListerWatcher::new();
        let wire = half.to_string();
        fake.on_list(move |_| Ok(ListPage::new(Vec::<Obj>::new(), "5").with_shard_info(&*wire)));
        let selection = ShardSelection::new(Some(half.clone()));
        let lw = ShardedListerWatcher::selected(fake.clone(), selection.clone());
        lw.list(&ListOptions::new("0", None)).await.unwrap();
        assert_eq!(lw.filtering(), ShardFiltering::Server);
        let (tx, stream) = watch_channel();
        fake.push_watch(Ok(stream));
        let watch_opts = WatchOptions::new("5", Duration::from_secs(60));
        let mut watch = lw.watch(&watch_opts).await.unwrap();

        tx.send(Ok(WatchEvent::Added(of(1))));
        assert!(matches!(watch.next().await, Some(Ok(WatchEvent::Added(o))) if o == of(1)));
        // Shard 1 given up: the watch says so and goes on with shard 0 alone.
        selection.set(Some(quarter(0)));
        assert!(matches!(
            watch.next().await,
            Some(Err(Error::ShardSelectionNarrowed(s))) if s == quarter(0)
        ));
        // The server still sends shard 1 (the selector it was given): dropped here, and
        // that is no sign of a server that ignores selectors.
        tx.send(Ok(WatchEvent::Modified(of(1))));
        tx.send(Ok(WatchEvent::Added(of(0))));
        assert!(matches!(watch.next().await, Some(Ok(WatchEvent::Added(o))) if o == of(0)));
        assert_eq!(lw.filtering(), ShardFiltering::Server);
        // A change and back is no change.
        selection.set(Some(quarter(3)));
        selection.set(Some(quarter(0)));
        tx.send(Ok(WatchEvent::Deleted(of(0))));
        assert!(matches!(watch.next().await, Some(Ok(WatchEvent::Deleted(o))) if o == of(0)));
        // Nothing new needs listing: a watch after this one starts without a relist.
        drop(watch);
        let (tx, stream) = watch_channel();
        fake.push_watch(Ok(stream));
        let mut watch = lw.watch(&watch_opts).await.unwrap();
        assert_eq!(fake.watch_calls()[1].shard.as_ref(), Some(&quarter(0)));
        assert_eq!(fake.list_calls().len(), 1);
        // Shard 2 taken: its objects were never listed, the watch ends saying what is new.
        let two = ShardSelector::ranges(
            ShardKey::Uid,
            [quarter(0).range_list()[0], quarter(2).range_list()[0]],
        )
        .unwrap();
        selection.set(Some(two.clone()));
        tx.send(Ok(WatchEvent::Added(of(0))));
        assert!(matches!(
            watch.next().await,
            Some(Err(Error::ShardSelectionWidened { selector, added })) if selector == two && added == quarter(2)
        ));
        assert!(watch.next().await.is_none());
        // A list of another part is refused; a list of what is new is a list of the new
        // selection, and a watch of it follows without a relist.
        let mut part = ListOptions::new("6", None);
        part.exact = true;
        part.shard = Some(quarter(3));
        assert!(matches!(
            lw.list(&part).await,
            Err(Error::ShardSelectionChanged)
        ));
        part.shard = Some(quarter(2));
        lw.list(&part).await.unwrap();
        let call = fake.list_calls()[1].clone();
        assert_eq!(
            (call.resource_version.as_str(), call.exact, call.shard),
            ("6", true, Some(quarter(2)))
        );
        let (_tx, stream) = watch_channel::<Obj>();
        fake.push_watch(Ok(stream));
        let mut watch = lw
            .watch(&WatchOptions::new("6", Duration::from_secs(60)))
            .await
            .unwrap();
        assert_eq!(fake.watch_calls()[2].shard.as_ref(), Some(&two));
        // A narrowing to nothing ends the watch: with nothing selected nothing is watched.
        selection.set(None);
        assert!(matches!(
            watch.next().await,
            Some(Err(Error::ShardSelectionChanged))
        ));
    }

    #[tokio::test]
    async fn with_nothing_selected_one_object_is_listed_for_a_version_and_nothing_is_watched() {
        let fake = FakeListerWatcher::new();
        fake.on_list(|_| Ok(ListPage::new(objs(1), "7").with_continue("more")));
        let selection = ShardSelection::new(None);
        let lw = ShardedListerWatcher::selected(fake.clone(), selection.clone());
        let page = lw.list(&ListOptions::new("0", Some(500))).await.unwrap();
        assert!(page.items.is_empty());
        assert_eq!(page.resource_version, "7");
        assert_eq!(page.continue_token, None, "one page");
        let call = &fake.list_calls()[0];
        assert_eq!(
            (call.resource_version.as_str(), call.limit, &call.shard),
            ("", Some(1), &None)
        );

        let mut watch = lw
            .watch(&WatchOptions::new("7", Duration::from_secs(60)))
            .await
            .unwrap();
        assert!(fake.watch_calls().is_empty(), "no watch is opened");
        let waiting = tokio::time::timeout(Duration::from_millis(50), watch.next()).await;
        assert!(waiting.is_err(), "the watch waits for a selection");
        let half = ShardSelector::index_of(ShardKey::Uid, 0, 2).unwrap();
        selection.set(Some(half.clone()));
        assert!(matches!(
            watch.next().await,
            Some(Err(Error::ShardSelectionWidened { selector, added })) if selector == half && added == half
        ));

        // A streaming list of nothing: its end at once, at a version listed for it.
        selection.set(None);
        let mut streaming = WatchOptions::new("", Duration::from_secs(60));
        streaming.send_initial_events = true;
        let mut watch = lw.watch(&streaming).await.unwrap();
        assert!(matches!(watch.next().await,
            Some(Ok(WatchEvent::Bookmark(b))) if b.resource_version == "7" && b.initial_events_end));
        assert!(fake.watch_calls().is_empty());
    }

    #[tokio::test]
    async fn another_shards_undecodable_objects_are_left_to_that_shard() {
        let undecodable = |ns: &str, uid: Option<&str>| {
            let u = crate::Undecodable::new(
                kinformer_core::ObjectKey::new(Some(ns), "x").unwrap(),
                "bad",
            );
            match uid {
                Some(uid) => u.with_uid(uid),
                None => u,
            }
        };
        // By namespace: "ns-07" is in shard 0 of 2, "default" in shard 1.
        let shard = ShardSelector::index_of(ShardKey::Namespace, 0, 2).unwrap();
        let fake = FakeListerWatcher::<Obj>::new();
        fake.on_list(move |_| {
            let mut page = ListPage::new(Vec::new(), "5");
            page.undecodable = vec![undecodable("ns-07", None), undecodable("default", None)];
            Ok(page)
        });
        let lw = ShardedListerWatcher::new(fake.clone(), shard.clone());
        let page = lw.list(&ListOptions::new("0", None)).await.unwrap();
        assert_eq!(page.undecodable, [undecodable("ns-07", None)]);
        assert_eq!(lw.filtering(), ShardFiltering::Client);

        // By uid: by the uid when the metadata had one, kept when not.
        let shard = ShardSelector::index_of(ShardKey::Uid, 0, 2).unwrap();
        let (inside, outside) = ("ns-07", "default"); // hashes as above, as uids
        let fake = FakeListerWatcher::<Obj>::new();
        let (tx, stream) = watch_channel();
        fake.push_watch(Ok(stream));
        let lw = ShardedListerWatcher::new(fake.clone(), shard);
        let mut watch = lw
            .watch(&WatchOptions::new("5", Duration::from_secs(60)))
            .await
            .unwrap();
        for uid in [Some(outside), Some(inside), None] {
            tx.send(Err(Error::Undecodable {
                object: undecodable("a", uid),
                deleted: false,
            }));
        }
        drop(tx);
        let mut seen = Vec::new();
        while let Some(item) = watch.next().await {
            match item {
                Err(Error::Undecodable { object, .. }) => seen.push(object.uid),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(seen, [Some(inside.to_owned()), None]);
        assert_eq!(lw.filtering(), ShardFiltering::Client);
    }
}
