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
pub async fn eventually(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        check(what, timeout, start);
        tokio::time::sleep(POLL).await;
    }
    start.elapsed()
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
pub async fn eventually_async<F, Fut>(what: &str, timeout: Duration, mut cond: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !cond().await {
        check(what, timeout, start);
        tokio::time::sleep(POLL_ASYNC).await;
    }
    start.elapsed()
}

/// Fails the test once `timeout` has passed since `start`.
fn check(what: &str, timeout: Duration, start: Instant) {
    let waited = start.elapsed();
    assert!(
        waited < timeout,
        "timed out waiting for {what}: not within {timeout:?} (waited {waited:?})"
    );
}
