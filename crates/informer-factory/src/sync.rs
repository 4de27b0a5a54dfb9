//! Waiting for caches to sync: client-go's `cache.WaitForCacheSync` over anything that
//! knows whether it has synced.

use std::future::Future;
use std::time::Duration;

use kinformer_core::MetaObject;

use crate::SharedIndexInformer;

/// How often the factory's `wait_for_cache_sync` and [`wait_for_cache_sync`] look at the
/// informers (client-go polls every 100 ms; a look is a few atomic loads).
pub(crate) const SYNC_POLL: Duration = Duration::from_millis(10);

/// Something that knows whether its cache has synced: an informer or a handler's
/// registration. See [`wait_for_cache_sync`].
pub trait HasSynced {
    /// Whether the initial list has been applied (and, for a registration, handled).
    fn has_synced(&self) -> bool;
}

impl<K: MetaObject + Send + Sync + 'static> HasSynced for SharedIndexInformer<K> {
    fn has_synced(&self) -> bool {
        SharedIndexInformer::has_synced(self)
    }
}

impl<K: MetaObject + Send + Sync + 'static> HasSynced for crate::Registration<K> {
    fn has_synced(&self) -> bool {
        crate::Registration::has_synced(self)
    }
}

impl<F: Fn() -> bool> HasSynced for F {
    fn has_synced(&self) -> bool {
        self()
    }
}

/// Waits until every one of `synced` has synced, or `timeout` has passed on Tokio's clock.
/// Returns whether all synced. [`wait_for_cache_sync_until`] waits on a stop signal
/// instead (client-go's stop channel).
///
/// ```no_run
/// # use kinformer_informer_factory::{wait_for_cache_sync, SharedIndexInformer};
/// # use k8s_openapi::api::core::v1::Pod;
/// # async fn f(pods: SharedIndexInformer<Pod>) {
/// use std::time::Duration;
/// if !wait_for_cache_sync(Duration::from_secs(60), &[&pods]).await {
///     panic!("the pod cache did not sync");
/// }
/// # }
/// ```
pub async fn wait_for_cache_sync(timeout: Duration, synced: &[&dyn HasSynced]) -> bool {
    wait_for_cache_sync_until(tokio::time::sleep(timeout), synced).await
}

/// Waits until every one of `synced` has synced, or `stop` resolves (client-go's
/// `cache.WaitForCacheSync(stopCh, ...)`: no timeout of its own). Returns whether all
/// synced; `false` means `stop` came first.
///
/// ```no_run
/// # use kinformer_informer_factory::{wait_for_cache_sync_until, SharedIndexInformer};
/// # use k8s_openapi::api::core::v1::Pod;
/// # async fn f(pods: SharedIndexInformer<Pod>) {
/// let shutdown = tokio_util::sync::CancellationToken::new();
/// if !wait_for_cache_sync_until(shutdown.cancelled(), &[&pods]).await {
///     return; // asked to stop before the pod cache synced
/// }
/// # }
/// ```
pub async fn wait_for_cache_sync_until(
    stop: impl Future<Output = ()>,
    synced: &[&dyn HasSynced],
) -> bool {
    poll_until(|| synced.iter().all(|s| s.has_synced()), stop).await
}

/// Asks `synced` every [`SYNC_POLL`] until it answers `true` (returns `true`) or `stop`
/// resolves (returns its last answer).
pub(crate) async fn poll_until(synced: impl Fn() -> bool, stop: impl Future<Output = ()>) -> bool {
    let mut stop = std::pin::pin!(stop);
    loop {
        if synced() {
            return true;
        }
        tokio::select! {
            biased;
            () = &mut stop => return synced(),
            () = tokio::time::sleep(SYNC_POLL) => {}
        }
    }
}
