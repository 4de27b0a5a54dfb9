//! Read your own writes: a reconcile that wrote an object tells its [`Context`] the
//! resourceVersion the API server gave back, and the next reconcile of the same key does
//! not run until the cache that object lives in has applied at least that version.
//!
//! Why: an informer's cache lags the API server by the time a watch event takes to arrive
//! (milliseconds, or as long as a watch is broken). A controller that writes, then
//! reconciles the same key again before its own write is in the cache (a requeue, an event
//! of a child, a resync), acts on what it has already changed: it creates a second child,
//! bumps a counter twice, sends a second notification. client-go and controller-runtime
//! leave this to each controller (expectations in the ReplicaSet controller; Kubernetes
//! 1.36's own controllers skip while their cache is older than their last write,
//! KEP-5647). Here any controller opts in per write with [`Context::wrote`].
//!
//! How: the worker keeps, per key, the writes its reconciles reported (which cache, which
//! resourceVersion). Before it reconciles a key with writes pending, it asks each cache for
//! the resourceVersion it last applied ([`CacheProgress`]). Kubernetes ≥ 1.35 promises
//! resourceVersions that compare as integers (KEP-5504: decimal, no leading zeros, of any
//! length), and a cache applies the events of its watch (bookmarks included) in order, so a
//! cache at or past the written version has seen the write (or what replaced it). Where
//! either version is not such an integer, only equality counts. A key whose
//! caches lag is not reconciled: it goes back to the queue after a short delay (a skip,
//! counted), until the caches catch up or the bound
//! ([`Controller::read_your_writes_timeout`](super::Controller::read_your_writes_timeout))
//! passes since the write; then it is reconciled anyway (counted, logged), so a write that
//! never reaches the cache (filtered out of the informer's selector, say) delays its key
//! by the bound and no more.
//!
//! [`Context`]: super::Context
//! [`Context::wrote`]: super::Context::wrote

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kinformer_core::MetaObject;
use kinformer_informer_factory::SharedIndexInformer;
use tokio::time::Instant;

/// How long a key whose caches lag waits before it is looked at again.
pub(crate) const RECHECK: Duration = Duration::from_millis(50);

/// The default bound on how long a key waits for its writes to reach the caches.
pub const DEFAULT_READ_YOUR_WRITES_TIMEOUT: Duration = Duration::from_secs(10);

/// A cache that can tell how far it has got: the resourceVersion of the last list, event or
/// bookmark it applied. What [`Context::wrote`](super::Context::wrote) takes.
///
/// Implemented for [`SharedIndexInformer`] (its cache's
/// `last_sync_resource_version`); implement it for a cache of your own.
pub trait CacheProgress: Send + Sync {
    /// The resourceVersion of the last thing applied to the cache; empty before any.
    fn applied_resource_version(&self) -> String;

    /// The group and resource (plural) the cache holds, when known: the labels of the
    /// `stale_sync_skips_total` metric (KEP-5647's). `None` leaves them empty.
    fn group_resource(&self) -> Option<(String, String)>;
}

impl<K: MetaObject + Send + Sync + 'static> CacheProgress for SharedIndexInformer<K> {
    fn applied_resource_version(&self) -> String {
        self.indexer().last_sync_resource_version()
    }

    /// From the informer's identity (a factory's informers have one).
    fn group_resource(&self) -> Option<(String, String)> {
        self.identity()
            .map(|id| (id.group.clone(), id.resource.clone()))
    }
}

/// A group and resource, for metrics.
pub(crate) type GroupResource = Option<(String, String)>;

/// Whether a cache that applied `applied` has seen a write that got `wrote`. Two versions
/// that are both decimal integers without leading zeros compare as numbers of any length
/// (KEP-5504's rule: the longer is newer, and lexical order among equal lengths), so a
/// server whose versions outgrow 64 bits still compares; otherwise only equality counts.
pub(crate) fn has_seen(applied: &str, wrote: &str) -> bool {
    fn integer(v: &str) -> bool {
        !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) && (v == "0" || !v.starts_with('0'))
    }
    if integer(applied) && integer(wrote) {
        (applied.len(), applied) >= (wrote.len(), wrote)
    } else {
        applied == wrote
    }
}

/// One write a reconcile reported: how to tell a cache has seen it.
#[derive(Clone)]
pub(crate) struct Write {
    seen: Arc<dyn Fn() -> bool + Send + Sync>,
    /// What the cache holds, for the metrics.
    group_resource: GroupResource,
}

impl Write {
    /// Seen once `cache` has applied `resource_version`.
    pub(crate) fn new(cache: Arc<dyn CacheProgress>, resource_version: String) -> Self {
        let group_resource = cache.group_resource();
        Self {
            seen: Arc::new(move || has_seen(&cache.applied_resource_version(), &resource_version)),
            group_resource,
        }
    }

    /// Seen once `seen` says so (a delete: the object gone from the cache).
    pub(crate) fn when(seen: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self {
            seen: Arc::new(seen),
            group_resource: None,
        }
    }

    fn seen(&self) -> bool {
        (self.seen)()
    }
}

/// The writes one reconcile reports through its context (and the clones of it).
#[derive(Clone, Default)]
pub(crate) struct WriteLog(Arc<Mutex<Vec<Write>>>);

impl WriteLog {
    pub(crate) fn push(&self, write: Write) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(write);
    }

    fn take(&self) -> Vec<Write> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl fmt::Debug for WriteLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.lock().unwrap_or_else(PoisonError::into_inner).len();
        f.debug_struct("WriteLog").field("writes", &n).finish()
    }
}

/// What to do with a key before its reconcile.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// No write pending, or every cache has seen them: reconcile.
    Fresh,
    /// A cache has not seen a write yet: look again after the delay. The group and resource
    /// of a cache behind, when known.
    Lagging(Duration, GroupResource),
    /// The bound passed with a cache still behind: reconcile anyway.
    GaveUp,
}

/// Per key, the writes not yet seen by their caches, and when the first was reported.
pub(crate) struct Pending<T> {
    by_key: Mutex<HashMap<T, (Instant, Vec<Write>)>>,
    timeout: Duration,
}

impl<T: Eq + Hash + Clone> Pending<T> {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            by_key: Mutex::new(HashMap::new()),
            timeout,
        }
    }

    /// Whether `key` may be reconciled now.
    pub(crate) fn check(&self, key: &T) -> Freshness {
        let mut by_key = self.by_key.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((since, writes)) = by_key.get_mut(key) else {
            return Freshness::Fresh;
        };
        writes.retain(|w| !w.seen());
        if writes.is_empty() {
            by_key.remove(key);
            return Freshness::Fresh;
        }
        let waited = since.elapsed();
        if waited >= self.timeout {
            by_key.remove(key);
            return Freshness::GaveUp;
        }
        let behind = writes.iter().find_map(|w| w.group_resource.clone());
        Freshness::Lagging(RECHECK.min(self.timeout - waited), behind)
    }

    /// Adds the writes of `log` (one reconcile of `key`) to those pending for `key`; the
    /// bound counts from the first write still pending.
    pub(crate) fn record(&self, key: &T, log: &WriteLog) {
        let writes = log.take();
        if writes.is_empty() {
            return;
        }
        let mut by_key = self.by_key.lock().unwrap_or_else(PoisonError::into_inner);
        by_key
            .entry(key.clone())
            .or_insert_with(|| (Instant::now(), Vec::new()))
            .1
            .extend(writes);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A cache whose progress the test sets.
    #[derive(Default)]
    struct At(Mutex<String>);

    impl At {
        fn set(&self, rv: &str) {
            *self.0.lock().unwrap() = rv.to_owned();
        }
    }

    impl CacheProgress for At {
        fn applied_resource_version(&self) -> String {
            self.0.lock().unwrap().clone()
        }
        fn group_resource(&self) -> Option<(String, String)> {
            Some(("apps".into(), "deployments".into()))
        }
    }

    #[test]
    fn integer_versions_compare_as_integers_others_only_by_equality() {
        assert!(has_seen("10", "9"));
        assert!(has_seen("10", "10"));
        assert!(!has_seen("9", "10"), "9 < 10 even though \"9\" > \"10\"");
        assert!(!has_seen("", "10"), "an empty cache has seen nothing");
        assert!(has_seen("abc", "abc"));
        assert!(!has_seen("abd", "abc"));
        // KEP-5504: any length, no leading zeros; past 64 bits too.
        assert!(has_seen("100000000000000000000", "99999999999999999999"));
        assert!(!has_seen("99999999999999999999", "100000000000000000000"));
        assert!(
            !has_seen("010", "9"),
            "a leading zero is no integer: only equality"
        );
        assert!(has_seen("0", "0"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_lags_until_its_cache_reaches_the_write_then_is_fresh() {
        let cache = Arc::new(At::default());
        cache.set("5");
        let pending = Pending::new(Duration::from_secs(10));
        assert_eq!(pending.check(&"k"), Freshness::Fresh);
        let log = WriteLog::default();
        log.push(Write::new(cache.clone(), "7".into()));
        pending.record(&"k", &log);
        assert_eq!(
            pending.check(&"k"),
            Freshness::Lagging(RECHECK, Some(("apps".into(), "deployments".into())))
        );
        assert_eq!(pending.check(&"other"), Freshness::Fresh);
        cache.set("6");
        assert!(matches!(pending.check(&"k"), Freshness::Lagging(_, _)));
        cache.set("8");
        assert_eq!(pending.check(&"k"), Freshness::Fresh);
        assert_eq!(pending.check(&"k"), Freshness::Fresh, "forgotten once seen");
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_whose_cache_never_catches_up_gives_up_at_the_bound() {
        let cache = Arc::new(At::default());
        let pending = Pending::new(Duration::from_secs(1));
        let log = WriteLog::default();
        log.push(Write::new(cache, "7".into()));
        pending.record(&"k", &log);
        tokio::time::advance(Duration::from_millis(980)).await;
        assert_eq!(
            pending.check(&"k"),
            Freshness::Lagging(
                Duration::from_millis(20),
                Some(("apps".into(), "deployments".into()))
            ),
            "never looks again past the bound"
        );
        tokio::time::advance(Duration::from_millis(20)).await;
        assert_eq!(pending.check(&"k"), Freshness::GaveUp);
        assert_eq!(pending.check(&"k"), Freshness::Fresh);
    }

    #[tokio::test(start_paused = true)]
    async fn every_write_of_a_key_must_be_seen_each_by_its_own_cache() {
        let (a, b) = (Arc::new(At::default()), Arc::new(At::default()));
        let pending = Pending::new(Duration::from_secs(10));
        let log = WriteLog::default();
        log.push(Write::new(a.clone(), "3".into()));
        log.push(Write::new(b.clone(), "4".into()));
        pending.record(&"k", &log);
        a.set("3");
        assert!(matches!(pending.check(&"k"), Freshness::Lagging(_, _)));
        b.set("4");
        assert_eq!(pending.check(&"k"), Freshness::Fresh);
    }
}
