use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::fmt;
use std::sync::Arc;

use kinformer_core::{
    DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType, KnownObjects, ListPart, MetaObject,
    ObjectKey, Sink, WholeList,
};
use parking_lot::Mutex;

use crate::common::{
    Config, FifoBuilder, HashMap, HashSet, InFlight, Progress, Waiters, resolved, wake_all,
};
use crate::{Error, Item, Popped};

/// client-go's DeltaFIFO: the deltas of each key gathered in one list, keys popped in the
/// order they were first queued.
///
/// Each pop hands out one key's deltas, oldest first ([`Item::Deltas`]). A key queued
/// again while queued keeps its place in line; its new delta joins its list. Two
/// consecutive deletes of a key collapse into one, the real delete winning over a
/// tombstone. See the [crate docs](crate) for when to prefer the
/// [`InOrderFifo`](crate::InOrderFifo).
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::{DeltaType, MetaObject, Sink};
/// use kinformer_deltafifo::{DeltaFifo, FifoQueue, Item};
///
/// struct Obj(&'static str, u32);
/// impl MetaObject for Obj {
///     fn object_name(&self) -> Option<&str> { Some(self.0) }
///     fn object_namespace(&self) -> Option<&str> { None }
///     fn object_resource_version(&self) -> Option<&str> { None }
/// }
///
/// let fifo = DeltaFifo::new(None);
/// fifo.add(Arc::new(Obj("a", 1)))?;
/// fifo.add(Arc::new(Obj("b", 1)))?;
/// fifo.update(Arc::new(Obj("a", 2)))?; // joins a's list; a stays first in line
///
/// let popped = fifo.pop()?;
/// let Item::Deltas { key, deltas } = popped.item() else { unreachable!() };
/// assert_eq!(key.as_str(), "a");
/// let kinds: Vec<_> = deltas.iter().map(|d| d.kind).collect();
/// assert_eq!(kinds, [DeltaType::Added, DeltaType::Updated]);
/// drop(popped); // processed
/// assert_eq!(fifo.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DeltaFifo<K> {
    config: Config<K>,
    emit_replaced: bool,
    state: Mutex<State<K>>,
    /// The parts of a list until it ends.
    lists: WholeList<K>,
}

struct State<K> {
    /// Each queued key's deltas, oldest first; never empty.
    items: HashMap<ObjectKey, Vec<Delta<K>>>,
    /// Queued keys in line order; exactly the keys of `items`.
    queue: VecDeque<ObjectKey>,
    /// Tracked only with a known-objects view: without one, nothing consults the store.
    in_flight: InFlight<K>,
    progress: Progress,
    closed: bool,
    waiters: Waiters,
}

/// The options only a [`DeltaFifo`] has.
#[derive(Debug)]
pub struct DeltaFifoOptions {
    emit_replaced: bool,
}

impl Default for DeltaFifoOptions {
    fn default() -> Self {
        Self {
            emit_replaced: true,
        }
    }
}

/// Builds a [`DeltaFifo`]; see [`DeltaFifo::builder`] and, for the options both FIFOs
/// share, [`FifoBuilder`].
pub type DeltaFifoBuilder<K> = FifoBuilder<K, DeltaFifoOptions>;

impl<K> FifoBuilder<K, DeltaFifoOptions> {
    /// Whether replace queues [`DeltaType::Replaced`] (true, the default, as client-go's
    /// informers ask for) or [`DeltaType::Sync`] (client-go's `DeltaFIFOOptions` default,
    /// kept there for old consumers that cannot tell a relist from a resync).
    #[must_use]
    pub fn emit_replaced(mut self, emit: bool) -> Self {
        self.mode.emit_replaced = emit;
        self
    }

    /// The FIFO.
    pub fn build(self) -> DeltaFifo<K> {
        DeltaFifo {
            config: self.config,
            emit_replaced: self.mode.emit_replaced,
            lists: WholeList::default(),
            state: Mutex::new(State {
                items: HashMap::default(),
                queue: VecDeque::new(),
                in_flight: InFlight::default(),
                progress: Progress::default(),
                closed: false,
                waiters: Waiters::default(),
            }),
        }
    }
}

impl<K: MetaObject + Send + Sync + 'static> DeltaFifo<K> {
    /// A DeltaFIFO keyed by `namespace/name` that queues `Replaced` on replace, with an
    /// optional view of the informer's store (see [`FifoBuilder::known_objects`]).
    pub fn new(known: Option<Arc<dyn KnownObjects<K>>>) -> Self {
        let mut builder = Self::builder();
        builder.config.known = known;
        builder.build()
    }

    /// A builder keyed by `namespace/name`.
    pub fn builder() -> DeltaFifoBuilder<K> {
        FifoBuilder::keyed_by_name()
    }
}

impl<K: Send + Sync + 'static> DeltaFifo<K> {
    fn add_or_update(&self, kind: DeltaType, obj: Arc<K>) -> Result<(), Error> {
        let (key, obj) = self.config.prepare(obj)?;
        let mut st = self.state.lock();
        st.check_open()?;
        st.progress.mark_populated();
        st.push(key, Delta::new(kind, obj));
        let wakers = st.waiters.take();
        drop(st);
        wake_all(wakers);
        Ok(())
    }

    fn delete_is_news(&self, st: &State<K>, key: &ObjectKey) -> bool {
        if st.items.contains_key(key.as_str()) {
            // Even after a queued delete: the two collapse.
            return true;
        }
        let Some(known) = &self.config.known else {
            return false;
        };
        if st.in_flight.contains(key.as_str()) {
            return st.in_flight.settled_object(key.as_str()).is_some();
        }
        known.get_by_key(key.as_str()).is_some()
    }

    fn take(&self, st: &mut State<K>) -> Option<Popped<'_, K>> {
        let key = st.queue.pop_front()?;
        let Some(deltas) = st.items.remove(key.as_str()) else {
            // Unreachable: `queue` and `items` hold the same keys.
            tracing::error!(
                key = key.as_str(),
                "DeltaFIFO key queued without deltas; skipped"
            );
            return None;
        };
        if self.config.known.is_some()
            && let Some(newest) = deltas.last()
        {
            st.in_flight.acquire(&key, newest);
        }
        let (in_initial, token) = st.progress.popped(1);
        let item = Item::Deltas { key, deltas };
        Some(Popped::new(item, in_initial).with_done(self, token))
    }

    /// The queued keys in line order.
    pub fn queued_keys(&self) -> Vec<ObjectKey> {
        self.state.lock().queue.iter().cloned().collect()
    }

    /// The deltas queued for `key`, oldest first (objects shared, not copied).
    pub fn deltas_of(&self, key: &str) -> Option<Vec<Delta<K>>> {
        self.state.lock().items.get(key).cloned()
    }
}

fn tombstone<K>(key: ObjectKey, obj: Arc<K>) -> Delta<K> {
    Delta {
        kind: DeltaType::Deleted,
        object: DeltaObject::Tombstone(DeletedFinalStateUnknown { key, obj }),
    }
}

impl<K> State<K> {
    /// Writes after [`close`](crate::FifoQueue::close) are refused, so that a reflector feeding a
    /// stopped informer stops instead of filling the queue forever.
    fn check_open(&self) -> Result<(), Error> {
        if self.closed {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Appends a delta to the key's list, queueing the key if new, and collapses two
    /// consecutive deletes. The caller wakes the waiters once the lock is released.
    fn push(&mut self, key: ObjectKey, delta: Delta<K>) {
        match self.items.entry(key) {
            Entry::Occupied(mut e) => {
                let deltas = e.get_mut();
                deltas.push(delta);
                dedup_deletes(deltas);
            }
            Entry::Vacant(e) => {
                self.queue.push_back(e.key().clone());
                e.insert(vec![delta]);
            }
        }
    }
}

/// Two consecutive deletes are one deletion: keep the older, unless it is a tombstone and
/// the newer is not (a real delete knows the final state, a tombstone may be stale).
fn dedup_deletes<K>(deltas: &mut Vec<Delta<K>>) {
    let n = deltas.len();
    if n < 2 {
        return;
    }
    let (older, newer) = (&deltas[n - 2], &deltas[n - 1]);
    if older.kind != DeltaType::Deleted || newer.kind != DeltaType::Deleted {
        return;
    }
    if older.object.tombstone().is_some() {
        deltas.swap(n - 2, n - 1);
    }
    deltas.pop();
}

crate::common::fifo_traits!(DeltaFifo, queue);

/// The reflector's side of the FIFO. On any error nothing is queued. The errors are
/// [`kinformer_core::Error`]s, as every sink's: the key function's own error, a failed
/// transform as [`Other`](kinformer_core::Error::Other), and
/// [`Closed`](kinformer_core::Error::Closed) after [`close`](crate::FifoQueue::close).
impl<K: Send + Sync + 'static> Sink<K> for DeltaFifo<K> {
    /// Queues an `Added` delta.
    fn add(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(self.add_or_update(DeltaType::Added, obj)?)
    }

    /// Queues an `Updated` delta.
    fn update(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(self.add_or_update(DeltaType::Updated, obj)?)
    }

    /// Queues a `Deleted` delta, unless the key is neither queued nor known (the
    /// deletion was already delivered, by a relist's tombstone for instance): then it is
    /// dropped.
    ///
    /// The transform runs under the lock here, and only when the delete is kept, so that
    /// a dropped delete is never transformed (as in client-go).
    fn delete(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        let key = self.config.key_of(&obj)?;
        let mut st = self.state.lock();
        st.check_open()?;
        st.progress.mark_populated();
        if !self.delete_is_news(&st, &key) {
            return Ok(());
        }
        let obj = self.config.transform(obj)?;
        st.push(key, Delta::new(DeltaType::Deleted, obj));
        let wakers = st.waiters.take();
        drop(st);
        wake_all(wakers);
        Ok(())
    }

    /// A full list, gathered from its parts ([`ListPart`]) until it ends, as client-go
    /// takes it whole: then queues `Replaced` (or `Sync`, see
    /// [`DeltaFifoBuilder::emit_replaced`]) for every listed object (unchanged ones read
    /// from the cache, left out when it no longer holds them), then a `Deleted`
    /// tombstone for every key queued or known but absent from the list. A tombstone
    /// carries the key's newest queued object, else the known one; a known key the store
    /// no longer holds by the time it is read gets none (its deletion was delivered).
    ///
    /// The first replace before any add, update or delete is the initial list:
    /// [`has_synced`](crate::FifoQueue::has_synced) waits for its entries, tombstones included.
    ///
    /// Tombstones for queued keys go in line order, then for known keys in the order the
    /// view lists them (client-go uses map order for the former).
    fn replace(&self, part: ListPart<K>) -> Result<(), kinformer_core::Error> {
        self.state.lock().check_open()?;
        // A DeltaFIFO does not track versions.
        let Some((list, _resource_version)) = self.lists.gather(part) else {
            return Ok(());
        };
        let list = resolved(self.config.prepare_list(list)?);
        let kind = if self.emit_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        };
        let mut st = self.state.lock();
        st.check_open()?;
        let mut listed: HashSet<ObjectKey> =
            HashSet::with_capacity_and_hasher(list.len(), Default::default());
        for (key, obj) in list {
            listed.insert(key.clone());
            st.push(key, Delta::new(kind, obj));
        }

        let mut tombstones = 0;
        // Queued keys absent from the list: the newest queued object.
        let absent: Vec<ObjectKey> = st
            .queue
            .iter()
            .filter(|k| !listed.contains(k.as_str()))
            .cloned()
            .collect();
        for key in absent {
            let newest = st
                .items
                .get(key.as_str())
                .and_then(|d| d.last())
                .map(|d| Arc::clone(d.object.object()));
            if let Some(obj) = newest {
                tombstones += 1;
                st.push(key.clone(), tombstone(key, obj));
            }
        }

        if let Some(known) = &self.config.known {
            // In-flight keys absent from the list and not queued again: what the store
            // holds once they are processed.
            let settled: Vec<(ObjectKey, Arc<K>)> = st
                .in_flight
                .iter()
                .filter(|(k, _)| !listed.contains(k.as_str()) && !st.items.contains_key(k.as_str()))
                .filter_map(|(k, _)| {
                    let obj = st.in_flight.settled_object(k.as_str())?;
                    Some((k.clone(), Arc::clone(obj)))
                })
                .collect();
            for (key, obj) in settled {
                tombstones += 1;
                st.push(key.clone(), tombstone(key, obj));
            }
            // Known keys absent from the list, neither queued nor in flight.
            for key in known.list_keys() {
                if listed.contains(key.as_str())
                    || st.items.contains_key(key.as_str())
                    || st.in_flight.contains(key.as_str())
                {
                    continue;
                }
                match known.get_by_key(key.as_str()) {
                    Some(obj) => {
                        tombstones += 1;
                        st.push(key.clone(), tombstone(key, obj));
                    }
                    None => tracing::debug!(
                        key = key.as_str(),
                        "known key gone from the store during replace; no tombstone needed"
                    ),
                }
            }
        }

        st.progress.first_replace(listed.len() + tombstones);
        let wakers = st.waiters.take();
        drop(st);
        wake_all(wakers);
        Ok(())
    }

    /// The periodic resync: queues `Sync` with the stored object for every known key
    /// that has nothing queued (a queued delta is newer than the store, and a `Sync` of
    /// the stored object after it would roll the object back). Does nothing without a
    /// known-objects view.
    fn resync(&self) -> Result<(), kinformer_core::Error> {
        let mut st = self.state.lock();
        st.check_open()?;
        let Some(known) = &self.config.known else {
            return Ok(());
        };
        let settled: Vec<(ObjectKey, Arc<K>)> = st
            .in_flight
            .iter()
            .filter(|(k, _)| !st.items.contains_key(k.as_str()))
            .filter_map(|(k, _)| {
                let obj = st.in_flight.settled_object(k.as_str())?;
                Some((k.clone(), Arc::clone(obj)))
            })
            .collect();
        for (key, obj) in settled {
            st.push(key, Delta::new(DeltaType::Sync, obj));
        }
        for key in known.list_keys() {
            if st.items.contains_key(key.as_str()) || st.in_flight.contains(key.as_str()) {
                continue;
            }
            match known.get_by_key(key.as_str()) {
                Some(obj) => st.push(key, Delta::new(DeltaType::Sync, obj)),
                None => tracing::debug!(
                    key = key.as_str(),
                    "known key gone from the store during resync; nothing to sync"
                ),
            }
        }
        let wakers = st.waiters.take();
        drop(st);
        wake_all(wakers);
        Ok(())
    }

    /// The watch reached `resource_version`. A DeltaFIFO does not track versions: this
    /// only checks that the FIFO is open.
    fn bookmark(&self, resource_version: &str) -> Result<(), kinformer_core::Error> {
        let _ = resource_version;
        Ok(self.state.lock().check_open()?)
    }
}

impl<K> fmt::Debug for DeltaFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("DeltaFifo")
            .field("queued_keys", &st.queue.len())
            .field("closed", &st.closed)
            .field("has_synced", &st.progress.has_synced())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn del(obj: u32) -> Delta<u32> {
        Delta::new(DeltaType::Deleted, Arc::new(obj))
    }
    fn tomb(obj: u32) -> Delta<u32> {
        tombstone(ObjectKey::parse("k").unwrap(), Arc::new(obj))
    }
    fn describe(d: &[Delta<u32>]) -> Vec<String> {
        d.iter()
            .map(|d| {
                let t = if d.object.tombstone().is_some() {
                    "T"
                } else {
                    ""
                };
                format!("{}{}{}", d.kind, t, d.object.object())
            })
            .collect()
    }

    #[test]
    fn dedup_keeps_the_real_delete_over_a_tombstone_either_way() {
        let mut d = vec![del(1), tomb(2)];
        dedup_deletes(&mut d);
        assert_eq!(describe(&d), ["Deleted1"]);
        let mut d = vec![tomb(1), del(2)];
        dedup_deletes(&mut d);
        assert_eq!(describe(&d), ["Deleted2"]);
        let mut d = vec![tomb(1), tomb(2)];
        dedup_deletes(&mut d);
        assert_eq!(describe(&d), ["DeletedT2"]);
        let mut d = vec![del(1), del(2)];
        dedup_deletes(&mut d);
        assert_eq!(describe(&d), ["Deleted1"]);
        let mut d = vec![Delta::new(DeltaType::Added, Arc::new(1)), del(2)];
        dedup_deletes(&mut d);
        assert_eq!(describe(&d), ["Added1", "Deleted2"]);
    }
}
