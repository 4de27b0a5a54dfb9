//! Waiting for a condition that another task or process makes true.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`eventually`] checks its condition.
pub const POLL: Duration = Duration::from_millis(5);

/// How often [`eventually_async`] checks its condition: such a condition usually asks the
/// API server, so it polls less often.
pub const POLL_ASYNC: Duration = Duration::from_millis(50);

/// Checks `cond` every [`POLL`] (sleeping on tokio's timer in between) until it holds, and
/// returns how long that took.
///
/// # Panics
/// When `cond` still does not hold after `timeout`, with a message naming `what` was
/// awaited and how long:
/// `timed out waiting for the pod to be cached: not within 5s (waited 5.004s)`.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let done = Arc::new(AtomicBool::new(false));
/// let flag = Arc::clone(&done);
/// tokio::spawn(async move {
///     tokio::time::sleep(Duration::from_millis(30)).await;
///     flag.store(true, Ordering::SeqCst);
/// });
/// kinformer_testenv::eventually("the task to finish", Duration::from_secs(5), || {
///     done.load(Ordering::SeqCst)
/// })
/// .await;
/// # }
/// ```
pub async fn eventually(what: &str, timeout: Duration, cond: impl FnMut() -> bool) -> Duration {
    try_eventually(what, timeout, cond)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// [`eventually`] for a condition that must await something (a request to the API server):
/// checks it every [`POLL_ASYNC`] until it holds, and returns how long that took.
///
/// # Panics
/// When the condition still does not hold after `timeout`, naming `what` was awaited and how
/// long.
///
/// ```
/// use std::time::{Duration, Instant};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let ready_at = Instant::now() + Duration::from_millis(100);
/// kinformer_testenv::eventually_async("the deadline", Duration::from_secs(5), || async {
///     tokio::task::yield_now().await;
///     Instant::now() >= ready_at
/// })
/// .await;
/// # }
/// ```
pub async fn eventually_async<F, Fut>(what: &str, timeout: Duration, cond: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    try_eventually_async(what, timeout, cond)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// [`eventually`] that returns [`TimedOut`] rather than panicking: for a program that drives
/// a scenario (a demo, a soak, a check in CI) outside `#[test]`.
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let err = kinformer_testenv::try_eventually("never", Duration::from_millis(20), || false)
///     .await
///     .unwrap_err();
/// assert!(err.to_string().starts_with("timed out waiting for never: not within 20ms"));
/// # }
/// ```
///
/// # Errors
/// [`TimedOut`] when `cond` still does not hold after `timeout`.
pub async fn try_eventually(
    what: &str,
    timeout: Duration,
    mut cond: impl FnMut() -> bool,
) -> Result<Duration, TimedOut> {
    let start = Instant::now();
    while !cond() {
        check(what, timeout, start)?;
        tokio::time::sleep(POLL).await;
    }
    Ok(start.elapsed())
}

/// [`eventually_async`] that returns [`TimedOut`] rather than panicking.
///
/// # Errors
/// [`TimedOut`] when the condition still does not hold after `timeout`.
pub async fn try_eventually_async<F, Fut>(
    what: &str,
    timeout: Duration,
    mut cond: F,
) -> Result<Duration, TimedOut>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !cond().await {
        check(what, timeout, start)?;
        tokio::time::sleep(POLL_ASYNC).await;
    }
    Ok(start.elapsed())
}

/// A condition awaited by [`try_eventually`] or [`try_eventually_async`] did not hold in time.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("timed out waiting for {what}: not within {timeout:?} (waited {waited:?})")]
#[non_exhaustive]
pub struct TimedOut {
    /// What was awaited.
    pub what: String,
    /// How long it was given.
    pub timeout: Duration,
    /// How long was waited.
    pub waited: Duration,
}

/// [`TimedOut`] once `timeout` has passed since `start`.
fn check(what: &str, timeout: Duration, start: Instant) -> Result<(), TimedOut> {
    let waited = start.elapsed();
    if waited < timeout {
        return Ok(());
    }
    Err(TimedOut {
        what: what.to_owned(),
        timeout,
        waited,
    })
}
