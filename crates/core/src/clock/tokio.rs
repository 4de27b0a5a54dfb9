//! [`TokioClock`]: Tokio's time behind the [`Clock`] trait.

use std::time::{Instant, SystemTime};

use super::{Clock, Sleep};

/// Tokio's time: its instant (which a test can pause and advance) and its timer; the wall
/// clock is the system's. The default clock of the reflector and the informer, whose retries,
/// resyncs and watch timeouts run on Tokio anyway, so that `#[tokio::test(start_paused =
/// true)]` drives them as it drives the rest of a test.
///
/// Give a component a [`FakeClock`](super::FakeClock) instead to move its time by hand, or
/// one made with [`FakeClock::following`](super::FakeClock::following)`(TokioClock)` to
/// follow the runtime's paused clock with steps on top (what the leader elector's tests do).
///
/// ```
/// use std::time::Duration;
/// use kinformer_core::{Clock, TokioClock};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// let start = TokioClock.now();
/// TokioClock.sleep(Duration::from_secs(3600)).await; // paused: returns at once
/// assert_eq!(TokioClock.now() - start, Duration::from_secs(3600));
/// # });
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn wall_now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn sleep_until(&self, deadline: Instant) -> Sleep {
        Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(
            deadline,
        )))
    }

    /// Tokio's time passes by itself (paused, it jumps to the next timer): no subscriptions.
    fn subscribe(&self, _listener: std::sync::Weak<dyn crate::TimeListener>) -> bool {
        false
    }
}
