//! Hooks into the elector's life: started leading, renewed, stopped leading, new leader.

use std::time::Instant;

/// Hooks the elector calls as leadership changes (client-go's `LeaderCallbacks`, plus
/// [`renewed`](Self::renewed)). Every method has an empty default.
///
/// They are called synchronously from the elector's task, *before* the elector acts on the
/// change: [`started_leading`](Self::started_leading) before the leading work starts,
/// [`renewed`](Self::renewed) before the new deadline takes effect. So a hook that records
/// the deadline it is given has recorded at least as much as the elector believes, even if
/// the process dies right after. Keep them short: a slow hook delays renewals.
///
/// The leading work itself is not a callback: it is the future given to
/// [`LeaderElector::run`](crate::LeaderElector::run), which gets a
/// [`Leading`](crate::Leading) handle.
pub trait LeaderCallbacks: Send + Sync + 'static {
    /// This elector acquired the lock; it leads until `deadline` (on its
    /// [`Clock`](crate::Clock)) unless it renews before then.
    fn started_leading(&self, deadline: Instant) {
        let _ = deadline;
    }

    /// This elector renewed; it now leads until `deadline`.
    fn renewed(&self, deadline: Instant) {
        let _ = deadline;
    }

    /// This elector stopped leading: it lost the lock, its renew deadline passed, the run
    /// was cancelled or the leading work returned. Called at once, before the leading work
    /// is awaited (its cancellation token is already cancelled). Unlike client-go's
    /// `OnStoppedLeading`, never called by a run that did not lead.
    fn stopped_leading(&self) {}

    /// The record names a holder other than the last one this elector reported (the first
    /// one seen too); `""` when the lock was released.
    fn new_leader(&self, identity: &str) {
        let _ = identity;
    }
}

/// Callbacks that do nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCallbacks;

impl LeaderCallbacks for NoCallbacks {}
