//! The crate's one error type.

/// What can go wrong in this crate. Queue operations themselves never fail: like client-go,
/// an add after shutdown is ignored and a `done` of an unknown item does nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// [`set_metrics_provider`](crate::set_metrics_provider) was already called; the first
    /// provider stays. Pass a provider in each queue's
    /// [`QueueConfig`](crate::QueueConfig) instead.
    #[error("a global workqueue metrics provider is already set")]
    MetricsProviderAlreadySet,
}
