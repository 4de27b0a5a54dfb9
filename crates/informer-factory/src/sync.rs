//! Waiting for caches to sync: client-go's `cache.WaitForCacheSync` over anything that
//! knows whether it has synced.

use std::time::{Duration, Instant};

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

/// Waits until every one of `synced` has synced, or `timeout` has passed (client-go's
/// `cache.WaitForCacheSync`, with a timeout in place of the stop channel). Returns whether
/// all synced.
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
    let deadline = Instant::now() + timeout;
    loop {
        if synced.iter().all(|s| s.has_synced()) {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        tokio::time::sleep(SYNC_POLL.min(deadline - now)).await;
    }
}
