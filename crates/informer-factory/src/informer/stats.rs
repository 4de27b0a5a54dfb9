//! What an informer reports about itself, and a handler's registration.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kinformer_reflector::{LastError, ReflectorCounters, TaskHandle};

use crate::Error;
use crate::listener::ListenerState;

use kinformer_core::MetaObject;

use super::core::Inner;

/// What an informer reports about itself: see [`SharedIndexInformer::stats`](crate::SharedIndexInformer::stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InformerStats {
    /// The informer's name (a factory's informers are named after their resource:
    /// `pods.v1 (default)`).
    pub name: String,
    /// Whether it was started.
    pub started: bool,
    /// Whether its first list has been applied to the cache.
    pub synced: bool,
    /// How many objects its cache holds.
    pub objects: usize,
    /// The resource version of the last list, event or bookmark; empty before start.
    pub last_sync_resource_version: String,
    /// What its reflector did: lists by reason, watches, events by type.
    pub reflector: ReflectorCounters,
    /// The failure that ended its reflector's last failed list-and-watch, when, and the
    /// backoff after it; `None` while none failed (it stays after a recovery).
    pub last_error: Option<LastError>,
    /// Its identity in client-go 1.36's informer metrics (a factory's informers have one;
    /// [`SharedIndexInformerBuilder::identity`](crate::SharedIndexInformerBuilder::identity)
    /// gives one to another).
    pub identity: Option<InformerIdentity>,
    /// How many entries wait in its FIFO (client-go's `informer_queued_items`: keys for a
    /// DeltaFIFO, events and atomic entries for the in-order FIFO).
    pub queued_items: usize,
    /// How long applying each popped entry to the cache and handing it to the listeners took
    /// (client-go's `informer_processing_latency_seconds`).
    pub processing_latency: LatencyHistogram,
    /// What its snapshot on disk did (see [`SnapshotOptions`](crate::SnapshotOptions)):
    /// what it started from, the last one written; `None` without one.
    pub snapshot: Option<super::SnapshotStatus>,
}

/// An informer's identity in client-go 1.36's informer metrics (its
/// `InformerNameAndResource`): the labels `name`, `group`, `version`, `resource`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InformerIdentity {
    /// The informer's name (client-go's `InformerName`: a factory's, the same for all of its
    /// informers; see [`SharedInformerFactoryBuilder::informer_name`](crate::SharedInformerFactoryBuilder::informer_name)).
    pub name: String,
    /// The API group (`""` for the core group).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource (plural).
    pub resource: String,
}

impl InformerIdentity {
    /// The identity of an informer named `name` of `group`/`version`/`resource`.
    pub fn new(
        name: impl Into<String>,
        group: impl Into<String>,
        version: impl Into<String>,
        resource: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }
}

/// The upper bounds, in seconds, of client-go 1.36's `informer_processing_latency_seconds`
/// buckets (an infinite one follows).
pub const PROCESSING_LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A latency histogram over [`PROCESSING_LATENCY_BUCKETS`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatencyHistogram {
    /// How many observations fell in each bucket (not cumulated): one per bound of
    /// [`PROCESSING_LATENCY_BUCKETS`], then the one above the last bound.
    pub counts: Vec<u64>,
    /// The sum of the observations.
    pub sum: Duration,
    /// How many observations.
    pub count: u64,
}

/// Records a [`LatencyHistogram`] without a lock.
#[derive(Debug, Default)]
pub(crate) struct LatencyRecorder {
    counts: [AtomicU64; PROCESSING_LATENCY_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
    count: AtomicU64,
}

impl LatencyRecorder {
    pub(crate) fn observe(&self, took: Duration) {
        let secs = took.as_secs_f64();
        let bucket = PROCESSING_LATENCY_BUCKETS
            .iter()
            .position(|bound| secs <= *bound)
            .unwrap_or(PROCESSING_LATENCY_BUCKETS.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> LatencyHistogram {
        LatencyHistogram {
            counts: self
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            sum: Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed)),
            count: self.count.load(Ordering::Relaxed),
        }
    }
}

/// A handler's registration with an informer (client-go's `ResourceEventHandlerRegistration`).
///
/// Dropping it does not remove the handler: call [`remove`](Self::remove).
pub struct Registration<K> {
    pub(super) id: u64,
    pub(super) state: Arc<ListenerState>,
    pub(super) resync: Option<Duration>,
    pub(super) inner: Arc<Inner<K>>,
}

impl<K> fmt::Debug for Registration<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("id", &self.id)
            .field("resync", &self.resync)
            .field("pending", &self.state.pending.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<K: MetaObject + Send + Sync + 'static> Registration<K> {
    /// Whether the informer has synced *and* this handler has handled every initial add
    /// it was given (the first list, or the cache replay of a late handler).
    pub fn has_synced(&self) -> bool {
        // The informer first: once it has synced, every initial add has been counted.
        self.inner.has_synced() && self.state.initial_pending.load(Ordering::Acquire) == 0
    }

    /// How many notifications wait in this handler's buffer or are being handled.
    pub fn pending(&self) -> usize {
        self.state.pending.load(Ordering::Acquire)
    }

    /// The effective resync period (after normalization): `None` for no resync.
    pub fn resync_period(&self) -> Option<Duration> {
        self.resync
    }

    /// Removes the handler: it gets no more notifications, and its thread ends after the
    /// call in progress, if any. Removing twice is harmless.
    pub fn remove(&self) {
        self.inner.remove_handler(self.id);
    }
}

/// A running informer, from [`SharedIndexInformer::start`](crate::SharedIndexInformer::start): its
/// [`cancellation_token`](TaskHandle::cancellation_token), [`is_finished`](TaskHandle::is_finished)
/// and [`stop`](TaskHandle::stop), which stops the informer, waits until its task has ended
/// and returns what [`SharedIndexInformer::run`](crate::SharedIndexInformer::run) returned. Dropping it leaves the informer
/// running (as a Tokio `JoinHandle`, and as a client-go informer runs until its stop
/// channel closes), so `informer.start()?;` is safe; keep it to stop the informer.
pub type InformerHandle = TaskHandle<Error>;
