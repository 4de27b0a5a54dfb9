//! [`RealClock`](super::RealClock)'s sleeps: one thread for the process wakes them.
//!
//! A sleep registers its deadline and waker the first time it is polled before its deadline,
//! and unregisters when dropped. The thread waits on a condition variable until the earliest
//! deadline (or until a new, earlier one arrives), wakes every sleep whose deadline has
//! passed, and waits again; with nothing registered it waits without a timeout. A sleep
//! decides for itself whether it is over ([`Instant::now`] against its deadline), so an
//! early or spurious wake costs one poll and nothing else.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use super::lock;

struct Timer {
    state: Mutex<State>,
    /// Rung when a deadline earlier than every other one arrives.
    ring: Condvar,
}

#[derive(Default)]
struct State {
    /// Every waiting sleep by (deadline, id): the first entry is the next to wake.
    waiting: BTreeMap<(Instant, u64), Waker>,
    next_id: u64,
    started: bool,
}

fn timer() -> &'static Timer {
    static TIMER: OnceLock<Timer> = OnceLock::new();
    TIMER.get_or_init(|| Timer {
        state: Mutex::new(State::default()),
        ring: Condvar::new(),
    })
}

impl Timer {
    /// Registers (or refreshes the waker of) the sleep `id` until `deadline`; its id.
    fn register(&'static self, deadline: Instant, id: Option<u64>, waker: &Waker) -> u64 {
        let mut state = lock(&self.state);
        if let Some(id) = id
            && let Some(registered) = state.waiting.get_mut(&(deadline, id))
        {
            registered.clone_from(waker);
            return id;
        }
        // New, or woken already (the thread removed it) and polled again before its deadline.
        let id = state.next_id;
        state.next_id += 1;
        let earliest = state
            .waiting
            .first_key_value()
            .is_none_or(|(&first, _)| (deadline, id) < first);
        state.waiting.insert((deadline, id), waker.clone());
        if !state.started {
            std::thread::Builder::new()
                .name("kinformer-clock".to_owned())
                .spawn(|| self.run())
                .unwrap_or_else(|e| panic!("could not start the real clock's timer thread: {e}"));
            state.started = true;
        } else if earliest {
            self.ring.notify_one();
        }
        id
    }

    fn unregister(&self, deadline: Instant, id: u64) {
        lock(&self.state).waiting.remove(&(deadline, id));
    }

    fn run(&self) {
        let mut state = lock(&self.state);
        loop {
            let now = Instant::now();
            let mut due = Vec::new();
            while let Some(entry) = state.waiting.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                due.push(entry.remove());
            }
            if !due.is_empty() {
                // Wakers run without the lock: a waker may poll (and so register) at once.
                drop(state);
                due.into_iter().for_each(Waker::wake);
                state = lock(&self.state);
                continue;
            }
            let next = state.waiting.first_key_value().map(|(&(at, _), _)| at);
            state = match next {
                None => self
                    .ring
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
                Some(at) => {
                    self.ring
                        .wait_timeout(state, at.saturating_duration_since(now))
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0
                }
            };
        }
    }
}

/// A sleep on the real clock until `deadline`.
pub(super) struct TimerSleep {
    deadline: Instant,
    /// Set while registered with the timer thread.
    id: Option<u64>,
}

impl TimerSleep {
    pub(super) fn new(deadline: Instant) -> Self {
        Self { deadline, id: None }
    }
}

impl Future for TimerSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            if let Some(id) = self.id.take() {
                timer().unregister(self.deadline, id);
            }
            return Poll::Ready(());
        }
        self.id = Some(timer().register(self.deadline, self.id, cx.waker()));
        Poll::Pending
    }
}

impl Drop for TimerSleep {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            timer().unregister(self.deadline, id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::super::test_util::{Counter, block_on, poll_once};
    use super::*;

    #[test]
    fn sleeps_end_in_deadline_order_not_creation_order() {
        let start = Instant::now();
        let order = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = [60u64, 20, 40]
            .into_iter()
            .map(|ms| {
                let order = Arc::clone(&order);
                std::thread::spawn(move || {
                    block_on(TimerSleep::new(start + Duration::from_millis(ms)));
                    assert!(start.elapsed() >= Duration::from_millis(ms));
                    lock(&order).push(ms);
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*lock(&order), [20, 40, 60]);
    }

    #[test]
    fn a_sleep_already_due_is_ready_without_the_thread() {
        let mut sleep = TimerSleep::new(Instant::now());
        assert!(poll_once(&mut sleep, &Arc::default()));
        assert!(sleep.id.is_none());
    }

    #[test]
    fn a_dropped_sleep_is_forgotten_and_never_woken() {
        let wakes = Arc::new(Counter::default());
        let deadline = Instant::now() + Duration::from_millis(20);
        let mut sleep = TimerSleep::new(deadline);
        assert!(!poll_once(&mut sleep, &wakes));
        let id = sleep.id.unwrap();
        drop(sleep);
        assert!(!lock(&timer().state).waiting.contains_key(&(deadline, id)));
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(wakes.get(), 0);
    }

    #[test]
    fn repolling_keeps_one_registration() {
        let wakes = Arc::new(Counter::default());
        let deadline = Instant::now() + Duration::from_secs(3600);
        let mut sleep = TimerSleep::new(deadline);
        assert!(!poll_once(&mut sleep, &wakes));
        let id = sleep.id;
        assert!(!poll_once(&mut sleep, &wakes));
        assert_eq!(sleep.id, id);
    }
}
