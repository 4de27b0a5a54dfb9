//! The base queue's mutex and condition variables: parking_lot's, or loom's under
//! `--cfg kinformer_loom`.
//!
//! parking_lot rather than std: in the one-producer/one-worker benchmark std's futex mutex
//! made a system call on most unlocks once the two threads contended (its "contended" state
//! sticks until the next unlock), roughly halving throughput; parking_lot's unlock only
//! enters the kernel when a thread is actually parked. It is already in the dependency tree
//! (governor, dashmap). It has no poisoning, which suits us: no code of ours panics while
//! holding these locks, and a panicking user storage must not turn every later call into a
//! panic.
//!
//! Only the base queue's locks are modelled under loom: they carry every invariant the model
//! check proves (one holder per item, no lost item, drain ends).

#[cfg(kinformer_loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(kinformer_loom))]
pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};

/// Locks `mutex`.
#[cfg(not(kinformer_loom))]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock()
}

/// Waits on `condvar`, giving the guard back.
#[cfg(not(kinformer_loom))]
pub(crate) fn wait<'a, T>(condvar: &Condvar, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(&mut guard);
    guard
}

/// Locks `mutex`, ignoring poisoning.
#[cfg(kinformer_loom)]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits on `condvar`, ignoring poisoning.
#[cfg(kinformer_loom)]
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
