//! The swap point: where the leader record lives.

use std::future::Future;
use std::pin::Pin;

use crate::{Error, LeaderElectionRecord};

/// Where the leader record lives, and who this candidate is.
///
/// Why a trait: the election's rules (when to take the lock, when to give it up) do not
/// depend on where the record is kept. [`LeaseLock`](crate::LeaseLock), a
/// `coordination.k8s.io/v1` Lease, is the default and what client-go uses; a test uses an
/// in-memory one (`MemoryLease`, feature `test-util`), and a user may keep the record
/// anywhere that offers compare-and-swap. client-go's `resourcelock.Interface` minus
/// `RecordEvent`.
///
/// The contract the elector relies on, which every implementation must keep:
///
/// - **Optimistic concurrency.** The lock remembers the version of the record it last read
///   ([`get`](Self::get)) or wrote ([`create`](Self::create), [`update`](Self::update)), and
///   `update` succeeds only if the stored record is still at that version; otherwise it
///   returns [`Error::Conflict`] and changes nothing. This is what makes two candidates that
///   both think the lock is free unable to both take it.
/// - `get` returns `Ok(None)` when there is no record yet; `create` fails (with
///   [`Error::Conflict`]) when one appeared meanwhile.
/// - A failed call changes nothing it did not report.
///
/// One elector calls its lock from one task at a time.
pub trait Lock: Send + Sync + 'static {
    /// Reads the record, or `None` when there is none yet, and remembers its version.
    fn get(&self) -> impl Future<Output = Result<Option<LeaderElectionRecord>, Error>> + Send;

    /// Creates the record (none may exist) and remembers its version.
    fn create(
        &self,
        record: &LeaderElectionRecord,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// Replaces the record if it is still at the version this lock last saw, and remembers
    /// the new version; [`Error::Conflict`] otherwise.
    fn update(
        &self,
        record: &LeaderElectionRecord,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// This candidate's identity: unique among all candidates of the election, never empty.
    fn identity(&self) -> &str;

    /// The lock, for logs (`namespace/name` for a Lease).
    fn describe(&self) -> String;
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// [`Lock`] made object safe, so the elector is not generic over its lock.
pub(crate) trait DynLock: Send + Sync {
    fn get(&self) -> BoxFuture<'_, Result<Option<LeaderElectionRecord>, Error>>;
    fn create<'a>(&'a self, record: &'a LeaderElectionRecord) -> BoxFuture<'a, Result<(), Error>>;
    fn update<'a>(&'a self, record: &'a LeaderElectionRecord) -> BoxFuture<'a, Result<(), Error>>;
    fn identity(&self) -> &str;
    fn describe(&self) -> String;
}

impl<L: Lock> DynLock for L {
    fn get(&self) -> BoxFuture<'_, Result<Option<LeaderElectionRecord>, Error>> {
        Box::pin(Lock::get(self))
    }

    fn create<'a>(&'a self, record: &'a LeaderElectionRecord) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(Lock::create(self, record))
    }

    fn update<'a>(&'a self, record: &'a LeaderElectionRecord) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(Lock::update(self, record))
    }

    fn identity(&self) -> &str {
        Lock::identity(self)
    }

    fn describe(&self) -> String {
        Lock::describe(self)
    }
}

/// The elector's boxed lock, a [`Lock`] again for [`LeaseAttempt`](crate::LeaseAttempt).
pub(crate) struct BoxedLock(pub(crate) Box<dyn DynLock>);

impl Lock for BoxedLock {
    async fn get(&self) -> Result<Option<LeaderElectionRecord>, Error> {
        self.0.get().await
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<(), Error> {
        self.0.create(record).await
    }

    async fn update(&self, record: &LeaderElectionRecord) -> Result<(), Error> {
        self.0.update(record).await
    }

    fn identity(&self) -> &str {
        self.0.identity()
    }

    fn describe(&self) -> String {
        self.0.describe()
    }
}
