//! What an informer reports about itself, and a handler's registration.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
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
