//! The handle of a reflector on its own task ([`ReflectorHandle`]): its status, and the way
//! to stop it and wait for it.

use std::fmt;

use tokio_util::sync::CancellationToken;

use super::ReflectorStatus;
use crate::{Error, TaskHandle};

/// A reflector running on its own task: [`stop`](Self::stop) stops it and waits for it;
/// dropping the handle leaves it running (see [`TaskHandle`]).
#[must_use = "the handle is the way to stop the reflector and wait for it; dropping it leaves the reflector running"]
pub struct ReflectorHandle {
    pub(super) task: TaskHandle<Error>,
    pub(super) status: ReflectorStatus,
}

impl fmt::Debug for ReflectorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReflectorHandle")
            .field("status", &self.status)
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl ReflectorHandle {
    /// The reflector's progress.
    pub fn status(&self) -> &ReflectorStatus {
        &self.status
    }

    /// Whether the task has ended (stopped, or the sink was closed).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// The token that stops the reflector when cancelled (without waiting for it).
    pub fn cancellation_token(&self) -> CancellationToken {
        self.task.cancellation_token()
    }

    /// Stops the reflector and waits until its task has ended.
    ///
    /// # Errors
    /// `Err(Error::Sink(Closed))` if the reflector had already stopped because its sink
    /// was closed.
    ///
    /// # Panics
    /// Resumes a panic of the reflector's task (one raised by a sink or an error handler).
    pub async fn stop(self) -> Result<(), Error> {
        self.task.stop().await
    }
}
