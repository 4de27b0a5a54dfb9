//! [`FakeClock`]: time that moves when a test says so.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime};

use super::{Clock, Sleep, TimeListener, lock, saturating_add};

/// A clock that moves only when told, for deterministic tests and trace replay.
///
/// Cloning gives another handle on the same time. Three things follow its moves
/// ([`step`](Self::step), [`set`](Self::set)), all before the move returns:
///
/// - its [`now`](Clock::now), and its [`wall_now`](Clock::wall_now), which moves with it
///   from where it was set ([`set_wall`](Self::set_wall); the real wall time at first);
/// - every sleep now due ([`Clock::sleep`], [`Clock::sleep_until`]) is woken: the task
///   waiting on it runs as soon as its executor polls it (an event broadcaster's `flush`
///   returns once it has done what the step made due);
/// - every subscriber ([`Clock::subscribe`]) is called, in the calling thread: queues and
///   rate limiters built on the clock fire what came due, so after `clock.step(d)` every
///   item added with `add_after(item, x)` where `x <= d` (counting from the add) is
///   already in its queue, without a wait.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use kinformer_core::{Clock, FakeClock};
///
/// let clock = FakeClock::starting_at_wall(SystemTime::UNIX_EPOCH);
/// let start = clock.now();
/// clock.step(Duration::from_secs(6 * 60));
/// assert_eq!(clock.now() - start, Duration::from_secs(360));
/// assert_eq!(clock.wall_now(), SystemTime::UNIX_EPOCH + Duration::from_secs(360));
/// assert_eq!(clock.elapsed(), Duration::from_secs(360));
/// ```
///
/// A clock made with [`following`](Self::following) passes time as another clock does
/// and adds its steps on top: over a clock that reads Tokio's time and sleeps on Tokio's
/// timer, it stands still while the runtime's paused clock does and jumps when it jumps,
/// so minutes of a leader election run in milliseconds, always the same way, with a wall
/// clock that can be set anywhere.
#[derive(Clone)]
pub struct FakeClock {
    inner: Arc<Inner>,
}

struct Inner {
    /// The clock whose passing time this one follows; none: it stands still.
    base: Option<Arc<dyn Clock>>,
    state: Mutex<State>,
    listeners: Mutex<Vec<Weak<dyn TimeListener>>>,
    /// Following a base clock that tells of its moves: what it tells, one per subscriber.
    forwards: Mutex<Vec<Arc<Forward>>>,
}

/// Tells a subscriber of the base clock's moves, with this clock's time.
struct Forward {
    clock: Weak<Inner>,
    listener: Weak<dyn TimeListener>,
}

impl TimeListener for Forward {
    fn time_advanced(&self, _base_now: Instant) {
        if let (Some(clock), Some(listener)) = (self.clock.upgrade(), self.listener.upgrade()) {
            let now = lock(&clock.state).now(clock.base.as_ref());
            listener.time_advanced(now);
        }
    }
}

struct State {
    /// This clock's time when the base clock read `base_at` (without a base: its time).
    at: Instant,
    base_at: Instant,
    /// Where `now` was when the clock was made: [`FakeClock::elapsed`] counts from here.
    start: Instant,
    /// The wall time when `now` read `wall_at`; it moves with `now` from there.
    wall: SystemTime,
    wall_at: Instant,
    /// How many steps and sets so far: a sleep on the base clock made before the last one
    /// aims at the wrong base deadline.
    moves: u64,
    /// The sleeps waiting for a move: id, deadline, waker.
    sleepers: Vec<(u64, Instant, Waker)>,
    next_id: u64,
}

impl State {
    fn now(&self, base: Option<&Arc<dyn Clock>>) -> Instant {
        self.now_at(base.map(|base| base.now()))
    }

    /// This clock's time when the base clock reads `base_now` (none: no base).
    fn now_at(&self, base_now: Option<Instant>) -> Instant {
        match base_now {
            None => self.at,
            Some(base_now) => {
                saturating_add(self.at, base_now.saturating_duration_since(self.base_at))
            }
        }
    }
}

impl FakeClock {
    /// A fake clock that starts at the real current time (monotonic and wall) and then
    /// stands still.
    pub fn new() -> Self {
        Self::starting_at(Instant::now())
    }

    /// A fake clock whose monotonic time starts at `start` (its wall time at the real
    /// current wall time).
    pub fn starting_at(start: Instant) -> Self {
        Self::build(None, start, SystemTime::now())
    }

    /// A fake clock whose wall time starts at `wall` (its monotonic time at the real
    /// current instant).
    pub fn starting_at_wall(wall: SystemTime) -> Self {
        Self::build(None, Instant::now(), wall)
    }

    /// A fake clock whose time passes as `base`'s does, starting where `base` is (monotonic
    /// and wall); [`step`](Self::step) and [`set`](Self::set) move it further on top.
    ///
    /// Its sleeps end when `base`'s time or a move gets them to their deadline. It tells its
    /// subscribers of its moves, and of `base`'s (with its own time) if `base` tells of them:
    /// then its [`subscribe`](Clock::subscribe) answers `true`; over a clock whose time
    /// passes by itself it answers `false`, so a queue built on it keeps its own timer
    /// thread.
    pub fn following(base: impl Clock) -> Self {
        let base: Arc<dyn Clock> = Arc::new(base);
        let (now, wall) = (base.now(), base.wall_now());
        Self::build(Some(base), now, wall)
    }

    fn build(base: Option<Arc<dyn Clock>>, start: Instant, wall: SystemTime) -> Self {
        Self {
            inner: Arc::new(Inner {
                base,
                state: Mutex::new(State {
                    at: start,
                    base_at: start,
                    start,
                    wall,
                    wall_at: start,
                    moves: 0,
                    sleepers: Vec::new(),
                    next_id: 0,
                }),
                listeners: Mutex::new(Vec::new()),
                forwards: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Moves time forward by `by` (the wall clock too), then wakes the sleeps now due and
    /// runs every subscriber.
    ///
    /// A step past the end of what [`Instant`] can represent stops at the largest instant it
    /// can reach, so that no step panics.
    pub fn step(&self, by: Duration) {
        self.move_to(|now| saturating_add(now, by));
    }

    /// Sets the monotonic time to `to` (forward or backward; the wall clock moves by the
    /// same amount), then wakes the sleeps now due and runs every subscriber.
    pub fn set(&self, to: Instant) {
        self.move_to(|_| to);
    }

    /// Sets the wall clock to `wall`; it moves on from there with the monotonic time.
    /// Nothing decides on the wall clock, so nothing wakes.
    pub fn set_wall(&self, wall: SystemTime) {
        let mut state = lock(&self.inner.state);
        state.wall_at = state.now(self.inner.base.as_ref());
        state.wall = wall;
    }

    /// How far the monotonic time is past where the clock started (zero if set before it).
    pub fn elapsed(&self) -> Duration {
        let state = lock(&self.inner.state);
        state
            .now(self.inner.base.as_ref())
            .saturating_duration_since(state.start)
    }

    /// How many live subscribers the clock has (queues and limiters built on it that still
    /// exist). Useful to check that something is wired to this clock.
    pub fn subscribers(&self) -> usize {
        let mut listeners = lock(&self.inner.listeners);
        listeners.retain(|listener| listener.strong_count() > 0);
        listeners.len()
    }

    fn move_to(&self, to: impl FnOnce(Instant) -> Instant) {
        let (now, due) = {
            let mut state = lock(&self.inner.state);
            let base_now = self.inner.base.as_ref().map(|base| base.now());
            let now = to(state.now_at(base_now));
            state.at = now;
            if let Some(base_now) = base_now {
                state.base_at = base_now;
            }
            state.moves += 1;
            let mut due = Vec::new();
            state.sleepers.retain(|(_, deadline, waker)| {
                let waiting = *deadline > now;
                if !waiting {
                    due.push(waker.clone());
                }
                waiting
            });
            (now, due)
        };
        due.into_iter().for_each(Waker::wake);
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
            .field("now", &self.now())
            .field("wall", &self.wall_now())
            .field("following", &self.inner.base)
            .finish_non_exhaustive()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        lock(&self.inner.state).now(self.inner.base.as_ref())
    }

    fn wall_now(&self) -> SystemTime {
        let state = lock(&self.inner.state);
        let now = state.now(self.inner.base.as_ref());
        // At the edge of what SystemTime can hold, the wall clock stops.
        let wall = match now.checked_duration_since(state.wall_at) {
            Some(later) => state.wall.checked_add(later),
            None => state
                .wall
                .checked_sub(state.wall_at.saturating_duration_since(now)),
        };
        wall.unwrap_or(state.wall)
    }

    fn sleep_until(&self, deadline: Instant) -> Sleep {
        Box::pin(FakeSleep {
            clock: Arc::clone(&self.inner),
            deadline,
            id: None,
            on_base: None,
        })
    }

    fn subscribe(&self, listener: Weak<dyn TimeListener>) -> bool {
        lock(&self.inner.listeners).push(Weak::clone(&listener));
        let Some(base) = &self.inner.base else {
            return true;
        };
        let forward = Arc::new(Forward {
            clock: Arc::downgrade(&self.inner),
            listener,
        });
        let weak: Weak<dyn TimeListener> = Arc::downgrade(&forward) as Weak<dyn TimeListener>;
        if !base.subscribe(weak) {
            return false;
        }
        let mut forwards = lock(&self.inner.forwards);
        forwards.retain(|forward| forward.listener.strong_count() > 0);
        forwards.push(forward);
        true
    }
}

/// A sleep on a [`FakeClock`] until `deadline`.
struct FakeSleep {
    clock: Arc<Inner>,
    deadline: Instant,
    /// Set while waiting among the clock's sleepers.
    id: Option<u64>,
    /// Following a base clock: the sleep on it that ends when the base's time gets this
    /// clock to the deadline, made after the move it counts.
    on_base: Option<(u64, Sleep)>,
}

impl Future for FakeSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        loop {
            let mut state = lock(&this.clock.state);
            let now = state.now(this.clock.base.as_ref());
            if now >= this.deadline {
                if let Some(id) = this.id.take() {
                    state.sleepers.retain(|(other, ..)| *other != id);
                }
                return Poll::Ready(());
            }
            let registered = this
                .id
                .and_then(|id| state.sleepers.iter_mut().find(|(other, ..)| *other == id));
            match registered {
                Some((_, _, waker)) => waker.clone_from(cx.waker()),
                None => {
                    let id = state.next_id;
                    state.next_id += 1;
                    state.sleepers.push((id, this.deadline, cx.waker().clone()));
                    this.id = Some(id);
                }
            }
            let Some(base) = &this.clock.base else {
                return Poll::Pending;
            };
            let moves = state.moves;
            let target = state
                .base_at
                .checked_add(this.deadline.saturating_duration_since(state.at));
            drop(state);
            if this.on_base.as_ref().is_none_or(|(made, _)| *made != moves) {
                this.on_base = Some((
                    moves,
                    match target {
                        Some(target) => base.sleep_until(target),
                        None => Box::pin(std::future::pending()),
                    },
                ));
            }
            let Some((_, on_base)) = &mut this.on_base else {
                return Poll::Pending;
            };
            if on_base.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // The base got there: look again (a move may have come in between).
            this.on_base = None;
        }
    }
}

impl Drop for FakeSleep {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            lock(&self.clock.state)
                .sleepers
                .retain(|(other, ..)| *other != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{Counter, poll_once};
    use super::*;

    #[test]
    fn step_past_the_end_of_time_does_not_panic() {
        let clock = FakeClock::new();
        let before = clock.now();
        clock.step(Duration::MAX);
        assert!(clock.now() > before);
        clock.step(Duration::MAX);
        clock.step(Duration::from_nanos(1));
        let _ = clock.wall_now();
    }

    #[test]
    fn set_moves_time_both_ways_and_the_wall_clock_with_it() {
        let start = Instant::now();
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let clock = FakeClock::starting_at(start);
        clock.set_wall(wall);
        clock.step(Duration::from_secs(10));
        assert_eq!(clock.now(), start + Duration::from_secs(10));
        assert_eq!(clock.wall_now(), wall + Duration::from_secs(10));
        assert_eq!(clock.elapsed(), Duration::from_secs(10));
        clock.set(start - Duration::from_secs(1));
        assert_eq!(clock.wall_now(), wall - Duration::from_secs(1));
        assert_eq!(clock.elapsed(), Duration::ZERO);
    }

    #[test]
    fn setting_the_wall_clock_moves_nothing_else() {
        let clock = FakeClock::new();
        let now = clock.now();
        let wakes = Arc::new(Counter::default());
        let mut sleep = clock.sleep(Duration::from_secs(1));
        assert!(!poll_once(&mut sleep, &wakes));
        clock.set_wall(SystemTime::UNIX_EPOCH);
        assert_eq!(clock.wall_now(), SystemTime::UNIX_EPOCH);
        assert_eq!(clock.now(), now);
        assert_eq!(wakes.get(), 0);
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

    #[test]
    fn a_step_wakes_the_sleeps_it_makes_due_and_no_other() {
        let clock = FakeClock::new();
        let (soon, late) = (Arc::new(Counter::default()), Arc::new(Counter::default()));
        let mut first = clock.sleep(Duration::from_secs(5));
        let mut second = clock.sleep(Duration::from_secs(10));
        assert!(!poll_once(&mut first, &soon));
        assert!(!poll_once(&mut second, &late));
        clock.step(Duration::from_secs(4));
        assert_eq!((soon.get(), late.get()), (0, 0));
        clock.step(Duration::from_secs(1));
        assert_eq!((soon.get(), late.get()), (1, 0));
        assert!(poll_once(&mut first, &soon));
        assert!(!poll_once(&mut second, &late));
        clock.step(Duration::from_secs(5));
        assert_eq!(late.get(), 1);
        assert!(poll_once(&mut second, &late));
        assert!(lock(&clock.inner.state).sleepers.is_empty());
    }

    #[test]
    fn a_dropped_sleep_is_forgotten() {
        let clock = FakeClock::new();
        let mut sleep = clock.sleep(Duration::from_secs(1));
        assert!(!poll_once(&mut sleep, &Arc::default()));
        assert_eq!(lock(&clock.inner.state).sleepers.len(), 1);
        drop(sleep);
        assert!(lock(&clock.inner.state).sleepers.is_empty());
    }

    #[test]
    fn a_sleep_past_the_end_of_time_never_ends() {
        let clock = FakeClock::new();
        let mut sleep = clock.sleep(Duration::MAX);
        clock.step(Duration::MAX);
        assert!(!poll_once(&mut sleep, &Arc::default()));
    }

    #[test]
    fn a_clock_following_another_passes_time_as_it_does_and_steps_on_top() {
        let base = FakeClock::starting_at_wall(SystemTime::UNIX_EPOCH);
        let clock = FakeClock::following(base.clone());
        let start = clock.now();
        assert_eq!(start, base.now());
        assert_eq!(clock.wall_now(), SystemTime::UNIX_EPOCH);

        let wakes = Arc::new(Counter::default());
        let mut sleep = clock.sleep(Duration::from_secs(10));
        assert!(!poll_once(&mut sleep, &wakes));
        base.step(Duration::from_secs(4));
        assert_eq!(clock.elapsed(), Duration::from_secs(4));
        assert_eq!(wakes.get(), 0);
        // A step of its own: the sleep now ends 4 s sooner on the base clock.
        clock.step(Duration::from_secs(2));
        assert_eq!(clock.now(), start + Duration::from_secs(6));
        assert!(!poll_once(&mut sleep, &wakes));
        base.step(Duration::from_secs(3));
        assert_eq!(wakes.get(), 0);
        base.step(Duration::from_secs(1));
        assert!(wakes.get() >= 1);
        assert!(poll_once(&mut sleep, &wakes));
        assert_eq!(clock.elapsed(), Duration::from_secs(10));
        assert_eq!(
            clock.wall_now(),
            SystemTime::UNIX_EPOCH + Duration::from_secs(10)
        );
    }

    #[derive(Default)]
    struct Seen(Mutex<Vec<Instant>>);

    impl TimeListener for Seen {
        fn time_advanced(&self, now: Instant) {
            lock(&self.0).push(now);
        }
    }

    #[test]
    fn a_following_clock_subscribes_as_its_base_does() {
        struct Nothing;
        impl TimeListener for Nothing {
            fn time_advanced(&self, _: Instant) {}
        }
        let listener: Arc<dyn TimeListener> = Arc::new(Nothing);
        let on_real = FakeClock::following(super::super::RealClock);
        assert!(!on_real.subscribe(Arc::downgrade(&listener)));
        assert_eq!(on_real.subscribers(), 1, "told of its own steps still");

        // Over a fake base: told of the base's moves too, with this clock's time.
        let base = FakeClock::new();
        let clock = FakeClock::following(base.clone());
        clock.step(Duration::from_secs(100));
        let seen = Arc::new(Seen::default());
        let listener: Arc<dyn TimeListener> = seen.clone();
        assert!(clock.subscribe(Arc::downgrade(&listener)));
        base.step(Duration::from_secs(1));
        clock.step(Duration::from_secs(1));
        assert_eq!(
            *lock(&seen.0),
            [clock.now() - Duration::from_secs(1), clock.now()]
        );
        drop((listener, seen));
        base.step(Duration::from_secs(1));
        let other: Arc<dyn TimeListener> = Arc::new(Nothing);
        assert!(clock.subscribe(Arc::downgrade(&other)));
        assert_eq!(
            lock(&clock.inner.forwards).len(),
            1,
            "the forward went with its subscriber"
        );
        assert_eq!(base.subscribers(), 1);
    }
}
