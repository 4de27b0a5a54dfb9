//! The [`Controller`] runner: a rate-limited workqueue, N workers and a reconcile function,
//! plus what feeds the queue: [`watch`](Controller::watch) for the primary resource,
//! [`owns`](Controller::owns) and [`watches`](Controller::watches) for related ones.
//!
//! Event handlers put keys into the controller's [`queue`](Controller::queue); workers take
//! them out one at a time and call the reconcile function, exactly as client-go's
//! `processNextWorkItem` does:
//!
//! ```text
//! key = get()                       (None: the queue is shut down and empty → worker ends)
//! match reconcile(key, context)
//!     Ok(Action::Done)            → forget(key)                    (clear the rate limiter's memory)
//!     Ok(Action::RequeueAfter(d)) → forget(key); add_after(key, d)
//!     Err / panic / timeout       → add_rate_limited(key) + warn!  (or forget + drop after max_retries)
//! done(key)                         (always: the key may now be handed out again)
//! ```
//!
//! The queue guarantees that a key is held by at most one worker at a time, so reconcile
//! never runs twice at once for the same key, while different keys run in parallel.
//!
//! The reconcile function gets the key and a [`Context`]: the value given to
//! [`run`](Controller::run) (clients, listers, configuration: whatever the controller
//! needs), shared by every call, and a cancellation token that fires when the controller is
//! told to stop, so a long reconcile can give up early.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::time::Duration;
//! use kinformer_controller::controller::{Action, Context, Controller};
//! use kinformer_core::ObjectKey;
//! use kinformer_workqueue::Queue;
//! use tokio_util::sync::CancellationToken;
//!
//! /// What every reconcile needs; here only a counter.
//! struct State {
//!     seen: AtomicUsize,
//!     done: tokio::sync::mpsc::UnboundedSender<ObjectKey>,
//! }
//!
//! async fn reconcile(key: ObjectKey, ctx: Context<State>) -> Result<Action, std::convert::Infallible> {
//!     // Read the object from an informer's lister, act, return the outcome.
//!     ctx.seen.fetch_add(1, Ordering::SeqCst);
//!     let _ = ctx.done.send(key);
//!     Ok(Action::Done) // or Action::RequeueAfter(Duration::from_secs(60)) to look again later
//! }
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let controller = Controller::<ObjectKey>::new("pods").workers(2);
//! // In a program an event handler does this (a plain sync call, fine on listener threads).
//! let queue = Arc::clone(controller.queue());
//! queue.add(ObjectKey::parse("default/web-0")?);
//! queue.add(ObjectKey::parse("default/web-1")?);
//!
//! let (done, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
//! let state = State { seen: AtomicUsize::new(0), done };
//! let cancel = CancellationToken::new();
//! let run = tokio::spawn(controller.run(reconcile, state, cancel.clone()));
//! done_rx.recv().await;
//! done_rx.recv().await;
//! cancel.cancel(); // shut the queue down, drain it, wait for the workers
//! run.await?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Shutdown
//!
//! Cancelling [`run`](Controller::run)'s token cancels every reconcile's
//! [`Context::cancellation`] and calls the queue's
//! [`shut_down_with_drain`](Queue::shut_down_with_drain) on a blocking-pool thread (it
//! blocks until every in-flight key is done, so it never runs on a Tokio worker): adds are
//! ignored from then on, and the workers keep taking the keys still queued (client-go's
//! semantics) until the queue is empty. `run` returns once every worker has ended. A
//! shutdown of the queue by anyone else ends the workers the same way. A reconcile that
//! never returns keeps `run` from returning.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use kinformer_core::{BoxError, ErrorChain};
use kinformer_workqueue::{
    Item, PriorityWorkQueue, Queue, QueueConfig, RateLimiter, RateLimitingQueue,
    default_controller_rate_limiter,
};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

mod action;
mod context;
#[cfg(feature = "kube")]
mod elected;
pub mod fresh;
mod handlers;
pub(crate) mod observer;
mod runnable;
#[cfg(feature = "kube")]
mod sharded;

pub use action::Action;
pub use context::Context;
pub use fresh::CacheProgress;
pub use handlers::{EnqueueKeys, EnqueueMapped, Registered, WithPredicate};
#[cfg(feature = "kube")]
pub use handlers::{Owned, OwnsError};
use observer::{Observer, Outcome};
pub use runnable::Runnable;
#[cfg(feature = "kube")]
pub use sharded::HeldShard;

/// The name a [`Controller`] built by [`with_queue`](Controller::with_queue) has until
/// [`name`](Controller::name) sets another.
pub const DEFAULT_CONTROLLER_NAME: &str = "controller";

/// A rate-limited workqueue plus N worker tasks running a reconcile function: the worker
/// loop every client-go controller writes by hand.
///
/// `T` is the queue item, usually an [`ObjectKey`](kinformer_core::ObjectKey); `Q` is any
/// [`RateLimitingQueue`], by default a [`PriorityWorkQueue`] (controller-runtime v0.23's
/// default: the initial list and resyncs queue at
/// [`LOW_PRIORITY`](kinformer_workqueue::LOW_PRIORITY), so a change is reconciled before
/// them) with client-go's [`default_controller_rate_limiter`].
/// [`with_rate_limiter`](Controller::with_rate_limiter) swaps only the rate limiter (the
/// queue, its order and its metrics stay); [`with_queue`](Controller::with_queue) swaps the
/// whole queue: a [`RateLimitingWorkQueue`](kinformer_workqueue::RateLimitingWorkQueue) there
/// is client-go's plain FIFO, without priorities, and without metrics unless it is named
/// (`QueueConfig::name`). Configure with the builder methods, hand
/// [`queue`](Controller::queue) to the event handlers, then [`run`](Controller::run). See the
/// [module docs](self) for the loop and the shutdown.
pub struct Controller<T, Q = PriorityWorkQueue<T>> {
    queue: Arc<Q>,
    config: ControllerConfig,
    /// The caches of the primary resource, registered by `watch`, read by `owns`.
    #[cfg(feature = "kube")]
    primaries: handlers::Primaries,
    _item: PhantomData<fn(T) -> T>,
}

/// A [`Controller`]'s settings, each set by the builder method of the same name and read
/// through [`Controller::config`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ControllerConfig {
    /// The name in every `reconcile` span and log line (field `controller`).
    pub name: String,
    /// How many workers reconcile concurrently (at least one).
    pub workers: usize,
    /// After how many failures in a row a key is dropped; `None`: never.
    pub max_retries: Option<usize>,
    /// How long a key waits, at most, for the writes its reconciles reported to reach their
    /// caches ([`Context::wrote`]).
    pub read_your_writes_timeout: Duration,
    /// How long one reconcile may run before it is dropped and counted as failed; `None`
    /// (the default, as controller-runtime's): as long as it takes.
    pub reconcile_timeout: Option<Duration>,
}

impl<T, Q> fmt::Debug for Controller<T, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<T: Item> Controller<T> {
    /// A controller named `name` over a new [`PriorityWorkQueue`] of the same name (the
    /// name labels the queue's metrics and the `reconcile` spans), rate limited by
    /// [`default_controller_rate_limiter`] (per item 5 ms doubling up to 1000 s, overall
    /// 10 per second with a burst of 100). One worker, unlimited retries.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        let queue = PriorityWorkQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig::new().name(name.clone()),
        );
        Self::with_queue(queue).name(name)
    }
}

impl<T: Item, R: RateLimiter<T> + 'static> Controller<T, PriorityWorkQueue<T, R>> {
    /// [`new`](Controller::new) with another rate limiter: the same
    /// [`PriorityWorkQueue`] named `name` (so the same order and the same metrics), retrying
    /// failed keys after the delays `limiter` gives. The way to swap the rate limiter and
    /// nothing else; [`with_queue`](Controller::with_queue) swaps the whole queue.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kinformer_controller::controller::Controller;
    /// use kinformer_core::ObjectKey;
    /// use kinformer_workqueue::{ItemExponentialFailureRateLimiter, Queue};
    ///
    /// let limiter = ItemExponentialFailureRateLimiter::new(
    ///     Duration::from_millis(50),
    ///     Duration::from_secs(60),
    /// );
    /// let controller = Controller::<ObjectKey, _>::with_rate_limiter("widgets", limiter);
    /// assert_eq!(controller.queue().stats().name, "widgets");
    /// ```
    pub fn with_rate_limiter(name: impl Into<String>, limiter: R) -> Self {
        let name = name.into();
        let queue = PriorityWorkQueue::with_config(limiter, QueueConfig::new().name(name.clone()));
        Self::with_queue(queue).name(name)
    }
}

impl<T: Item, Q: RateLimitingQueue<T> + 'static> Controller<T, Q> {
    /// A controller over `queue` (for a custom rate limiter, clock or queue
    /// implementation), named [`DEFAULT_CONTROLLER_NAME`]. One worker, unlimited retries.
    pub fn with_queue(queue: Q) -> Self {
        Self::with_shared_queue(Arc::new(queue))
    }

    /// [`with_queue`](Controller::with_queue) for a queue already shared behind an `Arc`.
    pub fn with_shared_queue(queue: Arc<Q>) -> Self {
        Self {
            queue,
            config: ControllerConfig {
                name: DEFAULT_CONTROLLER_NAME.to_owned(),
                workers: 1,
                max_retries: None,
                read_your_writes_timeout: fresh::DEFAULT_READ_YOUR_WRITES_TIMEOUT,
                reconcile_timeout: None,
            },
            #[cfg(feature = "kube")]
            primaries: handlers::Primaries::default(),
            _item: PhantomData,
        }
    }

    /// Sets the name recorded in every `reconcile` span and log line (field `controller`).
    /// It does not rename the queue: a queue's name is fixed when it is built.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.config.name = name.into();
        self
    }

    /// Sets how many workers reconcile concurrently (each a Tokio task). Zero is clamped to
    /// one: a controller without workers would only fill its queue, and a builder must not
    /// panic on a bad count.
    pub fn workers(mut self, workers: usize) -> Self {
        self.config.workers = workers.max(1);
        self
    }

    /// Drops a key after it failed `max_retries` times in a row: instead of re-queuing it,
    /// the worker calls [`forget`](RateLimitingQueue::forget) and logs the drop (client-go
    /// controllers' usual `if queue.NumRequeues(key) < maxRetries`). The key comes back with
    /// the next event for it. `0` drops at the first failure. Unlimited by default.
    pub fn max_retries(mut self, max_retries: usize) -> Self {
        self.config.max_retries = Some(max_retries);
        self
    }

    /// Bounds how long a key waits for its reconciles' reported writes to reach their caches
    /// before it is reconciled anyway (default 10 s; see [`Context::wrote`] and [`fresh`]).
    pub fn read_your_writes_timeout(mut self, timeout: Duration) -> Self {
        self.config.read_your_writes_timeout = timeout;
        self
    }

    /// Gives each reconcile at most `timeout` (controller-runtime's `ReconciliationTimeout`):
    /// past it, the reconcile's future is dropped (so it stops at the `.await` it was
    /// waiting on), its [`Context::cancellation`] is cancelled (for tasks it spawned with a
    /// clone of the context), and the key is re-queued rate limited as after an error
    /// (counted against [`max_retries`](Self::max_retries), and with the `prometheus`
    /// feature in `controller_runtime_reconcile_timeouts_total` as well as the errors).
    ///
    /// controller-runtime only cancels the reconcile's `context.Context` and waits for the
    /// reconcile to notice; a Rust future can be dropped, so a reconcile stuck on an
    /// `.await` (a call with no timeout of its own) is stopped too. A reconcile that blocks
    /// its thread without awaiting cannot be stopped, and no timeout applies by default.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kinformer_controller::controller::Controller;
    /// use kinformer_core::ObjectKey;
    ///
    /// let controller = Controller::<ObjectKey>::new("widgets").reconcile_timeout(Duration::from_secs(60));
    /// assert_eq!(controller.config().reconcile_timeout, Some(Duration::from_secs(60)));
    /// ```
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.config.reconcile_timeout = Some(timeout);
        self
    }

    /// The queue: give a clone of the `Arc` to the event handlers, which
    /// [`add`](Queue::add) keys to it (a plain sync call, fine on listener threads).
    pub fn queue(&self) -> &Arc<Q> {
        &self.queue
    }

    /// The settings: name, workers, retry limit, reconcile timeout.
    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// Starts the workers on the current Tokio runtime and runs until `cancel` is cancelled
    /// (or the queue is shut down by someone else), then shuts the queue down, lets the
    /// workers drain what is still queued, and returns once every worker has ended.
    ///
    /// `reconcile` is called with each key and a [`Context`] around `context` (shared by
    /// every call: put clients, listers and settings in it; `()` for none). Each call runs
    /// inside a `reconcile` span (fields `controller`, `key`). `Ok(Action::Done)` forgets
    /// the key; `Ok(Action::RequeueAfter(d))` forgets it and adds it back after `d`; an
    /// `Err` or a panic (caught per key; the worker goes on) re-queues it rate limited and
    /// logs a warning with the key, the error with its causes and `num_requeues` (the
    /// retries counted so far, this one included). The error can be any error type, or a
    /// `String` / `&str`. Every key handed out is marked done.
    ///
    /// Must be called from within a Tokio runtime (it spawns tasks). Dropping the returned
    /// future instead of cancelling aborts the workers at their next `.await` (a key being
    /// reconciled is queued again and marked done) but leaves the queue open.
    ///
    /// Several replicas, one acting: [`run_elected`](Self::run_elected) (feature `kube`).
    pub async fn run<C, F, Fut, E>(self, reconcile: F, context: C, cancel: CancellationToken)
    where
        T: fmt::Display,
        C: Send + Sync + 'static,
        F: Fn(T, Context<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        self.into_runnable(reconcile, context).run(cancel).await;
    }

    /// The workers' shared state, and how many workers to start.
    fn into_worker<F, C>(self, reconcile: F) -> (Arc<Worker<T, Q, F, C>>, usize) {
        let ControllerConfig {
            name,
            workers,
            max_retries,
            read_your_writes_timeout,
            reconcile_timeout,
        } = self.config;
        let observer = Observer::new(&name, workers);
        let worker = Worker {
            queue: self.queue,
            name,
            max_retries,
            reconcile_timeout,
            reconcile,
            observer,
            pending: fresh::Pending::new(read_your_writes_timeout),
            _item: PhantomData,
        };
        (Arc::new(worker), workers)
    }
}

/// Awaits every task of `workers`, logging any that ended abnormally (not those aborted).
async fn join_all(workers: &mut JoinSet<()>, name: &str) {
    while let Some(result) = workers.join_next().await {
        if let Err(err) = result
            && !err.is_cancelled()
        {
            tracing::error!(controller = %name, error = %ErrorChain(&err), "controller worker ended abnormally");
        }
    }
}

/// What the workers do once told to stop.
#[derive(Clone, Copy)]
enum Stop {
    /// Shut the queue down, keep reconciling what is queued, return when it is drained
    /// (client-go's `ShutDownWithDrain`).
    Drain,
    /// Take no more keys; reconciles in flight get this long to return, then are aborted
    /// (their keys queued again). The queue stays as it is, for the next term. Only terms
    /// (`run_elected`, `run_shard`: feature `kube`) halt.
    #[cfg_attr(not(feature = "kube"), allow(dead_code))]
    Halt(Duration),
}

/// What a worker task shares with the others.
struct Worker<T, Q, F, C> {
    queue: Arc<Q>,
    name: String,
    max_retries: Option<usize>,
    reconcile_timeout: Option<Duration>,
    reconcile: F,
    observer: Observer,
    /// Writes reported by reconciles that their caches have not shown yet, per key.
    pending: fresh::Pending<T>,
    _item: PhantomData<fn(T, C) -> T>,
}

/// Marks the key done when dropped, so `done` runs even if the reconcile is aborted (a
/// stop that could not wait, a dropped `run` future); a key whose reconcile did not finish
/// is queued again first, so that it is not lost.
struct DoneGuard<'a, T: Item, Q: Queue<T>> {
    queue: &'a Q,
    key: &'a T,
    /// The priority the key was handed out with, which it is queued again at.
    priority: i32,
    finished: bool,
}

impl<T: Item, Q: Queue<T>> Drop for DoneGuard<'_, T, Q> {
    fn drop(&mut self) {
        if !self.finished {
            self.queue
                .add_with_priority(self.key.clone(), self.priority);
        }
        self.queue.done(self.key);
    }
}

impl<T, Q, F, C, Fut, E> Worker<T, Q, F, C>
where
    T: Item + fmt::Display,
    Q: RateLimitingQueue<T> + 'static,
    C: Send + Sync + 'static,
    F: Fn(T, Context<C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: Into<BoxError>,
{
    /// Runs `count` workers with `context` until `stop` fires or the queue is shut down
    /// elsewhere (and drained), then stops them as `how` says.
    async fn run_term(
        self: &Arc<Self>,
        count: usize,
        context: Context<C>,
        stop: &CancellationToken,
        how: Stop,
    ) {
        // Halting workers stop taking keys the moment `stop` fires; draining ones go on.
        let halt = match how {
            Stop::Halt(_) => stop.child_token(),
            Stop::Drain => CancellationToken::new(),
        };
        let mut workers = JoinSet::new();
        for id in 0..count {
            let (worker, context, halt) = (Arc::clone(self), context.clone(), halt.clone());
            workers.spawn(async move { worker.run(id, &context, &halt).await });
        }
        tokio::select! {
            () = stop.cancelled() => {}
            // Every worker ended by itself: the queue was shut down elsewhere and is drained.
            () = join_all(&mut workers, &self.name) => {}
        }
        if workers.is_empty() {
            return;
        }
        let grace = match how {
            Stop::Halt(grace) => grace,
            Stop::Drain => {
                tracing::debug!(controller = %self.name, "controller shutting down");
                let queue = Arc::clone(&self.queue);
                // Blocks until nothing is held: never on a Tokio worker thread.
                if let Err(err) =
                    tokio::task::spawn_blocking(move || queue.shut_down_with_drain()).await
                {
                    tracing::warn!(controller = %self.name, error = %ErrorChain(&err), "queue drain did not run; shutting down without it");
                    self.queue.shut_down();
                }
                join_all(&mut workers, &self.name).await;
                return;
            }
        };
        halt.cancel();
        if tokio::time::timeout(grace, join_all(&mut workers, &self.name))
            .await
            .is_err()
        {
            tracing::warn!(
                controller = %self.name, grace_ms = grace.as_millis() as u64,
                "reconciles still running after the term of leadership ended: aborting them (their keys are queued again)"
            );
            workers.abort_all();
            join_all(&mut workers, &self.name).await;
        }
    }

    /// The worker loop: until the queue is shut down and empty, or `halt` fires.
    async fn run(&self, id: usize, context: &Context<C>, halt: &CancellationToken) {
        loop {
            let next = tokio::select! {
                biased;
                () = halt.cancelled() => break,
                next = self.queue.get_async_with_priority() => next,
            };
            let Some((key, priority)) = next else { break };
            self.process(key, priority, context).await;
        }
        tracing::trace!(controller = %self.name, worker = id, "controller worker ended");
    }

    /// One key, handed out at `priority`: reconcile, then forget, re-queue later or re-queue
    /// rate limited (at the same priority, unless the reconcile asked for another), then
    /// done.
    async fn process(&self, key: T, priority: i32, context: &Context<C>) {
        let mut guard = DoneGuard {
            queue: &*self.queue,
            key: &key,
            priority,
            finished: false,
        };
        match self.pending.check(&key) {
            fresh::Freshness::Fresh => {}
            fresh::Freshness::Lagging(delay, behind) => {
                // Not a failure: the rate limiter is not told.
                self.observer.stale_cache(false, behind.as_ref());
                tracing::trace!(controller = %self.name, %key, "the cache has not shown this key's last write yet: looking again shortly");
                self.queue
                    .add_after_with_priority(key.clone(), delay, priority);
                guard.finished = true;
                return;
            }
            fresh::Freshness::GaveUp => {
                self.observer.stale_cache(true, None);
                tracing::info!(controller = %self.name, %key, "the cache did not show this key's last write within the read-your-writes timeout: reconciling anyway");
            }
        }
        let span = tracing::info_span!("reconcile", controller = %self.name, key = %key);
        let started = Instant::now();
        let active = self.observer.active();
        let writes = fresh::WriteLog::default();
        let outcome = self
            .reconcile_timed(key.clone(), &context.for_reconcile(writes.clone()))
            .instrument(span.clone())
            .await;
        drop(active);
        self.pending.record(&key, &writes);
        self.observer.reconciled(&outcome, started.elapsed());
        span.in_scope(|| match outcome {
            Outcome::Done => self.queue.forget(&key),
            Outcome::RequeueAfter(delay, asked) => {
                self.queue.forget(&key);
                self.queue
                    .add_after_with_priority(key.clone(), delay, asked.unwrap_or(priority));
            }
            Outcome::Failed(error) => self.failed(&key, priority, &error, false),
            Outcome::Panicked(error) => self.failed(&key, priority, &error, true),
            Outcome::TimedOut(after) => {
                let error = format!("timed out after {after:?}: the reconcile was dropped");
                self.failed(&key, priority, &error, false);
            }
        });
        guard.finished = true;
    }

    /// Calls reconcile within the reconcile timeout, if there is one: past it, the
    /// reconcile's future is dropped and its own cancellation token (a child of the
    /// controller's) cancelled.
    async fn reconcile_timed(&self, key: T, context: &Context<C>) -> Outcome {
        let Some(timeout) = self.reconcile_timeout else {
            return self.reconcile_caught(key, context.clone()).await;
        };
        let own = context.with_cancellation(context.cancellation().child_token());
        let cancel = own.cancellation().clone();
        match tokio::time::timeout(timeout, self.reconcile_caught(key, own)).await {
            Ok(outcome) => outcome,
            Err(_elapsed) => {
                cancel.cancel();
                Outcome::TimedOut(timeout)
            }
        }
    }

    /// Calls reconcile, catching a panic both in the call and in the future it returns.
    async fn reconcile_caught(&self, key: T, context: Context<C>) -> Outcome {
        let future =
            match std::panic::catch_unwind(AssertUnwindSafe(|| (self.reconcile)(key, context))) {
                Ok(future) => future,
                Err(payload) => {
                    return Outcome::Panicked(
                        kinformer_core::panic_message(payload.as_ref()).to_owned(),
                    );
                }
            };
        // The error is rendered inside the guarded future: a panicking `Display` is caught too.
        let guarded = AssertUnwindSafe(async move {
            future.await.map_err(|err| {
                let err: BoxError = err.into();
                describe(&*err)
            })
        });
        match guarded.catch_unwind().await {
            Ok(Ok(Action::Done)) => Outcome::Done,
            Ok(Ok(Action::RequeueAfter(delay))) => Outcome::RequeueAfter(delay, None),
            Ok(Ok(Action::Requeue { after, priority })) => {
                Outcome::RequeueAfter(after, Some(priority))
            }
            Ok(Err(error)) => Outcome::Failed(error),
            Err(payload) => {
                Outcome::Panicked(kinformer_core::panic_message(payload.as_ref()).to_owned())
            }
        }
    }

    /// A failed or panicked reconcile: re-queue rate limited (at `priority`), or drop after
    /// `max_retries`.
    fn failed(&self, key: &T, priority: i32, error: &str, panicked: bool) {
        let requeues = self.queue.num_requeues(key);
        if let Some(max) = self.max_retries
            && requeues >= max
        {
            self.queue.forget(key);
            tracing::warn!(
                controller = %self.name, %key, error, panicked, num_requeues = requeues,
                "reconcile failed too many times; dropping the key out of the queue"
            );
            return;
        }
        self.queue
            .add_rate_limited_with_priority(key.clone(), priority);
        let num_requeues = self.queue.num_requeues(key);
        if panicked {
            tracing::error!(
                controller = %self.name, %key, error, num_requeues,
                "reconcile panicked; requeued rate limited"
            );
        } else {
            tracing::warn!(
                controller = %self.name, %key, error, num_requeues,
                "reconcile failed; requeued rate limited"
            );
        }
    }
}

/// A failed reconcile's error in one concise line: the error and its causes, each said once
/// ([`ErrorChain`]), and the API server's refusal as `API error <code> <reason>: <message>`
/// (kube's `Error::Api` prints the whole status, then its debug form, then the status again
/// as its cause: one ~900-character line for a conflict).
fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    #[cfg(feature = "kube")]
    {
        let mut wrappers = Vec::new();
        let mut cur = Some(err);
        while let Some(e) = cur {
            if let Some(kube::Error::Api(status)) = e.downcast_ref::<kube::Error>() {
                let shown = e.to_string();
                let mut parts: Vec<String> = wrappers
                    .iter()
                    .map(|w: &&(dyn std::error::Error + 'static)| {
                        let own = w.to_string().replace(&shown, "");
                        own.trim_end_matches([':', ' ']).to_owned()
                    })
                    .filter(|own| !own.is_empty())
                    .collect();
                parts.push(format!(
                    "API error {} {}: {}",
                    status.code, status.reason, status.message
                ));
                return parts.join(": ");
            }
            wrappers.push(e);
            cur = e.source();
        }
    }
    ErrorChain(err).to_string()
}

#[cfg(all(test, feature = "kube"))]
mod tests {
    use kube::core::Status;

    use super::describe;

    fn conflict() -> kube::Error {
        let status = Status::failure(
            "Operation cannot be fulfilled on widgets \"demo\": the object has been modified",
            "Conflict",
        )
        .with_code(409);
        kube::Error::Api(status.boxed())
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot write the status: {0}")]
    struct Wrapped(#[source] kube::Error);

    #[test]
    fn an_api_refusal_is_one_short_line() {
        let line = describe(&conflict());
        assert_eq!(
            line,
            "API error 409 Conflict: Operation cannot be fulfilled on widgets \"demo\": the object has been modified"
        );
        let line = describe(&Wrapped(conflict()));
        assert_eq!(
            line,
            "cannot write the status: API error 409 Conflict: Operation cannot be fulfilled on widgets \"demo\": the object has been modified"
        );
    }

    #[test]
    fn other_errors_show_their_causes_once() {
        let err = std::io::Error::other("disk full");
        assert_eq!(describe(&err), "disk full");
    }
}
