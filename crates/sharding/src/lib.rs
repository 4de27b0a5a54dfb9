//! One controller across many replicas: the objects split into shards, each shard held by
//! one replica at a time through a Lease, each replica holding its fair share.
//!
//! Leader election lets one replica do all the work. [`ShardManager`] splits it: `N`
//! shards, shard `i` being range `i` of `N` of the 64-bit hash of each object's uid (or
//! namespace), and one Lease per shard, `<name>-shard-<i>-of-<N>`. Each replica holds about
//! `ceil(N / live replicas)` of them and runs, per held shard, whatever the caller asks —
//! usually a controller on the replica's one informer over every shard it holds
//! ([`ShardManager::selection`], kept up to date by the manager) through
//! [`Controller::run_shard`](kinformer_controller::controller::Controller::run_shard),
//! which takes a [`Shard`] (it implements
//! [`HeldShard`](kinformer_controller::controller::HeldShard)). The API server sends each
//! replica's informer only its shards' objects (Kubernetes 1.36 with the gate
//! `ShardedListAndWatch`; without it the informer filters).
//!
//! The facade re-exports this crate as `kinformer::sharding`; its module docs show a
//! whole sharded controller on a cluster, and `examples/sharded_controller.rs` runs one.
//!
//! # The rules
//!
//! Every retry period each replica, on its own:
//!
//! 1. **Says it is alive** by holding one of `N` membership Leases,
//!    `<name>-member-<j>-of-<N>` (any free one), and reads the others: the live replicas are the
//!    holders of membership Leases not yet expired. A replica beyond the `N`-th has nothing
//!    to do and waits for a free one.
//! 2. **Holds each shard Lease as a leader election holds its Lease**, with the very step
//!    the [`LeaderElector`](kinformer_leaderelection::LeaderElector) runs
//!    ([`LeaseAttempt`](kinformer_leaderelection::LeaseAttempt), the rules of
//!    [`kinformer_leaderelection`]): takes only a free one (no record, released, or seen
//!    unchanged for its lease duration on this replica's monotonic clock), writes over the
//!    version it read, renews every retry period, and stops the shard's work the moment
//!    its renew deadline passes without a renewal — before any other replica may take it.
//! 3. **Aims at its fair share**, `ceil(N / live)`: takes free shards while it holds fewer,
//!    and gives up shards while it holds more — at most
//!    [`max_moves`](ShardingConfig::max_moves) per
//!    [`move_period`](ShardingConfig::move_period), so that a replica joining, or one
//!    whose membership flickers, cannot make the shards churn. Giving up a shard stops its
//!    work first, waits for it to end, then releases the Lease, so that the next holder can
//!    start at its next retry and never overlaps.
//! 4. **Waits one retry period after starting** before it takes any shard, so that
//!    replicas started together see each other's membership first instead of each taking
//!    every shard and then handing them back.
//! 5. On shutdown, stops every shard's work and releases every Lease it holds.
//! 6. **Steps aside for a new shard count**: gives up, and does not take, the shards of its
//!    count that a replica of another count needs (see
//!    [Changing the shard count](#changing-the-shard-count)).
//!
//! The shard count and the locks are the swap points: [`ShardManager::new`] takes the
//! count in its config and a function from a Lease name to a
//! [`kinformer_leaderelection::Lock`] (a
//! [`LeaseLock`](kinformer_leaderelection::LeaseLock) in a cluster, a `MemoryLease` lock
//! in tests).
//!
//! # CPU-bound work
//!
//! The Leases are renewed by tasks on the same Tokio runtime as the shards' work, and Tokio
//! does not preempt a running task: a reconcile that computes for long on a runtime worker
//! thread holds up the renewals, and past the renew deadline the replica stops the shard's
//! work (rule 2) and loses the shard. Run CPU-bound work with `tokio::task::spawn_blocking`
//! (or on a pool of your own). `cargo xtask bench sharding --cpu` measured both: with the work
//! on the workers one process lost every shard every few seconds; on the blocking pool it held
//! them (BENCHMARKS.md, "sharding").
//!
//! # Changing the shard count
//!
//! Two counts cut the hash space differently, so shard 3 of 12 and shard 4 of 16 share
//! keys under different Leases. To change the count of a running deployment, roll out a
//! config that names the count it replaces, replica by replica:
//! `ShardingConfig::new("my-controller", 16).replacing([12])`.
//!
//! - Before a replica of the new count takes a shard, it *hands over* every overlapping
//!   Lease of the old count: writes it, over the version it read and only while it is free
//!   (released, or expired on this replica's clock), with a holder naming the new count
//!   (`kinformer.io/handed-over-to-16-shards`) and the longest lease a Lease can state.
//!   Only once all of them are handed over does it take the shard. A Lease an old replica
//!   still holds is left to it.
//! - A replica of the new count also holds a membership Lease of each count it replaces,
//!   so that the old replicas count it: their fair share does not grow as they stop one by
//!   one, and the shards a stopped one releases are left to the new count instead of being
//!   taken back (the last old replica would otherwise end up holding every shard, and every
//!   object, of the deployment).
//! - A replica of the old count that reads one of its Leases handed over gives up every
//!   shard it holds that shares a range of the new count with it (stopping the work first,
//!   as for any give-up), and takes none of them. The new count's replicas then find those
//!   Leases free at their next retry and hand them over in turn.
//! - So no key is worked on by replicas of both counts at once: a handed-over Lease is
//!   never taken by the old count again, and the new count works a range only once every
//!   old Lease over it is handed over. A key's old shard stops when its replica shuts down
//!   or gives it up, and its new shard starts a few retry periods later (the next retries of
//!   the new and the old replicas, plus the old shard's drain): within one lease duration
//!   with the defaults. `a_shard_count_rolled_out_replica_by_replica_never_overlaps_and_
//!   leaves_no_key_long_unowned` rolls 12 → 16 → 8 this way and checks both.
//! - Rolling back to a count handed over before works the same way
//!   (`ShardingConfig::new("my-controller", 12).replacing([16])`): the newer handover
//!   decides (the Leases' renew times), so the replicas of 16, which list 12 as replaced,
//!   do not take back what they handed over.
//! - One change at a time: start the next rollout once no replica of the count before
//!   runs. Once none runs, drop it from `replacing`: each replica reads every Lease of a
//!   replaced count at every retry.
//! - A new count rolled out without `replacing` does not look at the old count's Leases:
//!   its replicas and the old ones may then work the same keys at once.
//!
//! What holds, as for leader election: no two replicas *believe* they hold a shard at the
//! same time, given clocks that run at the same rate; a paused process is not fenced (see
//! [`kinformer_leaderelection`]'s docs). [`Shard::is_held`] answers for the deadline, to
//! check right before a write that must not happen twice.
//!
//! Two replicas sharing four shards, on in-memory Leases and Tokio's paused clock (in a
//! cluster: a `LeaseLock` per name, and the real clock):
//!
//! ```
//! use std::collections::HashMap;
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//!
//! use kinformer_leaderelection::testing::MemoryLease;
//! use kinformer_reflector::ShardKey;
//! use kinformer_sharding::{Shard, ShardManager, ShardingConfig};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), kinformer_sharding::Error> {
//! // The Leases by name, shared by both replicas.
//! let leases = Arc::new(Mutex::new(HashMap::<String, MemoryLease>::new()));
//! let replica = |identity: &'static str| {
//!     let leases = Arc::clone(&leases);
//!     ShardManager::new(ShardingConfig::new("my-controller", 4), move |lease: &str| {
//!         let mut leases = leases.lock().unwrap();
//!         leases.entry(lease.to_owned()).or_default().lock(identity)
//!     })
//! };
//! let (a, b) = (Arc::new(replica("a")?), Arc::new(replica("b")?));
//!
//! let shutdown = CancellationToken::new();
//! let runs: Vec<_> = [&a, &b]
//!     .into_iter()
//!     .map(|manager| {
//!         let (manager, shutdown) = (Arc::clone(manager), shutdown.clone());
//!         tokio::spawn(async move {
//!             manager
//!                 .run(&shutdown, |shard: Shard| async move {
//!                     // This shard's objects, for a sharded informer; a controller runs
//!                     // here with `Controller::run_shard(&shard, ..)`.
//!                     let _selector = shard.selector(ShardKey::Uid);
//!                     // The work runs until the shard is lost, given up, or shut down.
//!                     shard.token().cancelled().await;
//!                 })
//!                 .await
//!         })
//!     })
//!     .collect();
//!
//! tokio::time::sleep(Duration::from_secs(10)).await;
//! assert_eq!((a.held().len(), b.held().len()), (2, 2));
//! assert_eq!(a.live_replicas(), 2);
//!
//! // Shutdown stops every shard's work and releases every Lease.
//! shutdown.cancel();
//! for run in runs {
//!     run.await.unwrap()?;
//! }
//! assert!(a.held().is_empty() && b.held().is_empty());
//! # Ok(())
//! # }
//! ```
//!
//! # Where the pieces live
//!
//! The shard selector, the hash and the sharded lister-watcher stay in
//! kinformer-reflector ([`kinformer_reflector::ShardSelector`],
//! [`kinformer_reflector::ShardedListerWatcher`]): the reflector's own `ListOptions` and
//! `WatchOptions` carry a `ShardSelector`, so they cannot live above it. This crate holds
//! what decides *which replica holds which shard*.

#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod config;
mod handover;
mod manager;
#[cfg(feature = "prometheus")]
pub mod metrics;
mod selection;
mod shard;

pub use config::ShardingConfig;
pub use manager::{ShardManager, ShardManagerStatus};
pub use shard::Shard;

/// What [`ShardManager`] fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration breaks a rule, named here.
    #[error("invalid sharding config: {0}")]
    InvalidConfig(String),
    /// The locks do not all have the same, non-empty identity.
    #[error("every lock must have the same non-empty identity, got {0:?} and {1:?}")]
    Identity(String, String),
    /// [`ShardManager::run`] was called while a run of the same manager was going on.
    #[error("this shard manager is already running")]
    AlreadyRunning,
}
