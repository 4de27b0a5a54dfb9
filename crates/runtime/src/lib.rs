//! What every controller binary writes by hand around its controller: command-line flags
//! for the Kubernetes client, leader election, the admin server and the logs, and a
//! shutdown that drains on the first SIGTERM and exits on the second.
//!
//! - **Flags** (feature `cli`): each group a `#[derive(clap::Args)]` struct that a program
//!   `#[command(flatten)]`s into its own clap parser, with a method that builds what it
//!   configures:
//!   - [`ClientArgs`]: `--kubeconfig`, `--context`, `--cluster`, `--user`, `--namespace`,
//!     `--kube-api-qps` (5), `--kube-api-burst` (10) → a `kube::Config` and a rate-limited
//!     `kube::Client` (kinformer-client's `ClientBuilder`);
//!   - [`LeaderElectionArgs`]: `--leader-elect`, `--leader-election-id`,
//!     `--leader-election-namespace`, `--leader-election-lease-duration` (15s),
//!     `--leader-election-renew-deadline` (10s), `--leader-election-retry-period` (2s) →
//!     kinformer-leaderelection's config and a `LeaderElector` for `Controller::run_elected`;
//!   - [`AdminArgs`]: `--admin-addr` / `--metrics-bind-address` (`0.0.0.0:8080`) → the
//!     bound `/metrics` `/healthz` `/readyz` server of kinformer-controller;
//!   - [`LogArgs`]: `--log-format plain|json`, `--log-level` (`RUST_LOG`, else `info`) → the
//!     global tracing subscriber;
//!   - [`Args`]: all four.
//! - **Signals** (feature `signal`): [`shutdown::signals`] returns a `CancellationToken`
//!   cancelled on the first SIGTERM or SIGINT; a second signal exits the process (130 after
//!   SIGINT, 143 after SIGTERM). Given to `Controller::run`, the first signal drains the
//!   queue; the second does not wait.
//!
//! # A controller's `main`
//!
//! ```no_run
//! use clap::Parser;
//! use kinformer_runtime::Args;
//!
//! /// Reconciles pods.
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     runtime: Args,
//!     /// Reconciles at once
//!     #[arg(long, default_value_t = 2)]
//!     workers: usize,
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let cli = Cli::parse();
//!     cli.runtime.log.init()?;
//!     let shutdown = kinformer_runtime::shutdown::signals()?;
//!
//!     let config = cli.runtime.client.config().await?;
//!     let namespace = config.default_namespace.clone();
//!     // For informers: kube's retry off, the reflector backs off by itself.
//!     let client = cli.runtime.client.client_builder(config).reflector_connection().build()?;
//!
//!     let server = cli.runtime.admin.bind().await?;
//!     tokio::spawn(server.run(shutdown.clone()));
//!
//!     let elector = cli.runtime.leader_election.elector(client.clone(), &namespace, "pod-controller")?;
//!     // ... the factory, its informers and the controller, then
//!     // `controller.run(reconcile, context, shutdown)` (or `run_elected(&elector, ...)`):
//!     // the first SIGTERM drains the queue and `run` returns.
//!     # let _ = (elector, client, cli.workers);
//!     shutdown.cancelled().await;
//!     Ok(())
//! }
//! ```
//!
//! `--help` then lists the program's flags and these, under the headings "Kubernetes
//! client", "Leader election", "Admin server" and "Logs". The workspace's
//! `examples/cli_controller.rs` is that program in full.
//!
//! # Differences from kubert
//!
//! This is Linkerd's kubert (`kubert::runtime`, `ClientArgs`, `shutdown`, `LogFormat`) for
//! kinformer's pieces, with these differences:
//!
//! - No runtime object: each flag group builds its piece, and the program wires them (the
//!   token goes to `Controller::run` and `Server::run`).
//! - The client has client-go's client-side rate limit (`--kube-api-qps`,
//!   `--kube-api-burst`) and `--namespace`; no impersonation flags (`--as`, `--as-group`).
//! - The first signal cancels a token rather than waiting for drain watches to be dropped;
//!   the second exits with 128 plus the signal's number instead of returning an error.
//! - Leader election flags, with controller-runtime's names and client-go's defaults.
//!
//! # Features
//!
//! Both on by default: `cli` (the flags: clap, kube, kinformer-client,
//! kinformer-leaderelection, kinformer-admin's `server`, tracing-subscriber with
//! `json`) and `signal` (the [`shutdown`] module: Tokio's `signal`).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

#[cfg(feature = "cli")]
mod admin;
#[cfg(feature = "cli")]
mod client;
#[cfg(feature = "cli")]
mod duration;
#[cfg(feature = "cli")]
mod leader_election;
#[cfg(feature = "cli")]
mod log;
#[cfg(feature = "signal")]
pub mod shutdown;

#[cfg(feature = "cli")]
pub use admin::{AdminArgs, DEFAULT_ADMIN_ADDR};
#[cfg(feature = "cli")]
pub use client::ClientArgs;
#[cfg(feature = "cli")]
pub use duration::{ParseDurationError, parse_duration};
#[cfg(feature = "cli")]
pub use leader_election::LeaderElectionArgs;
#[cfg(feature = "cli")]
pub use log::{LogArgs, LogFormat};

/// Every flag group, for a program that wants them all: `#[command(flatten)] runtime:
/// Args`. The groups are fields, each usable as its own type says. It is a
/// [`clap::Parser`] too (`Args::parse()`), for a program with no flags of its own.
///
/// ```
/// use clap::Parser;
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     runtime: kinformer_runtime::Args,
/// }
///
/// let cli = Cli::try_parse_from(["prog", "--namespace", "team-a", "--leader-elect"])?;
/// assert_eq!(cli.runtime.client.namespace.as_deref(), Some("team-a"));
/// assert!(cli.runtime.leader_election.enabled);
/// assert_eq!(cli.runtime.admin.admin_addr.port(), 8080);
/// # Ok::<(), clap::Error>(())
/// ```
#[cfg(feature = "cli")]
#[derive(Clone, Debug, Default, PartialEq, clap::Parser)]
pub struct Args {
    /// `--kubeconfig`, `--context`, `--cluster`, `--user`, `--namespace`, `--kube-api-qps`,
    /// `--kube-api-burst`.
    #[command(flatten)]
    pub client: ClientArgs,
    /// `--leader-elect` and its timings.
    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,
    /// `--admin-addr`.
    #[command(flatten)]
    pub admin: AdminArgs,
    /// `--log-format`, `--log-level`.
    #[command(flatten)]
    pub log: LogArgs,
}

/// What can go wrong turning flags into a program's pieces, or watching signals.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The kubeconfig (`--kubeconfig`'s, else `KUBECONFIG`'s or `~/.kube/config`) could
    /// not be read, or lacks the context or cluster named.
    #[cfg(feature = "cli")]
    #[error("cannot load the Kubernetes config from {}", kubeconfig_path(path.as_deref()))]
    Kubeconfig {
        /// `--kubeconfig`, when given.
        path: Option<std::path::PathBuf>,
        /// kube's error.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig is no kubeconfig in YAML. Only where is said: the parser's message
    /// quotes the file, which holds credentials.
    #[cfg(feature = "cli")]
    #[error(
        "{} is not a kubeconfig in YAML{} (its text is not shown: it may hold credentials)",
        kubeconfig_path(path.as_deref()),
        location.map(|(line, column)| format!(" at line {line}, column {column}")).unwrap_or_default()
    )]
    KubeconfigSyntax {
        /// `--kubeconfig`, when given.
        path: Option<std::path::PathBuf>,
        /// The line and column of the error, when the parser said.
        location: Option<(u64, u64)>,
    },
    /// `--user` names a user the kubeconfig does not have.
    #[cfg(feature = "cli")]
    #[error("{} has no user {user:?}", kubeconfig_path(path.as_deref()))]
    KubeconfigUser {
        /// `--kubeconfig`, when given.
        path: Option<std::path::PathBuf>,
        /// `--user`.
        user: String,
    },
    /// Without flags naming a kubeconfig: neither a usable kubeconfig nor an in-cluster
    /// service account.
    #[cfg(feature = "cli")]
    #[error(
        "no Kubernetes config: no usable kubeconfig (KUBECONFIG, ~/.kube/config) and no in-cluster service account ({in_cluster})"
    )]
    NoConfig {
        /// Why the kubeconfig did not load.
        #[source]
        kubeconfig: Box<Error>,
        /// Why the in-cluster config did not load.
        in_cluster: kube::config::InClusterError,
    },
    /// The client could not be built (its rate limit, or kube's client from the config).
    #[cfg(feature = "cli")]
    #[error("cannot build the Kubernetes client")]
    Client(#[from] kinformer_client::Error),
    /// Leader election's timings break one of its rules, or the elector could not be built.
    #[cfg(feature = "cli")]
    #[error("invalid leader election settings")]
    LeaderElection(#[from] kinformer_leaderelection::Error),
    /// The admin server could not bind its address.
    #[cfg(feature = "cli")]
    #[error("cannot bind the admin server to {addr}")]
    Bind {
        /// `--admin-addr`.
        addr: std::net::SocketAddr,
        /// The socket's error.
        #[source]
        source: std::io::Error,
    },
    /// The log filter does not parse.
    #[cfg(feature = "cli")]
    #[error("invalid log filter {directives:?} (from {from})")]
    LogFilter {
        /// The filter.
        directives: String,
        /// Where it came from: `--log-level` or `RUST_LOG`.
        from: &'static str,
        /// tracing-subscriber's error.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// A global tracing subscriber is installed already.
    #[cfg(feature = "cli")]
    #[error("cannot install the log subscriber")]
    LogInit {
        /// tracing-subscriber's error.
        #[source]
        source: tracing_subscriber::util::TryInitError,
    },
    /// Signals are watched by a task: there must be a Tokio runtime.
    #[cfg(feature = "signal")]
    #[error("no Tokio runtime to watch signals on (call it within the program's runtime)")]
    NoRuntime,
    /// A signal handler could not be registered.
    #[cfg(feature = "signal")]
    #[error("cannot register a handler for {signal}")]
    Signal {
        /// The signal.
        signal: shutdown::Signal,
        /// The OS' error.
        #[source]
        source: std::io::Error,
    },
}

/// `--kubeconfig`'s path for a message, or what stands for the default.
#[cfg(feature = "cli")]
fn kubeconfig_path(path: Option<&std::path::Path>) -> String {
    path.map_or_else(
        || "the kubeconfig (KUBECONFIG or ~/.kube/config)".into(),
        |path| path.display().to_string(),
    )
}

#[cfg(all(test, feature = "cli"))]
mod tests;
