use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use kinformer_core::BoxFuture;

use kinformer_core::ObjectKey;

use crate::{Error, ShardSelector};

/// What to list: one page of a (possibly paged) list call. The reflector fills it in;
/// the [`ListerWatcher`] adds its own selectors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListOptions {
    /// `resourceVersion`: `"0"` (any version, may be served from the watch cache), `""`
    /// (a consistent read: the newest data, from etcd or a cache proven fresh), or a
    /// version to be at least as new as. Empty on the continue pages of a paged list.
    pub resource_version: String,
    /// `limit`: the page size; `None` lists everything in one response.
    pub limit: Option<u32>,
    /// `continue`: the token of the previous page.
    pub continue_token: Option<String>,
    /// `shardSelector`: only the objects of this shard (Kubernetes 1.36, feature gate
    /// `ShardedListAndWatch`). A [`ShardedListerWatcher`](crate::ShardedListerWatcher)
    /// sets it to its selection, and filters what a server without the gate sends anyway;
    /// the reflector sets it only to list what that selection gained
    /// ([`ShardChange::Widened`]).
    pub shard: Option<ShardSelector>,
    /// `resourceVersionMatch=Exact`: the objects as they were at exactly
    /// `resource_version` (`410 Gone` once etcd has compacted it), rather than at that
    /// version or newer. The reflector asks for it only to list the shards a
    /// [`ShardedListerWatcher`](crate::ShardedListerWatcher)'s selection gained, at the
    /// version its watch had reached; it checks the page's version, so a lister-watcher
    /// that ignores this costs a relist, nothing else.
    pub exact: bool,
}

impl ListOptions {
    /// Options for a first page at `resource_version`, `limit` items at most.
    pub fn new(resource_version: impl Into<String>, limit: Option<u32>) -> Self {
        Self {
            resource_version: resource_version.into(),
            limit,
            continue_token: None,
            shard: None,
            exact: false,
        }
    }
}

/// One page of a list response.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ListPage<K> {
    /// The objects, each in the `Arc` the cache will share: a lister-watcher that decodes
    /// a page allocates every object once.
    pub items: Vec<Arc<K>>,
    /// The list's `metadata.resourceVersion`: the state the list reflects.
    pub resource_version: String,
    /// `metadata.continue`: present when more pages follow.
    pub continue_token: Option<String>,
    /// `metadata.shardInfo.selector`: the shard selector the server applied, echoed back
    /// (Kubernetes 1.36 with the gate `ShardedListAndWatch`); `None` from a server that
    /// did not filter the list by shard.
    pub shard_selector: Option<String>,
    /// Objects of the page that did not decode as `K` and were left out (see
    /// [`Undecodable`]).
    pub undecodable: Vec<Undecodable>,
}

impl<K> ListPage<K> {
    /// A page with these items at `resource_version`, with no page after it.
    pub fn new(items: impl IntoIterator<Item = K>, resource_version: impl Into<String>) -> Self {
        Self {
            items: items.into_iter().map(Arc::new).collect(),
            resource_version: resource_version.into(),
            continue_token: None,
            shard_selector: None,
            undecodable: Vec::new(),
        }
    }

    /// A page of objects already in their `Arc`s (what a lister-watcher that decodes each
    /// item into its `Arc` builds) at `resource_version`, with no page after it.
    pub fn shared(items: Vec<Arc<K>>, resource_version: impl Into<String>) -> Self {
        Self {
            items,
            resource_version: resource_version.into(),
            continue_token: None,
            shard_selector: None,
            undecodable: Vec::new(),
        }
    }

    /// Adds an object that did not decode.
    #[must_use]
    pub fn with_undecodable(mut self, object: Undecodable) -> Self {
        self.undecodable.push(object);
        self
    }

    /// Marks that another page follows, fetched with `token`.
    #[must_use]
    pub fn with_continue(mut self, token: impl Into<String>) -> Self {
        self.continue_token = Some(token.into());
        self
    }

    /// Marks the page as filtered by the server with the shard selector `selector`
    /// (`metadata.shardInfo`).
    #[must_use]
    pub fn with_shard_info(mut self, selector: impl Into<String>) -> Self {
        self.shard_selector = Some(selector.into());
        self
    }
}

/// An object the server sent that does not decode as the lister-watcher's type — a field of
/// another type, a required field missing: a custom resource whose schema changed, a Rust
/// struct that is out of date — while its metadata does. One such object must not stop a
/// controller, so it is left out rather than failing its whole list or watch: a list page
/// carries it in [`ListPage::undecodable`], a watch stream as [`Error::Undecodable`]. The
/// reflector reports it with its key and keeps the rest of the cache live (see
/// [`Reflector::known_objects`](crate::Reflector::known_objects) for what the cache keeps).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Undecodable {
    /// The object's namespace/name, read from its metadata.
    pub key: ObjectKey,
    /// Why it did not decode, without any value from the body.
    pub detail: String,
    /// The object's `metadata.uid`, when its metadata has one: what a
    /// [`ShardedListerWatcher`](crate::ShardedListerWatcher) sharding by uid tells its
    /// shard's objects by.
    pub uid: Option<String>,
}

impl Undecodable {
    /// The object `key` and why it did not decode.
    pub fn new(key: ObjectKey, detail: impl Into<String>) -> Self {
        Self {
            key,
            detail: detail.into(),
            uid: None,
        }
    }

    /// This, with the object's uid.
    #[must_use]
    pub fn with_uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = Some(uid.into());
        self
    }
}

impl std::fmt::Display for Undecodable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.detail)
    }
}

/// What to watch. The reflector fills it in; the [`ListerWatcher`] adds its selectors.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchOptions {
    /// Watch changes after this `resourceVersion` (`""` / `"0"`: start with synthetic
    /// `ADDED` events for what exists).
    pub resource_version: String,
    /// `timeoutSeconds`: the server ends the watch after this long.
    pub timeout: Duration,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// Streaming list (`sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`):
    /// the stream starts with an `ADDED` event per existing object and a bookmark
    /// annotated `k8s.io/initial-events-end`.
    pub send_initial_events: bool,
    /// `shardSelector`: only the objects of this shard (see [`ListOptions::shard`]).
    pub shard: Option<ShardSelector>,
}

impl WatchOptions {
    /// A watch from `resource_version` with bookmarks, ending after `timeout`.
    pub fn new(resource_version: impl Into<String>, timeout: Duration) -> Self {
        Self {
            resource_version: resource_version.into(),
            timeout,
            allow_bookmarks: true,
            send_initial_events: false,
            shard: None,
        }
    }
}

/// A bookmark: the watch has seen everything up to `resource_version`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Bookmark {
    /// The resourceVersion the watch reached.
    pub resource_version: String,
    /// Annotated `k8s.io/initial-events-end: "true"`: the end of a streaming list.
    pub initial_events_end: bool,
}

impl Bookmark {
    /// A bookmark at `resource_version`.
    pub fn new(resource_version: impl Into<String>, initial_events_end: bool) -> Self {
        Self {
            resource_version: resource_version.into(),
            initial_events_end,
        }
    }
}

/// One event of a watch stream. Error events (`ERROR`) arrive as `Err(Error::Api(..))`.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent<K> {
    /// `ADDED`.
    Added(K),
    /// `MODIFIED`.
    Modified(K),
    /// `DELETED`, with the object's final state.
    Deleted(K),
    /// `BOOKMARK`.
    Bookmark(Bookmark),
    /// The [`ShardSelection`](crate::ShardSelection) of a
    /// [`ShardedListerWatcher`](crate::ShardedListerWatcher) changed while this watch ran:
    /// not a failure, an item the reflector follows (see [`ShardChange`]). Only a sharded
    /// lister-watcher makes it; a lister-watcher that wraps another passes it on.
    Shard(ShardChange),
}

/// How the selection of a [`ShardedListerWatcher`](crate::ShardedListerWatcher) changed
/// under a running watch: [`WatchEvent::Shard`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardChange {
    /// It narrowed to this selector (shards given up, none taken). The watch goes on and
    /// keeps only this selector's objects from here; the reflector drops from the cache every
    /// object it no longer selects, as the relist of a change would (each leaves as a
    /// deletion), but without a request. A reflector without the cache's
    /// [`KnownObjects`](kinformer_core::KnownObjects) relists instead.
    Narrowed(ShardSelector),
    /// It changed to `selector`, which selects `added` besides what the watch kept; the
    /// watch's last item. The reflector lists only `added`, at exactly the resourceVersion
    /// the watch had reached, drops from the cache what `selector` no longer selects, and
    /// watches `selector` from that version: what was selected before and still is, is not
    /// listed again. Where it cannot (no [`KnownObjects`](kinformer_core::KnownObjects), no
    /// version to list at, that version compacted away, the selection changed again
    /// meanwhile) it relists.
    Widened {
        /// The selection now.
        selector: ShardSelector,
        /// What it selects that the watch did not keep.
        added: ShardSelector,
    },
    /// It changed in a way the watch cannot follow (nothing selected now, or a list under
    /// another selection since); the watch's last item. The reflector relists at once, with
    /// no backoff, under the new selection.
    Relist,
}

/// A watch: events in order, ending when the server closes it. An `Err` item is a
/// failure: see [`Error`] for which ones end the watch and which skip one event.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, Error>>;

/// Lists one page and starts watches: the reflector's only way to reach the API server
/// (client-go's `ListerWatcher`).
///
/// It exists so that the reflector's state machine can be driven by something other
/// than a real API server: kinformer-kube's `KubeListerWatcher`
/// talks to Kubernetes; `fake::FakeListerWatcher` (the `fake` feature)
/// replays a script in unit tests; a wrapper can count, filter, or rate-limit calls.
///
/// Implementations add their own selectors (namespace, labels, fields) to every call:
/// the reflector never sees them. They must map failures onto [`Error`] faithfully,
/// as the reflector's recovery depends on it: `410` as [`Error::Api`] with code 410,
/// a refused connection as [`Error::Unreachable`], and so on.
///
/// ```
/// use kinformer_reflector::{Error, ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream};
/// use kinformer_reflector::BoxFuture;
///
/// /// A source with one fixed page and watches that end at once.
/// struct Fixed;
/// impl ListerWatcher<String> for Fixed {
///     fn list<'a>(&'a self, _: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<String>, Error>> {
///         Box::pin(async { Ok(ListPage::new(vec!["a".to_string()], "7")) })
///     }
///     fn watch<'a>(&'a self, _: &'a WatchOptions) -> BoxFuture<'a, Result<WatchStream<String>, Error>> {
///         Box::pin(async { Ok(Box::pin(futures::stream::empty()) as WatchStream<String>) })
///     }
///     fn supports_watch_list(&self) -> bool { false } // its watch ignores `send_initial_events`
/// }
/// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// # rt.block_on(async {
/// let page = Fixed.list(&ListOptions::new("0", Some(500))).await?;
/// assert_eq!(page.resource_version, "7");
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
pub trait ListerWatcher<K>: Send + Sync {
    /// Lists one page.
    ///
    /// # Errors
    /// The server's error status, or a transport or decoding failure, as [`Error`].
    fn list<'a>(&'a self, options: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<K>, Error>>;

    /// Starts a watch. The returned stream yields events until the server closes it.
    ///
    /// # Errors
    /// When the watch cannot be started (the server's status, or a transport failure).
    fn watch<'a>(
        &'a self,
        options: &'a WatchOptions,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>>;

    /// Whether [`watch`](Self::watch) honours `send_initial_events` (a streaming list:
    /// the current objects as `Added` events, then a bookmark annotated
    /// `k8s.io/initial-events-end`). Informers stream their initial list only from a
    /// lister-watcher that says so, as client-go's reflector checks its lister-watcher
    /// before using `WatchListClient`.
    ///
    /// Required: a default "no" would quietly turn streaming lists off behind a decorator
    /// that did not forward it. A decorator returns its inner lister-watcher's answer.
    fn supports_watch_list(&self) -> bool;
}

impl<K, T: ListerWatcher<K> + ?Sized> ListerWatcher<K> for Arc<T> {
    fn list<'a>(&'a self, options: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<K>, Error>> {
        (**self).list(options)
    }
    fn watch<'a>(
        &'a self,
        options: &'a WatchOptions,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        (**self).watch(options)
    }
    fn supports_watch_list(&self) -> bool {
        (**self).supports_watch_list()
    }
}

impl<K, T: ListerWatcher<K> + ?Sized> ListerWatcher<K> for Box<T> {
    fn list<'a>(&'a self, options: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<K>, Error>> {
        (**self).list(options)
    }
    fn watch<'a>(
        &'a self,
        options: &'a WatchOptions,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        (**self).watch(options)
    }
    fn supports_watch_list(&self) -> bool {
        (**self).supports_watch_list()
    }
}

/// Forwards [`ListerWatcher`](crate::ListerWatcher) methods to a field: inside the trait's
/// `impl` for a decorator, `forward_lister_watcher!(K, field: all)` writes every method as a
/// call of the same method on `self.field`; `forward_lister_watcher!(K, field: method, ..)`
/// writes only those named, for a decorator that writes the others itself. `all` is: `list`,
/// `watch`, `supports_watch_list`.
#[macro_export]
macro_rules! forward_lister_watcher {
    ($item:ty, $field:tt: all) => {
        $crate::forward_lister_watcher!($item, $field: list, watch, supports_watch_list);
    };
    ($item:ty, $field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_lister_watcher!(@method $item, $field, $method);)+
    };
    (@method $item:ty, $f:tt, list) => {
        fn list<'a>(
            &'a self,
            options: &'a $crate::ListOptions,
        ) -> $crate::BoxFuture<'a, ::std::result::Result<$crate::ListPage<$item>, $crate::Error>> {
            self.$f.list(options)
        }
    };
    (@method $item:ty, $f:tt, watch) => {
        fn watch<'a>(
            &'a self,
            options: &'a $crate::WatchOptions,
        ) -> $crate::BoxFuture<'a, ::std::result::Result<$crate::WatchStream<$item>, $crate::Error>> {
            self.$f.watch(options)
        }
    };
    (@method $item:ty, $f:tt, supports_watch_list) => {
        fn supports_watch_list(&self) -> bool {
            self.$f.supports_watch_list()
        }
    };
}
