use std::time::Duration;

use std::time::Instant;

/// How the reflector spaces its retries: client-go's reflector backoff, with two changes that
/// make it recover at once when the server is back (both can be turned off:
/// [`Backoff::client_go`]).
///
/// The n-th delay is `initial * factor^n`, capped at `max`, then jittered up by as much
/// as `jitter` times itself (so with the defaults: 0.8–1.6 s, 1.6–3.2 s, ..., 30–60 s).
/// After `reset_after` without a backoff the next delay starts again at `initial`.
/// One backoff is shared by every retry of a reflector (failed lists, failed watch
/// starts, 429s), so a server that fails in different ways still sees the spacing grow.
///
/// What kinformer changes, and why: client-go resets only after two quiet minutes, so a
/// reflector that backed off to 30–60 s during a partition or an API server restart waits
/// up to a minute more after the server is back, and blind for minutes after a few short
/// blips. Here:
///
/// - **`reset_on_success`** (on): a watch that delivers an event or a bookmark (the server
///   works end to end), or a `410 Gone` (the server answered; only its history is short),
///   starts the next failure's backoff at `initial` again. A list that succeeds does not
///   reset it: a client allowed to list but not to watch would otherwise re-list everything
///   every second. Consecutive failures still escalate.
/// - **`max_unreachable`** (1 s): while the server cannot be *reached* (connection refused,
///   reset, TLS cut: [`Error::is_unreachable`](crate::Error::is_unreachable)), the delay is
///   capped lower than `max`, and so is the escalation it leaves behind. A server that is
///   not there pays nothing for a refused connection; one that is struggling answers `429`
///   or `5xx`, and those keep the full escalation to `max`. Jitter still spreads
///   reconnecting clients.
///
/// Time is the reflector's [`Clock`](kinformer_core::Clock) ([`Reflector::clock`](crate::Reflector::clock);
/// Tokio's by default, so tests can run it on paused time).
///
/// ```
/// use std::time::Duration;
/// use kinformer_reflector::Backoff;
///
/// let b = Backoff::default();
/// assert_eq!(b.initial, Duration::from_millis(800));
/// assert_eq!(b.max, Duration::from_secs(30));
/// assert!(b.reset_on_success);
/// // client-go's reflector, to the letter:
/// let faithful = Backoff::client_go();
/// assert!(!faithful.reset_on_success);
/// assert_eq!(faithful.max_unreachable, faithful.max);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Backoff {
    /// The first delay (800 ms).
    pub initial: Duration,
    /// The cap on the un-jittered delay (30 s).
    pub max: Duration,
    /// The growth per step (2.0).
    pub factor: f64,
    /// The jitter: each delay is stretched by a random fraction in `[0, jitter)` of
    /// itself (1.0).
    pub jitter: f64,
    /// A backoff this long after the previous one starts over at `initial` (2 min).
    pub reset_after: Duration,
    /// Whether a watch that delivers an event (or a `410 Gone`) starts the next backoff at
    /// `initial` (true; client-go: false).
    pub reset_on_success: bool,
    /// The cap on the un-jittered delay while the server cannot be reached (1 s; client-go:
    /// `max`).
    pub max_unreachable: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            reset_on_success: true,
            max_unreachable: Duration::from_secs(1),
            ..Self::client_go()
        }
    }
}

impl Backoff {
    /// client-go's reflector backoff exactly: 800 ms doubling to 30 s, jitter 1.0, reset only
    /// after two quiet minutes, whatever the failure.
    pub fn client_go() -> Self {
        Self {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
            reset_on_success: false,
            max_unreachable: Duration::from_secs(30),
        }
    }
}

/// The running state of a [`Backoff`]: client-go's `backoffManager`, except that the
/// reset counts from the previous backoff (two *quiet* minutes), not from the previous
/// reset, so a server that stays down keeps its long delays.
#[derive(Debug)]
pub(crate) struct BackoffState {
    config: Backoff,
    next: Duration,
    last: Option<Instant>,
}

impl BackoffState {
    pub(crate) fn new(config: Backoff) -> Self {
        let next = config.initial;
        Self {
            config,
            next,
            last: None,
        }
    }

    /// The next delay to wait after a failure, as of `now`; `unreachable` when the server
    /// could not be reached at all.
    pub(crate) fn next_delay(&mut self, now: Instant, unreachable: bool) -> Duration {
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) > self.config.reset_after)
        {
            self.next = self.config.initial;
        }
        self.last = Some(now);
        let cap = if unreachable {
            self.config.max_unreachable.min(self.config.max)
        } else {
            self.config.max
        };
        let base = self.next.min(cap);
        self.next = base.mul_f64(self.config.factor.max(1.0)).min(cap);
        let jitter = self.config.jitter.max(0.0);
        if jitter > 0.0 {
            base + base.mul_f64(jitter * fastrand::f64())
        } else {
            base
        }
    }
}

impl BackoffState {
    /// A watch delivered an event, or the server answered `410 Gone`: it is back.
    pub(crate) fn succeeded(&mut self) {
        if self.config.reset_on_success {
            self.next = self.config.initial;
        }
    }
}

/// A watch timeout picked at random in `[min, 2 * min]`, as client-go spreads watch
/// restarts over time.
pub(crate) fn random_watch_timeout(min: Duration) -> Duration {
    min + min.mul_f64(fastrand::f64())
}

#[cfg(test)]
mod tests {
    use kinformer_core::{Clock, FakeClock};

    use super::*;

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn backoff_doubles_from_800ms_with_jitter_and_caps_at_30s() {
        let clock = FakeClock::new();
        let mut b = BackoffState::new(Backoff::client_go());
        let mut base = 0.8_f64;
        for step in 0..12 {
            let d = secs(b.next_delay(clock.now(), false));
            let want = base.min(30.0);
            assert!(
                d >= want && d < 2.0 * want,
                "step {step}: {d} not in [{want}, {})",
                2.0 * want
            );
            clock.step(Duration::from_secs_f64(d));
            base *= 2.0;
        }
    }

    #[test]
    fn backoff_resets_after_two_quiet_minutes_only() {
        let clock = FakeClock::new();
        let mut b = BackoffState::new(Backoff::client_go());
        for _ in 0..6 {
            b.next_delay(clock.now(), false);
            clock.step(Duration::from_secs(60));
        }
        // Steps a minute apart never reset: the server is still failing.
        let d = secs(b.next_delay(clock.now(), false));
        assert!(d >= 25.6, "{d}");
        clock.step(Duration::from_secs(121));
        let d = secs(b.next_delay(clock.now(), false));
        assert!((0.8..1.6).contains(&d), "after 2 quiet minutes: {d}");
    }

    #[test]
    fn without_jitter_the_delays_are_exact() {
        let cfg = Backoff {
            jitter: 0.0,
            ..Backoff::client_go()
        };
        let mut b = BackoffState::new(cfg);
        let now = Instant::now();
        let got: Vec<u64> = (0..8)
            .map(|_| b.next_delay(now, false).as_millis() as u64)
            .collect();
        assert_eq!(got, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
    }

    fn exact() -> BackoffState {
        BackoffState::new(Backoff {
            jitter: 0.0,
            ..Backoff::default()
        })
    }

    #[test]
    fn a_success_starts_the_next_backoff_over_and_failures_still_escalate() {
        let now = Instant::now();
        let mut b = exact();
        let ms = |b: &mut BackoffState| b.next_delay(now, false).as_millis() as u64;
        assert_eq!([ms(&mut b), ms(&mut b), ms(&mut b)], [800, 1600, 3200]);
        b.succeeded();
        assert_eq!([ms(&mut b), ms(&mut b)], [800, 1600], "after a success");
        let mut faithful = BackoffState::new(Backoff {
            jitter: 0.0,
            ..Backoff::client_go()
        });
        faithful.next_delay(now, false);
        faithful.succeeded();
        assert_eq!(
            faithful.next_delay(now, false).as_millis(),
            1600,
            "client-go ignores successes"
        );
    }

    #[test]
    fn an_unreachable_server_is_retried_within_the_lower_cap_but_escalation_goes_on() {
        let now = Instant::now();
        let mut b = exact();
        let unreachable: Vec<u64> = (0..6)
            .map(|_| b.next_delay(now, true).as_millis() as u64)
            .collect();
        assert_eq!(unreachable, [800, 1000, 1000, 1000, 1000, 1000]);
        // The server answers again, but with an error (overloaded): escalation resumes from
        // the lower cap.
        let answered: Vec<u64> = (0..3)
            .map(|_| b.next_delay(now, false).as_millis() as u64)
            .collect();
        assert_eq!(answered, [1000, 2000, 4000]);
        let mut faithful = BackoffState::new(Backoff {
            jitter: 0.0,
            ..Backoff::client_go()
        });
        let got: Vec<u64> = (0..6)
            .map(|_| faithful.next_delay(now, true).as_millis() as u64)
            .collect();
        assert_eq!(got, [800, 1600, 3200, 6400, 12800, 25600]);
    }

    #[test]
    fn watch_timeout_is_between_min_and_twice_min() {
        let min = Duration::from_secs(300);
        let all: Vec<_> = (0..200).map(|_| random_watch_timeout(min)).collect();
        assert!(all.iter().all(|t| *t >= min && *t <= 2 * min));
        // Randomized, not constant.
        assert!(all.iter().any(|t| *t != all[0]));
    }
}
