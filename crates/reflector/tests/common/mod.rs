//! Helpers shared by the end-to-end tests: a sink that keeps the state it was given and a
//! log of every call, a counting [`ListerWatcher`] wrapper (a non-default implementation
//! of the trait, plugged in through the public API), pod factories, and polling waits.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{Error as SinkError, MetaObject, Sink, meta_namespace_key};
use kinformer_reflector::{Error, ListOptions, ListPage, ListerWatcher, WatchOptions, WatchStream};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};

/// One call the reflector made on the sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Add(String),
    Update(String),
    Delete(String),
    Replace { keys: BTreeSet<String>, rv: String },
    Resync,
    Bookmark(String),
}

#[derive(Default)]
struct State {
    /// key -> resourceVersion: what a store fed by this sink would hold.
    objects: BTreeMap<String, String>,
    log: Vec<Call>,
}

/// A sink that applies what it gets to a map (replace = the list, as a store does) and
/// logs every call.
#[derive(Default)]
pub struct StateSink {
    state: Mutex<State>,
}

impl StateSink {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock().unwrap())
    }

    pub fn objects(&self) -> BTreeMap<String, String> {
        self.with(|s| s.objects.clone())
    }

    pub fn keys(&self) -> BTreeSet<String> {
        self.with(|s| s.objects.keys().cloned().collect())
    }

    pub fn log(&self) -> Vec<Call> {
        self.with(|s| s.log.clone())
    }

    pub fn replaces(&self) -> Vec<(BTreeSet<String>, String)> {
        self.log()
            .into_iter()
            .filter_map(|c| match c {
                Call::Replace { keys, rv } => Some((keys, rv)),
                _ => None,
            })
            .collect()
    }

    pub fn deletes(&self) -> BTreeSet<String> {
        self.log()
            .into_iter()
            .filter_map(|c| match c {
                Call::Delete(k) => Some(k),
                _ => None,
            })
            .collect()
    }

    pub fn adds(&self) -> BTreeSet<String> {
        self.log()
            .into_iter()
            .filter_map(|c| match c {
                Call::Add(k) => Some(k),
                _ => None,
            })
            .collect()
    }
}

fn key<K: MetaObject>(o: &K) -> Result<String, SinkError> {
    Ok(meta_namespace_key(o)?.as_str().to_owned())
}

fn rv<K: MetaObject>(o: &K) -> String {
    o.object_resource_version().unwrap_or_default().to_owned()
}

impl<K: MetaObject + Send + Sync> Sink<K> for StateSink {
    fn add(&self, o: Arc<K>) -> Result<(), SinkError> {
        let k = key(&*o)?;
        self.with(|s| {
            s.objects.insert(k.clone(), rv(&*o));
            s.log.push(Call::Add(k));
        });
        Ok(())
    }
    fn update(&self, o: Arc<K>) -> Result<(), SinkError> {
        let k = key(&*o)?;
        self.with(|s| {
            s.objects.insert(k.clone(), rv(&*o));
            s.log.push(Call::Update(k));
        });
        Ok(())
    }
    fn delete(&self, o: Arc<K>) -> Result<(), SinkError> {
        let k = key(&*o)?;
        self.with(|s| {
            s.objects.remove(&k);
            s.log.push(Call::Delete(k));
        });
        Ok(())
    }
    fn replace(&self, list: Vec<Arc<K>>, rv_: &str) -> Result<(), SinkError> {
        let mut objects = BTreeMap::new();
        for o in &list {
            objects.insert(key(&**o)?, rv(&**o));
        }
        self.with(|s| {
            let keys = objects.keys().cloned().collect();
            s.objects = objects;
            s.log.push(Call::Replace {
                keys,
                rv: rv_.to_owned(),
            });
        });
        Ok(())
    }
    fn resync(&self) -> Result<(), SinkError> {
        self.with(|s| s.log.push(Call::Resync));
        Ok(())
    }
    fn bookmark(&self, rv_: &str) -> Result<(), SinkError> {
        self.with(|s| s.log.push(Call::Bookmark(rv_.to_owned())));
        Ok(())
    }
}

/// A [`ListerWatcher`] that records every call before passing it on: how tests count
/// pages and relists.
pub struct Counting<L> {
    inner: L,
    lists: Mutex<Vec<(Instant, ListOptions)>>,
    watches: Mutex<Vec<(Instant, WatchOptions)>>,
}

impl<L> Counting<L> {
    pub fn new(inner: L) -> Arc<Self> {
        Arc::new(Self {
            inner,
            lists: Mutex::new(Vec::new()),
            watches: Mutex::new(Vec::new()),
        })
    }

    pub fn lists(&self) -> Vec<ListOptions> {
        self.lists
            .lock()
            .unwrap()
            .iter()
            .map(|(_, o)| o.clone())
            .collect()
    }

    pub fn watches(&self) -> Vec<WatchOptions> {
        self.watches
            .lock()
            .unwrap()
            .iter()
            .map(|(_, o)| o.clone())
            .collect()
    }

    pub fn watch_times(&self) -> Vec<Instant> {
        self.watches
            .lock()
            .unwrap()
            .iter()
            .map(|(t, _)| *t)
            .collect()
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
        self.lists
            .lock()
            .unwrap()
            .push((Instant::now(), options.clone()));
        self.inner.list(options)
    }
    fn watch<'a>(
        &'a self,
        options: &'a WatchOptions,
    ) -> BoxFuture<'a, Result<WatchStream<K>, Error>> {
        self.watches
            .lock()
            .unwrap()
            .push((Instant::now(), options.clone()));
        self.inner.watch(options)
    }
}

/// What the error handler saw: when, and the error's text and status code.
#[derive(Clone, Default)]
pub struct Errors(Arc<Mutex<Vec<Seen>>>);

/// One error: when, its status code, whether the server was unreachable, its text.
type Seen = (Instant, Option<u16>, bool, String);

impl Errors {
    pub fn handler(&self) -> impl Fn(&Error) + Send + Sync + 'static {
        let me = self.clone();
        move |e: &Error| {
            me.0.lock().unwrap().push((
                Instant::now(),
                e.status_code(),
                e.is_unreachable(),
                e.to_string(),
            ));
        }
    }

    pub fn codes(&self) -> Vec<Option<u16>> {
        self.0.lock().unwrap().iter().map(|e| e.1).collect()
    }

    pub fn times(&self) -> Vec<Instant> {
        self.0.lock().unwrap().iter().map(|e| e.0).collect()
    }

    pub fn unreachable_times(&self) -> Vec<Instant> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.2)
            .map(|e| e.0)
            .collect()
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    pub fn texts(&self) -> Vec<String> {
        self.0.lock().unwrap().iter().map(|e| e.3.clone()).collect()
    }
}

pub use kinformer_testenv::pod;

/// Creates `n` pods named `{prefix}-{i}`.
pub async fn create_pods(api: &Api<Pod>, prefix: &str, n: usize) {
    kinformer_testenv::create_pods(api, prefix, n)
        .await
        .expect("create pods");
}

pub async fn create_pod(api: &Api<Pod>, name: &str) -> Pod {
    api.create(&PostParams::default(), &pod(name))
        .await
        .expect("create pod")
}

pub async fn delete_pod(api: &Api<Pod>, name: &str) {
    api.delete(name, &DeleteParams::default().grace_period(0))
        .await
        .expect("delete pod");
}

pub async fn label_pod(api: &Api<Pod>, name: &str, value: &str) {
    let patch = serde_json::json!({ "metadata": { "labels": { "touched": value } } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch pod");
}

/// What the API server holds now: key -> resourceVersion.
pub async fn truth(api: &Api<Pod>) -> BTreeMap<String, String> {
    api.list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .iter()
        .map(|p| (key(p).unwrap(), rv(p)))
        .collect()
}

/// Polls `f` every 50 ms until it holds; fails the test after `limit`.
pub async fn eventually(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the sink holds exactly what the API server holds.
pub async fn converge(sink: &StateSink, api: &Api<Pod>, limit: Duration) {
    let start = Instant::now();
    loop {
        let want = truth(api).await;
        if sink.objects() == want {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "the sink did not converge within {limit:?}:\n sink: {:?}\n server: {:?}",
            sink.objects(),
            want
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Logs to the test output when `RUST_LOG` is set.
pub fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_none() {
        return;
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Gaps between consecutive instants, in seconds.
pub fn gaps(times: &[Instant]) -> Vec<f64> {
    times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect()
}
