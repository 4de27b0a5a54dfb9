//! [`LeaderElectionArgs`]: controller-runtime's leader election flags.

use std::time::Duration;

use kinformer_leaderelection::{
    LeaderElectionConfig, LeaderElector, LeaderElectorBuilder, LeaseLock,
};

use crate::Error;

/// Where `--help` lists these flags.
const HEADING: &str = "Leader election";
use crate::duration::parse_duration;

/// Leader election's flags, with controller-runtime's names and client-go's defaults.
/// Durations are Go's (`15s`, `1m`, `500ms`: see [`parse_duration`](crate::parse_duration)).
///
/// | flag | default |
/// |---|---|
/// | `--leader-elect` | off: every replica runs the workers |
/// | `--leader-election-id NAME` | the program's name for its Lease |
/// | `--leader-election-namespace NS` | the client's namespace ([`ClientArgs::config`](crate::ClientArgs::config)) |
/// | `--leader-election-identity ID` | `<hostname>_<16 random hex digits>` (controller-runtime's `<hostname>_<uuid>`) |
/// | `--leader-election-lease-duration D` | 15s |
/// | `--leader-election-renew-deadline D` | 10s |
/// | `--leader-election-retry-period D` | 2s |
///
/// Kubernetes' own components' names (component-base: `--leader-elect-lease-duration`,
/// `--leader-elect-renew-deadline`, `--leader-elect-retry-period`,
/// `--leader-elect-resource-name`, `--leader-elect-resource-namespace`) are accepted as
/// aliases.
///
/// ```
/// use std::time::Duration;
/// use clap::Parser;
/// use kinformer_runtime::LeaderElectionArgs;
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     leader_election: LeaderElectionArgs,
/// }
///
/// let cli = Cli::try_parse_from(["prog", "--leader-elect", "--leader-election-lease-duration", "30s"])?;
/// let config = cli.leader_election.config()?;
/// assert_eq!(config.lease_duration, Duration::from_secs(30));
/// assert_eq!(config.renew_deadline, Duration::from_secs(10));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct LeaderElectionArgs {
    /// Elect a leader: only the replica holding the Lease runs the workers
    #[arg(id = "leader-elect", help_heading = HEADING, long = "leader-elect")]
    pub enabled: bool,

    /// The Lease's name (default: the program's)
    #[arg(
        id = "leader-election-id",
        help_heading = HEADING,
        long = "leader-election-id",
        alias = "leader-elect-resource-name",
        value_name = "NAME"
    )]
    pub id: Option<String>,

    /// The Lease's namespace (default: the client's namespace)
    #[arg(
        id = "leader-election-namespace",
        help_heading = HEADING,
        long = "leader-election-namespace",
        alias = "leader-elect-resource-namespace",
        value_name = "NS"
    )]
    pub namespace: Option<String>,

    /// This replica's name in the Lease (default: the host name, '_' and 16 random hex digits)
    #[arg(
        id = "leader-election-identity",
        help_heading = HEADING,
        long = "leader-election-identity",
        value_name = "ID"
    )]
    pub identity: Option<String>,

    /// How long standbys wait, after the last renewal they saw, before taking the Lease
    #[arg(
        id = "leader-election-lease-duration",
        help_heading = HEADING,
        long = "leader-election-lease-duration",
        alias = "leader-elect-lease-duration",
        value_name = "DURATION",
        default_value = "15s",
        value_parser = parse_duration,
    )]
    pub lease_duration: Duration,

    /// How long the leader tries to renew before it stops leading
    #[arg(
        id = "leader-election-renew-deadline",
        help_heading = HEADING,
        long = "leader-election-renew-deadline",
        alias = "leader-elect-renew-deadline",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration,
    )]
    pub renew_deadline: Duration,

    /// How long candidates wait between tries
    #[arg(
        id = "leader-election-retry-period",
        help_heading = HEADING,
        long = "leader-election-retry-period",
        alias = "leader-elect-retry-period",
        value_name = "DURATION",
        default_value = "2s",
        value_parser = parse_duration,
    )]
    pub retry_period: Duration,
}

impl Default for LeaderElectionArgs {
    /// What an empty command line gives: off, client-go's timings.
    fn default() -> Self {
        let defaults = LeaderElectionConfig::default();
        Self {
            enabled: false,
            id: None,
            namespace: None,
            identity: None,
            lease_duration: defaults.lease_duration,
            renew_deadline: defaults.renew_deadline,
            retry_period: defaults.retry_period,
        }
    }
}

impl LeaderElectionArgs {
    /// The election's timings as kinformer-leaderelection's config, checked by its rules
    /// ([`LeaderElectionConfig::validate`]), with
    /// [`release_on_cancel`](LeaderElectionConfig::release_on_cancel) on: a leader stopped
    /// by a signal gives the Lease up once its workers have drained, so a standby takes
    /// over at its next retry instead of a lease duration later.
    ///
    /// # Errors
    /// [`Error::LeaderElection`] naming the broken rule (e.g. a lease duration not above
    /// the renew deadline).
    pub fn config(&self) -> Result<LeaderElectionConfig, Error> {
        let config = LeaderElectionConfig {
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
            release_on_cancel: true,
            ..LeaderElectionConfig::default()
        };
        config.validate()?;
        Ok(config)
    }

    /// This replica's identity: `--leader-election-identity`, else `<hostname>_<16 random
    /// hex digits>` (a restarted process is a new candidate, as controller-runtime's
    /// `<hostname>_<uuid>`; in a pod the hostname is the pod's name).
    pub fn identity(&self) -> String {
        if let Some(identity) = &self.identity {
            return identity.clone();
        }
        let host = hostname::get()
            .ok()
            .and_then(|h| h.into_string().ok())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        format!("{host}_{:016x}", fastrand::u64(..))
    }

    /// With `--leader-elect`, a [`LeaderElectorBuilder`] on the Lease
    /// `--leader-election-namespace`/`--leader-election-id` (defaulting to `namespace` and
    /// `default_id`) with [`config`](Self::config), for callbacks or metrics before
    /// `build()`; `None` without `--leader-elect`.
    ///
    /// # Errors
    /// As [`config`](Self::config).
    pub fn elector_builder(
        &self,
        client: kube::Client,
        namespace: &str,
        default_id: &str,
    ) -> Result<Option<LeaderElectorBuilder>, Error> {
        if !self.enabled {
            return Ok(None);
        }
        let config = self.config()?;
        let lock = LeaseLock::new(
            client,
            self.namespace.as_deref().unwrap_or(namespace),
            self.id.as_deref().unwrap_or(default_id),
            self.identity(),
        );
        Ok(Some(LeaderElector::builder(lock).config(config)))
    }

    /// [`elector_builder`](Self::elector_builder), built: the elector for
    /// `Controller::run_elected`, or `None` without `--leader-elect`.
    ///
    /// ```no_run
    /// # async fn run(args: kinformer_runtime::Args) -> Result<(), kinformer_runtime::Error> {
    /// let config = args.client.config().await?;
    /// let client = args.client.client().await?;
    /// if let Some(elector) = args.leader_election.elector(client, &config.default_namespace, "my-controller")? {
    ///     // controller.run_elected(&elector, reconcile, context, shutdown).await?
    /// #   let _ = elector;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`config`](Self::config).
    pub fn elector(
        &self,
        client: kube::Client,
        namespace: &str,
        default_id: &str,
    ) -> Result<Option<LeaderElector>, Error> {
        self.elector_builder(client, namespace, default_id)?
            .map(LeaderElectorBuilder::build)
            .transpose()
            .map_err(Error::from)
    }
}
