//! Time: the monotonic clock every decision is made on, the wall clock only written down.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::{Instant, SystemTime};

/// Where the elector reads time and waits.
///
/// Why a trait: every rule of the election is about durations (a lease unchanged for a lease
/// duration, a renewal older than the renew deadline), and tests must run those rules
/// without waiting them out. Decisions use only [`now`](Self::now), a monotonic clock;
/// [`wall_now`](Self::wall_now) is only written into the record (`acquireTime`,
/// `renewTime`) for people to read, so a wall clock that jumps changes nothing.
/// [`SystemClock`] is the default; `FakeClock` (feature `test-util`) follows Tokio's clock,
/// which a test can pause and advance.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current monotonic time.
    fn now(&self) -> Instant;

    /// The current wall-clock time, for the record's timestamps only.
    fn wall_now(&self) -> SystemTime;

    /// A future that completes once [`now`](Self::now) has reached `deadline`.
    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// The real clocks: [`Instant`], [`SystemTime`] and Tokio's timers.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall_now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(
            deadline,
        )))
    }
}
