//! A counting [`ListerWatcher`] wrapper (a non-default implementation of the trait,
//! plugged in through the public API): how tests count pages, watches and relists.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use kinformer_reflector::BoxFuture;
use kinformer_reflector::{Error, ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream};

/// A [`ListerWatcher`] that records every call in its [`Calls`] before passing it on.
pub struct Counting<L> {
    inner: L,
    calls: Arc<Calls>,
}

impl<L> Counting<L> {
    pub fn new(inner: L) -> Self {
        Self {
            inner,
            calls: Arc::default(),
        }
    }

    /// The record of this lister-watcher's calls, readable while a reflector owns it.
    pub fn calls(&self) -> Arc<Calls> {
        Arc::clone(&self.calls)
    }
}

/// Every list and watch call, with when it was made.
#[derive(Default)]
pub struct Calls {
    lists: Mutex<Vec<(Instant, ListOptions)>>,
    watches: Mutex<Vec<(Instant, WatchOptions)>>,
}

/// `f` of each recorded call, in order.
fn each<O, T>(calls: &Mutex<Vec<(Instant, O)>>, f: impl Fn(&(Instant, O)) -> T) -> Vec<T> {
    calls.lock().unwrap().iter().map(f).collect()
}

impl Calls {
    pub fn lists(&self) -> Vec<ListOptions> {
        each(&self.lists, |(_, o)| o.clone())
    }

    pub fn watches(&self) -> Vec<WatchOptions> {
        each(&self.watches, |(_, o)| o.clone())
    }

    pub fn watch_times(&self) -> Vec<Instant> {
        each(&self.watches, |(t, _)| *t)
    }

    /// List calls that started a list (not continue pages).
    pub fn list_starts(&self) -> Vec<ListOptions> {
        self.lists()
            .into_iter()
            .filter(|o| o.continue_token.is_none())
            .collect()
    }
}

impl<K, L: ListerWatcher<K>> ListerWatcher<K> for Counting<L> {
    fn list<'a>(&'a self, options: &'a ListOptions) -> BoxFuture<'a, Result<ListPage<K>, Error>> {
        let call = (Instant::now(), options.clone());
        self.calls.lists.lock().unwrap().push(call);
        self.inner.list(options)
    }
    fn watch<'a>(
        &'a self,
        options: &'a WatchOptions,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        let call = (Instant::now(), options.clone());
        self.calls.watches.lock().unwrap().push(call);
        self.inner.watch(options)
    }
    // A wrapper that did not forward this would turn streaming lists off.
    fn supports_watch_list(&self) -> bool {
        self.inner.supports_watch_list()
    }
}
