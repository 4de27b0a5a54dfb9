//! What the leading work holds: a cancellation that fires the moment leadership ends, and
//! the deadline to check before acting.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::Clock;

/// Handed to the leading work for one term of leadership.
///
/// [`token`](Self::token) is cancelled as soon as the elector stops leading: the lock was
/// taken by someone else, the renew deadline passed without a renewal, the run was
/// cancelled. Pass it (or child tokens) to everything the leader runs, and stop when it
/// fires.
///
/// The token is cancelled by the elector's task, which needs to run to do it: a process
/// that was paused (SIGSTOP, a frozen VM, a long stop-the-world) wakes up with its deadline
/// long past, and until the elector's timer fires, its work may run a little. Before an
/// action that must not happen twice (writing outside Kubernetes, sending an email), check
/// [`is_leading`](Self::is_leading): it compares the deadline with the clock directly, so it
/// is false the moment the deadline has passed, whether or not the elector has run since.
/// Neither is a fence: an action that started before the deadline may still land after it.
#[derive(Clone)]
pub struct Leading {
    token: CancellationToken,
    deadline: Arc<Mutex<Instant>>,
    clock: Arc<dyn Clock>,
}

impl Leading {
    pub(crate) fn new(token: CancellationToken, deadline: Instant, clock: Arc<dyn Clock>) -> Self {
        Self {
            token,
            deadline: Arc::new(Mutex::new(deadline)),
            clock,
        }
    }

    /// Cancelled when this term of leadership ends.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Whether this process still leads: the token is not cancelled and the renew deadline
    /// has not passed on the elector's clock.
    pub fn is_leading(&self) -> bool {
        !self.token.is_cancelled() && self.clock.now() < self.deadline()
    }

    /// Until when this process leads unless it renews: the moment its last successful
    /// renewal was sent plus the renew deadline. Moves forward with each renewal.
    pub fn deadline(&self) -> Instant {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Completes when this term of leadership ends.
    pub async fn lost(&self) {
        self.token.cancelled().await;
    }

    pub(crate) fn set_deadline(&self, deadline: Instant) {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) = deadline;
    }
}

impl fmt::Debug for Leading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leading")
            .field("cancelled", &self.token.is_cancelled())
            .field("deadline", &self.deadline())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::testing::tokio_clock;

    #[tokio::test(start_paused = true)]
    async fn is_leading_turns_false_at_the_deadline_even_before_the_token_is_cancelled() {
        let clock = tokio_clock();
        let deadline = clock.now() + Duration::from_secs(10);
        let leading = Leading::new(CancellationToken::new(), deadline, Arc::new(clock));
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert!(leading.is_leading());
        // A process paused past its deadline: nothing cancelled the token yet.
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(!leading.token().is_cancelled());
        assert!(!leading.is_leading());
        leading.set_deadline(deadline + Duration::from_secs(2));
        assert!(leading.is_leading(), "a renewal moves the deadline");
        leading.token().cancel();
        assert!(!leading.is_leading());
    }
}
