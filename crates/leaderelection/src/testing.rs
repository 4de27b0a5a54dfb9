//! Test doubles (feature `test-util`): a clock that follows Tokio's (pausable) clock and an
//! in-memory lease with resourceVersion semantics and faults.
//!
//! ```
//! use std::time::Duration;
//! use kinformer_leaderelection::testing::{MemoryLease, tokio_clock};
//! use kinformer_leaderelection::{LeaderElectionConfig, LeaderElector, TermEnd};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let lease = MemoryLease::new();
//! let elector = LeaderElector::builder(lease.lock("a"))
//!     .config(LeaderElectionConfig::default())
//!     .clock(tokio_clock())
//!     .build()
//!     .unwrap();
//! let cancel = CancellationToken::new();
//! // Time is paused: the 15 s lease and 2 s retries pass instantly.
//! let end = elector
//!     .run_once(&cancel, |leading| async move {
//!         tokio::time::sleep(Duration::from_secs(60)).await; // a minute of leading
//!         assert!(leading.is_leading());
//!     })
//!     .await
//!     .unwrap();
//! assert_eq!(end, TermEnd::WorkReturned);
//! assert_eq!(lease.record().unwrap().holder_identity, "a");
//! # }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, UNIX_EPOCH};

use crate::{BoxFuture, Error, FakeClock, LeaderElectionRecord, Lock, TokioClock};

/// A [`FakeClock`] that follows Tokio's clock: in a runtime with paused time
/// (`#[tokio::test(start_paused = true)]`, `tokio::time::pause`) it stands still until the
/// runtime has nothing else to do, then jumps to the next timer, so minutes of an election
/// run in milliseconds and always the same way; `tokio::time::advance` moves it by hand, and
/// so does [`FakeClock::step`] (a jump of this clock alone: a process that was paused). Its
/// wall clock starts at 2026-01-01T00:00:00Z, moves with it, and can be set anywhere
/// ([`FakeClock::set_wall`]) to show that the record's timestamps change nothing;
/// [`FakeClock::elapsed`] is the time since it was made.
///
/// It is kinformer-core's `FakeClock` (the workqueue's and the event recorder's) made with
/// [`FakeClock::following`] [`TokioClock`] (Tokio's `Instant::now` and timer). A
/// `FakeClock::new()` stands still until stepped: an elector on it waits for the
/// test to move it.
pub fn tokio_clock() -> FakeClock {
    let clock = FakeClock::following(TokioClock);
    clock.set_wall(UNIX_EPOCH + Duration::from_secs(1_767_225_600));
    clock
}

/// What [`MemoryLease`] does to the requests it gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Requests are served.
    #[default]
    None,
    /// Requests fail at once with [`Error::Unreachable`], changing nothing (a refused
    /// connection).
    Unreachable,
    /// Requests never answer and change nothing (a black-holed connection).
    Hang,
}

/// An in-memory lease: one record with a version, shared by the [`MemoryLock`]s of several
/// candidates, with [`Lock`]'s optimistic concurrency. Cheap to clone (clones share the
/// lease). Faults and latency apply to every lock on it.
#[derive(Clone, Default)]
pub struct MemoryLease {
    inner: Arc<Mutex<Store>>,
}

#[derive(Default)]
struct Store {
    record: Option<(LeaderElectionRecord, u64)>,
    versions: u64,
    fault: Fault,
    /// Faults of single candidates, over `fault`.
    faults: HashMap<String, Fault>,
    latency: Duration,
    calls: Vec<(String, &'static str)>,
}

impl MemoryLease {
    /// An empty lease (no record yet).
    pub fn new() -> Self {
        Self::default()
    }

    /// A lock on this lease for the candidate `identity`.
    pub fn lock(&self, identity: impl Into<String>) -> MemoryLock {
        MemoryLock {
            lease: self.clone(),
            identity: identity.into(),
            version: Mutex::new(None),
        }
    }

    /// The record as stored now.
    pub fn record(&self) -> Option<LeaderElectionRecord> {
        self.store().record.as_ref().map(|(r, _)| r.clone())
    }

    /// Writes `record` as someone outside the election would (a new version, so every
    /// lock's next update conflicts).
    pub fn put(&self, record: LeaderElectionRecord) {
        let mut store = self.store();
        store.versions += 1;
        let version = store.versions;
        store.record = Some((record, version));
    }

    /// Makes every request from now on fail or hang, or be served again.
    pub fn set_fault(&self, fault: Fault) {
        self.store().fault = fault;
    }

    /// Makes the requests of the candidate `identity` fail or hang (a partition of that one
    /// replica), or be served again ([`Fault::None`]: back to the lease-wide fault).
    pub fn set_fault_for(&self, identity: &str, fault: Fault) {
        let mut store = self.store();
        if fault == Fault::None {
            store.faults.remove(identity);
        } else {
            store.faults.insert(identity.to_owned(), fault);
        }
    }

    /// Delays every answer by `latency`; the request takes effect at once (a write lands on
    /// the server before its answer comes back).
    pub fn set_latency(&self, latency: Duration) {
        self.store().latency = latency;
    }

    /// Every request so far, as (identity, `"get"` / `"create"` / `"update"`), in order.
    pub fn calls(&self) -> Vec<(String, &'static str)> {
        self.store().calls.clone()
    }

    fn store(&self) -> MutexGuard<'_, Store> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for MemoryLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let store = self.store();
        f.debug_struct("MemoryLease")
            .field("record", &store.record)
            .field("fault", &store.fault)
            .finish_non_exhaustive()
    }
}

/// One candidate's [`Lock`] on a [`MemoryLease`].
pub struct MemoryLock {
    lease: MemoryLease,
    identity: String,
    /// The version this lock last read or wrote.
    version: Mutex<Option<u64>>,
}

impl MemoryLock {
    /// Serves one request: records it, applies the fault, runs `op` on the store, then
    /// waits out the latency.
    async fn serve<T>(
        &self,
        kind: &'static str,
        op: impl FnOnce(&mut Store, &mut Option<u64>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let served = {
            let mut store = self.lease.store();
            store.calls.push((self.identity.clone(), kind));
            let fault = store
                .faults
                .get(&self.identity)
                .copied()
                .unwrap_or(store.fault);
            match fault {
                Fault::None => {
                    let mut version = self.version.lock().unwrap_or_else(PoisonError::into_inner);
                    Some((op(&mut store, &mut version), store.latency))
                }
                Fault::Unreachable => {
                    return Err(Error::Unreachable("the memory lease is unreachable".into()));
                }
                Fault::Hang => None,
            }
        };
        let Some((result, latency)) = served else {
            return std::future::pending().await;
        };
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        result
    }
}

impl Lock for MemoryLock {
    fn get(&self) -> BoxFuture<'_, Result<Option<LeaderElectionRecord>, Error>> {
        Box::pin(async move {
            self.serve("get", |store, version| {
                *version = store.record.as_ref().map(|(_, v)| *v);
                Ok(store.record.as_ref().map(|(r, _)| r.clone()))
            })
            .await
        })
    }

    fn create<'a>(&'a self, record: &'a LeaderElectionRecord) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            self.serve("create", |store, version| {
                if store.record.is_some() {
                    return Err(Error::Conflict);
                }
                store.versions += 1;
                store.record = Some((record.clone(), store.versions));
                *version = Some(store.versions);
                Ok(())
            })
            .await
        })
    }

    fn update<'a>(&'a self, record: &'a LeaderElectionRecord) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            self.serve("update", |store, version| {
                let mine = version.ok_or(Error::NotLoaded)?;
                let Some((_, current)) = store.record else {
                    return Err(Error::NotFound);
                };
                if current != mine {
                    return Err(Error::Conflict);
                }
                store.versions += 1;
                store.record = Some((record.clone(), store.versions));
                *version = Some(store.versions);
                Ok(())
            })
            .await
        })
    }

    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        "memory/lease".to_owned()
    }
}

impl fmt::Debug for MemoryLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryLock")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}
