//! [`Controller::run_elected`]: workers only while this replica leads.

use std::fmt;
use std::future::Future;

use kinformer_core::BoxError;
use kinformer_leaderelection::LeaderElector;
use kinformer_workqueue::{Item, RateLimitingQueue};
use tokio_util::sync::CancellationToken;

use super::{Action, Context, Controller, Runnable};

impl<T: Item, Q: RateLimitingQueue<T> + 'static> Controller<T, Q> {
    /// [`run`](Self::run) under leader election: the workers run only while `elector` holds
    /// the lease, and stop the moment it is lost. Returns when `shutdown` is cancelled (then
    /// the lease is released if the elector's config says
    /// [`release_on_cancel`](kinformer_leaderelection::LeaderElectionConfig::release_on_cancel)).
    ///
    /// Everything that feeds the queue — the informers, their handlers — runs on every
    /// replica, leading or not: a standby's cache is synced and its queue holds every key
    /// that changed, so when it takes over its workers start at once, without a cold list.
    /// Each term of leadership:
    ///
    /// - starts the workers; each reconcile's [`Context`] is cancelled when the term ends,
    ///   and [`Context::is_leading`] turns false as soon as the renew deadline has passed;
    /// - when the term ends (lost, or `shutdown`), the workers take no more keys; reconciles
    ///   in flight get until another replica may take the lease (the lease duration minus
    ///   the renew deadline: 5 s with client-go's defaults) to return, then are aborted at
    ///   their next `.await` and their keys queued again;
    /// - after a loss the replica is a standby again, and takes part in the next election
    ///   (client-go programs usually exit instead; restart if you prefer that).
    ///
    /// On `shutdown` the queue is shut down without draining it: the next leader's own
    /// queue holds the same keys, and it can start as soon as this replica releases the
    /// lease.
    ///
    /// ```no_run
    /// use kinformer_controller::controller::{Action, Context, Controller};
    /// use kinformer_core::ObjectKey;
    /// use kinformer_leaderelection::{LeaderElectionConfig, LeaderElector, LeaseLock};
    /// use tokio_util::sync::CancellationToken;
    ///
    /// async fn reconcile(key: ObjectKey, ctx: Context<()>) -> Result<Action, kube::Error> {
    ///     if !ctx.is_leading() {
    ///         return Ok(Action::Done); // the next leader does it
    ///     }
    ///     // ... act on `key`
    ///     Ok(Action::Done)
    /// }
    ///
    /// # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// let identity = std::env::var("POD_NAME")?;
    /// let lock = LeaseLock::new(client.clone(), "kube-system", "my-controller", identity);
    /// let config = LeaderElectionConfig { release_on_cancel: true, ..Default::default() };
    /// let elector = LeaderElector::new(config, lock)?;
    ///
    /// let controller = Controller::<ObjectKey>::new("my-controller");
    /// // ... informers started with handlers that enqueue into controller.queue() ...
    /// let shutdown = CancellationToken::new();
    /// controller.run_elected(&elector, reconcile, (), shutdown).await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`kinformer_leaderelection::Error::AlreadyRunning`] when `elector` is already running.
    pub async fn run_elected<C, F, Fut, E>(
        self,
        elector: &LeaderElector,
        reconcile: F,
        context: C,
        shutdown: CancellationToken,
    ) -> Result<(), kinformer_leaderelection::Error>
    where
        T: fmt::Display,
        C: Send + Sync + 'static,
        F: Fn(T, Context<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        let runnable = self.into_runnable(reconcile, context);
        Runnable::run_all_elected(vec![runnable], elector, shutdown).await
    }
}
