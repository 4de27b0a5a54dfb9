use std::time::Duration;

use tokio::time::Instant;

/// How the reflector spaces its retries: client-go's reflector backoff.
///
/// The n-th delay is `initial * factor^n`, capped at `max`, then jittered up by as much
/// as `jitter` times itself (so with the defaults: 0.8–1.6 s, 1.6–3.2 s, ..., 30–60 s).
/// After `reset_after` without a backoff the next delay starts again at `initial`.
/// One backoff is shared by every retry of a reflector (failed lists, failed watch
/// starts, 429s), so a server that fails in different ways still sees the spacing grow.
///
/// Time is Tokio's ([`tokio::time::Instant`], [`tokio::time::sleep`]), so tests can run it
/// on paused time.
///
/// ```
/// use std::time::Duration;
/// use kinformer_reflector::Backoff;
///
/// let b = Backoff::default();
/// assert_eq!(b.initial, Duration::from_millis(800));
/// assert_eq!(b.max, Duration::from_secs(30));
/// let mut fast = Backoff::default();
/// fast.initial = Duration::from_millis(10);
/// fast.jitter = 0.0;
/// # let _ = fast;
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
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
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

    /// The next delay to wait, as of `now`.
    pub(crate) fn next_delay(&mut self, now: Instant) -> Duration {
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) > self.config.reset_after)
        {
            self.next = self.config.initial;
        }
        self.last = Some(now);
        let base = self.next.min(self.config.max);
        let grown = base.mul_f64(self.config.factor.max(1.0));
        self.next = grown.min(self.config.max);
        let jitter = self.config.jitter.max(0.0);
        if jitter > 0.0 {
            base + base.mul_f64(jitter * fastrand::f64())
        } else {
            base
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
    use super::*;

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_from_800ms_with_jitter_and_caps_at_30s() {
        let mut b = BackoffState::new(Backoff::default());
        let mut base = 0.8_f64;
        for step in 0..12 {
            let d = secs(b.next_delay(Instant::now()));
            let want = base.min(30.0);
            assert!(
                d >= want && d < 2.0 * want,
                "step {step}: {d} not in [{want}, {})",
                2.0 * want
            );
            tokio::time::advance(Duration::from_secs_f64(d)).await;
            base *= 2.0;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_resets_after_two_quiet_minutes_only() {
        let mut b = BackoffState::new(Backoff::default());
        for _ in 0..6 {
            b.next_delay(Instant::now());
            tokio::time::advance(Duration::from_secs(60)).await;
        }
        // Steps a minute apart never reset: the server is still failing.
        let d = secs(b.next_delay(Instant::now()));
        assert!(d >= 25.6, "{d}");
        tokio::time::advance(Duration::from_secs(121)).await;
        let d = secs(b.next_delay(Instant::now()));
        assert!((0.8..1.6).contains(&d), "after 2 quiet minutes: {d}");
    }

    #[test]
    fn without_jitter_the_delays_are_exact() {
        let cfg = Backoff {
            jitter: 0.0,
            ..Backoff::default()
        };
        let mut b = BackoffState::new(cfg);
        let now = Instant::now();
        let got: Vec<u64> = (0..8)
            .map(|_| b.next_delay(now).as_millis() as u64)
            .collect();
        assert_eq!(got, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
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
