//! The [`Controller`](controller::Controller) runner over kinformer's informers, and the kit
//! around it: a rate-limited work queue plus N workers running your reconcile function
//! (client-go's worker loop), what feeds the queue ([`watch`](controller::Controller::watch),
//! `owns`, [`watches`](controller::Controller::watches), [`predicates`]), `finalizer`, and
//! controller-runtime's controller metrics. The process's admin side (the registry,
//! `/metrics`, `/healthz`, `/readyz`, `/debug/diagnostics`) is kinformer-admin's.
//!
//! # Where it sits
//!
//! Above the informers and the work queue, below the facade:
//!
//! ```text
//! kinformer-core, kinformer-workqueue, kinformer-informer-factory (+ kinformer-leaderelection, feature `kube`)
//!     ◀── kinformer-controller (this crate)
//!         ◀── kinformer (the facade: `kinformer::controller`, `::predicates`, `::finalizer`
//!                        are this crate's modules; its prelude names
//!                        `Controller`, `Action`, `Context`, `ControllerConfig`, `EnqueueKeys`
//!                        and `Predicate`)
//! ```
//!
//! A program usually depends on the facade (`kinformer`), which re-exports this crate
//! module by module; the types are the same either way. Sharding across replicas
//! (kinformer-sharding, `kinformer::sharding`) lives above this crate and runs its
//! controllers through [`Controller::run_shard`](controller::Controller::run_shard).
//!
//! | module | what it does |
//! |---|---|
//! | [`controller`] | the runner: the queue, the workers, [`Action`](controller::Action) and [`Context`](controller::Context); the handlers that enqueue keys; `run_elected` and `run_shard` (feature `kube`) |
//! | `owner` | controller owner references as client-go makes and reads them: `controller_ref`, `controller_of`, `is_controlled_by` (feature `kube`) |
//! | [`predicates`] | which updates are worth a reconcile (generation, labels, annotations changed: feature `kube`) |
//! | `finalizer` | cleanup before an object goes away (feature `kube`) |
//! | `metrics` | controller-runtime's controller metrics, registered in a prometheus-client registry (feature `prometheus`) |
//!
//! # Example
//!
//! An informer (here over an in-memory lister-watcher) feeds pod keys to a controller whose
//! reconcile reads the pod back from the informer's cache:
//!
//! ```
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_controller::controller::{Action, Context, Controller};
//! use kinformer_core::ObjectKey;
//! use kinformer_indexer::Lister;
//! use kinformer_informer_factory::SharedIndexInformer;
//! use kinformer_reflector::ListPage;
//! use kinformer_reflector::fake::{FakeListerWatcher, watch_channel};
//! use tokio_util::sync::CancellationToken;
//!
//! struct Ctx {
//!     pods: Lister<Pod>,
//!     seen: tokio::sync::mpsc::UnboundedSender<String>,
//! }
//!
//! async fn reconcile(key: ObjectKey, ctx: Context<Ctx>) -> Result<Action, kinformer_indexer::Error> {
//!     let pod = ctx.pods.namespaced(key.namespace().unwrap_or_default()).get(key.name())?;
//!     let _ = ctx.seen.send(pod.metadata.name.clone().unwrap_or_default());
//!     Ok(Action::Done)
//! }
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let mut pod = Pod::default();
//! pod.metadata.namespace = Some("default".into());
//! pod.metadata.name = Some("web-0".into());
//! pod.metadata.resource_version = Some("1".into());
//! let server = FakeListerWatcher::new();
//! server.on_list(move |_| Ok(ListPage::new(vec![pod.clone()], "1")));
//! let (_watch, stream) = watch_channel();
//! server.push_watch(Ok(stream));
//! let informer = SharedIndexInformer::new(server, Duration::ZERO);
//!
//! let controller = Controller::<ObjectKey>::new("pods").workers(2);
//! controller.watch(&informer)?; // every event enqueues the pod's key
//! let handle = informer.start()?;
//!
//! let (seen, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
//! let context = Ctx { pods: informer.lister(), seen };
//! let cancel = CancellationToken::new();
//! let run = tokio::spawn(controller.run(reconcile, context, cancel.clone()));
//! assert_eq!(seen_rx.recv().await.as_deref(), Some("web-0"));
//! cancel.cancel(); // drain the queue, wait for the workers
//! run.await?;
//! handle.stop().await?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Differences from client-go
//!
//! Against client-go's controllers (the worker loop they write by hand, the sample-controller's
//! handlers, `metav1`'s owner reference helpers) and controller-runtime:
//!
//! - `Controller::owns` enqueues a child's owner only when the controller's cache holds an
//!   owner of that key **with the reference's uid**; the sample-controller's `handleObject`
//!   looks the owner up by name alone. An owner deleted and created again under the same
//!   name is another object, and the first one's children (still waiting for the garbage
//!   collector) do not reconcile it. Its owners' informer must be given to `watch` or
//!   `watch_with` first (`OwnsError::OwnerNotWatched` otherwise).
//! - `owner::is_controlled_by` says no for an owner without a uid; client-go's
//!   `IsControlledBy` matches it with a reference whose uid is empty too. Neither comes from
//!   the API server.
//! - [`ControllerConfig::reconcile_timeout`](controller::ControllerConfig::reconcile_timeout)
//!   drops the reconcile's future when it expires (and cancels its context); controller-runtime's
//!   `ReconciliationTimeout` can only cancel the `context.Context` and wait for the
//!   reconcile to return. A timed-out reconcile counts as an error as well as a timeout.
//!
//! # Features
//!
//! - `kube` (default): [`owns`](controller::Controller::owns), `owner`, the metadata
//!   [`predicates`], `finalizer`, `Controller::run_elected` (leader election) and
//!   `Controller::run_shard`.
//! - `prometheus`: [`metrics::register`], the controllers' metrics under controller-runtime's
//!   names (prometheus-client). The process's registry, `/metrics`, `/healthz`, `/readyz`
//!   and `/debug/diagnostics` are kinformer-admin's: this crate runs controllers.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

#[cfg(feature = "kube")]
pub mod client;
pub mod controller;
#[cfg(feature = "kube")]
pub mod finalizer;
#[cfg(feature = "prometheus")]
pub mod metrics;
#[cfg(feature = "kube")]
pub mod owner;
pub mod predicates;
