//! The fan-out: one listener per handler, each with its own buffer and its own thread
//! (client-go's `sharedProcessor` and `processorListener`). A buffer is unbounded (a
//! channel, as client-go's) or coalescing (at most one pending notification per key).

use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use kinformer_core::{DeletedObject, ObjectKey};

use crate::{Error, ResourceEventHandler};

/// What the informer hands to a listener.
pub(crate) enum Notification<K> {
    Add { obj: Arc<K>, initial: bool },
    Update { old: Arc<K>, new: Arc<K> },
    Delete(DeletedObject<K>),
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Add { obj, initial } => Self::Add {
                obj: Arc::clone(obj),
                initial: *initial,
            },
            Self::Update { old, new } => Self::Update {
                old: Arc::clone(old),
                new: Arc::clone(new),
            },
            Self::Delete(d) => Self::Delete(d.clone()),
        }
    }
}

/// The counters a listener shares with its [`Registration`](crate::Registration).
#[derive(Debug, Default)]
pub(crate) struct ListenerState {
    /// Notifications buffered or being handled.
    pub(crate) pending: AtomicUsize,
    /// Initial-list adds not yet handled (client-go's `SingleFileTracker` count).
    pub(crate) initial_pending: AtomicUsize,
    /// Set on removal or informer stop: the thread drops what is left and ends.
    pub(crate) stopped: AtomicBool,
}

/// The key a coalescing buffer files a notification under; `None` (an object without a
/// name, which no cache holds) is never merged with another.
pub(crate) type KeyOf<K> = Arc<dyn Fn(&Notification<K>) -> Option<ObjectKey> + Send + Sync>;

/// How a listener buffers the notifications its handler has not taken yet.
pub(crate) enum Buffering<K> {
    /// Every notification, in order, without bound (client-go's).
    Unbounded,
    /// At most one pending notification per key (see [`Coalescer`]).
    CoalesceByKey(KeyOf<K>),
}

/// The sending side of a listener's buffer.
enum Buffer<K> {
    Channel(Sender<Notification<K>>),
    Coalescing(Arc<Coalescer<K>>),
}

struct Entry<K> {
    id: u64,
    buffer: Buffer<K>,
    state: Arc<ListenerState>,
    resync: Option<Duration>,
    next_resync: Instant,
    /// Whether the last resync check found this listener due: only syncing listeners get
    /// updates whose resource version did not change.
    syncing: bool,
}

impl<K> Entry<K> {
    fn send(&self, n: Notification<K>) {
        match &self.buffer {
            Buffer::Channel(tx) => {
                let initial = is_initial(&n);
                if initial {
                    self.state.initial_pending.fetch_add(1, Ordering::AcqRel);
                }
                self.state.pending.fetch_add(1, Ordering::AcqRel);
                if tx.send(n).is_err() {
                    // The thread is gone (it cannot panic, so only after a stop): undo.
                    self.state.pending.fetch_sub(1, Ordering::AcqRel);
                    if initial {
                        self.state.initial_pending.fetch_sub(1, Ordering::AcqRel);
                    }
                }
            }
            // Counted inside, under the buffer's lock: a merge adds no pending entry.
            Buffer::Coalescing(c) => c.push(n, &self.state),
        }
    }

    /// Ends the buffer: the thread handles what is left unless `stopped` is set.
    fn close(self) {
        self.state.stopped.store(true, Ordering::Release);
        if let Buffer::Coalescing(c) = &self.buffer {
            c.close();
        }
    }
}

/// A listener buffer that holds at most one notification per object key: a notification
/// for a key that is already waiting is merged into it. What the handler then gets is the
/// change from what it last saw of the object to its latest state:
///
/// | waiting          | arrives       | becomes          |
/// |------------------|---------------|------------------|
/// | add(a)           | update(a→b)   | add(b)           |
/// | update(a→b)      | update(b→c)   | update(a→c)      |
/// | add or update    | delete(x)     | delete(x)        |
/// | delete(a)        | add(b)        | update(a→b)      |
///
/// An initial-list add stays initial. Keys are handed out in the order they first became
/// pending, so a burst on one object does not delay the others. Memory is bounded by the
/// number of keys, not the number of events; a handler that only enqueues keys into a work
/// queue loses nothing by it (it would enqueue the same key again). One that needs every
/// intermediate state (an audit log) should keep the unbounded default.
pub(crate) struct Coalescer<K> {
    state: Mutex<Pending<K>>,
    ready: Condvar,
    key_of: KeyOf<K>,
}

struct Pending<K> {
    /// Keys (or an unkeyable notification) in the order they became pending.
    order: VecDeque<Slot<K>>,
    by_key: HashMap<ObjectKey, Merged<K>>,
    closed: bool,
}

enum Slot<K> {
    Keyed(ObjectKey),
    Unkeyed(Notification<K>),
}

/// What waits for one key: what the handler last saw of the object (`None`: nothing, as
/// far as the waiting notifications tell) and its latest state.
struct Merged<K> {
    before: Option<Arc<K>>,
    after: After<K>,
    initial: bool,
}

enum After<K> {
    Present(Arc<K>),
    Deleted(DeletedObject<K>),
}

impl<K> Merged<K> {
    fn new(n: Notification<K>) -> Self {
        match n {
            Notification::Add { obj, initial } => Self {
                before: None,
                after: After::Present(obj),
                initial,
            },
            Notification::Update { old, new } => Self {
                before: Some(old),
                after: After::Present(new),
                initial: false,
            },
            Notification::Delete(d) => Self {
                before: None,
                after: After::Deleted(d),
                initial: false,
            },
        }
    }

    /// Merges `n` in; true if the merged notification became an initial add.
    fn merge(&mut self, n: Notification<K>) -> bool {
        if let (After::Deleted(d), Some(_)) = (&self.after, &self.before) {
            // Recreated before the handler saw the delete of an object it had seen: what
            // it saw last stands for the deleted object.
            self.before = Some(Arc::clone(d.object()));
        }
        let was_initial = self.initial;
        match n {
            Notification::Add { obj, initial } => {
                self.after = After::Present(obj);
                self.initial |= initial && self.before.is_none();
            }
            Notification::Update { new, .. } => self.after = After::Present(new),
            Notification::Delete(d) => self.after = After::Deleted(d),
        }
        self.initial && !was_initial
    }

    fn into_notification(self) -> Notification<K> {
        match (self.after, self.before) {
            // A delete of an object the handler had not seen: delivered all the same, so
            // that a handler keyed on deletions (a tombstone-aware key enqueuer) misses none.
            (After::Deleted(d), _) => Notification::Delete(d),
            (After::Present(obj), None) => Notification::Add {
                obj,
                initial: self.initial,
            },
            (After::Present(new), Some(old)) => Notification::Update { old, new },
        }
    }
}

impl<K> Coalescer<K> {
    fn new(key_of: KeyOf<K>) -> Self {
        Self {
            state: Mutex::new(Pending {
                order: VecDeque::new(),
                by_key: HashMap::new(),
                closed: false,
            }),
            ready: Condvar::new(),
            key_of,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Pending<K>> {
        // Nothing panics while holding it (no handler runs under it).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, n: Notification<K>, counts: &ListenerState) {
        let mut st = self.lock();
        if st.closed {
            return;
        }
        let key = (self.key_of)(&n);
        let (new_entry, now_initial) = match key {
            Some(key) => match st.by_key.get_mut(&key) {
                Some(waiting) => (false, waiting.merge(n)),
                None => {
                    let merged = Merged::new(n);
                    let initial = merged.initial;
                    st.by_key.insert(key.clone(), merged);
                    st.order.push_back(Slot::Keyed(key));
                    (true, initial)
                }
            },
            None => {
                let initial = is_initial(&n);
                st.order.push_back(Slot::Unkeyed(n));
                (true, initial)
            }
        };
        if now_initial {
            counts.initial_pending.fetch_add(1, Ordering::AcqRel);
        }
        if new_entry {
            counts.pending.fetch_add(1, Ordering::AcqRel);
            drop(st);
            self.ready.notify_one();
        }
    }

    /// The next notification and whether it counts as an initial add (a merged one may
    /// have become a delete), waiting for one; `None` once closed and empty or `stopped`.
    fn pop(&self, stopped: &AtomicBool) -> Option<(Notification<K>, bool)> {
        let mut st = self.lock();
        loop {
            if stopped.load(Ordering::Acquire) {
                return None;
            }
            match st.order.pop_front() {
                Some(Slot::Unkeyed(n)) => {
                    let initial = is_initial(&n);
                    return Some((n, initial));
                }
                Some(Slot::Keyed(key)) => {
                    if let Some(merged) = st.by_key.remove(&key) {
                        let initial = merged.initial;
                        return Some((merged.into_notification(), initial));
                    }
                }
                None if st.closed => return None,
                None => {
                    st = self.ready.wait(st).unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

/// Every listener of one informer.
pub(crate) struct Processor<K> {
    entries: Mutex<Vec<Entry<K>>>,
    next_id: AtomicU64,
}

impl<K> Default for Processor<K> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
        }
    }
}

impl<K: Send + Sync + 'static> Processor<K> {
    fn lock(&self) -> MutexGuard<'_, Vec<Entry<K>>> {
        // Nothing panics while holding it (no handler runs under it).
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a listener thread for `handler`, hands it `initial` first, and adds it to the
    /// fan-out. The caller holds the informer's delivery lock when `initial` is a snapshot
    /// of the cache, so nothing is missed or doubled between the two.
    pub(crate) fn add<H>(
        &self,
        handler: H,
        resync: Option<Duration>,
        buffering: Buffering<K>,
        initial: Vec<Arc<K>>,
        now: Instant,
    ) -> Result<(u64, Arc<ListenerState>), Error>
    where
        H: ResourceEventHandler<K> + Send + 'static,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ListenerState::default());
        let thread_state = Arc::clone(&state);
        let (buffer, source) = match buffering {
            Buffering::Unbounded => {
                let (tx, rx) = crossbeam_channel::unbounded();
                (Buffer::Channel(tx), Source::Channel(rx))
            }
            Buffering::CoalesceByKey(key_of) => {
                let c = Arc::new(Coalescer::new(key_of));
                (Buffer::Coalescing(Arc::clone(&c)), Source::Coalescing(c))
            }
        };
        thread::Builder::new()
            .name(format!("kinformer-listener-{id}"))
            .spawn(move || run_listener(&handler, &source, &thread_state))
            .map_err(Error::SpawnThread)?;
        let entry = Entry {
            id,
            buffer,
            state: Arc::clone(&state),
            resync,
            next_resync: now + resync.unwrap_or_default(),
            syncing: false,
        };
        for obj in initial {
            entry.send(Notification::Add { obj, initial: true });
        }
        self.lock().push(entry);
        Ok((id, state))
    }

    /// Removes a listener; its thread ends without handling what is still buffered.
    /// Unknown ids (already removed) are ignored.
    pub(crate) fn remove(&self, id: u64) {
        let removed = {
            let mut entries = self.lock();
            entries
                .iter()
                .position(|e| e.id == id)
                .map(|i| entries.swap_remove(i))
        };
        if let Some(e) = removed {
            e.close();
        }
    }

    /// Removes every listener (the informer stopped).
    pub(crate) fn stop_all(&self) {
        let all = std::mem::take(&mut *self.lock());
        for e in all {
            e.close();
        }
    }

    /// Hands `n` to every listener, or with `is_sync` only to those whose resync is due
    /// (client-go's `distribute`). Never blocks: the buffers are unbounded.
    pub(crate) fn distribute(&self, n: &Notification<K>, is_sync: bool) {
        for e in self.lock().iter().filter(|e| !is_sync || e.syncing) {
            e.send(n.clone());
        }
    }

    /// Whether a listener's resync is due (as [`should_resync`](Self::should_resync) last
    /// marked them): whether a resync update would reach anyone.
    pub(crate) fn any_syncing(&self) -> bool {
        self.lock().iter().any(|e| e.syncing)
    }

    /// client-go's `shouldResync`: marks the listeners whose resync period has elapsed as
    /// syncing (and schedules their next one), the others as not; true if any is due.
    pub(crate) fn should_resync(&self, now: Instant) -> bool {
        let mut any = false;
        for e in self.lock().iter_mut() {
            e.syncing = false;
            if let Some(period) = e.resync
                && now >= e.next_resync
            {
                e.syncing = true;
                e.next_resync = now + period;
                any = true;
            }
        }
        any
    }

    /// How many listeners are registered.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// The receiving side of a listener's buffer.
enum Source<K> {
    Channel(Receiver<Notification<K>>),
    Coalescing(Arc<Coalescer<K>>),
}

fn run_listener<K, H: ResourceEventHandler<K>>(
    handler: &H,
    source: &Source<K>,
    state: &ListenerState,
) {
    // Ends when the buffer is closed (removal, informer stop) and empty, or at once when
    // `stopped` is set.
    match source {
        Source::Channel(rx) => {
            for n in rx.iter() {
                if state.stopped.load(Ordering::Acquire) {
                    break;
                }
                deliver(handler, &n, is_initial(&n), state);
            }
        }
        Source::Coalescing(c) => {
            while let Some((n, initial)) = c.pop(&state.stopped) {
                deliver(handler, &n, initial, state);
            }
        }
    }
}

fn is_initial<K>(n: &Notification<K>) -> bool {
    matches!(n, Notification::Add { initial: true, .. })
}

/// Hands one notification to the handler, catching a panic, then counts it delivered
/// (`initial`: as one of the initial adds).
fn deliver<K, H: ResourceEventHandler<K>>(
    handler: &H,
    n: &Notification<K>,
    initial: bool,
    state: &ListenerState,
) {
    let result = catch_unwind(AssertUnwindSafe(|| match n {
        Notification::Add { obj, initial } => handler.on_add(obj, *initial),
        Notification::Update { old, new } => handler.on_update(old, new),
        Notification::Delete(obj) => handler.on_delete(obj),
    }));
    if let Err(panic) = result {
        let kind = match n {
            Notification::Add { .. } => "add",
            Notification::Update { .. } => "update",
            Notification::Delete(_) => "delete",
        };
        tracing::error!(
            notification = kind,
            panic = kinformer_core::panic_message(&*panic),
            "an event handler panicked; its listener goes on with the next notification"
        );
    }
    // Counted as delivered even after a panic, so has_synced cannot hang on it.
    if initial {
        state.initial_pending.fetch_sub(1, Ordering::AcqRel);
    }
    state.pending.fetch_sub(1, Ordering::AcqRel);
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Clone, Default)]
    struct Count(Arc<Mutex<Vec<String>>>);
    impl ResourceEventHandler<u32> for Count {
        fn on_add(&self, obj: &Arc<u32>, initial: bool) {
            self.0.lock().unwrap().push(format!("add {obj} {initial}"));
        }
        fn on_update(&self, _: &Arc<u32>, new: &Arc<u32>) {
            self.0.lock().unwrap().push(format!("update {new}"));
        }
    }

    fn wait(cond: impl Fn() -> bool) {
        let start = Instant::now();
        while !cond() {
            assert!(start.elapsed() < Duration::from_secs(5), "timed out");
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// Rule 28 at the processor: only listeners whose period elapsed are marked syncing,
    /// and only they get a sync notification.
    #[test]
    fn should_resync_marks_only_due_listeners() {
        let p = Processor::<u32>::default();
        let (due, never) = (Count::default(), Count::default());
        let now = Instant::now();
        p.add(
            due.clone(),
            Some(Duration::from_secs(1)),
            Buffering::Unbounded,
            vec![],
            now,
        )
        .unwrap();
        p.add(never.clone(), None, Buffering::Unbounded, vec![], now)
            .unwrap();
        assert!(!p.should_resync(now));
        assert!(p.should_resync(now + Duration::from_secs(2)));
        p.distribute(
            &Notification::Update {
                old: Arc::new(1),
                new: Arc::new(1),
            },
            true,
        );
        p.distribute(
            &Notification::Add {
                obj: Arc::new(2),
                initial: false,
            },
            false,
        );
        wait(|| due.0.lock().unwrap().len() == 2 && never.0.lock().unwrap().len() == 1);
        assert_eq!(*due.0.lock().unwrap(), ["update 1", "add 2 false"]);
        assert_eq!(*never.0.lock().unwrap(), ["add 2 false"]);
        // Next due in one more period: not yet.
        assert!(!p.should_resync(now + Duration::from_millis(2500)));
        assert!(p.should_resync(now + Duration::from_millis(3100)));
    }

    #[test]
    fn initial_adds_are_counted_until_handled_and_removal_is_idempotent() {
        let p = Processor::<u32>::default();
        let h = Count::default();
        let (id, state) = p
            .add(
                h.clone(),
                None,
                Buffering::Unbounded,
                vec![Arc::new(1), Arc::new(2)],
                Instant::now(),
            )
            .unwrap();
        wait(|| state.initial_pending.load(Ordering::Acquire) == 0);
        assert_eq!(*h.0.lock().unwrap(), ["add 1 true", "add 2 true"]);
        assert_eq!(state.pending.load(Ordering::Acquire), 0);
        assert_eq!(p.len(), 1);
        p.remove(id);
        p.remove(id);
        assert_eq!(p.len(), 0);
        assert!(state.stopped.load(Ordering::Acquire));
    }

    /// Objects are `u32`s whose hundreds are the key: 101 and 102 are versions of `ns/k1`.
    fn key_of(n: &Notification<u32>) -> Option<ObjectKey> {
        let v = match n {
            Notification::Add { obj, .. } | Notification::Update { new: obj, .. } => **obj,
            Notification::Delete(d) => **d.object(),
        };
        ObjectKey::parse(&format!("ns/k{}", v / 100)).ok()
    }

    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<String>>>);
    impl ResourceEventHandler<u32> for Log {
        fn on_add(&self, obj: &Arc<u32>, initial: bool) {
            self.0.lock().unwrap().push(format!("add {obj} {initial}"));
        }
        fn on_update(&self, old: &Arc<u32>, new: &Arc<u32>) {
            self.0.lock().unwrap().push(format!("update {old}->{new}"));
        }
        fn on_delete(&self, obj: &DeletedObject<u32>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("delete {}", obj.object()));
        }
    }

    fn add(v: u32) -> Notification<u32> {
        Notification::Add {
            obj: Arc::new(v),
            initial: false,
        }
    }
    fn update(old: u32, new: u32) -> Notification<u32> {
        Notification::Update {
            old: Arc::new(old),
            new: Arc::new(new),
        }
    }
    fn delete(v: u32) -> Notification<u32> {
        Notification::Delete(DeletedObject::Object(Arc::new(v)))
    }

    /// Runs `sequence` through a coalescing buffer while nothing is taken out, then lets
    /// the listener go and returns what the handler got.
    fn coalesced(initial: Vec<Arc<u32>>, sequence: Vec<Notification<u32>>) -> Vec<String> {
        let c = Coalescer::new(Arc::new(key_of));
        let state = ListenerState::default();
        for obj in initial {
            c.push(Notification::Add { obj, initial: true }, &state);
        }
        for n in sequence {
            c.push(n, &state);
        }
        c.close();
        let log = Log::default();
        run_listener(&log, &Source::Coalescing(Arc::new(c)), &state);
        assert_eq!(state.pending.load(Ordering::Acquire), 0, "all delivered");
        assert_eq!(
            state.initial_pending.load(Ordering::Acquire),
            0,
            "initial counted down"
        );
        log.0.lock().unwrap().clone()
    }

    #[test]
    fn a_coalescing_buffer_merges_by_key_into_the_change_from_what_the_handler_saw() {
        // The table of `Coalescer`, row by row.
        assert_eq!(
            coalesced(vec![], vec![add(101), update(101, 102)]),
            ["add 102 false"]
        );
        assert_eq!(
            coalesced(vec![], vec![update(101, 102), update(102, 103)]),
            ["update 101->103"]
        );
        assert_eq!(
            coalesced(vec![], vec![update(101, 102), delete(102)]),
            ["delete 102"]
        );
        assert_eq!(
            coalesced(vec![], vec![delete(101), add(105)]),
            ["add 105 false"]
        );
        assert_eq!(
            coalesced(vec![], vec![update(100, 101), delete(101), add(105)]),
            ["update 101->105"],
            "re-created after a delete of a seen object: an update from the deleted one"
        );
        // An initial add stays initial, and is counted down even when it became a delete.
        assert_eq!(
            coalesced(vec![Arc::new(101)], vec![update(101, 102)]),
            ["add 102 true"]
        );
        assert_eq!(
            coalesced(vec![Arc::new(101)], vec![delete(101)]),
            ["delete 101"]
        );
    }

    #[test]
    fn keys_come_out_in_the_order_they_first_became_pending() {
        let got = coalesced(
            vec![],
            vec![
                add(100),
                add(200),
                update(100, 101),
                add(300),
                update(200, 201),
                update(101, 102),
            ],
        );
        assert_eq!(got, ["add 102 false", "add 201 false", "add 300 false"]);
    }

    #[test]
    fn a_stuck_coalescing_listener_holds_one_notification_per_key() {
        let p = Processor::<u32>::default();
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let log = Log::default();
        let (_id, state) = p
            .add(
                Gated(Arc::clone(&gate), log.clone()),
                None,
                Buffering::CoalesceByKey(Arc::new(key_of)),
                vec![],
                Instant::now(),
            )
            .unwrap();
        // 10 keys, 1,000 events each, while the handler is stuck on its first one.
        for version in 0..1000 {
            for k in 0..10 {
                let obj = k * 100 + (version % 100);
                p.distribute(
                    &if version == 0 {
                        add(obj)
                    } else {
                        update(obj, obj)
                    },
                    false,
                );
            }
        }
        assert!(
            state.pending.load(Ordering::Acquire) <= 11,
            "pending {} (one in the handler, one per key)",
            state.pending.load(Ordering::Acquire)
        );
        drop(held);
        wait(|| state.pending.load(Ordering::Acquire) == 0);
        let got = log.0.lock().unwrap().clone();
        assert!(got.len() <= 20, "{got:?}");
        // Every key's last state arrived.
        for k in 0..10 {
            let last = (k * 100 + 99).to_string();
            let carries = |l: &str| l.split([' ', '>']).any(|word| word == last);
            assert!(got.iter().any(|l| carries(l)), "key {k}: {got:?}");
        }
    }

    /// A handler that waits for `0` before each notification.
    struct Gated(Arc<Mutex<()>>, Log);
    impl ResourceEventHandler<u32> for Gated {
        fn on_add(&self, obj: &Arc<u32>, initial: bool) {
            let _open = self.0.lock().unwrap();
            self.1.on_add(obj, initial);
        }
        fn on_update(&self, old: &Arc<u32>, new: &Arc<u32>) {
            let _open = self.0.lock().unwrap();
            self.1.on_update(old, new);
        }
    }
}
