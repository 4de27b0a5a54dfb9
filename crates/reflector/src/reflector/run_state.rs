//! What the reflector remembers between rounds: the last synced resourceVersion, the one
//! the next list or watch reads at, and why the next list happens.

use std::fmt;
use std::sync::PoisonError;

use kinformer_core::ErrorChain;

use super::status::Shared;
use crate::backoff::BackoffState;
use crate::{Backoff, Error};

/// Why the next list happens, for the `list` span.
#[derive(Clone, Debug)]
pub(super) enum RelistReason {
    Initial,
    Expired,
    TooLargeResourceVersion,
    VeryShortWatch,
    ShardSelectionChanged,
    Failed(String),
}

impl RelistReason {
    pub(super) fn after(e: &Error) -> Self {
        if e.is_expired() {
            Self::Expired
        } else if e.is_too_large_resource_version() {
            Self::TooLargeResourceVersion
        } else if matches!(e, Error::VeryShortWatch) {
            Self::VeryShortWatch
        } else if e.is_shard_selection_changed() {
            Self::ShardSelectionChanged
        } else {
            Self::Failed(ErrorChain(e).to_string())
        }
    }

    /// The `reason` labels of the reflector's list counters
    /// ([`ReflectorCounters::lists`](crate::ReflectorCounters::lists)), at each reason's
    /// [`label_index`](Self::label_index).
    pub(super) const LABELS: [&'static str; 6] = [
        "initial",
        "expired",
        "too_large_resource_version",
        "very_short_watch",
        "error",
        "shard_selection_changed",
    ];

    /// The `reason` label, as [`ReflectorCounters::lists`](crate::ReflectorCounters::lists)
    /// and the last error show it.
    pub(super) fn label(&self) -> &'static str {
        Self::LABELS
            .get(self.label_index())
            .copied()
            .unwrap_or("error")
    }

    /// Its position in [`LABELS`](Self::LABELS).
    pub(super) fn label_index(&self) -> usize {
        match self {
            Self::Initial => 0,
            Self::Expired => 1,
            Self::TooLargeResourceVersion => 2,
            Self::VeryShortWatch => 3,
            Self::Failed(_) => 4,
            Self::ShardSelectionChanged => 5,
        }
    }
}

impl fmt::Display for RelistReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Initial => f.write_str("initial list"),
            Self::Expired => f.write_str("the watch's resourceVersion expired (410 Gone)"),
            Self::TooLargeResourceVersion => {
                f.write_str("the resourceVersion is newer than the server's (too large)")
            }
            Self::VeryShortWatch => f.write_str("a watch closed at once without events"),
            Self::ShardSelectionChanged => f.write_str("the shard selection changed"),
            Self::Failed(e) => write!(f, "the previous round failed: {e}"),
        }
    }
}

/// What the reflector remembers between rounds.
pub(super) struct RunState {
    pub(super) last_sync_rv: String,
    /// The last list or watch at `last_sync_rv` answered "expired" or "too large":
    /// the next one reads at `""`.
    pub(super) rv_unavailable: bool,
    /// The first list (at RV "0") came back in pages: the watch cache is off, so later
    /// lists are paged too.
    pub(super) paginated_result: bool,
    pub(super) backoff: BackoffState,
    pub(super) reason: RelistReason,
    /// Hand lists to the sink whole, not in parts, until one has reached it: the cache
    /// was filled from a snapshot before the reflector started ([`Resume::from_known`]),
    /// and a sink that queues the parts of a first list as they come (the in-order FIFO)
    /// would not reconcile that list with the cache.
    ///
    /// [`Resume::from_known`]: super::Resume::from_known
    pub(super) whole_lists: bool,
}

impl RunState {
    pub(super) fn new(backoff: Backoff) -> Self {
        Self {
            last_sync_rv: String::new(),
            rv_unavailable: false,
            paginated_result: false,
            backoff: BackoffState::new(backoff),
            reason: RelistReason::Initial,
            whole_lists: false,
        }
    }

    /// client-go's `relistResourceVersion`: `""` after an unavailable RV, `"0"` at
    /// first, else the last synced RV.
    pub(super) fn relist_rv(&self) -> &str {
        if self.rv_unavailable {
            ""
        } else if self.last_sync_rv.is_empty() {
            "0"
        } else {
            &self.last_sync_rv
        }
    }

    /// client-go's `rewatchResourceVersion`, for streaming lists: `""` (consistent) at
    /// first and after an unavailable RV, else the last synced RV.
    pub(super) fn rewatch_rv(&self) -> &str {
        if self.rv_unavailable {
            ""
        } else {
            &self.last_sync_rv
        }
    }

    pub(super) fn set_last_sync(&mut self, shared: &Shared, rv: String) {
        *shared
            .last_sync_rv
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = rv.clone();
        self.last_sync_rv = rv;
    }
}
