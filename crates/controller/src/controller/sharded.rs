//! [`Controller::run_shard`]: workers only while this replica holds a shard.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kinformer_core::BoxError;
use kinformer_workqueue::{Item, RateLimitingQueue};
use tokio_util::sync::CancellationToken;

use super::{Action, Context, Controller, Stop};

/// A shard this replica holds, as [`Controller::run_shard`] sees it: a term that ends when
/// the shard is lost. kinformer-sharding's `Shard` (`kinformer::sharding::Shard`)
/// implements it: the shard manager lives above the controller (in kinformer-sharding,
/// which depends on this crate), so the controller names only what it reads of a shard.
pub trait HeldShard: Clone + Send + Sync + 'static {
    /// The shard's index (logged).
    fn index(&self) -> u32;
    /// The name of the shard's Lease (logged).
    fn lease(&self) -> &str;
    /// Cancelled the moment this replica stops holding the shard.
    fn token(&self) -> &CancellationToken;
    /// Whether this replica still holds the shard: false once the token is cancelled, and
    /// as soon as the renew deadline has passed.
    fn is_held(&self) -> bool;
    /// How long reconciles in flight get to return once the shard is lost.
    fn grace(&self) -> Duration;
}

impl<T: Item, Q: RateLimitingQueue<T> + 'static> Controller<T, Q> {
    /// Runs the workers for one held shard (kinformer's `sharding::Shard`, inside the work
    /// `ShardManager::run` starts for it) until the shard is lost, given up, or the manager
    /// shuts down — a term, as under [`run_elected`](Self::run_elected):
    ///
    /// - each reconcile's [`Context`] is cancelled when the term ends, and
    ///   [`Context::is_leading`] answers [`HeldShard::is_held`], false as soon as the
    ///   shard's renew deadline has passed;
    /// - when the term ends the workers take no more keys; reconciles in flight get the
    ///   shard's [grace](HeldShard::grace) (until another replica may take the shard) to
    ///   return, then are aborted at their next `.await`;
    /// - then the queue is shut down: the controller belongs to this term of this shard
    ///   (the next holder has a queue of its own, filled by its own informer's list).
    ///
    /// See kinformer's `sharding` module for a whole example.
    pub async fn run_shard<S, C, F, Fut, E>(self, shard: &S, reconcile: F, context: C)
    where
        S: HeldShard,
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
