//! The queue between reflector and informer: DeltaFIFO and the in-order FIFO behind one trait.
//!
//! The reflector writes what it lists and watches through kinformer-core's
//! [`Sink`](kinformer_core::Sink); the informer pops through [`FifoQueue`], applies each
//! item to its store and tells its handlers. Two queues implement both traits:
//!
//! ```
//! use std::sync::Arc;
//! use kinformer_core::{DeltaType, ListPart, MetaObject, Sink};
//! use kinformer_deltafifo::{DeltaFifo, FifoQueue, InOrderFifo, Item};
//!
//! struct Pod { name: &'static str, phase: &'static str }
//! impl MetaObject for Pod {
//!     fn object_name(&self) -> Option<&str> { Some(self.name) }
//!     fn object_namespace(&self) -> Option<&str> { Some("default") }
//!     fn object_resource_version(&self) -> Option<&str> { None }
//! }
//! let pod = |name, phase| Arc::new(Pod { name, phase });
//!
//! // The informer's side, written once against the trait.
//! fn drain(queue: &dyn FifoQueue<Pod>) -> Vec<String> {
//!     let mut seen = Vec::new();
//!     while !queue.is_empty() {
//!         // Processed (towards `has_synced`) when `popped` is dropped.
//!         let popped = queue.pop().expect("not closed");
//!         match popped.item() {
//!             Item::Deltas { key, deltas } => {
//!                 let kinds: Vec<_> = deltas.iter().map(|d| d.kind.as_str()).collect();
//!                 seen.push(format!("{key}: {}", kinds.join(",")));
//!             }
//!             other => seen.push(other.kind().to_string()),
//!         }
//!     }
//!     seen
//! }
//!
//! // DeltaFIFO: one pop per key, with everything that happened to it.
//! let fifo = DeltaFifo::new(None);
//! fifo.replace(ListPart::whole(vec![pod("web", "Pending")], "100"))?;
//! fifo.update(pod("db", "Running"))?;
//! fifo.update(pod("web", "Running"))?;
//! assert_eq!(drain(&fifo), ["default/web: Replaced,Updated", "default/db: Updated"]);
//! assert!(fifo.has_synced());
//!
//! // In-order FIFO (per-object mode, batches of 1): one pop per event, in arrival order.
//! let fifo = InOrderFifo::builder().batch_size(1).build()?;
//! fifo.replace(ListPart::whole(vec![pod("web", "Pending")], "100"))?;
//! fifo.update(pod("db", "Running"))?;
//! fifo.update(pod("web", "Running"))?;
//! assert_eq!(
//!     drain(&fifo),
//!     ["default/web: Replaced", "default/db: Updated", "default/web: Updated"]
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Which FIFO
//!
//! **[`DeltaFifo`]** is the queue the reference article describes (client-go's
//! `DeltaFIFO`). It gathers the deltas of each key in one list and pops keys in the order
//! they were first queued, so a busy key is handled once per pop with its full history
//! (consecutive deletes collapsed). The price: keys are reordered against each other (an
//! update of `b` queued after an update of `a` can be popped first, if `b` was already in
//! line), and a relist becomes unrelated per-key deltas mixed with whatever was queued.
//!
//! **[`InOrderFifo`]** is client-go's `RealFIFO`, the default since client-go v1.33: one
//! entry per event, popped in global arrival order, nothing coalesced. In per-object mode
//! a relist queues its tombstones before its objects, so the store never holds a deleted
//! object next to its successor. In atomic mode (client-go v1.36's default) a relist is a
//! single [`Item::ReplacedAll`] and a resync a single [`Item::SyncAll`], which the informer
//! applies as one store transaction, and the FIFO never reads the store. Pops hand out
//! batches of up to 1000 events on distinct keys, which the informer can apply as one
//! transaction too.
//!
//! Pick the in-order FIFO (atomic) for new informers: readers never see a half-applied
//! relist, and events keep their order across keys. Pick the DeltaFIFO when a consumer
//! wants a key's whole history per pop, or for behaviour identical to older client-go
//! informers.
//!
//! The informer does not care which: both are [`FifoQueue`]s, and so is any type of yours
//! that implements it.
//!
//! # Lock structure, and what is held while processing
//!
//! Each FIFO has one mutex (parking_lot's; it does not poison) around all of its state:
//! the queue, the per-key lists, the initial-list counts, the in-flight keys and the
//! wakers of waiting pops. Every write holds it for a few map and queue operations. Keys
//! are computed and objects transformed before the lock is taken, so that a bad object
//! fails without touching the queue and a costly transform does not stall pops; the one
//! exception is a DeltaFIFO delete, which must know whether it is kept before it
//! transforms. Replace, resync and a DeltaFIFO delete also read the
//! [`KnownObjects`](kinformer_core::KnownObjects) view of the store while holding it.
//! Wakers are woken after it is released.
//!
//! **Nothing is held while the item is processed.** A pop takes the item out under the
//! lock and returns it as a [`Popped`] loan; the informer applies it with no FIFO lock
//! held, so the reflector keeps writing meanwhile. client-go instead runs the processing
//! function under the FIFO's lock, for one reason: replace, resync and delete read the
//! store, and must not see it halfway through an item (a key popped but not yet stored
//! would get no tombstone on a relist and stay in the store forever; a resync would queue
//! the stored, older object behind the newer one being applied and roll it back). Here,
//! the FIFO instead remembers the keys **in flight** (popped, not yet done) with the newest
//! delta popped for each. While a key is in flight, replace, resync and delete decide from
//! that delta, which is what the store will hold once the item is applied, and do not
//! read the store for it. Every decision is therefore the one client-go would make had the
//! processing finished first; the consistency argument needs only that the store changes
//! nothing but what the informer applies from popped items.
//!
//! Dropping the [`Popped`] (or [`Popped::finish`]) retakes the lock briefly, to clear the
//! in-flight keys and count the item towards [`has_synced`](FifoQueue::has_synced), which
//! therefore turns true only once the last item of the initial list is *applied*, not just
//! popped. Two rules follow for the consumer: drop the item after applying it, and after
//! releasing any lock the known-objects view takes (the reflector's replace holds the
//! FIFO's lock and then takes the view's; dropping while holding the view's would invert
//! the order).
//!
//! Pops are for one consumer, as in client-go. A waiting pop registers a waker: the
//! blocking [`FifoQueue::pop`] parks its thread, [`FifoQueue::pop_async`] returns
//! `Pending`, so it never blocks a tokio worker. Unlike client-go's unlock-while-processing
//! mode, a long queue does not slow the reflector down: memory is the limit.
//!
//! # Differences from client-go
//!
//! - A tombstone always carries an object (kinformer-core's
//!   [`DeletedFinalStateUnknown`](kinformer_core::DeletedFinalStateUnknown)): a known key
//!   the store no longer holds when a replace reads it gets no tombstone rather than an
//!   empty one. Replace tombstones queued keys in line order, where client-go uses map
//!   order; ordering across keys is otherwise the same.
//! - A bad object is an [`Error::Key`] and changes nothing: not the queue, not
//!   `has_synced` (client-go's `Add` of an unkeyable object still marks the queue
//!   populated), and a replace with one bad object queues none of the list (client-go's
//!   DeltaFIFO keeps what it queued before the bad one; its atomic RealFIFO queues the bad
//!   object and fails later, in the informer).
//! - The transform runs before the lock is taken, except in a DeltaFIFO delete.
//! - [`DeltaFifo`] queues `Replaced` on replace by default (client-go's informers ask for
//!   it; its `DeltaFIFOOptions` default is `Sync`): see
//!   [`DeltaFifoBuilder::emit_replaced`].
//! - The per-object [`InOrderFifo`] takes an optional known-objects view (client-go
//!   requires one); its batch size is a builder option.
//! - `has_synced` turns true when the last initial item has been processed, not popped.
//! - After `close`, writes fail with [`kinformer_core::Error::Closed`] (the `Sink` contract;
//!   client-go accepts them), so that the reflector of a stopped informer stops.
//! - The [`InOrderFifo`] takes the first list in parts as it arrives
//!   (its [`Sink::replace`](kinformer_core::Sink::replace), rule 52), in atomic mode too,
//!   so the informer caches the first pages while the last ones are fetched and never
//!   holds the whole decoded list at once; client-go queues the whole list at its end, in
//!   atomic mode as one store transaction. `has_synced` still waits for the list's end.
//!   Relists come whole.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod common;
mod delta_fifo;
mod error;
mod in_order;
mod item;
mod queue;

pub use common::FifoBuilder;
pub use delta_fifo::{DeltaFifo, DeltaFifoBuilder, DeltaFifoOptions};
pub use error::Error;
pub use in_order::{DEFAULT_BATCH_SIZE, InOrderFifo, InOrderFifoBuilder, InOrderFifoOptions};
pub use item::{Item, PopDone, Popped};
pub use kinformer_core::{KeyFunc, TransformFn, forward_sink};
pub use queue::{FifoQueue, PopFuture};
