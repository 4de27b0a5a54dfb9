//! An in-memory [`ListerWatcher`] for tests: scripted list answers and watch streams,
//! and a record of every call.
//!
//! ```
//! use kinformer_reflector::fake::{FakeListerWatcher, watch_channel};
//! use kinformer_reflector::{ListOptions, ListPage, ListerWatcher, WatchEvent, WatchOptions};
//! use std::time::Duration;
//!
//! # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! # rt.block_on(async {
//! let fake = FakeListerWatcher::<String>::new();
//! fake.on_list(|opts| Ok(ListPage::new(vec![format!("listed at {}", opts.resource_version)], "10")));
//! let (tx, stream) = watch_channel();
//! fake.push_watch(Ok(stream));
//!
//! let page = fake.list(&ListOptions::new("0", Some(500))).await.unwrap();
//! assert_eq!(*page.items[0], "listed at 0");
//! let _watch = fake.watch(&WatchOptions::new("10", Duration::from_secs(300))).await.unwrap();
//! tx.send(Ok(WatchEvent::Added("a".to_string())));
//! assert_eq!(fake.list_calls()[0].resource_version, "0");
//! assert_eq!(fake.watch_calls()[0].resource_version, "10");
//! # });
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use kinformer_core::BoxFuture;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::{Error, ListOptions, ListPage, ListerWatcher, WatchEvent, WatchOptions, WatchStream};

type ListFn<K> = Box<dyn FnMut(&ListOptions) -> Result<ListPage<K>, Error> + Send>;
type WatchFn<K> = Box<dyn FnMut(&WatchOptions) -> Result<WatchStream<K>, Error> + Send>;

struct Inner<K> {
    list: Option<ListFn<K>>,
    watches: VecDeque<Result<WatchStream<K>, Error>>,
    watch: Option<WatchFn<K>>,
    list_calls: Vec<(Instant, ListOptions)>,
    watch_calls: Vec<(Instant, WatchOptions)>,
    watch_list: bool,
}

/// A scripted [`ListerWatcher`]. Cloning shares the script and the call record.
///
/// - `list` answers with the [`on_list`](Self::on_list) closure (default: an empty page
///   at resourceVersion `"1"`).
/// - `watch` hands out the streams queued by [`push_watch`](Self::push_watch) in order,
///   then asks the [`on_watch`](Self::on_watch) closure (default: a stream that never
///   yields, as a quiet server).
///
/// It does not claim to serve streaming lists unless told to
/// ([`serve_watch_list`](Self::serve_watch_list)), so a reflector lists by default.
///
/// The closures run under the fake's lock: they must not call the fake.
pub struct FakeListerWatcher<K> {
    inner: Arc<Mutex<Inner<K>>>,
}

impl<K> Clone for FakeListerWatcher<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> FakeListerWatcher<K> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K> fmt::Debug for FakeListerWatcher<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("FakeListerWatcher")
            .field("list_calls", &inner.list_calls.len())
            .field("watch_calls", &inner.watch_calls.len())
            .field("queued_watches", &inner.watches.len())
            .finish()
    }
}

impl<K: Send + 'static> Default for FakeListerWatcher<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Send + 'static> FakeListerWatcher<K> {
    /// A fake with the default answers (see the type docs).
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                list: None,
                watches: VecDeque::new(),
                watch: None,
                list_calls: Vec::new(),
                watch_calls: Vec::new(),
                watch_list: false,
            })),
        }
    }

    /// Answers every list call with `f`.
    pub fn on_list(
        &self,
        f: impl FnMut(&ListOptions) -> Result<ListPage<K>, Error> + Send + 'static,
    ) {
        self.lock().list = Some(Box::new(f));
    }

    /// Answers watch calls with `f` once the queued streams are used up.
    pub fn on_watch(
        &self,
        f: impl FnMut(&WatchOptions) -> Result<WatchStream<K>, Error> + Send + 'static,
    ) {
        self.lock().watch = Some(Box::new(f));
    }

    /// Whether the fake says it honours `send_initial_events`
    /// ([`ListerWatcher::supports_watch_list`]), so that a reflector streams its initial
    /// list through it. The script must then answer such watches as a server would.
    pub fn serve_watch_list(&self, on: bool) {
        self.lock().watch_list = on;
    }

    /// Queues the answer to a coming watch call.
    pub fn push_watch(&self, answer: Result<WatchStream<K>, Error>) {
        self.lock().watches.push_back(answer);
    }

    /// The options of every list call so far.
    pub fn list_calls(&self) -> Vec<ListOptions> {
        self.lock()
            .list_calls
            .iter()
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// The options of every watch call so far.
    pub fn watch_calls(&self) -> Vec<WatchOptions> {
        self.lock()
            .watch_calls
            .iter()
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// When each list call happened (Tokio time, so paused-time tests can check delays).
    pub fn list_times(&self) -> Vec<Instant> {
        self.lock().list_calls.iter().map(|(t, _)| *t).collect()
    }

    /// When each watch call happened.
    pub fn watch_times(&self) -> Vec<Instant> {
        self.lock().watch_calls.iter().map(|(t, _)| *t).collect()
    }
}

impl<K: Send + Sync + 'static> ListerWatcher<K> for FakeListerWatcher<K> {
    fn list<'a>(&'a self, options: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<K>, Error>> {
        let answer = {
            let mut inner = self.lock();
            inner.list_calls.push((Instant::now(), options.clone()));
            match inner.list.as_mut() {
                Some(f) => f(options),
                None => Ok(ListPage::new(Vec::new(), "1")),
            }
        };
        Box::pin(async move { answer })
    }

    fn watch<'a>(
        &'a self,
        options: &'a WatchOptions,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        let answer = {
            let mut inner = self.lock();
            inner.watch_calls.push((Instant::now(), options.clone()));
            match inner.watches.pop_front() {
                Some(a) => a,
                None => match inner.watch.as_mut() {
                    Some(f) => f(options),
                    None => Ok(futures::stream::pending().boxed()),
                },
            }
        };
        Box::pin(async move { answer })
    }

    fn supports_watch_list(&self) -> bool {
        self.lock().watch_list
    }
}

/// The sending side of a [`watch_channel`]. Dropping it ends the watch cleanly, as a
/// server closing the connection.
pub struct WatchSender<K> {
    tx: mpsc::UnboundedSender<Result<WatchEvent<K>, Error>>,
}

impl<K> fmt::Debug for WatchSender<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchSender")
            .field("closed", &self.tx.is_closed())
            .finish()
    }
}

impl<K> WatchSender<K> {
    /// Sends an event (or a failure). Returns `false` when the watch was dropped.
    pub fn send(&self, item: Result<WatchEvent<K>, Error>) -> bool {
        self.tx.send(item).is_ok()
    }

    /// Whether the receiving watch was dropped (the reflector moved on).
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// A watch stream fed by hand: what is sent arrives in order; dropping the sender
/// closes the watch.
pub fn watch_channel<K: Send + 'static>() -> (WatchSender<K>, WatchStream<K>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed();
    (WatchSender { tx }, stream)
}

/// A watch stream that yields `items` and then closes.
pub fn watch_of<K: Send + 'static>(items: Vec<Result<WatchEvent<K>, Error>>) -> WatchStream<K> {
    futures::stream::iter(items).boxed()
}
