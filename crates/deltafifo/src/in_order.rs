use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use kinformer_core::{
    DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType, KnownObjects, ListPart, Listed,
    MetaObject, ObjectKey, Sink,
};
use parking_lot::Mutex;

use crate::common::{
    Config, FifoBuilder, HashMap, HashSet, InFlight, Progress, Waiters, resolved, wake_all,
};
use crate::{Error, Item, Popped};

/// client-go's largest batch (`defaultBatchSize`).
pub const DEFAULT_BATCH_SIZE: usize = 1000;

/// client-go's in-order FIFO (`RealFIFO`): one entry per event, popped in global arrival
/// order, nothing coalesced.
///
/// Two modes:
/// - **per object** ([`InOrderFifo::new`]): a replace queues a `Deleted` tombstone for
///   every queued or known key absent from the list, *then* `Replaced` for every listed
///   object; a resync queues `Sync` per known key with nothing queued.
/// - **atomic** ([`InOrderFifo::atomic`]): a replace queues one [`Item::ReplacedAll`] and a
///   resync one [`Item::SyncAll`], which the informer applies as one store transaction;
///   the FIFO never reads the store. This is client-go v1.36's default.
///
/// A pop takes up to [`batch_size`](InOrderFifoBuilder::batch_size) consecutive events on
/// distinct keys ([`Item::Batch`], or [`Item::Deltas`] for one), never reaching past the
/// end of the initial list; atomic entries pop alone.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::{DeltaType, ListPart, MetaObject, Sink};
/// use kinformer_deltafifo::{FifoQueue, InOrderFifo, Item};
///
/// struct Obj(&'static str);
/// impl MetaObject for Obj {
///     fn object_name(&self) -> Option<&str> { Some(self.0) }
///     fn object_namespace(&self) -> Option<&str> { Some("ns") }
///     fn object_resource_version(&self) -> Option<&str> { None }
/// }
///
/// let fifo = InOrderFifo::atomic();
/// fifo.replace(ListPart::whole(vec![Arc::new(Obj("a")), Arc::new(Obj("b"))], "10"))?;
/// fifo.update(Arc::new(Obj("a")))?;
///
/// let first = fifo.pop()?;
/// let Item::ReplacedAll { objects, resource_version, .. } = first.item() else { unreachable!() };
/// assert_eq!((objects.len(), resource_version.as_str()), (2, "10"));
/// assert!(first.is_in_initial_list());
/// drop(first);
/// assert!(fifo.has_synced());
///
/// let Item::Deltas { key, deltas } = fifo.pop()?.finish() else { unreachable!() };
/// assert_eq!((key.as_str(), deltas[0].kind), ("ns/a", DeltaType::Updated));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct InOrderFifo<K> {
    config: Config<K>,
    atomic: bool,
    emit_bookmarks: bool,
    batch_size: usize,
    state: Mutex<State<K>>,
}

enum Entry<K> {
    Event(ObjectKey, Delta<K>),
    ReplacedAll {
        objects: Vec<(ObjectKey, Arc<K>)>,
        unchanged: Vec<ObjectKey>,
        resource_version: String,
    },
    SyncAll,
    Bookmark(String),
}

/// Below this many slots a drained queue keeps its capacity.
const KEEP_CAPACITY: usize = 1024;

/// Gives back what a burst grew the queue to once it has drained to a quarter: a queue
/// keeps its peak capacity otherwise (tens of bytes an entry: 100,000 events queued
/// while a slow cache caught up would hold 8 MB for the life of the informer). Halving
/// only below a quarter keeps the copies amortized.
fn shrink_after_burst<T>(entries: &mut VecDeque<T>) {
    let cap = entries.capacity();
    if cap > KEEP_CAPACITY && entries.len() < cap / 4 {
        entries.shrink_to((entries.len() * 2).max(KEEP_CAPACITY));
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
}

struct State<K> {
    entries: VecDeque<Entry<K>>,
    /// Tracked only with a known-objects view: without one, nothing consults the store.
    in_flight: InFlight<K>,
    progress: Progress,
    parts: Parts,
    /// The list gathered until it ends (every list but the first, see `replace`).
    gathered: Vec<(ObjectKey, Listed<K>)>,
    closed: bool,
    waiters: Waiters,
}

/// Where the first list, taken in parts, stands (see the in-order FIFO's [`Sink::replace`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Parts {
    /// No list in parts under way.
    #[default]
    None,
    /// A list in parts begun; `queued`: some of its parts are queued (or applied).
    Open { queued: bool },
    /// A list in parts that queued parts was dropped for another: the next list comes
    /// whole, so that its replace reconciles against everything those parts left.
    Spoiled,
}

/// The options only an [`InOrderFifo`] has.
#[derive(Debug)]
pub struct InOrderFifoOptions {
    atomic: bool,
    emit_bookmarks: bool,
    batch_size: usize,
}

impl Default for InOrderFifoOptions {
    fn default() -> Self {
        Self {
            atomic: false,
            emit_bookmarks: false,
            batch_size: DEFAULT_BATCH_SIZE,
        }
    }
}

/// Builds an [`InOrderFifo`]; see [`InOrderFifo::builder`] and, for the options both FIFOs
/// share, [`FifoBuilder`].
pub type InOrderFifoBuilder<K> = FifoBuilder<K, InOrderFifoOptions>;

impl<K> FifoBuilder<K, InOrderFifoOptions> {
    /// Atomic mode: replace queues one [`Item::ReplacedAll`], resync one [`Item::SyncAll`].
    #[must_use]
    pub fn atomic(mut self, atomic: bool) -> Self {
        self.mode.atomic = atomic;
        self
    }

    /// Atomic mode only: queue every bookmark as an [`Item::Bookmark`], in line with the
    /// events (what client-go's informer asks for). Off by default: bookmarks are
    /// ignored.
    #[must_use]
    pub fn emit_bookmarks(mut self, emit: bool) -> Self {
        self.mode.emit_bookmarks = emit;
        self
    }

    /// The largest number of events one pop hands out (default
    /// [`DEFAULT_BATCH_SIZE`]). 1 makes every pop a single event, as client-go's `Pop`.
    #[must_use]
    pub fn batch_size(mut self, n: usize) -> Self {
        self.mode.batch_size = n;
        self
    }

    /// The FIFO.
    ///
    /// # Errors
    /// [`Error::Config`] for a known-objects view in atomic mode (an atomic FIFO never
    /// reads the store: the informer reconciles the list against it), bookmarks without
    /// atomic mode (per-object replace and resync entries would overtake them), or a batch
    /// size of 0.
    pub fn build(self) -> Result<InOrderFifo<K>, Error> {
        if self.mode.atomic && self.config.known.is_some() {
            return Err(Error::Config(
                "an atomic in-order FIFO takes no known-objects view",
            ));
        }
        if self.mode.emit_bookmarks && !self.mode.atomic {
            return Err(Error::Config("bookmarks are queued only in atomic mode"));
        }
        if self.mode.batch_size == 0 {
            return Err(Error::Config("the batch size must be at least 1"));
        }
        Ok(self.assemble())
    }

    /// The FIFO, without the checks of [`build`](Self::build): for options known good.
    fn assemble(self) -> InOrderFifo<K> {
        InOrderFifo {
            config: self.config,
            atomic: self.mode.atomic,
            emit_bookmarks: self.mode.emit_bookmarks,
            batch_size: self.mode.batch_size,
            state: Mutex::new(State {
                entries: VecDeque::new(),
                in_flight: InFlight::default(),
                progress: Progress::default(),
                parts: Parts::None,
                gathered: Vec::new(),
                closed: false,
                waiters: Waiters::default(),
            }),
        }
    }
}

impl<K: MetaObject + Send + Sync + 'static> InOrderFifo<K> {
    /// A per-object in-order FIFO keyed by `namespace/name`, with an optional view of the
    /// informer's store (see [`FifoBuilder::known_objects`]), popping batches of up to
    /// [`DEFAULT_BATCH_SIZE`].
    pub fn new(known: Option<Arc<dyn KnownObjects<K>>>) -> Self {
        let mut builder = Self::builder();
        builder.config.known = known;
        builder.assemble()
    }

    /// An atomic in-order FIFO keyed by `namespace/name` (bookmarks ignored), popping
    /// batches of up to [`DEFAULT_BATCH_SIZE`].
    pub fn atomic() -> Self {
        Self::builder().atomic(true).assemble()
    }

    /// A builder keyed by `namespace/name`, per-object mode, batches of
    /// [`DEFAULT_BATCH_SIZE`].
    pub fn builder() -> InOrderFifoBuilder<K> {
        FifoBuilder::keyed_by_name()
    }
}

impl<K: Send + Sync + 'static> InOrderFifo<K> {
    fn event(&self, kind: DeltaType, obj: Arc<K>) -> Result<(), Error> {
        let (key, obj) = self.config.prepare(obj)?;
        let mut st = self.state.lock();
        st.check_open()?;
        st.progress.mark_populated();
        st.entries
            .push_back(Entry::Event(key, Delta::new(kind, obj)));
        let wakers = st.waiters.take();
        drop(st);
        wake_all(wakers);
        Ok(())
    }

    fn reconcile_locked(&self, st: &mut State<K>, list: Vec<(ObjectKey, Arc<K>)>) {
        let mut listed: HashSet<&str> =
            HashSet::with_capacity_and_hasher(list.len(), Default::default());
        listed.extend(list.iter().map(|(k, _)| k.as_str()));
        // The newest event per key, in-flight ones first (they are older than the queue),
        // and the keys in order of first sight.
        let mut order: Vec<&ObjectKey> = Vec::new();
        let mut newest: HashMap<&str, &Delta<K>> = HashMap::default();
        let queued = st.entries.iter().filter_map(|e| match e {
            Entry::Event(k, d) => Some((k, d)),
            _ => None,
        });
        for (key, delta) in st.in_flight.iter().chain(queued) {
            if newest.insert(key.as_str(), delta).is_none() {
                order.push(key);
            }
        }
        let mut tombstones: Vec<(ObjectKey, Arc<K>)> = Vec::new();
        for key in order {
            if listed.contains(key.as_str()) {
                continue;
            }
            let Some(delta) = newest.get(key.as_str()) else {
                continue;
            };
            if delta.kind == DeltaType::Deleted {
                continue;
            }
            tombstones.push((key.clone(), Arc::clone(delta.object.object())));
        }
        if let Some(known) = &self.config.known {
            for key in known.list_keys() {
                if listed.contains(key.as_str()) || newest.contains_key(key.as_str()) {
                    continue;
                }
                match known.get_by_key(key.as_str()) {
                    Some(obj) => tombstones.push((key, obj)),
                    None => tracing::debug!(
                        key = key.as_str(),
                        "known key gone from the store during replace; no tombstone needed"
                    ),
                }
            }
        }
        drop(listed);
        for (key, obj) in tombstones {
            let delta = Delta {
                kind: DeltaType::Deleted,
                object: DeltaObject::Tombstone(DeletedFinalStateUnknown {
                    key: key.clone(),
                    obj,
                }),
            };
            st.entries.push_back(Entry::Event(key, delta));
        }
        for (key, obj) in list {
            st.entries
                .push_back(Entry::Event(key, Delta::new(DeltaType::Replaced, obj)));
        }
    }

    fn push_alone(&self, entry: Entry<K>) -> Result<(), Error> {
        let mut st = self.state.lock();
        st.check_open()?;
        st.entries.push_back(entry);
        let wakers = st.waiters.take();
        drop(st);
        wake_all(wakers);
        Ok(())
    }

    fn take(&self, st: &mut State<K>) -> Option<Popped<'_, K>> {
        let first = st.entries.front()?;
        let n = if matches!(first, Entry::Event(..)) {
            self.batch_len(st)
        } else {
            1
        };
        let (in_initial, token) = st.progress.popped(n);
        let track = self.config.known.is_some();
        let item = if n == 1 {
            match st.entries.pop_front()? {
                Entry::Event(key, delta) => {
                    if track {
                        st.in_flight.acquire(&key, &delta);
                    }
                    Item::Deltas {
                        key,
                        deltas: vec![delta],
                    }
                }
                Entry::ReplacedAll {
                    objects,
                    unchanged,
                    resource_version,
                } => Item::ReplacedAll {
                    objects,
                    unchanged,
                    resource_version,
                },
                Entry::SyncAll => Item::SyncAll,
                Entry::Bookmark(resource_version) => Item::Bookmark { resource_version },
            }
        } else {
            let mut events = Vec::with_capacity(n);
            for entry in st.entries.drain(..n) {
                if let Entry::Event(key, delta) = entry {
                    events.push((key, delta));
                }
            }
            if track {
                for (key, delta) in &events {
                    st.in_flight.acquire(key, delta);
                }
            }
            Item::Batch(events)
        };
        shrink_after_burst(&mut st.entries);
        Some(Popped::new(item, in_initial).with_done(self, token))
    }

    /// How many events from the front make one batch: at most `batch_size`, only events,
    /// distinct keys, and not past the end of the initial list.
    fn batch_len(&self, st: &State<K>) -> usize {
        let mut limit = self.batch_size.min(st.entries.len());
        if st.progress.initial_left() > 0 {
            limit = limit.min(st.progress.initial_left());
        }
        if limit <= 1 {
            return 1;
        }
        let mut seen: HashSet<&str> = HashSet::with_capacity_and_hasher(limit, Default::default());
        let mut n = 0;
        for entry in st.entries.iter().take(limit) {
            match entry {
                Entry::Event(key, _) if seen.insert(key.as_str()) => n += 1,
                _ => break,
            }
        }
        n
    }

    /// Whether the FIFO is in atomic mode.
    pub fn is_atomic(&self) -> bool {
        self.atomic
    }
}

crate::common::fifo_traits!(InOrderFifo, entries);

/// The reflector's side of the FIFO. On any error nothing is queued. The errors are
/// [`kinformer_core::Error`]s, as every sink's: the key function's own error, a failed
/// transform as [`Other`](kinformer_core::Error::Other), and
/// [`Closed`](kinformer_core::Error::Closed) after [`close`](crate::FifoQueue::close).
impl<K: Send + Sync + 'static> Sink<K> for InOrderFifo<K> {
    /// Queues an `Added` event.
    fn add(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(self.event(DeltaType::Added, obj)?)
    }

    /// Queues an `Updated` event.
    fn update(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(self.event(DeltaType::Updated, obj)?)
    }

    /// Queues a `Deleted` event. Unlike a DeltaFIFO, and like client-go's RealFIFO, a
    /// delete of a key neither queued nor known is queued too: the informer's delete of
    /// an absent key is harmless, and no event is ever dropped.
    fn delete(&self, obj: Arc<K>) -> Result<(), kinformer_core::Error> {
        Ok(self.event(DeltaType::Deleted, obj)?)
    }

    /// A full list, or a part of one ([`ListPart`]).
    ///
    /// The first list, until it ends, is queued a part at a time as it comes (rule 52): a
    /// `Replaced` event per object, in both modes, so an informer caches objects while the
    /// rest of the list still arrives; the part that ends it queues the rest the same way
    /// and starts the count for [`has_synced`](crate::FifoQueue::has_synced), which waits for every
    /// part. A first list that queued no part before its end (it came whole) is a plain
    /// replace, below. A list started again after one of its parts was queued (the
    /// reflector lost the list midway) is taken whole, so that its replace reconciles
    /// against what the lost one's parts left.
    ///
    /// Every other list is gathered until it ends, then:
    ///
    /// Atomic mode: queues one [`Item::ReplacedAll`] with the keyed, transformed objects,
    /// and the keys of the unchanged ones (the informer's store keeps what it holds).
    ///
    /// Per-object mode: queues a `Deleted` tombstone for every key queued or known but
    /// absent from the list, then `Replaced` for every listed object (unchanged ones read
    /// from the cache), so that the store never holds a deleted object next to its
    /// successor. A queued key whose last event is a delete needs no tombstone; a
    /// tombstone carries the key's newest queued object, else the known one; a known key
    /// the store no longer holds by the time it is read gets none.
    ///
    /// The first replace before any add, update or delete is the initial list:
    /// everything queued at its end must be popped and processed before
    /// [`has_synced`](crate::FifoQueue::has_synced).
    fn replace(&self, part: ListPart<K>) -> Result<(), kinformer_core::Error> {
        let ListPart {
            items, starts, end, ..
        } = part;
        let items = self.config.prepare_list(items)?;
        let mut st = self.state.lock();
        st.check_open()?;
        if starts {
            st.gathered.clear();
            st.parts = match st.parts {
                Parts::Open { queued: true } | Parts::Spoiled => Parts::Spoiled,
                _ if st.progress.is_populated() => Parts::None,
                Parts::None | Parts::Open { queued: false } => Parts::Open { queued: false },
            };
        }
        if let Parts::Open { queued } = st.parts
            && (queued || end.is_none())
        {
            // The first list, a part at a time. Its parts are all the queue and the store
            // hold (nothing had synced, no other list left parts): nothing to tombstone.
            let items = resolved(items);
            if !items.is_empty() {
                st.parts = Parts::Open { queued: true };
            }
            for (key, obj) in items {
                st.entries
                    .push_back(Entry::Event(key, Delta::new(DeltaType::Replaced, obj)));
            }
            if end.is_some() {
                st.parts = Parts::None;
                let count = st.entries.len();
                st.progress.first_replace(count);
            }
        } else {
            // Until the list ends, an unchanged object waits as its key alone in atomic mode
            // (the store keeps its entry), else without a copy the cache can stand for: a
            // relist holds no second copy of everything unchanged.
            st.gathered
                .extend(items.into_iter().map(|(key, item)| match item {
                    Listed::Unchanged(u) if self.atomic => {
                        (key, Listed::Unchanged(u.without_copy()))
                    }
                    item => (key, item.lightened()),
                }));
            let Some(resource_version) = end else {
                return Ok(());
            };
            st.parts = Parts::None;
            let list = std::mem::take(&mut st.gathered);
            if self.atomic {
                let mut objects = Vec::with_capacity(list.len());
                let mut unchanged = Vec::new();
                for (key, item) in list {
                    match item {
                        Listed::Object(obj) => objects.push((key, obj)),
                        Listed::Unchanged(_) => unchanged.push(key),
                    }
                }
                st.entries.push_back(Entry::ReplacedAll {
                    objects,
                    unchanged,
                    resource_version,
                });
            } else {
                self.reconcile_locked(&mut st, resolved(list));
            }
            let count = st.entries.len();
            st.progress.first_replace(count);
        }
        let wakers = st.waiters.take();
        drop(st);
        wake_all(wakers);
        Ok(())
    }

    /// The periodic resync.
    ///
    /// Atomic mode: queues one [`Item::SyncAll`]. Per-object mode: queues `Sync` with the
    /// stored object for every known key that has no event queued (a queued event is
    /// newer than the store); nothing without a known-objects view.
    fn resync(&self) -> Result<(), kinformer_core::Error> {
        if self.atomic {
            return Ok(self.push_alone(Entry::SyncAll)?);
        }
        let mut st = self.state.lock();
        st.check_open()?;
        let Some(known) = &self.config.known else {
            return Ok(());
        };
        let mut pending: HashSet<&str> = st
            .entries
            .iter()
            .filter_map(|e| match e {
                Entry::Event(k, _) => Some(k.as_str()),
                _ => None,
            })
            .collect();
        let mut syncs: Vec<(ObjectKey, Arc<K>)> = Vec::new();
        for (key, _) in st.in_flight.iter() {
            if pending.insert(key.as_str())
                && let Some(obj) = st.in_flight.settled_object(key.as_str())
            {
                syncs.push((key.clone(), Arc::clone(obj)));
            }
        }
        for key in known.list_keys() {
            if pending.contains(key.as_str()) {
                continue;
            }
            match known.get_by_key(key.as_str()) {
                Some(obj) => syncs.push((key, obj)),
                None => tracing::debug!(
                    key = key.as_str(),
                    "known key gone from the store during resync; nothing to sync"
                ),
            }
        }
        drop(pending);
        for (key, obj) in syncs {
            st.entries
                .push_back(Entry::Event(key, Delta::new(DeltaType::Sync, obj)));
        }
        let wakers = st.waiters.take();
        drop(st);
        wake_all(wakers);
        Ok(())
    }

    /// The watch reached `resource_version`: queued as an [`Item::Bookmark`] when
    /// [`emit_bookmarks`](InOrderFifoBuilder::emit_bookmarks) is on, ignored otherwise.
    fn bookmark(&self, resource_version: &str) -> Result<(), kinformer_core::Error> {
        if !self.emit_bookmarks {
            return Ok(self.state.lock().check_open()?);
        }
        Ok(self.push_alone(Entry::Bookmark(resource_version.to_owned()))?)
    }
}

impl<K> fmt::Debug for InOrderFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("InOrderFifo")
            .field("atomic", &self.atomic)
            .field("batch_size", &self.batch_size)
            .field("queued", &st.entries.len())
            .field("closed", &st.closed)
            .field("has_synced", &st.progress.has_synced())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drained_queue_gives_back_what_a_burst_grew_it_to() {
        let mut q: VecDeque<u64> = (0..100_000).collect();
        let peak = q.capacity();
        while q.len() > 10 {
            q.pop_front();
            shrink_after_burst(&mut q);
        }
        assert!(
            q.capacity() <= 2 * KEEP_CAPACITY,
            "{} of {peak}",
            q.capacity()
        );
        assert_eq!(
            q.iter().copied().collect::<Vec<_>>(),
            (99_990..100_000).collect::<Vec<_>>()
        );
        // A queue within the kept capacity is left alone.
        let mut small: VecDeque<u64> = VecDeque::with_capacity(KEEP_CAPACITY);
        small.push_back(1);
        shrink_after_burst(&mut small);
        assert!(small.capacity() >= KEEP_CAPACITY);
    }
}
