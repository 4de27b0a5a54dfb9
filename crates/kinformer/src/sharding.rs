//! One controller across many replicas: kinformer-sharding (feature `kube`), re-exported
//! whole — [`ShardManager`], [`ShardingConfig`], [`Shard`] and its [`Error`].
//!
//! The objects split into `N` shards of their uid's (or namespace's) hash, each held by
//! one replica at a time through a Lease, each replica holding its fair share and running,
//! per held shard, a sharded informer and a controller through
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
//! let shutdown = CancellationToken::new();
//! let pods = kube::Api::<Pod>::all(client.clone());
//! manager
//!     .run(&shutdown, move |shard: Shard| {
//!         let pods = pods.clone();
//!         async move {
//!             // This shard's pods only, and a controller for them while the shard is held.
//!             let informer = SharedIndexInformer::builder(KubeListerWatcher::new(pods))
//!                 .shard(shard.selector(ShardKey::Uid))
//!                 .build();
//!             let controller = Controller::<ObjectKey>::new("my-controller");
//!             let _ = controller.watch(&informer);
//!             let Ok(running) = informer.start() else { return };
//!             controller.run_shard(&shard, reconcile, ()).await;
//!             let _ = running.stop().await;
//!         }
//!     })
//!     .await?;
//! # Ok(())
//! # }
//! ```

pub use kinformer_sharding::*;
