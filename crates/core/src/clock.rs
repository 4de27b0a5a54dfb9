//! Time, real or fake: the one clock that the workqueue, the event recorder, the leader
//! elector, the reflector and the informer read and sleep on.
//!
//! Why here: every crate that takes a clock (kinformer-workqueue, kinformer-events,
//! kinformer-leaderelection) can depend on kinformer-core at no cost, while none of them
//! depends on another, and a test that drives a queue, a recorder and an elector wants to
//! hand all three the same [`FakeClock`]. What a clock needs stays within this crate's
//! rule of no runtime: a sleep is a boxed [`Future`] ([`Sleep`]) that any executor can poll,
//! the fake wakes its sleepers itself, and [`RealClock`] sleeps on a timer thread of its own
//! (see [`RealClock`]), so neither needs Tokio.
//!
//! - [`Clock`]: `now` (monotonic, what every decision is made on), `wall_now` (written
//!   down: event timestamps, the leader record), `sleep_until` / `sleep`, and
//!   [`subscribe`](Clock::subscribe) for a clock that moves only when told.
//! - [`RealClock`]: [`Instant::now`], [`SystemTime::now`], a timer thread.
//! - `TokioClock` (feature `tokio`): Tokio's pausable instant and its timer; what the
//!   reflector and the informer run on by default.
//! - [`FakeClock`]: stands still until [`step`](FakeClock::step) or
//!   [`set`](FakeClock::set) move it, which wake the sleeps now due and call every
//!   [`TimeListener`] before returning; or, built with
//!   [`following`](FakeClock::following), passes time as another clock does (Tokio's
//!   paused clock, say) with steps on top.

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

mod fake;
mod timer;
#[cfg(feature = "tokio")]
mod tokio;

pub use fake::FakeClock;
#[cfg(feature = "tokio")]
pub use tokio::TokioClock;

/// A sleep handed out by a [`Clock`]: resolves once the clock has reached the deadline
/// asked for. Dropping it cancels it.
pub type Sleep = crate::BoxFuture<'static, ()>;

/// A source of time: what the delaying queue, the token bucket, the queue metrics, the event
/// recorder and the leader elector read, and what the last two sleep on.
///
/// Why a trait: client-go injects `clock.Clock` so that tests can drive time by hand; this
/// is the same swap point. [`RealClock`] is the default everywhere; [`FakeClock`] moves
/// only when told. Bring your own by implementing [`now`](Clock::now),
/// [`wall_now`](Clock::wall_now), [`sleep_until`](Clock::sleep_until) and
/// [`subscribe`](Clock::subscribe): a clock whose time passes at the real rate writes them
/// with [`wall_time_at`], [`sleep_at_real_rate`] and `false`; one that moves only when told
/// wakes its sleepers itself and keeps its subscribers (so that a delaying queue fires items
/// when it moves, without a timer thread).
///
/// Only [`sleep`](Clock::sleep) has a default, `sleep_until(now + duration)`, which is what
/// every clock does. The others are required: a default right for a clock at the real rate
/// would be silently wrong behind a decorator over a [`FakeClock`] that forwarded only
/// `now` (its sleeps would wait real time, its queues would never be told it moved).
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current monotonic time. Every decision is made on this clock.
    fn now(&self) -> Instant;

    /// The current wall-clock time: written down (an Event's `eventTime`, a series'
    /// `lastObservedTime`, the leader record's `renewTime`), never used to decide. A clock
    /// at the real rate returns [`wall_time_at`]`(self.now())`.
    fn wall_now(&self) -> SystemTime;

    /// A future that resolves once [`now`](Self::now) has reached `deadline`. A clock at the
    /// real rate returns [`sleep_at_real_rate`]`(self.now(), deadline)`; one that moves only
    /// when told wakes its sleepers when it moves.
    fn sleep_until(&self, deadline: Instant) -> Sleep;

    /// A future that resolves once `duration` has passed on this clock. A deadline past
    /// what [`Instant`] can hold is never reached.
    fn sleep(&self, duration: Duration) -> Sleep {
        match self.now().checked_add(duration) {
            Some(deadline) => self.sleep_until(deadline),
            None => Box::pin(std::future::pending()),
        }
    }

    /// Offers a listener to be told whenever time moves.
    ///
    /// A clock whose time passes by itself returns `false` and may drop the listener: the
    /// caller then keeps its own timer. A clock that moves only when told (a
    /// [`FakeClock`]) keeps the listener, returns `true`, and from then on calls
    /// [`TimeListener::time_advanced`] after each move, synchronously, before the call that
    /// moved time returns. Listeners that are gone (the `Weak` no longer upgrades) are
    /// skipped and may be dropped.
    fn subscribe(&self, listener: Weak<dyn TimeListener>) -> bool;
}

/// The wall-clock time of the instant `now` of a clock whose time passes at the real rate:
/// the system's wall time plus how far `now` is ahead of [`Instant::now`], so a clock offset
/// from the real one gives wall times offset the same way. [`Clock::wall_now`] of such a
/// clock.
pub fn wall_time_at(now: Instant) -> SystemTime {
    let (real, wall) = (Instant::now(), SystemTime::now());
    let shifted = match now.checked_duration_since(real) {
        Some(ahead) => wall.checked_add(ahead),
        None => wall.checked_sub(real.saturating_duration_since(now)),
    };
    shifted.unwrap_or(wall)
}

/// A sleep, on [`RealClock`]'s timer, for the time a clock whose time passes at the real rate
/// still has to go from `now` to `deadline`: [`Clock::sleep_until`] of such a clock. A
/// deadline past what [`Instant`] can hold is never reached.
pub fn sleep_at_real_rate(now: Instant, deadline: Instant) -> Sleep {
    let remaining = deadline.saturating_duration_since(now);
    match Instant::now().checked_add(remaining) {
        Some(at) => RealClock.sleep_until(at),
        None => Box::pin(std::future::pending()),
    }
}

/// Something that must act when a manually driven clock moves: the delaying queue (fires due
/// items) and the metrics of a named queue (refresh the unfinished-work gauges).
pub trait TimeListener: Send + Sync {
    /// Time moved to `now`. Runs in the thread that moved the clock.
    fn time_advanced(&self, now: Instant);
}

macro_rules! forward_pointers {
    ($($pointer:ident),*) => {$(
        impl<C: Clock + ?Sized> Clock for $pointer<C> {
            fn now(&self) -> Instant {
                (**self).now()
            }

            fn wall_now(&self) -> SystemTime {
                (**self).wall_now()
            }

            fn sleep_until(&self, deadline: Instant) -> Sleep {
                (**self).sleep_until(deadline)
            }

            fn sleep(&self, duration: Duration) -> Sleep {
                (**self).sleep(duration)
            }

            fn subscribe(&self, listener: Weak<dyn TimeListener>) -> bool {
                (**self).subscribe(listener)
            }
        }
    )*};
}

forward_pointers!(Arc, Box);

/// The system's clocks: [`Instant::now`], [`SystemTime::now`], and sleeps on a timer thread;
/// time passes by itself. The default clock of every crate that takes one.
///
/// Its sleeps are woken by one thread for the whole process, started by the first sleep
/// that has to wait (a queue or a limiter on this clock never sleeps on it, so never starts
/// it). That keeps the sleeps independent of any runtime: they resolve under Tokio, any
/// other executor, or `block_on`, and a paused Tokio clock does not hold them back (a test
/// that pauses Tokio's clock uses a [`FakeClock`] that
/// [follows](FakeClock::following) it).
///
/// ```
/// use std::time::{Duration, Instant};
/// use kinformer_core::{Clock, RealClock};
///
/// let start = Instant::now();
/// # let block_on = |sleep: kinformer_core::Sleep| {
/// #     // a minimal executor: park until woken
/// #     use std::task::{Context, Poll, Wake, Waker};
/// #     struct Unpark(std::thread::Thread);
/// #     impl Wake for Unpark { fn wake(self: std::sync::Arc<Self>) { self.0.unpark() } }
/// #     let waker = Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
/// #     let mut sleep = sleep;
/// #     while sleep.as_mut().poll(&mut Context::from_waker(&waker)).is_pending() {
/// #         std::thread::park();
/// #     }
/// # };
/// block_on(RealClock.sleep(Duration::from_millis(20)));
/// assert!(start.elapsed() >= Duration::from_millis(20));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall_now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn sleep_until(&self, deadline: Instant) -> Sleep {
        Box::pin(timer::TimerSleep::new(deadline))
    }

    fn subscribe(&self, _listener: Weak<dyn TimeListener>) -> bool {
        false
    }
}

/// `start + by`, or the latest instant reachable on the way there (found by halving), so
/// that no step panics.
fn saturating_add(start: Instant, by: Duration) -> Instant {
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

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
pub(crate) mod test_util {
    //! A minimal executor for the tests: polls a future, parking until woken.

    use std::future::Future;
    use std::pin::{Pin, pin};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Wake, Waker};
    use std::thread::{self, Thread};

    struct Unpark(Thread);

    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }

    pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
        let waker = Waker::from(Arc::new(Unpark(thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
            thread::park();
        }
    }

    /// A waker that counts how often it was woken.
    #[derive(Default)]
    pub(crate) struct Counter(AtomicUsize);

    impl Counter {
        pub(crate) fn get(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Polls once with `wakes` as the waker; whether the future is ready.
    pub(crate) fn poll_once<F: Future + Unpin>(future: &mut F, wakes: &Arc<Counter>) -> bool {
        let waker = Waker::from(Arc::clone(wakes));
        Pin::new(future)
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::block_on;
    use super::*;

    /// A clock an hour ahead of the real one, at the real rate.
    #[derive(Debug)]
    struct Ahead;

    impl Clock for Ahead {
        fn now(&self) -> Instant {
            Instant::now() + Duration::from_secs(3600)
        }
        fn wall_now(&self) -> SystemTime {
            wall_time_at(self.now())
        }
        fn sleep_until(&self, deadline: Instant) -> Sleep {
            sleep_at_real_rate(self.now(), deadline)
        }
        fn subscribe(&self, _: Weak<dyn TimeListener>) -> bool {
            false
        }
    }

    #[test]
    fn the_default_wall_clock_is_offset_like_the_monotonic_one() {
        let wall = Ahead.wall_now();
        let real = SystemTime::now();
        let ahead = wall.duration_since(real).unwrap();
        assert!(ahead > Duration::from_secs(3599) && ahead < Duration::from_secs(3601));
    }

    #[test]
    fn the_default_sleep_waits_what_this_clock_has_to_go() {
        let start = Instant::now();
        block_on(Ahead.sleep_until(Ahead.now() + Duration::from_millis(30)));
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert!(start.elapsed() < Duration::from_secs(60));
    }

    #[test]
    fn a_sleep_past_the_end_of_time_never_ends() {
        let mut sleep = RealClock.sleep(Duration::MAX);
        let wakes = Arc::default();
        assert!(!test_util::poll_once(&mut sleep, &wakes));
    }

    #[test]
    fn step_past_the_end_of_time_stops_at_the_last_instant() {
        let start = Instant::now();
        let end = saturating_add(start, Duration::MAX);
        assert!(end > start);
        assert_eq!(saturating_add(end, Duration::from_nanos(1)), end);
    }
}
