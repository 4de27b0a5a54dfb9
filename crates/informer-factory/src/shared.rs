//! The `SharedInformer` trait: what code that consumes an informer needs from it.

use std::sync::Arc;
use std::time::Duration;

use kinformer_core::MetaObject;
use kinformer_indexer::{Indexer, Lister};

use crate::{
    Error, HandlerOptions, HasSynced, Registration, ResourceEventHandler, SharedIndexInformer,
};

/// A handler's registration, as a trait object: see
/// [`SharedInformer::add_event_handler_with_resync`].
pub trait HandlerRegistration: HasSynced + Send + Sync {
    /// Removes the handler; removing twice is harmless.
    fn remove(&self);
}

impl<K: MetaObject + Send + Sync + 'static> HandlerRegistration for Registration<K> {
    fn remove(&self) {
        Registration::remove(self);
    }
}

/// What a controller needs from an informer (client-go's `SharedInformer` interface):
/// handlers, the cache, the sync state. [`SharedIndexInformer`] implements it; code
/// written against `&dyn SharedInformer<K>` (a controller's wiring, say) can be tested
/// with a fake that calls its handlers by hand, or run on another informer.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use kinformer_informer_factory::{
///     ResourceEventHandlerFuncs, SharedIndexInformer, SharedInformer,
/// };
/// use kinformer_reflector::fake::FakeListerWatcher;
/// use k8s_openapi::api::core::v1::Pod;
///
/// /// Wiring that works with any informer.
/// fn count_adds(informer: &dyn SharedInformer<Pod>) -> Arc<std::sync::atomic::AtomicUsize> {
///     let adds = Arc::new(std::sync::atomic::AtomicUsize::new(0));
///     let counter = Arc::clone(&adds);
///     let handler = ResourceEventHandlerFuncs::new().add_func(move |_: &Arc<Pod>, _| {
///         counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
///     });
///     informer.add_event_handler_with_resync(Box::new(handler), Duration::ZERO).unwrap();
///     adds
/// }
///
/// let informer = SharedIndexInformer::<Pod>::new(FakeListerWatcher::new(), Duration::ZERO);
/// let adds = count_adds(&informer);
/// assert_eq!(adds.load(std::sync::atomic::Ordering::Relaxed), 0);
/// ```
pub trait SharedInformer<K>: HasSynced + Send + Sync {
    /// Registers `handler` with `options` (resync period, buffer), as
    /// [`SharedIndexInformer::add_event_handler_with_options`].
    ///
    /// # Errors
    /// As `add_event_handler_with_options`.
    fn add_event_handler_with_options(
        &self,
        handler: Box<dyn ResourceEventHandler<K> + Send>,
        options: HandlerOptions,
    ) -> Result<Box<dyn HandlerRegistration>, Error>;

    /// Registers `handler` with the informer's default resync period, as
    /// [`SharedIndexInformer::add_event_handler`].
    ///
    /// # Errors
    /// As `add_event_handler`.
    fn add_event_handler(
        &self,
        handler: Box<dyn ResourceEventHandler<K> + Send>,
    ) -> Result<Box<dyn HandlerRegistration>, Error> {
        self.add_event_handler_with_options(handler, HandlerOptions::new())
    }

    /// Registers `handler` with its own `resync` period (zero: none), as
    /// [`SharedIndexInformer::add_event_handler_with_resync`].
    ///
    /// # Errors
    /// As `add_event_handler_with_resync`.
    fn add_event_handler_with_resync(
        &self,
        handler: Box<dyn ResourceEventHandler<K> + Send>,
        resync: Duration,
    ) -> Result<Box<dyn HandlerRegistration>, Error> {
        self.add_event_handler_with_options(handler, HandlerOptions::new().resync(resync))
    }

    /// The read side of the informer's cache, as
    /// [`SharedIndexInformer::indexer`].
    fn indexer(&self) -> Arc<dyn Indexer<K>>;

    /// The resource version of the last list, event or bookmark seen; empty before start.
    fn last_sync_resource_version(&self) -> String;

    /// A lister over [`indexer`](Self::indexer).
    fn lister(&self) -> Lister<K>
    where
        K: MetaObject + 'static,
    {
        Lister::from_dyn(self.indexer())
    }
}

impl<K: MetaObject + Send + Sync + 'static> SharedInformer<K> for SharedIndexInformer<K> {
    fn add_event_handler_with_options(
        &self,
        handler: Box<dyn ResourceEventHandler<K> + Send>,
        options: HandlerOptions,
    ) -> Result<Box<dyn HandlerRegistration>, Error> {
        let registration =
            SharedIndexInformer::add_event_handler_with_options(self, handler, options)?;
        Ok(Box::new(registration))
    }

    fn indexer(&self) -> Arc<dyn Indexer<K>> {
        SharedIndexInformer::indexer(self)
    }

    fn last_sync_resource_version(&self) -> String {
        SharedIndexInformer::last_sync_resource_version(self)
    }
}
