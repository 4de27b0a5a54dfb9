//! The elector: acquire, renew, step down, release — client-go's `LeaderElector`.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::attempt::{LeaseAttempt, ObservedRecord, Release};
use crate::callbacks::NoCallbacks;
use crate::config::JITTER_FACTOR;
use crate::metrics::leader_metric;
use crate::{
    Clock, Error, LeaderCallbacks, LeaderElectionConfig, LeaderMetric, Leading, LeaseStatus, Lock,
    MetricsProvider, SystemClock,
};

#[cfg(test)]
mod tests;

/// How a term of [`LeaderElector::run_once`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TermEnd {
    /// The run was cancelled, before acquiring the lock or while leading.
    Cancelled,
    /// Leadership was lost: the renew deadline passed without a renewal, or the record
    /// names another holder.
    Lost,
    /// The leading work returned while this process still led; the elector stopped
    /// renewing (and released the lock if configured).
    WorkReturned,
}

/// A candidate in one election: acquires the lock, keeps renewing it while it leads, and
/// steps down when it cannot. See the [crate docs](crate) for the rules and guarantees.
///
/// Cheap to clone (all clones are the same candidate). Made with [`LeaderElector::new`] or
/// [`LeaderElector::builder`].
#[derive(Clone)]
pub struct LeaderElector {
    inner: Arc<Inner>,
}

struct Inner {
    config: LeaderElectionConfig,
    name: String,
    identity: String,
    description: String,
    lock: Box<dyn Lock>,
    clock: Arc<dyn Clock>,
    metrics: Box<dyn LeaderMetric>,
    callbacks: Arc<dyn LeaderCallbacks>,
    state: Mutex<State>,
    running: AtomicBool,
}

/// What this candidate knows of the election.
#[derive(Default)]
struct State {
    /// The last record seen (read or written), and when it was first seen as it is, on the
    /// monotonic clock. The record's own times are never used for decisions.
    observed: Option<ObservedRecord>,
    /// The holder last reported to [`LeaderCallbacks::new_leader`].
    reported_leader: Option<String>,
    /// The renew deadline while this candidate leads.
    leading_until: Option<Instant>,
}

/// Builds a [`LeaderElector`]: the lock (required), then the optional parts.
pub struct LeaderElectorBuilder {
    lock: Box<dyn Lock>,
    config: LeaderElectionConfig,
    clock: Arc<dyn Clock>,
    metrics_provider: Option<Arc<dyn MetricsProvider>>,
    callbacks: Arc<dyn LeaderCallbacks>,
}

impl LeaderElectorBuilder {
    /// The timings and options ([`LeaderElectionConfig::default`] otherwise).
    pub fn config(mut self, config: LeaderElectionConfig) -> Self {
        self.config = config;
        self
    }

    /// Reads time from `clock` ([`SystemClock`] otherwise).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Records this elector's metrics with `provider` instead of the global one
    /// ([`set_metrics_provider`](crate::set_metrics_provider)).
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.metrics_provider = Some(provider);
        self
    }

    /// Calls `callbacks` as leadership changes.
    pub fn callbacks(mut self, callbacks: impl LeaderCallbacks) -> Self {
        self.callbacks = Arc::new(callbacks);
        self
    }

    /// Validates the config and the lock's identity and makes the elector.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (see [`LeaderElectionConfig::validate`]) or
    /// [`Error::EmptyIdentity`].
    pub fn build(self) -> Result<LeaderElector, Error> {
        self.config.validate()?;
        let identity = self.lock.identity().to_owned();
        if identity.is_empty() {
            return Err(Error::EmptyIdentity);
        }
        let description = self.lock.describe();
        let name = if self.config.name.is_empty() {
            description.clone()
        } else {
            self.config.name.clone()
        };
        let metrics = leader_metric(self.metrics_provider.as_ref());
        metrics.off(&name);
        Ok(LeaderElector {
            inner: Arc::new(Inner {
                config: self.config,
                name,
                identity,
                description,
                lock: self.lock,
                clock: self.clock,
                metrics,
                callbacks: self.callbacks,
                state: Mutex::new(State::default()),
                running: AtomicBool::new(false),
            }),
        })
    }
}

impl fmt::Debug for LeaderElectorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElectorBuilder")
            .field("lock", &self.lock.describe())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// An elector over `lock` with `config`, the real clock, the global metrics provider and
    /// no callbacks.
    ///
    /// # Errors
    /// As [`LeaderElectorBuilder::build`].
    pub fn new(config: LeaderElectionConfig, lock: impl Lock) -> Result<Self, Error> {
        Self::builder(lock).config(config).build()
    }

    /// A builder for an elector over `lock`.
    pub fn builder(lock: impl Lock) -> LeaderElectorBuilder {
        LeaderElectorBuilder {
            lock: Box::new(lock),
            config: LeaderElectionConfig::default(),
            clock: Arc::new(SystemClock),
            metrics_provider: None,
            callbacks: Arc::new(NoCallbacks),
        }
    }

    /// This candidate's identity (the lock's).
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// The election's name: [`LeaderElectionConfig::name`], or the lock's description.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The config this elector runs with.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.inner.config
    }

    /// The holder named by the last record this candidate saw; `None` before the first read
    /// or when the lock is released. For information (logs, status pages): it may be stale.
    pub fn get_leader(&self) -> Option<String> {
        self.inner
            .state()
            .observed
            .as_ref()
            .map(|o| o.record.holder_identity.clone())
            .filter(|h| !h.is_empty())
    }

    /// Whether this candidate leads now: it is in a term of leadership and its renew
    /// deadline has not passed. (client-go's `IsLeader` answers whether the last record seen
    /// names this candidate, which stays true after a leader loses contact with the server.)
    pub fn is_leader(&self) -> bool {
        let now = self.inner.clock.now();
        self.inner.state().leading_until.is_some_and(|d| now < d)
    }

    /// What this candidate knows of its Lease now, for a status page: the holder, this
    /// candidate's part, the record's times, and when the lease expires on this candidate's
    /// clock. Makes no request: the record is the last one read or written.
    pub fn status(&self) -> LeaseStatus {
        let leading = self.is_leader();
        let inner = &self.inner;
        let state = inner.state();
        LeaseStatus::new(
            inner.name.clone(),
            inner.identity.clone(),
            state.observed.as_ref(),
            leading,
            &*inner.clock,
        )
    }

    /// client-go's `Check`: fails when the last record seen names this candidate but that
    /// record was seen more than a lease duration plus `max_tolerable_expired_lease` ago,
    /// i.e. this process believes it holds a lease it has not renewed in time. A standby is
    /// always healthy. See [`HealthzAdaptor`](crate::HealthzAdaptor).
    ///
    /// # Errors
    /// [`Error::LeaseNotRenewed`].
    pub fn check(&self, max_tolerable_expired_lease: Duration) -> Result<(), Error> {
        let inner = &self.inner;
        let state = inner.state();
        let Some(seen) = &state.observed else {
            return Ok(());
        };
        if !seen.names(&inner.identity) {
            return Ok(());
        }
        let since = inner.clock.now().saturating_duration_since(seen.since);
        if since > inner.config.lease_duration + max_tolerable_expired_lease {
            return Err(Error::LeaseNotRenewed {
                name: inner.name.clone(),
                since,
            });
        }
        Ok(())
    }

    /// Takes part in the election until `cancel` fires or the leading work returns, leading
    /// whenever this candidate holds the lock: each time it acquires the lock, `work` is
    /// called with a [`Leading`] handle and the future it returns is spawned; when
    /// leadership is lost, the handle's token is cancelled, the work is awaited, and the
    /// candidate goes back to waiting for the lock (a warm standby).
    ///
    /// Returns [`TermEnd::Cancelled`] or [`TermEnd::WorkReturned`], never
    /// [`TermEnd::Lost`]. client-go's `Run` is one term: see [`run_once`](Self::run_once).
    ///
    /// Must be called within a Tokio runtime. The work must stop when its token is
    /// cancelled: the elector waits for it before it releases the lock or tries again.
    ///
    /// # Errors
    /// [`Error::AlreadyRunning`] when this elector is already running.
    pub async fn run<F, Fut>(
        &self,
        cancel: &CancellationToken,
        mut work: F,
    ) -> Result<TermEnd, Error>
    where
        F: FnMut(Leading) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let _running = RunGuard::enter(&self.inner.running)?;
        loop {
            match self.term(cancel, &mut work).await {
                TermEnd::Lost => {}
                end => return Ok(end),
            }
        }
    }

    /// One term, as client-go's `Run`: waits until this candidate acquires the lock (or
    /// `cancel` fires), spawns `work` with a [`Leading`] handle, renews until leadership is
    /// lost, `cancel` fires or the work returns, then cancels the handle's token, awaits the
    /// work, releases the lock if [`LeaderElectionConfig::release_on_cancel`] says so, and
    /// returns how the term ended.
    ///
    /// # Errors
    /// [`Error::AlreadyRunning`] when this elector is already running.
    pub async fn run_once<F, Fut>(
        &self,
        cancel: &CancellationToken,
        work: F,
    ) -> Result<TermEnd, Error>
    where
        F: FnOnce(Leading) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let _running = RunGuard::enter(&self.inner.running)?;
        Ok(self.term(cancel, work).await)
    }

    async fn term<F, Fut>(&self, cancel: &CancellationToken, work: F) -> TermEnd
    where
        F: FnOnce(Leading) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let span = tracing::info_span!(
            "leader_election",
            lock = %self.inner.description,
            identity = %self.inner.identity,
        );
        self.inner.term(cancel, work).instrument(span).await
    }
}

impl fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElector")
            .field("name", &self.inner.name)
            .field("identity", &self.inner.identity)
            .field("lock", &self.inner.description)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Marks an elector as running for as long as it lives.
struct RunGuard<'a>(&'a AtomicBool);

impl<'a> RunGuard<'a> {
    fn enter(running: &'a AtomicBool) -> Result<Self, Error> {
        if running.swap(true, Ordering::AcqRel) {
            return Err(Error::AlreadyRunning);
        }
        Ok(Self(running))
    }
}

impl Drop for RunGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing runs user code under this lock; a poisoned one still holds whole values.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn term<F, Fut>(&self, cancel: &CancellationToken, work: F) -> TermEnd
    where
        F: FnOnce(Leading) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Some(sent) = self.acquire(cancel).await else {
            return TermEnd::Cancelled;
        };
        let deadline = sent + self.config.renew_deadline;
        if self.clock.now() >= deadline {
            // Paused between sending the winning write and reading its answer: that write
            // no longer makes this process the leader.
            tracing::info!("acquired the lease but its renew deadline passed meanwhile");
            self.release_if_configured().await;
            return TermEnd::Lost;
        }

        let token = cancel.child_token();
        let leading = Leading::new(token.clone(), deadline, Arc::clone(&self.clock));
        self.callbacks.started_leading(deadline);
        self.state().leading_until = Some(deadline);
        self.metrics.on(&self.name);
        self.metrics.transition(&self.name);
        tracing::info!("successfully acquired lease; leading");

        let mut handle = tokio::spawn(work(leading.clone()).in_current_span());
        let mut end = tokio::select! {
            biased;
            end = self.lead(cancel, &leading, deadline) => end,
            joined = &mut handle => {
                log_work_end(joined);
                TermEnd::WorkReturned
            }
        };
        // Work that returned because the run was cancelled (its token is a child of
        // `cancel`) ends the term as a cancellation.
        let work_returned = end == TermEnd::WorkReturned;
        if work_returned && cancel.is_cancelled() {
            end = TermEnd::Cancelled;
        }

        token.cancel();
        self.state().leading_until = None;
        self.metrics.off(&self.name);
        self.callbacks.stopped_leading();
        tracing::info!(?end, "stopped leading");
        if !work_returned {
            log_work_end(handle.await);
        }
        self.release_if_configured().await;
        end
    }

    /// Tries until the lock is acquired: returns when the winning attempt was sent, or
    /// `None` once `cancel` fires.
    async fn acquire(&self, cancel: &CancellationToken) -> Option<Instant> {
        tracing::info!("attempting to acquire leader lease");
        loop {
            if cancel.is_cancelled() {
                return None;
            }
            let sent = self.clock.now();
            let acquired = tokio::select! {
                biased;
                () = cancel.cancelled() => return None,
                acquired = self.try_acquire_or_renew() => acquired,
            };
            self.maybe_report_transition();
            if acquired {
                return Some(sent);
            }
            let now = self.clock.now();
            let mut wake = now + jittered(self.config.retry_period);
            // Try again the moment the lease expires on this clock rather than at the next
            // jittered retry: a dead leader is replaced up to 2.2 retry periods sooner.
            if let Some(expiry) = self.observed_expiry().filter(|e| *e > now) {
                wake = wake.min(expiry);
            }
            tokio::select! {
                biased;
                () = cancel.cancelled() => return None,
                () = self.clock.sleep_until(wake) => {}
            }
        }
    }

    /// Renews every retry period until leadership is lost or `cancel` fires.
    async fn lead(
        &self,
        cancel: &CancellationToken,
        leading: &Leading,
        mut deadline: Instant,
    ) -> TermEnd {
        loop {
            let wake = (self.clock.now() + self.config.retry_period).min(deadline);
            tokio::select! {
                biased;
                () = cancel.cancelled() => return TermEnd::Cancelled,
                () = self.clock.sleep_until(wake) => {}
            }
            if self.clock.now() >= deadline {
                tracing::info!("failed to renew lease before the renew deadline");
                return TermEnd::Lost;
            }
            let sent = self.clock.now();
            let renewed = tokio::select! {
                biased;
                () = cancel.cancelled() => return TermEnd::Cancelled,
                () = self.clock.sleep_until(deadline) => {
                    tracing::info!("renewal still pending at the renew deadline");
                    return TermEnd::Lost;
                }
                renewed = self.try_acquire_or_renew() => renewed,
            };
            self.maybe_report_transition();
            if renewed {
                let next = sent + self.config.renew_deadline;
                if self.clock.now() >= next {
                    tracing::info!("renewed, but the renewal came back after its own deadline");
                    return TermEnd::Lost;
                }
                self.callbacks.renewed(next);
                leading.set_deadline(next);
                self.state().leading_until = Some(next);
                deadline = next;
                tracing::trace!("renewed lease");
            } else if !self.observed_is_me() {
                // client-go keeps trying until its deadline; the record says someone else
                // leads (they saw this holder's record unchanged for a lease duration), so
                // there is nothing left to renew.
                tracing::info!(holder = ?self.get_observed_holder(), "the lease has another holder");
                return TermEnd::Lost;
            }
        }
    }

    /// The one step of the lease algorithm on this elector's lock, clock and timing.
    fn attempt<'a>(
        &'a self,
        on_slow_path: &'a (dyn Fn() + Send + Sync),
    ) -> LeaseAttempt<'a, dyn Lock> {
        LeaseAttempt::new(
            &*self.lock,
            self.config.lease_duration,
            self.config.effective_request_timeout(),
            &*self.clock,
        )
        .on_slow_path(on_slow_path)
    }

    /// client-go's `tryAcquireOrRenew`: one attempt to take or keep the lock
    /// ([`LeaseAttempt::try_acquire_or_renew`]).
    async fn try_acquire_or_renew(&self) -> bool {
        let mut observed = self.state().observed.clone();
        let slow_path = || self.metrics.slowpath_exercised(&self.name);
        let attempt = self
            .attempt(&slow_path)
            .try_acquire_or_renew(&mut observed)
            .await;
        self.state().observed = observed;
        attempt.is_held()
    }

    /// client-go's `release`: clears the holder if the record (read afresh) still names this
    /// candidate. Bounded by the renew deadline.
    async fn release_if_configured(&self) {
        if !self.config.release_on_cancel {
            return;
        }
        let limit = self.clock.now() + self.config.renew_deadline;
        tokio::select! {
            () = self.release() => {}
            () = self.clock.sleep_until(limit) => tracing::warn!("releasing the lease timed out"),
        }
    }

    /// [`LeaseAttempt::release`], logged.
    async fn release(&self) {
        let mut observed = self.state().observed.clone();
        let released = self.attempt(&|| {}).release(&mut observed).await;
        self.state().observed = observed;
        match released {
            Ok(Release::Released) => {
                self.maybe_report_transition();
                tracing::info!("released the lease");
            }
            Ok(Release::NotFound) => tracing::info!("lease lock not found; nothing to release"),
            Ok(Release::NotHolder) => {}
            Err(e) => tracing::warn!(error = %e, "failed to release lease"),
        }
    }

    fn observed_is_me(&self) -> bool {
        self.state()
            .observed
            .as_ref()
            .is_some_and(|o| o.names(&self.identity))
    }

    fn get_observed_holder(&self) -> Option<String> {
        self.state()
            .observed
            .as_ref()
            .map(|o| o.record.holder_identity.clone())
    }

    /// When the last record seen expires on this clock: first seen + its lease duration.
    fn observed_expiry(&self) -> Option<Instant> {
        self.state().observed.as_ref().map(ObservedRecord::expiry)
    }

    /// client-go's `maybeReportTransition`.
    fn maybe_report_transition(&self) {
        let changed = {
            let mut state = self.state();
            let holder = state
                .observed
                .as_ref()
                .map(|o| o.record.holder_identity.clone());
            match holder {
                Some(h) if state.reported_leader.as_ref() != Some(&h) => {
                    state.reported_leader = Some(h.clone());
                    Some(h)
                }
                _ => None,
            }
        };
        if let Some(holder) = changed {
            tracing::info!(leader = %holder, "new leader observed");
            self.callbacks.new_leader(&holder);
        }
    }
}

/// `retry` plus a random share of up to [`JITTER_FACTOR`] times it (client-go's
/// `wait.Jitter`).
fn jittered(retry: Duration) -> Duration {
    retry + retry.mul_f64(fastrand::f64() * JITTER_FACTOR)
}

fn log_work_end(joined: Result<(), tokio::task::JoinError>) {
    if let Err(e) = joined {
        tracing::error!(error = %e, "the leading work ended abnormally");
    }
}
