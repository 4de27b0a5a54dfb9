//! The whole informer pipeline in one crate: each layer as a module, a [`prelude`], the
//! [`Controller`](controller::Controller) runner and the kit around it (owner mapping,
//! [`predicates`], `finalizer`, metrics, health endpoints), sharding across replicas.
//!
//! kinformer is client-go's informer machinery in Rust. Each layer is its own crate, usable
//! alone; this facade re-exports every one of them under a short module name, so a
//! controller uses one kinformer dependency and `use kinformer::prelude::*;`. The controller
//! runner and its kit are kinformer-controller, whose modules are re-exported here one by
//! one (`kinformer::controller` is `kinformer_controller::controller`, and so on).
//!
//! # What a controller depends on
//!
//! ```toml
//! [dependencies]
//! kinformer = { version = "0.1", features = ["server"] }   # "server": /metrics, /healthz, /readyz
//! kube = "5"                                               # the client and its Config
//! k8s-openapi = { version = "0.29", features = ["v1_37"] } # your cluster's Kubernetes version
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "signal"] }
//! ```
//!
//! The prelude re-exports the `CancellationToken` that stops a controller, so `tokio-util` is
//! not needed. Library crates pick no k8s-openapi version; your program does.
//!
//! # Layout
//!
//! Each module is one of kinformer's crates, re-exported whole (the list below says what each
//! holds; the repository's ARCHITECTURE.md has the crate table: folder, job, dependencies).
//! kinformer-controller's parts are the modules `controller`, `predicates`, `finalizer` and
//! `owner`; kinformer-admin's are `metrics` and `server`. Modules behind a feature: `finalizer`, `events`,
//! `leaderelection` and `sharding` (`kube`, default), `metrics` (`prometheus`), `server`
//! (`server`), `client` (`client`), `runtime` (`runtime`), `replay` (`replay`).
//!
//! The data flows top to bottom:
//!
//! ```text
//! API server ─list/watch─▶ Reflector ─▶ FIFO ─▶ informer pop loop ─▶ cache (listers read it)
//!                                                       └─▶ event handlers ─add(key)─▶ Controller queue ─▶ workers: reconcile(key, ctx)
//! ```
//!
//! # Facade or one crate?
//!
//! Use this facade for a controller: informer, listers, queue and worker loop in one
//! dependency. Depend on a single layer when that is all you need: a program that only
//! wants a work queue takes kinformer-workqueue (no kube, no Tokio); a custom cache or FIFO
//! implements the trait from kinformer-indexer or kinformer-deltafifo. The types are the
//! same either way (`kinformer::workqueue::WorkQueue` *is* `kinformer_workqueue::WorkQueue`),
//! so the two mix freely.
//!
//! # Example
//!
//! The reference article's pod controller: an informer feeds keys to a controller whose
//! workers read the pod back from the informer's cache. The factory hands out one shared
//! informer per type (and per namespace and list options: `informer_with::<K>(InformerOptions)`
//! for a label or field selector of its own).
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer::controller::{Action, Context};
//! use kinformer::prelude::*;
//!
//! /// What every reconcile reads: here the pod cache.
//! struct Ctx {
//!     pods: Lister<Cached<Pod>>,
//! }
//!
//! async fn reconcile(key: ObjectKey, ctx: Context<Ctx>) -> Result<Action, kinformer::indexer::Error> {
//!     let namespace = key.namespace().unwrap_or_default();
//!     match ctx.pods.namespaced(namespace).get(key.name()) {
//!         // The cached pod itself, read where it lies: no copy, no decode.
//!         Ok(pod) => tracing::info!(%key, phase = ?pod.status().and_then(|s| s.phase()), "pod"),
//!         Err(e) if e.is_not_found() => tracing::info!(%key, "pod deleted"),
//!         Err(e) => return Err(e),
//!     }
//!     Ok(Action::Done)
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // The client a reflector needs, from your kubeconfig or the pod's service account.
//! let factory = SharedInformerFactory::from_config(kube::Config::infer().await?)?
//!     .namespace("default")
//!     .resync(Duration::from_secs(30))
//!     .build();
//! let pods = factory.informer::<Pod>();
//!
//! let controller = Controller::<ObjectKey>::new("pods").workers(2);
//! // Handlers only enqueue keys (deletes the tombstone-aware way), with the factory's resync.
//! controller.watch(&pods)?;
//! factory.start()?;
//! let report = factory.wait_for_cache_sync(Duration::from_secs(60)).await;
//! assert!(report.all_synced(), "{report}");
//!
//! let cancel = CancellationToken::new();
//! let stop = cancel.clone();
//! tokio::spawn(async move {
//!     let _ = tokio::signal::ctrl_c().await;
//!     stop.cancel();
//! });
//! controller.run(reconcile, Ctx { pods: pods.lister() }, cancel).await;
//! factory.shutdown().await?;
//! # Ok(())
//! # }
//! ```
//!
//! A controller of a resource that owns others adds
//! [`owns`](controller::Controller::owns) (children's events reconcile their controller
//! owner) or [`watches`](controller::Controller::watches) (any mapping from objects to keys);
//! [`watch_with`](controller::Controller::watch_with) filters updates with a
//! [`predicates::Predicate`]. The same controller without a cluster, fed by hand (see
//! [`controller`] for the worker loop and the shutdown):
//!
//! ```
//! use kinformer::controller::{Action, Context};
//! use kinformer::prelude::*;
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let controller = Controller::<ObjectKey>::new("example");
//! let queue = std::sync::Arc::clone(controller.queue());
//! queue.add(ObjectKey::new(Some("default"), "web-0")?);
//!
//! let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
//! let cancel = CancellationToken::new();
//! let run = tokio::spawn(controller.run(
//!     |key: ObjectKey, tx: Context<tokio::sync::mpsc::UnboundedSender<String>>| async move {
//!         tx.send(key.to_string()).map_err(|_| "receiver gone")?;
//!         Ok::<_, &str>(Action::Done)
//!     },
//!     tx,
//!     cancel.clone(),
//! ));
//! assert_eq!(rx.recv().await.as_deref(), Some("default/web-0"));
//! cancel.cancel();
//! run.await?;
//! assert!(queue.shutting_down());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Reading the cache: views, and decoded objects where you need them
//!
//! A factory's [`informer::<K>()`](informer::SharedInformerFactory::informer) keeps its
//! objects as [`Cached<K>`](compact_store::Cached): encoded, about their size on the wire
//! (`managedFields` as the JSON text the server sent), shared by the cache, every handler
//! and every reader as one `Arc`, and read in place through typed views whose accessors
//! have k8s-openapi's names. A lister get is a map look-up and a reference count, a list
//! of 10,000 pods 10,000 reference counts; nothing is built. What each call costs:
//!
//! | call | costs |
//! | --- | --- |
//! | `lister.namespaced(ns).get(name)`, `lister.list(selector)`, `indexer.by_index(..)` | a map look-up (and a label match against labels parsed once) and a reference count per object: nothing built |
//! | `pod.spec()?.node_name()`, `pod.metadata().labels()`, any accessor | a walk to the field, stepping over the others in one jump each; no allocation |
//! | `pod.decode()?` | the whole `K` built anew (hundreds of allocations for a realistic pod, ~15 µs): for code that changes the object and writes it back |
//!
//! [`decoded_informer::<K>()`](informer::SharedInformerFactory::decoded_informer) keeps
//! decoded `K`s shared as `Arc<K>`, client-go's cache, for programs that want the structs
//! themselves, at several times the memory and with every object decoded during the sync.
//! Index functions, handlers, predicates and `owns` are typed by what the informer keeps
//! (`IndexFunc::single(|p: &Cached<Pod>| p.spec()?.node_name())`).
//!
//! Two more levers:
//!
//! - **Drop `managedFields`**, which few controllers read: the factory's
//!   [`drop_managed_fields`](informer::SharedInformerFactoryBuilder::drop_managed_fields)
//!   leaves them out while each object is transcoded (it costs less than keeping them),
//!   where a [`transform_meta`](informer::SharedInformerFactoryBuilder::transform_meta)
//!   (client-go's `WithTransform`) decodes every object to change it.
//! - **Cache a projection**: any serde struct that matches part of the Kubernetes JSON of a
//!   resource works as the informer's type; fields it does not name are skipped while
//!   decoding (JSON or protobuf), so they never reach memory. kube's
//!   `#[derive(Resource)]` with `#[resource(inherit = Pod)]` makes it a pod for the API
//!   (kube's `derive` feature). Decoded, it gives typed fields at a fraction of a whole
//!   pod's memory:
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//! use kinformer::prelude::*;
//! use serde::{Deserialize, Serialize};
//!
//! /// What a pod controller reads: metadata, node, containers' names and images, phase.
//! #[derive(Clone, Debug, Deserialize, Serialize, kube::Resource)]
//! #[resource(inherit = Pod)]
//! struct PodView {
//!     metadata: ObjectMeta,
//!     spec: Option<PodViewSpec>,
//!     status: Option<PodViewStatus>,
//! }
//!
//! #[derive(Clone, Debug, Deserialize, Serialize)]
//! #[serde(rename_all = "camelCase")]
//! struct PodViewSpec {
//!     node_name: Option<String>,
//!     #[serde(default)]
//!     containers: Vec<ContainerView>,
//! }
//!
//! #[derive(Clone, Debug, Deserialize, Serialize)]
//! struct ContainerView {
//!     name: String,
//!     image: Option<String>,
//! }
//!
//! #[derive(Clone, Debug, Deserialize, Serialize)]
//! struct PodViewStatus {
//!     phase: Option<String>,
//! }
//!
//! # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let factory = SharedInformerFactory::builder(client).build();
//! let pods = factory.decoded_informer::<PodView>();
//! let lister: Lister<PodView> = pods.lister();
//! factory.start()?;
//! factory.wait_for_cache_sync(std::time::Duration::from_secs(60)).await;
//! for pod in lister.list(&kinformer::indexer::everything()) {
//!     let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
//!     tracing::info!(name = ?pod.metadata.name, ?node, "pod");
//! }
//! # Ok(())
//! # }
//! ```
//!
//! A projection has to keep `metadata` (keys, labels, resource versions come from it).
//! Writing it back to the API server is not what it is for: it lacks the fields it skipped.
//! BENCHMARKS.md in the repository has the bytes per cached pod and the cost of reads
//! against client-go's.
//!
//! # Features
//!
//! - `kube` (default): the Kubernetes lister-watcher, the factory, [`owns`](controller::Controller::owns),
//!   the metadata [`predicates`], `finalizer`, `events`, `leaderelection`,
//!   `Controller::run_elected`, `sharding` and `Controller::run_shard`.
//! - `prometheus`: `metrics` (prometheus-client), and client-go's workqueue metrics.
//! - `server` (implies `prometheus`): `server`, the `/metrics`, `/healthz` and `/readyz` endpoints.
//! - `client`: `client`, a `kube::Client` with client-go's rate limit and request metrics.
//! - `runtime`: `runtime`, the clap flags and the signal handling of a controller program.
//! - `replay`: `replay`, record a list/watch stream, replay it into informers on virtual
//!   time and perturb it: controller tests without a cluster.
//!
//! The first three turn on the feature of the same name in the crates they concern
//! (kinformer-controller's for all three); `client`, `runtime` and `replay` add their crate.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

#[cfg(feature = "kube")]
pub mod manager;
#[cfg(feature = "kube")]
pub mod sharding;

/// Object keys, tombstones, `Delta` types and the `MetaObject` view: kinformer-core (with
/// its `kube` feature, so every kube `Resource` is a `MetaObject`).
pub use kinformer_core as core;

/// Work queues and rate limiters: kinformer-workqueue.
pub use kinformer_workqueue as workqueue;

/// Stores, indexers, index functions and listers: kinformer-indexer.
pub use kinformer_indexer as indexer;

/// `Cached<K>`, the default informers' objects: kept encoded and read in place through
/// typed views (kinformer-compact-store). See [Reading the cache](crate#reading-the-cache-views-and-decoded-objects-where-you-need-them).
pub use kinformer_compact_store as compact_store;

/// The DeltaFIFO and the in-order FIFO: kinformer-deltafifo.
pub use kinformer_deltafifo as deltafifo;

/// The Reflector and the `ListerWatcher` trait (kinformer-reflector), with the Kubernetes
/// lister-watcher (kinformer-kube, feature `kube`): one module, as they are used together.
pub mod reflector {
    #[cfg(feature = "kube")]
    pub use kinformer_kube::*;
    pub use kinformer_reflector::*;
}

/// The `SharedIndexInformer`, its listeners and event handlers, the
/// `SharedInformerFactory`: kinformer-informer-factory.
pub use kinformer_informer_factory as informer;

// kinformer-controller's modules under their own names (their docs are the crate's; a doc
// comment here would be glued in front of them).
pub use kinformer_controller::controller;
// kinformer-controller's `client`, named so beside kinformer-client's `client`.
#[cfg(feature = "kube")]
pub use kinformer_controller::client as cache_client;
#[cfg(feature = "kube")]
pub use kinformer_controller::finalizer;
#[cfg(feature = "kube")]
pub use kinformer_controller::owner;
pub use kinformer_controller::predicates;

// kinformer-admin's modules: the process's metrics and its admin server.
#[cfg(feature = "prometheus")]
pub use kinformer_admin::metrics;
#[cfg(feature = "server")]
pub use kinformer_admin::server;

/// Kubernetes Events written as client-go writes them: `events.k8s.io/v1` folded into series
/// (`tools/events`), and core/v1 Events counted and aggregated (`tools/record`, module
/// `record`): kinformer-events (feature `kube`).
#[cfg(feature = "kube")]
pub use kinformer_events as events;

/// Lease-based leader election with client-go's semantics: kinformer-leaderelection
/// (feature `kube`). [`Controller::run_elected`](controller::Controller::run_elected) runs a
/// controller's workers only while this replica leads.
#[cfg(feature = "kube")]
pub use kinformer_leaderelection as leaderelection;

/// A `kube::Client` with client-go's client-side rate limit and request metrics:
/// kinformer-client (feature `client`).
#[cfg(feature = "client")]
pub use kinformer_client as client;

/// A program's plumbing: clap flag groups to flatten into its parser (`ClientArgs`,
/// `LeaderElectionArgs`, `AdminArgs`, `LogArgs`, all of them as `Args`) and
/// `shutdown::signals()`, a token the first SIGTERM or SIGINT cancels (the second exits):
/// kinformer-runtime (feature `runtime`).
#[cfg(feature = "runtime")]
pub use kinformer_runtime as runtime;

/// Record a list/watch stream (`Recorder`), replay it on virtual time (`Replay`), perturb
/// it (`Perturbation`, `Chaos`) and check what the informer did (`check`); `offline_client`
/// for a factory whose informers all replay: kinformer-replay (feature `replay`).
#[cfg(feature = "replay")]
pub use kinformer_replay as replay;

/// The names a controller author uses daily: `use kinformer::prelude::*;`.
///
/// Traits are included so their methods are in scope (`queue.add`, `store.list`, …).
/// Error types are not (each layer has its own `Error`): name them through their module,
/// e.g. [`indexer::Error`].
pub mod prelude {
    // Objects and keys.
    pub use kinformer_core::{
        DeletedFinalStateUnknown, DeletedObject, DeltaObject, MetaObject, ObjectKey,
        deletion_handling_key, meta_namespace_key, split_key,
    };

    // Work queues.
    pub use kinformer_workqueue::{
        DelayingQueue, Queue, QueueConfig, RateLimiter, RateLimitingQueue, RateLimitingWorkQueue,
        default_controller_rate_limiter,
    };

    // Stores, indexes, listers.
    pub use kinformer_indexer::{
        IndexFunc, Indexer, Indexers, KnownObjects, Lister, NamespacedLister,
    };
    // The default informers' objects, read where they lie (`pod.spec()?.node_name()`).
    pub use kinformer_compact_store::{Cached, HasView, KubeObject};

    // List and watch.
    #[cfg(feature = "kube")]
    pub use kinformer_kube::{KubeListerWatcher, reflector_client};
    pub use kinformer_reflector::ListerWatcher;

    // Informers and handlers.
    pub use kinformer_informer_factory::{
        FifoKind, FilteringResourceEventHandler, InformerHandle, Registration,
        ResourceEventHandler, ResourceEventHandlerFuncs, SharedIndexInformer, SharedInformer,
        wait_for_cache_sync, wait_for_cache_sync_until,
    };
    #[cfg(feature = "kube")]
    pub use kinformer_informer_factory::{InformerOptions, SharedInformerFactory};

    // The worker loop.
    pub use kinformer_controller::controller::{
        Action, Context, Controller, ControllerConfig, EnqueueKeys,
    };
    #[cfg(feature = "kube")]
    pub use kinformer_controller::owner::{controller_of, controller_ref, is_controlled_by};
    pub use kinformer_controller::predicates::Predicate;
    /// How `Controller::run` is told to stop (tokio-util's token, re-exported).
    pub use tokio_util::sync::CancellationToken;
}
