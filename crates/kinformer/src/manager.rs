//! [`Manager`]: what a controller's `main` wires by hand — the informer factory, the
//! controllers, leader election, the Events broadcaster and the admin server — started in
//! order and stopped in the right order (controller-runtime's `manager.Manager`).
//!
//! ```no_run
//! use k8s_openapi::api::batch::v1::Job;
//! use kinformer::manager::Manager;
//! use kinformer::prelude::*;
//!
//! async fn reconcile(key: ObjectKey, ctx: Context<()>) -> Result<Action, kube::Error> {
//!     Ok(Action::Done)
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! let mut manager = Manager::new(client);
//! let jobs = manager.factory().informer::<Job>();
//! let controller = Controller::<ObjectKey>::new("jobs");
//! controller.watch(&jobs)?;
//! manager.add(controller.into_runnable(reconcile, ()));
//! // Until SIGTERM or SIGINT (kinformer::runtime's `shutdown::signals()`), say:
//! manager.run(CancellationToken::new()).await?;
//! # Ok(()) }
//! ```
//!
//! [`run`](Manager::run) starts the admin server (if given: `/readyz` then waits for the
//! caches), starts every informer, waits until their caches are synced (an error naming the
//! ones that were not, after [`sync_timeout`](ManagerBuilder::sync_timeout)), and runs every
//! controller, under the lease when an elector is given. On `shutdown` it stops them in the
//! order that loses nothing: the controllers first (each drains its queue, reading caches that
//! are still live; under leader election they halt and the lease is released), then the
//! informers, then the Events broadcaster (what was recorded is written), then the admin
//! server (so `/healthz` answers until the end).
//!
//! Differences from controller-runtime's manager: no webhook server, no cache-backed generic
//! client (each kind has its typed [`cache_client::Client`](crate::cache_client::Client), made
//! from its informer and [`Manager::client`]); one informer factory, whose namespace and resync the builder sets; the
//! controllers under leader election all run under the one lease.

use std::time::Duration;

use kinformer_controller::controller::Runnable;
use kinformer_events::{Broadcaster, Config as EventsConfig, Recorder, Reporter};
use kinformer_informer_factory::{SharedInformerFactory, SharedInformerFactoryBuilder};
use kinformer_leaderelection::LeaderElector;
use tokio_util::sync::CancellationToken;

/// How long [`Manager::run`] waits for the caches by default.
pub const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// What [`Manager::run`] can fail with. Each failure stops what was started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The informer factory could not start.
    #[error("starting the informers")]
    Start(#[source] kinformer_informer_factory::Error),
    /// These informers' caches were not synced within the sync timeout.
    #[error("caches not synced within {timeout:?}: {unsynced:?}")]
    NotSynced {
        /// The informers (by resource) still unsynced.
        unsynced: Vec<String>,
        /// The timeout.
        timeout: Duration,
    },
    /// Leader election failed (the elector was already running).
    #[error("leader election")]
    LeaderElection(#[source] kinformer_leaderelection::Error),
    /// The Events broadcaster could not start.
    #[error("starting the Events broadcaster")]
    Events(#[source] kinformer_events::Error),
    /// The admin server failed.
    #[cfg(feature = "server")]
    #[error("the admin server")]
    Admin(#[source] std::io::Error),
}

/// Builds a [`Manager`]: the informer factory's settings, leader election, the admin server.
pub struct ManagerBuilder {
    client: kube::Client,
    factory: SharedInformerFactoryBuilder,
    elector: Option<LeaderElector>,
    sync_timeout: Duration,
    #[cfg(feature = "server")]
    admin: Option<kinformer_admin::server::Server>,
}

impl std::fmt::Debug for ManagerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagerBuilder")
            .field("sync_timeout", &self.sync_timeout)
            .finish_non_exhaustive()
    }
}

impl ManagerBuilder {
    /// The informers watch only `namespace` (every namespace otherwise).
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.factory = self.factory.namespace(namespace);
        self
    }

    /// The informers' default resync period (none otherwise).
    #[must_use]
    pub fn resync(mut self, period: Duration) -> Self {
        self.factory = self.factory.resync(period);
        self
    }

    /// Any other setting of the informer factory.
    #[must_use]
    pub fn factory(
        mut self,
        configure: impl FnOnce(SharedInformerFactoryBuilder) -> SharedInformerFactoryBuilder,
    ) -> Self {
        self.factory = configure(self.factory);
        self
    }

    /// Runs the controllers only while `elector` holds its lease (all of them under it).
    #[must_use]
    pub fn leader_election(mut self, elector: LeaderElector) -> Self {
        self.elector = Some(elector);
        self
    }

    /// How long [`Manager::run`] waits for the caches ([`DEFAULT_SYNC_TIMEOUT`]).
    #[must_use]
    pub fn sync_timeout(mut self, timeout: Duration) -> Self {
        self.sync_timeout = timeout;
        self
    }

    /// Serves `/metrics`, `/healthz`, `/readyz` (ready once every cache is synced) and
    /// `/debug/diagnostics` on `server` while the manager runs (feature `server`).
    #[cfg(feature = "server")]
    #[must_use]
    pub fn admin(mut self, server: kinformer_admin::server::Server) -> Self {
        self.admin = Some(server);
        self
    }

    /// The manager.
    pub fn build(self) -> Manager {
        Manager {
            client: self.client,
            factory: self.factory.build(),
            elector: self.elector,
            sync_timeout: self.sync_timeout,
            broadcaster: None,
            runnables: Vec::new(),
            #[cfg(feature = "server")]
            admin: self.admin,
        }
    }
}

/// The informer factory, the controllers and what runs beside them, started and stopped
/// together: see the [module docs](self).
pub struct Manager {
    client: kube::Client,
    factory: SharedInformerFactory,
    elector: Option<LeaderElector>,
    sync_timeout: Duration,
    broadcaster: Option<Broadcaster>,
    runnables: Vec<Runnable>,
    #[cfg(feature = "server")]
    admin: Option<kinformer_admin::server::Server>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("controllers", &self.runnables)
            .field("leader_election", &self.elector.is_some())
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// A manager over `client` with the defaults: informers of every namespace, no resync,
    /// no leader election, no admin server.
    pub fn new(client: kube::Client) -> Self {
        Self::builder(client).build()
    }

    /// A builder for a manager over `client`.
    pub fn builder(client: kube::Client) -> ManagerBuilder {
        ManagerBuilder {
            factory: SharedInformerFactory::builder(client.clone()),
            client,
            elector: None,
            sync_timeout: DEFAULT_SYNC_TIMEOUT,
            #[cfg(feature = "server")]
            admin: None,
        }
    }

    /// The client the manager was made with.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The informer factory: ask it for the informers the controllers watch and read
    /// before [`run`](Self::run) starts them.
    pub fn factory(&self) -> &SharedInformerFactory {
        &self.factory
    }

    /// A recorder of Events (`events.k8s.io/v1`) as `reporter`, through the manager's
    /// broadcaster (started with the first recorder; flushed when the manager stops).
    ///
    /// # Errors
    /// [`Error::Events`] outside a Tokio runtime.
    pub fn recorder(&mut self, reporter: Reporter) -> Result<Recorder, Error> {
        let broadcaster = match &mut self.broadcaster {
            Some(broadcaster) => broadcaster,
            None => self.broadcaster.insert(
                Broadcaster::new(self.client.clone(), EventsConfig::new())
                    .map_err(Error::Events)?,
            ),
        };
        Ok(broadcaster.recorder(reporter))
    }

    /// Adds a controller ([`Controller::into_runnable`](crate::controller::Controller::into_runnable)).
    pub fn add(&mut self, controller: Runnable) -> &mut Self {
        self.runnables.push(controller);
        self
    }

    /// Runs everything until `shutdown`, then stops it in order: see the
    /// [module docs](self). Returns once everything has stopped.
    ///
    /// # Errors
    /// [`Error`]: what failed; what had started is stopped first.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        let Manager {
            factory,
            elector,
            sync_timeout,
            broadcaster,
            runnables,
            #[cfg(feature = "server")]
            admin,
            ..
        } = self;
        #[cfg(feature = "server")]
        let admin_stop = CancellationToken::new();
        #[cfg(feature = "server")]
        let admin = admin.map(|server| {
            let synced = factory.clone();
            let server = server.ready_when("informers-synced", move || synced.all_synced());
            tokio::spawn(server.run(admin_stop.clone()))
        });
        let result = run_controllers(
            &factory,
            elector.as_ref(),
            sync_timeout,
            runnables,
            &shutdown,
        )
        .await;
        if let Err(e) = factory.shutdown().await {
            tracing::warn!(error = %kinformer_core::ErrorChain(&e), "stopping the informers");
        }
        if let Some(broadcaster) = broadcaster {
            broadcaster.shutdown().await;
        }
        #[cfg(feature = "server")]
        if let Some(admin) = admin {
            admin_stop.cancel();
            match admin.await {
                Ok(Err(e)) if result.is_ok() => return Err(Error::Admin(e)),
                _ => {}
            }
        }
        result
    }
}

/// Starts the informers, waits for their caches, and runs the controllers until `shutdown`.
async fn run_controllers(
    factory: &SharedInformerFactory,
    elector: Option<&LeaderElector>,
    sync_timeout: Duration,
    runnables: Vec<Runnable>,
    shutdown: &CancellationToken,
) -> Result<(), Error> {
    factory.start().map_err(Error::Start)?;
    let report = tokio::select! {
        report = factory.wait_for_cache_sync(sync_timeout) => report,
        () = shutdown.cancelled() => return Ok(()),
    };
    if !report.all_synced() {
        return Err(Error::NotSynced {
            unsynced: report
                .unsynced()
                .map(|id| id.resource().to_owned())
                .collect(),
            timeout: sync_timeout,
        });
    }
    tracing::info!(
        controllers = runnables.len(),
        "caches synced: controllers starting"
    );
    match elector {
        Some(elector) => Runnable::run_all_elected(runnables, elector, shutdown.clone())
            .await
            .map_err(Error::LeaderElection),
        None => {
            Runnable::run_all(runnables, shutdown.clone()).await;
            Ok(())
        }
    }
}
