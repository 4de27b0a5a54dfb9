//! What both FIFOs share: the builder, the key function and transform, initial-list
//! bookkeeping, the waiting poppers and the in-flight keys.

use std::sync::Arc;
use std::task::Waker;

use kinformer_core::{
    BoxError, Delta, DeltaType, KeyFunc, KnownObjects, Listed, MetaObject, ObjectKey, TransformFn,
    meta_namespace_key,
};

use crate::Error;

/// The FIFOs' maps and sets: std's, with foldhash's seeded hasher.
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// See [`HashMap`].
pub(crate) type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// Builds a FIFO: the options both FIFOs share (key function, known-objects view,
/// transform) and those of the FIFO `M` stands for. Made by [`DeltaFifo::builder`] or
/// [`InOrderFifo::builder`] (keyed by `namespace/name`), or by
/// [`with_key_fn`](Self::with_key_fn); see [`DeltaFifoBuilder`] and [`InOrderFifoBuilder`]
/// for the options of each.
///
/// [`DeltaFifo::builder`]: crate::DeltaFifo::builder
/// [`InOrderFifo::builder`]: crate::InOrderFifo::builder
/// [`DeltaFifoBuilder`]: crate::DeltaFifoBuilder
/// [`InOrderFifoBuilder`]: crate::InOrderFifoBuilder
pub struct FifoBuilder<K, M> {
    pub(crate) config: Config<K>,
    pub(crate) mode: M,
}

impl<K: MetaObject + 'static, M: Default> FifoBuilder<K, M> {
    /// A builder keyed by `namespace/name` (kinformer-core's [`meta_namespace_key`]).
    pub(crate) fn keyed_by_name() -> Self {
        Self {
            config: Config::new(Arc::new(|obj: &K| meta_namespace_key(obj))),
            mode: M::default(),
        }
    }
}

impl<K, M: Default> FifoBuilder<K, M> {
    /// A builder with this key function, for object types without [`MetaObject`], or keys
    /// other than `namespace/name`.
    pub fn with_key_fn(
        key_fn: impl Fn(&K) -> Result<ObjectKey, kinformer_core::Error> + Send + Sync + 'static,
    ) -> Self {
        Self {
            config: Config::new(Arc::new(key_fn)),
            mode: M::default(),
        }
    }
}

impl<K, M> FifoBuilder<K, M> {
    /// Replaces the key function.
    #[must_use]
    pub fn key_fn(
        mut self,
        key_fn: impl Fn(&K) -> Result<ObjectKey, kinformer_core::Error> + Send + Sync + 'static,
    ) -> Self {
        self.config.key_fn = Arc::new(key_fn);
        self
    }

    /// The read-only view of the informer's store. A DeltaFIFO reads it on delete (is the
    /// key known?), replace (tombstones for known keys absent from the list) and resync
    /// (what to re-deliver); a per-object in-order FIFO on replace and resync (client-go
    /// requires it there; here it stays optional); an atomic in-order FIFO never reads the
    /// store and refuses one. Without it, delete only knows queued keys, replace only
    /// tombstones queued keys, and resync does nothing.
    #[must_use]
    pub fn known_objects(mut self, known: Arc<dyn KnownObjects<K>>) -> Self {
        self.config.known = Some(known);
        self
    }

    /// Runs `transform` once on every incoming object, before it is queued
    /// (kinformer-core's [`TransformFn`]). It never sees a `Sync` delta's object (taken
    /// from the store, already transformed) nor a tombstone's; it runs on the reflector's
    /// task, outside the FIFO's lock, except for a DeltaFIFO delete (see
    /// its [`Sink::delete`](kinformer_core::Sink::delete)); keep it fast. An informer
    /// transforms in its reflector instead, so its FIFO gets none.
    #[must_use]
    pub fn transform(
        mut self,
        transform: impl Fn(Arc<K>) -> Result<Arc<K>, BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.config.transform = Some(Arc::new(transform));
        self
    }
}

/// Key function, transform and known-objects view, as configured.
pub(crate) struct Config<K> {
    pub(crate) key_fn: KeyFunc<K>,
    pub(crate) transform: Option<TransformFn<K>>,
    pub(crate) known: Option<Arc<dyn KnownObjects<K>>>,
}

impl<K> Config<K> {
    fn new(key_fn: KeyFunc<K>) -> Self {
        Self {
            key_fn,
            transform: None,
            known: None,
        }
    }

    pub(crate) fn key_of(&self, obj: &K) -> Result<ObjectKey, Error> {
        (self.key_fn)(obj).map_err(Error::Key)
    }

    pub(crate) fn transform(&self, obj: Arc<K>) -> Result<Arc<K>, Error> {
        match &self.transform {
            Some(t) => t(obj).map_err(Error::Transform),
            None => Ok(obj),
        }
    }

    /// The key of an incoming object (from the object as it arrived, as client-go does),
    /// then the object transformed.
    pub(crate) fn prepare(&self, obj: Arc<K>) -> Result<(ObjectKey, Arc<K>), Error> {
        let key = self.key_of(&obj)?;
        Ok((key, self.transform(obj)?))
    }

    /// Keys and transforms the items of a list before anything is queued, so that a bad
    /// object leaves the queue as it was. Unchanged objects keep the key they came with
    /// and are not transformed again (the cache holds them transformed).
    pub(crate) fn prepare_list(
        &self,
        items: Vec<Listed<K>>,
    ) -> Result<Vec<(ObjectKey, Listed<K>)>, Error> {
        items
            .into_iter()
            .map(|item| match item {
                Listed::Object(obj) => {
                    let (key, obj) = self.prepare(obj)?;
                    Ok((key, Listed::Object(obj)))
                }
                Listed::Unchanged(u) => Ok((u.key().clone(), Listed::Unchanged(u))),
            })
            .collect()
    }
}

/// Every object of a prepared list, in list order, unchanged ones read from the cache (one
/// the cache no longer holds is left out: deleted meanwhile).
pub(crate) fn resolved<K>(list: Vec<(ObjectKey, Listed<K>)>) -> Vec<(ObjectKey, Arc<K>)> {
    list.into_iter()
        .filter_map(|(key, item)| Some((key, item.into_object()?)))
        .collect()
}

/// Initial-list bookkeeping (client-go's `populated` / `initialPopulationCount`), split in
/// two counts because processing happens outside the lock: `unpopped` decides
/// `is_in_initial_list` at pop time, `unfinished` decides `has_synced` once processing is
/// done.
#[derive(Default)]
pub(crate) struct Progress {
    populated: bool,
    unpopped: usize,
    unfinished: usize,
    /// Entries popped before the first replace ended (parts of a list taken in parts) and
    /// not yet processed: the first replace counts them as unfinished.
    early: usize,
    synced: bool,
}

impl Progress {
    /// An add, update or delete came first: there is no initial list.
    pub(crate) fn mark_populated(&mut self) {
        self.populated = true;
        self.check();
    }

    /// The first replace queued `count` entries.
    pub(crate) fn first_replace(&mut self, count: usize) {
        if !self.populated {
            self.populated = true;
            self.unpopped = count;
            self.unfinished = count + std::mem::take(&mut self.early);
            self.check();
        }
    }

    /// Whether the first list (or a first add, update or delete) has come.
    pub(crate) fn is_populated(&self) -> bool {
        self.populated
    }

    pub(crate) fn has_synced(&self) -> bool {
        self.synced
    }

    /// How many entries of the initial list are still to be popped (0 once they all were,
    /// or when there was none).
    pub(crate) fn initial_left(&self) -> usize {
        self.unpopped
    }

    /// A pop of `n` entries: returns `(is_in_initial_list, token)`, the token being how
    /// many of them count towards the initial list, to give back to [`Progress::done`].
    pub(crate) fn popped(&mut self, n: usize) -> (bool, usize) {
        if !self.populated {
            // Part of a list still arriving: processed before `has_synced` can turn true.
            self.early += n;
            return (true, n);
        }
        let in_initial = self.unpopped > 0;
        let counted = n.min(self.unpopped);
        self.unpopped -= counted;
        (in_initial, counted)
    }

    pub(crate) fn done(&mut self, counted: usize) {
        if self.populated {
            self.unfinished = self.unfinished.saturating_sub(counted);
            self.check();
        } else {
            self.early = self.early.saturating_sub(counted);
        }
    }

    fn check(&mut self) {
        if self.populated && self.unfinished == 0 {
            self.synced = true;
        }
    }
}

/// Wakers of pops waiting on an empty queue.
#[derive(Default)]
pub(crate) struct Waiters(Vec<Waker>);

impl Waiters {
    pub(crate) fn register(&mut self, waker: &Waker) {
        if !self.0.iter().any(|w| w.will_wake(waker)) {
            self.0.push(waker.clone());
        }
    }

    /// Takes the wakers to wake once the lock is released (wakers may run arbitrary code).
    pub(crate) fn take(&mut self) -> Vec<Waker> {
        if self.0.is_empty() {
            Vec::new()
        } else {
            std::mem::take(&mut self.0)
        }
    }
}

pub(crate) fn wake_all(wakers: Vec<Waker>) {
    for w in wakers {
        w.wake();
    }
}

/// Keys popped and not yet processed, with the newest delta popped for each.
///
/// While an item is processed outside the lock, the store may or may not hold its new
/// state yet. Replace, resync and delete therefore decide about an in-flight key from
/// its newest popped delta, which is what the store holds once processing is done: they
/// behave as if processing had finished first, as client-go's processing under the lock
/// guarantees.
pub(crate) struct InFlight<K> {
    keys: HashMap<ObjectKey, (usize, Delta<K>)>,
}

impl<K> Default for InFlight<K> {
    fn default() -> Self {
        Self {
            keys: HashMap::default(),
        }
    }
}

impl<K> InFlight<K> {
    pub(crate) fn acquire(&mut self, key: &ObjectKey, newest: &Delta<K>) {
        let entry = self
            .keys
            .entry(key.clone())
            .or_insert_with(|| (0, newest.clone()));
        entry.0 += 1;
        entry.1 = newest.clone();
    }

    pub(crate) fn release(&mut self, key: &ObjectKey) {
        if let Some(entry) = self.keys.get_mut(key.as_str()) {
            entry.0 -= 1;
            if entry.0 == 0 {
                self.keys.remove(key.as_str());
            }
        }
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        self.keys.contains_key(key)
    }

    /// The object the store holds for an in-flight key once processing is done: `None`
    /// for a key that is not in flight or whose newest delta deletes it.
    pub(crate) fn settled_object(&self, key: &str) -> Option<&Arc<K>> {
        let (_, newest) = self.keys.get(key)?;
        (newest.kind != DeltaType::Deleted).then(|| newest.object.object())
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Delta<K>)> {
        self.keys.iter().map(|(k, (_, d))| (k, d))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The trait glue both FIFOs share: `PopDone`, `PollPop` and `FifoQueue`. Each FIFO's state has the
/// same bookkeeping fields (`in_flight`, `progress`, `closed`, `waiters`, and `$queue`,
/// whose length is the FIFO's) and a `take` that pops the next item under the lock. Each
/// FIFO implements `Sink` itself.
macro_rules! fifo_traits {
    ($fifo:ident, $queue:ident) => {
        impl<K: Send + Sync + 'static> $crate::PopDone<K> for $fifo<K> {
            fn pop_done(&self, item: &$crate::Item<K>, token: usize) {
                let mut st = self.state.lock();
                if !st.in_flight.is_empty() {
                    for key in item.keys() {
                        st.in_flight.release(key);
                    }
                }
                st.progress.done(token);
            }
        }

        impl<K: Send + Sync + 'static> $crate::queue::PollPop<K> for $fifo<K> {
            fn poll_pop(
                &self,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Result<$crate::Popped<'_, K>, $crate::Error>> {
                let mut st = self.state.lock();
                if let Some(p) = self.take(&mut st) {
                    return std::task::Poll::Ready(Ok(p));
                }
                if st.closed {
                    return std::task::Poll::Ready(Err($crate::Error::Closed));
                }
                st.waiters.register(cx.waker());
                std::task::Poll::Pending
            }
        }

        impl<K: Send + Sync + 'static> $crate::FifoQueue<K> for $fifo<K> {
            fn pop_async(&self) -> $crate::PopFuture<'_, K> {
                $crate::PopFuture::native(self)
            }
            fn try_pop(&self) -> Result<Option<$crate::Popped<'_, K>>, $crate::Error> {
                let mut st = self.state.lock();
                match self.take(&mut st) {
                    Some(p) => Ok(Some(p)),
                    None if st.closed => Err($crate::Error::Closed),
                    None => Ok(None),
                }
            }
            fn has_synced(&self) -> bool {
                self.state.lock().progress.has_synced()
            }
            fn close(&self) {
                let mut st = self.state.lock();
                st.closed = true;
                let wakers = st.waiters.take();
                drop(st);
                $crate::common::wake_all(wakers);
            }
            fn is_closed(&self) -> bool {
                self.state.lock().closed
            }
            fn len(&self) -> usize {
                self.state.lock().$queue.len()
            }
        }
    };
}
pub(crate) use fifo_traits;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_without_a_list_is_synced_at_the_first_write() {
        let mut p = Progress::default();
        assert!(!p.has_synced());
        assert_eq!(p.popped(1), (true, 1), "popped before any write: initial");
        p.mark_populated();
        assert!(p.has_synced());
        assert_eq!(p.popped(3), (false, 0));
    }

    #[test]
    fn progress_counts_pops_then_completions() {
        let mut p = Progress::default();
        p.first_replace(3);
        assert_eq!(p.popped(2), (true, 2));
        assert_eq!(p.popped(5), (true, 1));
        assert_eq!(p.popped(1), (false, 0), "past the initial list");
        p.done(2);
        assert!(!p.has_synced());
        p.done(1);
        assert!(p.has_synced());
        p.first_replace(10);
        assert!(p.has_synced(), "only the first replace counts");
    }

    /// Parts of a list taken in parts are popped before the list ends: the sync waits for
    /// them too, even when they are still being processed as the list ends.
    #[test]
    fn progress_waits_for_what_was_popped_before_the_list_ended() {
        let mut p = Progress::default();
        assert_eq!(p.popped(2), (true, 2));
        assert_eq!(p.popped(1), (true, 1));
        p.done(1);
        p.first_replace(3);
        assert_eq!(p.popped(3), (true, 3));
        p.done(3);
        assert!(
            !p.has_synced(),
            "two entries popped before the end are unfinished"
        );
        p.done(2);
        assert!(p.has_synced());
    }

    #[test]
    fn in_flight_counts_pops_of_one_key() {
        let mut f = InFlight::<u32>::default();
        let k = ObjectKey::parse("a").unwrap();
        f.acquire(&k, &Delta::new(DeltaType::Added, Arc::new(1)));
        f.acquire(&k, &Delta::new(DeltaType::Deleted, Arc::new(2)));
        assert!(f.settled_object("a").is_none(), "newest is a delete");
        f.release(&k);
        assert!(f.contains("a"));
        f.release(&k);
        assert!(f.is_empty());
        f.release(&k);
    }
}
