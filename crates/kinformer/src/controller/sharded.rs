//! [`Controller::run_shard`]: workers only while this replica holds a shard.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use kinformer_core::BoxError;
use kinformer_workqueue::{Item, RateLimitingQueue};

use super::{Action, Context, Controller, Stop};
use crate::sharding::Shard;

impl<T: Item, Q: RateLimitingQueue<T> + 'static> Controller<T, Q> {
    /// Runs the workers for one held [`Shard`] (inside the work
    /// [`ShardManager::run`](crate::sharding::ShardManager::run) starts for it) until the
    /// shard is lost, given up, or the manager shuts down — a term, as under
    /// [`run_elected`](Self::run_elected):
    ///
    /// - each reconcile's [`Context`] is cancelled when the term ends, and
    ///   [`Context::is_leading`] answers [`Shard::is_held`], false as soon as the shard's
    ///   renew deadline has passed;
    /// - when the term ends the workers take no more keys; reconciles in flight get the
    ///   shard's [grace](Shard::grace) (until another replica may take the shard) to
    ///   return, then are aborted at their next `.await`;
    /// - then the queue is shut down: the controller belongs to this term of this shard
    ///   (the next holder has a queue of its own, filled by its own informer's list).
    ///
    /// See the [`sharding`](crate::sharding) module for a whole example.
    pub async fn run_shard<C, F, Fut, E>(self, shard: &Shard, reconcile: F, context: C)
    where
        T: fmt::Display,
        C: Send + Sync + 'static,
        F: Fn(T, Context<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        let (worker, count) = self.into_worker(reconcile);
        let term = shard.token().clone();
        let check = shard.clone();
        let context = Context::leading(
            Arc::new(context),
            term.child_token(),
            Arc::new(move || check.is_held()),
        );
        tracing::info!(controller = %worker.name, shard = shard.index(), lease = shard.lease(), "shard held: workers started");
        worker
            .run_term(count, context, &term, Stop::Halt(shard.grace()))
            .await;
        worker.queue.shut_down();
        tracing::info!(controller = %worker.name, shard = shard.index(), "shard no longer held: workers stopped");
    }
}
