//! Time, real or fake: what the delaying queue, the token bucket and the metrics read.
//!
//! The delaying queue needs two things from time: "what time is it" and "wake me when a
//! deadline passes". A real clock answers the second with a timer thread that sleeps until
//! the earliest deadline. A fake clock cannot be slept on, so it works the other way round:
//! every queue built on it subscribes a [`TimeListener`], and [`FakeClock::step`] /
//! [`FakeClock::set`] call every listener, in the calling thread, before they return.
//! When `step` returns, every delayed item whose ready time has come is in its queue; no
//! test, and no trace replayer, ever has to sleep or poll.

use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// A source of monotonic time.
///
/// Why a trait: client-go injects `clock.WithTicker` so that tests can drive time by hand;
/// this is the same swap point. [`RealClock`] is the default; [`FakeClock`] moves only when
/// told. Bring your own by implementing [`now`](Clock::now) and, for a clock that moves only
/// when told, [`subscribe`](Clock::subscribe).
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time.
    fn now(&self) -> Instant;

    /// Offers a listener to be told whenever time moves.
    ///
    /// A clock whose time passes by itself returns `false` and drops the listener: the caller
    /// then keeps its own timer thread. A clock that moves only when told (a fake clock) keeps
    /// the listener, returns `true`, and from then on calls
    /// [`TimeListener::time_advanced`] after each move, synchronously, before the call that
    /// moved time returns. Listeners that are gone (the `Weak` no longer upgrades) are skipped
    /// and may be dropped.
    fn subscribe(&self, listener: Weak<dyn TimeListener>) -> bool {
        let _ = listener;
        false
    }
}

/// Something that must act when a manually driven clock moves: the delaying queue (fires due
/// items) and the metrics of a named queue (refresh the unfinished-work gauges).
pub trait TimeListener: Send + Sync {
    /// Time moved to `now`. Runs in the thread that moved the clock.
    fn time_advanced(&self, now: Instant);
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Instant {
        (**self).now()
    }

    fn subscribe(&self, listener: Weak<dyn TimeListener>) -> bool {
        (**self).subscribe(listener)
    }
}

impl<C: Clock + ?Sized> Clock for Box<C> {
    fn now(&self) -> Instant {
        (**self).now()
    }

    fn subscribe(&self, listener: Weak<dyn TimeListener>) -> bool {
        (**self).subscribe(listener)
    }
}

/// The system's monotonic clock ([`Instant::now`]); time passes by itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told, for deterministic tests and trace replay.
///
/// Cloning gives another handle on the same time. Queues and rate limiters built on it
/// subscribe to it; [`step`](FakeClock::step) and [`set`](FakeClock::set) run every
/// subscriber before returning, so after `clock.step(d)` every item added with
/// `add_after(item, x)` where `x <= d` (counting from the add) is already in its queue.
///
/// ```
/// use std::time::Duration;
/// use kinformer_workqueue::{DelayingQueue, DelayingWorkQueue, FakeClock, Queue, QueueConfig};
///
/// let clock = FakeClock::new();
/// let queue = DelayingWorkQueue::<&str>::with_config(QueueConfig::new().clock(clock.clone()));
/// queue.add_after("later", Duration::from_secs(5));
/// clock.step(Duration::from_secs(4));
/// assert_eq!(queue.len(), 0);
/// clock.step(Duration::from_secs(1));
/// assert_eq!(queue.len(), 1); // fired inside `step`, no waiting
/// ```
#[derive(Clone)]
pub struct FakeClock {
    inner: Arc<FakeInner>,
}

struct FakeInner {
    now: Mutex<Instant>,
    listeners: Mutex<Vec<Weak<dyn TimeListener>>>,
}

impl FakeClock {
    /// A fake clock that starts at the real current instant and then stands still.
    pub fn new() -> Self {
        Self::starting_at(Instant::now())
    }

    /// A fake clock that starts at `start`.
    pub fn starting_at(start: Instant) -> Self {
        Self {
            inner: Arc::new(FakeInner {
                now: Mutex::new(start),
                listeners: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Moves time forward by `by`, then runs every subscriber.
    ///
    /// A step past the end of what [`Instant`] can represent stops at the largest instant it
    /// can reach (found by halving), so that no step panics.
    pub fn step(&self, by: Duration) {
        let now = {
            let mut now = lock(&self.inner.now);
            *now = saturating_add(*now, by);
            *now
        };
        self.notify(now);
    }

    /// Sets the time to `to` (forward or backward), then runs every subscriber.
    pub fn set(&self, to: Instant) {
        *lock(&self.inner.now) = to;
        self.notify(to);
    }

    /// How many live subscribers the clock has (queues and limiters built on it that still
    /// exist). Useful to check that something is wired to this clock.
    pub fn subscribers(&self) -> usize {
        let mut listeners = lock(&self.inner.listeners);
        listeners.retain(|listener| listener.strong_count() > 0);
        listeners.len()
    }

    fn notify(&self, now: Instant) {
        // Listeners run without the clock's locks held: they read the clock themselves.
        let listeners: Vec<Arc<dyn TimeListener>> = {
            let mut listeners = lock(&self.inner.listeners);
            listeners.retain(|listener| listener.strong_count() > 0);
            listeners.iter().filter_map(Weak::upgrade).collect()
        };
        for listener in listeners {
            listener.time_advanced(now);
        }
    }
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for FakeClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeClock")
            .field("now", &*lock(&self.inner.now))
            .finish_non_exhaustive()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        *lock(&self.inner.now)
    }

    fn subscribe(&self, listener: Weak<dyn TimeListener>) -> bool {
        lock(&self.inner.listeners).push(listener);
        true
    }
}

/// `start + by`, or the latest instant reachable on the way there.
pub(crate) fn saturating_add(start: Instant, by: Duration) -> Instant {
    if let Some(end) = start.checked_add(by) {
        return end;
    }
    let mut reached = start;
    let mut step = by;
    while !step.is_zero() {
        match reached.checked_add(step) {
            Some(next) => reached = next,
            None => step /= 2,
        }
    }
    reached
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_past_the_end_of_time_does_not_panic() {
        let clock = FakeClock::new();
        let before = clock.now();
        clock.step(Duration::MAX);
        assert!(clock.now() > before);
        clock.step(Duration::MAX);
        clock.step(Duration::from_nanos(1));
    }

    #[test]
    fn set_moves_time_both_ways() {
        let start = Instant::now();
        let clock = FakeClock::starting_at(start);
        clock.step(Duration::from_secs(10));
        assert_eq!(clock.now(), start + Duration::from_secs(10));
        clock.set(start);
        assert_eq!(clock.now(), start);
    }

    #[test]
    fn dropped_listeners_are_forgotten() {
        struct Nothing;
        impl TimeListener for Nothing {
            fn time_advanced(&self, _: Instant) {}
        }
        let clock = FakeClock::new();
        let listener: Arc<dyn TimeListener> = Arc::new(Nothing);
        assert!(clock.subscribe(Arc::downgrade(&listener)));
        assert_eq!(clock.subscribers(), 1);
        drop(listener);
        assert_eq!(clock.subscribers(), 0);
    }
}
