//! Object keys, tombstones, deltas, the sink trait and the clock that kinformer's layers share.
//!
//! This crate plays the part `tower-service` plays for tower: small, stable and free of
//! runtimes. It has no tokio and no Kubernetes client; the optional `kube` feature only
//! implements [`MetaObject`] for every `kube_core::Resource`, and the optional `tokio` feature
//! only adds `TokioClock`. (The real clock's sleeps are futures that any executor polls,
//! woken by one timer thread; see [`clock`].)
//!
//! - [`ObjectKey`]: the `namespace/name` (or cluster-scoped `name`) key of client-go's
//!   `MetaNamespaceKeyFunc`, with [`split_key`] for the reverse direction.
//! - [`DeletedFinalStateUnknown`]: the tombstone handed out when a deletion was missed.
//! - [`Delta`] / [`DeltaType`]: what the FIFOs queue per key.
//! - [`Sink`]: what the reflector writes through (add, update, delete, replace, resync,
//!   bookmark), so that it can feed a DeltaFIFO, an in-order FIFO or any store.
//! - [`KnownObjects`]: the read-only view of the informer's store that the FIFOs consult
//!   for tombstones on relist and for resync.
//! - [`Clock`]: the one clock of the workqueue, the event recorder, the leader elector, the
//!   reflector and the informer, with [`RealClock`], `TokioClock` (feature `tokio`) and a
//!   [`FakeClock`] for tests (module [`clock`]).
//!
//! ```
//! use kinformer_core::{split_key, ObjectKey};
//!
//! let key = ObjectKey::new(Some("default"), "web-0")?;
//! assert_eq!(key.as_str(), "default/web-0");
//! assert_eq!(split_key(key.as_str())?, (Some("default"), "web-0"));
//!
//! let node = ObjectKey::new(None, "node-1")?;
//! assert_eq!(node.as_str(), "node-1");
//! assert_eq!(node.namespace(), None);
//!
//! assert!(split_key("a/b/c").is_err());
//! # Ok::<(), kinformer_core::Error>(())
//! ```
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod clock;
mod delta;
mod error;
pub mod forward;
mod key;
mod known;
mod object;
mod sink;
mod util;

#[cfg(feature = "tokio")]
pub use clock::TokioClock;
pub use clock::{
    Clock, FakeClock, RealClock, Sleep, TimeListener, sleep_at_real_rate, wall_time_at,
};
pub use delta::{DeletedFinalStateUnknown, DeletedObject, Delta, DeltaObject, DeltaType};
pub use error::Error;
pub use key::{ObjectKey, deletion_handling_key, meta_namespace_key, split_key};
pub use known::{KnownObjects, holds_version};
pub use object::MetaObject;
pub use sink::{ListPart, Listed, Sink, TransformFn, Unchanged, WholeList};
pub use util::{BoxError, BoxFuture, ErrorChain, KeyFunc, panic_message};
