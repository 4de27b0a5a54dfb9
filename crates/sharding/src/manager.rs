//! [`ShardManager`]: holds this replica's fair share of the shard Leases and runs work for
//! each held shard.

use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use kinformer_leaderelection::{
    Attempt, Clock, LeaseAttempt, LeaseStatus, Lock, ObservedRecord, Release, TokioClock,
};
use kinformer_reflector::{ShardKey, ShardRange, ShardSelection};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::handover::{self, FOREVER};
use crate::selection::Selections;
use crate::{Error, Shard, ShardingConfig};

/// What a running [`ShardManager`] shows.
#[derive(Default)]
struct Status {
    held: BTreeSet<u32>,
    handed_over: BTreeSet<u32>,
    live: usize,
    /// Each shard Lease, then each membership Lease, as seen at the last retry.
    shards: Vec<LeaseStatus>,
    members: Vec<LeaseStatus>,
}

/// What a [`ShardManager`] knows now: see [`ShardManager::status`]. Serializes (serde) for a
/// JSON status page, with the Leases' times as RFC 3339 strings and durations as seconds.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct ShardManagerStatus {
    /// The manager's name ([`ShardingConfig::name`], the Leases' prefix).
    pub name: String,
    /// This replica's identity.
    pub identity: String,
    /// How many shards there are.
    pub shard_count: u32,
    /// The shards this replica holds.
    pub held: Vec<u32>,
    /// The shards of this count whose Leases are handed over to another shard count, or
    /// share a range of it with one that is (see [`ShardingConfig::previous`]): this
    /// replica gives them up and takes none of them.
    pub handed_over: Vec<u32>,
    /// The live replicas seen at the last retry (this one included once it is a member).
    pub live_replicas: usize,
    /// How many shards this replica gave up to re-balance so far.
    pub moves: u64,
    /// Each shard's Lease as seen at the last retry, in shard order (`shards[i]` is shard
    /// `i`'s); empty while the manager does not run.
    pub shards: Vec<LeaseStatus>,
    /// Each membership Lease as seen at the last retry: the replicas that hold one are the
    /// live members.
    pub members: Vec<LeaseStatus>,
}

/// Holds this replica's fair share of `N` shard Leases and runs work for each held shard:
/// see the [crate docs](crate).
pub struct ShardManager<L> {
    config: ShardingConfig,
    identity: String,
    shard_locks: Vec<(String, L)>,
    member_locks: Vec<(String, L)>,
    ranges: Vec<ShardRange>,
    /// The shard Leases of each count this config replaces, read at every retry, and its
    /// membership Leases, one held by this replica.
    previous_locks: Vec<(u32, Locks<L>, Locks<L>)>,
    status: Mutex<Status>,
    selections: Mutex<Selections>,
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

    /// The objects of the shards this replica holds, by `key`: one informer over all of them
    /// (an informer builder's `shards`) instead of one per held shard — one list and one
    /// watch per replica, not one per shard, and on a server without the gate
    /// `ShardedListAndWatch`, one stream of every object per replica instead of one per
    /// held shard. The manager keeps it up to date: a shard is selected before its work
    /// starts and no longer selected once its work has ended, so a shard's work finds its
    /// objects coming into the cache (the informer lists the shards taken, once for those
    /// taken in one retry, and drops a lost shard's objects without a list), and a lost
    /// shard's objects leave it only after the shard's controller has stopped. Each shard's
    /// work then runs its controller on that informer with the shard's own selector
    /// ([`Controller::watch_where`](kinformer_controller::controller::Controller::watch_where)).
    /// Nothing is selected while nothing is held. Every call with the same key returns
    /// the same selection.
    pub fn selection(&self, key: ShardKey) -> ShardSelection {
        self.lock_selections().get(key, &self.ranges)
    }

    fn lock_selections(&self) -> std::sync::MutexGuard<'_, Selections> {
        self.selections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Selects the objects of the shards of `slots`, or no longer, in one change: one list
    /// however many shards a retry takes or gives up (membership Leases select nothing).
    fn select<'s>(&self, slots: impl IntoIterator<Item = &'s Slot<'s, L>>, held: bool)
    where
        L: 's,
    {
        let shards = slots
            .into_iter()
            .filter(|s| s.range.is_some())
            .map(|s| s.index);
        self.lock_selections().set(shards, held, &self.ranges);
    }

    /// A snapshot for a status page: the shards held, the live replicas, and every shard
    /// and membership Lease as this replica saw it at its last retry (holder, the record's
    /// times, whether this replica holds it, when it expires on this replica's clock). Makes
    /// no request.
    pub fn status(&self) -> ShardManagerStatus {
        let status = self.lock_status();
        ShardManagerStatus {
            name: self.config.name.clone(),
            identity: self.identity.clone(),
            shard_count: self.config.shards,
            held: status.held.iter().copied().collect(),
            handed_over: status.handed_over.iter().copied().collect(),
            live_replicas: status.live,
            moves: self.moves(),
            shards: status.shards.clone(),
            members: status.members.clone(),
        }
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
        let make = |kind: &str, count: u32| -> Vec<(String, L)> {
            (0..count)
                .map(|i| {
                    let name = handover::lease_name(&config.name, kind, i, count);
                    let l = lock(&name);
                    (name, l)
                })
                .collect()
        };
        let ranges = (0..config.shards)
            .map(|i| ShardRange::index_of(i, config.shards))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        let shard_locks = make("shard", config.shards);
        let member_locks = make("member", config.shards);
        let previous_locks: Vec<(u32, Locks<L>, Locks<L>)> = config
            .previous
            .iter()
            .map(|&count| (count, make("shard", count), make("member", count)))
            .collect();
        let identity = shard_locks
            .first()
            .map(|(_, l)| l.identity().to_owned())
            .unwrap_or_default();
        let previous = previous_locks
            .iter()
            .flat_map(|(_, shards, members)| shards.iter().chain(members));
        for (_, l) in shard_locks.iter().chain(&member_locks).chain(previous) {
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
            previous_locks,
            status: Mutex::new(Status::default()),
            selections: Mutex::default(),
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
        let shards = slots(&self.shard_locks, &self.ranges);
        let members = slots(&self.member_locks, &[]);
        let previous: Vec<Replaced<'a, L>> = self
            .previous_locks
            .iter()
            .map(|(count, shards, members)| {
                let ranges: Vec<ShardRange> = (0..*count)
                    .filter_map(|i| ShardRange::index_of(i, *count).ok())
                    .collect();
                Replaced {
                    count: *count,
                    shards: slots(shards, &ranges),
                    members: slots(members, &[]),
                }
            })
            .collect();
        let mut seen = Seen {
            shards,
            members,
            previous,
        };
        let mut releases: VecDeque<Instant> = VecDeque::new();
        let retry = self.config.timing.retry_period;
        // Where this replica starts looking for free Leases: spread over the replicas.
        let offset = (kinformer_reflector::fnv1a_64(self.identity.as_bytes())
            % u64::from(self.config.shards)) as usize;
        let mut first = true;
        tracing::info!(identity = %self.identity, shards = self.config.shards, name = %self.config.name, "shard manager started");
        loop {
            let started = Instant::now();
            self.tick(&mut seen, &mut releases, offset, first, &work)
                .await;
            first = false;
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep_until(started + retry) => {}
            }
        }
        // Each shard's work stopped first, then its Lease released: nobody overlaps. All at
        // once, so that the grace is waited out once, not once per shard.
        let Seen {
            shards,
            members,
            previous,
        } = &mut seen;
        self.give_up(
            shards
                .iter_mut()
                .chain(members.iter_mut())
                .chain(previous.iter_mut().flat_map(|r| r.members.iter_mut())),
            "shutdown",
        )
        .await;
        tracing::info!(identity = %self.identity, "shard manager stopped");
        Ok(())
    }

    /// One retry period's work: rules 1 to 4 and 6 of the crate docs.
    async fn tick<'s, F, Fut>(
        &self,
        seen: &mut Seen<'s, L>,
        releases: &mut VecDeque<Instant>,
        offset: usize,
        first: bool,
        work: &F,
    ) where
        F: Fn(Shard) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Seen {
            shards,
            members,
            previous,
        } = seen;
        // Renew what is held, read the rest: every Lease at once, each on its own lock.
        futures::future::join_all(
            shards
                .iter_mut()
                .chain(members.iter_mut())
                .chain(previous.iter_mut().flat_map(Replaced::slots))
                .map(|slot| self.refresh(slot)),
        )
        .await;
        futures::future::join_all(
            shards
                .iter_mut()
                .chain(members.iter_mut())
                .chain(previous.iter_mut().flat_map(|r| r.members.iter_mut()))
                .map(|slot| self.reap(slot)),
        )
        .await;

        // Rule 1: membership, also among the replicas of each count this one replaces, so
        // that they count this replica and leave it the shards their stopped replicas
        // release instead of taking them back.
        self.hold_one(members, offset).await;
        for replaced in previous.iter_mut() {
            self.hold_one(&mut replaced.members, offset).await;
        }
        let live = members
            .iter()
            .filter(|s| s.held.is_some() || self.is_live(s))
            .count()
            .max(1);
        let target = self.config.fair_share(live);

        // Rule 6: shards handed over to another count are given up, and none is taken.
        let handed = self.handed_over(shards, previous);
        self.give_up(
            shards
                .iter_mut()
                .enumerate()
                .filter(|(i, _)| handed.contains(i))
                .map(|(_, slot)| slot),
            "handed over to another shard count",
        )
        .await;
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
            self.give_up(
                shards
                    .iter_mut()
                    .enumerate()
                    .filter(|(i, _)| chosen.contains(i))
                    .map(|(_, slot)| slot),
                "re-balance",
            )
            .await;
            let now = Instant::now();
            for _ in &chosen {
                releases.push_back(now);
                self.moves.fetch_add(1, Ordering::Relaxed);
            }
        } else if held < target && !first {
            // Rule 3: take free shards; rule 4: not in the first period. Their objects are
            // selected together once all are taken, then each one's work starts.
            let mut wanted = target - held;
            let mut taken = Vec::new();
            for i in 0..shards.len() {
                if wanted == 0 {
                    break;
                }
                let index = (offset + i) % shards.len();
                let slot = &mut shards[index];
                if slot.held.is_some() || handed.contains(&index) {
                    continue;
                }
                // A Lease of this count handed over before, which this replica may take
                // back once the counts it replaces have handed theirs over to it.
                let mark = slot
                    .observed
                    .as_ref()
                    .filter(|o| handover::handed_to(&o.record).is_some())
                    .map(|o| o.record.holder_identity.clone());
                if (mark.is_none() && !self.is_free(slot))
                    || !self.hand_over_previous(slot.range, previous).await
                {
                    continue;
                }
                if let Some(mark) = mark {
                    match self
                        .attempt(slot.lock)
                        .release_from(&mut slot.observed, &mark)
                        .await
                    {
                        Ok(Release::Released) => {
                            tracing::info!(lease = slot.name, identity = %self.identity, "a handed-over Lease taken back");
                        }
                        other => {
                            tracing::debug!(lease = slot.name, result = ?other, "taking back a handed-over Lease failed");
                            slot.known = false;
                            continue;
                        }
                    }
                }
                if self.acquire(slot).await {
                    taken.push(index);
                    wanted -= 1;
                }
            }
            self.select(taken.iter().map(|&i| &shards[i]), true);
            for i in taken {
                self.start(&mut shards[i], work);
            }
        }
        let lease_status = |slot: &Slot<'_, L>| {
            LeaseStatus::new(
                slot.name,
                self.identity.as_str(),
                slot.observed.as_ref(),
                slot.held.is_some(),
                &TokioClock,
            )
        };
        let shard_leases = shards.iter().map(lease_status).collect();
        let member_leases = members.iter().map(lease_status).collect();
        let mut status = self.lock_status();
        status.live = live;
        status.handed_over = handed
            .iter()
            .filter_map(|&i| u32::try_from(i).ok())
            .collect();
        status.held = shards
            .iter()
            .filter(|s| s.held.is_some())
            .map(|s| s.index)
            .collect();
        status.shards = shard_leases;
        status.members = member_leases;
    }

    /// Holds one of `members` (any free one) unless one is held.
    async fn hold_one(&self, members: &mut [Slot<'_, L>], offset: usize) {
        if members.iter().any(|s| s.held.is_some()) {
            return;
        }
        for i in 0..members.len() {
            let slot = &mut members[(offset + i) % members.len()];
            if self.is_free(slot) && self.acquire(slot).await {
                break;
            }
        }
    }

    /// Rule 6: the shards of this count this replica must not hold, as read at this retry:
    /// each one whose Lease is handed over to another count, unless this replica takes it
    /// back (see [`claim`](Self::claim)), and every shard sharing a range of that count
    /// with it.
    fn handed_over(&self, shards: &[Slot<'_, L>], previous: &[Replaced<'_, L>]) -> BTreeSet<usize> {
        let mut handed = BTreeSet::new();
        for (i, slot) in shards.iter().enumerate() {
            let Some((to, at)) = slot
                .observed
                .as_ref()
                .filter(|_| slot.known)
                .and_then(|o| handover::handed_to(&o.record))
            else {
                continue;
            };
            if to != self.config.shards && self.claim(slot.range, at, previous) == Claim::HandedOver
            {
                handed.extend(handover::sharing_with(i, &self.ranges, to));
            }
        }
        handed
    }

    /// Whether a Lease of this count, handed over to another count at `at`, stays so for
    /// this replica. It takes it back when a count this config replaces has a Lease over
    /// the same range handed over to this count since (a rollout back to this count that
    /// got there), or has one not handed over at all (a rollout from that count, under
    /// way: this replica hands them over, then takes the Lease back). Otherwise the other
    /// count is the newer one.
    fn claim(
        &self,
        range: Option<ShardRange>,
        at: Option<std::time::SystemTime>,
        previous: &[Replaced<'_, L>],
    ) -> Claim {
        let Some(range) = range else {
            return Claim::HandedOver;
        };
        let (mut unknown, mut under_way) = (false, false);
        for replaced in previous {
            for j in handover::overlapping(range, replaced.count) {
                let Some(theirs) = replaced.shards.get(j as usize) else {
                    continue;
                };
                if !theirs.known {
                    unknown = true;
                    continue;
                }
                match theirs
                    .observed
                    .as_ref()
                    .and_then(|o| handover::handed_to(&o.record))
                {
                    Some((to, when)) if to == self.config.shards && when > at => {
                        return Claim::TakenBack;
                    }
                    Some(_) => {}
                    None => under_way = true,
                }
            }
        }
        if under_way || unknown {
            // Unknown: nothing is given up on a failed read.
            Claim::TakenBack
        } else {
            Claim::HandedOver
        }
    }

    /// Hands over to this count every Lease of a count this config replaces that overlaps
    /// `range` and is free (read at this retry). Whether all of them are handed over to
    /// this count now: only then may this replica take a shard of `range`. Those held by
    /// a replica of the old count are left to it; it gives them up once it sees a
    /// neighbour handed over.
    async fn hand_over_previous(
        &self,
        range: Option<ShardRange>,
        previous: &mut [Replaced<'_, L>],
    ) -> bool {
        let Some(range) = range else {
            return false;
        };
        let mark = handover::marker(self.config.shards);
        let mut clear = true;
        for replaced in previous.iter_mut() {
            for j in handover::overlapping(range, replaced.count) {
                let Some(theirs) = replaced.shards.get_mut(j as usize) else {
                    continue;
                };
                let handed = theirs
                    .observed
                    .as_ref()
                    .and_then(|o| handover::handed_to(&o.record));
                if !theirs.known || handed.is_some_and(|(to, _)| to != self.config.shards) {
                    clear = false;
                } else if handed.is_none() {
                    if !self.is_free(theirs) {
                        clear = false;
                        continue;
                    }
                    match self
                        .attempt(theirs.lock)
                        .hand_over(&mut theirs.observed, &mark, FOREVER)
                        .await
                    {
                        Attempt::Held => {
                            tracing::info!(lease = theirs.name, identity = %self.identity, to = self.config.shards, "a Lease of a replaced shard count handed over");
                        }
                        attempt => {
                            if let Attempt::Failed(e) = attempt {
                                tracing::debug!(lease = theirs.name, error = %e, "handing over a Lease failed");
                                theirs.known = false;
                            }
                            clear = false;
                        }
                    }
                }
            }
        }
        clear
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
            self.select([&*slot], false);
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
    /// replica's own record is still valid, and writes over the version read). Whether it
    /// was taken; a shard's work is started after, by [`start`](Self::start).
    async fn acquire(&self, slot: &mut Slot<'_, L>) -> bool {
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
        let (deadline, deadline_rx) = watch::channel(sent + self.config.timing.renew_deadline);
        let term = CancellationToken::new();
        tokio::spawn(watchdog(term.clone(), deadline_rx));
        slot.held = Some(Held {
            deadline,
            term,
            work: None,
        });
        true
    }

    /// Starts the work of a shard just taken (its objects selected already).
    fn start<F, Fut>(&self, slot: &mut Slot<'_, L>, work: &F)
    where
        F: Fn(Shard) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (Some(held), Some(range)) = (slot.held.as_mut(), slot.range) else {
            return;
        };
        let shard = Shard {
            index: slot.index,
            range,
            count: self.config.shards,
            lease: slot.name.into(),
            token: held.term.clone(),
            deadline: held.deadline.subscribe(),
            grace: self.config.grace(),
        };
        tracing::info!(lease = slot.name, identity = %self.identity, shard = slot.index, "shard taken: its work started");
        held.work = Some(tokio::spawn(work(shard)));
    }

    /// Stops the work of each held Lease of `slots` and waits for it, selects none of
    /// their objects any more (one change), then releases them (the lease step's release:
    /// an empty holder, a 1 s lease, as client-go's, if the record read afresh still names
    /// this replica) so that another replica takes them at once. All at once, so that
    /// the grace is waited out once, not once per Lease.
    async fn give_up<'s, 'l: 's>(
        &self,
        slots: impl IntoIterator<Item = &'s mut Slot<'l, L>>,
        why: &'static str,
    ) where
        L: 's,
    {
        let mut slots: Vec<&mut Slot<'l, L>> =
            slots.into_iter().filter(|s| s.held.is_some()).collect();
        let works: Vec<_> = slots
            .iter_mut()
            .filter_map(|slot| {
                let held = slot.held.take()?;
                held.term.cancel();
                Some(self.join(slot.name, held.work))
            })
            .collect();
        futures::future::join_all(works).await;
        self.select(slots.iter().map(|s| &**s), false);
        futures::future::join_all(slots.into_iter().map(|slot| self.release(slot, why))).await;
    }

    async fn release(&self, slot: &mut Slot<'_, L>, why: &'static str) {
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

/// Leases by name, each with its lock.
type Locks<L> = Vec<(String, L)>;

/// Every Lease a running manager reads, as this replica sees it.
struct Seen<'a, L> {
    /// This count's shards.
    shards: Vec<Slot<'a, L>>,
    /// This count's membership Leases.
    members: Vec<Slot<'a, L>>,
    /// Those of each count this config replaces.
    previous: Vec<Replaced<'a, L>>,
}

/// The Leases of a count this config replaces, as this replica sees them.
struct Replaced<'a, L> {
    count: u32,
    /// Read at every retry, handed over when free and needed.
    shards: Vec<Slot<'a, L>>,
    /// One held, as the replicas of that count hold one.
    members: Vec<Slot<'a, L>>,
}

impl<'a, L> Replaced<'a, L> {
    fn slots(&mut self) -> impl Iterator<Item = &mut Slot<'a, L>> {
        self.shards.iter_mut().chain(self.members.iter_mut())
    }
}

/// What a replica makes of a Lease of its count handed over to another count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Claim {
    /// Given up, with every shard sharing a range of the other count with it.
    HandedOver,
    /// Left to this replica to take (back), once the counts it replaces are handed over.
    TakenBack,
}

/// Marks a [`ShardManager`] as holding nothing and not running when its run ends or is
/// dropped.
struct Running<'a, L>(&'a ShardManager<L>);

impl<L> Drop for Running<'_, L> {
    fn drop(&mut self) {
        *self.0.lock_status() = Status::default();
        self.0.lock_selections().clear();
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

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
