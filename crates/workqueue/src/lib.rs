//! client-go's work queue: a deduplicating queue, a delaying queue, a rate-limited queue and their rate limiters, and controller-runtime's priority queue, usable on its own.
//!
//! ```
//! use std::thread;
//! use kinformer_workqueue::{default_controller_rate_limiter, Queue, RateLimitingQueue, RateLimitingWorkQueue};
//!
//! let queue = RateLimitingWorkQueue::new(default_controller_rate_limiter());
//! let workers: Vec<_> = (0..2)
//!     .map(|_| {
//!         let queue = queue.clone();
//!         thread::spawn(move || {
//!             let mut handled = 0;
//!             while let Some(key) = queue.get() {
//!                 // reconcile(&key) succeeded: stop tracking its failures, then mark it done.
//!                 queue.forget(&key);
//!                 queue.done(&key);
//!                 handled += 1;
//!             }
//!             handled
//!         })
//!     })
//!     .collect();
//! for key in ["default/a", "default/b", "default/a"] {
//!     queue.add(key.to_string()); // the second "default/a" is deduplicated while queued
//! }
//! queue.shut_down_with_drain();
//! let handled: usize = workers.into_iter().map(|worker| worker.join().unwrap()).sum();
//! assert!(handled == 2 || handled == 3); // 3 if a worker took "default/a" before its re-add
//! ```
//!
//! # The layers
//!
//! Three queues wrap one another the way tower layers wrap a service; each is a trait with
//! one default implementation, and each default implementation wraps *any* implementation of
//! the layer beneath:
//!
//! | trait                 | default                   | adds                                                  |
//! | --------------------- | ------------------------- | ----------------------------------------------------- |
//! | [`Queue`]             | [`WorkQueue`]             | dedup, dirty/processing sets, blocking and async get, shutdown and drain |
//! | [`DelayingQueue`]     | [`DelayingWorkQueue`]     | `add_after`, earliest ready time wins                 |
//! | [`RateLimitingQueue`] | [`RateLimitingWorkQueue`] | `add_rate_limited`, `forget`, `num_requeues`          |
//!
//! [`PriorityWorkQueue`] is the three layers over a [`PriorityStorage`] (it implements the
//! three traits), with controller-runtime's order: see "Priorities" below.
//!
//! Why traits: a controller's worker loop is written against the trait, so a test can hand
//! it a fake, and a layer can be replaced alone (a delaying queue on another timer, a queue
//! with another ordering) without touching the others. The traits are object safe (`&dyn
//! RateLimitingQueue<K>` works), which is why [`Queue::get_async`] returns a concrete
//! [`GetFuture`] rather than an `impl Future`.
//!
//! The other swap points:
//!
//! - [`QueueStorage`]: the order in which queued items are handed out. [`FifoStorage`] is
//!   client-go's; [`PriorityStorage`] orders by priority (higher first, FIFO within a
//!   priority), fed by [`Queue::add_with_priority`] ([`WorkQueue::with_priorities`] also
//!   reports the depth by priority). Storages hold items wrapped in [`Queued`] (which they
//!   read but cannot copy).
//! - [`RateLimiter`]: how long a retry waits. [`ItemExponentialFailureRateLimiter`],
//!   [`ItemFastSlowRateLimiter`], [`BucketRateLimiter`], [`MaxOfRateLimiter`],
//!   [`WithMaxWaitRateLimiter`], and [`default_controller_rate_limiter`] =
//!   max(exponential 5 ms..1000 s, bucket 10 qps burst 100).
//! - [`Clock`]: where time comes from. [`RealClock`] by default; [`FakeClock`] for tests and
//!   trace replay, moved with [`FakeClock::step`] / [`FakeClock::set`]. Both are
//!   kinformer-core's (re-exported here), the same clock that the event recorder and the
//!   leader elector take, so one fake clock drives a queue and them together.
//! - [`MetricsProvider`]: client-go's seven metrics, recorded only for a named queue;
//!   [`NoopMetricsProvider`], and `PrometheusMetricsProvider` with the `prometheus` feature.
//!
//! Items are any `T: Clone + Eq + Hash + Send + Sync + 'static` (see [`Item`]); usually an
//! object key: kinformer-core's `ObjectKey` (an `Arc<str>`, cheap to clone), or a `String`.
//!
//! # Priorities
//!
//! A controller that starts, or resyncs, queues every object it watches. Behind a FIFO a
//! change made a moment later waits for all of them: after an initial list of 10,000 keys it
//! is the 10,001st `get`, about a second of two workers' time at 100 µs a reconcile, where
//! the priority queue hands it out next (BENCHMARKS.md, "workqueue priority").
//! controller-runtime v0.23 therefore makes a priority queue its controllers' default and
//! has its handlers add the initial list's and resyncs' events (an update whose
//! resourceVersion did not change) at `LowPriority`, [`LOW_PRIORITY`] here, and everything
//! else at 0.
//!
//! [`PriorityWorkQueue`] is that queue: higher priority first, FIFO among equal priorities by
//! when each item became ready at its priority, one queued entry per item with the higher
//! priority of its adds; with the same rate limiters, [`Clock`] and metrics as the other
//! queues (its depth labelled by priority where the provider supports it). The priority calls
//! are on the traits ([`Queue::add_with_priority`], [`Queue::get_with_priority`],
//! [`DelayingQueue::add_after_with_priority`],
//! [`RateLimitingQueue::add_rate_limited_with_priority`]), so code written against
//! `RateLimitingQueue` uses priorities when its queue has them, and loses nothing when it
//! does not. The layers carry them: [`WorkQueue`] reports the highest priority an item was
//! added at (ordering by it over [`PriorityStorage`], by arrival over the FIFO storage),
//! [`DelayingWorkQueue`] keeps it with a waiting item and adds the item at it when it is
//! ready, and [`RateLimitingWorkQueue`] passes it to the delaying layer. The priority queue
//! is exactly those three layers over [`WorkQueue::with_priorities`], so replacing one of
//! them (the rate limiter, say) keeps the order, the name and the metrics of the others.
//!
//! # One rule for provided methods
//!
//! A trait method of this crate has a default only where the default is exactly what every
//! implementation would do ([`Queue::is_empty`] is `len() == 0`). Every call that carries a
//! priority, and [`Queue::stats`], is required: a default that dropped the priority or the
//! bookkeeping would be silently taken by a decorator that forgot to forward it, and a
//! decorator over the priority queue would reorder a controller's keys without a word. A
//! queue without priorities writes the one-line forms (`add`, priority 0,
//! [`GetFuture::with_priority_zero`], [`QueueStats::basic`]). A decorator writes the calls
//! it changes and forwards the rest with [`forward_queue!`], [`forward_delaying_queue!`],
//! [`forward_rate_limiting_queue!`] and [`forward_rate_limiter!`] (see [`forward`]).
//!
//! Use it for a controller's queue, where an initial list or a resync queues many keys at
//! once and real changes should not wait behind them; keep [`RateLimitingWorkQueue`] where
//! client-go's exact FIFO order is the point (its conformance traces replay it against
//! client-go). A cycle costs more than the FIFO's (a binary heap and a map rather than a
//! ring buffer, BENCHMARKS.md), nothing next to a reconcile.
//!
//! How it differs from controller-runtime's `priorityqueue` (v0.23.0 to v0.23.3, the same
//! code):
//!
//! - Shutdown follows this crate's rules: `get` hands out what is ready, then returns
//!   `None`, and [`Queue::shut_down_with_drain`] waits for held items. controller-runtime's
//!   `Get` returns at once after `ShutDown`, and its `ShutDownWithDrain` is `ShutDown`.
//! - [`Queue::len`] counts the items `get` can hand out now; controller-runtime's also counts
//!   ready items held by a worker and added again.
//! - An add without delay leaves a waiting (delayed or rate-limited) add of the same item in
//!   place: the item is queued now and again when the delay runs out, as with client-go's
//!   delaying queue. controller-runtime keeps one entry per item and makes it ready now, so
//!   a reconcile's `RequeueAfter` followed by an event for the same key is lost there.
//! - Items whose delays run out at the same instant queue in the delaying heap's order
//!   (client-go's); controller-runtime orders them by priority, then by first add.
//! - Adds take effect before `add` returns; controller-runtime buffers them for a goroutine,
//!   so its `Len` and a `Get` racing an `Add` may not see them yet.
//! - Priorities are `i32` (Go's `int`), and there is no batch `AddWithOpts(opts, items...)`:
//!   one call per item, each an `_with_priority` form of the call it replaces.
//!
//! # Design decisions
//!
//! **One mutex per base queue, held briefly.** [`WorkQueue`] keeps its ordering storage, an
//! item table, the counts of sleeping and spinning getters and the parked async wakers
//! behind one parking_lot mutex (it enters the kernel only when a thread is actually parked;
//! std's futex mutex made a system call on most contended unlocks and halved cross-thread
//! throughput). Every call holds it only for a few map and storage operations; thread
//! notifications and `Waker::wake` happen after it is released.
//!
//! **One hash per add and per done, none per get.** The item table is client-go's dirty and
//! processing sets in one: a `HashMap<T, slot index>` (foldhash's seeded hasher) plus a
//! vector of slots, each `Queued`, `Processing` or `ProcessingDirty(priority)` (freed slots
//! are reused). The ordering storage is given each item as a [`Queued`], which carries the
//! item's slot index, so `get` marks the popped item as processing without hashing it
//! again; `add` hashes once (the map's entry API) and `done` once (a removal). `Queued` is
//! not `Clone` and names the queue that made it, so a custom storage cannot make `get` hand
//! one item out twice. Hashing and comparing keys was most of an add+get+done; this cut an
//! `Arc<str>` cycle from about 820 to about 670 instructions.
//!
//! **Waking as few threads as the work needs.** A blocking `get` that finds the queue empty
//! first spins for a few microseconds (watching an atomic copy of the queue length), then
//! sleeps on a condition variable. An add wakes a sleeping thread only when no thread is
//! already on its way (spinning, or notified and not yet running); whoever takes an item
//! wakes the next sleeper if more items are queued. A burst therefore still fans out to
//! every worker, while a stream that one spinning worker keeps up with makes no system call.
//! `get_async` parks a waker in the same state instead of blocking, so it is safe on a tokio
//! worker; each add wakes one parked task, and a dropped future that had been woken passes
//! the wake-up on. Metrics are updated under the same lock (as client-go does) and cost
//! nothing for an unnamed queue.
//!
//! **The delaying layer has its own locks.** Waiting items sit in a min-heap by ready time
//! (client-go's `container/heap`, step for step, so that items due at the same instant leave
//! in client-go's order) plus a map from item to its heap slot, behind a second mutex that
//! `get` and `done` never touch. `add_after` holds it for one lookup and one push. Due items are popped under
//! it and added to the queue beneath after it is released (under a "firing" mutex that only
//! firings take, so batches stay in ready-time order). Lock order, where two are held, is
//! always firing → waiting or firing → queue; nothing holds the queue's lock while taking
//! another.
//!
//! **A timer thread, not a runtime.** On a real clock each [`DelayingWorkQueue`] has one
//! thread that sleeps on a crossbeam channel with a timeout until the earliest ready time
//! (at most 10 s, client-go's heartbeat). `add_after` rings it through a bounded(1) channel
//! only when the new item became the earliest; a full channel means already rung. The thread
//! keeps only a `Weak` reference, so it ends when the queue is shut down or its last handle
//! is dropped (the channel disconnects). A tokio timer would make tokio a required
//! dependency and tie the queue to one runtime; a thread works for thread and task workers
//! alike.
//!
//! **A fake clock drives the delaying queue synchronously.** A [`Clock`] that moves only
//! when told accepts subscribers ([`Clock::subscribe`]). Queues built on a [`FakeClock`]
//! start no thread; `step` and `set` fire every due item before returning. After
//! `clock.step(d)`, [`Queue::len`] already counts what fired: no test sleeps or polls.
//!
//! **Token bucket reservations over governor.** client-go's bucket reserves a token on every
//! call, even one only available later, so a burst past the bucket gets delays 1/qps apart.
//! governor's `check` refuses without reserving; [`BucketRateLimiter`] therefore runs
//! governor's GCRA a second time, at the refused call's earliest possible instant, on a
//! clock adapter that reads our [`Clock`]. See its documentation.
//!
//! **Nothing panics on input.** Huge delays mean "never", exponential backoff is exact
//! integer arithmetic capped at its maximum, `done` of an item never handed out does
//! nothing, adds after shutdown are ignored, and poisoned locks are recovered.
//!
//! # Differences from client-go
//!
//! - `done` of an item that is queued but not held does nothing; client-go would queue it a
//!   second time, letting two workers hold it.
//! - On a fake clock the unfinished-work gauges refresh at every clock step, not every
//!   500 ms of fake time.
//! - `get` returns `Option<T>` (`None` = shut down) instead of `(item, shutdown)`.

mod config;
mod delaying;
mod error;
pub mod forward;
mod limiters;
mod metrics;
mod priority;
#[cfg(feature = "prometheus")]
mod prometheus;
mod queue;
mod rate_limiting;
mod stats;
mod storage;
mod sync;

pub use config::QueueConfig;
pub use delaying::{DelayingQueue, DelayingWorkQueue};
pub use error::Error;
pub use limiters::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, RateLimiter, WithMaxWaitRateLimiter, default_controller_rate_limiter,
    default_controller_rate_limiter_with_clock,
};
pub use metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, NoopMetricsProvider,
    PriorityGaugeMetric, SettableGaugeMetric, set_metrics_provider,
};
pub use priority::{LOW_PRIORITY, PriorityWorkQueue};
#[cfg(feature = "prometheus")]
pub use prometheus::PrometheusMetricsProvider;
pub use queue::{GetFuture, Queue, WorkQueue};
pub use rate_limiting::{RateLimitingQueue, RateLimitingWorkQueue};
pub use stats::QueueStats;
pub use storage::{DEFAULT_FAIR_EVERY, FifoStorage, PriorityStorage, QueueStorage, Queued};

/// The clock is kinformer-core's, shared with the event recorder and the leader elector:
/// one [`FakeClock`] drives them all in a test.
pub use kinformer_core::clock::{Clock, FakeClock, RealClock, Sleep, TimeListener};
/// kinformer-core's forwarding macro for a [`Clock`] decorator.
pub use kinformer_core::forward_clock;

/// What a queue can hold: a cheap-to-compare key, shared between threads.
///
/// Implemented for every `T: Clone + Eq + Hash + Send + Sync + 'static`; never implement it
/// by hand. `Clone` is needed because the queue keeps the item in its table and in its
/// ordering storage (one clone per new add); keep items small (keys, `Arc`s).
pub trait Item: Clone + Eq + std::hash::Hash + Send + Sync + 'static {}

impl<T: Clone + Eq + std::hash::Hash + Send + Sync + 'static> Item for T {}

/// The item tables' map: std's, with foldhash's seeded hasher (several times faster than
/// SipHash on short keys, still randomly seeded per map).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A background thread's name: `prefix-queue name`, without the NUL bytes that would make
/// `std::thread::Builder::spawn` panic.
fn thread_name(prefix: &str, queue: &str) -> String {
    let mut name = String::with_capacity(prefix.len() + 1 + queue.len());
    name.push_str(prefix);
    if !queue.is_empty() {
        name.push('-');
        name.extend(queue.chars().filter(|c| *c != '\0'));
    }
    name
}

/// The traits, for `use kinformer_workqueue::prelude::*`.
pub mod prelude {
    pub use crate::{
        Clock, DelayingQueue, Queue, QueueStorage, Queued, RateLimiter, RateLimitingQueue,
    };
}
