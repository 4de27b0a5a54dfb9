//! Rate limiters: how long an item waits before it is retried.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use governor::Quota;
use governor::clock::Clock as GovernorClock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};

use crate::{Clock, Item, RealClock};

/// Decides how long an item waits before it is retried: client-go's `TypedRateLimiter`.
///
/// Why a trait: retry policy is the part of a controller people most often change (a fixed
/// delay for one resource, jitter, a per-namespace budget). The rate-limited queue asks only
/// these three questions, and [`MaxOfRateLimiter`] and [`WithMaxWaitRateLimiter`] combine
/// any implementations. The built-in limiters never panic, whatever the arguments or the
/// number of failures.
pub trait RateLimiter<T>: Send + Sync {
    /// How long `item` should wait now; called once per retry, so a per-item limiter counts
    /// a failure here.
    fn when(&self, item: &T) -> Duration;
    /// Stops tracking `item` (it succeeded, or was given up on).
    fn forget(&self, item: &T);
    /// How many times `item` was retried since it was last forgotten.
    fn num_requeues(&self, item: &T) -> usize;
}

macro_rules! forward_limiter {
    ($($ty:ty),*) => {$(
        impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for $ty {
            fn when(&self, item: &T) -> Duration {
                (**self).when(item)
            }
            fn forget(&self, item: &T) {
                (**self).forget(item)
            }
            fn num_requeues(&self, item: &T) -> usize {
                (**self).num_requeues(item)
            }
        }
    )*};
}

forward_limiter!(Arc<R>, Box<R>, &R);

fn count_to_usize(count: u64) -> usize {
    usize::try_from(count).unwrap_or(usize::MAX)
}

/// `base * 2^failures`, capped at `max`, per item (client-go's
/// `ItemExponentialFailureRateLimiter`). The computation is exact integer arithmetic that
/// cannot overflow: a product past `max` is `max`.
///
/// ```
/// use std::time::Duration;
/// use kinformer_workqueue::{ItemExponentialFailureRateLimiter, RateLimiter};
///
/// let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
/// assert_eq!(limiter.num_requeues(&"a"), 2);
/// limiter.forget(&"a");
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// ```
pub struct ItemExponentialFailureRateLimiter<T> {
    failures: DashMap<T, u64, foldhash::fast::RandomState>,
    base: Duration,
    max: Duration,
}

impl<T: Item> ItemExponentialFailureRateLimiter<T> {
    /// Waits `base` after the first failure, doubling per failure, never more than `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            failures: DashMap::default(),
            base,
            max,
        }
    }

    /// client-go's `DefaultItemBasedRateLimiter`: 1 ms doubling up to 1000 s.
    pub fn default_item_based() -> Self {
        Self::new(Duration::from_millis(1), Duration::from_secs(1000))
    }
}

/// `min(base * 2^exponent, max)` without overflow.
pub(crate) fn exponential_backoff(base: Duration, exponent: u64, max: Duration) -> Duration {
    let base = base.as_nanos();
    let limit = max.as_nanos();
    if base == 0 {
        return Duration::ZERO;
    }
    // `base << e <= limit` exactly when `base <= limit >> e`, and then the shift cannot
    // overflow because the result is at most `limit`.
    let nanos = match u32::try_from(exponent) {
        Ok(e) if e < 128 && base <= limit >> e => base << e,
        _ => return max,
    };
    nanos_to_duration(nanos)
}

fn nanos_to_duration(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let secs = u64::try_from(nanos / NANOS_PER_SEC).unwrap_or(u64::MAX);
    // The remainder is below 10^9 and fits.
    let subsec = u32::try_from(nanos % NANOS_PER_SEC).unwrap_or(0);
    Duration::new(secs, subsec)
}

impl<T: Item> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let exponent = match self.failures.get_mut(item) {
            Some(mut failures) => {
                let exponent = *failures;
                *failures = failures.saturating_add(1);
                exponent
            }
            None => {
                *self
                    .failures
                    .entry(item.clone())
                    .and_modify(|failures| *failures = failures.saturating_add(1))
                    .or_insert(1)
                    - 1
            }
        };
        exponential_backoff(self.base, exponent, self.max)
    }

    fn forget(&self, item: &T) {
        self.failures.remove(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.failures
            .get(item)
            .map_or(0, |failures| count_to_usize(*failures))
    }
}

impl<T: Item> fmt::Debug for ItemExponentialFailureRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemExponentialFailureRateLimiter")
            .field("base", &self.base)
            .field("max", &self.max)
            .field("tracked", &self.failures.len())
            .finish()
    }
}

/// `fast` for an item's first `max_fast_attempts` retries, `slow` after that (client-go's
/// `ItemFastSlowRateLimiter`).
pub struct ItemFastSlowRateLimiter<T> {
    failures: DashMap<T, u64, foldhash::fast::RandomState>,
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u64,
}

impl<T: Item> ItemFastSlowRateLimiter<T> {
    /// Waits `fast` for the first `max_fast_attempts` retries of an item, then `slow`.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u64) -> Self {
        Self {
            failures: DashMap::default(),
            fast,
            slow,
            max_fast_attempts,
        }
    }
}

impl<T: Item> RateLimiter<T> for ItemFastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let failures = match self.failures.get_mut(item) {
            Some(mut failures) => {
                *failures = failures.saturating_add(1);
                *failures
            }
            None => *self
                .failures
                .entry(item.clone())
                .and_modify(|failures| *failures = failures.saturating_add(1))
                .or_insert(1),
        };
        if failures <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, item: &T) {
        self.failures.remove(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.failures
            .get(item)
            .map_or(0, |failures| count_to_usize(*failures))
    }
}

impl<T> fmt::Debug for ItemFastSlowRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemFastSlowRateLimiter")
            .field("fast", &self.fast)
            .field("slow", &self.slow)
            .field("max_fast_attempts", &self.max_fast_attempts)
            .finish()
    }
}

/// The largest delay of all its limiters; `forget` reaches all of them and `num_requeues`
/// is the largest count (client-go's `MaxOfRateLimiter`). With no limiters it waits zero.
///
/// As in client-go, combining a token bucket with per-item limiters lets the bucket's burst
/// be exceeded in appearance when some items were separately delayed longer.
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// Combines `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }

    /// Adds one more limiter.
    pub fn with(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.limiters.push(Box::new(limiter));
        self
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        // Every limiter is asked, even after a large answer: each counts the retry.
        self.limiters
            .iter()
            .map(|limiter| limiter.when(item))
            .fold(Duration::ZERO, Duration::max)
    }

    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiters
            .iter()
            .map(|limiter| limiter.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

impl<T> fmt::Debug for MaxOfRateLimiter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOfRateLimiter")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

/// Caps another limiter's delay at `max_delay` (client-go's `WithMaxWaitRateLimiter`).
#[derive(Debug, Clone)]
pub struct WithMaxWaitRateLimiter<R> {
    limiter: R,
    max_delay: Duration,
}

impl<R> WithMaxWaitRateLimiter<R> {
    /// Wraps `limiter`, never waiting longer than `max_delay`.
    pub fn new(limiter: R, max_delay: Duration) -> Self {
        Self { limiter, max_delay }
    }
}

impl<T, R: RateLimiter<T>> RateLimiter<T> for WithMaxWaitRateLimiter<R> {
    fn when(&self, item: &T) -> Duration {
        self.limiter.when(item).min(self.max_delay)
    }

    fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

/// One token bucket shared by all items (client-go's `BucketRateLimiter` over
/// `rate.Limiter`): `burst` retries pass at once, then one per `1/qps`.
///
/// Like client-go's `Reserve()`, every call reserves a token, even one that is only
/// available in the future: a burst of `burst + n` calls at one instant gets delays `0`
/// (`burst` times), then `1/qps`, `2/qps`, ... `n/qps`. governor's `check` does not reserve
/// (a refused call leaves the bucket as it was), so each call runs governor's GCRA under a
/// mutex and, when refused, runs it once more at the refusal's earliest-possible instant:
/// that second check is the reservation, and its distance from now is the delay. Time comes
/// from the [`Clock`] given, so a [`FakeClock`](crate::FakeClock) drives it in tests.
///
/// Edge cases follow `rate.Limiter`: an infinite `qps` (or one so large that `1/qps`
/// rounds to zero nanoseconds) never waits; `qps` zero, negative, NaN (or so small that
/// `1/qps` does not fit a [`Duration`]) lets `burst` calls through and then waits "forever"
/// ([`Duration::MAX`], which the delaying queue treats as never); `burst` zero with a
/// finite `qps` always waits forever.
///
/// ```
/// use std::time::Duration;
/// use kinformer_workqueue::{BucketRateLimiter, FakeClock, RateLimiter};
///
/// let limiter = BucketRateLimiter::with_clock(10.0, 2, FakeClock::new());
/// let delays: Vec<Duration> = (0..4).map(|_| RateLimiter::<&str>::when(&limiter, &"x")).collect();
/// assert_eq!(delays, [Duration::ZERO, Duration::ZERO, Duration::from_millis(100), Duration::from_millis(200)]);
/// ```
pub struct BucketRateLimiter {
    mode: BucketMode,
}

enum BucketMode {
    Unlimited,
    /// No refill: `remaining` calls pass, then every call waits forever.
    NoRefill {
        remaining: Mutex<u64>,
    },
    Never,
    Gcra {
        limiter: governor::RateLimiter<NotKeyed, InMemoryState, PinnedClock, NoOpMiddleware<Nanos>>,
        clock: PinnedClock,
        reserving: Mutex<()>,
    },
}

/// governor's view of our [`Clock`]: nanoseconds since the limiter was made, or, while a
/// reservation is being taken, exactly the instant pinned for it.
#[derive(Clone)]
struct PinnedClock {
    clock: Arc<dyn Clock>,
    origin: Instant,
    /// `u64::MAX` when nothing is pinned.
    pinned: Arc<AtomicU64>,
}

const NOT_PINNED: u64 = u64::MAX;

impl PinnedClock {
    fn real_now(&self) -> Nanos {
        let elapsed = self.clock.now().saturating_duration_since(self.origin);
        Nanos::from(u64::try_from(elapsed.as_nanos()).unwrap_or(NOT_PINNED - 1))
    }

    fn pin(&self, at: Nanos) {
        self.pinned
            .store(at.as_u64().min(NOT_PINNED - 1), Ordering::SeqCst);
    }
}

impl GovernorClock for PinnedClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        match self.pinned.load(Ordering::SeqCst) {
            NOT_PINNED => self.real_now(),
            pinned => Nanos::from(pinned),
        }
    }
}

impl BucketRateLimiter {
    /// A bucket refilled at `qps` tokens per second holding at most `burst`, on the real
    /// clock.
    pub fn new(qps: f64, burst: u32) -> Self {
        Self::with_clock(qps, burst, RealClock)
    }

    /// The same bucket reading time from `clock`.
    pub fn with_clock(qps: f64, burst: u32, clock: impl Clock) -> Self {
        let no_refill = || BucketMode::NoRefill {
            remaining: Mutex::new(u64::from(burst)),
        };
        let mode = if qps.is_nan() || qps <= 0.0 {
            no_refill()
        } else {
            match Duration::try_from_secs_f64(1.0 / qps) {
                // 1/qps is too long to represent: the bucket never refills in practice.
                Err(_) => no_refill(),
                // 1/qps rounds to zero nanoseconds (or qps is infinite): never wait.
                Ok(period) if period.is_zero() => BucketMode::Unlimited,
                Ok(_) if burst == 0 => BucketMode::Never,
                Ok(period) => match (Quota::with_period(period), NonZeroU32::new(burst)) {
                    (Some(quota), Some(burst)) => {
                        let clock: Arc<dyn Clock> = Arc::new(clock);
                        let pinned = PinnedClock {
                            origin: clock.now(),
                            clock,
                            pinned: Arc::new(AtomicU64::new(NOT_PINNED)),
                        };
                        BucketMode::Gcra {
                            limiter: governor::RateLimiter::direct_with_clock(
                                quota.allow_burst(burst),
                                pinned.clone(),
                            ),
                            clock: pinned,
                            reserving: Mutex::new(()),
                        }
                    }
                    _ => BucketMode::Never,
                },
            }
        };
        Self { mode }
    }

    /// Takes one token, possibly from the future; returns how long until it is ours.
    fn reserve(&self) -> Duration {
        match &self.mode {
            BucketMode::Unlimited => Duration::ZERO,
            BucketMode::Never => Duration::MAX,
            BucketMode::NoRefill { remaining } => {
                let mut remaining = remaining
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if *remaining > 0 {
                    *remaining -= 1;
                    Duration::ZERO
                } else {
                    Duration::MAX
                }
            }
            BucketMode::Gcra {
                limiter,
                clock,
                reserving,
            } => {
                let _reserving = reserving
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                let now = clock.real_now();
                clock.pin(now);
                let delay = match limiter.check() {
                    Ok(()) => Duration::ZERO,
                    Err(refused) => {
                        let earliest = refused.earliest_possible();
                        clock.pin(earliest);
                        match limiter.check() {
                            Ok(()) => Duration::from(earliest.saturating_sub(now)),
                            // Cannot happen (the GCRA conforms at its own earliest instant);
                            // waiting the reported time is the safe answer if it did.
                            Err(again) => again.wait_time_from(now),
                        }
                    }
                };
                clock.pin(Nanos::from(NOT_PINNED));
                delay
            }
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> usize {
        0
    }
}

impl fmt::Debug for BucketRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match &self.mode {
            BucketMode::Unlimited => "unlimited",
            BucketMode::NoRefill { .. } => "no-refill",
            BucketMode::Never => "never",
            BucketMode::Gcra { .. } => "gcra",
        };
        f.debug_struct("BucketRateLimiter")
            .field("mode", &mode)
            .finish()
    }
}

/// client-go's `DefaultControllerRateLimiter`: the larger of a per-item exponential backoff
/// (5 ms doubling to 1000 s) and an overall token bucket (10 qps, burst 100), on the real
/// clock.
pub fn default_controller_rate_limiter<T: Item>() -> MaxOfRateLimiter<T> {
    default_controller_rate_limiter_with_clock(RealClock)
}

/// [`default_controller_rate_limiter`] with the bucket reading time from `clock`.
pub fn default_controller_rate_limiter_with_clock<T: Item>(
    clock: impl Clock,
) -> MaxOfRateLimiter<T> {
    MaxOfRateLimiter::new(Vec::new())
        .with(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        ))
        .with(BucketRateLimiter::with_clock(10.0, 100, clock))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_is_exact_and_capped() {
        let ms = Duration::from_millis;
        assert_eq!(exponential_backoff(ms(1), 0, ms(1000)), ms(1));
        assert_eq!(exponential_backoff(ms(1), 9, ms(1000)), ms(512));
        assert_eq!(exponential_backoff(ms(1), 10, ms(1000)), ms(1000));
        assert_eq!(exponential_backoff(ms(1), 127, ms(1000)), ms(1000));
        assert_eq!(exponential_backoff(ms(1), u64::MAX, ms(1000)), ms(1000));
        assert_eq!(
            exponential_backoff(Duration::ZERO, u64::MAX, ms(1000)),
            Duration::ZERO
        );
        assert_eq!(
            exponential_backoff(Duration::MAX, 3, Duration::MAX),
            Duration::MAX
        );
        assert_eq!(
            exponential_backoff(Duration::from_nanos(1), 90, Duration::MAX),
            nanos_to_duration(1u128 << 90)
        );
        // base above max: max, as in client-go.
        assert_eq!(exponential_backoff(ms(10), 0, ms(1)), ms(1));
    }
}
