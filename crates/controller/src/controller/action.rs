//! What a reconcile asks the controller to do next.

use std::time::Duration;

/// What a successful reconcile asks for (an `Err` always means "retry, rate limited").
///
/// As in client-go: success forgets the key's failures; a requested requeue forgets them
/// too and adds the key back after the delay (`queue.Forget(key); queue.AddAfter(key, d)`),
/// which the rate limiter does not slow down. An event for the key before then reconciles
/// it at once, and the delayed add still fires later, on every queue of kinformer-workqueue
/// including the default priority queue (two requeues of one key keep the earlier time).
/// controller-runtime's priority queue drops the delayed add in that case; test:
/// `controller/tests/controller.rs::requeue_after_still_comes_after_an_event_for_the_same_key_on_the_default_queue`.
///
/// ```
/// use std::time::Duration;
/// use kinformer_controller::controller::Action;
///
/// // A certificate expires in an hour: look again before it does.
/// let next = Action::RequeueAfter(Duration::from_secs(50 * 60));
/// assert_ne!(next, Action::Done);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Nothing more to do until the next event for this key.
    Done,
    /// Reconcile this key again after the delay, even if nothing changes (for state that
    /// drifts outside the API server, or a wait the controller polls).
    RequeueAfter(Duration),
    /// [`RequeueAfter`](Self::RequeueAfter) at a priority of its own (controller-runtime's
    /// `Result.Priority`): on the default priority queue, higher goes first; otherwise the
    /// key comes back at the priority it was handed out with. Queues without priorities
    /// ignore it.
    Requeue {
        /// The delay before the key is queued again.
        after: Duration,
        /// Its priority then ([`LOW_PRIORITY`](kinformer_workqueue::LOW_PRIORITY) is that of
        /// the initial list and resyncs; 0 that of changes).
        priority: i32,
    },
}
