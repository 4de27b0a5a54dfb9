//! The election's timings and options, and the rules they must follow.

use std::time::Duration;

use crate::Error;

/// client-go's jitter factor: a candidate retries after the retry period plus up to 1.2 times
/// the retry period, so that candidates started together spread out.
pub const JITTER_FACTOR: f64 = 1.2;

/// The timings and options of an election (client-go's `LeaderElectionConfig` without the
/// lock and the callbacks, which [`LeaderElector::builder`](crate::LeaderElector::builder)
/// takes).
///
/// The defaults are client-go's "core clients" ones: lease 15 s, renew deadline 10 s, retry
/// 2 s. Every candidate of one election should use the same timings; a candidate honours the
/// lease duration the *holder* wrote into the record, so a mismatch makes the others wait the
/// holder's duration, not their own.
///
/// ```
/// use std::time::Duration;
/// use kinformer_leaderelection::LeaderElectionConfig;
///
/// let config = LeaderElectionConfig {
///     lease_duration: Duration::from_secs(4),
///     renew_deadline: Duration::from_millis(2500),
///     retry_period: Duration::from_millis(500),
///     release_on_cancel: true,
///     ..LeaderElectionConfig::default()
/// };
/// config.validate().unwrap();
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct LeaderElectionConfig {
    /// How long a candidate waits, after it last saw the record change, before it may take
    /// the lock. It is also what the holder writes into the record. A whole number of seconds
    /// (the record holds whole seconds). Trade-off: the shorter, the faster a dead leader is
    /// replaced; the longer, the more clock-rate difference between nodes and API latency is
    /// tolerated.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leadership. Counted from
    /// the moment the last successful renewal was *sent*, so that the leader is sure to stop
    /// before any other candidate may start (at least a lease duration after that write).
    pub renew_deadline: Duration,
    /// How long a candidate waits between tries, to acquire (plus jitter, see
    /// [`JITTER_FACTOR`]) and to renew.
    pub retry_period: Duration,
    /// Whether to give the lock up (write an empty holder, as client-go does) when the run
    /// is cancelled or the leading work returns, so a standby takes over at its next retry
    /// instead of after a lease duration. The release is written only after the leading work
    /// has returned.
    pub release_on_cancel: bool,
    /// The election's name in logs and in the metrics' `name` label; the lock's description
    /// (`namespace/name`) when empty.
    pub name: String,
    /// The longest one lock operation may take; `None` means max(1 s, renew deadline / 2),
    /// what client-go's `NewFromKubeconfig` sets as its client's timeout. A leader's
    /// operation is also cut at its renew deadline, whatever this says.
    pub request_timeout: Option<Duration>,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: false,
            name: String::new(),
            request_timeout: None,
        }
    }
}

impl LeaderElectionConfig {
    /// Checks client-go's rules, plus the one the record's whole seconds impose:
    ///
    /// - the lease duration, the renew deadline and the retry period are positive;
    /// - lease duration > renew deadline (the leader must stop before others may start);
    /// - renew deadline > [`JITTER_FACTOR`] × retry period (room for at least one retry);
    /// - the lease duration is a whole number of seconds and fits the record (client-go
    ///   silently truncates: a 1.5 s lease would be written as 1 s, shorter than the renew
    ///   deadline the leader believes in);
    /// - a request timeout, when given, is positive.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the broken rule.
    pub fn validate(&self) -> Result<(), Error> {
        if self.lease_duration.is_zero() {
            return Err(Error::InvalidConfig(
                "leaseDuration must be greater than zero",
            ));
        }
        if self.renew_deadline.is_zero() {
            return Err(Error::InvalidConfig(
                "renewDeadline must be greater than zero",
            ));
        }
        if self.retry_period.is_zero() {
            return Err(Error::InvalidConfig(
                "retryPeriod must be greater than zero",
            ));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::InvalidConfig(
                "leaseDuration must be greater than renewDeadline",
            ));
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(Error::InvalidConfig(
                "renewDeadline must be greater than retryPeriod*JitterFactor",
            ));
        }
        if self.lease_duration.subsec_nanos() != 0 {
            return Err(Error::InvalidConfig(
                "leaseDuration must be a whole number of seconds (the record holds seconds)",
            ));
        }
        if i32::try_from(self.lease_duration.as_secs()).is_err() {
            return Err(Error::InvalidConfig(
                "leaseDuration must fit the record's 32-bit seconds",
            ));
        }
        if self.request_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::InvalidConfig(
                "requestTimeout must be greater than zero",
            ));
        }
        Ok(())
    }

    /// The timeout of one lock operation.
    pub(crate) fn effective_request_timeout(&self) -> Duration {
        self.request_timeout
            .unwrap_or_else(|| (self.renew_deadline / 2).max(Duration::from_secs(1)))
    }
}

/// A lease duration as the record holds it: whole seconds (what
/// [`LeaderElectionConfig::validate`] requires of it).
pub(crate) fn lease_duration_seconds(lease_duration: Duration) -> i32 {
    i32::try_from(lease_duration.as_secs()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(f: impl FnOnce(&mut LeaderElectionConfig)) -> Result<(), Error> {
        let mut c = LeaderElectionConfig::default();
        f(&mut c);
        c.validate()
    }

    fn broken_rule(r: Result<(), Error>) -> &'static str {
        match r {
            Err(Error::InvalidConfig(rule)) => rule,
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    #[test]
    fn config_validation_accepts_client_gos_defaults_and_rejects_what_client_go_rejects() {
        let defaults = LeaderElectionConfig::default();
        assert_eq!(defaults.lease_duration, Duration::from_secs(15));
        assert_eq!(defaults.renew_deadline, Duration::from_secs(10));
        assert_eq!(defaults.retry_period, Duration::from_secs(2));
        assert!(!defaults.release_on_cancel);
        defaults.validate().unwrap();
        assert_eq!(defaults.effective_request_timeout(), Duration::from_secs(5));

        let secs = Duration::from_secs;
        assert_eq!(
            broken_rule(with(|c| c.lease_duration = secs(10))),
            "leaseDuration must be greater than renewDeadline"
        );
        assert_eq!(
            broken_rule(with(|c| c.retry_period = Duration::from_millis(8400))),
            "renewDeadline must be greater than retryPeriod*JitterFactor"
        );
        // 1.2 × 8.3 s = 9.96 s < 10 s: allowed.
        with(|c| c.retry_period = Duration::from_millis(8300)).unwrap();
        assert_eq!(
            broken_rule(with(|c| c.lease_duration = Duration::ZERO)),
            "leaseDuration must be greater than zero"
        );
        assert_eq!(
            broken_rule(with(|c| c.renew_deadline = Duration::ZERO)),
            "renewDeadline must be greater than zero"
        );
        assert_eq!(
            broken_rule(with(|c| c.retry_period = Duration::ZERO)),
            "retryPeriod must be greater than zero"
        );
        assert_eq!(
            broken_rule(with(|c| c.request_timeout = Some(Duration::ZERO))),
            "requestTimeout must be greater than zero"
        );
    }

    #[test]
    fn config_validation_rejects_a_lease_the_record_cannot_hold() {
        assert_eq!(
            broken_rule(with(|c| c.lease_duration = Duration::from_millis(15_500))),
            "leaseDuration must be a whole number of seconds (the record holds seconds)"
        );
        assert_eq!(
            broken_rule(with(|c| c.lease_duration = Duration::from_secs(1 << 31))),
            "leaseDuration must fit the record's 32-bit seconds"
        );
        let short = LeaderElectionConfig {
            lease_duration: Duration::from_secs(1),
            renew_deadline: Duration::from_millis(800),
            retry_period: Duration::from_millis(100),
            ..LeaderElectionConfig::default()
        };
        short.validate().unwrap();
        assert_eq!(lease_duration_seconds(short.lease_duration), 1);
        assert_eq!(short.effective_request_timeout(), Duration::from_secs(1));
    }
}
