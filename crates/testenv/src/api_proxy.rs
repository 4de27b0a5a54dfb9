//! A proxy in front of the API server, with clients that go through it.

use std::path::{Path, PathBuf};

use kube::{Client, Config};

use crate::ControlPlane;
use crate::clients::Clients;
use crate::error::{Error, io};
use crate::proxy::TcpProxy;
use crate::workdir::write_private;

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
    /// When no loopback port can be bound.
    pub fn proxy(&self) -> Result<ApiProxy, Error> {
        let proxy = TcpProxy::start(self.api_addr())?;
        let url: http::Uri = format!("https://{}", proxy.addr())
            .parse()
            .map_err(|_| Error::State("the proxy address is not a valid URL"))?;
        let kubeconfig = self.write_kubeconfig_via(&proxy)?;
        Ok(ApiProxy {
            proxy,
            clients: self.clients().via(url),
            kubeconfig,
        })
    }

    /// The control plane's kubeconfig with the proxy as its server, for processes that
    /// connect through the proxy (same users, same CA: the proxy is on 127.0.0.1 too).
    fn write_kubeconfig_via(&self, proxy: &TcpProxy) -> Result<PathBuf, Error> {
        let direct = std::fs::read_to_string(self.kubeconfig())
            .map_err(io(format!("reading {}", self.kubeconfig().display())))?;
        let via = direct.replace(
            &format!("server: https://{}", self.api_addr()),
            &format!("server: https://{}", proxy.addr()),
        );
        let path = self
            .dir()
            .join(format!("kubeconfig-proxy-{}", proxy.addr().port()));
        write_private(&path, &via)?;
        Ok(path)
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

    /// A kubeconfig like [`ControlPlane::kubeconfig`] whose server is this proxy: for a
    /// process (a client-go program, another binary) whose connections the test cuts. It
    /// lives in the control plane's temp dir.
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
