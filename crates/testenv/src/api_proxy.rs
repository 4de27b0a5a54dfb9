//! A proxy in front of the API server, with clients that go through it.

use std::path::{Path, PathBuf};

use kube::{Client, Config};

use crate::ControlPlane;
use crate::clients::Clients;
use crate::error::Error;
use crate::proxy::TcpProxy;

/// A TCP proxy in front of the API server with clients that connect through it: the
/// connection of the client under test, which a test can cut. Made by
/// [`ControlPlane::proxy`]; dropping it closes its connections.
#[derive(Debug)]
pub struct ApiProxy {
    proxy: TcpProxy,
    clients: Clients,
    kubeconfig: PathBuf,
}

impl ControlPlane {
    /// A new TCP proxy in front of the API server, with clients that go through it.
    /// Each proxy is independent, so tests sharing a control plane can partition their
    /// own clients without disturbing others.
    ///
    /// # Errors
    /// When no loopback port can be bound, or its kubeconfig cannot be written.
    pub fn proxy(&self) -> Result<ApiProxy, Error> {
        let proxy = TcpProxy::start(self.api_addr())?;
        let url: http::Uri = format!("https://{}", proxy.addr())
            .parse()
            .map_err(|_| Error::State("the proxy address is not a valid URL"))?;
        let kubeconfig = self.write_kubeconfig(
            &format!("kubeconfig-proxy-{}", proxy.addr().port()),
            proxy.addr(),
        )?;
        Ok(ApiProxy {
            proxy,
            clients: self.clients().via(url),
            kubeconfig,
        })
    }
}

impl ApiProxy {
    /// A client for the admin that goes through this proxy.
    ///
    /// # Errors
    /// As [`ControlPlane::client`].
    pub fn client(&self) -> Result<Client, Error> {
        self.clients.admin()
    }

    /// A client for the restricted user that goes through this proxy.
    ///
    /// # Errors
    /// As [`ControlPlane::client`].
    pub fn restricted_client(&self) -> Result<Client, Error> {
        self.clients.restricted()
    }

    /// A kubeconfig like [`ControlPlane::kubeconfig`]'s whose server is this proxy: for a
    /// program under test run as its own process (contexts `admin`, the current one, and
    /// `restricted`), whose connections the test cuts. It lives in the control plane's
    /// temp dir.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The admin's client config through this proxy.
    pub fn admin_config(&self) -> Config {
        self.clients.admin_config()
    }

    /// Cuts every connection through the proxy and refuses new ones until
    /// [`ApiProxy::heal`].
    pub fn partition(&self) {
        self.proxy.partition();
    }

    /// Lets connections through again.
    pub fn heal(&self) {
        self.proxy.heal();
    }

    /// The underlying TCP proxy.
    pub fn tcp(&self) -> &TcpProxy {
        &self.proxy
    }
}
