//! One controller across many replicas: kinformer-sharding (feature `kube`), re-exported
//! whole — [`ShardManager`], [`ShardingConfig`], [`Shard`] and its [`Error`].
//!
//! The objects split into `N` shards of their uid's (or namespace's) hash, each held by
//! one replica at a time through a Lease, each replica holding its fair share. A replica
//! runs one informer over all the shards it holds ([`ShardManager::selection`], which the
//! manager widens before a shard's work starts and narrows after it ends) and, per held
//! shard, a controller on that informer's objects of the shard
//! ([`Controller::watch_where`](crate::controller::Controller::watch_where)) through
//! [`Controller::run_shard`](crate::controller::Controller::run_shard). The rules are in
//! [kinformer-sharding's docs](kinformer_sharding); the Leases are held with
//! kinformer-leaderelection's lease step, as [`crate::leaderelection`]'s elector holds
//! its one Lease.
//!
//! A sharded controller on a cluster:
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer::controller::{Action, Context, Controller};
//! use kinformer::informer::SharedIndexInformer;
//! use kinformer::leaderelection::LeaseLock;
//! use kinformer::prelude::*;
//! use kinformer::reflector::ShardKey;
//! use kinformer::sharding::{Shard, ShardManager, ShardingConfig};
//!
//! async fn reconcile(key: ObjectKey, ctx: Context<()>) -> Result<Action, kube::Error> {
//!     if !ctx.is_leading() {
//!         return Ok(Action::Done); // the shard's next holder does it
//!     }
//!     // ... act on `key`
//!     Ok(Action::Done)
//! }
//!
//! # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let identity = std::env::var("POD_NAME")?;
//! let config = ShardingConfig::new("my-controller", 12);
//! let manager = ShardManager::new(config, |lease: &str| {
//!     LeaseLock::new(client.clone(), "kube-system", lease, identity.clone())
//! })?;
//! // One informer for the pods of every shard this replica holds.
//! let pods = kube::Api::<Pod>::all(client.clone());
//! let informer = SharedIndexInformer::builder(KubeListerWatcher::new(pods))
//!     .shards(manager.selection(ShardKey::Uid))
//!     .build();
//! let running = informer.start()?;
//! let shutdown = CancellationToken::new();
//! manager
//!     .run(&shutdown, move |shard: Shard| {
//!         let informer = informer.clone();
//!         async move {
//!             // A controller for this shard's pods while the shard is held.
//!             let controller = Controller::<ObjectKey>::new("my-controller");
//!             let selector = shard.selector(ShardKey::Uid);
//!             let Ok(registration) =
//!                 controller.watch_where(&informer, move |pod: &Pod| selector.matches(pod))
//!             else {
//!                 return;
//!             };
//!             controller.run_shard(&shard, reconcile, ()).await;
//!             registration.remove();
//!         }
//!     })
//!     .await?;
//! running.stop().await?;
//! # Ok(())
//! # }
//! ```

pub use kinformer_sharding::*;
