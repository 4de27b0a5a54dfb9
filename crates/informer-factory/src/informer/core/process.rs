//! The informer's own task: the reflector and the pop loop, and how each popped item reaches
//! the cache and the handlers (client-go's `processDeltas` / `processReplacedAllInfo`).

use std::collections::HashSet;
use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::Duration;

use kinformer_core::{
    DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType, ErrorChain, KeyFunc, KnownObjects,
    ListPart, Listed, MetaObject, ObjectKey, Unchanged,
};
use kinformer_deltafifo::{FifoQueue, Item};
use kinformer_indexer::Indexer;
use kinformer_reflector::{ListerWatcher, Reflector};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::Error;
use crate::listener::Notification;

use super::Inner;

/// The key a coalescing listener files `n` under: the object's key in the cache (a
/// tombstone's own key).
pub(super) fn notification_key<K: MetaObject>(
    key_func: &KeyFunc<K>,
    n: &Notification<K>,
) -> Option<ObjectKey> {
    match n {
        Notification::Add { obj, .. } | Notification::Update { new: obj, .. } => {
            key_func(obj.as_ref()).ok()
        }
        Notification::Delete(DeltaObject::Object(obj)) => key_func(obj.as_ref()).ok(),
        Notification::Delete(DeltaObject::Tombstone(t)) => Some(t.key.clone()),
    }
}

pub(super) type InformerReflector<K> =
    Reflector<K, Arc<dyn ListerWatcher<K>>, Arc<dyn FifoQueue<K>>>;

/// A started informer's FIFO and reflector, from [`Inner::prepare`] to [`run_prepared`].
pub(in crate::informer) struct Prepared<K> {
    pub(super) fifo: Arc<dyn FifoQueue<K>>,
    pub(super) reflector: InformerReflector<K>,
}

/// Closes the FIFO, ends every listener and marks the informer stopped, however `run`
/// ends (returned, or its future dropped).
pub(super) struct StopGuard<K: MetaObject + Send + Sync + 'static> {
    inner: Arc<Inner<K>>,
    fifo: Arc<dyn FifoQueue<K>>,
}

impl<K: MetaObject + Send + Sync + 'static> Drop for StopGuard<K> {
    fn drop(&mut self) {
        self.inner.config().stopped = true;
        self.fifo.close();
        self.inner.processor.stop_all();
        tracing::debug!(informer = %self.inner.name, "informer stopped");
    }
}

pub(in crate::informer) async fn run_prepared<K: MetaObject + Send + Sync + 'static>(
    inner: Arc<Inner<K>>,
    prepared: Prepared<K>,
    cancel: CancellationToken,
) -> Result<(), Error> {
    let Prepared { fifo, reflector } = prepared;
    let guard = StopGuard {
        inner: Arc::clone(&inner),
        fifo: Arc::clone(&fifo),
    };
    let reflector = match super::super::snapshot::load(&inner).await {
        Some(resume) => reflector.resume(resume),
        None => reflector,
    };
    let reflector = reflector.spawn()?;
    let span = tracing::info_span!("informer", name = %inner.name);
    // The writer stops when the pop loop does, whatever ended it, but finishes a write under
    // way first (so that it never overlaps the last one, below).
    let stop_writer = cancel.child_token();
    tokio::join!(
        async {
            pop_loop(&inner, &*fifo, &cancel).instrument(span).await;
            stop_writer.cancel();
        },
        write_snapshots(&inner, &stop_writer),
    );
    let result = reflector.stop().await;
    if cancel.is_cancelled() && inner.snapshots().is_some() {
        // Stopped on purpose: the cache as it is now, for the next start.
        let _ = super::super::snapshot::write(&inner, Duration::ZERO).await;
    }
    drop(guard);
    match result {
        Err(e) if e.is_sink_closed() => Ok(()),
        other => other.map_err(Error::from),
    }
}

/// Writes the informer's snapshot every period until `stop` (nothing without one); a write
/// under way is finished first.
async fn write_snapshots<K: MetaObject + Send + Sync + 'static>(
    inner: &Arc<Inner<K>>,
    stop: &CancellationToken,
) {
    let Some(period) = inner
        .snapshots()
        .map(|s| s.options.period)
        .filter(|p| !p.is_zero())
    else {
        return;
    };
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = inner.clock.sleep(period) => {}
        }
        let _ = super::super::snapshot::write(inner, super::super::snapshot::QUIET_PATIENCE).await;
    }
}

/// client-go's `processLoop`: pop, apply, tell the listeners, until cancelled.
pub(super) async fn pop_loop<K: MetaObject + Send + Sync + 'static>(
    inner: &Inner<K>,
    fifo: &dyn FifoQueue<K>,
    cancel: &CancellationToken,
) {
    loop {
        let popped = tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            popped = fifo.pop_async() => match popped {
                Ok(p) => p,
                Err(_) => return, // closed
            },
        };
        let start = std::time::Instant::now();
        inner.process(popped.item(), popped.is_in_initial_list());
        inner.latency.observe(start.elapsed());
        // Dropped after `process` released the delivery lock and every store lock (the
        // FIFO's documented rule): this marks the item applied.
        drop(popped);
        inner.drained.notify_waiters();
    }
}

/// How many entries the FIFO may hold before a reflector taking a list in parts waits for
/// the informer: one part beside the one being decoded keeps both tasks busy.
pub(super) const PACED_BACKLOG: usize = kinformer_reflector::STREAMED_PART;

/// How long a paced reflector waits for the FIFO before it hands on the next part anyway:
/// a queue of your own ([`SharedIndexInformerBuilder::custom_fifo`]) whose `len` counts
/// entries it hands out only once the list ends must slow the list, not stall it.
pub(super) const PACE_PATIENCE: Duration = Duration::from_secs(5);

impl<K: MetaObject + Send + Sync + 'static> Inner<K> {
    pub(super) fn lock_deliver(&self) -> MutexGuard<'_, ()> {
        self.deliver.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(in crate::informer) fn has_synced(&self) -> bool {
        self.fifo.get().is_some_and(|f| f.has_synced())
    }

    /// Every cached object, taken while no item is being applied and none is queued; `None`
    /// while something is queued.
    pub(in crate::informer) fn quiet_list(&self) -> Option<Vec<Arc<K>>> {
        let _deliver = self.lock_deliver();
        self.fifo
            .get()
            .is_some_and(|f| f.is_empty())
            .then(|| self.store.list())
    }

    /// Resolves once `fifo` holds at most [`PACED_BACKLOG`] entries, or is closed, or
    /// after [`PACE_PATIENCE`].
    pub(super) async fn caught_up(&self, fifo: &dyn FifoQueue<K>) {
        let mut patience = self.clock.sleep(PACE_PATIENCE);
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            // Registered before the check, so that a pop between the two is not missed.
            drained.as_mut().enable();
            if fifo.len() <= PACED_BACKLOG || fifo.is_closed() {
                return;
            }
            tokio::select! {
                () = drained => {}
                () = &mut patience => return,
            }
        }
    }

    /// Applies one popped item to the store and distributes its notifications, as
    /// client-go's `processDeltas` / `processReplacedAllInfo`.
    pub(super) fn process(&self, item: &Item<K>, initial: bool) {
        let _deliver = self.lock_deliver();
        match item {
            Item::Deltas { key, deltas } => {
                for d in deltas {
                    self.apply(key, d, initial);
                }
            }
            Item::Batch(events) => {
                for (key, d) in events {
                    self.apply(key, d, initial);
                }
            }
            Item::ReplacedAll {
                objects,
                unchanged,
                resource_version,
            } => self.replace_all(objects, unchanged, resource_version, initial),
            Item::SyncAll => {
                for obj in self.store.list() {
                    let n = Notification::Update {
                        old: Arc::clone(&obj),
                        new: obj,
                    };
                    self.processor.distribute(&n, true);
                }
            }
            Item::Bookmark { resource_version } => {
                if let Err(err) = self.store.bookmark(resource_version) {
                    tracing::warn!(error = %ErrorChain(&err), resource_version, "cannot record a bookmark in the cache");
                }
            }
            other => tracing::warn!(kind = other.kind(), "unknown FIFO item ignored"),
        }
    }

    pub(super) fn apply(&self, key: &ObjectKey, d: &Delta<K>, initial: bool) {
        let obj = d.object.object();
        if d.kind == DeltaType::Deleted {
            if let Err(err) = self.store.delete(Arc::clone(obj)) {
                tracing::warn!(%key, error = %ErrorChain(&err), "cannot delete from the cache");
                return;
            }
            self.processor
                .distribute(&Notification::Delete(d.object.clone()), false);
            return;
        }
        // Sync, Replaced, Added, Updated: update if present, else add.
        match self.stored_version(key, obj) {
            Some(old) => {
                if let Err(err) = self.store.update(Arc::clone(obj)) {
                    tracing::warn!(%key, error = %ErrorChain(&err), "cannot update the cache");
                    return;
                }
                self.notify_update(old, Arc::clone(obj));
            }
            None => {
                if let Err(err) = self.store.add(Arc::clone(obj)) {
                    tracing::warn!(%key, error = %ErrorChain(&err), "cannot add to the cache");
                    return;
                }
                let n = Notification::Add {
                    obj: Arc::clone(obj),
                    initial,
                };
                self.processor.distribute(&n, false);
            }
        }
    }

    /// What the store holds under `key`, the old version of `obj`: the stored object when
    /// the store can hand it out as it is ([`KnownObjects::get_shared`]); else `obj` itself
    /// when the store holds the same version (same non-empty resource version), which a
    /// store that builds what it hands out answers without building it, so that a relist
    /// or a resync does not build a second copy of everything unchanged; else the stored
    /// object as the store hands it out.
    pub(super) fn stored_version(&self, key: &ObjectKey, obj: &Arc<K>) -> Option<Arc<K>> {
        let key = key.as_str();
        if let Some(stored) = self.store.get_shared(key) {
            return Some(stored);
        }
        let same_version = obj
            .object_resource_version()
            .is_some_and(|rv| self.store.contains_version(key, rv));
        if same_version {
            Some(Arc::clone(obj))
        } else {
            self.store.get_by_key(key)
        }
    }

    /// An update whose resource version did not change is a resync: it goes only to the
    /// listeners whose resync is due (client-go's `OnUpdate`).
    pub(super) fn notify_update(&self, old: Arc<K>, new: Arc<K>) {
        let is_sync = old.object_resource_version() == new.object_resource_version();
        self.processor
            .distribute(&Notification::Update { old, new }, is_sync);
    }

    /// client-go's `processReplacedAllInfo`: one `replace` of the store, then deletes
    /// (tombstones) for the keys that vanished, then adds / updates in list order. Objects
    /// listed as `unchanged` keys (the store holds that version) stay as the store holds
    /// them and are resync updates, so they reach only listeners whose resync is due, after
    /// the others.
    pub(super) fn replace_all(
        &self,
        objects: &[(ObjectKey, Arc<K>)],
        unchanged: &[ObjectKey],
        rv: &str,
        initial: bool,
    ) {
        let listed: HashSet<&str> = objects
            .iter()
            .map(|(k, _)| k.as_str())
            .chain(unchanged.iter().map(ObjectKey::as_str))
            .collect();
        let deletions: Vec<DeletedFinalStateUnknown<K>> = self
            .store
            .list_keys()
            .into_iter()
            .filter(|k| !listed.contains(k.as_str()))
            .filter_map(|key| {
                let obj = self.store.get_by_key(key.as_str())?;
                Some(DeletedFinalStateUnknown { key, obj })
            })
            .collect();
        drop(listed);
        let replacements: Vec<(Option<Arc<K>>, Arc<K>)> = objects
            .iter()
            .map(|(k, o)| (self.stored_version(k, o), Arc::clone(o)))
            .collect();
        // Unchanged objects by key: the store keeps its entries (one that reads them back
        // gets its own objects).
        let cache = Arc::clone(&self.store) as Arc<dyn KnownObjects<K>>;
        let items: Vec<Listed<K>> = objects
            .iter()
            .map(|(_, o)| Listed::Object(Arc::clone(o)))
            .chain(
                unchanged
                    .iter()
                    .map(|k| Listed::Unchanged(Unchanged::new(k.clone(), Arc::clone(&cache)))),
            )
            .collect();
        let replaced = self
            .store
            .replace(ListPart::new(items, true, Some(rv.to_owned())));
        if let Err(err) = replaced {
            tracing::warn!(error = %ErrorChain(&err), resource_version = rv, "cannot replace the cache");
            return;
        }
        for t in deletions {
            self.processor
                .distribute(&Notification::Delete(DeltaObject::Tombstone(t)), false);
        }
        for (old, new) in replacements {
            match old {
                Some(old) => self.notify_update(old, new),
                None => self
                    .processor
                    .distribute(&Notification::Add { obj: new, initial }, false),
            }
        }
        if self.processor.any_syncing() {
            for key in unchanged {
                if let Some(obj) = self.store.get_by_key(key.as_str()) {
                    let n = Notification::Update {
                        old: Arc::clone(&obj),
                        new: obj,
                    };
                    self.processor.distribute(&n, true);
                }
            }
        }
    }
}
