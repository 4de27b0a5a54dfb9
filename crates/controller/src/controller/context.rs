//! What every reconcile gets besides its key.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use kinformer_core::MetaObject;
use tokio_util::sync::CancellationToken;

use super::fresh::{CacheProgress, Write, WriteLog};

/// The context of one reconcile: the value given to [`Controller::run`] (shared by every
/// call; reach it through `Deref`) and a cancellation token that fires when the controller
/// is told to stop.
///
/// Cloning is cheap. The controller keeps draining its queue after a stop (client-go's
/// semantics), so a reconcile that sees [`is_cancelled`](Self::is_cancelled) should finish
/// or give up quickly, not start long work.
///
/// ```
/// use kinformer_controller::controller::{Action, Context};
///
/// struct Settings { dry_run: bool }
///
/// async fn reconcile(key: String, ctx: Context<Settings>) -> Result<Action, String> {
///     if ctx.dry_run || ctx.is_cancelled() {
///         return Ok(Action::Done);
///     }
///     // ... act on `key`; long waits should also await `ctx.cancellation().cancelled()`.
///     Ok(Action::Done)
/// }
/// # let _ = reconcile;
/// ```
///
/// [`Controller::run`]: super::Controller::run
pub struct Context<C> {
    data: Arc<C>,
    cancel: CancellationToken,
    /// Under leader election: whether this replica still leads (see [`Context::is_leading`]).
    leading: Option<LeadingCheck>,
    /// The writes this reconcile reported ([`Context::wrote`]).
    writes: WriteLog,
}

/// Whether this replica still leads, asked of the elector's clock at each call.
pub(crate) type LeadingCheck = Arc<dyn Fn() -> bool + Send + Sync>;

impl<C> Context<C> {
    /// A context around `data`, cancelled with `cancel` (what the controller builds; build
    /// one yourself to call a reconcile function in a test).
    pub fn new(data: Arc<C>, cancel: CancellationToken) -> Self {
        Self {
            data,
            cancel,
            leading: None,
            writes: WriteLog::default(),
        }
    }

    /// A context for a term of leadership: `is_leading` answers [`Context::is_leading`].
    #[cfg_attr(not(feature = "kube"), allow(dead_code))]
    pub(crate) fn leading(
        data: Arc<C>,
        cancel: CancellationToken,
        is_leading: LeadingCheck,
    ) -> Self {
        Self {
            data,
            cancel,
            leading: Some(is_leading),
            writes: WriteLog::default(),
        }
    }

    /// This context for one reconcile, whose writes go to `writes`.
    pub(crate) fn for_reconcile(&self, writes: WriteLog) -> Self {
        Self {
            writes,
            ..self.clone()
        }
    }

    /// This context with `cancel` as its cancellation token: one reconcile's own, so that
    /// the controller can cancel that reconcile alone (its timeout).
    pub(crate) fn with_cancellation(&self, cancel: CancellationToken) -> Self {
        Self {
            cancel,
            ..self.clone()
        }
    }

    /// Whether this replica may act. Always true for a controller run without leader
    /// election. Under [`Controller::run_elected`](super::Controller::run_elected) it turns
    /// false when the term of leadership ends, and the moment the renew deadline has passed
    /// even before the elector's task has
    /// run to cancel [`cancellation`](Self::cancellation) (a process that was paused wakes up
    /// with its deadline long past): check it right before a write that must not happen
    /// twice. Neither is a fence: a write sent just before the deadline may land after it.
    pub fn is_leading(&self) -> bool {
        self.leading.as_ref().is_none_or(|check| check())
    }

    /// The shared value, as the `Arc` it lives in.
    pub fn data(&self) -> &Arc<C> {
        &self.data
    }

    /// The token cancelled when the controller stops.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether the controller has been told to stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Read your own writes: this reconcile wrote `written` (the object the API server sent
    /// back from a create, update or patch), which `cache` holds; the next reconcile of this
    /// key waits until `cache` has applied at least its resourceVersion (bounded by
    /// [`Controller::read_your_writes_timeout`](super::Controller::read_your_writes_timeout);
    /// see [the module](super::fresh) for how). Nothing happens for an object without a
    /// resourceVersion.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kinformer_controller::controller::{Action, Context};
    /// use kinformer_core::ObjectKey;
    /// use kinformer_informer_factory::SharedIndexInformer;
    /// use kube::api::{Api, Patch, PatchParams};
    ///
    /// struct Ctx { api: Api<ConfigMap>, cache: SharedIndexInformer<ConfigMap> }
    ///
    /// async fn reconcile(key: ObjectKey, ctx: Context<Ctx>) -> Result<Action, kube::Error> {
    ///     let patch = serde_json::json!({"data": {"handled": "true"}});
    ///     let written = ctx.api.patch(key.name(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    ///     // The next reconcile of this key sees `handled`, not the cache from before.
    ///     ctx.wrote(&ctx.cache, &written);
    ///     Ok(Action::Done)
    /// }
    /// # let _ = reconcile;
    /// ```
    pub fn wrote<W>(&self, cache: &W, written: &impl MetaObject)
    where
        W: CacheProgress + Clone + 'static,
    {
        if let Some(rv) = written.object_resource_version() {
            self.wrote_version(cache, rv);
        }
    }

    /// [`wrote`](Self::wrote) for a write known by its resourceVersion alone (a delete's
    /// answer, a status from a server-side apply). An empty version is ignored.
    pub fn wrote_version<W>(&self, cache: &W, resource_version: &str)
    where
        W: CacheProgress + Clone + 'static,
    {
        if !resource_version.is_empty() {
            let cache: Arc<dyn CacheProgress> = Arc::new(cache.clone());
            self.writes
                .push(Write::new(cache, resource_version.to_owned()));
        }
    }
}

impl<C> Context<C> {
    /// [`wrote`](Self::wrote) for a write the cache shows otherwise than by its version: the
    /// next reconcile of this key waits until `seen` returns true (or the bound passes).
    /// For a delete whose answer carried no object, say: `seen` checks that the cache no
    /// longer holds that uid under the key. Called from the worker, between reconciles:
    /// keep it quick.
    pub fn wrote_when(&self, seen: impl Fn() -> bool + Send + Sync + 'static) {
        self.writes.push(Write::when(seen));
    }
}

impl<C> Clone for Context<C> {
    fn clone(&self) -> Self {
        Self {
            data: Arc::clone(&self.data),
            cancel: self.cancel.clone(),
            leading: self.leading.clone(),
            writes: self.writes.clone(),
        }
    }
}

impl<C> Deref for Context<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.data
    }
}

impl<C> fmt::Debug for Context<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}
