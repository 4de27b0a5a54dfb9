//! What a queue reports about itself, for status pages and diagnostics: [`QueueStats`].

use std::time::Duration;

/// A snapshot of a queue: see [`Queue::stats`](crate::Queue::stats).
///
/// It reads the bookkeeping the queue keeps anyway, the same the metrics read: the depth and
/// the items held are the queue's own counts; the unfinished work and the longest running
/// processor come from the start times the metrics keep, so they are `None` for a queue that
/// records no metrics (one without a name, or without a provider: see
/// [`MetricsProvider`](crate::MetricsProvider)); retries are counted by every delaying layer,
/// named or not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// The queue's name (the `name` label of its metrics); empty for an unnamed queue.
    pub name: String,
    /// How many items are ready to be handed out ([`Queue::len`](crate::Queue::len),
    /// `workqueue_depth`).
    pub depth: usize,
    /// The depth by priority, highest first, for a [`PriorityWorkQueue`](crate::PriorityWorkQueue)
    /// (only priorities with items ready); empty for the other queues.
    pub depth_by_priority: Vec<(i32, usize)>,
    /// How many items workers hold (between `get` and `done`).
    pub processing: usize,
    /// How many items wait for their ready time (delayed or rate limited retries).
    pub waiting: usize,
    /// How many `add_after` calls the queue took (`workqueue_retries_total`).
    pub retries: u64,
    /// The summed age of the items held (`workqueue_unfinished_work_seconds`); `None` when
    /// the queue records no metrics.
    pub unfinished_work: Option<Duration>,
    /// The age of the oldest item held (`workqueue_longest_running_processor_seconds`);
    /// `None` when the queue records no metrics.
    pub longest_running_processor: Option<Duration>,
    /// Whether a shutdown has begun.
    pub shutting_down: bool,
}

impl QueueStats {
    /// The stats of a queue that keeps no bookkeeping beyond its depth: what a
    /// [`Queue`](crate::Queue) of your own without metrics reports.
    ///
    /// ```
    /// let stats = kinformer_workqueue::QueueStats::basic(3, false);
    /// assert_eq!((stats.depth, stats.processing, stats.unfinished_work), (3, 0, None));
    /// ```
    pub fn basic(depth: usize, shutting_down: bool) -> Self {
        Self {
            depth,
            shutting_down,
            ..Self::default()
        }
    }
}
