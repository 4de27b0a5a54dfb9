//! [`Runnable`]: a controller with its reconcile and context, its types erased, so that a
//! program (or kinformer's `Manager`) runs several side by side, or all under one lease.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use kinformer_core::{BoxError, BoxFuture};
use kinformer_workqueue::{Item, RateLimitingQueue};
use tokio_util::sync::CancellationToken;

use super::context::LeadingCheck;
use super::{Action, Context, Controller, Stop};

/// One term of the workers: until the token is cancelled, then stop as told; a
/// [`LeadingCheck`] under leader election.
type Term =
    dyn Fn(CancellationToken, Option<LeadingCheck>, Stop) -> BoxFuture<'static, ()> + Send + Sync;

/// A [`Controller`] made ready to run with its reconcile and context
/// ([`Controller::into_runnable`]): whatever its key, queue and context types, runnables
/// go in one `Vec` and run together, each with its own queue and workers.
///
/// ```no_run
/// use kinformer_controller::controller::{Action, Context, Controller, Runnable};
/// use kinformer_core::ObjectKey;
/// use tokio_util::sync::CancellationToken;
///
/// async fn reconcile_a(_: ObjectKey, _: Context<()>) -> Result<Action, String> { Ok(Action::Done) }
/// async fn reconcile_b(_: String, _: Context<u32>) -> Result<Action, String> { Ok(Action::Done) }
///
/// # async fn run() {
/// let shutdown = CancellationToken::new();
/// let runnables = vec![
///     Controller::<ObjectKey>::new("a").into_runnable(reconcile_a, ()),
///     Controller::<String>::new("b").into_runnable(reconcile_b, 7),
/// ];
/// // Both run until `shutdown`, then drain their queues.
/// Runnable::run_all(runnables, shutdown).await;
/// # }
/// ```
pub struct Runnable {
    name: String,
    term: Arc<Term>,
    shut_down_queue: Arc<dyn Fn() + Send + Sync>,
}

impl fmt::Debug for Runnable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runnable")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<T: Item + fmt::Display, Q: RateLimitingQueue<T> + 'static> Controller<T, Q> {
    /// This controller with its reconcile and context, ready to run beside others
    /// ([`Runnable::run_all`], [`Runnable::run_all_elected`]); [`run`](Self::run) is
    /// `into_runnable(..).run(cancel)`.
    pub fn into_runnable<C, F, Fut, E>(self, reconcile: F, context: C) -> Runnable
    where
        C: Send + Sync + 'static,
        F: Fn(T, Context<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        let (worker, count) = self.into_worker(reconcile);
        let data = Arc::new(context);
        let queue = Arc::clone(&worker.queue);
        let name = worker.name.clone();
        let term = move |token: CancellationToken, leading: Option<LeadingCheck>, how: Stop| {
            let (worker, data) = (Arc::clone(&worker), Arc::clone(&data));
            Box::pin(async move {
                let context = match leading {
                    Some(check) => Context::leading(data, token.child_token(), check),
                    None => Context::new(data, token.child_token()),
                };
                worker.run_term(count, context, &token, how).await;
            }) as BoxFuture<'static, ()>
        };
        Runnable {
            name,
            term: Arc::new(term),
            shut_down_queue: Arc::new(move || queue.shut_down()),
        }
    }
}

impl Runnable {
    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// [`Controller::run`]: the workers until `cancel`, then the queue drained.
    pub async fn run(self, cancel: CancellationToken) {
        tracing::debug!(controller = %self.name, "controller started");
        (self.term)(cancel, None, Stop::Drain).await;
        tracing::debug!(controller = %self.name, "controller stopped");
    }

    /// Every runnable at once, each as [`run`](Self::run); returns when all have drained.
    pub async fn run_all(runnables: Vec<Runnable>, cancel: CancellationToken) {
        futures::future::join_all(runnables.into_iter().map(|r| r.run(cancel.clone()))).await;
    }

    /// Every runnable under one lease ([`Controller::run_elected`] for several controllers,
    /// controller-runtime's manager with leader election): their workers run only while
    /// `elector` leads, all starting and stopping together, each term as `run_elected`
    /// describes. Returns when `shutdown` is cancelled.
    ///
    /// # Errors
    /// [`kinformer_leaderelection::Error::AlreadyRunning`] when `elector` is already running.
    #[cfg(feature = "kube")]
    pub async fn run_all_elected(
        runnables: Vec<Runnable>,
        elector: &kinformer_leaderelection::LeaderElector,
        shutdown: CancellationToken,
    ) -> Result<(), kinformer_leaderelection::Error> {
        let config = elector.config();
        let grace = config.lease_duration.saturating_sub(config.renew_deadline);
        let terms: Vec<(String, Arc<Term>)> = runnables
            .iter()
            .map(|r| (r.name.clone(), Arc::clone(&r.term)))
            .collect();
        let terms = Arc::new(terms);
        tracing::debug!(
            controllers = terms.len(),
            elector = elector.identity(),
            "controllers waiting for leadership"
        );
        let ended = elector
            .run(
                &shutdown,
                move |leading: kinformer_leaderelection::Leading| {
                    let terms = Arc::clone(&terms);
                    async move {
                        let term = leading.token().clone();
                        tracing::info!(controllers = terms.len(), "leading: workers started");
                        let check = leading.clone();
                        let check: LeadingCheck = Arc::new(move || check.is_leading());
                        futures::future::join_all(terms.iter().map(|(_, run)| {
                            run(term.clone(), Some(Arc::clone(&check)), Stop::Halt(grace))
                        }))
                        .await;
                        tracing::info!(
                            controllers = terms.len(),
                            "term of leadership over: workers stopped"
                        );
                    }
                },
            )
            .await;
        for runnable in &runnables {
            (runnable.shut_down_queue)();
            tracing::debug!(controller = %runnable.name, "controller stopped");
        }
        ended.map(|_| ())
    }
}
