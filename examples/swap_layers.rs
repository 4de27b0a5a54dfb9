//! Three layers swapped for your own through their traits: a custom rate limiter under
//! the controller's queue, a custom store under the informer, and a custom FIFO between
//! reflector and informer. Each swap changes that layer alone: the controller keeps its
//! priority queue (name and metrics included) under the new limiter, and the informer keeps
//! the default memory model (pods kept encoded as `Cached<Pod>`, transcoded from protobuf)
//! with its new store and FIFO, as its type says.
//!
//! ```text
//! cargo run --example swap_layers                      # local control plane
//! cargo run --example swap_layers -- --kubeconfig ~/.kube/config -n my-namespace
//! ```
//!
//! Against the local control plane it creates three pods; each is reconciled twice: the
//! first attempt fails on purpose, so the retry goes through the custom rate limiter.
//! Against another cluster it reconciles the pods of the namespace the same way and
//! creates nothing.
#![allow(clippy::print_stdout)]

#[path = "common/mod.rs"]
mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use common::{Args, BoxError, ensure_namespace, start, wait_for};
use k8s_openapi::api::core::v1::Pod;
use kinformer::core::{Error as CoreError, ListPart, Sink};
use kinformer::deltafifo::{FifoQueue, InOrderFifo, forward_fifo_queue};
use kinformer::indexer::{
    IndexerWriter, ThreadSafeStore, forward_indexer, forward_indexer_writer, forward_known_objects,
    forward_sink, namespace_indexers,
};
use kinformer::prelude::*;
use kube::Api;
use kube::api::PostParams;

/// Layer 1, the rate limiter: every retry waits a fixed delay (no backoff), and the
/// limiter counts the retries it was asked about.
#[derive(Default)]
pub struct FixedDelay {
    delay: Duration,
    retries: Mutex<HashMap<ObjectKey, usize>>,
    asked: AtomicUsize,
}

impl RateLimiter<ObjectKey> for FixedDelay {
    fn when(&self, key: &ObjectKey) -> Duration {
        self.asked.fetch_add(1, Ordering::Relaxed);
        *self
            .retries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.clone())
            .or_default() += 1;
        self.delay
    }
    fn forget(&self, key: &ObjectKey) {
        self.retries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }
    fn num_requeues(&self, key: &ObjectKey) -> usize {
        self.retries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

/// What the informer carries, caches and hands out: the default, pods kept encoded
/// (`KubeListerWatcher::cached`), not decoded `Pod`s.
pub type Object = Cached<Pod>;

/// Layer 2, the store: the thread-safe store of the default informer's objects (`Cached<Pod>`,
/// kept encoded and read in place) behind an audit that counts the informer's writes (a place
/// for metrics, or for mirroring the cache elsewhere). Swapping the store keeps the memory
/// model: the objects are whatever the lister-watcher yields. Any type with the
/// read side (`Indexer`, with `KnownObjects`) and the write side (`IndexerWriter`, with
/// `Sink`) will do; listers need its namespace index.
pub struct AuditedStore {
    inner: ThreadSafeStore<Object>,
    writes: AtomicUsize,
}

impl AuditedStore {
    fn new() -> Self {
        Self {
            inner: ThreadSafeStore::new(namespace_indexers()),
            writes: AtomicUsize::new(0),
        }
    }
    fn write(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }
}

// Reads are the wrapped store's: forwarded with the crates' forwarding macros.
impl KnownObjects<Object> for AuditedStore {
    forward_known_objects!(Object, inner: all);
}

impl Indexer<Object> for AuditedStore {
    forward_indexer!(Object, inner: all);
}

impl Sink<Object> for AuditedStore {
    fn add(&self, obj: Arc<Object>) -> Result<(), CoreError> {
        self.write();
        Sink::add(&self.inner, obj)
    }
    fn update(&self, obj: Arc<Object>) -> Result<(), CoreError> {
        self.write();
        Sink::update(&self.inner, obj)
    }
    fn delete(&self, obj: Arc<Object>) -> Result<(), CoreError> {
        self.write();
        Sink::delete(&self.inner, obj)
    }
    fn replace(&self, part: ListPart<Object>) -> Result<(), CoreError> {
        self.write();
        Sink::replace(&self.inner, part)
    }
    fn resync(&self) -> Result<(), CoreError> {
        Ok(())
    }
    forward_sink!(Object, inner: bookmark);
}

impl IndexerWriter<Object> for AuditedStore {
    forward_indexer_writer!(Object, inner: all);
}

/// Layer 3, the queue between reflector and informer: client-go v1.36's in-order FIFO
/// (atomic mode) behind a wrapper that counts what the reflector queues. Any `FifoQueue`
/// will do: the informer builds it at start through `custom_fifo`.
pub struct CountingFifo {
    inner: InOrderFifo<Object>,
    queued: AtomicUsize,
}

impl CountingFifo {
    fn queued(&self) -> Result<(), CoreError> {
        self.queued.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl Sink<Object> for CountingFifo {
    fn add(&self, obj: Arc<Object>) -> Result<(), CoreError> {
        Sink::add(&self.inner, obj).and_then(|()| self.queued())
    }
    fn update(&self, obj: Arc<Object>) -> Result<(), CoreError> {
        Sink::update(&self.inner, obj).and_then(|()| self.queued())
    }
    fn delete(&self, obj: Arc<Object>) -> Result<(), CoreError> {
        Sink::delete(&self.inner, obj).and_then(|()| self.queued())
    }
    fn replace(&self, part: ListPart<Object>) -> Result<(), CoreError> {
        Sink::replace(&self.inner, part).and_then(|()| self.queued())
    }
    forward_sink!(Object, inner: resync, bookmark);
}

impl FifoQueue<Object> for CountingFifo {
    forward_fifo_queue!(Object, inner: all);
}

/// The keys that failed their first attempt, and those reconciled.
#[derive(Default)]
pub struct Attempts {
    failed_once: Mutex<HashSet<ObjectKey>>,
    done: Mutex<HashSet<ObjectKey>>,
}

/// Fails each key's first attempt on purpose, so that its retry goes through the custom
/// rate limiter; records the second.
async fn fail_first_attempt(key: ObjectKey, ctx: Context<Arc<Attempts>>) -> Result<Action, String> {
    if ctx
        .failed_once
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key.clone())
    {
        return Err(format!("{key}: failing the first attempt on purpose"));
    }
    ctx.done
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key);
    Ok(Action::Done)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse()?;
    let local = args.kubeconfig.is_none();
    let cluster = start(&args).await?;
    let namespace = args.namespace.clone().unwrap_or_else(|| "default".into());
    let report = run(cluster.client.clone(), &namespace, local).await?;
    println!("{report}");
    Ok(())
}

/// What [`run`] saw.
#[derive(Debug)]
pub struct Report {
    /// Pods reconciled successfully (at their second attempt).
    pub reconciled: usize,
    /// Retries the custom rate limiter was asked to delay.
    pub limiter_retries: usize,
    /// The name of the controller's queue (the `name` label of its metrics): the default
    /// priority queue's, kept when only the limiter is swapped.
    pub queue_name: String,
    /// Writes the informer made to the custom store.
    pub store_writes: usize,
    /// Writes the reflector made to the custom FIFO.
    pub fifo_writes: usize,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "reconciled {} pods; the custom rate limiter delayed {} retries of queue {:?}; the informer wrote {} times to the custom store; the reflector wrote {} times to the custom FIFO",
            self.reconciled,
            self.limiter_retries,
            self.queue_name,
            self.store_writes,
            self.fifo_writes
        )
    }
}

/// Runs the informer (custom store, in-order FIFO) and a controller (custom limiter) until
/// every pod of `namespace` has been reconciled, the first attempt of each failing.
pub async fn run(client: kube::Client, namespace: &str, create: bool) -> Result<Report, BoxError> {
    if create {
        ensure_namespace(&client, namespace).await?;
    }
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    if create {
        for name in ["swap-0", "swap-1", "swap-2"] {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": { "name": name },
                "spec": { "containers": [{ "name": "main", "image": "nginx" }] }
            }))?;
            pods.create(&PostParams::default(), &pod).await?;
        }
    }

    // Layers 2 and 3: the informer over the custom store and the counting FIFO.
    let store = Arc::new(AuditedStore::new());
    let fifo = Arc::new(CountingFifo {
        inner: InOrderFifo::builder()
            .atomic(true)
            .emit_bookmarks(true)
            .build()?,
        queued: AtomicUsize::new(0),
    });
    // The default assembly's lister-watcher (cached objects, protobuf transcoded into them):
    // the custom store and FIFO below change nothing else.
    let informer = SharedIndexInformer::builder(KubeListerWatcher::new(pods).cached())
        .name("pods")
        .store(Arc::clone(&store))
        .custom_fifo({
            let fifo = Arc::clone(&fifo);
            move |_known| fifo as Arc<dyn FifoQueue<Object>>
        })
        .build();

    // Layer 1: the rate limiter, and only it: the controller keeps its default queue (the
    // priority queue, named after the controller for its metrics) over the custom limiter.
    // `Controller::with_queue(RateLimitingWorkQueue::new(limiter))` would swap the whole
    // queue instead, for client-go's plain FIFO without priorities or metrics.
    let limiter = FixedDelay {
        delay: Duration::from_millis(50),
        ..FixedDelay::default()
    };
    let controller = Controller::with_rate_limiter("swap-layers", limiter).workers(2);
    let queue = Arc::clone(controller.queue());
    informer.add_event_handler(controller.enqueue_handler())?;
    let handle = informer.start()?;
    if !wait_for_cache_sync(Duration::from_secs(60), &[&informer]).await {
        return Err("the pod cache did not sync".into());
    }
    let expected = informer
        .lister()
        .namespaced(namespace)
        .list(&kinformer::indexer::everything())
        .len();

    // Fails each key's first attempt; records the second.
    let attempts = Arc::new(Attempts::default());
    let cancel = CancellationToken::new();
    let workers =
        tokio::spawn(controller.run(fail_first_attempt, Arc::clone(&attempts), cancel.clone()));
    wait_for("every pod reconciled", || {
        attempts
            .done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
            >= expected
    })
    .await?;
    cancel.cancel();
    workers.await?;
    handle.stop().await?;
    let reconciled = attempts
        .done
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .len();
    Ok(Report {
        reconciled,
        limiter_retries: queue.limiter().asked.load(Ordering::Relaxed),
        queue_name: queue.stats().name,
        store_writes: store.writes.load(Ordering::Relaxed),
        fifo_writes: fifo.queued.load(Ordering::Relaxed),
    })
}
