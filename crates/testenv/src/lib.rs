//! A real etcd + kube-apiserver on loopback for kinformer's tests, demo and benchmarks.
//!
//! Both binaries are built from the Go module proxy by `cargo xtask controlplane build`
//! (into `target/controlplane/bin`); no container engine or prebuilt Kubernetes is
//! needed. [`ControlPlane::start`] runs them on free loopback ports in a temp dir, with
//! TLS (the API server's self-signed certificate, trusted by the clients) and RBAC on,
//! and hands out [`kube::Client`]s for two users:
//!
//! - an admin (in `system:masters`), from [`ControlPlane::client`];
//! - a restricted user who may only list and watch pods, from
//!   [`ControlPlane::restricted_client`], for RBAC failure tests.
//!
//! Faults a test can inject: [`ControlPlane::stop_apiserver`] /
//! [`ControlPlane::start_apiserver`] (same etcd, same port); a [`ApiProxy`] in front of
//! the API server whose connections [`ApiProxy::partition`] cuts while the test keeps
//! writing through the direct client; [`ControlPlane::compact_etcd`], which makes old
//! resourceVersions answer `410 Gone`.
//!
//! One control plane can serve every test of a test binary ([`ControlPlane::shared`]);
//! tests then isolate themselves by namespace ([`ControlPlane::create_namespace`]). A
//! test that stops the API server or needs the watch cache off starts its own.
//!
//! # The watch cache and `410 Gone`
//!
//! With the API server's watch cache on (the default, as in real clusters) a watch from
//! an old resourceVersion is served from the cache, which keeps a window of recent
//! events whatever etcd compacted: compaction alone does not make such a watch fail.
//! For a deterministic `410`, start the control plane with
//! [`Options::watch_cache`]`(false)`: every watch then goes to etcd, and after
//! [`ControlPlane::compact_etcd`] any resourceVersion older than the compaction is gone.
//! (Such a control plane still serves streaming WatchList on 1.36; for a server that
//! refuses it, add `--feature-gates=WatchList=false` with [`Options::apiserver_arg`]: it
//! answers 422, handy for testing the fallback.)
//!
//! # Teardown
//!
//! Dropping a [`ControlPlane`] kills both processes and deletes the temp dir, also when
//! a test panics. If the test binary dies without unwinding, the processes still exit
//! (they watch a pipe from this process), and the next start removes temp dirs left by
//! dead processes.
//!
//! # Example
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer_testenv::ControlPlane;
//! use kube::Api;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let cp = ControlPlane::shared().await?;
//! let ns = cp.create_namespace("example").await?;
//! let pods: Api<Pod> = Api::namespaced(cp.client()?, &ns);
//! assert!(pods.list(&Default::default()).await?.items.is_empty());
//!
//! let proxy = cp.proxy()?;
//! let through_proxy: Api<Pod> = Api::namespaced(proxy.client()?, &ns);
//! proxy.partition(); // requests through the proxy now fail ...
//! proxy.heal(); // ... and work again
//! # drop(through_proxy);
//! # Ok(())
//! # }
//! ```
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod error;
mod etcd;
mod process;
mod proxy;

use std::fmt;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Container, Namespace, Pod, PodSpec};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

pub use error::Error;
use error::{io, kube_err};
use process::Process;
pub use proxy::TcpProxy;

/// The user name of the admin (member of `system:masters`).
pub const ADMIN_USER: &str = "kinformer-admin";
/// The user name of the restricted user (may only list and watch pods).
pub const RESTRICTED_USER: &str = "kinformer-restricted";

const APISERVER_READY_TIMEOUT: Duration = Duration::from_secs(120);
const ETCD_READY_TIMEOUT: Duration = Duration::from_secs(30);
const START_ATTEMPTS: usize = 3;

/// How to start a [`ControlPlane`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// Whether the API server runs its watch cache (default `true`, as real clusters).
    pub watch_cache: bool,
    /// Extra kube-apiserver flags, appended after testenv's own.
    pub apiserver_args: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            watch_cache: true,
            apiserver_args: Vec::new(),
        }
    }
}

impl Options {
    /// Turns the API server's watch cache on or off (see the crate docs on `410 Gone`).
    #[must_use]
    pub fn watch_cache(mut self, on: bool) -> Self {
        self.watch_cache = on;
        self
    }

    /// Adds a kube-apiserver flag, e.g. `--feature-gates=...`.
    #[must_use]
    pub fn apiserver_arg(mut self, arg: impl Into<String>) -> Self {
        self.apiserver_args.push(arg.into());
        self
    }
}

/// The directory holding the `etcd` and `kube-apiserver` binaries: the
/// `KINFORMER_CONTROLPLANE_BIN` environment variable if set, else
/// `<target dir>/controlplane/bin`, where `cargo xtask controlplane build` puts them.
pub fn binary_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KINFORMER_CONTROLPLANE_BIN") {
        return dir.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // crates/testenv -> the workspace root
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
            manifest
                .ancestors()
                .nth(2)
                .unwrap_or(manifest)
                .join("target")
        });
    target.join("controlplane").join("bin")
}

fn binary(dir: &Path, name: &str) -> Result<PathBuf, Error> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::NotBuilt { path })
    }
}

/// A running etcd + kube-apiserver. See the [crate docs](crate).
pub struct ControlPlane {
    // Field order is drop order: the API server goes before etcd, both before the dir.
    apiserver: Mutex<Option<Process>>,
    _etcd: Process,
    apiserver_bin: PathBuf,
    apiserver_args: Vec<String>,
    api_addr: SocketAddr,
    etcd_url: String,
    kubeconfig: PathBuf,
    admin: Config,
    restricted: Config,
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
    /// [`Error::NotBuilt`] when the binaries are missing; [`Error::NotReady`] (with the
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
        let bins = binary_dir();
        let etcd_bin = binary(&bins, "etcd")?;
        let apiserver_bin = binary(&bins, "kube-apiserver")?;
        let root = std::env::temp_dir().join("kinformer-testenv");
        remove_stale_dirs(&root);
        fs::create_dir_all(&root).map_err(io(format!("creating {}", root.display())))?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-", std::process::id()))
            .tempdir_in(&root)
            .map_err(io("creating the control plane's temp dir"))?;
        let d = dir.path();

        let admin_token = random_hex(16)?;
        let restricted_token = random_hex(16)?;
        write_private(
            &d.join("tokens.csv"),
            &format!(
                "{admin_token},{ADMIN_USER},{ADMIN_USER},\"system:masters\"\n\
                 {restricted_token},{RESTRICTED_USER},{RESTRICTED_USER},\"\"\n"
            ),
        )?;
        let sa_key = rcgen::KeyPair::generate()
            .map_err(|e| Error::Etcd(format!("generating a key: {e}")))?;
        write_private(&d.join("sa.key"), &sa_key.serialize_pem())?;
        write_private(&d.join("sa.pub"), &sa_key.public_key_pem())?;

        let (etcd, etcd_url) = start_etcd(&etcd_bin, d).await?;

        let mut last_err = None;
        for _ in 0..START_ATTEMPTS {
            let api_addr = free_addr()?;
            let apiserver_args = apiserver_args(d, &etcd_url, api_addr, &options);
            let mut apiserver = Process::spawn(
                "kube-apiserver",
                &apiserver_bin,
                &apiserver_args,
                &d.join("kube-apiserver.log"),
            )?;
            let kubeconfig = d.join("kubeconfig");
            let cert = d.join("certs").join("apiserver.crt");
            let start = Instant::now();
            // The API server writes its self-signed certificate before it serves.
            while !cert.is_file() {
                if apiserver.exited().is_some() || start.elapsed() > APISERVER_READY_TIMEOUT {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if !cert.is_file() {
                let err = apiserver.not_ready("it wrote no serving certificate");
                if port_taken(&apiserver) {
                    last_err = Some(err);
                    continue;
                }
                return Err(err);
            }
            write_private(
                &kubeconfig,
                &kubeconfig_yaml(api_addr, &cert, &admin_token, &restricted_token),
            )?;
            let admin = load_config(&kubeconfig, "admin").await?;
            let restricted = load_config(&kubeconfig, "restricted").await?;
            let cp = Self {
                apiserver: Mutex::new(Some(apiserver)),
                _etcd: etcd,
                apiserver_bin,
                apiserver_args,
                api_addr,
                etcd_url,
                kubeconfig,
                admin,
                restricted,
                options,
                dir,
            };
            cp.wait_apiserver_ready().await?;
            cp.grant_restricted_user().await?;
            tracing::info!(server = %cp.server_url(), dir = %cp.dir.path().display(), "control plane ready");
            return Ok(cp);
        }
        Err(last_err.unwrap_or(Error::State("the API server could not bind a port")))
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

    /// A kube client config for the admin, straight to the API server.
    pub fn admin_config(&self) -> Config {
        self.admin.clone()
    }

    /// A client for the admin, straight to the API server. Call it inside a Tokio
    /// runtime; each call makes a new client, so clients never outlive the runtime of
    /// the test that made them.
    ///
    /// # Errors
    /// Outside a Tokio runtime, or when the client cannot be built.
    pub fn client(&self) -> Result<Client, Error> {
        make_client(self.admin.clone())
    }

    /// A kube client config for the restricted user (list and watch pods, nothing else).
    pub fn restricted_config(&self) -> Config {
        self.restricted.clone()
    }

    /// A client for the restricted user (list and watch pods, nothing else).
    ///
    /// # Errors
    /// As [`ControlPlane::client`].
    pub fn restricted_client(&self) -> Result<Client, Error> {
        make_client(self.restricted.clone())
    }

    /// A new TCP proxy in front of the API server, with clients that go through it.
    /// Each proxy is independent, so tests sharing a control plane can partition their
    /// own clients without disturbing others.
    ///
    /// # Errors
    /// When no loopback port can be bound.
    pub fn proxy(&self) -> Result<ApiProxy, Error> {
        let proxy = TcpProxy::start(self.api_addr)?;
        let url: http::Uri = format!("https://{}", proxy.addr())
            .parse()
            .map_err(|_| Error::State("the proxy address is not a valid URL"))?;
        let mut admin = self.admin.clone();
        admin.cluster_url = url.clone();
        let mut restricted = self.restricted.clone();
        restricted.cluster_url = url;
        Ok(ApiProxy {
            proxy,
            admin,
            restricted,
        })
    }

    /// Creates a namespace named `<prefix>-<unique suffix>` and returns its name.
    /// (No namespace controller runs, so namespaces are never deleted.)
    ///
    /// # Errors
    /// When the API server refuses.
    pub async fn create_namespace(&self, prefix: &str) -> Result<String, Error> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let clean: String = prefix
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .take(40)
            .collect();
        let name = format!(
            "{}-{}-{}",
            clean.trim_matches('-'),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            random_hex(2)?
        );
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(self.client()?)
            .create(&PostParams::default(), &ns)
            .await
            .map_err(kube_err(format!("creating namespace {name}")))?;
        Ok(name)
    }

    /// Kills the API server (as a crash would). etcd keeps running.
    ///
    /// # Errors
    /// [`Error::State`] when it is not running.
    pub fn stop_apiserver(&self) -> Result<(), Error> {
        let mut slot = self
            .apiserver
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut p = slot
            .take()
            .ok_or(Error::State("the API server is not running"))?;
        p.kill();
        tracing::info!("API server stopped");
        Ok(())
    }

    /// Starts the API server again on the same port and etcd, and waits until it is ready.
    ///
    /// # Errors
    /// [`Error::State`] when it is running; [`Error::NotReady`] when it does not come up.
    pub async fn start_apiserver(&self) -> Result<(), Error> {
        {
            let mut slot = self
                .apiserver
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if slot.is_some() {
                return Err(Error::State("the API server is already running"));
            }
            let log = self.dir.path().join("kube-apiserver.log");
            *slot = Some(Process::spawn(
                "kube-apiserver",
                &self.apiserver_bin,
                &self.apiserver_args,
                &log,
            )?);
        }
        self.wait_apiserver_ready().await?;
        tracing::info!("API server restarted");
        Ok(())
    }

    /// Whether the API server process is running.
    pub fn apiserver_running(&self) -> bool {
        let mut slot = self
            .apiserver
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
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
                let mut slot = self
                    .apiserver
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let p = slot
                    .as_mut()
                    .ok_or(Error::State("the API server was stopped while starting"))?;
                if p.exited().is_some() || start.elapsed() > APISERVER_READY_TIMEOUT {
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

    async fn grant_restricted_user(&self) -> Result<(), Error> {
        let name = "kinformer-testenv:pod-list-watch";
        let role = ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            rules: Some(vec![PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["pods".into()]),
                verbs: vec!["list".into(), "watch".into()],
                ..Default::default()
            }]),
            ..Default::default()
        };
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "ClusterRole".into(),
                name: name.into(),
            },
            subjects: Some(vec![Subject {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "User".into(),
                name: RESTRICTED_USER.into(),
                ..Default::default()
            }]),
        };
        let client = self.client()?;
        Api::<ClusterRole>::all(client.clone())
            .create(&PostParams::default(), &role)
            .await
            .map_err(kube_err("creating the restricted user's ClusterRole"))?;
        Api::<ClusterRoleBinding>::all(client)
            .create(&PostParams::default(), &binding)
            .await
            .map_err(kube_err(
                "creating the restricted user's ClusterRoleBinding",
            ))?;
        Ok(())
    }
}

/// A TCP proxy in front of the API server with clients that connect through it: the
/// connection of the client under test, which a test can cut. Made by
/// [`ControlPlane::proxy`]; dropping it closes its connections.
#[derive(Debug)]
pub struct ApiProxy {
    proxy: TcpProxy,
    admin: Config,
    restricted: Config,
}

impl ApiProxy {
    /// A client for the admin that goes through this proxy.
    ///
    /// # Errors
    /// As [`ControlPlane::client`].
    pub fn client(&self) -> Result<Client, Error> {
        make_client(self.admin.clone())
    }

    /// A client for the restricted user that goes through this proxy.
    ///
    /// # Errors
    /// As [`ControlPlane::client`].
    pub fn restricted_client(&self) -> Result<Client, Error> {
        make_client(self.restricted.clone())
    }

    /// The admin's client config through this proxy.
    pub fn admin_config(&self) -> Config {
        self.admin.clone()
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

/// A minimal pod the API server accepts (one `busybox` container, label
/// `app=kinformer`). No scheduler runs, so it stays `Pending`.
pub fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("app".to_string(), "kinformer".to_string())].into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some("busybox".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Creates `n` pods named `{prefix}-{i}` through `api`, at most 32 requests in flight,
/// and returns them as the server stored them (in no particular order).
///
/// # Errors
/// The first request the API server refuses.
pub async fn create_pods(api: &Api<Pod>, prefix: &str, n: usize) -> Result<Vec<Pod>, Error> {
    futures::stream::iter(0..n)
        .map(|i| {
            let name = format!("{prefix}-{i}");
            async move {
                api.create(&PostParams::default(), &pod(&name))
                    .await
                    .map_err(kube_err(format!("creating pod {name}")))
            }
        })
        .buffer_unordered(32)
        .try_collect()
        .await
}

fn make_client(config: Config) -> Result<Client, Error> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(Error::State(
            "kube clients must be made inside a Tokio runtime",
        ));
    }
    Client::try_from(config).map_err(kube_err("building a kube client"))
}

async fn load_config(kubeconfig: &Path, context: &str) -> Result<Config, Error> {
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| Error::Kubeconfig(e.to_string()))?;
    let opts = KubeConfigOptions {
        context: Some(context.into()),
        ..Default::default()
    };
    Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|e| Error::Kubeconfig(e.to_string()))
}

async fn start_etcd(bin: &Path, dir: &Path) -> Result<(Process, String), Error> {
    let mut last_err = None;
    for _ in 0..START_ATTEMPTS {
        let client = free_addr()?;
        let peer = free_addr()?;
        let url = format!("http://{client}");
        let args = vec![
            "--name=kinformer".into(),
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls={url}"),
            format!("--advertise-client-urls={url}"),
            format!("--listen-peer-urls=http://{peer}"),
            format!("--initial-advertise-peer-urls=http://{peer}"),
            format!("--initial-cluster=kinformer=http://{peer}"),
            "--unsafe-no-fsync".into(),
            "--watch-progress-notify-interval=5s".into(),
            "--log-level=warn".into(),
        ];
        let mut p = Process::spawn("etcd", bin, &args, &dir.join("etcd.log"))?;
        let start = Instant::now();
        loop {
            if etcd::healthy(&url).await {
                return Ok((p, url));
            }
            if p.exited().is_some() || start.elapsed() > ETCD_READY_TIMEOUT {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let err = p.not_ready("/health did not answer true");
        if !port_taken(&p) {
            return Err(err);
        }
        last_err = Some(err);
        let _ = fs::remove_dir_all(dir.join("etcd"));
    }
    Err(last_err.unwrap_or(Error::State("etcd could not bind a port")))
}

fn apiserver_args(dir: &Path, etcd_url: &str, addr: SocketAddr, options: &Options) -> Vec<String> {
    let mut args = vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--bind-address={}", addr.ip()),
        format!("--advertise-address={}", addr.ip()),
        format!("--secure-port={}", addr.port()),
        format!("--cert-dir={}", dir.join("certs").display()),
        "--endpoint-reconciler-type=none".into(),
        "--service-account-issuer=https://kubernetes.default.svc".into(),
        format!(
            "--service-account-key-file={}",
            dir.join("sa.pub").display()
        ),
        format!(
            "--service-account-signing-key-file={}",
            dir.join("sa.key").display()
        ),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--authorization-mode=RBAC".into(),
        format!("--token-auth-file={}", dir.join("tokens.csv").display()),
        "--disable-admission-plugins=ServiceAccount".into(),
        format!("--watch-cache={}", options.watch_cache),
    ];
    args.extend(options.apiserver_args.iter().cloned());
    args
}

fn kubeconfig_yaml(
    addr: SocketAddr,
    ca: &Path,
    admin_token: &str,
    restricted_token: &str,
) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kinformer-testenv
  cluster:
    server: https://{addr}
    certificate-authority: {ca}
users:
- name: {ADMIN_USER}
  user:
    token: {admin_token}
- name: {RESTRICTED_USER}
  user:
    token: {restricted_token}
contexts:
- name: admin
  context:
    cluster: kinformer-testenv
    user: {ADMIN_USER}
    namespace: default
- name: restricted
  context:
    cluster: kinformer-testenv
    user: {RESTRICTED_USER}
    namespace: default
current-context: admin
",
        ca = ca.display()
    )
}

/// A free port on 127.0.0.1. Another process may take it before ours binds it; the
/// start functions retry when a log says the address was in use.
fn free_addr() -> Result<SocketAddr, Error> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(io("finding a free loopback port"))
}

fn port_taken(p: &Process) -> bool {
    process::log_tail(&p.log, 50).contains("address already in use")
}

fn random_hex(bytes: usize) -> Result<String, Error> {
    let mut buf = vec![0u8; bytes];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(io("reading /dev/urandom"))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes a file only the owner can read: it may hold tokens or keys.
fn write_private(path: &Path, content: &str) -> Result<(), Error> {
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(content.as_bytes()))
        .map_err(io(format!("writing {}", path.display())))
}

/// Removes temp dirs of control planes whose process is gone (a test binary that was
/// killed cannot clean up after itself).
fn remove_stale_dirs(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.split('-').next()) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binary_error_names_the_build_command() {
        let empty = tempfile::tempdir().unwrap();
        let err = binary(empty.path(), "kube-apiserver").unwrap_err();
        assert!(matches!(err, Error::NotBuilt { .. }));
        let msg = err.to_string();
        assert!(msg.contains("cargo xtask controlplane build"), "{msg}");
        assert!(msg.contains("kube-apiserver"), "{msg}");
    }

    #[test]
    fn kubeconfig_has_both_users_and_trusts_the_serving_cert() {
        let yaml = kubeconfig_yaml(
            "127.0.0.1:6443".parse().unwrap(),
            Path::new("/d/apiserver.crt"),
            "A",
            "R",
        );
        let kc = Kubeconfig::from_yaml(&yaml).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("admin"));
        let names: Vec<_> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["admin", "restricted"]);
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(
            cluster.certificate_authority.as_deref(),
            Some("/d/apiserver.crt")
        );
    }

    #[test]
    fn options_builder_sets_watch_cache_and_extra_args() {
        let opts = Options::default().watch_cache(false).apiserver_arg("--v=2");
        assert!(!opts.watch_cache);
        assert_eq!(opts.apiserver_args, ["--v=2"]);
    }

    #[test]
    fn stale_dirs_of_dead_processes_are_removed_and_live_ones_kept() {
        let root = tempfile::tempdir().unwrap();
        let dead = root.path().join("999999999-abc");
        let live = root.path().join(format!("{}-abc", std::process::id()));
        let other = root.path().join("not-a-pid");
        for d in [&dead, &live, &other] {
            fs::create_dir(d).unwrap();
        }
        remove_stale_dirs(root.path());
        assert!(!dead.exists());
        assert!(live.exists());
        assert!(other.exists());
    }

    #[tokio::test]
    #[ignore = "needs the local control plane: cargo xtask test"]
    async fn etcd_exits_by_itself_when_the_parent_pipe_closes() {
        let dir = tempfile::tempdir().unwrap();
        let bins = binary_dir();
        let (mut etcd, _url) = start_etcd(&binary(&bins, "etcd").unwrap(), dir.path())
            .await
            .unwrap();
        // What the kernel does when the test binary dies: the stdin pipe closes.
        etcd.close_stdin();
        let start = Instant::now();
        while etcd.exited().is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "etcd outlived its parent's pipe"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
