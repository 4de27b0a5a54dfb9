//! A background task that stops when asked or when its handle is dropped.

use std::fmt;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A task started on the Tokio runtime with a cancellation token: what
/// [`ReflectorHandle`](crate::ReflectorHandle) and the informer's handle are made of.
/// Dropping it cancels the token and aborts the task.
pub struct TaskHandle<E> {
    cancel: CancellationToken,
    task: Option<JoinHandle<Result<(), E>>>,
}

impl<E> fmt::Debug for TaskHandle<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHandle")
            .field("cancelled", &self.cancel.is_cancelled())
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<E> TaskHandle<E> {
    /// Wraps `task`, which ends once `cancel` is cancelled.
    pub fn new(cancel: CancellationToken, task: JoinHandle<Result<(), E>>) -> Self {
        Self {
            cancel,
            task: Some(task),
        }
    }

    /// The token that stops the task when cancelled.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Whether the task has ended.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Cancels the task and waits until it has ended; returns what it returned (`Ok` if
    /// it was aborted).
    ///
    /// # Errors
    /// The task's error.
    ///
    /// # Panics
    /// Resumes a panic of the task.
    pub async fn stop(mut self) -> Result<(), E> {
        self.cancel.cancel();
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        match task.await {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Ok(()),
        }
    }
}

impl<E> Drop for TaskHandle<E> {
    fn drop(&mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
