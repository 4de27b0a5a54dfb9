//! Where the recorder's time comes from: event timestamps, a series' last observation,
//! the periodic finish and refresh of series, and the sleep between retries.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

/// A sleep handed out by a [`Clock`]: resolves once the clock has moved by the duration
/// asked for.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The recorder's source of time.
///
/// Events carry wall-clock times (`eventTime`, a series' `lastObservedTime`, and the name
/// suffix), and the broadcaster waits on the same clock (the 6-minute finish and 30-minute
/// refresh of series, the sleep between retries), so that a [`FakeClock`] drives all of
/// it: a test steps the clock instead of waiting six minutes.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current wall-clock time.
    fn now(&self) -> SystemTime;

    /// A future that resolves once `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> Sleep;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> SystemTime {
        (**self).now()
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        (**self).sleep(duration)
    }
}

/// The system clock for timestamps and Tokio's timer for sleeps: the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// A clock that stands still until told to move, for tests.
///
/// Sleeps resolve when [`FakeClock::step`] or [`FakeClock::set`] reach their deadline;
/// the tasks waiting on them then run as soon as the runtime polls them (a test usually
/// calls [`Broadcaster::flush`](crate::Broadcaster::flush) next, which returns once the
/// broadcaster has done what the step made due).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use kinformer_events::{Clock, FakeClock};
///
/// let clock = FakeClock::starting_at(SystemTime::UNIX_EPOCH);
/// clock.step(Duration::from_secs(6 * 60));
/// assert_eq!(clock.now(), SystemTime::UNIX_EPOCH + Duration::from_secs(360));
/// ```
#[derive(Clone)]
pub struct FakeClock {
    now: Arc<watch::Sender<SystemTime>>,
}

impl FakeClock {
    /// A fake clock that starts at the real current time and then stands still.
    pub fn new() -> Self {
        Self::starting_at(SystemTime::now())
    }

    /// A fake clock that starts at `start`.
    pub fn starting_at(start: SystemTime) -> Self {
        Self {
            now: Arc::new(watch::Sender::new(start)),
        }
    }

    /// Moves time forward by `by` and wakes the sleeps now due. A step past what
    /// [`SystemTime`] can represent leaves the clock where it was.
    pub fn step(&self, by: Duration) {
        self.now.send_modify(|now| {
            if let Some(later) = now.checked_add(by) {
                *now = later;
            }
        });
    }

    /// Sets the time to `to` (forward or backward) and wakes the sleeps now due.
    pub fn set(&self, to: SystemTime) {
        self.now.send_replace(to);
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
            .field("now", &*self.now.borrow())
            .finish()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> SystemTime {
        *self.now.borrow()
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        let mut now = self.now.subscribe();
        // A deadline past what SystemTime can hold is never reached.
        let deadline = now.borrow().checked_add(duration);
        Box::pin(async move {
            let Some(deadline) = deadline else {
                return std::future::pending().await;
            };
            loop {
                if *now.borrow_and_update() >= deadline {
                    return;
                }
                if now.changed().await.is_err() {
                    // Every handle of the clock is gone: time never moves again.
                    return std::future::pending().await;
                }
            }
        })
    }
}
