//! What the examples share: where the cluster comes from.
//!
//! `--kubeconfig PATH` (optionally `--context NAME`) connects to that cluster; without it
//! the example starts the project's local control plane (a real etcd and kube-apiserver,
//! built by `cargo xtask controlplane build`) and stops it on exit.

#![allow(dead_code, unreachable_pub)]

use std::error::Error;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kinformer::leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseLock};
use kinformer::reflector::reflector_client;
use kinformer_testenv::ControlPlane;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A boxed error, for examples.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// A connection to a cluster; owns the local control plane when one was started.
pub struct Cluster {
    /// A client for informers (kube's own retries off: the reflector backs off itself).
    pub client: kube::Client,
    /// Where it points, for the first line of output.
    pub description: String,
    /// Kept alive for the program's lifetime; dropped last.
    _local: Option<ControlPlane>,
}

/// The command line every example understands, plus its own flags.
#[derive(Debug, Default)]
pub struct Args {
    /// `--kubeconfig PATH`
    pub kubeconfig: Option<PathBuf>,
    /// `--context NAME`
    pub context: Option<String>,
    /// `--namespace NS`
    pub namespace: Option<String>,
    /// Other flags (`--demo`, ...).
    pub flags: Vec<String>,
}

impl Args {
    /// Parses `std::env::args()`.
    pub fn parse() -> Result<Self, BoxError> {
        Self::parse_from(std::env::args().skip(1))
    }

    /// Parses the arguments after the program name.
    pub fn parse_from(args: impl IntoIterator<Item = String>) -> Result<Self, BoxError> {
        let mut out = Self::default();
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let mut value = |name: &str| {
                it.next()
                    .ok_or_else(|| BoxError::from(format!("{name} needs a value")))
            };
            match arg.as_str() {
                "--kubeconfig" => out.kubeconfig = Some(value("--kubeconfig")?.into()),
                "--context" => out.context = Some(value("--context")?),
                "--namespace" | "-n" => out.namespace = Some(value("--namespace")?),
                _ if arg.starts_with("--") => out.flags.push(arg),
                _ => return Err(format!("unexpected argument {arg:?}").into()),
            }
        }
        Ok(out)
    }

    /// Whether `flag` (e.g. `--demo`) was given.
    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// The value of `--name=value`, if given.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
    }

    /// With `--leader-elect`: an elector on the Lease `lease` in `namespace`, with
    /// controller-runtime's flags for the timings (`--leader-elect-lease-duration=15s`,
    /// `--leader-elect-renew-deadline=10s`, `--leader-elect-retry-period=2s`, client-go's
    /// defaults) and `--leader-elect-identity=ID` (default: host name and process id). It
    /// releases the lease on a clean stop, so a standby takes over at once.
    pub fn leader_election(
        &self,
        client: &kube::Client,
        namespace: &str,
        lease: &str,
    ) -> Result<Option<LeaderElector>, BoxError> {
        if !self.has("--leader-elect") {
            return Ok(None);
        }
        let mut config = LeaderElectionConfig {
            release_on_cancel: true,
            ..LeaderElectionConfig::default()
        };
        for (flag, field) in [
            ("--leader-elect-lease-duration", &mut config.lease_duration),
            ("--leader-elect-renew-deadline", &mut config.renew_deadline),
            ("--leader-elect-retry-period", &mut config.retry_period),
        ] {
            if let Some(value) = self.value(flag) {
                *field = parse_duration(value).ok_or_else(|| {
                    format!("{flag}: {value:?} is not a duration like 15s or 500ms")
                })?;
            }
        }
        let identity = self.value("--leader-elect-identity").map_or_else(
            || {
                let host = std::env::var("HOSTNAME")
                    .ok()
                    .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
                    .map(|h| h.trim().to_owned())
                    .filter(|h| !h.is_empty())
                    .unwrap_or_else(|| "localhost".into());
                format!("{host}_{}", std::process::id())
            },
            str::to_owned,
        );
        let lock = LeaseLock::new(client.clone(), namespace, lease, identity);
        let elector = LeaderElector::builder(lock)
            .config(config)
            .callbacks(PrintTransitions)
            .build()?;
        Ok(Some(elector))
    }
}

/// Prints each change of leadership on stdout.
struct PrintTransitions;

impl LeaderCallbacks for PrintTransitions {
    fn started_leading(&self, _deadline: std::time::Instant) {
        println!("leader election: started leading");
    }
    fn stopped_leading(&self) {
        println!("leader election: stopped leading");
    }
    fn new_leader(&self, identity: &str) {
        println!("leader election: the leader is {identity:?}");
    }
}

/// `15s`, `500ms`, `1m` or a number of seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let (number, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((s, "s"), |i| s.split_at(i));
    let n: f64 = number.parse().ok()?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(secs).ok()
}

/// What every example's `main` does first: says when it starts the local control plane,
/// connects, then turns logs on (after connecting: the local control plane's readiness
/// polls are not worth a log line) and says where it is connected.
pub async fn start(args: &Args) -> Result<Cluster, BoxError> {
    if args.kubeconfig.is_none() {
        println!("starting the local control plane (etcd + kube-apiserver) ...");
    }
    let cluster = connect(args).await?;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    println!("connected to {}", cluster.description);
    Ok(cluster)
}

/// The sorted names of `objects`.
pub fn names<T: kinformer::core::MetaObject>(objects: Vec<std::sync::Arc<T>>) -> Vec<String> {
    let mut names: Vec<String> = objects
        .iter()
        .filter_map(|p| p.object_name().map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// Polls `done` every 10 ms; an error after 30 s.
pub async fn wait_for(what: &str, mut done: impl FnMut() -> bool) -> Result<(), BoxError> {
    let start = std::time::Instant::now();
    while !done() {
        if start.elapsed() > std::time::Duration::from_secs(30) {
            return Err(format!("timed out waiting for {what}").into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Polls the async `done` every 50 ms; an error after 30 s.
pub async fn wait_for_async<F, Fut>(what: &str, mut done: F) -> Result<(), BoxError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while !done().await {
        if start.elapsed() > std::time::Duration::from_secs(30) {
            return Err(format!("timed out waiting for {what}").into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The body of `GET path` on `addr` (plain HTTP/1.1), whatever the status.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> Result<String, BoxError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: example\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await?;
    Ok(raw
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default())
}

/// Creates `namespace` unless it exists. A fresh API server creates `default` shortly
/// after it reports ready, so a program that starts with one should not assume it.
pub async fn ensure_namespace(client: &kube::Client, namespace: &str) -> Result<(), BoxError> {
    use k8s_openapi::api::core::v1::Namespace;
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    if namespaces.get_opt(namespace).await?.is_some() {
        return Ok(());
    }
    let mut ns = Namespace::default();
    ns.metadata.name = Some(namespace.to_owned());
    match namespaces
        .create(&kube::api::PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Connects as `args` say: the kubeconfig's cluster, or a local control plane.
pub async fn connect(args: &Args) -> Result<Cluster, BoxError> {
    if let Some(path) = &args.kubeconfig {
        let kubeconfig = Kubeconfig::read_from(path)?;
        let options = KubeConfigOptions {
            context: args.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?;
        let description = format!("{} (from {})", config.cluster_url, path.display());
        return Ok(Cluster {
            client: reflector_client(config)?,
            description,
            _local: None,
        });
    }
    let local = ControlPlane::start().await?;
    let description = format!(
        "the local control plane at {} (kubeconfig: {})",
        local.server_url(),
        local.kubeconfig().display()
    );
    Ok(Cluster {
        client: reflector_client(local.admin_config())?,
        description,
        _local: Some(local),
    })
}

/// Lines an example prints, kept for its test.
#[derive(Clone, Default)]
pub struct Output(Arc<Mutex<Vec<String>>>, bool);

impl Output {
    /// Prints and keeps.
    pub fn stdout() -> Self {
        Self(Arc::default(), true)
    }
    /// Only keeps.
    pub fn capture() -> Self {
        Self::default()
    }
    /// One line.
    pub fn line(&self, line: String) {
        if self.1 {
            #[allow(clippy::print_stdout, reason = "an example prints its lines")]
            {
                println!("{line}");
            }
        }
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }
    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
