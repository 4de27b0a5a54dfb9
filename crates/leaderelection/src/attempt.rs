//! One lease, one step: client-go's `tryAcquireOrRenew` and `release`, for any holder of a
//! [`Lock`] — the [`LeaderElector`](crate::LeaderElector) and kinformer-sharding's shard
//! manager run the same code.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::config::lease_duration_seconds;
use crate::record::truncate_to_micros;
use crate::{Clock, Error, LeaderElectionRecord, Lock};

/// The last record a candidate saw of one lock, and when it first saw it so (client-go's
/// `observedRecord` and `observedTime`).
///
/// The time is the candidate's own monotonic clock ([`Clock::now`]), never a time read from
/// the record: a lease expires when the candidate has seen its record unchanged for the
/// lease duration the record states.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedRecord {
    /// The record.
    pub record: LeaderElectionRecord,
    /// When the candidate first saw the record as it is.
    pub since: Instant,
}

impl ObservedRecord {
    /// `record`, first seen at `since`.
    pub fn new(record: LeaderElectionRecord, since: Instant) -> Self {
        Self { record, since }
    }

    /// Notes `record` as seen at `now` in `observed`: it replaces what was there unless it
    /// is the same record, which keeps the time it was first seen.
    pub fn observe(observed: &mut Option<Self>, record: LeaderElectionRecord, now: Instant) {
        if observed.as_ref().is_none_or(|o| o.record != record) {
            *observed = Some(Self::new(record, now));
        }
    }

    /// When the lease expires on the candidate's clock: first seen plus the lease duration
    /// the record states.
    pub fn expiry(&self) -> Instant {
        let secs = u64::try_from(self.record.lease_duration_seconds).unwrap_or(0);
        self.since + Duration::from_secs(secs)
    }

    /// client-go's `isLeaseValid`: the record has not been unchanged for its lease duration
    /// yet at `now`.
    pub fn is_valid(&self, now: Instant) -> bool {
        self.expiry() > now
    }

    /// Whether the record names `identity` as the holder.
    pub fn names(&self, identity: &str) -> bool {
        self.record.holder_identity == identity
    }

    /// Whether `identity` may take (or keep) the lock by this record at `now`: nobody holds
    /// it (released), `identity` does, or the holder's lease expired. The one rule of rule 1
    /// of the [crate docs](crate); [`LeaseAttempt::try_acquire_or_renew`] applies it to a
    /// record it has just read.
    pub fn is_free_for(&self, identity: &str, now: Instant) -> bool {
        !self.record.is_held() || self.names(identity) || !self.is_valid(now)
    }
}

/// How [`LeaseAttempt::try_acquire_or_renew`] ended.
#[derive(Debug)]
#[non_exhaustive]
pub enum Attempt {
    /// The candidate holds the lock: the record it wrote (created, taken over, or renewed)
    /// names it.
    Held,
    /// Another candidate holds the lock, and its lease has not expired on this
    /// candidate's clock.
    HeldByOther,
    /// A request failed: refused, timed out, or lost a race ([`Error::Conflict`]). Nothing
    /// is known to be held.
    Failed(Error),
}

impl Attempt {
    /// Whether the candidate holds the lock.
    pub fn is_held(&self) -> bool {
        matches!(self, Self::Held)
    }
}

/// How [`LeaseAttempt::release`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Release {
    /// The record named the candidate and now names nobody.
    Released,
    /// There is no record: nothing to release.
    NotFound,
    /// The record names someone else (or nobody): it was left alone.
    NotHolder,
}

/// One candidate's requests on one lock, with client-go's rules: what the
/// [`LeaderElector`](crate::LeaderElector) does at every retry, as a step any other holder of
/// leases can run (kinformer-sharding holds one per shard with it).
///
/// The caller keeps the [`ObservedRecord`] between steps and hands it in each time; the
/// step reads and updates it. Every request is cut at
/// [`request_timeout`](Self::request_timeout) on [`clock`](Self::clock).
///
/// ```
/// use std::time::Duration;
/// use kinformer_leaderelection::testing::{MemoryLease, tokio_clock};
/// use kinformer_leaderelection::{Attempt, LeaseAttempt, Release};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let lease = MemoryLease::new();
/// let (lock_a, lock_b) = (lease.lock("a"), lease.lock("b"));
/// let clock = tokio_clock();
/// let (lease_duration, request_timeout) = (Duration::from_secs(15), Duration::from_secs(2));
/// let a = LeaseAttempt::new(&lock_a, lease_duration, request_timeout, &clock);
/// let b = LeaseAttempt::new(&lock_b, lease_duration, request_timeout, &clock);
/// // What each candidate saw last, kept between steps.
/// let (mut seen_by_a, mut seen_by_b) = (None, None);
///
/// assert!(a.try_acquire_or_renew(&mut seen_by_a).await.is_held());
/// assert!(matches!(b.try_acquire_or_renew(&mut seen_by_b).await, Attempt::HeldByOther));
/// // b takes it once it has seen a's record unchanged for the lease duration.
/// tokio::time::sleep(lease_duration).await;
/// assert!(b.try_acquire_or_renew(&mut seen_by_b).await.is_held());
/// assert!(matches!(a.release(&mut seen_by_a).await, Ok(Release::NotHolder)));
/// assert_eq!(lease.record().unwrap().leader_transitions, 1);
/// # }
/// ```
pub struct LeaseAttempt<'a, L: ?Sized> {
    lock: &'a L,
    lease_duration_seconds: i32,
    request_timeout: Duration,
    clock: &'a dyn Clock,
    on_slow_path: Option<&'a (dyn Fn() + Send + Sync)>,
}

impl<'a, L: Lock + ?Sized> LeaseAttempt<'a, L> {
    /// Requests on `lock` by its identity, writing `lease_duration` (whole seconds, as
    /// [`LeaderElectionConfig::validate`](crate::LeaderElectionConfig::validate) requires)
    /// into the records it takes, each request cut at `request_timeout` on `clock`.
    pub fn new(
        lock: &'a L,
        lease_duration: Duration,
        request_timeout: Duration,
        clock: &'a dyn Clock,
    ) -> Self {
        Self {
            lock,
            lease_duration_seconds: lease_duration_seconds(lease_duration),
            request_timeout,
            clock,
            on_slow_path: None,
        }
    }

    /// Calls `hook` each time a renewal takes the slow path (the record read again because
    /// the write over the version last seen failed): client-go's `slowpath_exercised`
    /// metric.
    pub fn on_slow_path(mut self, hook: &'a (dyn Fn() + Send + Sync)) -> Self {
        self.on_slow_path = Some(hook);
        self
    }

    /// The lock.
    pub fn lock(&self) -> &'a L {
        self.lock
    }

    /// Each request's limit.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The clock requests are timed, and records observed, on.
    pub fn clock(&self) -> &'a dyn Clock {
        self.clock
    }

    /// client-go's `tryAcquireOrRenew`: one attempt to take or keep the lock.
    ///
    /// 1. The fast path: when `observed` names this candidate and has not expired, writes
    ///    the renewal over the version last seen (keeping `acquireTime` and the
    ///    transitions), and is done if that succeeds.
    /// 2. Otherwise reads the record; creates it when there is none.
    /// 3. Notes the record in `observed` (a changed one restarts its lease) and leaves a
    ///    lock another candidate holds to it until its lease expires.
    /// 4. Writes the record naming this candidate over the version just read: a renewal
    ///    keeps `acquireTime` and the transitions, a take-over counts one more transition.
    ///    Of two candidates racing, one gets [`Error::Conflict`].
    ///
    /// Every record written is noted in `observed` as seen now.
    pub async fn try_acquire_or_renew(&self, observed: &mut Option<ObservedRecord>) -> Attempt {
        let identity = self.lock.identity();
        let now = self.clock.now();
        let wall = truncate_to_micros(self.clock.wall_now());
        let mut record = LeaderElectionRecord {
            holder_identity: identity.to_owned(),
            lease_duration_seconds: self.lease_duration_seconds,
            acquire_time: Some(wall),
            renew_time: Some(wall),
            leader_transitions: 0,
        };

        // 1. Fast path: the holder writes over the version it last saw.
        if let Some(seen) = observed
            .as_ref()
            .filter(|o| o.names(identity) && o.is_valid(now))
        {
            record.acquire_time = seen.record.acquire_time;
            record.leader_transitions = seen.record.leader_transitions;
            match self.call(self.lock.update(&record)).await {
                Ok(()) => {
                    self.set(observed, record);
                    return Attempt::Held;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "failed to update lease optimistically, falling back to slow path")
                }
            }
        }

        // 2. Read the record, or create it.
        let old = match self.call(self.lock.get()).await {
            Ok(Some(old)) => old,
            Ok(None) => {
                return match self.call(self.lock.create(&record)).await {
                    Ok(()) => {
                        self.set(observed, record);
                        Attempt::Held
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "error initially creating lease lock");
                        Attempt::Failed(e)
                    }
                };
            }
            Err(e) => {
                tracing::warn!(error = %e, "error retrieving lease lock");
                return Attempt::Failed(e);
            }
        };

        // 3. Note when the record changed; leave a valid lease to its holder.
        let is_me = old.holder_identity == identity;
        let (acquire_time, transitions) = (old.acquire_time, old.leader_transitions);
        ObservedRecord::observe(observed, old, self.clock.now());
        if let Some(seen) = observed.as_ref()
            && !seen.is_free_for(identity, now)
        {
            tracing::trace!(holder = %seen.record.holder_identity, "lease is held and has not yet expired");
            return Attempt::HeldByOther;
        }

        // 4. Take (or keep) it, over the version just read.
        if is_me {
            record.acquire_time = acquire_time;
            record.leader_transitions = transitions;
            if let Some(hook) = self.on_slow_path {
                hook();
            }
        } else {
            record.leader_transitions = transitions.saturating_add(1);
        }
        match self.call(self.lock.update(&record)).await {
            Ok(()) => {
                self.set(observed, record);
                Attempt::Held
            }
            Err(Error::Conflict) => {
                tracing::debug!("lost a race to update the lease");
                Attempt::Failed(Error::Conflict)
            }
            Err(e) => {
                tracing::warn!(error = %e, "failed to update lease");
                Attempt::Failed(e)
            }
        }
    }

    /// client-go's `release`, reading first: if the record, read afresh, still names this
    /// candidate, writes over it an empty holder with a 1 s lease (keeping the
    /// transitions), so that another candidate may take the lock at once. The record
    /// written is noted in `observed`.
    ///
    /// # Errors
    /// The error of the read or of the write.
    pub async fn release(&self, observed: &mut Option<ObservedRecord>) -> Result<Release, Error> {
        self.release_from(observed, self.lock.identity()).await
    }

    /// [`release`](Self::release) of a record naming `holder` rather than this candidate:
    /// a lock handed to a name that renews nothing ([`hand_over`](Self::hand_over)) is
    /// freed this way.
    ///
    /// # Errors
    /// The error of the read or of the write.
    pub async fn release_from(
        &self,
        observed: &mut Option<ObservedRecord>,
        holder: &str,
    ) -> Result<Release, Error> {
        let Some(current) = self.call(self.lock.get()).await? else {
            return Ok(Release::NotFound);
        };
        // client-go checks the record it saw last, which can be older than the one just
        // read; the fresh one is what the update will overwrite.
        if current.holder_identity != holder {
            return Ok(Release::NotHolder);
        }
        let now = Some(truncate_to_micros(self.clock.wall_now()));
        let released = LeaderElectionRecord {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            acquire_time: now,
            renew_time: now,
            leader_transitions: current.leader_transitions,
        };
        self.call(self.lock.update(&released)).await?;
        self.set(observed, released);
        Ok(Release::Released)
    }

    /// Hands the lock to `holder`, a name that is not a candidate and renews nothing, for
    /// `lease_duration_seconds`: with the rules of
    /// [`try_acquire_or_renew`](Self::try_acquire_or_renew) (read afresh, created when
    /// there is none, left to a holder whose lease has not expired, written over the
    /// version read), but the record written names `holder`. Candidates then see the lock
    /// held until that lease expires. kinformer-sharding marks the Leases of a replaced
    /// shard count this way. [`Attempt::Held`] when the record names `holder` (already, or
    /// now).
    pub async fn hand_over(
        &self,
        observed: &mut Option<ObservedRecord>,
        holder: &str,
        lease_duration_seconds: i32,
    ) -> Attempt {
        let now = self.clock.now();
        let wall = Some(truncate_to_micros(self.clock.wall_now()));
        let mut record = LeaderElectionRecord {
            holder_identity: holder.to_owned(),
            lease_duration_seconds,
            acquire_time: wall,
            renew_time: wall,
            leader_transitions: 0,
        };
        let written = match self.call(self.lock.get()).await {
            Ok(None) => self.call(self.lock.create(&record)).await,
            Ok(Some(old)) => {
                let transitions = old.leader_transitions;
                let named = old.holder_identity == holder;
                ObservedRecord::observe(observed, old, now);
                if named {
                    return Attempt::Held;
                }
                if observed
                    .as_ref()
                    .is_some_and(|seen| !seen.is_free_for(self.lock.identity(), now))
                {
                    return Attempt::HeldByOther;
                }
                record.leader_transitions = transitions.saturating_add(1);
                self.call(self.lock.update(&record)).await
            }
            Err(e) => Err(e),
        };
        match written {
            Ok(()) => {
                self.set(observed, record);
                Attempt::Held
            }
            Err(e) => Attempt::Failed(e),
        }
    }

    /// Reads the record and notes it in `observed` (when there is one). The record read,
    /// or `None` when there is none.
    ///
    /// # Errors
    /// The read's.
    pub async fn read(
        &self,
        observed: &mut Option<ObservedRecord>,
    ) -> Result<Option<LeaderElectionRecord>, Error> {
        let record = self.call(self.lock.get()).await?;
        if let Some(r) = &record {
            ObservedRecord::observe(observed, r.clone(), self.clock.now());
        }
        Ok(record)
    }

    /// `record` written: seen now.
    fn set(&self, observed: &mut Option<ObservedRecord>, record: LeaderElectionRecord) {
        *observed = Some(ObservedRecord::new(record, self.clock.now()));
    }

    /// One lock operation, cut at the request timeout.
    async fn call<T>(&self, op: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        let limit = self.request_timeout;
        tokio::select! {
            result = op => result,
            () = self.clock.sleep_until(self.clock.now() + limit) => Err(Error::Timeout(limit)),
        }
    }
}

impl<L: ?Sized> std::fmt::Debug for LeaseAttempt<'_, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseAttempt")
            .field("lease_duration_seconds", &self.lease_duration_seconds)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
