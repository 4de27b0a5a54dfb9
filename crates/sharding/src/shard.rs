//! [`Shard`]: one shard this replica holds, as the work started for it sees it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kinformer_reflector::{ShardKey, ShardRange, ShardSelector};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One shard this replica holds, handed to the work [`ShardManager::run`](crate::ShardManager::run) starts for it.
/// Cheap to clone.
#[derive(Clone)]
pub struct Shard {
    pub(crate) index: u32,
    pub(crate) count: u32,
    pub(crate) range: ShardRange,
    pub(crate) lease: Arc<str>,
    /// Cancelled when the shard is lost (or the manager stops).
    pub(crate) token: CancellationToken,
    /// The renew deadline of the shard's Lease, moved on by each renewal.
    pub(crate) deadline: watch::Receiver<Instant>,
    pub(crate) grace: Duration,
}

impl fmt::Debug for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shard")
            .field("index", &self.index)
            .field("count", &self.count)
            .field("lease", &self.lease)
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

impl Shard {
    /// The shard's index, below [`count`](Self::count).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The shard count.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The name of the shard's Lease.
    pub fn lease(&self) -> &str {
        &self.lease
    }

    /// The shard's range of the hash space: range `index` of `count`.
    pub fn range(&self) -> ShardRange {
        self.range
    }

    /// The selector of this shard's objects by `key` (the uid or the namespace).
    pub fn selector(&self, key: ShardKey) -> ShardSelector {
        ShardSelector::range(key, self.range)
    }

    /// Cancelled the moment this replica stops holding the shard (lost, given up, or
    /// shutdown). The shard's work must stop then.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Whether this replica still holds the shard: false once the token is cancelled, and
    /// as soon as the renew deadline has passed, even before the task that cancels the token
    /// has run.
    pub fn is_held(&self) -> bool {
        !self.token.is_cancelled() && Instant::now() < *self.deadline.borrow()
    }

    /// How long reconciles in flight get to return once the shard is lost (see
    /// [`ShardingConfig::grace`](crate::ShardingConfig::grace)).
    pub fn grace(&self) -> Duration {
        self.grace
    }
}

/// What [`Controller::run_shard`](kinformer_controller::controller::Controller::run_shard) reads of a shard.
impl kinformer_controller::controller::HeldShard for Shard {
    fn index(&self) -> u32 {
        Shard::index(self)
    }
    fn lease(&self) -> &str {
        Shard::lease(self)
    }
    fn token(&self) -> &CancellationToken {
        Shard::token(self)
    }
    fn is_held(&self) -> bool {
        Shard::is_held(self)
    }
    fn grace(&self) -> Duration {
        Shard::grace(self)
    }
}
