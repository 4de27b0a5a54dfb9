//! The broadcaster's settings: client-go's constants, and the bounds kinformer adds.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::{Clock, RealClock};

/// How a [`Broadcaster`](crate::Broadcaster) runs. The defaults are client-go's
/// (`tools/events`): a queue of 1000 events, series finished after 6 quiet minutes and
/// refreshed every 30, writes tried 12 times 10 s apart (plus up to 25 % jitter); plus two
/// bounds client-go does not have: at most 4096 cached events and 64 writes at once.
///
/// ```
/// use std::time::Duration;
/// use kinformer_events::{Config, FakeClock};
///
/// let config = Config::new()
///     .queue_capacity(100)
///     .finish_time(Duration::from_secs(2))
///     .clock(FakeClock::new());
/// # let _ = config;
/// ```
#[derive(Clone)]
pub struct Config {
    pub(crate) queue_capacity: usize,
    pub(crate) max_cached_events: usize,
    pub(crate) max_writes_in_flight: usize,
    pub(crate) finish_time: Duration,
    pub(crate) refresh_time: Duration,
    pub(crate) retry_sleep: Duration,
    pub(crate) max_tries: u32,
    pub(crate) clock: Arc<dyn Clock>,
}

/// client-go's `maxQueuedEvents`.
const QUEUE_CAPACITY: usize = 1000;
/// kinformer's bound on the cache (client-go's grows with the event rate); the size of
/// `tools/record`'s LRU caches.
const MAX_CACHED_EVENTS: usize = 4096;
/// kinformer's bound on writes running or sleeping between tries at once (client-go starts
/// a goroutine per event).
const MAX_WRITES_IN_FLIGHT: usize = 64;
/// client-go's `finishTime`.
const FINISH_TIME: Duration = Duration::from_secs(6 * 60);
/// client-go's `refreshTime`.
const REFRESH_TIME: Duration = Duration::from_secs(30 * 60);
/// client-go's `defaultSleepDuration`.
const RETRY_SLEEP: Duration = Duration::from_secs(10);
/// client-go's `maxTriesPerEvent`.
const MAX_TRIES: u32 = 12;

impl Config {
    /// client-go's settings, kinformer's bounds, the real clock.
    pub fn new() -> Self {
        Self {
            queue_capacity: QUEUE_CAPACITY,
            max_cached_events: MAX_CACHED_EVENTS,
            max_writes_in_flight: MAX_WRITES_IN_FLIGHT,
            finish_time: FINISH_TIME,
            refresh_time: REFRESH_TIME,
            retry_sleep: RETRY_SLEEP,
            max_tries: MAX_TRIES,
            clock: Arc::new(RealClock),
        }
    }

    /// How many published events may wait for the broadcaster's task (at least 1); past
    /// that, [`Recorder::publish`](crate::Recorder::publish) drops the event and answers
    /// [`Error::QueueFull`](crate::Error::QueueFull). Default 1000.
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        self.queue_capacity = capacity.max(1);
        self
    }

    /// How many distinct events (by their isomorphism key) are remembered for folding.
    /// When full, a new event is still written but not remembered, so its repeats are not
    /// folded until entries expire. Default 4096.
    pub fn max_cached_events(mut self, max: usize) -> Self {
        self.max_cached_events = max;
        self
    }

    /// How many writes may run (or sleep before their next try) at once, at least 1; the
    /// task waits for one to end before starting another, and the queue fills meanwhile.
    /// Default 64.
    pub fn max_writes_in_flight(mut self, max: usize) -> Self {
        self.max_writes_in_flight = max.clamp(1, u32::MAX as usize);
        self
    }

    /// How long a series must go unobserved before it is written a last time and
    /// forgotten, and how long a single event is remembered; also the period of that check.
    /// Default 6 minutes (client-go's `finishTime`, which it does not let you change).
    pub fn finish_time(mut self, finish_time: Duration) -> Self {
        self.finish_time = finish_time;
        self
    }

    /// How often every open series is written (its heartbeat). Default 30 minutes
    /// (client-go's `refreshTime`).
    pub fn refresh_time(mut self, refresh_time: Duration) -> Self {
        self.refresh_time = refresh_time;
        self
    }

    /// The sleep before trying a failed write again, plus up to 25 % jitter. Default 10 s.
    pub fn retry_sleep(mut self, sleep: Duration) -> Self {
        self.retry_sleep = sleep;
        self
    }

    /// How many times a write is tried before it is given up (at least 1). Default 12.
    pub fn max_tries(mut self, tries: u32) -> Self {
        self.max_tries = tries.max(1);
        self
    }

    /// Reads time and sleeps on `clock` (a [`FakeClock`](crate::FakeClock) in tests).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("queue_capacity", &self.queue_capacity)
            .field("max_cached_events", &self.max_cached_events)
            .field("max_writes_in_flight", &self.max_writes_in_flight)
            .field("finish_time", &self.finish_time)
            .field("refresh_time", &self.refresh_time)
            .field("retry_sleep", &self.retry_sleep)
            .field("max_tries", &self.max_tries)
            .field("clock", &self.clock)
            .finish()
    }
}
