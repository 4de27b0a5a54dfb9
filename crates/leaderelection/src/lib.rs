//! Lease-based leader election with client-go's semantics: one replica of a controller acts,
//! the others stand by and take over, interoperable with client-go electors on the same Lease.
//!
//! ```
//! use std::time::Duration;
//! use kinformer_leaderelection::testing::{MemoryLease, tokio_clock};
//! use kinformer_leaderelection::{LeaderElectionConfig, LeaderElector, TermEnd};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), kinformer_leaderelection::Error> {
//! // Two replicas share one lease (here in memory, on a paused clock; in a cluster a
//! // `LeaseLock` over a coordination.k8s.io/v1 Lease and the real clock).
//! let lease = MemoryLease::new();
//! let config = LeaderElectionConfig { release_on_cancel: true, ..Default::default() };
//! let replica = |id: &str| {
//!     LeaderElector::builder(lease.lock(id)).config(config.clone()).clock(tokio_clock()).build()
//! };
//! let (a, b) = (replica("a")?, replica("b")?);
//!
//! // `a` leads for 20 s, then stops (and releases the lease, as configured).
//! let stop_a = CancellationToken::new();
//! let a_run = tokio::spawn({
//!     let stop_a = stop_a.clone();
//!     async move {
//!         a.run(&stop_a, |leading| async move {
//!             // The leader's work: runs until leadership ends, then stops.
//!             leading.lost().await;
//!         })
//!         .await
//!     }
//! });
//! tokio::time::sleep(Duration::from_secs(1)).await;
//! assert_eq!(lease.record().unwrap().holder_identity, "a");
//!
//! // `b` is a warm standby: its work starts only once it holds the lease.
//! let b_run = tokio::spawn({
//!     let b = b.clone();
//!     async move { b.run_once(&CancellationToken::new(), |_leading| async {}).await }
//! });
//! tokio::time::sleep(Duration::from_secs(20)).await;
//! assert_eq!(b.get_leader().as_deref(), Some("a"));
//! assert!(!b.is_leader());
//!
//! stop_a.cancel();
//! assert_eq!(a_run.await.unwrap()?, TermEnd::Cancelled);
//! // `b` took over at its next retry (2 to 4.4 s), then its work returned.
//! assert_eq!(b_run.await.unwrap()?, TermEnd::WorkReturned);
//! assert_eq!(lease.record().unwrap().leader_transitions, 1);
//! # Ok(())
//! # }
//! ```
//!
//! In a cluster, with the Lease lock and the work stopped by its cancellation token:
//!
//! ```no_run
//! use kinformer_leaderelection::{LeaderElectionConfig, LeaderElector, LeaseLock};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run(client: kube::Client) -> Result<(), kinformer_leaderelection::Error> {
//! let pod = std::env::var("POD_NAME").unwrap_or_else(|_| "dev".into());
//! let lock = LeaseLock::new(client, "kube-system", "my-controller", pod);
//! let elector = LeaderElector::new(LeaderElectionConfig::default(), lock)?;
//! let shutdown = CancellationToken::new();
//! elector
//!     .run(&shutdown, |leading| async move {
//!         // Start the workers with `leading.token().clone()` and return once they stopped;
//!         // check `leading.is_leading()` before any action that must not happen twice.
//!         leading.lost().await;
//!     })
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! # The rules
//!
//! Each candidate runs the same loop as client-go's `tools/leaderelection`, with its
//! defaults (lease 15 s, renew deadline 10 s, retry 2 s, jitter 1.2) and its validation
//! ([`LeaderElectionConfig::validate`]):
//!
//! 1. **Acquire** only a lock that is free: no record, an empty holder (released), or a
//!    record this candidate has seen *unchanged for the lease duration the record states*,
//!    measured on its own monotonic clock from the moment it first saw that record. The
//!    holder's timestamps are never read for this: clocks may be skewed by any amount.
//!    Candidates retry every retry period plus up to 1.2 times as much (jitter).
//! 2. **Write with optimistic concurrency**: every write goes over the version last read
//!    (the Lease's resourceVersion), so of two candidates racing for a free lock one wins and
//!    the other gets a conflict. The leader renews every retry period, first over the
//!    version it last wrote (the fast path), reading again only if that fails.
//! 3. **Step down at the renew deadline**: the leader leads until the moment its last
//!    successful renewal was *sent* plus the renew deadline. When that passes without a new
//!    renewal (server unreachable, requests hanging, the record taken), it stops leading —
//!    the [`Leading`] token is cancelled — before any other candidate may start, which is at
//!    least a lease duration after that write.
//! 4. **Release on cancel** ([`LeaderElectionConfig::release_on_cancel`]): when the run is
//!    cancelled, the leader writes an empty holder with a 1 s lease (as client-go), after
//!    its work has returned, so a standby takes over at its next retry.
//!
//! The leading work gets a [`Leading`] handle: a cancellation token cancelled the moment
//! leadership ends, and [`Leading::is_leading`], which reads the deadline against the clock.
//! Hooks ([`LeaderCallbacks`]) report started / renewed / stopped leading and every new
//! leader observed; [`HealthzAdaptor`] is client-go's health check; [`MetricsProvider`]
//! records client-go's metrics (`prometheus` feature: `PrometheusMetricsProvider`).
//!
//! # What is guaranteed, and what is not
//!
//! Guaranteed, given that candidates' clocks run at the same *rate* (within the ratio of
//! lease duration to renew deadline, 1.5 with the defaults): no two candidates *believe*
//! they lead at the same time, counting a leader's belief up to its renew deadline (rule
//! 3). A new leader is elected within about a lease duration plus 2.2 retry periods after
//! the old one stopped renewing (sooner after a release).
//!
//! Not guaranteed: that no two processes *act* at the same time. Leader election is not a
//! fence (client-go's package docs say the same). A leader that is paused — SIGSTOP, a
//! frozen VM, a long stop-the-world pause, a starved runtime — believes it leads while it
//! cannot check, and wakes up with its deadline long past and another leader elected. Until
//! the elector's timer fires and cancels the token, its work may still run; an action that
//! started before the deadline may land after it. What limits that here:
//!
//! - the deadline is counted from when the last renewal was *sent*, so a renewal whose
//!   answer arrives after a pause does not extend leadership;
//! - [`Leading::is_leading`] is false the instant the deadline passes, without waiting for
//!   the elector to run: check it right before any action that must not be duplicated;
//! - the token is cancelled at the deadline, or at once when the record names another
//!   holder, so cooperative work stops promptly.
//!
//! Work that must never overlap needs a fence in the system it writes to (a generation
//! number checked on write, a resourceVersion precondition on the objects it updates).
//!
//! # Differences from client-go
//!
//! - The renew deadline is counted from when the last successful renewal was sent, not
//!   from the start of the polling round that follows it: the leader stops up to one retry
//!   period plus one request latency earlier, and never later than the others may start.
//! - A leader that reads a record naming another holder stops leading at once; client-go
//!   keeps its context alive until its renew deadline.
//! - A standby retries the moment the lease it watches expires on its clock, rather than at
//!   its next jittered retry, so a dead leader is replaced up to 2.2 retry periods sooner.
//! - Release checks the record it has just read (and writes over that version), not the
//!   one it saw last, so it never clears a lease someone else acquired meanwhile; and it
//!   waits for the leading work to return.
//! - [`LeaderElectionConfig::validate`] also rejects a lease duration that is not a whole
//!   number of seconds: the record holds whole seconds, and client-go's truncation can
//!   make the lease others wait out shorter than the leader's renew deadline.
//! - [`LeaderElector::is_leader`] says whether this candidate leads *now*; client-go's
//!   `IsLeader` says whether the last record it saw names it. [`LeaderElector::run`]
//!   goes back to waiting after a lost term (a warm standby);
//!   [`run_once`](LeaderElector::run_once) is client-go's one-term `Run`.
//! - [`LeaderCallbacks::stopped_leading`] is called only after leading (client-go calls
//!   `OnStoppedLeading` on every exit); the leading work is a spawned future, not a
//!   callback.
//! - Not implemented: coordinated leader election (`strategy`, `preferredHolder`, alpha in
//!   client-go) and Events on the lock.
//!
//! Interoperability: [`LeaseLock`] reads and writes the Lease exactly as client-go's
//! `LeaseLock` does (`holderIdentity`, `leaseDurationSeconds`, `acquireTime`, `renewTime`
//! as microsecond times, `leaseTransitions`), so Go and Rust candidates can share one
//! Lease. The workspace tests that under kills, pauses and partitions with client-go
//! v0.36.3 electors.
//!
//! One thing to know when mixing them with a retry period under a second: client-go notices
//! a change of the record by comparing it as JSON in which times have whole seconds, so
//! renewals within one second look like one unchanged record to a client-go standby. It
//! then counts the lease from the first renewal of the holder's last second, and may take
//! over up to a second sooner than a lease after the last renewal (this crate compares
//! records exactly). Keep the lease duration more than a second above the renew deadline
//! in that case (the tests use 4 s and 2.5 s). With client-go's 2 s retry period every
//! renewal changes the seconds, and this does not arise.
//!
//! # Why not kube-lease-manager
//!
//! kube-lease-manager (0.13, on kube 5) is the one maintained Rust crate on kube 5. It was
//! read before writing this one and not built on, because it lacks what client-go
//! guarantees: a lease's expiry is computed from the holder's `renewTime` and the local
//! wall clock, so it depends on clock skew between nodes; a holder whose renewals fail
//! has no renew deadline and keeps believing it leads until it sees another holder; an
//! expired lease is force-released and re-taken with patches that are not conditional on
//! the version read; a released Lease has its fields nulled rather than client-go's empty
//! holder; and it has no cancellation handed to the leading work, health check or metrics.
//!
//! # Kubernetes version
//!
//! Like every library crate of the workspace, this one picks no k8s-openapi version
//! feature: the program that uses it does (`k8s-openapi = { version = "0.29", features =
//! ["v1_37"] }`). `coordination.k8s.io/v1` Leases exist since Kubernetes 1.14.

#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod attempt;
mod callbacks;
mod config;
mod elector;
mod error;
mod health;
mod leading;
mod lease_lock;
mod lock;
mod metrics;
#[cfg(feature = "prometheus")]
mod prometheus;
mod record;
mod status;
#[cfg(any(test, feature = "test-util"))]
pub mod testing;

pub use attempt::{Attempt, LeaseAttempt, ObservedRecord, Release};
pub use callbacks::{LeaderCallbacks, NoCallbacks};
pub use config::{JITTER_FACTOR, LeaderElectionConfig};
pub use elector::{LeaderElector, LeaderElectorBuilder, TermEnd};
pub use error::{BoxError, Error};
pub use health::HealthzAdaptor;
/// What [`Lock`]'s methods return (kinformer-core's, the one async idiom of the swap points).
pub use kinformer_core::BoxFuture;
pub use leading::Leading;
pub use lease_lock::LeaseLock;
pub use lock::Lock;
pub use metrics::{LeaderMetric, MetricsProvider, NoopMetricsProvider, set_metrics_provider};
#[cfg(feature = "prometheus")]
pub use prometheus::PrometheusMetricsProvider;
pub use record::LeaderElectionRecord;
pub use status::LeaseStatus;

/// Where the elector reads time and waits: kinformer-core's clock, shared with the workqueue
/// and the event recorder.
///
/// Every rule of the election is about durations (a lease unchanged for a lease duration, a
/// renewal older than the renew deadline), and tests must run those rules without waiting
/// them out. Decisions use only [`Clock::now`], a monotonic clock; [`Clock::wall_now`] is
/// only written into the record (`acquireTime`, `renewTime`) for people to read, so a wall
/// clock that jumps changes nothing. [`SystemClock`] is the default;
/// `testing::tokio_clock()` (feature `test-util`) is a [`FakeClock`] that follows Tokio's
/// clock, which a test can pause and advance.
pub use kinformer_core::clock::Clock;
pub use kinformer_core::clock::{FakeClock, RealClock, Sleep, TimeListener, TokioClock};
/// kinformer-core's forwarding macro for a [`Clock`] decorator.
pub use kinformer_core::forward_clock;

/// The default clock: kinformer-core's `RealClock` under the name this crate has always
/// used ([`Instant::now`](std::time::Instant::now),
/// [`SystemTime::now`](std::time::SystemTime::now), sleeps on core's timer thread).
pub use kinformer_core::clock::RealClock as SystemClock;
