//! The fan-out: one listener per handler, each with an unbounded buffer and its own
//! thread (client-go's `sharedProcessor` and `processorListener`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use kinformer_core::DeletedObject;

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

struct Entry<K> {
    id: u64,
    tx: Sender<Notification<K>>,
    state: Arc<ListenerState>,
    resync: Option<Duration>,
    next_resync: Instant,
    /// Whether the last resync check found this listener due: only syncing listeners get
    /// updates whose resource version did not change.
    syncing: bool,
}

impl<K> Entry<K> {
    fn send(&self, n: Notification<K>) {
        let initial = matches!(n, Notification::Add { initial: true, .. });
        if initial {
            self.state.initial_pending.fetch_add(1, Ordering::AcqRel);
        }
        self.state.pending.fetch_add(1, Ordering::AcqRel);
        if self.tx.send(n).is_err() {
            // The thread is gone (it cannot panic, so only after a stop): undo the counts.
            self.state.pending.fetch_sub(1, Ordering::AcqRel);
            if initial {
                self.state.initial_pending.fetch_sub(1, Ordering::AcqRel);
            }
        }
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
        initial: Vec<Arc<K>>,
    ) -> Result<(u64, Arc<ListenerState>), Error>
    where
        H: ResourceEventHandler<K> + Send + 'static,
    {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = crossbeam_channel::unbounded();
        let state = Arc::new(ListenerState::default());
        let thread_state = Arc::clone(&state);
        thread::Builder::new()
            .name(format!("kinformer-listener-{id}"))
            .spawn(move || run_listener(handler, rx, thread_state))
            .map_err(Error::SpawnThread)?;
        let entry = Entry {
            id,
            tx,
            state: Arc::clone(&state),
            resync,
            next_resync: Instant::now() + resync.unwrap_or_default(),
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
            e.state.stopped.store(true, Ordering::Release);
        }
    }

    /// Removes every listener (the informer stopped).
    pub(crate) fn stop_all(&self) {
        let all = std::mem::take(&mut *self.lock());
        for e in all {
            e.state.stopped.store(true, Ordering::Release);
        }
    }

    /// Hands `n` to every listener, or with `is_sync` only to those whose resync is due
    /// (client-go's `distribute`). Never blocks: the buffers are unbounded.
    pub(crate) fn distribute(&self, n: &Notification<K>, is_sync: bool) {
        for e in self.lock().iter().filter(|e| !is_sync || e.syncing) {
            e.send(n.clone());
        }
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

fn run_listener<K, H: ResourceEventHandler<K>>(
    handler: H,
    rx: Receiver<Notification<K>>,
    state: Arc<ListenerState>,
) {
    // Ends when the sender is dropped (removal, informer stop) and the buffer is empty, or
    // at once when `stopped` is set.
    for n in rx.iter() {
        if state.stopped.load(Ordering::Acquire) {
            break;
        }
        let initial = matches!(n, Notification::Add { initial: true, .. });
        let result = catch_unwind(AssertUnwindSafe(|| match &n {
            Notification::Add { obj, initial } => handler.on_add(obj, *initial),
            Notification::Update { old, new } => handler.on_update(old, new),
            Notification::Delete(obj) => handler.on_delete(obj),
        }));
        if let Err(panic) = result {
            let kind = match &n {
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
        p.add(due.clone(), Some(Duration::from_secs(1)), vec![])
            .unwrap();
        p.add(never.clone(), None, vec![]).unwrap();
        let now = Instant::now();
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
            .add(h.clone(), None, vec![Arc::new(1), Arc::new(2)])
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
}
