//! The one error type of the crate.

use std::time::Duration;

/// A boxed error from below a [`Lock`](crate::Lock): the HTTP client, TLS, the network, or a
/// user's own lock backend.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The one error type of kinformer-leaderelection.
///
/// Lock operations fail with [`Conflict`](Error::Conflict), [`NotFound`](Error::NotFound),
/// [`NotLoaded`](Error::NotLoaded), [`Api`](Error::Api), [`Unreachable`](Error::Unreachable)
/// or [`Timeout`](Error::Timeout); the elector treats each as one failed attempt and retries
/// after the retry period (a leader steps down once its renew deadline passes), so they reach
/// the caller only through logs and a custom [`Lock`](crate::Lock)'s own calls. The others
/// are returned to the caller.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The [`LeaderElectionConfig`](crate::LeaderElectionConfig) breaks one of the rules in
    /// [`LeaderElectionConfig::validate`](crate::LeaderElectionConfig::validate). Fix the
    /// config.
    #[error("invalid leader election config: {0}")]
    InvalidConfig(&'static str),

    /// The lock's identity is empty: every candidate needs a unique, non-empty identity.
    #[error("the lock's identity is empty")]
    EmptyIdentity,

    /// The record changed since this lock last read or wrote it (an HTTP 409 on the Lease's
    /// resourceVersion): someone else wrote first. The elector reads it again on its next try.
    #[error("the leader record changed since it was read (conflict)")]
    Conflict,

    /// The record's object was deleted since it was read, so it cannot be updated.
    #[error("the leader record's object does not exist")]
    NotFound,

    /// [`Lock::update`](crate::Lock::update) was called before any successful
    /// [`get`](crate::Lock::get) or [`create`](crate::Lock::create): there is no version to
    /// update from. The elector never does this; a custom caller of a lock might.
    #[error("the lock has no record to update: call get or create first")]
    NotLoaded,

    /// The API server answered with an error status other than 404 and 409 (403 when RBAC
    /// does not allow the identity to read or write Leases, 500, 429, ...).
    #[error("the API server answered {code} {reason}: {message}")]
    Api {
        /// The HTTP status code.
        code: u16,
        /// The status reason (`Forbidden`, `InternalError`, ...).
        reason: String,
        /// The server's message.
        message: String,
    },

    /// The lock's server could not be reached or the connection broke.
    #[error("cannot reach the lock's server: {0}")]
    Unreachable(BoxError),

    /// One lock operation took longer than the elector allows it
    /// ([`LeaderElectionConfig::request_timeout`](crate::LeaderElectionConfig::request_timeout),
    /// and never past a leader's renew deadline).
    #[error("the lock operation did not finish within {0:?}")]
    Timeout(Duration),

    /// [`LeaderElector::run`](crate::LeaderElector::run) or
    /// [`run_once`](crate::LeaderElector::run_once) was called while another run of the same
    /// elector is going on. One elector takes part in one election at a time; make another
    /// elector (with another identity) for a second one.
    #[error("this elector is already running")]
    AlreadyRunning,

    /// The health check failed: this process holds the lease by the last record it saw, but
    /// has not renewed it for longer than the lease duration plus the tolerated delay
    /// (client-go's `HealthzAdaptor`). The process is stuck; restart it.
    #[error("leader election for {name} did not renew the lease for {since:?}")]
    LeaseNotRenewed {
        /// The election's name.
        name: String,
        /// How long ago the lease was last renewed.
        since: Duration,
    },

    /// [`set_metrics_provider`](crate::set_metrics_provider) was called a second time; only
    /// the first call has an effect.
    #[error("a leader election metrics provider is already set")]
    MetricsProviderAlreadySet,
}
