//! What every queue layer is built from: a name (for metrics), a metrics provider, a clock.

use std::fmt;
use std::sync::Arc;

use crate::{Clock, MetricsProvider, RealClock};

/// Options shared by [`WorkQueue`](crate::WorkQueue),
/// [`DelayingWorkQueue`](crate::DelayingWorkQueue) and
/// [`RateLimitingWorkQueue`](crate::RateLimitingWorkQueue) (client-go's `TypedQueueConfig`).
///
/// ```
/// use kinformer_workqueue::{FakeClock, NoopMetricsProvider, QueueConfig};
/// use std::sync::Arc;
///
/// let config = QueueConfig::new()
///     .name("pods")
///     .metrics_provider(Arc::new(NoopMetricsProvider))
///     .clock(FakeClock::new());
/// # let _ = config;
/// ```
#[derive(Clone)]
pub struct QueueConfig {
    pub(crate) name: String,
    pub(crate) metrics: Option<Arc<dyn MetricsProvider>>,
    pub(crate) clock: Arc<dyn Clock>,
}

impl QueueConfig {
    /// No name (so no metrics), the global metrics provider, the real clock.
    pub fn new() -> Self {
        Self {
            name: String::new(),
            metrics: None,
            clock: Arc::new(RealClock),
        }
    }

    /// Names the queue. Only a named queue records metrics; the name is their `name` label.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Records this queue's metrics with `provider` instead of the global one
    /// ([`set_metrics_provider`](crate::set_metrics_provider)).
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.metrics = Some(provider);
        self
    }

    /// Reads time from `clock` (a [`FakeClock`](crate::FakeClock) in tests).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for QueueConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueConfig")
            .field("name", &self.name)
            .field("metrics", &self.metrics.is_some())
            .field("clock", &self.clock)
            .finish()
    }
}
