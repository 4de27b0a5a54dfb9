//! The health check: a leader stuck without renewing should be restarted.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::{Error, LeaderElector};

/// client-go's `HealthzAdaptor`: a health check (for `/healthz` or a liveness probe) that
/// fails when this process holds the lease by the last record it saw but has not renewed it
/// for longer than the lease duration plus `timeout` — it should have stepped down or
/// renewed by then, so something is stuck (a deadlock, a starved runtime) and the kubelet
/// should restart it. Standbys and a leader that renews are healthy.
///
/// It can be made before the elector (a health endpoint is usually set up first) and tied to
/// it later; until then it is healthy.
///
/// ```
/// use std::time::Duration;
/// use kinformer_leaderelection::HealthzAdaptor;
///
/// let health = HealthzAdaptor::new(Duration::from_secs(20));
/// assert_eq!(health.name(), "leaderElection");
/// assert!(health.check().is_ok()); // no elector yet
/// // later: health.set_leader_election(&elector);
/// ```
#[derive(Clone)]
pub struct HealthzAdaptor {
    elector: Arc<Mutex<Option<LeaderElector>>>,
    timeout: Duration,
}

impl HealthzAdaptor {
    /// A check that tolerates a lease expired by up to `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self {
            elector: Arc::new(Mutex::new(None)),
            timeout,
        }
    }

    /// The check's name, `leaderElection` (client-go's).
    pub fn name(&self) -> &'static str {
        "leaderElection"
    }

    /// Ties the check to `elector` (every clone of this adaptor sees it).
    pub fn set_leader_election(&self, elector: &LeaderElector) {
        *self.elector.lock().unwrap_or_else(PoisonError::into_inner) = Some(elector.clone());
    }

    /// Runs the check: [`LeaderElector::check`] with this adaptor's timeout.
    ///
    /// # Errors
    /// [`Error::LeaseNotRenewed`].
    pub fn check(&self) -> Result<(), Error> {
        let elector = self
            .elector
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match elector {
            Some(elector) => elector.check(self.timeout),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for HealthzAdaptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthzAdaptor")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}
