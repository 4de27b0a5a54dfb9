//! kube clients for the two users, straight to the API server or through a proxy.

use std::path::Path;

use kube::{Client, Config};

use crate::ControlPlane;
use crate::error::{Error, kube_err};
use crate::kubeconfig;

/// The admin's and the restricted user's client configs for one server address.
#[derive(Clone, Debug)]
pub(crate) struct Clients {
    admin: Config,
    restricted: Config,
}

impl Clients {
    /// The configs of the kubeconfig's `admin` and `restricted` contexts.
    pub(crate) async fn load(kubeconfig: &Path) -> Result<Self, Error> {
        Ok(Self {
            admin: kubeconfig::load(kubeconfig, "admin").await?,
            restricted: kubeconfig::load(kubeconfig, "restricted").await?,
        })
    }

    /// The same users, connecting to `url` instead (a proxy in front of the server).
    pub(crate) fn via(&self, url: http::Uri) -> Self {
        let mut admin = self.admin.clone();
        admin.cluster_url = url.clone();
        let mut restricted = self.restricted.clone();
        restricted.cluster_url = url;
        Self { admin, restricted }
    }

    pub(crate) fn admin_config(&self) -> Config {
        self.admin.clone()
    }

    pub(crate) fn restricted_config(&self) -> Config {
        self.restricted.clone()
    }

    pub(crate) fn admin(&self) -> Result<Client, Error> {
        make_client(self.admin_config())
    }

    pub(crate) fn restricted(&self) -> Result<Client, Error> {
        make_client(self.restricted_config())
    }
}

fn make_client(config: Config) -> Result<Client, Error> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(Error::State(
            "kube clients must be made inside a Tokio runtime",
        ));
    }
    Client::try_from(config).map_err(kube_err("building a kube client"))
}

impl ControlPlane {
    /// A kube client config for the admin, straight to the API server.
    pub fn admin_config(&self) -> Config {
        self.clients().admin_config()
    }

    /// A client for the admin, straight to the API server. Call it inside a Tokio
    /// runtime; each call makes a new client, so clients never outlive the runtime of
    /// the test that made them.
    ///
    /// # Errors
    /// Outside a Tokio runtime, or when the client cannot be built.
    pub fn client(&self) -> Result<Client, Error> {
        self.clients().admin()
    }

    /// A kube client config for the restricted user (list and watch pods, nothing else).
    pub fn restricted_config(&self) -> Config {
        self.clients().restricted_config()
    }

    /// A client for the restricted user (list and watch pods, nothing else).
    ///
    /// # Errors
    /// As [`ControlPlane::client`].
    pub fn restricted_client(&self) -> Result<Client, Error> {
        self.clients().restricted()
    }
}
