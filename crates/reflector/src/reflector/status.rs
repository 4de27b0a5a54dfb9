//! The reflector's shared status and counters, and the live view of them
//! ([`ReflectorStatus`], [`ReflectorCounters`], [`LastError`]).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use super::run_state::RelistReason;
#[cfg(doc)]
use crate::Error;
use crate::WatchEvent;

#[derive(Default)]
pub(super) struct Shared {
    pub(super) last_sync_rv: Mutex<String>,
    synced: AtomicBool,
    syncs: AtomicU64,
    /// Lists started, by [`RelistReason::label_index`].
    lists: [AtomicU64; RelistReason::LABELS.len()],
    pub(super) watches: AtomicU64,
    /// Watch events, by [`EVENT_TYPES`] position.
    events: [AtomicU64; EVENT_TYPES.len()],
    /// Objects skipped because they did not decode.
    pub(super) undecodable: AtomicU64,
    /// Shard selections narrowed under a running watch, without a relist.
    pub(super) narrowings: AtomicU64,
    /// Shard selections that gained shards, listed without a relist.
    pub(super) widenings: AtomicU64,
    /// Rounds resumed from a snapshot that caught up.
    pub(super) resumed: AtomicU64,
    /// Rounds resumed from a snapshot that could not catch up, and listed.
    pub(super) resume_failures: AtomicU64,
    /// The failure that ended the last failed round; written only when a round fails.
    last_error: Mutex<Option<LastError>>,
}

/// The `type` labels of [`ReflectorCounters::events`].
const EVENT_TYPES: [&str; 4] = ["added", "modified", "deleted", "bookmark"];

impl Shared {
    pub(super) fn synced_once(&self) {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.synced.store(true, Ordering::Release);
    }

    pub(super) fn count_list(&self, reason: &RelistReason) {
        if let Some(n) = self.lists.get(reason.label_index()) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Notes the failure that ended a round, and the backoff before the relist for
    /// `reason`.
    pub(super) fn failed(
        &self,
        message: String,
        at: SystemTime,
        backoff: Duration,
        reason: &RelistReason,
    ) {
        let relist_reason = reason.label();
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(LastError {
            message,
            at,
            backoff,
            relist_reason,
        });
    }

    pub(super) fn count_event<K>(&self, ev: &WatchEvent<K>) {
        let i = match ev {
            WatchEvent::Added(_) => 0,
            WatchEvent::Modified(_) => 1,
            WatchEvent::Deleted(_) => 2,
            WatchEvent::Bookmark(_) => 3,
            // Counted as `narrowings`, `widenings` or a relist instead.
            WatchEvent::Shard(_) => return,
        };
        if let Some(n) = self.events.get(i) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What a reflector did since it started, counted as it went: read them at any time
/// through [`ReflectorStatus::counters`] (the facade's metrics do, at each scrape).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReflectorCounters {
    /// Lists (paged, or streaming) started, by why: `initial`, `expired` (410 Gone),
    /// `too_large_resource_version`, `very_short_watch`, `error` (any other failure),
    /// `shard_selection_changed` (see [`ShardSelection`](crate::ShardSelection)).
    pub lists: Vec<(&'static str, u64)>,
    /// Watches started (a streaming list's watch included).
    pub watches: u64,
    /// Watch events received, by type: `added`, `modified`, `deleted`, `bookmark`
    /// (a streaming list's initial events included).
    pub events: Vec<(&'static str, u64)>,
    /// Lists that reached the sink (as [`ReflectorStatus::syncs`]).
    pub syncs: u64,
    /// Objects skipped because they did not decode ([`Error::Undecodable`]): list items
    /// and watch events.
    pub undecodable: u64,
    /// Narrowings of the shard selection followed under a running watch, each dropping
    /// from the cache what is no longer selected without a list
    /// ([`ShardChange::Narrowed`](crate::ShardChange::Narrowed)).
    pub narrowings: u64,
    /// Changes of the shard selection that gained shards, handled by listing only what
    /// was gained, at the version the watch had reached
    /// ([`ShardChange::Widened`](crate::ShardChange::Widened));
    /// one that could not be ends in a relist instead (`shard_selection_changed`).
    pub widenings: u64,
    /// Starts from a snapshot ([`Reflector::resume`](crate::Reflector::resume)) that caught
    /// up without a list.
    pub resumed: u64,
    /// Starts from a snapshot that could not catch up (`410 Gone`, no bookmark, …) and
    /// listed instead.
    pub resume_failures: u64,
}

/// The failure that ended a reflector's last failed round of list-and-watch, and what it did
/// next: see [`ReflectorStatus::last_error`]. It stays after the reflector recovers (`at`
/// tells how old it is); a `410 Gone` is one too (a relist, `relist_reason` `expired`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LastError {
    /// The error with its causes, as logged.
    pub message: String,
    /// When the round ended, by the reflector's clock's wall time.
    pub at: SystemTime,
    /// How long the reflector waited before it listed again.
    pub backoff: Duration,
    /// Why it listed again: a `reason` of [`ReflectorCounters::lists`] (`expired`,
    /// `too_large_resource_version`, `very_short_watch`, `error`).
    pub relist_reason: &'static str,
}

/// A live view of a reflector's progress, cheap to clone.
#[derive(Clone)]
pub struct ReflectorStatus {
    pub(super) shared: Arc<Shared>,
}

impl fmt::Debug for ReflectorStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReflectorStatus")
            .field(
                "last_sync_resource_version",
                &self.last_sync_resource_version(),
            )
            .field("has_synced", &self.has_synced())
            .field("syncs", &self.syncs())
            .finish()
    }
}

impl ReflectorStatus {
    /// The resourceVersion of the last list, watch event or bookmark the sink got
    /// (client-go's `LastSyncResourceVersion`); empty before the first list.
    pub fn last_sync_resource_version(&self) -> String {
        self.shared
            .last_sync_rv
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether a full list (or streaming list) has reached the sink at least once.
    pub fn has_synced(&self) -> bool {
        self.shared.synced.load(Ordering::Acquire)
    }

    /// How many full lists (or streaming lists) replaced the sink's content: 1 after the
    /// initial list, one more per relist.
    pub fn syncs(&self) -> u64 {
        self.shared.syncs.load(Ordering::Relaxed)
    }

    /// The failure that ended the last failed round of list-and-watch, with when it
    /// happened and the backoff that followed; `None` while no round has failed.
    pub fn last_error(&self) -> Option<LastError> {
        self.shared
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What the reflector did so far: lists by reason, watches, events by type.
    pub fn counters(&self) -> ReflectorCounters {
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        ReflectorCounters {
            lists: RelistReason::LABELS
                .iter()
                .zip(&self.shared.lists)
                .map(|(r, n)| (*r, load(n)))
                .collect(),
            watches: load(&self.shared.watches),
            events: EVENT_TYPES
                .iter()
                .zip(&self.shared.events)
                .map(|(t, n)| (*t, load(n)))
                .collect(),
            syncs: self.syncs(),
            undecodable: load(&self.shared.undecodable),
            narrowings: load(&self.shared.narrowings),
            widenings: load(&self.shared.widenings),
            resumed: load(&self.shared.resumed),
            resume_failures: load(&self.shared.resume_failures),
        }
    }
}
