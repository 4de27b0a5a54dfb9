//! One controller across many replicas: the objects split into shards, each shard held by
//! one replica at a time through a Lease, each replica holding its fair share.
//!
//! Leader election lets one replica do all the work. [`ShardManager`] splits it: `N`
//! shards, shard `i` being range `i` of `N` of the 64-bit hash of each object's uid (or
//! namespace), and one Lease per shard, `<name>-shard-<i>`. Each replica holds about
//! `ceil(N / live replicas)` of them and runs, per held shard, whatever the caller asks —
//! usually a sharded informer (see [`kinformer_reflector::ShardSelector`]) and a
//! controller through
//! [`Controller::run_shard`](kinformer_controller::controller::Controller::run_shard),
//! which takes a [`Shard`] (it implements
//! [`HeldShard`](kinformer_controller::controller::HeldShard)). The API server sends each
//! informer only its shard's objects (Kubernetes 1.36 with the gate `ShardedListAndWatch`;
//! without it the informer filters).
//!
//! The facade re-exports this crate as `kinformer::sharding`; its module docs show a
//! whole sharded controller on a cluster, and `examples/sharded_controller.rs` runs one.
//!
//! # The rules
//!
//! Every retry period each replica, on its own:
//!
//! 1. **Says it is alive** by holding one of `N` membership Leases,
//!    `<name>-member-<j>` (any free one), and reads the others: the live replicas are the
//!    holders of membership Leases not yet expired. A replica beyond the `N`-th has nothing
//!    to do and waits for a free one.
//! 2. **Holds each shard Lease as a leader election holds its Lease**, with the very step
//!    the [`LeaderElector`](kinformer_leaderelection::LeaderElector) runs
//!    ([`LeaseAttempt`], the rules of
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
//!
//! The shard count and the locks are the swap points: [`ShardManager::new`] takes the
//! count in its config and a function from a Lease name to a
//! [`kinformer_leaderelection::Lock`] (a
//! [`LeaseLock`](kinformer_leaderelection::LeaseLock) in a cluster, a `MemoryLease` lock
//! in tests). The count must be the same on every replica: changing it is a new
//! deployment (new names), as two counts would cut the hash space differently.
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

use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kinformer_leaderelection::{
    Attempt, Clock, LeaderElectionConfig, LeaseAttempt, Lock, ObservedRecord, Release, TokioClock,
};
use kinformer_reflector::{ShardKey, ShardRange, ShardSelector};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

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

/// A [`ShardManager`]'s settings.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ShardingConfig {
    /// The prefix of the Lease names: `<name>-shard-<i>` and `<name>-member-<j>`.
    pub name: String,
    /// How many shards (at least 1). The same on every replica.
    pub shards: u32,
    /// Lease duration, renew deadline and retry period, as for leader election (client-go's
    /// 15 s, 10 s and 2 s by default), validated by the same rules. Its `name`,
    /// `release_on_cancel` (always on here) and `request_timeout` are not used; every Lease
    /// request is bounded by the retry period.
    pub timing: LeaderElectionConfig,
    /// How many shards a replica gives up to re-balance, at most, per
    /// [`move_period`](Self::move_period) (at least 1). Shards of a replica that died are
    /// not moves: they are taken as soon as they expire.
    pub max_moves: u32,
    /// The window of [`max_moves`](Self::max_moves).
    pub move_period: Duration,
}

impl ShardingConfig {
    /// `shards` shards under Leases named after `name`, client-go's leader-election timing,
    /// and at most 2 shards given up per lease duration (15 s).
    pub fn new(name: impl Into<String>, shards: u32) -> Self {
        Self {
            name: name.into(),
            shards,
            timing: LeaderElectionConfig::default(),
            max_moves: 2,
            move_period: Duration::from_secs(15),
        }
    }

    /// Checks the rules: a Lease name prefix, at least one shard and one move per period,
    /// and the leader-election timing rules.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the broken rule.
    pub fn validate(&self) -> Result<(), Error> {
        if self.name.is_empty() {
            return Err(Error::InvalidConfig("the name must not be empty".into()));
        }
        if self.shards == 0 {
            return Err(Error::InvalidConfig("at least one shard".into()));
        }
        if self.max_moves == 0 || self.move_period.is_zero() {
            return Err(Error::InvalidConfig(
                "at least one move per non-zero move period".into(),
            ));
        }
        self.timing
            .validate()
            .map_err(|e| Error::InvalidConfig(e.to_string()))
    }

    /// The fair share of `live` replicas: `ceil(shards / live)` (all of them for none).
    pub fn fair_share(&self, live: usize) -> usize {
        let shards = self.shards as usize;
        shards.div_ceil(live.max(1))
    }

    /// The grace reconciles in flight get when a shard is lost, as under leader election:
    /// the lease duration minus the renew deadline, the time until another replica may
    /// take the shard.
    pub fn grace(&self) -> Duration {
        self.timing
            .lease_duration
            .saturating_sub(self.timing.renew_deadline)
    }
}

/// One shard this replica holds, handed to the work [`ShardManager::run`] starts for it.
/// Cheap to clone.
#[derive(Clone)]
pub struct Shard {
    index: u32,
    count: u32,
    range: ShardRange,
    lease: Arc<str>,
    token: CancellationToken,
    deadline: watch::Receiver<Instant>,
    grace: Duration,
}

impl fmt::Debug for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shard")
            .field("index", &self.index)
            .field("count", &self.count)
            .field("lease", &self.lease)
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

impl Shard {
    /// The shard's index, below [`count`](Self::count).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The shard count.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The name of the shard's Lease.
    pub fn lease(&self) -> &str {
        &self.lease
    }

    /// The shard's range of the hash space: range `index` of `count`.
    pub fn range(&self) -> ShardRange {
        self.range
    }

    /// The selector of this shard's objects by `key` (the uid or the namespace).
    pub fn selector(&self, key: ShardKey) -> ShardSelector {
        ShardSelector::range(key, self.range)
    }

    /// Cancelled the moment this replica stops holding the shard (lost, given up, or
    /// shutdown). The shard's work must stop then.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Whether this replica still holds the shard: false once the token is cancelled, and
    /// as soon as the renew deadline has passed, even before the task that cancels the token
    /// has run.
    pub fn is_held(&self) -> bool {
        !self.token.is_cancelled() && Instant::now() < *self.deadline.borrow()
    }

    /// How long reconciles in flight get to return once the shard is lost (see
    /// [`ShardingConfig::grace`]).
    pub fn grace(&self) -> Duration {
        self.grace
    }
}

/// What a running [`ShardManager`] shows.
#[derive(Default)]
struct Status {
    held: BTreeSet<u32>,
    live: usize,
}

/// Holds this replica's fair share of `N` shard Leases and runs work for each held shard:
/// see the [crate docs](crate).
pub struct ShardManager<L> {
    config: ShardingConfig,
    identity: String,
    shard_locks: Vec<(String, L)>,
    member_locks: Vec<(String, L)>,
    ranges: Vec<ShardRange>,
    status: Mutex<Status>,
    moves: AtomicU64,
    running: AtomicBool,
}

impl<L> fmt::Debug for ShardManager<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardManager")
            .field("config", &self.config)
            .field("identity", &self.identity)
            .field("held", &self.held())
            .finish_non_exhaustive()
    }
}

/// One Lease as this replica sees it.
struct Slot<'a, L> {
    index: u32,
    range: Option<ShardRange>,
    name: &'a str,
    lock: &'a L,
    /// Whether the Lease's state is known: the last read or write of it succeeded.
    known: bool,
    /// The record last read or written, and when this replica first saw it so (`None`:
    /// none seen, or there is no record).
    observed: Option<ObservedRecord>,
    held: Option<Held>,
}

/// A Lease this replica holds.
struct Held {
    deadline: watch::Sender<Instant>,
    term: CancellationToken,
    /// The shard's work (none for a membership Lease).
    work: Option<JoinHandle<()>>,
}

impl<L> ShardManager<L> {
    /// The identity of this replica (its locks').
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The config.
    pub fn config(&self) -> &ShardingConfig {
        &self.config
    }

    /// The shards this replica holds now.
    pub fn held(&self) -> Vec<u32> {
        self.lock_status().held.iter().copied().collect()
    }

    /// The live replicas seen at the last retry (this one included once it is a member).
    pub fn live_replicas(&self) -> usize {
        self.lock_status().live
    }

    /// How many shards this replica gave up to re-balance so far.
    pub fn moves(&self) -> u64 {
        self.moves.load(Ordering::Relaxed)
    }

    fn lock_status(&self) -> std::sync::MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<L: Lock> ShardManager<L> {
    /// A manager for `config.shards` shards, with `lock(name)` the lock of the Lease
    /// `name` for this replica (every lock with the same identity).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`], or [`Error::Identity`] when the locks' identities differ
    /// or are empty.
    pub fn new(config: ShardingConfig, lock: impl Fn(&str) -> L) -> Result<Self, Error> {
        config.validate()?;
        let make = |kind: &str| -> Vec<(String, L)> {
            (0..config.shards)
                .map(|i| {
                    let name = format!("{}-{kind}-{i}", config.name);
                    let l = lock(&name);
                    (name, l)
                })
                .collect()
        };
        let ranges = (0..config.shards)
            .map(|i| ShardRange::index_of(i, config.shards))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        let shard_locks = make("shard");
        let member_locks = make("member");
        let identity = shard_locks
            .first()
            .map(|(_, l)| l.identity().to_owned())
            .unwrap_or_default();
        for (_, l) in shard_locks.iter().chain(&member_locks) {
            if identity.is_empty() || l.identity() != identity {
                return Err(Error::Identity(identity, l.identity().to_owned()));
            }
        }
        Ok(Self {
            config,
            identity,
            shard_locks,
            member_locks,
            ranges,
            status: Mutex::new(Status::default()),
            moves: AtomicU64::new(0),
            running: AtomicBool::new(false),
        })
    }

    /// Holds this replica's fair share of the shards until `shutdown` is cancelled, and
    /// runs `work` for each shard it takes, with the [`Shard`] whose token is cancelled
    /// when the shard is lost or given up. Then stops every shard's work, waits for it
    /// (up to the grace, then aborts it), and releases every Lease.
    ///
    /// A shard's work should run until its token is cancelled; if it returns earlier the
    /// shard stays held, idle, until it is given up.
    ///
    /// Dropping the returned future instead of cancelling `shutdown` cancels every shard's
    /// token at once (the tasks that renew them are gone) but releases nothing: the Leases
    /// expire, and the other replicas take them after the lease duration.
    ///
    /// # Errors
    /// [`Error::AlreadyRunning`].
    pub async fn run<'a, F, Fut>(
        &'a self,
        shutdown: &CancellationToken,
        work: F,
    ) -> Result<(), Error>
    where
        F: Fn(Shard) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        if self.running.swap(true, Ordering::AcqRel) {
            return Err(Error::AlreadyRunning);
        }
        let _running = Running(self);
        let slots = |locks: &'a [(String, L)], ranges: &[ShardRange]| -> Vec<Slot<'a, L>> {
            locks
                .iter()
                .zip(0..)
                .map(|((name, lock), index)| Slot {
                    index,
                    range: ranges.get(index as usize).copied(),
                    name,
                    lock,
                    known: false,
                    observed: None,
                    held: None,
                })
                .collect()
        };
        let mut shards = slots(&self.shard_locks, &self.ranges);
        let mut members = slots(&self.member_locks, &[]);
        let mut releases: VecDeque<Instant> = VecDeque::new();
        let retry = self.config.timing.retry_period;
        // Where this replica starts looking for free Leases: spread over the replicas.
        let offset = (kinformer_reflector::fnv1a_64(self.identity.as_bytes())
            % u64::from(self.config.shards)) as usize;
        let mut first = true;
        tracing::info!(identity = %self.identity, shards = self.config.shards, name = %self.config.name, "shard manager started");
        loop {
            let started = Instant::now();
            self.tick(
                &mut shards,
                &mut members,
                &mut releases,
                offset,
                first,
                &work,
            )
            .await;
            first = false;
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep_until(started + retry) => {}
            }
        }
        // Each shard's work stopped first, then its Lease released: nobody overlaps. All at
        // once, so that the grace is waited out once, not once per shard.
        futures::future::join_all(
            shards
                .iter_mut()
                .chain(members.iter_mut())
                .map(|slot| self.give_up(slot, "shutdown")),
        )
        .await;
        tracing::info!(identity = %self.identity, "shard manager stopped");
        Ok(())
    }

    /// One retry period's work: rules 1 to 4 of the crate docs.
    async fn tick<'s, F, Fut>(
        &self,
        shards: &mut [Slot<'s, L>],
        members: &mut [Slot<'s, L>],
        releases: &mut VecDeque<Instant>,
        offset: usize,
        first: bool,
        work: &F,
    ) where
        F: Fn(Shard) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        // Renew what is held, read the rest: every Lease at once, each on its own lock.
        futures::future::join_all(
            shards
                .iter_mut()
                .chain(members.iter_mut())
                .map(|slot| self.refresh(slot)),
        )
        .await;
        futures::future::join_all(
            shards
                .iter_mut()
                .chain(members.iter_mut())
                .map(|slot| self.reap(slot)),
        )
        .await;

        // Rule 1: membership.
        if members.iter().all(|s| s.held.is_none()) {
            for i in 0..members.len() {
                let slot = &mut members[(offset + i) % members.len()];
                if self.is_free(slot) && self.acquire(slot, None::<&F>).await {
                    break;
                }
            }
        }
        let live = members
            .iter()
            .filter(|s| s.held.is_some() || self.is_live(s))
            .count()
            .max(1);
        let target = self.config.fair_share(live);
        let held = shards.iter().filter(|s| s.held.is_some()).count();
        tracing::debug!(identity = %self.identity, live, target, held, "shard manager retry");

        // Rule 3: give up extras, within the move limit.
        if held > target {
            let now = Instant::now();
            while releases
                .front()
                .is_some_and(|t| now.duration_since(*t) >= self.config.move_period)
            {
                releases.pop_front();
            }
            let budget = (self.config.max_moves as usize).saturating_sub(releases.len());
            let extra = (held - target).min(budget);
            // The last held ones, from the end of this replica's preferred order.
            let order: Vec<usize> = (0..shards.len())
                .map(|i| (offset + i) % shards.len())
                .collect();
            let chosen: BTreeSet<usize> = order
                .iter()
                .rev()
                .copied()
                .filter(|&i| shards[i].held.is_some())
                .take(extra)
                .collect();
            // At once: the shards kept are renewed again only after the given up ones'
            // work has stopped, which may take up to the grace, and only once.
            futures::future::join_all(
                shards
                    .iter_mut()
                    .enumerate()
                    .filter(|(i, _)| chosen.contains(i))
                    .map(|(_, slot)| self.give_up(slot, "re-balance")),
            )
            .await;
            let now = Instant::now();
            for _ in &chosen {
                releases.push_back(now);
                self.moves.fetch_add(1, Ordering::Relaxed);
            }
        } else if held < target && !first {
            // Rule 3: take free shards; rule 4: not in the first period.
            let mut wanted = target - held;
            for i in 0..shards.len() {
                if wanted == 0 {
                    break;
                }
                let slot = &mut shards[(offset + i) % shards.len()];
                if slot.held.is_none() && self.is_free(slot) && self.acquire(slot, Some(work)).await
                {
                    wanted -= 1;
                }
            }
        }
        let mut status = self.lock_status();
        status.live = live;
        status.held = shards
            .iter()
            .filter(|s| s.held.is_some())
            .map(|s| s.index)
            .collect();
    }

    /// The one lease step of kinformer-leaderelection on `lock`, each request bounded by the
    /// retry period, on Tokio's clock.
    fn attempt<'l>(&self, lock: &'l L) -> LeaseAttempt<'l, L> {
        LeaseAttempt::new(
            lock,
            self.config.timing.lease_duration,
            self.config.timing.retry_period,
            &TokioClock,
        )
    }

    /// Renews a held Lease, or reads one that is not.
    async fn refresh(&self, slot: &mut Slot<'_, L>) {
        let step = self.attempt(slot.lock);
        if let Some(held) = &slot.held {
            if held.term.is_cancelled() {
                return;
            }
            let sent = Instant::now();
            match step.try_acquire_or_renew(&mut slot.observed).await {
                Attempt::Held => {
                    slot.known = true;
                    held.deadline
                        .send_replace(sent + self.config.timing.renew_deadline);
                }
                attempt => {
                    if slot
                        .observed
                        .as_ref()
                        .is_none_or(|o| !o.names(&self.identity))
                    {
                        tracing::warn!(
                            lease = slot.name,
                            "a held Lease was taken by another replica"
                        );
                        held.term.cancel();
                    } else if let Attempt::Failed(e) = attempt {
                        tracing::warn!(lease = slot.name, error = %e, "renewing a shard Lease failed");
                    }
                }
            }
            return;
        }
        match step.read(&mut slot.observed).await {
            Ok(record) => {
                if record.is_none() {
                    slot.observed = None;
                }
                slot.known = true;
            }
            Err(e) => tracing::debug!(lease = slot.name, error = %e, "reading a Lease failed"),
        }
    }

    /// A held Lease whose term ended (deadline passed, or taken): its work is waited for
    /// and it counts as not held.
    async fn reap(&self, slot: &mut Slot<'_, L>) {
        let ended = slot.held.as_ref().is_some_and(|h| h.term.is_cancelled());
        if !ended {
            return;
        }
        if let Some(held) = slot.held.take() {
            tracing::warn!(lease = slot.name, identity = %self.identity, "Lease lost: its work stopped");
            self.join(slot.name, held.work).await;
        }
    }

    /// Waits for a shard's work, up to the grace, then aborts it.
    async fn join(&self, lease: &str, work: Option<JoinHandle<()>>) {
        let Some(mut work) = work else { return };
        if tokio::time::timeout(self.config.grace(), &mut work)
            .await
            .is_err()
        {
            tracing::warn!(
                lease,
                "a shard's work did not stop within the grace: aborted"
            );
            work.abort();
            let _ = work.await;
        }
    }

    /// Whether this replica sees the Lease free for the taking (the elector's rule:
    /// [`ObservedRecord::is_free_for`]); unknown is not free.
    fn is_free(&self, slot: &Slot<'_, L>) -> bool {
        let now = TokioClock.now();
        slot.known
            && slot
                .observed
                .as_ref()
                .is_none_or(|o| o.is_free_for(&self.identity, now))
    }

    /// Whether a Lease this replica does not hold has a live holder.
    fn is_live(&self, slot: &Slot<'_, L>) -> bool {
        let now = TokioClock.now();
        slot.known
            && slot
                .observed
                .as_ref()
                .is_some_and(|o| o.record.is_held() && !o.names(&self.identity) && o.is_valid(now))
    }

    /// Takes a Lease seen free, with the lease step (which reads it again, unless this
    /// replica's own record is still valid, and writes over the version read); for a
    /// shard, starts its work. Whether it was taken.
    async fn acquire<F, Fut>(&self, slot: &mut Slot<'_, L>, work: Option<&F>) -> bool
    where
        F: Fn(Shard) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let sent = Instant::now();
        match self
            .attempt(slot.lock)
            .try_acquire_or_renew(&mut slot.observed)
            .await
        {
            Attempt::Held => slot.known = true,
            Attempt::HeldByOther => return false,
            attempt => {
                if let Attempt::Failed(e) = attempt {
                    tracing::debug!(lease = slot.name, error = %e, "taking a Lease failed");
                }
                // Read it again next time.
                slot.known = false;
                return false;
            }
        }
        let deadline_at = sent + self.config.timing.renew_deadline;
        let (deadline, deadline_rx) = watch::channel(deadline_at);
        let term = CancellationToken::new();
        tokio::spawn(watchdog(term.clone(), deadline_rx.clone()));
        let task = work.zip(slot.range).map(|(work, range)| {
            let shard = Shard {
                index: slot.index,
                range,
                count: self.config.shards,
                lease: slot.name.into(),
                token: term.clone(),
                deadline: deadline_rx,
                grace: self.config.grace(),
            };
            tracing::info!(lease = slot.name, identity = %self.identity, shard = slot.index, "shard taken: its work started");
            tokio::spawn(work(shard))
        });
        slot.held = Some(Held {
            deadline,
            term,
            work: task,
        });
        true
    }

    /// Stops a held Lease's work, waits for it, then releases the Lease (the lease step's
    /// release: an empty holder, a 1 s lease, as client-go's, if the record read afresh
    /// still names this replica) so that another replica takes it at once.
    async fn give_up(&self, slot: &mut Slot<'_, L>, why: &'static str) {
        let Some(held) = slot.held.take() else { return };
        held.term.cancel();
        self.join(slot.name, held.work).await;
        match self.attempt(slot.lock).release(&mut slot.observed).await {
            Ok(Release::Released) => {
                tracing::info!(lease = slot.name, identity = %self.identity, why, "Lease released");
                slot.known = true;
            }
            Ok(_) => {
                tracing::info!(lease = slot.name, identity = %self.identity, why, "the Lease no longer names this replica: nothing to release");
                slot.known = false;
            }
            Err(e) => {
                tracing::warn!(lease = slot.name, error = %e, why, "releasing a Lease failed; it expires instead");
                slot.known = false;
            }
        }
    }
}

/// Marks a [`ShardManager`] as holding nothing and not running when its run ends or is
/// dropped.
struct Running<'a, L>(&'a ShardManager<L>);

impl<L> Drop for Running<'_, L> {
    fn drop(&mut self) {
        *self.0.lock_status() = Status::default();
        self.0.running.store(false, Ordering::Release);
    }
}

/// Cancels `term` the moment its deadline passes without being moved on.
async fn watchdog(term: CancellationToken, mut deadline: watch::Receiver<Instant>) {
    loop {
        let at = *deadline.borrow_and_update();
        tokio::select! {
            () = term.cancelled() => return,
            () = tokio::time::sleep_until(at) => {
                if *deadline.borrow() <= Instant::now() {
                    term.cancel();
                    return;
                }
            }
            changed = deadline.changed() => {
                if changed.is_err() {
                    // The holder is gone: nothing will renew this term.
                    term.cancel();
                    return;
                }
            }
        }
    }
}

/// What [`Controller::run_shard`](kinformer_controller::controller::Controller::run_shard) reads of a shard.
impl kinformer_controller::controller::HeldShard for Shard {
    fn index(&self) -> u32 {
        Shard::index(self)
    }
    fn lease(&self) -> &str {
        Shard::lease(self)
    }
    fn token(&self) -> &CancellationToken {
        Shard::token(self)
    }
    fn is_held(&self) -> bool {
        Shard::is_held(self)
    }
    fn grace(&self) -> Duration {
        Shard::grace(self)
    }
}

/// What `Metrics::register_shard_manager` (kinformer-controller, feature `prometheus`)
/// reads of a manager at each scrape.
#[cfg(feature = "prometheus")]
impl<L: Send + Sync + 'static> kinformer_controller::metrics::ShardManagerStats
    for ShardManager<L>
{
    fn manager_name(&self) -> &str {
        &self.config().name
    }
    fn manager_identity(&self) -> &str {
        self.identity()
    }
    fn shards_held(&self) -> usize {
        self.held().len()
    }
    fn shard_live_replicas(&self) -> usize {
        self.live_replicas()
    }
    fn shard_moves(&self) -> u64 {
        self.moves()
    }
}

#[cfg(test)]
mod tests;
