//! The [`Controller`] runner: a rate-limited workqueue, N workers and a reconcile function.
//!
//! Event handlers put keys into the controller's [`queue`](Controller::queue); workers take
//! them out one at a time and call the reconcile function, exactly as client-go's
//! `processNextWorkItem` does:
//!
//! ```text
//! key = get()                       (None: the queue is shut down and empty → worker ends)
//! match reconcile(key)
//!     Ok          → forget(key)                     (clear the rate limiter's memory)
//!     Err / panic → add_rate_limited(key) + warn!   (or forget + drop after max_retries)
//! done(key)                         (always: the key may now be handed out again)
//! ```
//!
//! The queue guarantees that a key is held by at most one worker at a time, so reconcile
//! never runs twice at once for the same key, while different keys run in parallel.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use kinformer::controller::Controller;
//! use kinformer::prelude::*;
//! use tokio_util::sync::CancellationToken;
//!
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! let controller = Controller::<ObjectKey>::new("pods").workers(2);
//! // In a program an event handler does this (a plain sync call, fine on listener threads).
//! let queue = Arc::clone(controller.queue());
//! queue.add(ObjectKey::parse("default/web-0")?);
//! queue.add(ObjectKey::parse("default/web-1")?);
//!
//! let seen = Arc::new(AtomicUsize::new(0));
//! let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
//! let cancel = CancellationToken::new();
//! let run = tokio::spawn(controller.run(
//!     {
//!         let seen = Arc::clone(&seen);
//!         move |key: ObjectKey| {
//!             let (seen, done_tx) = (Arc::clone(&seen), done_tx.clone());
//!             async move {
//!                 // Read the object from an informer's lister, act, return the outcome.
//!                 seen.fetch_add(1, Ordering::SeqCst);
//!                 let _ = done_tx.send(key);
//!                 Ok::<(), std::convert::Infallible>(())
//!             }
//!         }
//!     },
//!     cancel.clone(),
//! ));
//! done_rx.recv().await;
//! done_rx.recv().await;
//! cancel.cancel(); // shut the queue down, drain it, wait for the workers
//! run.await?;
//! assert_eq!(seen.load(Ordering::SeqCst), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Shutdown
//!
//! Cancelling [`run`](Controller::run)'s token calls the queue's
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
use std::time::Duration;

use futures::FutureExt;
use kinformer_core::{
    DeletedObject, ErrorChain, MetaObject, deletion_handling_key, meta_namespace_key,
};
use kinformer_informer_factory::{HandlerRegistration, ResourceEventHandler, SharedInformer};
use kinformer_workqueue::{
    Item, Queue, QueueConfig, RateLimitingQueue, RateLimitingWorkQueue,
    default_controller_rate_limiter,
};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The name a [`Controller`] built by [`with_queue`](Controller::with_queue) has until
/// [`name`](Controller::name) sets another.
pub const DEFAULT_CONTROLLER_NAME: &str = "controller";

/// A rate-limited workqueue plus N worker tasks running a reconcile function: the worker
/// loop every client-go controller writes by hand.
///
/// `T` is the queue item, usually an [`ObjectKey`](kinformer_core::ObjectKey); `Q` is any
/// [`RateLimitingQueue`], by default a [`RateLimitingWorkQueue`] with client-go's
/// [`default_controller_rate_limiter`]. Configure with the builder methods, hand
/// [`queue`](Controller::queue) to the event handlers, then [`run`](Controller::run). See the
/// [module docs](self) for the loop and the shutdown.
pub struct Controller<T, Q = RateLimitingWorkQueue<T>> {
    queue: Arc<Q>,
    config: ControllerConfig,
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
}

impl<T, Q> fmt::Debug for Controller<T, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<T: Item> Controller<T> {
    /// A controller named `name` over a new [`RateLimitingWorkQueue`] of the same name (the
    /// name labels the queue's metrics and the `reconcile` spans), rate limited by
    /// [`default_controller_rate_limiter`] (per item 5 ms doubling up to 1000 s, overall
    /// 10 per second with a burst of 100). One worker, unlimited retries.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        let queue = RateLimitingWorkQueue::with_config(
            default_controller_rate_limiter(),
            QueueConfig::new().name(name.clone()),
        );
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
            },
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

    /// The queue: give a clone of the `Arc` to the event handlers, which
    /// [`add`](Queue::add) keys to it (a plain sync call, fine on listener threads).
    pub fn queue(&self) -> &Arc<Q> {
        &self.queue
    }

    /// The settings: name, workers, retry limit.
    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// Starts the workers on the current Tokio runtime and runs until `cancel` is cancelled
    /// (or the queue is shut down by someone else), then shuts the queue down, lets the
    /// workers drain what is still queued, and returns once every worker has ended.
    ///
    /// Each key is reconciled inside a `reconcile` span (fields `controller`, `key`). An
    /// `Err` or a panic (caught per key; the worker goes on) re-queues the key rate limited
    /// and logs a warning with the key, the error and `num_requeues` (the retries counted so
    /// far, this one included); `Ok` forgets the key. Every key handed out is marked done.
    ///
    /// Must be called from within a Tokio runtime (it spawns tasks). Dropping the returned
    /// future instead of cancelling aborts the workers at their next `.await` (a key being
    /// reconciled is still marked done) but leaves the queue open.
    pub async fn run<F, Fut, E>(self, reconcile: F, cancel: CancellationToken)
    where
        T: fmt::Display,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display,
    {
        let ControllerConfig {
            name,
            workers: count,
            max_retries,
        } = self.config;
        let worker = Arc::new(Worker {
            queue: Arc::clone(&self.queue),
            name,
            max_retries,
            reconcile,
            _item: PhantomData,
        });
        let mut workers = JoinSet::new();
        for id in 0..count {
            let worker = Arc::clone(&worker);
            workers.spawn(async move { worker.run(id).await });
        }
        tracing::debug!(controller = %worker.name, workers = count, "controller started");

        tokio::select! {
            () = cancel.cancelled() => {}
            // Every worker ended by itself: the queue was shut down elsewhere and is drained.
            () = join_all(&mut workers, &worker.name) => {}
        }

        if !workers.is_empty() {
            tracing::debug!(controller = %worker.name, "controller shutting down");
            let queue = Arc::clone(&self.queue);
            // Blocks until nothing is held: never on a Tokio worker thread.
            if let Err(err) =
                tokio::task::spawn_blocking(move || queue.shut_down_with_drain()).await
            {
                tracing::warn!(controller = %worker.name, error = %ErrorChain(&err), "queue drain did not run; shutting down without it");
                self.queue.shut_down();
            }
            join_all(&mut workers, &worker.name).await;
        }
        tracing::debug!(controller = %worker.name, "controller stopped");
    }
}

/// Awaits every task of `workers`, logging any that ended abnormally.
async fn join_all(workers: &mut JoinSet<()>, name: &str) {
    while let Some(result) = workers.join_next().await {
        if let Err(err) = result {
            tracing::error!(controller = %name, error = %ErrorChain(&err), "controller worker ended abnormally");
        }
    }
}

/// What a worker task shares with the others.
struct Worker<T, Q, F> {
    queue: Arc<Q>,
    name: String,
    max_retries: Option<usize>,
    reconcile: F,
    _item: PhantomData<fn(T) -> T>,
}

/// How one reconcile ended.
enum Outcome {
    Ok,
    Failed(String),
    Panicked(String),
}

/// Marks the key done when dropped, so `done` runs even if something after `get` unwinds.
struct DoneGuard<'a, T, Q: Queue<T>> {
    queue: &'a Q,
    key: &'a T,
}

impl<T, Q: Queue<T>> Drop for DoneGuard<'_, T, Q> {
    fn drop(&mut self) {
        self.queue.done(self.key);
    }
}

impl<T, Q, F, Fut, E> Worker<T, Q, F>
where
    T: Item + fmt::Display,
    Q: RateLimitingQueue<T> + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: fmt::Display,
{
    /// The worker loop: until the queue is shut down and empty.
    async fn run(&self, id: usize) {
        while let Some(key) = self.queue.get_async().await {
            self.process(key).await;
        }
        tracing::trace!(controller = %self.name, worker = id, "controller worker ended");
    }

    /// One key: reconcile, then forget or re-queue, then done.
    async fn process(&self, key: T) {
        let _done = DoneGuard {
            queue: &*self.queue,
            key: &key,
        };
        let span = tracing::info_span!("reconcile", controller = %self.name, key = %key);
        let outcome = self
            .reconcile_caught(key.clone())
            .instrument(span.clone())
            .await;
        span.in_scope(|| match outcome {
            Outcome::Ok => self.queue.forget(&key),
            Outcome::Failed(error) => self.failed(&key, &error, false),
            Outcome::Panicked(error) => self.failed(&key, &error, true),
        });
    }

    /// Calls reconcile, catching a panic both in the call and in the future it returns.
    async fn reconcile_caught(&self, key: T) -> Outcome {
        let future = match std::panic::catch_unwind(AssertUnwindSafe(|| (self.reconcile)(key))) {
            Ok(future) => future,
            Err(payload) => {
                return Outcome::Panicked(
                    kinformer_core::panic_message(payload.as_ref()).to_owned(),
                );
            }
        };
        // The error is rendered inside the guarded future: a panicking `Display` is caught too.
        let guarded = AssertUnwindSafe(async move { future.await.map_err(|err| err.to_string()) });
        match guarded.catch_unwind().await {
            Ok(Ok(())) => Outcome::Ok,
            Ok(Err(error)) => Outcome::Failed(error),
            Err(payload) => {
                Outcome::Panicked(kinformer_core::panic_message(payload.as_ref()).to_owned())
            }
        }
    }

    /// A failed or panicked reconcile: re-queue rate limited, or drop after `max_retries`.
    fn failed(&self, key: &T, error: &str, panicked: bool) {
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
        self.queue.add_rate_limited(key.clone());
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

/// The event handler of most controllers: it only enqueues the object's key
/// (`namespace/name`), the tombstone-aware way on delete (client-go's
/// `MetaNamespaceKeyFunc` and `DeletionHandlingMetaNamespaceKeyFunc`). An object without
/// a name is logged and skipped.
///
/// ```
/// use std::sync::Arc;
/// use kinformer::controller::{Controller, EnqueueKeys};
/// use kinformer::prelude::*;
/// use k8s_openapi::api::core::v1::Pod;
///
/// let controller = Controller::<ObjectKey>::new("pods");
/// let handler = EnqueueKeys::new(Arc::clone(controller.queue()));
/// let mut pod = Pod::default();
/// pod.metadata.namespace = Some("default".into());
/// pod.metadata.name = Some("web-0".into());
/// ResourceEventHandler::<Pod>::on_add(&handler, &Arc::new(pod), true);
/// assert_eq!(controller.queue().len(), 1);
/// // informer.add_event_handler(handler)?;
/// ```
pub struct EnqueueKeys<Q> {
    queue: Arc<Q>,
}

impl<Q> EnqueueKeys<Q> {
    /// A handler adding keys to `queue`.
    pub fn new(queue: Arc<Q>) -> Self {
        Self { queue }
    }
}

impl<Q> fmt::Debug for EnqueueKeys<Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnqueueKeys").finish_non_exhaustive()
    }
}

impl<Q> EnqueueKeys<Q>
where
    Q: Queue<kinformer_core::ObjectKey>,
{
    fn enqueue(&self, key: Result<kinformer_core::ObjectKey, kinformer_core::Error>) {
        match key {
            Ok(key) => self.queue.add(key),
            Err(err) => {
                tracing::warn!(error = %ErrorChain(&err), "object without a key: not enqueued")
            }
        }
    }
}

impl<K, Q> ResourceEventHandler<K> for EnqueueKeys<Q>
where
    K: MetaObject,
    Q: Queue<kinformer_core::ObjectKey>,
{
    fn on_add(&self, obj: &Arc<K>, _is_in_initial_list: bool) {
        self.enqueue(meta_namespace_key(&**obj));
    }
    fn on_update(&self, _old: &Arc<K>, new: &Arc<K>) {
        self.enqueue(meta_namespace_key(&**new));
    }
    fn on_delete(&self, obj: &DeletedObject<K>) {
        self.enqueue(deletion_handling_key(obj));
    }
}

impl<Q: RateLimitingQueue<kinformer_core::ObjectKey> + 'static>
    Controller<kinformer_core::ObjectKey, Q>
{
    /// An [`EnqueueKeys`] handler feeding this controller's queue: register it with every
    /// informer whose objects this controller reconciles.
    pub fn enqueue_handler(&self) -> EnqueueKeys<Q> {
        EnqueueKeys::new(Arc::clone(&self.queue))
    }

    /// Registers an [`enqueue_handler`](Self::enqueue_handler) with `informer`, without
    /// resync: any [`SharedInformer`] — a
    /// [`SharedIndexInformer`](kinformer_informer_factory::SharedIndexInformer), or a fake
    /// in a test. For a resync period, register `enqueue_handler()` through
    /// [`SharedInformer::add_event_handler_with_resync`].
    ///
    /// # Errors
    /// The informer's refusal (for example: it has stopped).
    pub fn watch<K: MetaObject + 'static>(
        &self,
        informer: &dyn SharedInformer<K>,
    ) -> Result<Box<dyn HandlerRegistration>, kinformer_informer_factory::Error>
    where
        Q: Send + Sync,
    {
        informer.add_event_handler_with_resync(Box::new(self.enqueue_handler()), Duration::ZERO)
    }
}
