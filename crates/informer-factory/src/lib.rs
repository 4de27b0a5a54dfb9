//! The SharedIndexInformer: a local, indexed cache of one resource kept in step with the
//! API server, and the event handlers it notifies.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::{Pod, PodSpec};
//! use kinformer_compact_store::Cached;
//! use kinformer_informer_factory::{ResourceEventHandlerFuncs, SharedIndexInformer};
//! use kinformer_reflector::fake::{FakeListerWatcher, watch_channel};
//! use kinformer_reflector::{ListPage, WatchEvent};
//!
//! fn pod(name: &str, rv: &str) -> Cached<Pod> {
//!     let mut p = Pod::default();
//!     p.metadata.namespace = Some("default".into());
//!     p.metadata.name = Some(name.into());
//!     p.metadata.resource_version = Some(rv.into());
//!     p.spec = Some(PodSpec { node_name: Some("node-1".into()), ..Default::default() });
//!     Cached::new(&p).unwrap()
//! }
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! // An in-memory API server: one pod listed, then a watch fed by hand. In a program this
//! // is `KubeListerWatcher::new(Api::<Pod>::namespaced(client, "default")).cached()`, or
//! // a factory's `informer::<Pod>()`.
//! let server = FakeListerWatcher::new();
//! server.on_list(|_| Ok(ListPage::new(vec![pod("web-0", "1")], "1")));
//! let (watch, stream) = watch_channel();
//! server.push_watch(Ok(stream));
//!
//! let informer = SharedIndexInformer::new(server, Duration::ZERO);
//! let (tx, rx) = std::sync::mpsc::channel();
//! let registration = informer.add_event_handler(
//!     ResourceEventHandlerFuncs::new().add_func(move |p: &Arc<Cached<Pod>>, _| {
//!         // Read in place: `p.metadata.name` of a `Pod` is `p.metadata().name()`.
//!         tx.send(p.metadata().name().map(str::to_owned)).unwrap()
//!     }),
//! )?;
//! let handle = informer.start()?;
//! while !registration.has_synced() {
//!     tokio::time::sleep(Duration::from_millis(5)).await;
//! }
//! watch.send(Ok(WatchEvent::Added(pod("web-1", "2"))));
//!
//! // The handler runs on its own thread: here it only forwards names.
//! let names: Vec<_> = rx.iter().take(2).flatten().collect();
//! assert_eq!(names, ["web-0", "web-1"]);
//! // Controllers read the cache through listers, never the API server.
//! let web1 = informer.lister().namespaced("default").get("web-1")?;
//! assert_eq!(web1.spec().and_then(|s| s.node_name()), Some("node-1"));
//! handle.stop().await?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! Against a cluster (see kinformer-reflector for `reflector_client`):
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_core::deletion_handling_key;
//! use kinformer_informer_factory::{ResourceEventHandlerFuncs, SharedIndexInformer};
//! use kinformer_kube::{KubeListerWatcher, reflector_client};
//! use kube::Api;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = reflector_client(kube::Config::infer().await?)?;
//! // `cached()`: objects kept encoded and read in place, a factory's default; without
//! // it the informer keeps decoded `Pod`s, client-go's cache.
//! let pods = KubeListerWatcher::new(Api::<Pod>::namespaced(client, "default")).cached();
//! let informer = SharedIndexInformer::builder(pods)
//!     .name("pods")
//!     .resync_period(Duration::from_secs(30))
//!     .build();
//! informer.add_event_handler(ResourceEventHandlerFuncs::new().delete_func(|obj| {
//!     // A tombstone when the deletion was missed: the key works either way.
//!     if let Ok(key) = deletion_handling_key(obj) {
//!         tracing::info!(%key, "pod deleted");
//!     }
//! }))?;
//! let handle = informer.start()?;
//! // ... until shutdown
//! handle.stop().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # The pipeline
//!
//! ```text
//! Reflector task ──Sink──▶ FIFO ──pop_async──▶ pop-loop task ──▶ cache (Lister reads it)
//!                                                   │
//!                                                   └──▶ one listener per handler:
//!                                                        unbounded crossbeam buffer + own thread
//! ```
//!
//! - The **reflector** (kinformer-reflector) lists and watches on a Tokio task and writes
//!   into the FIFO. As client-go v0.36 does by default (`WatchListClient`), it gets the
//!   initial state with a streaming list (one watch event per object, decoded one at a
//!   time) when the lister-watcher supports it, and falls back to List+Watch when the
//!   server refuses; [`SharedIndexInformerBuilder::watch_list`] turns it off.
//! - The **FIFO** (kinformer-deltafifo) is by default the
//!   [`InOrderFifo`](kinformer_deltafifo::InOrderFifo) in atomic mode, as in client-go
//!   v0.36 (`InOrderInformers` GA, `AtomicFIFO` on); [`FifoKind`] picks the per-object
//!   in-order FIFO or the [`DeltaFifo`](kinformer_deltafifo::DeltaFifo), and
//!   [`custom_fifo`](SharedIndexInformerBuilder::custom_fifo) any `FifoQueue`. The FIFOs
//!   that need it read the cache through its `KnownObjects` view for tombstones and resyncs.
//! - The **pop loop**, a second Tokio task, awaits `pop_async` (never blocking a worker)
//!   and applies each item as client-go's `processDeltas` does: `Sync`, `Replaced`,
//!   `Added`, `Updated` update the stored object if there is one (notifying `on_update`)
//!   and add it otherwise (`on_add`, with the FIFO's `is_in_initial_list`); `Deleted`
//!   deletes (`on_delete`, with the object or its tombstone). An atomic `ReplacedAll` is
//!   one store `replace`, then a tombstone delete for every vanished key, then adds and
//!   updates in list order; `SyncAll` is an `on_update(obj, obj)` for every object; a
//!   `Bookmark` records its resource version. An item the store refuses (a bad key, a
//!   failing index function) is logged and skipped. The pop loop is the cache's only
//!   writer: it holds the write side ([`IndexerWriter`](kinformer_indexer::IndexerWriter)),
//!   everyone else gets the read side ([`SharedIndexInformer::indexer`], listers).
//! - The **objects**, `T` in [`SharedIndexInformer<T>`], are what the lister-watcher
//!   yields, and the informer carries that same `Arc<T>` into the cache and to every
//!   handler and reader, as client-go shares one pointer. By default (a factory's
//!   [`informer`](SharedInformerFactory::informer), `KubeListerWatcher::cached`) they are
//!   kinformer-compact-store's `Cached<K>`: kept encoded, about their size on the wire
//!   (`managedFields` as the JSON text the server sent; protobuf transcoded without
//!   building a `K`), and read in place through typed views, so a lister get is a map
//!   look-up and a reference count. A lister-watcher of `K` (a factory's
//!   [`decoded_informer`](SharedInformerFactory::decoded_informer)) gives decoded `K`s,
//!   client-go's cache: the structs themselves, several times the memory.
//! - The **cache** is by default kinformer-indexer's `ThreadSafeStore` of `T` with the
//!   namespace index; index functions take `&T` (a view of a cached object).
//! - **Fan-out.** Every handler has a listener: an unbounded crossbeam channel and a
//!   thread of its own, as client-go gives each a goroutine. The pop loop only pushes
//!   `Arc`s into channels, so a slow handler delays nobody but itself (its buffer grows:
//!   see [`Registration::pending`]), and a panicking one is caught with `catch_unwind`,
//!   logged, and its listener goes on.
//!
//! # Rules
//!
//! - **Resync** (per handler): zero means none, less than [`MINIMUM_RESYNC_PERIOD`]
//!   becomes it. The reflector asks at its resync check period (the shortest handler
//!   period registered before start) whether any handler is due; if so the FIFO queues
//!   `Sync` for every known object. An update whose old and new resource versions are
//!   equal (a resync, or a relist that found the object unchanged) goes only to the
//!   listeners that were due; every other notification goes to all.
//! - **Late handlers** get an `on_add(obj, true)` for every cached object first. The
//!   snapshot is taken under the lock the pop loop holds while applying an item (client-go's
//!   `blockDeltas`), so the handler misses nothing and sees nothing twice.
//! - [`Registration::has_synced`] is true once the informer has synced *and* the handler
//!   has handled every initial add it was given (a panic counts as handled).
//! - Configuration ([`set_transform`](SharedIndexInformer::set_transform),
//!   [`set_watch_error_handler`](SharedIndexInformer::set_watch_error_handler)) fails
//!   with [`Error::AlreadyStarted`] after start; a stopped informer refuses handlers and
//!   indexers with [`Error::Stopped`]; [`Registration::remove`] twice is harmless.
//! - [`FilteringResourceEventHandler`] turns an update that leaves the filtered set into a
//!   delete of the old object, and one that enters it into an add of the new one.
//!
//! # Locks and threads
//!
//! Nothing blocks a Tokio worker: the pop loop awaits, and its critical section (apply
//! one item, push notifications) holds only std mutexes briefly — the delivery lock,
//! the store's lock inside each store call, the listener list's lock while pushing into
//! unbounded channels — and never across an `.await`. No lock is held while a handler
//! runs: handlers run on their listener threads. The popped item is dropped (marking it
//! applied for the FIFO's `has_synced`) after every one of these locks is released, as
//! kinformer-deltafifo requires. Objects travel as the `Arc<T>` the reflector made: every
//! handler and every reader shares that allocation, and nothing is decoded or copied on
//! the way.
//!
//! # Stopping
//!
//! Cancelling [`run`](SharedIndexInformer::run)'s token, dropping its future, or
//! [`InformerHandle::stop`] stops the reflector, closes the FIFO and tells every listener to end:
//! a handler call in progress finishes on its thread, buffered notifications are dropped.
//! Stop does not join listener threads (a handler stuck forever would hang it).
//!
//! # Differences from client-go
//!
//! - A handler's resync period registered before start lowers the resync check period
//!   even when the informer's default is zero (client-go then never resyncs).
//! - A batch of the in-order FIFO is applied event by event under the delivery lock, not
//!   as one store transaction (the cache's write side has none): a lister may see part of a
//!   batch. An atomic `ReplacedAll` is one `replace` of a whole list.
//! - The first list reaches the cache in parts as it arrives, in atomic mode too (rule 52),
//!   so listers may see part of it before `has_synced`; relists stay whole. On a relist, an
//!   unchanged object's old version in its (resync) update is the listed object itself, and
//!   over a store that keeps objects encoded those updates come after the others (rule 53).
//! - The cache keeps objects encoded by default, where client-go's holds decoded objects:
//!   readers and handlers get the cached object itself (as client-go's pointer, and as
//!   immutable), read through views; `decode()` builds the `K` for code that changes it.
//! - A panicking handler is caught instead of crashing the process.
//! - The transform ([`set_transform`](SharedIndexInformer::set_transform)) runs in the
//!   reflector as each object arrives, not in the FIFO: a streaming initial list then
//!   never holds every object untransformed at once. Objects already cached (resyncs,
//!   tombstones) are not transformed again, where client-go's FIFO may re-transform them
//!   (which is why it asks for an idempotent transform).
//!
//! # The factory
//!
//! A program's controllers share informers through a [`SharedInformerFactory`]: one
//! informer per resource, Rust type, namespace and list options, whoever asks for it
//! ([`informer`](SharedInformerFactory::informer) for k8s-openapi types and
//! `#[derive(CustomResource)]` types, kept cached;
//! [`decoded_informer`](SharedInformerFactory::decoded_informer) for the same kept decoded;
//! [`dynamic_informer`](SharedInformerFactory::dynamic_informer) for `DynamicObject`s by
//! `ApiResource`). [`start`](SharedInformerFactory::start) starts
//! the ones not started yet, [`wait_for_cache_sync`](SharedInformerFactory::wait_for_cache_sync)
//! reports per informer, [`shutdown`](SharedInformerFactory::shutdown) stops them all and
//! waits. The factory-wide transform is a function of an object's metadata
//! ([`transform_meta`](SharedInformerFactoryBuilder::transform_meta)) because Rust has no
//! closure generic over every type; per type, set one on the informer before start.
//! [`wait_for_cache_sync_until`] (the free function) is client-go's
//! `cache.WaitForCacheSync` over any [`HasSynced`] (informers, registrations, closures),
//! with a future (a cancellation token's `cancelled()`) for the stop channel;
//! [`wait_for_cache_sync`] waits at most a timeout. The factory has both too.
//!
//! Difference: client-go's `Start` after `Shutdown` silently does nothing; here it is
//! [`Error::Stopped`].
//!
//! # Restarting without a relist
//!
//! Not in client-go: an informer of the default cache can keep it on disk and start from it
//! ([`SnapshotOptions`]; a factory's [`snapshots`](SharedInformerFactoryBuilder::snapshots)
//! for all of them, [`SharedIndexInformerBuilder::snapshot`] for one). A start from a
//! snapshot reads it while the reflector asks the server what it is at and watches from the
//! snapshot's resourceVersion (kinformer-reflector's `Resume`), and syncs once the watch has
//! reached that version; a compacted version costs one list, compared with the snapshot. It
//! is written every period once synced and at stop, taken under the delivery lock while
//! nothing is queued, at the reflector's last synced version read first (rule 69). Why not a
//! default: a snapshot directory is the program's to give (an `emptyDir` or a volume), and a
//! restart from it is slower than a list on small caches where the cluster writes other
//! things (the watch cache's bookmark takes about a second: BENCHMARKS.md
//! "informer-restart").
//!
//! # Swap points
//!
//! Each proven by a test that runs the real informer with an implementation written in the
//! test (`tests/swap_points.rs`, and the fake lister-watcher in every test):
//!
//! - [`ResourceEventHandler`]: your handlers.
//! - [`SharedInformer`]: what consumers of an informer need (handlers, cache, sync state),
//!   as a trait object, so a controller's wiring can be tested with a fake informer.
//! - The cache: [`SharedIndexInformerBuilder::store`] takes any
//!   [`IndexerWriter`](kinformer_indexer::IndexerWriter) of the informer's objects.
//! - The FIFO: [`SharedIndexInformerBuilder::custom_fifo`] takes any
//!   [`FifoQueue`](kinformer_deltafifo::FifoQueue); [`FifoKind`] picks a built-in one.
//! - The lister-watcher: any [`ListerWatcher`](kinformer_reflector::ListerWatcher); its
//!   object type is the informer's. Each layer is chosen on its own: a FIFO, store or key
//!   function of your own leaves the objects (cached or decoded) as they are.
//!
//! # Features
//!
//! `kube` (default): the [`SharedInformerFactory`], which builds informers from a
//! `kube::Client`. Without it the crate is the informer over any `ListerWatcher`, and pulls
//! in no kube client.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod error;
#[cfg(feature = "kube")]
mod factory;
mod handler;
mod informer;
mod listener;
mod shared;
mod sync;

pub use error::Error;
#[cfg(feature = "kube")]
pub use factory::{
    CacheSyncReport, InformerId, InformerOptions, SharedInformerFactory,
    SharedInformerFactoryBuilder,
};
pub use handler::{FilteringResourceEventHandler, ResourceEventHandler, ResourceEventHandlerFuncs};
pub use informer::{
    DEFAULT_SNAPSHOT_PERIOD, FifoKind, HandlerOptions, InformerHandle, InformerIdentity,
    InformerStats, LastWritten, LatencyHistogram, Loaded, MINIMUM_RESYNC_PERIOD,
    PROCESSING_LATENCY_BUCKETS, Registration, SharedIndexInformer, SharedIndexInformerBuilder,
    SnapshotOptions, SnapshotStart, SnapshotStatus,
};
pub use shared::{HandlerRegistration, SharedInformer};
pub use sync::{HasSynced, wait_for_cache_sync, wait_for_cache_sync_until};
