//! [`AdminArgs`]: where `/metrics`, `/healthz` and `/readyz` listen.

use std::net::SocketAddr;

use kinformer_admin::server::Server;

use crate::Error;

/// Where `--help` lists these flags.
const HEADING: &str = "Admin server";

/// The admin server's flag: `--admin-addr ADDR` (alias controller-runtime's
/// `--metrics-bind-address`), default `0.0.0.0:8080`, where kinformer-admin's
/// [`Server`] serves `/metrics`, `/healthz` and `/readyz`.
///
/// ```no_run
/// use kinformer_runtime::AdminArgs;
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run(admin: AdminArgs, shutdown: CancellationToken) -> Result<(), kinformer_runtime::Error> {
/// kinformer_admin::metrics::Metrics::install();
/// let server = admin.bind().await?.ready_when("informers", || true);
/// tokio::spawn(server.run(shutdown));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct AdminArgs {
    /// Where /metrics, /healthz and /readyz listen (port 0: any free port)
    #[arg(
        id = "admin-addr",
        help_heading = HEADING,
        long = "admin-addr",
        alias = "metrics-bind-address",
        value_name = "ADDR",
        default_value = DEFAULT_ADMIN_ADDR,
    )]
    pub admin_addr: SocketAddr,
}

/// `--admin-addr`'s default: every interface, port 8080 (controller-runtime's metrics port).
pub const DEFAULT_ADMIN_ADDR: &str = "0.0.0.0:8080";

impl Default for AdminArgs {
    /// What an empty command line gives: `0.0.0.0:8080`.
    fn default() -> Self {
        Self {
            admin_addr: SocketAddr::from(([0, 0, 0, 0], 8080)),
        }
    }
}

impl AdminArgs {
    /// Binds `--admin-addr`; add checks (`ready_when`, `healthy_when`) and
    /// [`run`](Server::run) it with the shutdown token. `/metrics` serves kinformer's
    /// installed metrics (`Metrics::install`), empty until then.
    ///
    /// # Errors
    /// [`Error::Bind`] when the address cannot be bound (in use, not local, no permission).
    pub async fn bind(&self) -> Result<Server, Error> {
        Server::bind(self.admin_addr)
            .await
            .map_err(|source| Error::Bind {
                addr: self.admin_addr,
                source,
            })
    }
}
