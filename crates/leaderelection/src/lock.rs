//! The swap point: where the leader record lives.

use kinformer_core::BoxFuture;

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
    fn get(&self) -> BoxFuture<'_, Result<Option<LeaderElectionRecord>, Error>>;

    /// Creates the record (none may exist) and remembers its version.
    fn create<'a>(&'a self, record: &'a LeaderElectionRecord) -> BoxFuture<'a, Result<(), Error>>;

    /// Replaces the record if it is still at the version this lock last saw, and remembers
    /// the new version; [`Error::Conflict`] otherwise.
    fn update<'a>(&'a self, record: &'a LeaderElectionRecord) -> BoxFuture<'a, Result<(), Error>>;

    /// This candidate's identity: unique among all candidates of the election, never empty.
    fn identity(&self) -> &str;

    /// The lock, for logs (`namespace/name` for a Lease).
    fn describe(&self) -> String;
}

macro_rules! forward_pointers {
    ($($ty:ty),*) => {$(
        impl<L: Lock + ?Sized> Lock for $ty {
            fn get(&self) -> BoxFuture<'_, Result<Option<LeaderElectionRecord>, Error>> {
                (**self).get()
            }
            fn create<'a>(
                &'a self,
                record: &'a LeaderElectionRecord,
            ) -> BoxFuture<'a, Result<(), Error>> {
                (**self).create(record)
            }
            fn update<'a>(
                &'a self,
                record: &'a LeaderElectionRecord,
            ) -> BoxFuture<'a, Result<(), Error>> {
                (**self).update(record)
            }
            fn identity(&self) -> &str {
                (**self).identity()
            }
            fn describe(&self) -> String {
                (**self).describe()
            }
        }
    )*};
}

forward_pointers!(Box<L>, std::sync::Arc<L>);

/// Forwards [`Lock`](crate::Lock) methods to a field: inside the trait's `impl` for a
/// decorator, `forward_lock!(field: all)` writes every method as a call of the same method on
/// `self.field`; `forward_lock!(field: method, ..)` writes only those named, for a decorator
/// that writes the others itself. `all` is: `get`, `create`, `update`, `identity`, `describe`.
#[macro_export]
macro_rules! forward_lock {
    ($field:tt: all) => {
        $crate::forward_lock!($field: get, create, update, identity, describe);
    };
    ($field:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward_lock!(@method $field, $method);)+
    };
    (@method $f:tt, get) => {
        fn get(&self) -> $crate::BoxFuture<'_, ::std::result::Result<::std::option::Option<$crate::LeaderElectionRecord>, $crate::Error>> {
            self.$f.get()
        }
    };
    (@method $f:tt, create) => {
        fn create<'a>(
            &'a self,
            record: &'a $crate::LeaderElectionRecord,
        ) -> $crate::BoxFuture<'a, ::std::result::Result<(), $crate::Error>> {
            self.$f.create(record)
        }
    };
    (@method $f:tt, update) => {
        fn update<'a>(
            &'a self,
            record: &'a $crate::LeaderElectionRecord,
        ) -> $crate::BoxFuture<'a, ::std::result::Result<(), $crate::Error>> {
            self.$f.update(record)
        }
    };
    (@method $f:tt, identity) => {
        fn identity(&self) -> &str {
            self.$f.identity()
        }
    };
    (@method $f:tt, describe) => {
        fn describe(&self) -> ::std::string::String {
            self.$f.describe()
        }
    };
}
