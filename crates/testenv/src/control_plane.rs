//! The control plane's lifecycle: start, the one shared per test binary, stopping and
//! restarting the API server, and teardown on drop.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::binaries::find_binary_dir;
use crate::clients::Clients;
use crate::error::Error;
use crate::process::Process;
use crate::users::{self, Tokens};
use crate::{Options, apiserver, etcd, kubeconfig, workdir};

/// A running etcd + kube-apiserver. See the [crate docs](crate).
pub struct ControlPlane {
    // Field order is drop order: the API server goes before etcd, both before the dir.
    apiserver: Mutex<Option<Process>>,
    _etcd: Process,
    apiserver_bin: PathBuf,
    apiserver_args: Vec<String>,
    /// Whether the API server runs (or, stopped, will run) its watch cache.
    watch_cache: AtomicBool,
    api_addr: SocketAddr,
    etcd_url: String,
    kubeconfig: PathBuf,
    clients: Clients,
    /// Kept to write kubeconfigs for proxies; never printed.
    tokens: Tokens,
    options: Options,
    dir: tempfile::TempDir,
}

impl fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Deliberately leaves out the configs: they hold the users' tokens.
        f.debug_struct("ControlPlane")
            .field("server", &self.server_url())
            .field("etcd", &self.etcd_url)
            .field("dir", &self.dir.path())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

static SHARED: tokio::sync::OnceCell<ControlPlane> = tokio::sync::OnceCell::const_new();

impl ControlPlane {
    /// Starts a control plane with default [`Options`].
    ///
    /// # Errors
    /// [`Error::NotBuilt`] when the binaries are in none of the places
    /// [`binary_dir`](crate::binary_dir) looks in; [`Error::NotReady`] (with the
    /// end of the process's log) when a process does not come up.
    pub async fn start() -> Result<Self, Error> {
        Self::start_with(Options::default()).await
    }

    /// The control plane shared by every test of this test binary, started on first use.
    /// It lives until the process exits. Isolate tests by namespace, and do not stop its
    /// API server: start an own [`ControlPlane`] for that.
    ///
    /// # Errors
    /// As [`ControlPlane::start`].
    pub async fn shared() -> Result<&'static Self, Error> {
        SHARED.get_or_try_init(Self::start).await
    }

    /// Starts a control plane with these options.
    ///
    /// # Errors
    /// As [`ControlPlane::start`].
    pub async fn start_with(options: Options) -> Result<Self, Error> {
        let bins = find_binary_dir()?;
        let etcd_bin = bins.join("etcd");
        let apiserver_bin = bins.join("kube-apiserver");
        let dir = workdir::create()?;
        let d = dir.path();

        let tokens = Tokens::write(d)?;
        apiserver::write_service_account_key(d)?;
        let (etcd, etcd_url) = etcd::start(&etcd_bin, d).await?;
        let (apiserver, api_addr, apiserver_args) =
            apiserver::start(&apiserver_bin, d, &etcd_url, &options).await?;
        let kubeconfig = kubeconfig::write(
            d,
            "kubeconfig",
            api_addr,
            &apiserver::serving_cert(d),
            &tokens,
        )?;
        let clients = Clients::load(&kubeconfig).await?;
        let cp = Self {
            apiserver: Mutex::new(Some(apiserver)),
            _etcd: etcd,
            apiserver_bin,
            apiserver_args,
            watch_cache: AtomicBool::new(options.watch_cache),
            api_addr,
            etcd_url,
            kubeconfig,
            clients,
            tokens,
            options,
            dir,
        };
        cp.wait_apiserver_ready().await?;
        users::grant_restricted_user(cp.client()?).await?;
        tracing::info!(server = %cp.server_url(), dir = %cp.dir.path().display(), "control plane ready");
        Ok(cp)
    }

    /// The API server's URL, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> String {
        format!("https://{}", self.api_addr)
    }

    /// The API server's address.
    pub fn api_addr(&self) -> SocketAddr {
        self.api_addr
    }

    /// etcd's client URL, `http://127.0.0.1:<port>`.
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// The kubeconfig testenv wrote: contexts `admin` (current) and `restricted`.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The temp dir holding etcd's data, certificates and the processes' logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The options this control plane was started with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Whether the API server runs its watch cache now (or, while stopped, will when
    /// started again): [`Options::watch_cache`] until
    /// [`start_apiserver_with_watch_cache`](Self::start_apiserver_with_watch_cache) changes it.
    pub fn watch_cache(&self) -> bool {
        self.watch_cache.load(Ordering::SeqCst)
    }

    /// Writes a kubeconfig like [`kubeconfig`](Self::kubeconfig)'s for a server at `addr`
    /// (a proxy in front of the API server), named `file_name` in the temp dir.
    pub(crate) fn write_kubeconfig(
        &self,
        file_name: &str,
        addr: SocketAddr,
    ) -> Result<PathBuf, Error> {
        kubeconfig::write(
            self.dir.path(),
            file_name,
            addr,
            &apiserver::serving_cert(self.dir.path()),
            &self.tokens,
        )
    }

    /// The users' client configs, straight to the API server.
    pub(crate) fn clients(&self) -> &Clients {
        &self.clients
    }

    /// The API server's process slot: `None` while it is stopped. A panic while it was
    /// held leaves nothing half-done, so a poisoned lock is used as it is.
    fn apiserver(&self) -> MutexGuard<'_, Option<Process>> {
        self.apiserver
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Kills the API server (as a crash would). etcd keeps running.
    ///
    /// # Errors
    /// [`Error::State`] when it is not running.
    pub fn stop_apiserver(&self) -> Result<(), Error> {
        let mut slot = self.apiserver();
        let mut p = slot
            .take()
            .ok_or(Error::State("the API server is not running"))?;
        p.kill();
        tracing::info!("API server stopped");
        Ok(())
    }

    /// Starts the API server again on the same port and etcd, with the flags it last ran
    /// with, and waits until it is ready.
    ///
    /// # Errors
    /// [`Error::State`] when it is running; [`Error::NotReady`] when it does not come up.
    pub async fn start_apiserver(&self) -> Result<(), Error> {
        self.start_apiserver_with_watch_cache(self.watch_cache())
            .await
    }

    /// As [`start_apiserver`](Self::start_apiserver), with the watch cache on or off: a
    /// restart can switch it, so one control plane serves watches both from the cache and
    /// from etcd. Later restarts keep the choice.
    ///
    /// # Errors
    /// As [`start_apiserver`](Self::start_apiserver).
    pub async fn start_apiserver_with_watch_cache(&self, on: bool) -> Result<(), Error> {
        {
            let mut slot = self.apiserver();
            if slot.is_some() {
                return Err(Error::State("the API server is already running"));
            }
            let args = apiserver::with_watch_cache(&self.apiserver_args, on);
            *slot = Some(apiserver::spawn(
                &self.apiserver_bin,
                &args,
                self.dir.path(),
            )?);
            self.watch_cache.store(on, Ordering::SeqCst);
        }
        self.wait_apiserver_ready().await?;
        tracing::info!("API server restarted");
        Ok(())
    }

    /// Whether the API server process is running.
    pub fn apiserver_running(&self) -> bool {
        let mut slot = self.apiserver();
        slot.as_mut().is_some_and(|p| p.exited().is_none())
    }

    /// Compacts etcd up to its current revision and returns that revision. Watches and
    /// lists from an older resourceVersion that reach etcd then answer `410 Gone`; with
    /// the watch cache on, the API server may still serve them from memory (see the
    /// crate docs).
    ///
    /// # Errors
    /// When etcd does not answer.
    pub async fn compact_etcd(&self) -> Result<i64, Error> {
        let rev = etcd::compact(&self.etcd_url).await?;
        tracing::info!(revision = rev, "etcd compacted");
        Ok(rev)
    }

    /// etcd's current revision: the newest resourceVersion in the cluster.
    ///
    /// # Errors
    /// When etcd does not answer.
    pub async fn etcd_revision(&self) -> Result<i64, Error> {
        etcd::revision(&self.etcd_url).await
    }

    async fn wait_apiserver_ready(&self) -> Result<(), Error> {
        let client = self.client()?;
        let start = Instant::now();
        let mut last = String::from("no answer yet");
        loop {
            {
                let mut slot = self.apiserver();
                let p = slot
                    .as_mut()
                    .ok_or(Error::State("the API server was stopped while starting"))?;
                if p.exited().is_some() || start.elapsed() > apiserver::READY_TIMEOUT {
                    return Err(p.not_ready(format!("/readyz: {last}")));
                }
            }
            let req = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|_| Error::State("bad /readyz request"))?;
            match client.request_text(req).await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                Ok(body) => last = body,
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
